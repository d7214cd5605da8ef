// The Redis connection the redis connectors share, against the real server (scripts/services
// start redis): AUTH with an ACL user and with the default user's password, SELECT, pipelining,
// error replies and one-line errors that never show the password.
#include <gtest/gtest.h>

#include "connectors/redis/redis_common.h"
#include "support/redis.h"

namespace sluice::redis {
namespace {

RedisUrl test_url() {
  auto u = parse_redis_url(test::redis_url());
  EXPECT_TRUE(u.ok());
  return u.ok() ? *u : RedisUrl{};
}

TEST(RedisConnection, AuthenticatesSelectsAndPipelines) {
  RedisUrl url = test_url();
  url.db = 5;
  auto conn = RedisConnection::connect(url, {.client_name = "sluice-test"});
  ASSERT_TRUE(conn.ok()) << conn.error().message();
  ASSERT_TRUE(conn->command({"SET", "redis_connection_test:k", "v5"}).ok());

  // The same key in database 0 is another key.
  RedisConnection db0 = test::redis_connect(0);
  ASSERT_TRUE(db0.command({"DEL", "redis_connection_test:k"}).ok());
  auto got = conn->command({"GET", "redis_connection_test:k"});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(reply_text(got->get()), "v5");

  for (int i = 0; i < 100; ++i) conn->append({"INCR", "redis_connection_test:n"});
  long long last = 0;
  for (int i = 0; i < 100; ++i) {
    auto r = conn->read_reply();
    ASSERT_TRUE(r.ok());
    last = (*r)->integer;
  }
  auto n = conn->command({"GET", "redis_connection_test:n"});
  EXPECT_EQ(std::to_string(last), reply_text(n->get()));
  EXPECT_TRUE(conn->command({"DEL", "redis_connection_test:n", "redis_connection_test:k"}).ok());
}

TEST(RedisConnection, DefaultUserPassword) {
  RedisUrl url = test_url();
  url.user.clear();
  auto conn = RedisConnection::connect(url, {});
  ASSERT_TRUE(conn.ok()) << conn.error().message();
  EXPECT_EQ(reply_text(conn->command({"PING"})->get()), "PONG");
}

TEST(RedisConnection, WrongPasswordIsAnAuthErrorWithoutThePassword) {
  RedisUrl url = test_url();
  url.password = "not-the-password-123";
  auto conn = RedisConnection::connect(url, {});
  ASSERT_FALSE(conn.ok());
  EXPECT_EQ(conn.error().code(), Errc::auth) << conn.error().message();
  EXPECT_EQ(conn.error().message().find("not-the-password-123"), std::string::npos);
  EXPECT_NE(conn.error().message().find("password"), std::string::npos);
}

TEST(RedisConnection, UnreachableServerIsARetriableConnectionError) {
  RedisUrl url = test_url();
  url.port = 1;
  auto conn = RedisConnection::connect(url, {});
  ASSERT_FALSE(conn.ok());
  EXPECT_EQ(conn.error().code(), Errc::connection);
  EXPECT_TRUE(conn.error().retriable());
  EXPECT_NE(conn.error().message().find("127.0.0.1:1"), std::string::npos);
}

TEST(RedisConnection, ErrorRepliesNameTheCommand) {
  RedisConnection conn = test::redis_connect();
  auto r = conn.command({"NOSUCHCOMMAND", "x"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("NOSUCHCOMMAND refused"), std::string::npos)
      << r.error().message();
  EXPECT_TRUE(conn.healthy());
}

TEST(RedisConnection, MissingAclPermissionIsAPermissionError) {
  RedisConnection admin = test::redis_connect();
  ASSERT_TRUE(admin
                  .command({"ACL", "SETUSER", "sluice_readonly", "on", ">ro-pass", "~*", "+@read",
                            "+auth", "+select", "+client"})
                  .ok());
  RedisUrl url = test_url();
  url.user = "sluice_readonly";
  url.password = "ro-pass";
  auto conn = RedisConnection::connect(url, {});
  ASSERT_TRUE(conn.ok()) << conn.error().message();
  auto w = conn->command({"SET", "redis_connection_test:ro", "1"});
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().code(), Errc::permission) << w.error().message();
  EXPECT_EQ(w.error().message().find("ro-pass"), std::string::npos);
}

}  // namespace
}  // namespace sluice::redis
