// The one retry-with-backoff helper: exponential with full jitter, capped, stop-aware.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <random>
#include <stop_token>

namespace sluice {

class Backoff {
 public:
  Backoff(std::chrono::milliseconds initial = std::chrono::milliseconds(100),
          std::chrono::milliseconds max = std::chrono::seconds(30))
      : initial_(initial), max_(max), next_(initial) {}

  // Sleeps for the next delay; returns false if stop was requested (before or during the wait).
  bool wait(std::stop_token stop) {
    const auto delay = next();
    std::mutex mu;
    std::condition_variable_any cv;
    std::unique_lock lock(mu);
    return !cv.wait_for(lock, stop, delay, [] { return false; }) && !stop.stop_requested();
  }

  // Takes the next delay without sleeping, for callers that must not block (a log source whose
  // server is down returns idle from read() until the delay has passed).
  std::chrono::milliseconds next() {
    auto cap = next_;
    next_ = std::min(max_, next_ * 2);
    std::uniform_int_distribution<long> dist(cap.count() / 2, cap.count());
    ++attempts_;
    return std::chrono::milliseconds(dist(rng_));
  }

  void reset() {
    next_ = initial_;
    attempts_ = 0;
  }
  int attempts() const { return attempts_; }
  std::chrono::milliseconds next_delay() const { return next_; }

 private:
  std::chrono::milliseconds initial_, max_, next_;
  int attempts_ = 0;
  std::minstd_rand rng_{std::random_device{}()};
};

}  // namespace sluice
