// The redis source: Redis Streams read through a consumer group (XREADGROUP), entries acknowledged
// (XACK) only after the destination acknowledged them; the consumer's own pending entries are read
// again first after a restart or a reconnect, and entries another (crashed) consumer left pending
// are claimed (XAUTOCLAIM) once idle long enough. redis_source.cc has the details.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "sluice/connector.h"
#include "sluice/settings.h"

namespace sluice {

std::span<const SettingSpec> redis_source_settings() noexcept;
Result<std::unique_ptr<Source>> make_redis_source(const Settings& settings);

namespace redis {
// The batch position: "<sequence>" then ";stream=last id" for each stream read in that batch.
// Only the sequence matters to ack() (which entries to XACK); the ids are for people.
std::optional<uint64_t> position_sequence(std::string_view position);  // nullopt if malformed
// True when a `streams` entry is a glob pattern (SCAN MATCH) rather than a stream name.
bool is_stream_pattern(std::string_view entry) noexcept;
}  // namespace redis

}  // namespace sluice
