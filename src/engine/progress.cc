#include "engine/progress.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace sluice {

std::string thousands(uint64_t n) {
  const std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string duration_text(double s) {
  if (s < 60) return fmt::format("{:.0f}s", s);
  if (s < 3600) return fmt::format("{:.0f}m{:02.0f}s", s / 60 - 0.5, std::fmod(s, 60));
  return fmt::format("{:.1f}h", s / 3600);
}

namespace {
int64_t as_int(const MetricValue& v) {
  return std::visit([](auto x) { return static_cast<int64_t>(x); }, v);
}
std::string label_of(const MetricLabels& labels, std::string_view key) {
  for (const auto& [k, v] : labels)
    if (k == key) return v;
  return {};
}
}  // namespace

std::string ProgressLine::render(double elapsed) {
  const auto now = std::chrono::steady_clock::now();
  const double dt = std::max(1e-9, std::chrono::duration<double>(now - last_).count());
  last_ = now;
  uint64_t written = 0, in_flight = 0;
  for (const auto& [labels, v] : registry_.values("sluice_records_written_total"))
    written += uint64_t(as_int(v));
  for (const auto& [labels, v] : registry_.values("sluice_records_in_flight"))
    in_flight += uint64_t(as_int(v));
  const uint64_t delta = written >= last_written_ ? written - last_written_ : 0;
  std::string line = fmt::format("{} records written  {}/s  in flight {}", thousands(written),
                                 thousands(uint64_t(double(delta) / dt)), thousands(in_flight));
  last_written_ = written;
  // Per pipeline, in the order they were added: one lag series each.
  for (const auto& [labels, lag_v] : registry_.values("sluice_source_lag_seconds")) {
    const double lag = metric_as_double(lag_v);
    if (lag >= 0) line += fmt::format("  lag {:.1f}s", lag);
    const MetricLabels pipeline{{"pipeline", label_of(labels, "pipeline")}};
    MetricLabels want_done = pipeline, want_total = pipeline;
    want_done.emplace_back("kind", "done");
    want_total.emplace_back("kind", "total");
    const auto done_v = registry_.values("sluice_snapshot_rows", want_done);
    const auto total_v = registry_.values("sluice_snapshot_rows", want_total);
    if (done_v.empty() || total_v.empty()) continue;
    const int64_t d = as_int(done_v.front().second), t = as_int(total_v.front().second);
    if (d >= 0 && t > 0) {
      const double eta = d > 0 ? elapsed * double(t - std::min(d, t)) / double(d) : 0;
      line +=
          fmt::format("  snapshot {}/{} ({:.0f}%) ETA {}", thousands(uint64_t(d)),
                      thousands(uint64_t(t)), 100.0 * double(d) / double(t), duration_text(eta));
    }
  }
  return line;
}

}  // namespace sluice
