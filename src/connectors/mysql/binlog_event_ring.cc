#include "connectors/mysql/binlog_event_ring.h"

#include <algorithm>

namespace sluice::mysql {

EventRing::EventRing(size_t capacity)
    : capacity_(std::max<size_t>(capacity, 1)), ring_(new char[capacity_]) {}

std::optional<size_t> EventRing::fit(size_t n) const {
  // The oldest event in the ring: only the oldest event can be in a buffer of its own (one is
  // written there once everything else was released).
  const Slot* oldest = nullptr;
  for (const Slot& s : slots_)
    if (!s.own_buffer) {
      oldest = &s;
      break;
    }
  if (!oldest) return n <= capacity_ ? std::optional<size_t>(0) : std::nullopt;
  const size_t tail = oldest->offset;
  if (head_ > tail) {  // [tail, head_) in use: room after head_, else before tail (wrapping)
    if (n <= capacity_ - head_) return head_;
    if (n <= tail) return 0;
    return std::nullopt;
  }
  // Wrapped: [tail, capacity) and [0, head_) in use, the room is [head_, tail).
  if (n <= tail - head_) return head_;
  return std::nullopt;
}

bool EventRing::has_room(size_t room, std::optional<size_t>* at) const {
  if (room > capacity_) return slots_.empty();
  std::optional<size_t> where = fit(room);
  if (at) *at = where;
  return where.has_value();
}

char* EventRing::reserve(size_t n) {
  std::unique_lock lock(mu_);
  const size_t room = std::max<size_t>(n, 1);  // an empty event still takes a byte: head_ moves
  std::optional<size_t> at;
  if (!stopped_ && !has_room(room, &at)) {
    reader_waiting_ = true;
    reader_needs_ = room;
    room_.wait(lock, [&] { return stopped_ || has_room(room, &at); });
    reader_waiting_ = false;
  }
  if (stopped_) return nullptr;
  if (room > capacity_) {
    big_.resize(n);
    reserved_ = Slot{0, n, true, false};
    return big_.data();
  }
  reserved_ = Slot{*at, n, false, false};
  head_ = *at + room;
  return ring_.get() + *at;
}

void EventRing::commit(bool crc_verified) {
  std::lock_guard lock(mu_);
  if (!reserved_) return;
  reserved_->crc_verified = crc_verified;
  slots_.push_back(*reserved_);
  reserved_.reset();
  ready_.notify_one();
}

void EventRing::fail(Error e) {
  std::lock_guard lock(mu_);
  if (!error_) error_ = std::move(e);
  ready_.notify_all();
}

Result<bool> EventRing::pop(Event* out, std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mu_);
  ready_.wait_until(lock, deadline,
                    [&] { return popped_ < slots_.size() || error_.has_value() || stopped_; });
  if (popped_ < slots_.size()) {
    const Slot& s = slots_[popped_++];
    out->bytes = {s.own_buffer ? big_.data() : ring_.get() + s.offset, s.size};
    out->crc_verified = s.crc_verified;
    return true;
  }
  if (error_) return *error_;
  return false;
}

void EventRing::release() {
  std::lock_guard lock(mu_);
  if (popped_ == 0) return;
  if (slots_.front().own_buffer) std::string().swap(big_);  // its memory goes back at once
  slots_.pop_front();
  --popped_;
  if (!reader_waiting_) return;
  // Wake the reader for a good stretch of room, not for every event's: or at once when the decoder
  // has nothing left to take (it is about to wait for the reader).
  if (has_room(reader_needs_) &&
      (popped_ == slots_.size() || has_room(std::max(reader_needs_, capacity_ / 4))))
    room_.notify_one();
}

void EventRing::stop() {
  std::lock_guard lock(mu_);
  stopped_ = true;
  room_.notify_all();
  ready_.notify_all();
}

}  // namespace sluice::mysql
