// The redis source across a restart of the Redis server mid-stream: the source reconnects with
// backoff, reads its pending entries again, and the end state is every entry (keyed upserts),
// with nothing left pending. The server it restarts is its own (started here with scripts/services
// in a temporary SLUICE_SERVICES_DIR on a free port: PrivateRedis), never the shared one.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <thread>

#include "support/process.h"
#include "support/redis.h"
#include "support/sqlite.h"

namespace sluice::test {
namespace {

TEST(RedisSourceServerRestart, ReconnectsAndEndsWithEveryEntryAndNothingPending) {
  PrivateRedis server;
  ASSERT_TRUE(server.ok());
  setenv("SLUICE_TEST_REDIS_URL", server.url().c_str(), 1);  // redis_connect() below
  const int n = 40000;
  {
    redis::RedisConnection c = redis_connect();
    for (int i = 1; i <= n; ++i) {
      const std::string id = std::to_string(i);
      c.append({"XADD", "rr_stream", "*", "id", id, "v", "v" + id});
    }
    for (int i = 0; i < n; ++i) ASSERT_TRUE(c.read_reply().ok());
  }
  TempDir dir("redis_source_restart");
  write_file(dir / "p.yaml",
             "version: 1\n"
             "pipelines:\n"
             "  - id: rr\n"
             "    source:\n"
             "      connector: redis\n"
             "      settings: {url: \"" +
                 server.url() +
                 "\", streams: [rr_stream], key_fields: [id]}\n"
                 "    destination: {connector: sqlite, settings: {path: out.db}}\n"
                 "    batch: {max_records: 200}\n"
                 "checkpoints: {path: cp.db}\n"
                 "http: {listen: 127.0.0.1:0}\n");
  Process p({"run", "p.yaml", "--idle-exit", "3"}, dir.path());
  ASSERT_TRUE(wait_until(
      [&] {
        if (!std::filesystem::exists(dir / "out.db")) return false;
        SqliteFile f(dir / "out.db");
        return f.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'rr_stream'") == 1 &&
               f.scalar("SELECT count(*) FROM rr_stream") > 500;
      },
      std::chrono::seconds(15)))
      << p.stderr_text();
  ASSERT_TRUE(server.stop());
  std::this_thread::sleep_for(std::chrono::seconds(1));
  ASSERT_TRUE(server.start());
  ASSERT_EQ(p.wait_for(std::chrono::seconds(30)), 0) << p.stderr_text();
  EXPECT_NE(p.stderr_text().find("reconnected"), std::string::npos) << p.stderr_text();

  SqliteFile f(dir / "out.db");
  EXPECT_EQ(f.scalar("SELECT count(*) FROM rr_stream"), n);
  EXPECT_EQ(f.scalar("SELECT count(*) FROM rr_stream WHERE v = 'v' || id"), n);
  redis::RedisConnection c = redis_connect();
  auto r = c.command({"XPENDING", "rr_stream", "sluice-rr"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->element[0]->integer, 0);
}

}  // namespace
}  // namespace sluice::test
