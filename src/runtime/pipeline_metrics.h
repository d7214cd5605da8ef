// Counters of one pipeline (its probe): written by the pipeline's threads;
// Pipeline::register_metrics publishes them in the metrics registry, from which /metrics and the
// progress line read. All relaxed atomics: figures, not synchronisation.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "sluice/connector.h"
#include "sluice/metrics.h"

namespace sluice {

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
  // Stalls (PipelineOptions::stall_timeout): how many began, per side.
  std::atomic<uint64_t> source_stalls{0};
  std::atomic<uint64_t> destination_stalls{0};
  std::atomic<int64_t> last_checkpoint_unix_ms{0};
  std::atomic<int> state{static_cast<int>(PipelineState::starting)};
  LatencyHistogram write_latency;
  ConnectorStats source_stats;
  ConnectorStats destination_stats;
};

}  // namespace sluice
