// The kafka destination's settings, without a broker: defaults, refused combinations, librdkafka
// pass-through errors (one line naming the property) before any connection.
#include "connectors/kafka/kafka_destination.h"

#include <gtest/gtest.h>

namespace sluice {
namespace {

Result<std::unique_ptr<Destination>> make(const std::map<std::string, std::string>& text) {
  Settings s(kafka_destination_settings());
  if (auto err = settings_from_text(kafka_destination_settings(), text, &s))
    return Error(Errc::invalid_argument, *err);
  return make_kafka_destination(s);
}

TEST(KafkaDestinationSettings, EverySettingHasADocLine) {
  for (const SettingSpec& spec : kafka_destination_settings())
    EXPECT_FALSE(spec.doc.empty()) << spec.name;
}

TEST(KafkaDestinationSettings, BrokersAloneIsEnoughAndDefaultsAreIdempotentOpenCdc) {
  auto d = make({{"brokers", "127.0.0.1:9092"}});
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_GT((*d)->max_in_flight(), 1u);
  EXPECT_FALSE((*d)->stores_positions());
}

TEST(KafkaDestinationSettings, TransactionsStorePositionsOneBatchAtATime) {
  auto d = make({{"brokers", "127.0.0.1:9092"}, {"transactions", "true"}});
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_TRUE((*d)->stores_positions());
  EXPECT_EQ((*d)->max_in_flight(), 1u);
}

TEST(KafkaDestinationSettings, TransactionsNeedAcksAll) {
  auto d = make({{"brokers", "127.0.0.1:9092"}, {"transactions", "true"}, {"acks", "1"}});
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message().find("acks: all"), std::string::npos) << d.error().message();
}

TEST(KafkaDestinationSettings, UnknownFormatOrCodecIsRefused) {
  EXPECT_FALSE(make({{"brokers", "b:1"}, {"format", "avro"}}).ok());
  EXPECT_FALSE(make({{"brokers", "b:1"}, {"compression", "brotli"}}).ok());
}

// Refused when the destination is made (sluice validate and run alike), before anything opens:
// librdkafka judges the properties on a scratch configuration (issue 13, item 10).
TEST(KafkaDestinationSettings, AnUnknownLibrdkafkaPropertyIsRefusedWithOneLineNamingIt) {
  auto d = make({{"brokers", "127.0.0.1:1"}, {"rdkafka.no.such.property", "1"}});
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().code(), Errc::invalid_argument);
  EXPECT_NE(d.error().message().find("unknown librdkafka property 'no.such.property'"),
            std::string::npos)
      << d.error().message();
  EXPECT_EQ(d.error().message().find('\n'), std::string::npos);
}

TEST(KafkaDestinationSettings, ABadSecretValueIsNotEchoed) {
  auto d = make({{"brokers", "127.0.0.1:1"},
                 {"rdkafka.ssl.key.password", "hunter2"},
                 {"rdkafka.linger.ms", "-5"}});
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().message().find("hunter2"), std::string::npos) << d.error().message();
  EXPECT_NE(d.error().message().find("linger.ms"), std::string::npos) << d.error().message();
}

}  // namespace
}  // namespace sluice
