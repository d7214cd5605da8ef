// The Redis test server (scripts/services start redis, SLUICE_TEST_REDIS_URL: the ACL user
// `sluice`; the default user has the same password), a connection for tests to set up and read
// back keys and streams with the connector's own RedisConnection, and PrivateRedis: a Redis server
// of a test's own (on a free port, in a temporary services directory), for tests that stop and
// start it, so the shared one is never touched.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "connectors/redis/redis_common.h"
#include "support/process.h"

namespace sluice::test {

// The password scripts/services gives a Redis it starts (its default user and the ACL user
// `sluice`): for tests that start a private Redis through the script.
inline constexpr const char* kRedisTestPassword = "redis-test-pw";

inline std::string redis_url() {
  const char* u = std::getenv("SLUICE_TEST_REDIS_URL");
  if (!u || !*u) {
    ADD_FAILURE() << "SLUICE_TEST_REDIS_URL is not set: run `eval \"$(scripts/services start "
                     "redis)\"` (make test does)";
    return "redis://127.0.0.1:1";
  }
  return u;
}

// A connection to the test server (database `db`); fails the test when it cannot connect.
inline redis::RedisConnection redis_connect(int db = 0) {
  auto url = redis::parse_redis_url(redis_url());
  EXPECT_TRUE(url.ok()) << (url.ok() ? "" : url.error().message());
  url->db = db;
  auto conn = redis::RedisConnection::connect(*url, {});
  if (!conn.ok()) {
    ADD_FAILURE() << conn.error().message();
    std::abort();
  }
  return std::move(conn).value();
}

// A free TCP port on the loopback interface (0 when none could be found): bound, read and
// released, so another process could take it in between (the callers start a server on it at once).
inline int free_port() {
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

#ifdef SLUICE_SOURCE_DIR
// A Redis server of the test's own: `scripts/services start redis` with SLUICE_SERVICES_DIR a
// temporary directory and SLUICE_REDIS_PORT a free port (both set in this process's environment
// for each call), stopped and removed at the end. stop() and start() restart it for real, its data
// directory (RDB/AOF) kept in between.
class PrivateRedis {
 public:
  PrivateRedis() : dir_(make_temp_dir("private-redis")), port_(free_port()) {
    ok_ = port_ != 0 && start();
  }
  ~PrivateRedis() {
    (void)services("stop redis");
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  PrivateRedis(const PrivateRedis&) = delete;
  PrivateRedis& operator=(const PrivateRedis&) = delete;

  bool ok() const { return ok_; }
  int port() const { return port_; }
  // The ACL user `sluice`, database `db`.
  std::string url(int db = 0) const {
    return std::string("redis://sluice:") + kRedisTestPassword +
           "@127.0.0.1:" + std::to_string(port_) + "/" + std::to_string(db);
  }
  bool start() { return services("start redis") == 0; }
  bool stop() { return services("stop redis") == 0; }

 private:
  int services(const std::string& args) const {
    setenv("SLUICE_SERVICES_DIR", dir_.c_str(), 1);
    setenv("SLUICE_REDIS_PORT", std::to_string(port_).c_str(), 1);
    const std::string cmd = std::string(SLUICE_SOURCE_DIR) + "/scripts/services " + args + " >&2";
    return std::system(cmd.c_str());
  }

  std::filesystem::path dir_;
  int port_;
  bool ok_ = false;
};
#endif

}  // namespace sluice::test
