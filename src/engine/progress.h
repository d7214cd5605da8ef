// The progress line `sluice run` shows on a terminal, rendered from the metrics registry: records
// written and their rate, records in flight, and per pipeline the source's lag and snapshot
// progress with an ETA.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "sluice/metrics.h"

namespace sluice {

// 1234567 → "1,234,567".
std::string thousands(uint64_t n);
// 42 → "42s", 125 → "2m05s", 7200 → "2.0h".
std::string duration_text(double seconds);

class ProgressLine {
 public:
  explicit ProgressLine(const MetricsRegistry& registry) : registry_(registry) {}
  // The line at this moment; `elapsed` is the seconds since the run started (for the ETA). The
  // rate is over the time since the previous call.
  std::string render(double elapsed);

 private:
  // " spool 1,200 rec 3.4 MiB oldest 12s" for a pipeline with a spool, else empty.
  std::string spool_segment(const MetricLabels& pipeline) const;
  std::string snapshot_segment(const MetricLabels& pipeline, double elapsed) const;

  const MetricsRegistry& registry_;
  uint64_t last_written_ = 0;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

}  // namespace sluice
