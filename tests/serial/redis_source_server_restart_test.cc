// The redis source across a restart of the Redis server mid-stream: the source reconnects with
// backoff, reads its pending entries again, and the end state is every entry (keyed upserts),
// with nothing left pending. The server it restarts is its own (started here with scripts/services
// in a temporary SLUICE_SERVICES_DIR on a free port), never the shared one.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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

int services(const std::string& args) {
  const std::string cmd = std::string(SLUICE_SOURCE_DIR) + "/scripts/services " + args + " >&2";
  return std::system(cmd.c_str());
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int got = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    got = ntohs(a.sin_port);
  ::close(fd);
  return got;
}

// A Redis server of this test's own.
class PrivateRedis {
 public:
  PrivateRedis() : dir_(make_temp_dir("private-redis")), port_(free_port()) {
    setenv("SLUICE_SERVICES_DIR", dir_.c_str(), 1);
    setenv("SLUICE_REDIS_PORT", std::to_string(port_).c_str(), 1);
    setenv("SLUICE_TEST_REDIS_URL", url().c_str(), 1);
    ok_ = port_ != 0 && services("start redis") == 0;
  }
  ~PrivateRedis() {
    (void)services("stop redis");
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  PrivateRedis(const PrivateRedis&) = delete;
  PrivateRedis& operator=(const PrivateRedis&) = delete;
  bool ok() const { return ok_; }
  std::string url() const {
    return std::string("redis://sluice:") + test::kRedisTestPassword +
           "@127.0.0.1:" + std::to_string(port_);
  }

 private:
  std::filesystem::path dir_;
  int port_;
  bool ok_ = false;
};

TEST(RedisSourceServerRestart, ReconnectsAndEndsWithEveryEntryAndNothingPending) {
  PrivateRedis server;
  ASSERT_TRUE(server.ok());
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
  ASSERT_EQ(services("stop redis"), 0);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  ASSERT_EQ(services("start redis"), 0);
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
