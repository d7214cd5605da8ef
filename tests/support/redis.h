// The Redis test server (scripts/services start redis, SLUICE_TEST_REDIS_URL: the ACL user
// `sluice`; the default user has the same password), and a connection for tests to set up
// and read back keys and streams with the connector's own RedisConnection.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <string_view>

#include "connectors/redis/redis_common.h"

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

}  // namespace sluice::test
