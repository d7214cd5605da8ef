// Redaction of secrets (issue 13, item 8): registered values, raw and percent-decoded, and the
// password of any URL in a message.
#include <gtest/gtest.h>

#include "sluice/secrets.h"

namespace sluice {
namespace {

class Secrets : public ::testing::Test {
 protected:
  void SetUp() override { clear_secrets_for_testing(); }
  void TearDown() override { clear_secrets_for_testing(); }
};

TEST_F(Secrets, RegisteredValuesAreMaskedEverywhere) {
  register_secret("p@ss/w%rd");
  EXPECT_EQ(redact("auth p@ss/w%rd failed; again p@ss/w%rd"), "auth *** failed; again ***");
  EXPECT_TRUE(contains_secret("xp@ss/w%rdx"));
  EXPECT_FALSE(contains_secret("nothing here"));
}

TEST_F(Secrets, AWordLikeSecretIsMaskedWhereItStandsAloneNotInsideLongerNames) {
  register_secret("sluice");
  EXPECT_EQ(redact("slot sluice_p of db sluice_t: password \"sluice\" (user=sluice)"),
            "slot sluice_p of db sluice_t: password \"***\" (user=***)");
  EXPECT_EQ(redact("sluice"), "***");
}

TEST_F(Secrets, PercentEncodedFormsAreMaskedToo) {
  register_secret("a%2Fb%40c");
  EXPECT_EQ(redact("a/b@c"), "***");
  EXPECT_EQ(redact("a%2Fb%40c"), "***");
}

TEST_F(Secrets, UrlPasswordsAreRegisteredWholeAndMaskedInMessages) {
  register_url_secret(R"(postgresql://u:Sx/y@z:w?d#q"b k@127.0.0.1:5432/db)");
  EXPECT_EQ(redact(R"(the password is Sx/y@z:w?d#q"b k)"), "the password is ***");
  // An unregistered URL in a message: its user info password is masked.
  EXPECT_EQ(redact("cannot connect to mysql://root:hunter2@db:3306/x: refused"),
            "cannot connect to mysql://root:***@db:3306/x: refused");
  EXPECT_EQ(redact("kafka://broker:9092 and http://127.0.0.1:8080/metrics"),
            "kafka://broker:9092 and http://127.0.0.1:8080/metrics");
}

TEST_F(Secrets, ShortValuesAreNotRegistered) {
  register_secret("ab");
  EXPECT_EQ(redact("abc ab"), "abc ab");
}

}  // namespace
}  // namespace sluice
