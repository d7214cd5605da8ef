// PostgreSQL's wire encodings, shared by the pgoutput decoder, the COPY (FORMAT binary) parser, the
// binary value decoders and the replication stream: network byte order, and a bounds-checked
// reader whose every read fails (returns false) instead of reading past the end.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

#include "connectors/common/log_position.h"

namespace sluice::pg::wire {

inline uint16_t be16(const char* p) noexcept {
  return uint16_t(uint8_t(p[0]) << 8 | uint8_t(p[1]));
}
inline uint32_t be32(const char* p) noexcept {
  return uint32_t(uint8_t(p[0])) << 24 | uint32_t(uint8_t(p[1])) << 16 |
         uint32_t(uint8_t(p[2])) << 8 | uint32_t(uint8_t(p[3]));
}
inline uint64_t be64(const char* p) noexcept { return uint64_t(be32(p)) << 32 | be32(p + 4); }
inline void put_be32(char* p, uint32_t v) noexcept {
  for (int i = 3; i >= 0; --i, v >>= 8) p[i] = char(v & 0xff);
}
inline void put_be64(char* p, uint64_t v) noexcept {
  for (int i = 7; i >= 0; --i, v >>= 8) p[i] = char(v & 0xff);
}

class Reader {
 public:
  explicit Reader(std::string_view s) noexcept : p_(s.data()), end_(s.data() + s.size()) {}

  size_t remaining() const noexcept { return size_t(end_ - p_); }
  bool at_end() const noexcept { return p_ == end_; }
  std::string_view rest() const noexcept { return {p_, remaining()}; }

  bool u8(uint8_t* v) noexcept {
    if (remaining() < 1) return false;
    *v = uint8_t(*p_++);
    return true;
  }
  bool byte(char* c) noexcept {
    if (remaining() < 1) return false;
    *c = *p_++;
    return true;
  }
  bool u16(uint16_t* v) noexcept { return fixed(v, 2, be16); }
  bool i16(int16_t* v) noexcept {
    uint16_t u;
    if (!u16(&u)) return false;
    *v = static_cast<int16_t>(u);
    return true;
  }
  bool u32(uint32_t* v) noexcept { return fixed(v, 4, be32); }
  bool i32(int32_t* v) noexcept {
    uint32_t u;
    if (!u32(&u)) return false;
    *v = static_cast<int32_t>(u);
    return true;
  }
  bool u64(uint64_t* v) noexcept { return fixed(v, 8, be64); }
  bool i64(int64_t* v) noexcept {
    uint64_t u;
    if (!u64(&u)) return false;
    *v = static_cast<int64_t>(u);
    return true;
  }
  bool lsn(Lsn* l) noexcept { return u64(&l->value); }
  // A NUL-terminated string; the view excludes the terminator.
  bool cstr(std::string_view* s) noexcept {
    if (p_ == end_) return false;
    const void* nul = std::memchr(p_, 0, remaining());
    if (nul == nullptr) return false;
    const auto* z = static_cast<const char*>(nul);
    *s = std::string_view(p_, size_t(z - p_));
    p_ = z + 1;
    return true;
  }
  bool bytes(size_t n, std::string_view* s) noexcept {
    if (remaining() < n) return false;
    *s = std::string_view(p_, n);
    p_ += n;
    return true;
  }
  bool skip(size_t n) noexcept {
    if (remaining() < n) return false;
    p_ += n;
    return true;
  }

 private:
  template <typename T, typename F>
  bool fixed(T* v, size_t n, F decode) noexcept {
    if (remaining() < n) return false;
    *v = T(decode(p_));
    p_ += n;
    return true;
  }

  const char* p_;
  const char* end_;
};

}  // namespace sluice::pg::wire
