// Change-stream decoding on events shaped as MongoDB's documentation gives them ("Change Events",
// manual v7.0) built with libbson from Extended JSON, and the `$changeStream` round trip against a
// recorded aggregate reply. FerretDB has no change streams: nothing here ran against a server.
#include "connectors/mongodb/mongodb_change_event.h"

#include <gtest/gtest.h>

#include <string>

#include "connectors/mongodb/mongodb_bson.h"

namespace sluice::mongodb {
namespace {

BsonPtr doc(const std::string& extended_json) {
  bson_error_t err;
  BsonPtr d(bson_new_from_json(reinterpret_cast<const uint8_t*>(extended_json.data()),
                               static_cast<ssize_t>(extended_json.size()), &err));
  EXPECT_TRUE(d) << err.message << " in " << extended_json;
  return d;
}

const std::string kToken = R"({"_data":"8262A3F4C6000000012B022C0100296E5A1004"})";
const std::string kNs = R"("ns":{"db":"engineering","coll":"users"})";
const std::string kClock =
    R"("clusterTime":{"$timestamp":{"t":1654870214,"i":1}},"wallTime":{"$date":"2022-06-10T14:10:14.000Z"})";
const std::string kKey = R"("documentKey":{"_id":{"$oid":"599af247bb69cd89961c986d"}})";

std::string event(const std::string& type, const std::string& rest) {
  return R"({"_id":)" + kToken + R"(,"operationType":")" + type + R"(",)" + kClock + "," + kNs +
         (rest.empty() ? "" : "," + rest) + "}";
}

TEST(MongodbChangeEvent, InsertCarriesTheFullDocumentAndTheTokenAsPosition) {
  Batch batch;
  auto e = doc(event(
      "insert",
      kKey +
          R"(,"fullDocument":{"_id":{"$oid":"599af247bb69cd89961c986d"},"userName":"alice123","n":{"$numberInt":"3"}})"));
  auto kind = decode_change_event(e.get(), batch);
  ASSERT_TRUE(kind) << kind.error().message();
  EXPECT_EQ(kind.value(), EventKind::record);
  ASSERT_EQ(batch.size(), 1u);
  const Record& r = batch.records()[0];
  EXPECT_EQ(r.op, Operation::create);
  EXPECT_EQ(r.meta("schema"), "engineering");
  EXPECT_EQ(r.meta("table"), "users");
  EXPECT_EQ(r.meta("mongodb.cluster_time"), "1654870214.1");
  EXPECT_EQ(to_debug_string(r.key), R"({"_id":"599af247bb69cd89961c986d"})");
  EXPECT_EQ(to_debug_string(r.after),
            R"({"_id":"599af247bb69cd89961c986d","userName":"alice123","n":3})");
  EXPECT_TRUE(r.before.is_absent());
  EXPECT_EQ(r.position, R"({ "_data" : "8262A3F4C6000000012B022C0100296E5A1004" })");
}

TEST(MongodbChangeEvent, UpdateWithoutFullDocumentIsPartialAbsentVersusNullKept) {
  Batch batch;
  auto e = doc(event(
      "update",
      kKey +
          R"(,"updateDescription":{"updatedFields":{"email":"alice@10gen.com","nick":null},"removedFields":["phoneNumber"],"truncatedArrays":[]})"));
  ASSERT_TRUE(decode_change_event(e.get(), batch));
  const Record& r = batch.records()[0];
  EXPECT_EQ(r.op, Operation::update);
  EXPECT_EQ(r.meta(kPartialUpdate), "true");
  // Set to null and removed are null; every other field is absent (unchanged).
  EXPECT_EQ(to_debug_string(r.after),
            R"({"email":"alice@10gen.com","nick":null,"phoneNumber":null})");
  EXPECT_EQ(r.after.find("userName"), nullptr);
}

TEST(MongodbChangeEvent, UpdateLookupAndPreImages) {
  Batch batch;
  auto e = doc(event(
      "update",
      kKey + R"(,"updateDescription":{"updatedFields":{"n":4},"removedFields":[]},)"
             R"("fullDocument":{"_id":{"$oid":"599af247bb69cd89961c986d"},"n":4},)"
             R"("fullDocumentBeforeChange":{"_id":{"$oid":"599af247bb69cd89961c986d"},"n":3})"));
  ASSERT_TRUE(decode_change_event(e.get(), batch));
  const Record& r = batch.records()[0];
  EXPECT_EQ(r.meta(kPartialUpdate), "");
  EXPECT_EQ(to_debug_string(r.after), R"({"_id":"599af247bb69cd89961c986d","n":4})");
  EXPECT_EQ(to_debug_string(r.before), R"({"_id":"599af247bb69cd89961c986d","n":3})");
}

TEST(MongodbChangeEvent, NestedFieldUpdatesNeedTheFullDocument) {
  Batch batch;
  auto e = doc(event(
      "update",
      kKey +
          R"(,"updateDescription":{"updatedFields":{"address.city":"Paris"},"removedFields":[]})"));
  auto kind = decode_change_event(e.get(), batch);
  ASSERT_FALSE(kind);
  EXPECT_NE(kind.error().message().find("full_document: update_lookup"), std::string::npos);
  EXPECT_EQ(batch.size(), 0u);
  auto t = doc(event(
      "update",
      kKey +
          R"(,"updateDescription":{"updatedFields":{},"removedFields":[],"truncatedArrays":[{"field":"tags","newSize":1}]})"));
  EXPECT_FALSE(decode_change_event(t.get(), batch));
}

TEST(MongodbChangeEvent, ReplaceDeleteAndDrop) {
  Batch batch;
  auto rep = doc(
      event("replace",
            kKey + R"(,"fullDocument":{"_id":{"$oid":"599af247bb69cd89961c986d"},"only":true})"));
  auto del = doc(event("delete", kKey));
  auto drop = doc(event("drop", ""));
  ASSERT_TRUE(decode_change_event(rep.get(), batch));
  ASSERT_TRUE(decode_change_event(del.get(), batch));
  auto k = decode_change_event(drop.get(), batch);
  ASSERT_TRUE(k);
  EXPECT_EQ(k.value(), EventKind::truncate);
  ASSERT_EQ(batch.size(), 3u);
  EXPECT_EQ(batch.records()[0].op, Operation::update);
  EXPECT_EQ(to_debug_string(batch.records()[0].after),
            R"({"_id":"599af247bb69cd89961c986d","only":true})");
  EXPECT_EQ(batch.records()[1].op, Operation::remove);
  EXPECT_TRUE(batch.records()[1].after.is_absent());
  EXPECT_TRUE(is_truncate(batch.records()[2]));
}

TEST(MongodbChangeEvent, InvalidateRenameAndDropDatabaseStopWithTheFix) {
  Batch batch;
  auto inv = doc(R"({"_id":)" + kToken + R"(,"operationType":"invalidate",)" + kClock + "}");
  auto ren = doc(event("rename", R"("to":{"db":"engineering","coll":"people"})"));
  auto dropdb = doc(R"({"_id":)" + kToken + R"(,"operationType":"dropDatabase",)" + kClock +
                    R"(,"ns":{"db":"engineering"}})");
  auto a = decode_change_event(inv.get(), batch);
  auto b = decode_change_event(ren.get(), batch);
  auto c = decode_change_event(dropdb.get(), batch);
  ASSERT_FALSE(a);
  ASSERT_FALSE(b);
  ASSERT_FALSE(c);
  EXPECT_NE(a.error().message().find("invalidated"), std::string::npos);
  EXPECT_NE(b.error().message().find("\"engineering.people\""), std::string::npos);
  EXPECT_NE(c.error().message().find("engineering"), std::string::npos);
  EXPECT_EQ(batch.size(), 0u);
  // Events of other kinds (showExpandedEvents) are skipped.
  auto idx = doc(event("createIndexes", ""));
  auto k = decode_change_event(idx.get(), batch);
  ASSERT_TRUE(k);
  EXPECT_EQ(k.value(), EventKind::ignored);
}

TEST(MongodbChangeStream, CommandShape) {
  ChangeStreamOptions o;
  o.full_document = FullDocument::update_lookup;
  o.pre_images = PreImages::when_available;
  o.start_at_seconds = 1654870214;
  o.start_at_increment = 2;
  auto cmd = change_stream_command("users", o);
  ASSERT_TRUE(cmd);
  BsonPtr owned = std::move(cmd.value());
  size_t n = 0;
  char* s = bson_as_relaxed_extended_json(owned.get(), &n);
  EXPECT_EQ(
      std::string(s, n),
      R"({ "aggregate" : "users", "pipeline" : [ { "$changeStream" : { "fullDocument" : "updateLookup", "fullDocumentBeforeChange" : "whenAvailable", "startAtOperationTime" : { "$timestamp" : { "t" : 1654870214, "i" : 2 } } } } ], "cursor" : {  } })");
  bson_free(s);
  o.resume_after = R"({"_data":"82"})";
  auto resumed = change_stream_command("", o);
  ASSERT_TRUE(resumed);
  BsonPtr r = std::move(resumed.value());
  s = bson_as_relaxed_extended_json(r.get(), &n);
  EXPECT_EQ(
      std::string(s, n),
      R"({ "aggregate" : 1, "pipeline" : [ { "$changeStream" : { "fullDocument" : "updateLookup", "fullDocumentBeforeChange" : "whenAvailable", "resumeAfter" : { "_data" : "82" } } } ], "cursor" : {  } })");
  bson_free(s);
}

TEST(MongodbChangeStream, RecordedReplyRoundTrip) {
  // An aggregate reply as a replica set member sends it (cursor.firstBatch,
  // postBatchResumeToken), with two events.
  const std::string reply =
      R"({"cursor":{"firstBatch":[)" +
      event("insert",
            kKey + R"(,"fullDocument":{"_id":{"$oid":"599af247bb69cd89961c986d"},"a":1})") +
      "," + event("delete", kKey) +
      R"(],"postBatchResumeToken":{"_data":"8262A3F4C7000000012B0429296E1404"},"id":{"$numberLong":"7449868283637071946"},"ns":"engineering.users"},"ok":1.0,)"
      R"("operationTime":{"$timestamp":{"t":1654870215,"i":1}}})";
  auto d = doc(reply);
  Batch batch;
  auto got = decode_change_stream_reply(d.get(), batch);
  ASSERT_TRUE(got) << got.error().message();
  EXPECT_EQ(got.value().events, 2u);
  EXPECT_EQ(got.value().cursor_id, 7449868283637071946);
  EXPECT_EQ(batch.position(), R"({ "_data" : "8262A3F4C7000000012B0429296E1404" })");
  EXPECT_EQ(batch.records()[0].op, Operation::create);
  EXPECT_EQ(batch.records()[1].op, Operation::remove);
}

TEST(MongodbChangeStream, LostResumeTokenIsAClearError) {
  auto d = doc(
      R"({"ok":0.0,"errmsg":"Resume of change stream was not possible, as the resume point may no longer be in the oplog.","code":286,"codeName":"ChangeStreamHistoryLost"})");
  Batch batch;
  auto got = decode_change_stream_reply(d.get(), batch);
  ASSERT_FALSE(got);
  EXPECT_FALSE(got.error().retriable());
  EXPECT_NE(got.error().message().find("no longer in the oplog"), std::string::npos);
  EXPECT_NE(got.error().message().find("sluice cleanup"), std::string::npos);
  EXPECT_TRUE(change_stream_error(91, "shutting down").retriable());
}

}  // namespace
}  // namespace sluice::mongodb

namespace sluice::mongodb {
namespace {

TEST(MongodbChangeStream, WatchOptionsAsLibmongocTakesThem) {
  ChangeStreamOptions o;
  o.full_document = FullDocument::required;
  o.pre_images = PreImages::required;
  o.start_at_seconds = 7;
  o.start_at_increment = 1;
  auto opts = change_stream_watch_options(o, 250, 0);
  ASSERT_TRUE(opts);
  size_t n = 0;
  char* s = bson_as_relaxed_extended_json(opts.value().get(), &n);
  EXPECT_EQ(
      std::string(s, n),
      R"({ "fullDocument" : "required", "fullDocumentBeforeChange" : "required", "startAtOperationTime" : { "$timestamp" : { "t" : 7, "i" : 1 } }, "maxAwaitTimeMS" : 250 })");
  bson_free(s);
  // A resume token wins over the start time; a token that is not Extended JSON names the fix.
  o.full_document = FullDocument::none;
  o.pre_images = PreImages::off;
  o.resume_after = R"({"_data":"8263"})";
  auto resumed = change_stream_watch_options(o, 1000, 100);
  ASSERT_TRUE(resumed);
  s = bson_as_relaxed_extended_json(resumed.value().get(), &n);
  EXPECT_EQ(
      std::string(s, n),
      R"({ "resumeAfter" : { "_data" : "8263" }, "maxAwaitTimeMS" : 1000, "batchSize" : 100 })");
  bson_free(s);
  o.resume_after = "{not json";
  auto bad = change_stream_watch_options(o, 1000, 0);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("sluice cleanup"), std::string::npos);
}

}  // namespace
}  // namespace sluice::mongodb
