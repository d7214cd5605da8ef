// The postgres connectors' tls.* settings folded into the libpq connection string (apply_tls).
#include <gtest/gtest.h>

#include "connectors/postgres/pg_connection.h"

namespace sluice::pg {
namespace {

TEST(PgTls, SettingsReplaceTheUrlsSslKeywords) {
  std::string url = "postgresql://u:p@db.example:5433/app?sslmode=disable&sslrootcert=/old.pem";
  ASSERT_TRUE(apply_tls(url, {"verify_identity", "/dev/null", "/dev/null", "/dev/null", "pw"}));
  EXPECT_NE(url.find("host='db.example'"), std::string::npos) << url;
  EXPECT_NE(url.find("port='5433'"), std::string::npos) << url;
  EXPECT_NE(url.find("sslmode='verify-full'"), std::string::npos) << url;
  EXPECT_EQ(url.find("disable"), std::string::npos) << url;
  EXPECT_EQ(url.find("/old.pem"), std::string::npos) << url;
  EXPECT_NE(url.find("sslrootcert='/dev/null'"), std::string::npos) << url;
  EXPECT_NE(url.find("sslcert='/dev/null'"), std::string::npos) << url;
  EXPECT_NE(url.find("sslkey='/dev/null'"), std::string::npos) << url;
  EXPECT_NE(url.find("sslpassword='pw'"), std::string::npos) << url;
}

TEST(PgTls, ModesMapToSslmode) {
  for (auto [mode, sslmode] : {std::pair<const char*, const char*>{"disabled", "disable"},
                               {"preferred", "prefer"},
                               {"required", "require"}}) {
    std::string url = "postgresql://u@h/d";
    ASSERT_TRUE(apply_tls(url, {mode, "", "", "", ""}));
    EXPECT_NE(url.find(std::string("sslmode='") + sslmode + "'"), std::string::npos) << url;
  }
}

TEST(PgTls, NothingSetLeavesTheUrlAlone) {
  std::string url = "postgresql://u:p@h/d?sslmode=require";
  ASSERT_TRUE(apply_tls(url, {}));
  EXPECT_EQ(url, "postgresql://u:p@h/d?sslmode=require");
}

TEST(PgTls, CrossChecksNameTheSettings) {
  std::string url = "postgresql://u@h/d";
  Status s = apply_tls(url, {"verify_ca", "", "", "", ""});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("needs tls.ca"), std::string::npos);
}

}  // namespace
}  // namespace sluice::pg
