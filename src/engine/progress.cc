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
  // Per pipeline, in the order they were added, labelled with its id: the source's lag and, while
  // the snapshot runs, its progress.
  for (const auto& [labels, lag_v] : registry_.values("sluice_source_lag_seconds")) {
    const std::string id = label_of(labels, "pipeline");
    const MetricLabels pipeline{{"pipeline", id}};
    uint64_t pipeline_written = 0;
    for (const auto& [l, v] : registry_.values("sluice_records_written_total", pipeline))
      pipeline_written += uint64_t(as_int(v));
    std::string segment = fmt::format(" {} written", thousands(pipeline_written));
    // Several destinations (`destinations:`): each one's count, by name; the pipeline's own
    // figure above is what every one of them has.
    std::string each;
    for (const auto& [l, v] :
         registry_.values("sluice_destination_records_written_total", pipeline))
      each += fmt::format("{}{} {}", each.empty() ? "" : ", ", label_of(l, "destination"),
                          thousands(uint64_t(as_int(v))));
    if (!each.empty()) segment += " (" + each + ")";
    const double lag = metric_as_double(lag_v);
    if (lag >= 0) segment += fmt::format(" lag {:.1f}s", lag);
    segment += spool_segment(pipeline);
    segment += snapshot_segment(pipeline, elapsed);
    line += fmt::format("  | {}:{}", id, segment);
  }
  return line;
}

std::string ProgressLine::spool_segment(const MetricLabels& pipeline) const {
  // A pipeline with a spool: what waits in it for the destination.
  const auto records = registry_.values("sluice_spool_records", pipeline);
  if (records.empty()) return "";
  const auto bytes = registry_.values("sluice_spool_bytes", pipeline);
  const auto oldest = registry_.values("sluice_spool_oldest_seconds", pipeline);
  const double b = bytes.empty() ? 0.0 : metric_as_double(bytes.front().second);
  std::string out =
      fmt::format(" spool {} rec {:.1f} MiB", thousands(uint64_t(as_int(records.front().second))),
                  b / (1024.0 * 1024.0));
  const double age = oldest.empty() ? 0.0 : metric_as_double(oldest.front().second);
  if (age > 0) out += " oldest " + duration_text(age);
  // Several destinations over the spool: each one's lag behind its end, and which are down.
  const auto each = registry_.values("sluice_spool_destination_records", pipeline);
  if (each.size() < 2) return out;
  std::string lanes;
  for (const auto& [l, v] : each) {
    const std::string name = label_of(l, "destination");
    MetricLabels one = pipeline;
    one.emplace_back("destination", name);
    lanes +=
        fmt::format("{}{} {} rec", lanes.empty() ? "" : ", ", name, thousands(uint64_t(as_int(v))));
    const auto lane_age = registry_.values("sluice_spool_destination_oldest_seconds", one);
    if (!lane_age.empty() && metric_as_double(lane_age.front().second) > 0)
      lanes += " " + duration_text(metric_as_double(lane_age.front().second));
    const auto up = registry_.values("sluice_spool_destination_up", one);
    if (!up.empty() && as_int(up.front().second) == 0) lanes += " down";
  }
  return out + " (" + lanes + ")";
}

std::string ProgressLine::snapshot_segment(const MetricLabels& pipeline, double elapsed) const {
  // A source that reports its phase says when the snapshot is over: the segment goes then.
  MetricLabels in_snapshot = pipeline;
  in_snapshot.emplace_back("phase", "snapshot");
  const auto phase = registry_.values("sluice_source_phase", in_snapshot);
  if (!phase.empty() && as_int(phase.front().second) == 0) return "";
  MetricLabels want_done = pipeline, want_total = pipeline;
  want_done.emplace_back("kind", "done");
  want_total.emplace_back("kind", "total");
  const auto done_v = registry_.values("sluice_snapshot_rows", want_done);
  const auto total_v = registry_.values("sluice_snapshot_rows", want_total);
  if (done_v.empty() || total_v.empty()) return "";
  const int64_t d = as_int(done_v.front().second), t = as_int(total_v.front().second);
  if (d < 0 || t <= 0) return "";
  if (d >= t) {
    // The total is an estimate (reltuples, table statistics): past it, the snapshot is not over
    // until the source says so. Never more than 100 %, no ETA that would be a guess.
    return fmt::format(" snapshot {} rows (~100%)", thousands(uint64_t(d)));
  }
  const double eta = d > 0 ? elapsed * double(t - d) / double(d) : 0;
  return fmt::format(" snapshot {}/{} ({:.0f}%) ETA {}", thousands(uint64_t(d)),
                     thousands(uint64_t(t)), std::min(99.0, 100.0 * double(d) / double(t)),
                     duration_text(eta));
}

}  // namespace sluice
