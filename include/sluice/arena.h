// A monotonic bump allocator. A Batch owns one; every string, field array and nested value of the
// batch's records lives in it, so building a record does no per-field heap allocation, and
// clearing a batch for reuse frees nothing: reset() keeps the regular chunks (up to kKeepBytes)
// and hands them out again in order, so a pooled batch refills memory it already has, with no
// page faults and no trips through malloc.
//
//   regular chunks (kept on reset, reused in order)      larger allocations (own chunk, freed)
//   [used........|free  ] [used...|free ] [kept, unused]   [............]
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

namespace sluice {

class Arena {
 public:
  explicit Arena(size_t chunk_size = 256 * 1024) : chunk_size_(chunk_size) {}
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  Arena(Arena&&) noexcept = default;
  Arena& operator=(Arena&&) noexcept = default;

  void* allocate(size_t size, size_t align = alignof(std::max_align_t)) {
    uintptr_t p = (reinterpret_cast<uintptr_t>(cur_) + (align - 1)) & ~(uintptr_t(align) - 1);
    if (cur_ == nullptr || p + size > reinterpret_cast<uintptr_t>(end_))
      return allocate_slow(size, align);
    cur_ = reinterpret_cast<char*>(p + size);
    return reinterpret_cast<void*>(p);
  }

  template <typename T>
  T* allocate_array(size_t n) {
    return static_cast<T*>(allocate(sizeof(T) * (n ? n : 1), alignof(T)));
  }

  // Copies bytes into the arena; the view lives as long as the arena is not reset.
  std::string_view copy(std::string_view s) {
    if (s.empty()) return {};
    char* d = static_cast<char*>(allocate(s.size(), 1));
    std::memcpy(d, s.data(), s.size());
    return {d, s.size()};
  }

  // copy() of a short string without a call to memcpy: when `s` is at most kPaddedCopy bytes,
  // `readable` (>= s.size()) bytes from s.data() on may be read and the chunk has room, it copies
  // kPaddedCopy bytes in two fixed-size moves and hands out s.size() of them (the bytes written
  // past them are free memory, overwritten by later allocations). Otherwise as copy().
  static constexpr size_t kPaddedCopy = 32;
  std::string_view copy_padded(std::string_view s, size_t readable) {
    if (s.size() <= kPaddedCopy && readable >= kPaddedCopy && cur_ != nullptr &&
        size_t(end_ - cur_) >= kPaddedCopy) {
      char* d = cur_;
      std::memcpy(d, s.data(), kPaddedCopy);
      cur_ += s.size();
      return {d, s.size()};
    }
    return copy(s);
  }

  // Bytes handed out since the last reset (payload size estimate for batch limits).
  size_t used() const noexcept { return used_before_ + (cur_ ? size_t(cur_ - begin_) : 0); }
  // Bytes held from the system.
  size_t reserved() const noexcept { return reserved_; }

  // Forgets every allocation; keeps regular chunks (up to kKeepBytes) for reuse, frees the rest.
  void reset() noexcept;

  // Takes over the memory `other` handed out since its last reset: it lives as long as this
  // arena's own (until this reset(), which frees it) and `other` starts afresh, keeping only its
  // unused chunks. What another thread decoded into an arena of its own joins a batch this way.
  void adopt(Arena& other);

  // What reset() keeps at most: a batch of typical records (a few MiB) refills its own chunks;
  // one that grew far beyond gives the excess back.
  static constexpr size_t kKeepBytes = 8u << 20;

 private:
  void* allocate_slow(size_t size, size_t align);

  struct Chunk {
    std::unique_ptr<char[]> data;
    size_t size;
  };
  size_t chunk_size_;
  std::vector<Chunk> chunks_;  // regular chunks: [0, next_) used since the reset, the rest kept
  std::vector<Chunk> large_;   // allocations larger than a chunk, one each
  size_t next_ = 0;
  char* begin_ = nullptr;
  char* cur_ = nullptr;
  char* end_ = nullptr;
  size_t used_before_ = 0;  // bytes used in chunks before the current one
  size_t reserved_ = 0;
};

}  // namespace sluice
