// The sluice binary writing to Redis (the redis destination): PostgreSQL → Redis as hashes and as
// JSON strings (snapshot, then inserts, updates, deletes and a truncate), MySQL → Redis, and a
// kill -9 under checkpoint_in_destination. Every test ends comparing the source table with the
// Redis keys row by row.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "integration/pg_harness.h"
#include "support/pipeline_file.h"
#include "support/redis.h"
#include "support/sql.h"

namespace sluice::pgtest {
namespace {

using e2e::Process;

std::string url_db(int db) {
  std::string u = test::redis_url();
  const size_t slash = u.find('/', u.find("//") + 2);
  if (slash != std::string::npos) u.resize(slash);
  return u + "/" + std::to_string(db);
}

redis::RedisConnection fresh(int db) {
  redis::RedisConnection c = test::redis_connect(db);
  EXPECT_TRUE(c.command({"FLUSHDB"}).ok());
  return c;
}

// Every hash under `pattern` as key -> "field=value;..." (fields sorted).
std::map<std::string, std::string> redis_rows(redis::RedisConnection& c, const std::string& pattern,
                                              bool json) {
  std::map<std::string, std::string> out;
  std::string cursor = "0";
  do {
    auto scan = c.command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    EXPECT_TRUE(scan.ok());
    if (!scan.ok()) return out;
    cursor = redis::reply_text((*scan)->element[0]);
    for (size_t i = 0; i < (*scan)->element[1]->elements; ++i) {
      std::string key = redis::reply_text((*scan)->element[1]->element[i]);
      if (json) {
        out[key] = redis::reply_text(c.command({"GET", key})->get());
        continue;
      }
      auto h = c.command({"HGETALL", key});
      std::map<std::string, std::string> fields;
      for (size_t k = 0; k + 1 < (*h)->elements; k += 2)
        fields[redis::reply_text((*h)->element[k])] = redis::reply_text((*h)->element[k + 1]);
      std::string text;
      for (const auto& [f, v] : fields) text += f + "=" + v + ";";
      out[key] = text;
    }
  } while (cursor != "0");
  return out;
}

std::string yaml(const std::string& id, const std::string& source, const test::YamlMap& src,
                 const std::map<std::string, test::Yaml>& dest) {
  test::PipelineFile f;
  test::PipelineYaml& p = f.pipeline(id);
  p.source(source).settings = src;
  test::ConnectorYaml& d = p.destination("redis");
  for (const auto& [k, v] : dest) d.set(k, v);
  p.max_records(500).linger_ms(20);
  return f.yaml();
}

// Rows of `t` (id, name, price, note) as the redis hashes hold them.
std::map<std::string, std::string> pg_rows(TestDb& db, const std::string& prefix) {
  std::map<std::string, std::string> out;
  for (const auto& r :
       db.sql().query("SELECT id::text, name, price::text, note FROM t ORDER BY id")) {
    std::string text = "id=" + *r[0] + ";";
    if (r[1]) text += "name=" + *r[1] + ";";
    if (r[3]) text += "note=" + *r[3] + ";";
    text += "price=" + *r[2] + ";";
    out[prefix + *r[0]] = text;
  }
  return out;
}

constexpr const char* kDdl =
    "CREATE TABLE t (id int PRIMARY KEY, name text, price numeric(10,2) NOT NULL, note text)";

TEST(PostgresToRedis, HashRowsSnapshotThenChangesEndEqualToTheSource) {
  TestDb db("redis_hash");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec(kDdl));
  // Out of line, uncompressed: an UPDATE of another column sends the note as unchanged TOAST.
  ASSERT_TRUE(db.sql().exec("ALTER TABLE t ALTER note SET STORAGE EXTERNAL"));
  ASSERT_TRUE(db.sql().exec(
      "INSERT INTO t SELECT g, 'n' || g, g / 4.0, CASE WHEN g % 3 = 0 THEN repeat('x', 3000) "
      "END FROM generate_series(1, 2000) g"));
  auto c = fresh(6);
  auto dir = e2e::make_temp_dir("pg-redis-hash");
  test::YamlMap src;
  src.set("url", db.url()).set("tables", test::Yaml::strings({"public.t"}));
  e2e::write_file(dir / "p.yaml",
                  yaml("redis_hash", "postgres", src, {{"url", url_db(6)}, {"prefix", "cdc:"}}));
  Process p({"run", "p.yaml"}, dir);
  ASSERT_TRUE(
      test::wait_until([&] { return redis_rows(c, "cdc:public.t:*", false).size() == 2000; }, 30s))
      << p.stderr_text();
  // Changes: a TOASTed note stays when another column changes, NULLs drop fields, deletes, a
  // key change, a truncate and rows after it.
  ASSERT_TRUE(
      db.sql().exec("UPDATE t SET price = price + 1 WHERE id % 3 = 0 AND id < 300;"
                    "UPDATE t SET name = NULL WHERE id % 5 = 0;"
                    "DELETE FROM t WHERE id % 7 = 0;"
                    "UPDATE t SET id = 100000 WHERE id = 1;"));
  ASSERT_TRUE(test::wait_until(
      [&] { return redis_rows(c, "cdc:public.t:*", false) == pg_rows(db, "cdc:public.t:"); }, 30s))
      << p.stderr_text();
  ASSERT_TRUE(db.sql().exec("TRUNCATE t; INSERT INTO t VALUES (5, 'five', 5.5, NULL)"));
  ASSERT_TRUE(test::wait_until(
      [&] { return redis_rows(c, "cdc:public.t:*", false) == pg_rows(db, "cdc:public.t:"); }, 30s))
      << p.stderr_text();
  EXPECT_EQ(redis_rows(c, "cdc:public.t:*", false).size(), 1u);
  p.terminate();
  EXPECT_EQ(p.wait(), 0) << p.stderr_text();
}

TEST(PostgresToRedis, JsonRowsAndKillNineWithCheckpointInDestination) {
  TestDb db("redis_json");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec(kDdl));
  ASSERT_TRUE(db.sql().exec("ALTER TABLE t REPLICA IDENTITY FULL"));
  ASSERT_TRUE(db.sql().exec(
      "INSERT INTO t SELECT g, 'n' || g, g / 4.0, NULL FROM generate_series(1, 1000) g"));
  auto c = fresh(7);
  auto dir = e2e::make_temp_dir("pg-redis-json");
  test::YamlMap src;
  src.set("url", db.url()).set("tables", test::Yaml::strings({"public.t"}));
  e2e::write_file(dir / "p.yaml", yaml("redis_json", "postgres", src,
                                       {{"url", url_db(7)},
                                        {"format", "json"},
                                        {"table", "{{table}}"},
                                        {"checkpoint_in_destination", true}}));
  auto expected = [&] {
    std::map<std::string, std::string> out;
    for (const auto& r : db.sql().query(
             "SELECT id::text, json_build_object('id', id, 'name', name, 'price', price::text, "
             "'note', note)::text FROM t ORDER BY id"))
      out["t:" + *r[0]] = *r[1];
    return out;
  };
  auto normalize = [](std::map<std::string, std::string> m) {
    for (auto& [k, v] : m) {
      std::string s;
      for (char ch : v)
        if (ch != ' ') s += ch;
      v = s;
    }
    return m;
  };
  {
    Process p({"run", "p.yaml"}, dir);
    ASSERT_TRUE(test::wait_until([&] { return redis_rows(c, "t:*", true).size() == 1000; }, 30s))
        << p.stderr_text();
    // Writes in flight when sluice dies.
    for (int i = 0; i < 20; ++i)
      ASSERT_TRUE(
          db.sql().exec("UPDATE t SET price = price + 1 WHERE id % 20 = " + std::to_string(i)));
    p.kill9();
  }
  ASSERT_TRUE(
      db.sql().exec("DELETE FROM t WHERE id > 900; INSERT INTO t VALUES (5000, 'x', 1, 'y')"));
  Process p2({"run", "p.yaml", "--idle-exit", "2"}, dir);
  EXPECT_EQ(p2.wait_for(60s), 0) << p2.stderr_text();
  EXPECT_EQ(normalize(redis_rows(c, "t:*", true)), normalize(expected()));
  auto pos = c.command({"HGET", "sluice:checkpoints", "redis_json"});
  ASSERT_TRUE(pos.ok());
  EXPECT_EQ((*pos)->type, REDIS_REPLY_STRING) << "the position is stored in Redis";
}

TEST(MysqlToRedis, RowsEndEqualToTheSource) {
  test::MysqlDatabase db("sluice_t_redis_my");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec(
      "CREATE TABLE t (id int PRIMARY KEY, name varchar(20), price decimal(10,2) NOT NULL, note "
      "text)"));
  for (int i = 1; i <= 500; ++i)
    ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES (" + std::to_string(i) + ", 'n" +
                              std::to_string(i) + "', " + std::to_string(i) + ".25, NULL)"));
  auto c = fresh(8);
  auto dir = e2e::make_temp_dir("my-redis");
  test::YamlMap src;
  src.set("url", db.url()).set("tables", test::Yaml::strings({db.name() + ".t"}));
  e2e::write_file(dir / "p.yaml", yaml("redis_my", "mysql", src, {{"url", url_db(8)}}));
  Process p({"run", "p.yaml"}, dir);
  const std::string pattern = db.name() + ".t:*";
  ASSERT_TRUE(test::wait_until([&] { return redis_rows(c, pattern, false).size() == 500; }, 30s))
      << p.stderr_text();
  ASSERT_TRUE(db.sql().exec(
      "UPDATE t SET note = 'hello', name = NULL WHERE id % 4 = 0; DELETE FROM t WHERE id % 9 = "
      "0; INSERT INTO t VALUES (1000, 'k:y', 0.5, NULL)"));
  auto expected = [&] {
    std::map<std::string, std::string> out;
    for (const auto& r : db.sql().query("SELECT id, name, price, note FROM t")) {
      std::string text = "id=" + *r[0] + ";";
      if (r[1]) text += "name=" + *r[1] + ";";
      if (r[3]) text += "note=" + *r[3] + ";";
      text += "price=" + *r[2] + ";";
      out[db.name() + ".t:" + *r[0]] = text;
    }
    return out;
  };
  EXPECT_TRUE(test::wait_until([&] { return redis_rows(c, pattern, false) == expected(); }, 30s))
      << p.stderr_text();
  p.terminate();
  EXPECT_EQ(p.wait(), 0) << p.stderr_text();
}

}  // namespace
}  // namespace sluice::pgtest
