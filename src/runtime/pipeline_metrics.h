// Counters of one pipeline (its "probe"): written by the pipeline's threads, read by /metrics and
// the progress line. All relaxed atomics: figures, not synchronisation.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "sluice/connector.h"

namespace sluice {

// Fixed-bucket latency histogram (seconds), Prometheus-style cumulative on render.
class LatencyHistogram {
 public:
  static constexpr std::array<double, 12> kBounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                     0.05, 0.1, 0.25, 0.5, 1.0, 5.0};
  void observe(double seconds) noexcept {
    size_t i = 0;
    while (i < kBounds.size() && seconds > kBounds[i]) ++i;
    buckets_[i].fetch_add(1, std::memory_order_relaxed);
    count_.fetch_add(1, std::memory_order_relaxed);
    sum_us_.fetch_add(static_cast<uint64_t>(seconds * 1e6), std::memory_order_relaxed);
  }
  uint64_t bucket(size_t i) const noexcept { return buckets_[i].load(std::memory_order_relaxed); }
  uint64_t count() const noexcept { return count_.load(std::memory_order_relaxed); }
  double sum_seconds() const noexcept { return double(sum_us_.load(std::memory_order_relaxed)) / 1e6; }

 private:
  std::array<std::atomic<uint64_t>, kBounds.size() + 1> buckets_{};
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_us_{0};
};

enum class PipelineState : int { starting = 0, running = 1, stopping = 2, stopped = 3, failed = 4 };

struct PipelineMetrics {
  std::atomic<uint64_t> records_read{0};
  std::atomic<uint64_t> records_written{0};
  std::atomic<uint64_t> records_filtered{0};
  std::atomic<uint64_t> bytes_written{0};
  std::atomic<uint64_t> batches_written{0};
  std::atomic<uint64_t> write_errors{0};
  std::atomic<uint64_t> write_retries{0};
  std::atomic<uint64_t> dlq_records{0};
  std::atomic<uint64_t> checkpoints{0};
  std::atomic<int64_t> last_checkpoint_unix_ms{0};
  std::atomic<int> state{static_cast<int>(PipelineState::starting)};
  LatencyHistogram write_latency;
  ConnectorStats source_stats;
  ConnectorStats destination_stats;
};

}  // namespace sluice
