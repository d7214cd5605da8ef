#include "sluice/arena.h"

#include <algorithm>

namespace sluice {

void* Arena::allocate_slow(size_t size, size_t align) {
  if (cur_ != nullptr) used_before_ += size_t(cur_ - begin_);
  size_t need = size + align;
  size_t chunk = std::max(chunk_size_, need);
  // Reuse a kept chunk if it is the right size (after reset() only chunk 0 remains and is current).
  chunks_.push_back(Chunk{std::unique_ptr<char[]>(new char[chunk]), chunk});
  reserved_ += chunk;
  begin_ = chunks_.back().data.get();
  cur_ = begin_;
  end_ = begin_ + chunk;
  uintptr_t p = (reinterpret_cast<uintptr_t>(cur_) + (align - 1)) & ~(uintptr_t(align) - 1);
  cur_ = reinterpret_cast<char*>(p + size);
  return reinterpret_cast<void*>(p);
}

void Arena::reset() noexcept {
  used_before_ = 0;
  if (chunks_.empty()) return;
  // Keep the first chunk of regular size; drop the others.
  size_t keep = chunks_.front().size == chunk_size_ ? 1 : 0;
  for (size_t i = keep; i < chunks_.size(); ++i) reserved_ -= chunks_[i].size;
  chunks_.resize(keep);
  if (keep) {
    begin_ = chunks_.front().data.get();
    cur_ = begin_;
    end_ = begin_ + chunks_.front().size;
  } else {
    begin_ = cur_ = end_ = nullptr;
  }
}

}  // namespace sluice
