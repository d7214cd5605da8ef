// A blocking FIFO with a fixed capacity: push() waits while full, so a slow consumer slows the
// producer (back-pressure) and memory stays bounded. close() wakes everyone; pop() then drains
// what is left and returns nullopt.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>

namespace sluice {

template <typename T>
class BoundedQueue {
 public:
  explicit BoundedQueue(size_t capacity) : capacity_(capacity ? capacity : 1) {}

  // Returns false if the queue was closed (item not queued).
  bool push(T item) {
    std::unique_lock lock(mu_);
    not_full_.wait(lock, [&] { return closed_ || items_.size() < capacity_; });
    if (closed_) return false;
    items_.push_back(std::move(item));
    not_empty_.notify_one();
    return true;
  }

  std::optional<T> pop() {
    return pop_unless([] { return false; });
  }

  // pop() that also returns nullopt, without an item, once `interrupted()` is true when checked
  // after wake() (or on any other wake-up). `interrupted` is evaluated under the queue's lock.
  template <typename Pred>
  std::optional<T> pop_unless(Pred interrupted) {
    std::unique_lock lock(mu_);
    not_empty_.wait(lock, [&] { return closed_ || !items_.empty() || interrupted(); });
    if (items_.empty() || interrupted()) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    not_full_.notify_one();
    return item;
  }

  void close() {
    std::lock_guard lock(mu_);
    closed_ = true;
    not_empty_.notify_all();
    not_full_.notify_all();
  }

  // Wakes a waiting pop_unless() so it re-checks its predicate (no lost wake-up: the lock is
  // taken).
  void wake() {
    std::lock_guard lock(mu_);
    not_empty_.notify_all();
  }

  bool closed() const {
    std::lock_guard lock(mu_);
    return closed_;
  }

  size_t size() const {
    std::lock_guard lock(mu_);
    return items_.size();
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable not_empty_, not_full_;
  std::deque<T> items_;
  size_t capacity_;
  bool closed_ = false;
};

}  // namespace sluice
