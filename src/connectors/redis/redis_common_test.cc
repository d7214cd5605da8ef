#include "connectors/redis/redis_common.h"

#include <gtest/gtest.h>

namespace sluice::redis {
namespace {

RedisUrl parse_ok(std::string_view text, Credentials c = {}) {
  auto u = parse_redis_url(text, std::move(c));
  EXPECT_TRUE(u.ok()) << text << ": " << (u.ok() ? "" : u.error().message());
  return u.ok() ? u.value() : RedisUrl{};
}

std::string parse_error(std::string_view text) {
  auto u = parse_redis_url(text);
  EXPECT_FALSE(u.ok()) << text;
  if (u.ok()) return "";
  EXPECT_EQ(u.error().code(), Errc::invalid_argument);
  return u.error().message();
}

TEST(RedisUrlTest, ParsesEveryPart) {
  RedisUrl u = parse_ok("redis://sluice:se%40cret@127.0.0.1:16379/3");
  EXPECT_EQ(u.user, "sluice");
  EXPECT_EQ(u.password, "se@cret");
  EXPECT_EQ(u.host, "127.0.0.1");
  EXPECT_EQ(u.port, 16379);
  EXPECT_EQ(u.db, 3);
  EXPECT_EQ(u.redacted(), "redis://sluice:***@127.0.0.1:16379/3");
}

TEST(RedisUrlTest, DefaultsAndPasswordOnly) {
  RedisUrl u = parse_ok("redis://localhost");
  EXPECT_EQ(u.port, 6379);
  EXPECT_EQ(u.db, 0);
  EXPECT_TRUE(u.user.empty());
  EXPECT_TRUE(u.password.empty());
  EXPECT_EQ(u.redacted(), "redis://localhost:6379/0");

  RedisUrl p = parse_ok("redis://:pw@[::1]:7000/");
  EXPECT_TRUE(p.user.empty());
  EXPECT_EQ(p.password, "pw");
  EXPECT_EQ(p.host, "::1");
  EXPECT_EQ(p.redacted(), "redis://:***@[::1]:7000/0");
}

TEST(RedisUrlTest, CredentialSettingsOverrideTheUrl) {
  RedisUrl u = parse_ok("redis://h:1",
                        Credentials{.user = "app", .password = "p@ss/%", .password_file = ""});
  EXPECT_EQ(u.user, "app");
  EXPECT_EQ(u.password, "p@ss/%");
}

TEST(RedisUrlTest, RefusesWhatItCannotHonour) {
  EXPECT_NE(parse_error("rediss://h:6380").find("TLS"), std::string::npos);
  EXPECT_NE(parse_error("http://h").find("redis://"), std::string::npos);
  EXPECT_NE(parse_error("redis://h:0").find("port"), std::string::npos);
  EXPECT_NE(parse_error("redis://h:1/x").find("database"), std::string::npos);
  EXPECT_NE(parse_error("redis://h:1/-1").find("database"), std::string::npos);
  EXPECT_NE(parse_error("redis://h?db=1").find("query"), std::string::npos);
  EXPECT_NE(parse_error("redis://user@h").find("no password"), std::string::npos);
  EXPECT_NE(parse_error("redis://").find("host"), std::string::npos);
  std::string e = parse_error("redis://u:topsecret@h:99999");
  EXPECT_EQ(e.find("topsecret"), std::string::npos) << e;
}

TEST(RedisReplyText, RendersNestedReplies) { EXPECT_EQ(reply_text(nullptr), "(no reply)"); }

}  // namespace
}  // namespace sluice::redis
