// Placeholder until the source lands (the helper building it replaces this file).
#include "connectors/kafka/kafka_source.h"

namespace sluice {

namespace {
constexpr SettingSpec kSettings[] = {
    {"brokers", SettingType::string, "", true, "Bootstrap brokers, host:port[,host:port...]."},
};
}  // namespace

std::span<const SettingSpec> kafka_source_settings() noexcept { return kSettings; }

Result<std::unique_ptr<Source>> make_kafka_source(const Settings&) {
  return Error(Errc::unsupported, "kafka destination: not built yet");
}

}  // namespace sluice
