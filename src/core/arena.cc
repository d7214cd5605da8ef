#include "sluice/arena.h"

#include <algorithm>

namespace sluice {

void* Arena::allocate_slow(size_t size, size_t align) {
  const size_t need = size + align;
  if (need > chunk_size_) {
    // Its own chunk; the current one stays current for what comes next.
    large_.push_back(Chunk{std::unique_ptr<char[]>(new char[need]), need});
    reserved_ += need;
    used_before_ += size;
    const uintptr_t p = (reinterpret_cast<uintptr_t>(large_.back().data.get()) + (align - 1)) &
                        ~(uintptr_t(align) - 1);
    return reinterpret_cast<void*>(p);
  }
  if (cur_ != nullptr) used_before_ += size_t(cur_ - begin_);
  if (next_ == chunks_.size()) {
    chunks_.push_back(Chunk{std::unique_ptr<char[]>(new char[chunk_size_]), chunk_size_});
    reserved_ += chunk_size_;
  }
  Chunk& c = chunks_[next_++];
  begin_ = c.data.get();
  end_ = begin_ + c.size;
  const uintptr_t p = (reinterpret_cast<uintptr_t>(begin_) + (align - 1)) & ~(uintptr_t(align) - 1);
  cur_ = reinterpret_cast<char*>(p + size);
  return reinterpret_cast<void*>(p);
}

void Arena::reset() noexcept {
  used_before_ = 0;
  for (const Chunk& c : large_) reserved_ -= c.size;
  large_.clear();
  const size_t keep = std::min(chunks_.size(), std::max<size_t>(1, kKeepBytes / chunk_size_));
  for (size_t i = keep; i < chunks_.size(); ++i) reserved_ -= chunks_[i].size;
  chunks_.resize(keep);
  next_ = 0;
  begin_ = cur_ = end_ = nullptr;  // the next allocation takes chunks_[0]
}

void Arena::adopt(Arena& other) {
  if (&other == this) return;
  const size_t used = other.used();
  const size_t used_chunks = other.next_;
  large_.reserve(large_.size() + used_chunks + other.large_.size());
  for (size_t i = 0; i < used_chunks; ++i) {
    reserved_ += other.chunks_[i].size;
    other.reserved_ -= other.chunks_[i].size;
    large_.push_back(std::move(other.chunks_[i]));
  }
  other.chunks_.erase(other.chunks_.begin(), other.chunks_.begin() + ptrdiff_t(used_chunks));
  for (Chunk& c : other.large_) {
    reserved_ += c.size;
    other.reserved_ -= c.size;
    large_.push_back(std::move(c));
  }
  other.large_.clear();
  used_before_ += used;
  other.used_before_ = 0;
  other.next_ = 0;
  other.begin_ = other.cur_ = other.end_ = nullptr;
}

}  // namespace sluice
