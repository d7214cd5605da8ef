// The one retry-with-backoff helper: exponential, capped, jittered, stop-aware.
//
// The n-th delay (n = 0, 1, ...) is drawn uniformly from [step/2, step], where
// step = min(max, initial * 2^n): the jitter keeps many clients that lost the same server from
// retrying in lock-step, and the cap bounds how long a recovered server waits for the next
// attempt. With the defaults (200 ms, 5 s) a server back after a 40 s outage is retried within
// 5 s, not within another 30 s as with an uncapped doubling.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <random>
#include <stop_token>

namespace sluice {

// The schedule of a Backoff: the first delay's upper bound and the cap of every later one.
struct BackoffPolicy {
  std::chrono::milliseconds initial{200};
  std::chrono::milliseconds max{5000};
};

class Backoff {
 public:
  Backoff() : Backoff(BackoffPolicy{}) {}
  explicit Backoff(BackoffPolicy policy, uint32_t seed = std::random_device{}())
      : initial_(std::max<std::chrono::milliseconds>(policy.initial, std::chrono::milliseconds(1))),
        max_(std::max(initial_, policy.max)),
        next_(initial_),
        rng_(seed) {}
  Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max)
      : Backoff(BackoffPolicy{initial, max}) {}

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
    const auto step = next_;
    next_ = next_ >= max_ / 2 ? max_ : next_ * 2;
    std::uniform_int_distribution<int64_t> dist(step.count() / 2, step.count());
    ++attempts_;
    return std::chrono::milliseconds(dist(rng_));
  }

  void reset() {
    next_ = initial_;
    attempts_ = 0;
  }
  int attempts() const { return attempts_; }
  // The upper bound of the next delay.
  std::chrono::milliseconds next_delay() const { return next_; }
  std::chrono::milliseconds max_delay() const { return max_; }

 private:
  std::chrono::milliseconds initial_, max_, next_;
  int attempts_ = 0;
  std::minstd_rand rng_;
};

}  // namespace sluice
