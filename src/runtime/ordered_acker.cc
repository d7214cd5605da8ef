#include "runtime/ordered_acker.h"

namespace sluice {

void OrderedAcker::begin(uint64_t seq, std::string position) {
  std::lock_guard lock(mu_);
  inflight_.emplace(seq, Entry{std::move(position), false});
}

bool OrderedAcker::complete(uint64_t seq, const Status& status) {
  std::lock_guard lock(mu_);
  auto it = inflight_.find(seq);
  if (it == inflight_.end()) return false;
  if (!status.ok()) {
    if (!failure_) failure_ = status.error();
    changed_ = true;
    cv_.notify_all();
    return false;
  }
  it->second.done = true;
  bool advanced = false;
  // Advance only over the contiguous prefix of finished batches, and never past a failure.
  while (!failure_ && !inflight_.empty() && inflight_.begin()->second.done) {
    auto first = inflight_.begin();
    acked_seq_ = first->first;
    if (!first->second.position.empty()) advanced_ = std::move(first->second.position);
    inflight_.erase(first);
    advanced = true;
  }
  if (advanced) {
    changed_ = true;
    cv_.notify_all();
  }
  return advanced;
}

std::optional<std::string> OrderedAcker::take_advanced() {
  std::lock_guard lock(mu_);
  std::optional<std::string> out = std::move(advanced_);
  advanced_.reset();
  return out;
}

void OrderedAcker::wait_for_change(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return changed_; });
  changed_ = false;
}

void OrderedAcker::notify() {
  std::lock_guard lock(mu_);
  changed_ = true;
  cv_.notify_all();
}

uint64_t OrderedAcker::pending() const {
  std::lock_guard lock(mu_);
  return inflight_.size();
}

uint64_t OrderedAcker::acked_seq() const {
  std::lock_guard lock(mu_);
  return acked_seq_;
}

std::optional<Error> OrderedAcker::failure() const {
  std::lock_guard lock(mu_);
  return failure_;
}

}  // namespace sluice
