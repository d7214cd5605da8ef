// The kafka connectors' tls.* settings as librdkafka properties (kafka_common.h: apply_tls).
#include <gtest/gtest.h>

#include "connectors/kafka/kafka_common.h"

namespace sluice::kafka {
namespace {

using Props = std::map<std::string, std::string>;

TEST(KafkaTls, ModesBecomeLibrdkafkaProperties) {
  Props p;
  ASSERT_TRUE(apply_tls({"verify_identity", "/dev/null", "/dev/null", "/dev/null", "pw"}, p));
  EXPECT_EQ(p, (Props{{"security.protocol", "SSL"},
                      {"ssl.endpoint.identification.algorithm", "https"},
                      {"ssl.ca.location", "/dev/null"},
                      {"ssl.certificate.location", "/dev/null"},
                      {"ssl.key.location", "/dev/null"},
                      {"ssl.key.password", "pw"}}));
  Props ca;
  ASSERT_TRUE(apply_tls({"verify_ca", "/dev/null", "", "", ""}, ca));
  EXPECT_EQ(ca.at("ssl.endpoint.identification.algorithm"), "none");
  Props required;
  ASSERT_TRUE(apply_tls({"required", "", "", "", ""}, required));
  EXPECT_EQ(required.at("enable.ssl.certificate.verification"), "false");
  Props off;
  ASSERT_TRUE(apply_tls({"disabled", "", "", "", ""}, off));
  EXPECT_TRUE(off.empty());
}

TEST(KafkaTls, SaslSslIsKeptAndPlainTextRefused) {
  Props sasl{{"security.protocol", "sasl_ssl"}};
  ASSERT_TRUE(apply_tls({"verify_ca", "/dev/null", "", "", ""}, sasl));
  EXPECT_EQ(sasl.at("security.protocol"), "sasl_ssl");
  Props plain{{"security.protocol", "PLAINTEXT"}};
  Status s = apply_tls({"required", "", "", "", ""}, plain);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("rdkafka.security.protocol is PLAINTEXT"), std::string::npos)
      << s.error().message();
}

TEST(KafkaTls, ThePropertySetBothWaysIsAnError) {
  Props p{{"ssl.ca.location", "/other.pem"}};
  Status s = apply_tls({"verify_ca", "/dev/null", "", "", ""}, p);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("'tls.ca' and 'rdkafka.ssl.ca.location'"), std::string::npos)
      << s.error().message();
}

}  // namespace
}  // namespace sluice::kafka
