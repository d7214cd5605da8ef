#include "connectors/mysql/mysql_url.h"

#include <gtest/gtest.h>

namespace sluice::mysql {
namespace {

MysqlUrl parse_ok(std::string_view text) {
  auto u = parse_mysql_url(text);
  EXPECT_TRUE(u.ok()) << text << ": " << (u.ok() ? "" : u.error().message());
  return u.ok() ? u.value() : MysqlUrl{};
}

std::string parse_error(std::string_view text) {
  auto u = parse_mysql_url(text);
  EXPECT_FALSE(u.ok()) << text;
  if (u.ok()) return "";
  EXPECT_EQ(u.error().code(), Errc::invalid_argument);
  return u.error().message();
}

TEST(MysqlUrlTest, ParsesEveryPart) {
  MysqlUrl u = parse_ok("mysql://sluice:secret@127.0.0.1:13306/sluice");
  EXPECT_EQ(u.user, "sluice");
  EXPECT_EQ(u.password, "secret");
  EXPECT_EQ(u.host, "127.0.0.1");
  EXPECT_EQ(u.port, 13306);
  EXPECT_EQ(u.database, "sluice");
}

TEST(MysqlUrlTest, DefaultsPortAndAcceptsMariadbSchemeAndNoPassword) {
  MysqlUrl u = parse_ok("mariadb://root@db.example.com/app/");
  EXPECT_EQ(u.user, "root");
  EXPECT_EQ(u.password, "");
  EXPECT_EQ(u.host, "db.example.com");
  EXPECT_EQ(u.port, 3306);
  EXPECT_EQ(u.database, "app");
}

TEST(MysqlUrlTest, PercentDecodesUserPasswordAndDatabase) {
  MysqlUrl u = parse_ok("mysql://us%65r%3Ax:p%40ss%3Aw%2Fo%25rd@h:1/my%20db");
  EXPECT_EQ(u.user, "user:x");
  EXPECT_EQ(u.password, "p@ss:w/o%rd");
  EXPECT_EQ(u.database, "my db");
}

TEST(MysqlUrlTest, UnencodedAtAndColonInPasswordUseTheLastAt) {
  MysqlUrl u = parse_ok("mysql://u:a@b:c@host:3307/d");
  EXPECT_EQ(u.user, "u");
  EXPECT_EQ(u.password, "a@b:c");
  EXPECT_EQ(u.host, "host");
  EXPECT_EQ(u.port, 3307);
}

TEST(MysqlUrlTest, BracketedIpv6Host) {
  MysqlUrl u = parse_ok("mysql://u:p@[::1]:3308/d");
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.port, 3308);
  EXPECT_EQ(u.redacted(), "mysql://u:***@[::1]:3308/d");
}

TEST(MysqlUrlTest, RedactedNeverShowsThePassword) {
  MysqlUrl u = parse_ok("mysql://sluice:topsecret@127.0.0.1:13306/sluice");
  EXPECT_EQ(u.redacted(), "mysql://sluice:***@127.0.0.1:13306/sluice");
  EXPECT_EQ(u.redacted().find("topsecret"), std::string::npos);
}

TEST(MysqlUrlTest, RejectsMalformedUrlsWithoutEchoingThePassword) {
  EXPECT_NE(parse_error("postgresql://u:p@h/d").find("scheme"), std::string::npos);
  EXPECT_NE(parse_error("mysql://u:p@h:0/d").find("port"), std::string::npos);
  EXPECT_NE(parse_error("mysql://u:p@h:65536/d").find("port"), std::string::npos);
  EXPECT_NE(parse_error("mysql://u:p@h:12x/d").find("port"), std::string::npos);
  EXPECT_NE(parse_error("mysql://u:p@h").find("database"), std::string::npos);
  EXPECT_NE(parse_error("mysql://u:p@/d").find("host"), std::string::npos);
  EXPECT_NE(parse_error("mysql://h:1/d").find("user"), std::string::npos);
  EXPECT_NE(parse_error("mysql://u:p@[::1/d").find("IPv6"), std::string::npos);
  EXPECT_NE(parse_error("mysql://u:p@h/d?ssl=1").find("tls.mode"), std::string::npos);
  std::string e = parse_error("mysql://u:sec%zzret@h/d");
  EXPECT_NE(e.find("password"), std::string::npos);
  EXPECT_EQ(e.find("sec"), std::string::npos);
  EXPECT_EQ(parse_error("mysql://u:secret@h:99999/d").find("secret"), std::string::npos);
}

TEST(MysqlUrlTest, PercentDecode) {
  std::string out;
  EXPECT_TRUE(percent_decode("a%20b%2fc", &out));
  EXPECT_EQ(out, "a b/c");
  EXPECT_FALSE(percent_decode("abc%2", &out));
  EXPECT_FALSE(percent_decode("abc%", &out));
  EXPECT_FALSE(percent_decode("%g0", &out));
}

}  // namespace
}  // namespace sluice::mysql
