// The `kafka` connector: a source (kafka_source.cc) and a destination (kafka_destination.cc), each
// with its own settings table, sharing kafka_common.
#include "connectors/builtin.h"
#include "connectors/kafka/kafka_destination.h"
#include "connectors/kafka/kafka_source.h"

namespace sluice {

namespace {
constexpr std::string_view kKafkaTemplateSettings[] = {"topic"};
}  // namespace

ConnectorSpec kafka_connector() {
  return ConnectorSpec{
      .name = "kafka",
      .summary =
          "Reads from and writes to Apache Kafka topics (librdkafka): idempotent or "
          "transactional producer, consumer groups with offsets committed after the "
          "destination acknowledged.",
      .source_settings = kafka_source_settings(),
      .destination_settings = kafka_destination_settings(),
      .make_source = &make_kafka_source,
      .make_destination = &make_kafka_destination,
      .template_settings = kKafkaTemplateSettings,
  };
}

}  // namespace sluice
