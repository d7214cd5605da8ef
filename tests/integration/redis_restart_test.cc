// The redis destination across a Redis restart mid-stream: PostgreSQL → a private Redis server
// (test::PrivateRedis: a data directory and port of its own, so no other test's server is
// touched); while Redis is down the source keeps changing, the writes are retried with backoff on
// new connections, and once Redis is back the keys end equal to the table row by row.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

#include "integration/pg_harness.h"
#include "support/pipeline_file.h"
#include "support/redis.h"

namespace sluice::pgtest {
namespace {

using e2e::Process;

std::map<std::string, std::string> redis_names(const std::string& url) {
  std::map<std::string, std::string> out;
  auto u = redis::parse_redis_url(url);
  if (!u.ok()) return out;
  auto c = redis::RedisConnection::connect(*u, {});
  if (!c.ok()) return out;
  std::string cursor = "0";
  do {
    auto scan = c->command({"SCAN", cursor, "MATCH", "public.t:*", "COUNT", "1000"});
    if (!scan.ok()) return {};
    cursor = redis::reply_text((*scan)->element[0]);
    for (size_t i = 0; i < (*scan)->element[1]->elements; ++i) {
      std::string key = redis::reply_text((*scan)->element[1]->element[i]);
      auto name = c->command({"HGET", key, "name"});
      out[key] = name.ok() ? redis::reply_text(name->get()) : "?";
    }
  } while (cursor != "0");
  return out;
}

TEST(RedisRestart, WritesRetryUntilRedisIsBackAndTheEndStateIsExact) {
  TestDb db("redis_restart");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id int PRIMARY KEY, name text NOT NULL)"));
  ASSERT_TRUE(db.sql().exec("INSERT INTO t SELECT g, 'a' || g FROM generate_series(1, 500) g"));
  test::PrivateRedis server;
  ASSERT_TRUE(server.ok());
  const std::string url = server.url();

  auto expected = [&] {
    std::map<std::string, std::string> out;
    for (const auto& r : db.sql().query("SELECT id::text, name FROM t"))
      out["public.t:" + *r[0]] = *r[1];
    return out;
  };
  auto dir = e2e::make_temp_dir("redis-restart");
  test::PipelineFile f;
  test::PipelineYaml& p = f.pipeline("redis_restart");
  p.source("postgres").set("url", db.url()).set("tables", test::Yaml::strings({"public.t"}));
  p.destination("redis").set("url", url).set("connect_timeout", "1s").set("command_timeout", "2s");
  p.max_records(100).linger_ms(20);
  e2e::write_file(dir / "p.yaml", f.yaml());
  Process run({"run", "p.yaml"}, dir);
  ASSERT_TRUE(test::wait_until([&] { return redis_names(url).size() == 500; }, 30s))
      << run.stderr_text();

  ASSERT_TRUE(server.stop());
  ASSERT_TRUE(db.sql().exec(
      "UPDATE t SET name = 'b' || id WHERE id % 2 = 0; DELETE FROM t WHERE id % 5 = 0;"
      "INSERT INTO t SELECT g, 'c' || g FROM generate_series(501, 600) g"));
  std::this_thread::sleep_for(2s);  // writes fail meanwhile and are retried
  EXPECT_LT(run.wait_for(10ms), 0) << "the pipeline keeps retrying: " << run.stderr_text();
  ASSERT_TRUE(server.start());
  EXPECT_TRUE(test::wait_until([&] { return redis_names(url) == expected(); }, 30s))
      << run.stderr_text();
  run.terminate();
  EXPECT_EQ(run.wait(), 0) << run.stderr_text();
}

}  // namespace
}  // namespace sluice::pgtest
