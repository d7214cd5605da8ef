#include "server/prometheus_text.h"

#include <fmt/format.h>

#include <chrono>

namespace sluice {

namespace {

// Label values escaped per the exposition format (backslash, quote, newline).
std::string label(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') { out += '\\'; out += c; }
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

struct Writer {
  std::string out;
  void header(std::string_view name, std::string_view type, std::string_view help) {
    fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
};

}  // namespace

std::string render_prometheus(std::span<Pipeline* const> pipelines) {
  Writer w;
  auto labels = [](const Pipeline* p, std::string_view connector) {
    return fmt::format("pipeline=\"{}\",connector=\"{}\"", label(p->options().id), label(connector));
  };
  struct Counter {
    const char* name;
    const char* help;
    std::atomic<uint64_t> PipelineMetrics::*field;
    bool source;
  };
  static const Counter counters[] = {
      {"sluice_records_read_total", "Records read from the source.", &PipelineMetrics::records_read, true},
      {"sluice_records_filtered_total", "Records dropped by processors.", &PipelineMetrics::records_filtered, true},
      {"sluice_records_written_total", "Records durably written by the destination.", &PipelineMetrics::records_written, false},
      {"sluice_bytes_written_total", "Approximate payload bytes written by the destination.", &PipelineMetrics::bytes_written, false},
      {"sluice_batches_written_total", "Batches durably written by the destination.", &PipelineMetrics::batches_written, false},
      {"sluice_errors_total", "Batch writes that failed.", &PipelineMetrics::write_errors, false},
      {"sluice_write_retries_total", "Batch writes retried after a retriable error.", &PipelineMetrics::write_retries, false},
      {"sluice_dlq_records_total", "Records the destination rejected, sent to the dead-letter queue.", &PipelineMetrics::dlq_records, false},
      {"sluice_checkpoints_total", "Checkpoints persisted.", &PipelineMetrics::checkpoints, true},
  };
  for (const Counter& c : counters) {
    w.header(c.name, "counter", c.help);
    for (const Pipeline* p : pipelines) {
      const auto& o = p->options();
      fmt::format_to(std::back_inserter(w.out), "{}{{{}}} {}\n", c.name,
                     labels(p, c.source ? o.source_connector : o.destination_connector),
                     (p->metrics().*(c.field)).load(std::memory_order_relaxed));
    }
  }

  w.header("sluice_batch_write_seconds", "histogram", "Time from handing a batch to the destination until it is durable.");
  for (const Pipeline* p : pipelines) {
    const auto& h = p->metrics().write_latency;
    const std::string l = labels(p, p->options().destination_connector);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < LatencyHistogram::kBounds.size(); ++i) {
      cumulative += h.bucket(i);
      fmt::format_to(std::back_inserter(w.out), "sluice_batch_write_seconds_bucket{{{},le=\"{}\"}} {}\n", l,
                     LatencyHistogram::kBounds[i], cumulative);
    }
    cumulative += h.bucket(LatencyHistogram::kBounds.size());
    fmt::format_to(std::back_inserter(w.out), "sluice_batch_write_seconds_bucket{{{},le=\"+Inf\"}} {}\n", l, cumulative);
    fmt::format_to(std::back_inserter(w.out), "sluice_batch_write_seconds_sum{{{}}} {}\n", l, h.sum_seconds());
    fmt::format_to(std::back_inserter(w.out), "sluice_batch_write_seconds_count{{{}}} {}\n", l, h.count());
  }

  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch()).count();
  w.header("sluice_checkpoint_age_seconds", "gauge", "Seconds since the last checkpoint was persisted (-1: none yet).");
  for (const Pipeline* p : pipelines) {
    const int64_t last = p->metrics().last_checkpoint_unix_ms.load();
    fmt::format_to(std::back_inserter(w.out), "sluice_checkpoint_age_seconds{{{}}} {}\n",
                   labels(p, p->options().source_connector), last ? double(now_ms - last) / 1000.0 : -1.0);
  }
  w.header("sluice_records_in_flight", "gauge", "Records read but not yet durably written.");
  for (const Pipeline* p : pipelines)
    fmt::format_to(std::back_inserter(w.out), "sluice_records_in_flight{{{}}} {}\n",
                   labels(p, p->options().source_connector), p->in_flight_records());
  w.header("sluice_source_lag_seconds", "gauge", "Age of the newest change read from the source (-1: unknown).");
  for (const Pipeline* p : pipelines) {
    const int64_t lag = p->metrics().source_stats.lag_ms.load();
    fmt::format_to(std::back_inserter(w.out), "sluice_source_lag_seconds{{{}}} {}\n",
                   labels(p, p->options().source_connector), lag < 0 ? -1.0 : double(lag) / 1000.0);
  }
  w.header("sluice_snapshot_rows", "gauge", "Snapshot rows done and estimated total (-1: no snapshot).");
  for (const Pipeline* p : pipelines) {
    const auto& s = p->metrics().source_stats;
    const std::string l = labels(p, p->options().source_connector);
    fmt::format_to(std::back_inserter(w.out), "sluice_snapshot_rows{{{},kind=\"done\"}} {}\n", l, s.snapshot_rows_done.load());
    fmt::format_to(std::back_inserter(w.out), "sluice_snapshot_rows{{{},kind=\"total\"}} {}\n", l, s.snapshot_rows_total.load());
  }
  w.header("sluice_pipeline_up", "gauge", "1 while the pipeline runs, 0 once stopped or failed.");
  for (const Pipeline* p : pipelines) {
    const auto st = p->state();
    fmt::format_to(std::back_inserter(w.out), "sluice_pipeline_up{{pipeline=\"{}\"}} {}\n", label(p->options().id),
                   st == PipelineState::running || st == PipelineState::starting ? 1 : 0);
  }
  return w.out;
}

}  // namespace sluice
