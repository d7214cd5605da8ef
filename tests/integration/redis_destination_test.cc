// The redis destination against the real server (scripts/services start redis): hash and JSON
// rows, typed values, null vs absent (unchanged TOAST), deletes, key changes, truncate, positions
// in the batch's EXEC, WRONGTYPE and OOM refused with one-line errors; then PostgreSQL → Redis
// through the sluice binary, with a kill -9 under checkpoint_in_destination. Each test uses a
// database number of its own.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "connectors/redis/redis_destination.h"
#include "sluice/registry.h"
#include "support/redis.h"

namespace sluice::redis {
namespace {

using namespace std::chrono_literals;

std::string url_db(int db) {
  std::string u = test::redis_url();
  const size_t slash = u.find('/', u.find("//") + 2);
  if (slash != std::string::npos) u.resize(slash);
  return u + "/" + std::to_string(db);
}

RedisConnection fresh(int db) {
  RedisConnection c = test::redis_connect(db);
  EXPECT_TRUE(c.command({"FLUSHDB"}).ok());
  return c;
}

std::unique_ptr<Destination> make_dest(std::map<std::string, std::string> settings,
                                       const std::string& pipeline = "p") {
  const ConnectorSpec* spec = Registry::builtin().connector("redis");
  EXPECT_NE(spec, nullptr);
  if (!spec) return nullptr;
  Settings s(spec->destination_settings);
  auto err = settings_from_text(spec->destination_settings, settings, &s);
  EXPECT_FALSE(err.has_value()) << *err;
  auto d = spec->make_destination(s);
  EXPECT_TRUE(d.ok()) << d.error().message();
  if (!d.ok()) return nullptr;
  std::unique_ptr<Destination> dest = std::move(d.value());
  Status st = dest->open(ConnectorContext{pipeline, "redis", nullptr});
  EXPECT_TRUE(st.ok()) << st.error().message();
  return dest;
}

Status write(Destination& d, Batch& b) {
  Status result = Error(Errc::internal, "done not called");
  d.write(b, [&](Status s) { result = std::move(s); });
  return result;
}

Value meta(Batch& b, std::string_view table = "t") {
  return b.object(2)
      .add("schema", Value::string(b.copy("public")))
      .add("table", Value::string(b.copy(table)))
      .build();
}

Record& row(Batch& b, Operation op, int64_t id, Value after) {
  Record& r = b.add();
  r.op = op;
  r.metadata = meta(b);
  r.key = b.object(1).add("id", Value::int64(id)).build();
  r.after = after;
  return r;
}

std::map<std::string, std::string> hgetall(RedisConnection& c, const std::string& key) {
  std::map<std::string, std::string> out;
  auto r = c.command({"HGETALL", key});
  EXPECT_TRUE(r.ok());
  if (!r.ok()) return out;
  for (size_t i = 0; i + 1 < (*r)->elements; i += 2)
    out[std::string((*r)->element[i]->str, (*r)->element[i]->len)] =
        std::string((*r)->element[i + 1]->str, (*r)->element[i + 1]->len);
  return out;
}

std::string get(RedisConnection& c, std::string_view key) {
  auto r = c.command({"GET", key});
  return r.ok() && (*r)->type == REDIS_REPLY_STRING ? std::string((*r)->str, (*r)->len) : "<nil>";
}

int64_t dbsize(RedisConnection& c) {
  auto r = c.command({"DBSIZE"});
  return r.ok() ? (*r)->integer : -1;
}

TEST(RedisDestination, HashRowsRenderTypesCanonicallyAndKeepAbsentFields) {
  RedisConnection c = fresh(10);
  auto d = make_dest({{"url", url_db(10)}});
  ASSERT_TRUE(d);
  Batch b;
  const uint8_t uuid[16] = {0x12, 0x3e, 0x45, 0x67, 0xe8, 0x9b, 0x12, 0xd3,
                            0xa4, 0x56, 0x42, 0x66, 0x14, 0x17, 0x40, 0x00};
  row(b, Operation::snapshot, 1,
      b.object(10)
          .add("id", Value::int64(1))
          .add("price", Value::decimal(b.copy("12.340")))
          .add("at", Value::timestamptz(1709214300123456))
          .add("day", Value::date(19782))
          .add("ok", Value::boolean(true))
          .add("ratio", Value::float64(0.1))
          .add("blob", Value::bytes(b.copy(std::string_view("a\0b", 3))))
          .add("doc", Value::json(b.copy(R"({"a": [1, 2]})")))
          .add("u", Value::uuid(uuid))
          .add("note", Value::null())
          .build());
  ASSERT_TRUE(write(*d, b).ok());
  auto h = hgetall(c, "public.t:1");
  EXPECT_EQ(h["id"], "1");
  EXPECT_EQ(h["price"], "12.340");
  EXPECT_EQ(h["at"], "2024-02-29T13:45:00.123456Z");
  EXPECT_EQ(h["day"], "2024-02-29");
  EXPECT_EQ(h["ok"], "true");
  EXPECT_EQ(h["ratio"], "0.1");
  EXPECT_EQ(h["blob"], std::string("a\0b", 3));
  EXPECT_EQ(h["doc"], R"({"a": [1, 2]})");
  EXPECT_EQ(h["u"], "123e4567-e89b-12d3-a456-426614174000");
  EXPECT_EQ(h.count("note"), 0u) << "a NULL column has no field";

  // An update with an unchanged (absent) column keeps its field; a column set to NULL loses it.
  Batch u;
  row(u, Operation::update, 1,
      u.object(4)
          .add("id", Value::int64(1))
          .add("price", Value::null())
          .add("doc", Value())
          .add("note", Value::string(u.copy("n")))
          .build());
  ASSERT_TRUE(write(*d, u).ok());
  h = hgetall(c, "public.t:1");
  EXPECT_EQ(h.count("price"), 0u);
  EXPECT_EQ(h["doc"], R"({"a": [1, 2]})");
  EXPECT_EQ(h["note"], "n");
  EXPECT_EQ(h["at"], "2024-02-29T13:45:00.123456Z");

  // A key change moves the row; a delete removes the key.
  Batch k;
  Record& moved = row(k, Operation::update, 2, k.object(1).add("id", Value::int64(2)).build());
  moved.before = k.object(1).add("id", Value::int64(1)).build();
  ASSERT_TRUE(write(*d, k).ok());
  EXPECT_TRUE(hgetall(c, "public.t:1").empty());
  EXPECT_EQ(hgetall(c, "public.t:2")["id"], "2");
  Batch del;
  Record& r = row(del, Operation::remove, 2, Value());
  (void)r;
  ASSERT_TRUE(write(*d, del).ok());
  EXPECT_EQ(dbsize(c), 0);
}

TEST(RedisDestination, CompositeKeysAreEscapedAndTruncateRemovesOnlyTheTable) {
  RedisConnection c = fresh(11);
  auto d = make_dest({{"url", url_db(11)}, {"prefix", "cdc:"}});
  ASSERT_TRUE(d);
  Batch b;
  for (int i = 0; i < 2500; ++i)
    row(b, Operation::create, i, b.object(1).add("id", Value::int64(i)).build());
  Record& comp = b.add();
  comp.op = Operation::create;
  comp.metadata = meta(b, "t");
  comp.key = b.object(2)
                 .add("a", Value::string(b.copy("x:y")))
                 .add("b", Value::string(b.copy("z\\")))
                 .build();
  comp.after = b.object(1).add("a", Value::string(b.copy("x:y"))).build();
  Record& other = b.add();
  other.op = Operation::create;
  other.metadata = meta(b, "t2");
  other.key = b.object(1).add("id", Value::int64(1)).build();
  other.after = b.object(1).add("id", Value::int64(1)).build();
  ASSERT_TRUE(write(*d, b).ok());
  EXPECT_EQ(hgetall(c, "cdc:public.t:x\\:y:z\\\\")["a"], "x:y");
  EXPECT_EQ(dbsize(c), 2502);

  Batch t;
  Record& tr = t.add();
  tr.op = Operation::remove;
  tr.metadata = t.object(3)
                    .add("schema", Value::string(t.copy("public")))
                    .add("table", Value::string(t.copy("t")))
                    .add("truncate", Value::string(t.copy("true")))
                    .build();
  row(t, Operation::create, 7, t.object(1).add("id", Value::int64(7)).build());
  ASSERT_TRUE(write(*d, t).ok());
  EXPECT_EQ(dbsize(c), 2) << "the truncate removed public.t's keys, the row after it stays";
  EXPECT_EQ(hgetall(c, "cdc:public.t:7")["id"], "7");
  EXPECT_EQ(hgetall(c, "cdc:public.t2:1")["id"], "1");
}

TEST(RedisDestination, JsonFormatStoresTheRowAndRefusesUnchangedToast) {
  RedisConnection c = fresh(12);
  auto d = make_dest({{"url", url_db(12)}, {"format", "json"}, {"table", "{{table}}"}});
  ASSERT_TRUE(d);
  Batch b;
  row(b, Operation::create, 1,
      b.object(3)
          .add("id", Value::int64(1))
          .add("price", Value::decimal(b.copy("1.50")))
          .add("note", Value::null())
          .build());
  ASSERT_TRUE(write(*d, b).ok());
  EXPECT_EQ(get(c, "t:1"), R"({"id":1,"price":"1.50","note":null})");

  Batch toast;
  row(toast, Operation::update, 1,
      toast.object(2).add("id", Value::int64(1)).add("note", Value()).build());
  Status s = write(*d, toast);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), Errc::data);
  EXPECT_NE(s.error().message().find("TOAST"), std::string::npos) << s.error().message();
  EXPECT_EQ(get(c, "t:1"), R"({"id":1,"price":"1.50","note":null})");
}

TEST(RedisDestination, PositionsCommitInTheBatchExecAndAFailedBatchKeepsThePrevious) {
  RedisConnection c = fresh(13);
  const std::map<std::string, std::string> settings = {{"url", url_db(13)},
                                                       {"checkpoint_in_destination", "true"}};
  auto d = make_dest(settings);
  ASSERT_TRUE(d);
  ASSERT_TRUE(d->stores_positions());
  auto none = d->stored_position("p");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());

  const std::string pos1("lsn\0\xff:1", 7);
  Batch b1;
  row(b1, Operation::create, 1, b1.object(1).add("id", Value::int64(1)).build());
  b1.set_position(pos1);
  ASSERT_TRUE(write(*d, b1).ok());
  EXPECT_EQ(d->stored_position("p")->value_or(""), pos1);

  // A key of another type: WRONGTYPE at EXEC; the position stays at pos1, one-line data error.
  ASSERT_TRUE(c.command({"SET", "public.t:2", "a string"}).ok());
  Batch b2;
  row(b2, Operation::create, 3, b2.object(1).add("id", Value::int64(3)).build());
  row(b2, Operation::create, 2, b2.object(1).add("id", Value::int64(2)).build());
  b2.set_position("pos-2");
  Status s = write(*d, b2);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), Errc::data);
  EXPECT_NE(s.error().message().find("WRONGTYPE"), std::string::npos) << s.error().message();
  EXPECT_EQ(s.error().message().find('\n'), std::string::npos);
  EXPECT_EQ(d->stored_position("p")->value_or(""), pos1);

  // An empty batch still commits its position.
  Batch empty;
  empty.set_position("pos-3");
  ASSERT_TRUE(write(*d, empty).ok());
  d->close();
  auto again = make_dest(settings);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->stored_position("p")->value_or(""), "pos-3");
  EXPECT_FALSE(again->stored_position("other")->has_value());
  ASSERT_TRUE(again->erase_stored_position("p").ok());
  EXPECT_FALSE(again->stored_position("p")->has_value());
}

TEST(RedisDestination, OutOfMemoryStopsWithTheFixAndAppliesNothing) {
  RedisConnection c = fresh(14);
  // The default user (password sluice) may CONFIG; the test's ACL user may not need to.
  auto admin_url = parse_redis_url(test::redis_url());
  ASSERT_TRUE(admin_url.ok());
  admin_url->user.clear();
  auto admin = RedisConnection::connect(*admin_url, {});
  ASSERT_TRUE(admin.ok()) << admin.error().message();
  auto old = admin->command({"CONFIG", "GET", "maxmemory"});
  ASSERT_TRUE(old.ok());
  ASSERT_TRUE(admin->command({"CONFIG", "SET", "maxmemory", "1"}).ok());
  auto d = make_dest({{"url", url_db(14)}, {"checkpoint_in_destination", "true"}});
  Batch b;
  row(b, Operation::create, 1, b.object(1).add("id", Value::int64(1)).build());
  b.set_position("pos-1");
  Status s = d ? write(*d, b) : ok_status();
  ASSERT_TRUE(admin->command({"CONFIG", "SET", "maxmemory", reply_text((*old)->element[1])}).ok());
  ASSERT_FALSE(s.ok());
  EXPECT_FALSE(s.error().retriable());
  EXPECT_NE(s.error().message().find("maxmemory"), std::string::npos) << s.error().message();
  EXPECT_EQ(dbsize(c), 0);
}

TEST(RedisDestination, RedissAndBadSettingsAreRefusedInOneLine) {
  const ConnectorSpec* spec = Registry::builtin().connector("redis");
  ASSERT_NE(spec, nullptr);
  Settings s(spec->destination_settings);
  ASSERT_FALSE(settings_from_text(spec->destination_settings,
                                  {{"url", "rediss://u:secretpw@127.0.0.1:6380"}}, &s)
                   .has_value());
  auto d = spec->make_destination(s);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message().find("TLS"), std::string::npos) << d.error().message();
  EXPECT_EQ(d.error().message().find("secretpw"), std::string::npos);
}

}  // namespace
}  // namespace sluice::redis
