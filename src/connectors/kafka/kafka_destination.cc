// Placeholder until the destination lands (the helper building it replaces this file).
#include "connectors/kafka/kafka_destination.h"

namespace sluice {

namespace {
constexpr SettingSpec kSettings[] = {
    {"brokers", SettingType::string, "", true, "Bootstrap brokers, host:port[,host:port...]."},
};
}  // namespace

std::span<const SettingSpec> kafka_destination_settings() noexcept { return kSettings; }

Result<std::unique_ptr<Destination>> make_kafka_destination(const Settings&) {
  return Error(Errc::unsupported, "kafka destination: not built yet");
}

}  // namespace sluice
