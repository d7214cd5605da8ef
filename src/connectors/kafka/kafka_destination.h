// The kafka destination: records become Kafka messages (key = record key, value = opencdc or
// debezium JSON, metadata as headers).
#pragma once

#include <memory>
#include <span>

#include "sluice/connector.h"
#include "sluice/settings.h"

namespace sluice {

std::span<const SettingSpec> kafka_destination_settings() noexcept;
Result<std::unique_ptr<Destination>> make_kafka_destination(const Settings& settings);

}  // namespace sluice
