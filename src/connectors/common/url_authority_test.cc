#include "connectors/common/url_authority.h"

#include <gtest/gtest.h>

namespace sluice {
namespace {

TEST(UrlAuthority, ParsesUserPasswordHostPortAndPath) {
  auto u = parse_url_authority("al%40x:p@ss:w@db.example:6380/3/");
  ASSERT_TRUE(u.ok()) << u.error().message();
  EXPECT_EQ(u->user, "al@x");
  EXPECT_EQ(u->password, "p@ss:w");  // the last '@' ends the user info; ':' after the first is kept
  EXPECT_EQ(u->host, "db.example");
  ASSERT_TRUE(u->port.has_value());
  EXPECT_EQ(*u->port, 6380);
  EXPECT_EQ(u->path, "3");  // one trailing '/' dropped, not decoded
}

TEST(UrlAuthority, NoUserInfoNoPortNoPath) {
  auto u = parse_url_authority("localhost");
  ASSERT_TRUE(u.ok()) << u.error().message();
  EXPECT_EQ(u->user, "");
  EXPECT_EQ(u->password, "");
  EXPECT_EQ(u->host, "localhost");
  EXPECT_FALSE(u->port.has_value());
  EXPECT_EQ(u->path, "");
}

TEST(UrlAuthority, PasswordOnlyAndBracketedIpv6) {
  auto u = parse_url_authority(":secret@[::1]:7000");
  ASSERT_TRUE(u.ok()) << u.error().message();
  EXPECT_EQ(u->user, "");
  EXPECT_EQ(u->password, "secret");
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(*u->port, 7000);
}

TEST(UrlAuthority, AQueryOrFragmentInThePasswordIsNotOne) {
  auto u = parse_url_authority("u:a?b#c@h:1/d");
  ASSERT_TRUE(u.ok()) << u.error().message();
  EXPECT_EQ(u->password, "a?b#c");
}

TEST(UrlAuthority, ErrorsSayWhatIsWrongWithoutThePassword) {
  struct Case {
    const char* text;
    const char* expected;
  };
  for (const Case& c :
       {Case{"u:topsecret@h:0", "the port \"0\" is not a number from 1 to 65535"},
        Case{"u:topsecret@h:99999", "is not a number from 1 to 65535"},
        Case{"u:topsecret@h:", "the port \"\""}, Case{"u:topsecret@:5", "the host is missing"},
        Case{"u:topsecret@[::1", "lacks its closing ']'"},
        Case{"u:topsecret@[::1]x", "unexpected text after the IPv6 host"},
        Case{"u:topsecret@h/d?x=1", "query parameters are not supported (hint)"},
        Case{"u:topsecret@h#f", "a fragment ('#') is not allowed"},
        Case{"u%zz:topsecret@h", "the user has a malformed %-escape"},
        Case{"u:top%zsecret@h", "the password has a malformed %-escape"}}) {
    auto u = parse_url_authority(c.text, "hint");
    ASSERT_FALSE(u.ok()) << c.text;
    EXPECT_EQ(u.error().code(), Errc::invalid_argument);
    EXPECT_NE(u.error().message().find(c.expected), std::string::npos)
        << c.text << ": " << u.error().message();
    EXPECT_EQ(u.error().message().find("topsecret"), std::string::npos) << u.error().message();
  }
}

}  // namespace
}  // namespace sluice
