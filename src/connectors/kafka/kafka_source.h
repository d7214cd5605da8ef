// The kafka source: a consumer group member reading one or more topics (or a regex); offsets are
// committed only after the destination acknowledged.
#pragma once

#include <memory>
#include <span>

#include "sluice/connector.h"
#include "sluice/settings.h"

namespace sluice {

std::span<const SettingSpec> kafka_source_settings() noexcept;
Result<std::unique_ptr<Source>> make_kafka_source(const Settings& settings);

}  // namespace sluice
