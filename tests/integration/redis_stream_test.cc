// The redis destination's stream mode and the redis source's Debezium format through the sluice
// binary, against the real Redis (SLUICE_TEST_REDIS_URL) and PostgreSQL (SLUICE_TEST_PG_URL):
// PostgreSQL → Redis stream as OpenCDC entries (decoded and checked one by one), MAXLEN trimming,
// a kill -9 under checkpoint_in_destination with Debezium entries (exactly the changes, none
// twice), and PostgreSQL → Redis stream (Debezium) → PostgreSQL ending equal to the source.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "integration/pg_harness.h"
#include "sluice/batch.h"
#include "sluice/json.h"
#include "support/pipeline_file.h"
#include "support/redis.h"

namespace sluice::pgtest {
namespace {

using e2e::Process;

// The redis test database of this file.
constexpr int kDb = 9;

std::string url_db(int db) {
  std::string u = test::redis_url();
  const size_t slash = u.find('/', u.find("//") + 2);
  if (slash != std::string::npos) u.resize(slash);
  return u + "/" + std::to_string(db);
}

// Tests run in parallel (ctest -j): each has its own stream and pipeline id, removed at its start
// (the database is not flushed).
redis::RedisConnection fresh(const std::string& stream, const std::string& pipeline_id) {
  redis::RedisConnection c = test::redis_connect(kDb);
  EXPECT_TRUE(c.command({"DEL", stream}).ok());
  EXPECT_TRUE(c.command({"HDEL", "sluice:checkpoints", pipeline_id}).ok());
  return c;
}

struct Entry {
  std::string id;
  std::map<std::string, std::string> fields;
};

// Every entry of `stream`, in order.
std::vector<Entry> entries(redis::RedisConnection& c, const std::string& stream) {
  std::vector<Entry> out;
  std::string start = "-";
  for (;;) {
    auto r = c.command({"XRANGE", stream, start, "+", "COUNT", "1000"});
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message());
    if (!r.ok() || (*r)->elements == 0) return out;
    for (size_t i = 0; i < (*r)->elements; ++i) {
      const redisReply* e = (*r)->element[i];
      Entry x{redis::reply_text(e->element[0]), {}};
      for (size_t k = 0; k + 1 < e->element[1]->elements; k += 2)
        x.fields[redis::reply_text(e->element[1]->element[k])] =
            redis::reply_text(e->element[1]->element[k + 1]);
      out.push_back(std::move(x));
    }
    start = "(" + out.back().id;
  }
}

int64_t xlen(redis::RedisConnection& c, const std::string& stream) {
  auto r = c.command({"XLEN", stream});
  return r.ok() ? (*r)->integer : -1;
}

// entries-added of XINFO STREAM (Redis 7): every XADD ever made, trimmed or not.
int64_t added(redis::RedisConnection& c, const std::string& stream) {
  auto r = c.command({"XINFO", "STREAM", stream});
  if (!r.ok() || (*r)->type != REDIS_REPLY_ARRAY) return -1;
  for (size_t i = 0; i + 1 < (*r)->elements; i += 2)
    if (redis::reply_text((*r)->element[i]) == "entries-added")
      return (*r)->element[i + 1]->integer;
  return -1;
}

std::string pipeline(const std::string& id, const std::string& pg_url,
                     const std::map<std::string, test::Yaml>& dest) {
  test::PipelineFile f;
  test::PipelineYaml& p = f.pipeline(id);
  test::YamlMap src;
  src.set("url", pg_url).set("tables", test::Yaml::strings({"public.t"}));
  p.source("postgres").settings = src;
  test::ConnectorYaml& d = p.destination("redis");
  d.set("url", url_db(kDb)).set("mode", "stream");
  for (const auto& [k, v] : dest) d.set(k, v);
  p.max_records(200).linger_ms(20);
  return f.yaml();
}

constexpr const char* kDdl = "CREATE TABLE t (id int PRIMARY KEY, name text, price numeric(10,2))";

TEST(PostgresToRedisStream, OpenCdcEntriesOneChangeEachInOrder) {
  TestDb db("rstream_ocdc");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec(kDdl));
  ASSERT_TRUE(
      db.sql().exec("INSERT INTO t SELECT g, 'n' || g, g / 4.0 FROM generate_series(1, 100) g"));
  auto c = fresh("cdc:public.t", "rstream_ocdc");
  auto dir = e2e::make_temp_dir("pg-redis-stream-ocdc");
  e2e::write_file(dir / "p.yaml", pipeline("rstream_ocdc", db.url(), {{"prefix", "cdc:"}}));
  Process p({"run", "p.yaml"}, dir);
  const std::string stream = "cdc:public.t";
  ASSERT_TRUE(test::wait_until([&] { return xlen(c, stream) == 100; }, 30s)) << p.stderr_text();
  ASSERT_TRUE(
      db.sql().exec("UPDATE t SET name = 'upd' WHERE id = 7; DELETE FROM t WHERE id = 8; "
                    "INSERT INTO t VALUES (500, 'new', NULL); TRUNCATE t"));
  ASSERT_TRUE(test::wait_until([&] { return xlen(c, stream) == 104; }, 30s)) << p.stderr_text();
  p.terminate();
  EXPECT_EQ(p.wait(), 0) << p.stderr_text();

  const std::vector<Entry> got = entries(c, stream);
  ASSERT_EQ(got.size(), 104u);
  Batch b;
  std::set<std::string> snapshot_keys;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(got[i].fields.count("value")) << got[i].id;
    ASSERT_TRUE(decode_record_json(got[i].fields.at("value"), b).ok()) << got[i].fields.at("value");
    const Record& r = b.records().back();
    EXPECT_EQ(r.meta(meta::kTable), "t");
    if (i < 100) {
      EXPECT_EQ(r.op, Operation::snapshot) << i;
      ASSERT_TRUE(r.after.find("id"));
      const std::string id = std::to_string(r.after.find("id")->as_int64());
      EXPECT_EQ(got[i].fields.at("key"), "{\"id\":" + id + "}");
      EXPECT_EQ(r.after.find("name")->as_text(), "n" + id);
      snapshot_keys.insert(id);
    }
  }
  EXPECT_EQ(snapshot_keys.size(), 100u) << "each row once";
  const auto& rs = b.records();
  EXPECT_EQ(rs[100].op, Operation::update);
  EXPECT_EQ(rs[100].after.find("name")->as_text(), "upd");
  EXPECT_EQ(got[100].fields.at("key"), "{\"id\":7}");
  EXPECT_EQ(rs[101].op, Operation::remove);
  EXPECT_EQ(got[101].fields.at("key"), "{\"id\":8}");
  EXPECT_EQ(rs[102].op, Operation::create);
  EXPECT_TRUE(rs[102].after.find("price")->is_null());
  EXPECT_TRUE(is_truncate(rs[103]));
  EXPECT_EQ(got[103].fields.count("key"), 0u) << "a truncate has no key";
}

TEST(PostgresToRedisStream, MaxlenTrimsTheStream) {
  TestDb db("rstream_maxlen");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec(kDdl));
  ASSERT_TRUE(db.sql().exec("INSERT INTO t SELECT g, 'n' || g, g FROM generate_series(1, 3000) g"));
  auto c = fresh("maxlen_t", "rstream_maxlen");
  auto dir = e2e::make_temp_dir("pg-redis-stream-maxlen");
  e2e::write_file(dir / "p.yaml",
                  pipeline("rstream_maxlen", db.url(),
                           {{"table", "maxlen_{{table}}"}, {"stream.maxlen", 100}}));
  Process p({"run", "p.yaml"}, dir);
  ASSERT_TRUE(test::wait_until([&] { return added(c, "maxlen_t") == 3000; }, 30s))
      << p.stderr_text();
  // MAXLEN ~ trims whole macro nodes (stream-node-max-entries, 100 by default): at least 100
  // entries stay, fewer than 100 + one node.
  const int64_t n = xlen(c, "maxlen_t");
  EXPECT_GE(n, 100);
  EXPECT_LT(n, 200 + 1);
  p.terminate();
  EXPECT_EQ(p.wait(), 0) << p.stderr_text();
}

// Every (key, before, after, op) a Debezium entry of `stream` carries, counted.
std::map<std::string, int> debezium_changes(redis::RedisConnection& c, const std::string& stream) {
  std::map<std::string, int> out;
  for (const Entry& e : entries(c, stream)) {
    const std::string& v = e.fields.at("value");
    // The envelope without source/ts_ms (they differ between a run and its replay).
    const size_t src = v.find(",\"source\":");
    const size_t op = v.find(",\"op\":");
    EXPECT_NE(src, std::string::npos) << v;
    EXPECT_NE(op, std::string::npos) << v;
    std::string change = e.fields.at("key") + v.substr(0, src) + v.substr(op, 8);
    ++out[change];
  }
  return out;
}

TEST(PostgresToRedisStream, KillNineWithCheckpointInDestinationAddsNoEntryTwice) {
  TestDb db("rstream_kill");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec(kDdl));
  ASSERT_TRUE(db.sql().exec("INSERT INTO t SELECT g, 'n' || g, g FROM generate_series(1, 1000) g"));
  auto c = fresh("kill_t", "rstream_kill");
  auto dir = e2e::make_temp_dir("pg-redis-stream-kill");
  e2e::write_file(dir / "p.yaml", pipeline("rstream_kill", db.url(),
                                           {{"table", "kill_{{table}}"},
                                            {"stream.format", "debezium"},
                                            {"checkpoint_in_destination", true}}));
  {
    Process p({"run", "p.yaml"}, dir);
    ASSERT_TRUE(test::wait_until([&] { return xlen(c, "kill_t") == 1000; }, 30s))
        << p.stderr_text();
    // 20 statements of 50 updates each, in flight when sluice dies.
    for (int i = 0; i < 20; ++i)
      ASSERT_TRUE(db.sql().exec("UPDATE t SET price = price + " + std::to_string(i + 1) +
                                " WHERE id % 20 = " + std::to_string(i)));
    ASSERT_TRUE(test::wait_until([&] { return xlen(c, "kill_t") > 1000; }, 30s)) << p.stderr_text();
    p.kill9();
  }
  ASSERT_TRUE(db.sql().exec("DELETE FROM t WHERE id > 990"));
  Process p2({"run", "p.yaml", "--idle-exit", "2"}, dir);
  EXPECT_EQ(p2.wait_for(60s), 0) << p2.stderr_text();
  // 1000 snapshot rows, 1000 updates, 10 deletes: each exactly once.
  EXPECT_EQ(xlen(c, "kill_t"), 2010);
  const auto changes = debezium_changes(c, "kill_t");
  EXPECT_EQ(changes.size(), 2010u);
  for (const auto& [change, n] : changes) EXPECT_EQ(n, 1) << change;
  auto pos = c.command({"HGET", "sluice:checkpoints", "rstream_kill"});
  ASSERT_TRUE(pos.ok());
  EXPECT_EQ((*pos)->type, REDIS_REPLY_STRING) << "the position is stored in Redis";
}

TEST(RedisStreamToPostgres, DebeziumEntriesWrittenByTheStreamModeEndEqualToTheSource) {
  TestDb src("rstream_dbz_src");
  TestDb dst("rstream_dbz_dst");
  ASSERT_TRUE(src.ok());
  ASSERT_TRUE(dst.ok());
  ASSERT_TRUE(src.sql().exec(kDdl));
  ASSERT_TRUE(dst.sql().exec(kDdl));
  ASSERT_TRUE(
      src.sql().exec("INSERT INTO t SELECT g, 'n' || g, g / 8.0 FROM generate_series(1, 500) g"));
  auto c = fresh("dbz:public.t", "rstream_dbz_in");
  auto dir = e2e::make_temp_dir("redis-stream-dbz-pg");
  e2e::write_file(dir / "in.yaml", pipeline("rstream_dbz_in", src.url(),
                                            {{"prefix", "dbz:"}, {"stream.format", "debezium"}}));
  Process in({"run", "in.yaml"}, dir);
  ASSERT_TRUE(test::wait_until([&] { return xlen(c, "dbz:public.t") == 500; }, 30s))
      << in.stderr_text();
  ASSERT_TRUE(src.sql().exec(
      "UPDATE t SET name = NULL, price = 0.125 WHERE id % 4 = 0; DELETE FROM t WHERE id % 9 = 0;"
      "INSERT INTO t VALUES (9000, 'k', 1.5)"));
  ASSERT_TRUE(test::wait_until([&] { return xlen(c, "dbz:public.t") == 500 + 125 + 55 + 1; }, 30s))
      << in.stderr_text();
  in.terminate();
  EXPECT_EQ(in.wait(), 0) << in.stderr_text();

  test::PipelineFile f;
  test::PipelineYaml& p = f.pipeline("rstream_dbz_out");
  test::YamlMap rs;
  rs.set("url", url_db(kDb))
      .set("streams", test::Yaml::strings({"dbz:*"}))
      .set("format", "debezium");
  p.source("redis").settings = rs;
  p.destination("postgres").set("url", dst.url());
  e2e::write_file(dir / "out.yaml", f.yaml());
  Process out({"run", "out.yaml", "--idle-exit", "2"}, dir);
  EXPECT_EQ(out.wait_for(60s), 0) << out.stderr_text();
  const char* q = "SELECT id, coalesce(name, '<null>'), price::text FROM t ORDER BY id";
  const auto want = src.sql().query(q);
  EXPECT_EQ(want.size(), 500u - 55u + 1u);
  EXPECT_EQ(dst.sql().query(q), want);
}

}  // namespace
}  // namespace sluice::pgtest
