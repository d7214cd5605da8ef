// What a message becomes under a Kafka compression codec, computed the way librdkafka compresses a
// record batch (the same libraries, framing and default levels), so that the kafka destination can
// tell before producing that the broker would refuse a message as too large even compressed.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string_view>

namespace sluice::kafka {

// The compressed size of the concatenated `parts` under `codec` (lz4, zstd, snappy, gzip) at
// `level` (librdkafka's compression.level; -1: the codec's default, as librdkafka picks it), or
// nullopt for an unknown codec or a codec error.
std::optional<size_t> compressed_size(std::string_view codec, int level,
                                      std::span<const std::string_view> parts);

}  // namespace sluice::kafka
