// Little-endian (and big-endian) field readers shared by the binlog decoder's files. Private to
// the decoder: callers bounds-check before reading.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string_view>

#include "sluice/result.h"

namespace sluice::mysql::binlog::wire {

inline uint32_t le16(const uint8_t* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8; }
inline uint32_t le24(const uint8_t* p) { return le16(p) | uint32_t(p[2]) << 16; }
inline uint32_t le32(const uint8_t* p) { return le24(p) | uint32_t(p[3]) << 24; }
inline uint64_t le48(const uint8_t* p) { return uint64_t(le32(p)) | uint64_t(le16(p + 4)) << 32; }
inline uint64_t le64(const uint8_t* p) { return uint64_t(le32(p)) | uint64_t(le32(p + 4)) << 32; }
inline uint64_t be(const uint8_t* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}
inline const uint8_t* u8(std::string_view s) { return reinterpret_cast<const uint8_t*>(s.data()); }

inline Error truncated(std::string_view what) {
  return Error(Errc::data, fmt::format("binlog {} event is truncated", what));
}

inline bool bit(std::string_view bitmap, size_t i) noexcept {
  return (uint8_t(bitmap[i / 8]) >> (i % 8)) & 1;
}

}  // namespace sluice::mysql::binlog::wire
