// The connection module's rules that need no server: TLS settings and errno classification.
#include "connectors/mysql/mysql_connection.h"

#include <errmsg.h>
#include <gtest/gtest.h>
#include <mysqld_error.h>

namespace sluice::mysql {
namespace {

TEST(MysqlConnectionTest, TlsOptionsAreChecked) {
  EXPECT_TRUE(validate_tls_options({"preferred", "", "", "", ""}).ok());
  EXPECT_TRUE(validate_tls_options({"disabled", "", "", "", ""}).ok());
  EXPECT_TRUE(validate_tls_options({"verify_ca", "/dev/null", "", "", ""}).ok());
  // The files must be readable: validate says so before any connection.
  Status missing = validate_tls_options({"verify_ca", "/nonexistent/ca.pem", "", "", ""});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("setting 'tls.ca': cannot read"), std::string::npos);
  EXPECT_FALSE(validate_tls_options({"required", "", "/dev/null", "", ""}).ok());  // no tls.key
  Status unknown = validate_tls_options({"on", "", "", "", ""});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code(), Errc::invalid_argument);
  EXPECT_NE(unknown.error().message().find("tls.mode \"on\""), std::string::npos);
  Status no_ca = validate_tls_options({"verify_identity", "", "", "", ""});
  ASSERT_FALSE(no_ca.ok());
  EXPECT_NE(no_ca.error().message().find("tls.ca"), std::string::npos);
}

TEST(MysqlConnectionTest, ErrnoClassification) {
  auto c = classify_errno(ER_LOCK_DEADLOCK);
  EXPECT_EQ(c.code, Errc::conflict);
  EXPECT_TRUE(c.retriable);
  EXPECT_FALSE(c.connection_lost);
  for (unsigned no : {unsigned(CR_SERVER_GONE_ERROR), unsigned(CR_SERVER_LOST),
                      unsigned(CR_CONN_HOST_ERROR), unsigned(ER_SERVER_SHUTDOWN),
                      unsigned(ER_CON_COUNT_ERROR), unsigned(ER_NET_READ_ERROR), 4031u}) {
    c = classify_errno(no);
    EXPECT_EQ(c.code, Errc::connection) << no;
    EXPECT_TRUE(c.retriable) << no;
    EXPECT_TRUE(c.connection_lost) << no;
  }
  EXPECT_EQ(classify_errno(ER_ACCESS_DENIED_ERROR).code, Errc::auth);
  EXPECT_FALSE(classify_errno(ER_ACCESS_DENIED_ERROR).retriable);
  EXPECT_EQ(classify_errno(ER_TABLEACCESS_DENIED_ERROR).code, Errc::permission);
  EXPECT_EQ(classify_errno(ER_NO_SUCH_TABLE).code, Errc::not_found);
  c = classify_errno(ER_DUP_ENTRY);
  EXPECT_EQ(c.code, Errc::data);
  EXPECT_FALSE(c.retriable);
  EXPECT_EQ(classify_errno(ER_DATA_TOO_LONG).code, Errc::data);
}

TEST(MysqlConnectionTest, QuoteIdentifierDoublesBackticks) {
  EXPECT_EQ(quote_identifier("orders"), "`orders`");
  EXPECT_EQ(quote_identifier("we`ird"), "`we``ird`");
  EXPECT_EQ(quote_identifier(""), "``");
}

TEST(MysqlConnectionTest, ConnectFailureIsRetriableAndNeverShowsThePassword) {
  ConnectOptions o;
  auto url = parse_mysql_url("mysql://u:secret-pw@127.0.0.1:1/db");
  ASSERT_TRUE(url.ok());
  o.url = url.value();
  o.connect_timeout = std::chrono::milliseconds(1000);
  o.tls_mode = "disabled";
  auto c = MysqlConn::connect(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code(), Errc::connection);
  EXPECT_TRUE(c.error().retriable());
  EXPECT_EQ(c.error().message().find("secret-pw"), std::string::npos) << c.error().message();
  EXPECT_NE(c.error().message().find("cannot connect to"), std::string::npos);
}

}  // namespace
}  // namespace sluice::mysql
