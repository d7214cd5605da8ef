// Unit tests of the mysql source that need no server: settings validation and the binlog
// configuration errors (the server-side behaviour is in tests/integration/mysql_source_test.cc).
#include "connectors/mysql/mysql_source.h"

#include <gtest/gtest.h>

#include "connectors/mysql/mysql_destination.h"
#include "sluice/settings.h"

namespace sluice {
namespace {

TEST(MysqlSourceConfig, BinlogOffAndNotRowNameTheFix) {
  EXPECT_FALSE(mysql_binlog_config_problem("1", "ROW", "mysql://u:***@h:3306/d").has_value());
  auto off = mysql_binlog_config_problem("0", "ROW", "mysql://u:***@h:3306/d");
  ASSERT_TRUE(off.has_value());
  EXPECT_NE(off->find("binary logging is off"), std::string::npos);
  EXPECT_NE(off->find("log_bin"), std::string::npos);
  auto stmt = mysql_binlog_config_problem("1", "STATEMENT", "mysql://u:***@h:3306/d");
  ASSERT_TRUE(stmt.has_value());
  EXPECT_NE(stmt->find("binlog_format is STATEMENT"), std::string::npos);
  EXPECT_NE(stmt->find("binlog_format=ROW"), std::string::npos);
  auto mixed = mysql_binlog_config_problem("1", "MIXED", "x");
  ASSERT_TRUE(mixed.has_value());
  EXPECT_EQ(mixed->find('\n'), std::string::npos);
}

Result<std::unique_ptr<Source>> make(const std::map<std::string, std::string>& text) {
  Settings s(mysql_source_settings());
  if (auto err = settings_from_text(mysql_source_settings(), text, &s))
    return Error(Errc::config, *err);
  return make_mysql_source(s);
}

TEST(MysqlSourceConfig, SettingsAreValidated) {
  EXPECT_TRUE(make({{"url", "mysql://u:p@h:3306/d"}}).ok());
  EXPECT_TRUE(make({{"url", "mysql://u:p@h/d"}, {"tables", "d.t"}}).ok());
  EXPECT_TRUE(make({{"url", "mysql://u:p@h/d"}, {"tables", "d.*"}}).ok());
  EXPECT_TRUE(make({{"url", "mysql://u:p@h/d"}, {"tables", "t"}}).ok());
  auto bad_table = make({{"url", "mysql://u:p@h/d"}, {"tables", "a.b.c"}});
  ASSERT_FALSE(bad_table.ok());
  EXPECT_NE(bad_table.error().message().find("tables"), std::string::npos);
  EXPECT_FALSE(make({{"url", "mysql://u:p@h/d"}, {"tables", "a*"}}).ok());
  auto bad_url = make({{"url", "postgres://u:secret@h/d"}});
  ASSERT_FALSE(bad_url.ok());
  EXPECT_EQ(bad_url.error().message().find("secret"), std::string::npos);
  EXPECT_FALSE(make({{"url", "mysql://u:p@h/d"}, {"heartbeat.interval", "10ms"}}).ok());
  EXPECT_FALSE(make({{"url", "mysql://u:p@h/d"}, {"server_id", "-5"}}).ok());
  EXPECT_FALSE(make({{"url", "mysql://u:p@h/d"}, {"tls.mode", "verify_ca"}}).ok());
  EXPECT_FALSE(make({{"url", "mysql://u:p@h/d"}, {"snapshot.mode", "sometimes"}}).ok());
}

// Checksums may go unverified only where TLS checks the bytes in transit.
TEST(MysqlSourceConfig, UnverifiedChecksumsNeedACheckedTransport) {
  const std::string url = "mysql://u:p@h/d";
  EXPECT_TRUE(make({{"url", url}, {"binlog.verify_checksum", "true"}}).ok());
  for (const char* mode : {"disabled", "preferred"}) {
    auto plain = make({{"url", url}, {"binlog.verify_checksum", "false"}, {"tls.mode", mode}});
    ASSERT_FALSE(plain.ok()) << mode;
    EXPECT_NE(plain.error().message().find("binlog.verify_checksum"), std::string::npos);
    EXPECT_NE(plain.error().message().find(mode), std::string::npos);
  }
  auto plain_default = make({{"url", url}, {"binlog.verify_checksum", "false"}});
  EXPECT_FALSE(plain_default.ok());  // tls.mode preferred may fall back to plain text
  EXPECT_TRUE(
      make({{"url", url}, {"binlog.verify_checksum", "false"}, {"tls.mode", "required"}}).ok());
}

// The destination's options struct keeps initializers for code that builds it directly; they must
// be the settings table's defaults.
TEST(MysqlSettings, DestinationDefaultsMatchTheOptionsStruct) {
  Settings s;
  s.set("url", std::string("mysql://u:p@h/d"));
  auto bound = mysql_destination_options(s);
  ASSERT_TRUE(bound.ok()) << bound.error().message();
  MysqlDestinationOptions direct;
  EXPECT_EQ(bound->table, direct.table);
  EXPECT_EQ(bound->tls_mode, direct.tls_mode);
  EXPECT_EQ(bound->tls_ca, direct.tls_ca);
  EXPECT_EQ(bound->max_statement_size, direct.max_statement_size);
  EXPECT_EQ(bound->connect_timeout, direct.connect_timeout);
  EXPECT_EQ(bound->query_timeout, direct.query_timeout);
  EXPECT_EQ(bound->tcp_user_timeout, direct.tcp_user_timeout);
  EXPECT_EQ(bound->checkpoint_in_destination, direct.checkpoint_in_destination);
  EXPECT_EQ(bound->unrepresentable_values, direct.unrepresentable_values);
}

}  // namespace
}  // namespace sluice
