// The mongodb source's change stream through libmongoc against recorded server replies
// (support/mongo_wire_server.h): FerretDB, the only MongoDB-wire server the tests have, has no
// change streams, so the replies a replica set member gives (aggregate with $changeStream,
// getMore, the errors) are written out here as MongoDB's documentation and the drivers'
// change-stream specification tests show them. What this proves: the commands sluice sends
// (startAtOperationTime taken before the snapshot, resumeAfter on restart, fullDocument, the
// collection filter), how the replies become records and positions, and the errors. It does not
// prove a real server agrees. The last case runs against FerretDB: its refusal names the fix.
#include <gtest/gtest.h>

#include <iostream>
#include <stop_token>
#include <string>
#include <vector>

#include "connectors/mongodb/mongodb_source.h"
#include "support/env.h"
#include "support/mongo_wire_server.h"
#include "support/mongodb.h"
#include "support/pipeline_file.h"
#include "support/process.h"

namespace sluice {
namespace {

using test::MongoWireServer;

const std::string kOid = R"({"$oid":"599af247bb69cd89961c986d"})";
const std::string kOid2 = R"({"$oid":"599af247bb69cd89961c986e"})";

std::string token(const std::string& hex) { return R"({"_data":")" + hex + R"("})"; }

// A change event as a replica set member sends it (manual, "Change Events").
std::string event(const std::string& tok, const std::string& type, uint32_t t,
                  const std::string& rest) {
  return R"({"_id":)" + token(tok) + R"(,"operationType":")" + type +
         R"(","clusterTime":{"$timestamp":{"t":)" + std::to_string(t) +
         R"(,"i":1}},"wallTime":{"$date":"2023-11-14T22:13:20.000Z"},)"
         R"("ns":{"db":"shop","coll":"users"})" +
         (rest.empty() ? "" : "," + rest) + "}";
}

std::string cursor_reply(const std::string& batch_key, const std::string& events,
                         const std::string& pbrt, int64_t id) {
  return R"({"cursor":{")" + batch_key + R"(":[)" + events + R"(],"postBatchResumeToken":)" +
         token(pbrt) + R"(,"id":{"$numberLong":")" + std::to_string(id) +
         R"("},"ns":"shop.users"},"ok":1.0,"operationTime":{"$timestamp":{"t":1700000100,"i":1}}})";
}

std::string list_collections(const std::vector<std::string>& names) {
  std::string batch;
  for (const std::string& n : names)
    batch += (batch.empty() ? "" : ",") + std::string(R"({"name":")") + n +
             R"(","type":"collection","options":{},"info":{"readOnly":false}})";
  return R"({"cursor":{"id":{"$numberLong":"0"},"ns":"shop.$cmd.listCollections","firstBatch":[)" +
         batch + R"(]},"ok":1.0})";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::vector<std::string> named(const MongoWireServer& server, const std::string& name) {
  std::vector<std::string> out;
  for (const std::string& c : server.commands())
    if (c.rfind(R"({ ")" + name + R"(" :)", 0) == 0) out.push_back(c);
  return out;
}

MongodbSourceOptions options(const MongoWireServer& server, std::vector<std::string> collections) {
  MongodbSourceOptions o;
  o.url = server.url("shop");
  o.collections = std::move(collections);
  o.max_await = std::chrono::milliseconds(10);
  return o;
}

TEST(MongodbChangeStreamRecorded, SnapshotThenStreamFromTheTimeTakenBeforeIt) {
  int aggregates = 0, get_mores = 0;
  MongoWireServer server([&](const std::string& name, const std::string&) -> std::string {
    if (name == "ping")
      return R"({"ok":1.0,"operationTime":{"$timestamp":{"t":1700000000,"i":5}}})";
    if (name == "listCollections") return list_collections({"users"});
    if (name == "count") return R"({"n":2,"ok":1.0})";
    if (name == "find")
      return R"({"cursor":{"firstBatch":[{"_id":1,"name":"ada"},{"_id":2,"name":"bob"}],)"
             R"("id":{"$numberLong":"0"},"ns":"shop.users"},"ok":1.0})";
    if (name == "aggregate") {
      if (++aggregates == 1) return cursor_reply("firstBatch", "", "8200", 0);  // the probe
      return cursor_reply("firstBatch",
                          event("8201", "insert", 1700000001,
                                R"("documentKey":{"_id":)" + kOid + R"(},"fullDocument":{"_id":)" +
                                    kOid + R"(,"name":"cy","n":{"$numberInt":"1"}})"),
                          "8201", 42);
    }
    if (name == "getMore") {
      ++get_mores;
      if (get_mores == 1)
        return cursor_reply(
            "nextBatch",
            event("8202", "update", 1700000002,
                  R"("documentKey":{"_id":)" + kOid +
                      R"(},"updateDescription":{"updatedFields":{"n":{"$numberInt":"2"}},)"
                      R"("removedFields":[],"truncatedArrays":[]},"fullDocument":{"_id":)" +
                      kOid + R"(,"name":"cy","n":{"$numberInt":"2"}})") +
                "," + event("8203", "delete", 1700000003, R"("documentKey":{"_id":)" + kOid + "}"),
            "8203", 42);
      if (get_mores == 2) return cursor_reply("nextBatch", "", "8204", 42);
      if (get_mores == 3)
        return cursor_reply(
            "nextBatch",
            event("8205", "insert", 1700000005,
                  R"("documentKey":{"_id":)" + kOid2 + R"(},"fullDocument":{"_id":)" + kOid2 +
                      R"(,"name":"di"})") +
                R"(,{"_id":)" + token("8206") +
                R"(,"operationType":"invalidate","clusterTime":{"$timestamp":{"t":1700000006,"i":1}}})",
            "8206", 42);
      return cursor_reply("nextBatch", "", "8206", 42);
    }
    return "";
  });
  auto source = make_mongodb_source(options(server, {"shop.users"}));
  ConnectorContext ctx;
  ctx.pipeline_id = "recorded";
  ASSERT_TRUE(source->open(ctx, std::nullopt).ok());
  // The probe ran and the start time was taken before the snapshot's find.
  {
    auto cmds = server.commands();
    size_t probe = cmds.size(), ping_after = cmds.size(), find = cmds.size();
    for (size_t k = 0; k < cmds.size(); ++k) {
      if (contains(cmds[k], "$changeStream") && probe == cmds.size()) probe = k;
      if (cmds[k].rfind(R"({ "ping")", 0) == 0 && probe != cmds.size()) ping_after = k;
      if (cmds[k].rfind(R"({ "find")", 0) == 0) find = k;
    }
    EXPECT_LT(probe, ping_after);
    EXPECT_EQ(find, cmds.size()) << "the snapshot must not have read yet";
  }
  ReadRequest req;
  req.max_records = 100;
  std::stop_source stop;
  Batch snap;
  auto r1 = source->read(snap, req, stop.get_token());
  ASSERT_TRUE(r1) << r1.error().message();
  EXPECT_EQ(r1.value(), ReadStatus::more);
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_EQ(snap.records()[0].op, Operation::snapshot);
  // The snapshot is read: the position is the stream's start, the time taken before the snapshot.
  EXPECT_TRUE(contains(std::string(snap.position()), R"("stream" : { "$numberInt" : "1" })"))
      << snap.position();
  EXPECT_TRUE(contains(std::string(snap.position()),
                       R"("at" : { "$timestamp" : { "t" : 1700000000, "i" : 5 } })"))
      << snap.position();

  Batch b;
  auto r2 = source->read(b, req, stop.get_token());
  ASSERT_TRUE(r2) << r2.error().message();
  EXPECT_EQ(r2.value(), ReadStatus::idle);
  auto aggs = named(server, "aggregate");
  ASSERT_EQ(aggs.size(), 2u);
  EXPECT_TRUE(contains(aggs[1], R"("aggregate" : "users")")) << aggs[1];
  EXPECT_TRUE(contains(aggs[1], R"("fullDocument" : "updateLookup")")) << aggs[1];
  EXPECT_TRUE(contains(
      aggs[1], R"("startAtOperationTime" : { "$timestamp" : { "t" : 1700000000, "i" : 5 } })"))
      << aggs[1];
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b.records()[0].op, Operation::create);
  EXPECT_EQ(b.records()[1].op, Operation::update);
  EXPECT_EQ(b.records()[2].op, Operation::remove);
  EXPECT_EQ(to_debug_string(b.records()[1].after),
            R"({"_id":"599af247bb69cd89961c986d","name":"cy","n":2})");
  EXPECT_EQ(b.records()[1].meta("table"), "users");
  // Each record's position resumes after its own event; the batch's after the
  // postBatchResumeToken of the empty getMore that ended it.
  EXPECT_TRUE(contains(std::string(b.records()[0].position), R"("_data" : "8201")"))
      << b.records()[0].position;
  EXPECT_TRUE(contains(std::string(b.records()[2].position), R"("_data" : "8203")"));
  EXPECT_TRUE(contains(std::string(b.position()), R"("token" : { "_data" : "8204" })"))
      << b.position();
  const std::string stored = std::string(b.position());

  // An invalidate after an insert: the insert comes first, then the stop naming the fix.
  Batch c;
  auto r3 = source->read(c, req, stop.get_token());
  ASSERT_TRUE(r3) << r3.error().message();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c.records()[0].op, Operation::create);
  Batch d;
  auto r4 = source->read(d, req, stop.get_token());
  ASSERT_FALSE(r4);
  EXPECT_FALSE(r4.error().retriable());
  EXPECT_TRUE(contains(r4.error().message(), "invalidated")) << r4.error().message();
  source->close();

  // A restart from the stored position resumes after its token; a token the oplog no longer holds
  // (ChangeStreamHistoryLost) fails open with the fix.
  MongoWireServer lost([&](const std::string& name, const std::string&) -> std::string {
    if (name == "listCollections") return list_collections({"users"});
    if (name == "aggregate")
      return R"({"ok":0.0,"errmsg":"Resume of change stream was not possible, as the resume )"
             R"(point may no longer be in the oplog.","code":286,"codeName":"ChangeStreamHistoryLost"})";
    return "";
  });
  auto o = options(lost, {"shop.users"});
  o.full_document = mongodb::FullDocument::none;
  auto restarted = make_mongodb_source(o);
  Status st = restarted->open(ctx, stored);
  ASSERT_FALSE(st.ok());
  EXPECT_FALSE(st.error().retriable());
  EXPECT_TRUE(contains(st.error().message(), "no longer in the oplog")) << st.error().message();
  EXPECT_TRUE(contains(st.error().message(), "sluice cleanup")) << st.error().message();
  auto resumed = named(lost, "aggregate");
  ASSERT_EQ(resumed.size(), 1u);
  EXPECT_TRUE(contains(resumed[0], R"("resumeAfter" : { "_data" : "8204" })")) << resumed[0];
  EXPECT_FALSE(contains(resumed[0], "fullDocument")) << resumed[0];
  EXPECT_FALSE(contains(resumed[0], "startAtOperationTime")) << resumed[0];
  EXPECT_TRUE(named(lost, "find").empty());
}

TEST(MongodbChangeStreamRecorded, AServerWithoutChangeStreamsFailsOpenNamingStreamFalse) {
  // FerretDB 1.24's reply to $changeStream, as the last case sees it (a standalone mongod answers
  // alike with code 40573, "The $changeStream stage is only supported on replica sets").
  MongoWireServer server([&](const std::string& name, const std::string&) -> std::string {
    if (name == "listCollections") return list_collections({"users", "orders"});
    if (name == "aggregate")
      return R"({"ok":0.0,"errmsg":"`aggregate` stage \"$changeStream\" is not implemented yet",)"
             R"("code":238,"codeName":"NotImplemented"})";
    return "";
  });
  auto source = make_mongodb_source(options(server, {"shop.users", "shop.orders"}));
  ConnectorContext ctx;
  Status st = source->open(ctx, std::nullopt);
  ASSERT_FALSE(st.ok());
  EXPECT_FALSE(st.error().retriable());
  EXPECT_TRUE(contains(st.error().message(), "`stream: false`")) << st.error().message();
  EXPECT_TRUE(contains(st.error().message(), "$changeStream")) << st.error().message();
  // Two collections of one database: a database stream filtered to them.
  auto aggs = named(server, "aggregate");
  ASSERT_EQ(aggs.size(), 1u);
  EXPECT_TRUE(contains(aggs[0], R"("aggregate" : { "$numberInt" : "1" })")) << aggs[0];
  EXPECT_TRUE(contains(aggs[0], R"({ "ns.db" : "shop", "ns.coll" : "orders" })")) << aggs[0];
  EXPECT_TRUE(contains(aggs[0], R"({ "ns.db" : "shop", "ns.coll" : "users" })")) << aggs[0];
  EXPECT_TRUE(named(server, "find").empty());
}

TEST(MongodbChangeStreamFerretdb, TheDefaultStreamIsRefusedWithTheFixAndStreamFalseSnapshots) {
  test::MongoTestDb mdb("csrefuse");
  ASSERT_TRUE(mdb.ok());
  ASSERT_TRUE(mdb.insert("docs", {R"({"_id":1,"s":"a"})"}));
  auto dir = test::make_temp_dir("mongo-cs-refuse");
  test::PipelineFile f;
  test::PipelineYaml& p = f.pipeline("mcs");
  p.source("mongodb").set("url", mdb.url()).set("collections", test::Yaml::strings({"docs"}));
  p.destination("sqlite").set("path", "out.db");
  test::write_file(dir / "p.yaml", f.yaml());
  {
    test::Process run({"run", "p.yaml", "--idle-exit", "2"}, dir);
    int rc = run.wait_for(std::chrono::seconds(60));
    EXPECT_NE(rc, 0);
    EXPECT_NE(rc, 999);
    std::vector<std::string> errors;
    for (const std::string& line : test::lines_of(run.stderr_text()))
      if (test::is_error_log_line(line)) errors.push_back(line);
    ASSERT_EQ(errors.size(), 1u) << run.stderr_text();
    EXPECT_TRUE(contains(errors[0], "`stream: false`")) << errors[0];
    std::cout << "FerretDB's refusal: " << errors[0] << "\n";
  }
  p.source("mongodb").set("stream", false);
  test::write_file(dir / "p.yaml", f.yaml());
  EXPECT_EQ(test::run_sluice({"run", "p.yaml", "--idle-exit", "2"}, dir, std::chrono::seconds(60)),
            0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sluice
