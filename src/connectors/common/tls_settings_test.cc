#include "connectors/common/tls_settings.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <unistd.h>

namespace sluice {
namespace {

std::string message_of(const TlsSettings& t) {
  Status s = check_tls_settings(t);
  return s.ok() ? std::string("ok") : s.error().message();
}

class TlsSettingsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = (std::filesystem::temp_directory_path() /
             ("sluice-tls-settings-" + std::to_string(::getpid()) + ".pem"))
                .string();
    std::ofstream(file_) << "-----BEGIN CERTIFICATE-----\n";
  }
  void TearDown() override { std::filesystem::remove(file_); }
  std::string file_;
};

TEST_F(TlsSettingsTest, VerifyModesNeedTheCa) {
  EXPECT_NE(message_of({"verify_ca", "", "", "", ""}).find("'tls.mode' verify_ca needs tls.ca"),
            std::string::npos);
  EXPECT_NE(message_of({"verify_identity", "", "", "", ""}).find("needs tls.ca"),
            std::string::npos);
  EXPECT_EQ(message_of({"verify_identity", file_, "", "", ""}), "ok");
  EXPECT_EQ(message_of({"required", "", "", "", ""}), "ok");
  EXPECT_EQ(message_of({"", "", "", "", ""}), "ok");
}

TEST_F(TlsSettingsTest, CertAndKeyGoTogether) {
  EXPECT_NE(message_of({"required", "", file_, "", ""}).find("'tls.cert' needs tls.key"),
            std::string::npos);
  EXPECT_NE(message_of({"required", "", "", file_, ""}).find("'tls.key' needs tls.cert"),
            std::string::npos);
  EXPECT_NE(message_of({"required", "", "", "", "pw"}).find("'tls.key_password' needs tls.key"),
            std::string::npos);
  EXPECT_EQ(message_of({"required", "", file_, file_, "pw"}), "ok");
}

TEST_F(TlsSettingsTest, FilesWithTlsDisabledAreRefused) {
  EXPECT_NE(message_of({"disabled", file_, "", "", ""})
                .find("'tls.ca' is set but tls.mode is "
                      "disabled"),
            std::string::npos);
}

TEST_F(TlsSettingsTest, AnUnreadableFileNamesTheSetting) {
  const std::string m = message_of({"verify_ca", "/nonexistent/ca.pem", "", "", ""});
  EXPECT_NE(m.find("setting 'tls.ca': cannot read \"/nonexistent/ca.pem\""), std::string::npos)
      << m;
}

TEST_F(TlsSettingsTest, TheKeyPasswordNeverAppearsInAnError) {
  const std::string m = message_of({"required", "", "", "", "hunter2-passphrase"});
  EXPECT_EQ(m.find("hunter2-passphrase"), std::string::npos) << m;
}

}  // namespace
}  // namespace sluice
