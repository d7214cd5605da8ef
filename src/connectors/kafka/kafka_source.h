// The kafka source: a consumer group member reading one or more topics (or a regex); offsets are
// committed only after the destination acknowledged.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "sluice/connector.h"
#include "sluice/settings.h"

namespace sluice {

std::span<const SettingSpec> kafka_source_settings() noexcept;
Result<std::unique_ptr<Source>> make_kafka_source(const Settings& settings);

namespace kafka {
// The source position: topic → partition → next offset to read, as compact text
// "topic:partition=offset,partition=offset;topic:..." (e.g. "orders:0=120,1=98;users:0=7").
using Offsets = std::map<std::string, std::map<int32_t, int64_t>, std::less<>>;
std::string encode_position(const Offsets& offsets);
std::optional<Offsets> parse_position(std::string_view text);  // nullopt if malformed
}  // namespace kafka

}  // namespace sluice
