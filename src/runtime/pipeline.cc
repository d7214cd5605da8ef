#include "runtime/pipeline.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <future>

#include "runtime/spool/spool_stages.h"
#include "sluice/log_context.h"
#include "sluice/result.h"
#include "sluice/secrets.h"
#include "support/backoff.h"
#include "support/failpoint.h"

namespace sluice {

namespace {

size_t count_control(const Batch& batch) noexcept {
  size_t n = 0;
  for (const Record& r : batch.records()) n += is_control(r.op) ? 1 : 0;
  return n;
}
// What the reader counts of a batch it read, in one pass over its records: the control records,
// and where the first snapshot row is (the batch's size when it has none).
struct ReadCounts {
  size_t control = 0;
  size_t first_snapshot = 0;
};
ReadCounts count_read(const Batch& batch) noexcept {
  const auto& records = batch.records();
  ReadCounts c{0, records.size()};
  for (size_t i = 0; i < records.size(); ++i) {
    const Operation op = records[i].op;
    c.control += is_control(op) ? 1 : 0;
    if (op == Operation::snapshot && c.first_snapshot == records.size()) c.first_snapshot = i;
  }
  return c;
}
int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
// "0.4 s", "12 s": a tenth of a second where it matters.
std::string seconds_text(double s) {
  return s < 10 ? fmt::format("{:.1f} s", s) : fmt::format("{:.0f} s", s);
}
int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

Pipeline::Pipeline(PipelineOptions options, std::unique_ptr<Source> source,
                   std::vector<std::unique_ptr<Processor>> processors,
                   std::unique_ptr<Destination> destination, CheckpointStore* checkpoints,
                   std::unique_ptr<Destination> dlq)
    : options_(std::move(options)),
      source_(std::move(source)),
      processors_(std::move(processors)),
      destination_(std::move(destination)),
      checkpoints_(checkpoints),
      dlq_(std::move(dlq)) {
  if (!options_.spool && !options_.make_spool) return;
  std::vector<SpoolLane> lanes(1);
  lanes[0].name = "destination";
  lanes[0].connector = options_.destination_connector;
  lanes[0].destination = std::move(destination_);
  lanes[0].dead_letters = options_.on_error == PipelineOptions::OnError::dlq;
  lanes[0].dlq_connector = options_.dlq_connector;
  lanes[0].dlq = std::move(dlq_);
  init_spool(std::move(lanes), /*single=*/true);
}

Pipeline::Pipeline(PipelineOptions options, std::unique_ptr<Source> source,
                   std::vector<std::unique_ptr<Processor>> processors, std::vector<SpoolLane> lanes,
                   CheckpointStore* checkpoints)
    : options_(std::move(options)),
      source_(std::move(source)),
      processors_(std::move(processors)),
      checkpoints_(checkpoints) {
  init_spool(std::move(lanes), /*single=*/false);
}

void Pipeline::init_spool(std::vector<SpoolLane> lanes, bool single) {
  // The spool seam: this pipeline keeps the source side and writes into the spool; a downstream
  // pipeline per destination reads the spool into it (runtime/spool/spool_stages.h), each as its
  // own named reader with its own checkpoint.
  fan_out_ = !single;
  std::vector<std::string> readers;
  for (const SpoolLane& lane : lanes) readers.push_back(lane.name);
  // Either side of the spool holds one batch fewer: the spool decouples them, and two pools of
  // batches are in memory at once.
  options_.spare_batches = 1;
  if (options_.make_spool) {
    spool_ = options_.make_spool(readers);
  } else {
    spool::DiskSpoolOptions so = *options_.spool;
    so.readers = readers;
    spool_ = std::make_unique<spool::DiskSpool>(std::move(so));
  }
  for (SpoolLane& lane : lanes) {
    PipelineOptions down = options_;
    down.spool.reset();
    down.make_spool = nullptr;
    down.source_connector = "spool";
    down.checkpoint_key = spool::spool_reader_checkpoint_key(options_.id, lane.name);
    down.retry_destination_open = true;
    down.spare_batches = 1;
    down.destination_connector = lane.connector;
    down.destination_name = single ? std::string() : lane.name;
    down.on_error = lane.dead_letters && lane.dlq ? PipelineOptions::OnError::dlq
                                                  : PipelineOptions::OnError::stop;
    down.dlq_connector = lane.dlq ? lane.dlq_connector : std::string();
    reader_names_.push_back(lane.name);
    downstreams_.push_back(std::make_unique<Pipeline>(
        std::move(down), std::make_unique<spool::SpoolReaderSource>(spool_.get(), lane.name),
        std::move(lane.processors), std::move(lane.destination), checkpoints_,
        std::move(lane.dlq)));
  }
  destination_ = std::make_unique<spool::SpoolWriter>(spool_.get(), stop_.get_token());
  if (fan_out_) {
    options_.destination_connector.clear();
    for (const std::string& n : reader_names_)
      options_.destination_connector += (options_.destination_connector.empty() ? "" : "+") + n;
    destinations_label_ = options_.destination_connector;
  }
  options_.destination_connector = "spool";
  options_.on_error = PipelineOptions::OnError::stop;
  options_.dlq_connector.clear();
}

std::string Pipeline::destination_label() const {
  if (options_.destination_name.empty()) return options_.destination_connector + " destination";
  if (options_.destination_name == options_.destination_connector)
    return "destination " + options_.destination_name;
  return fmt::format("destination {} ({})", options_.destination_name,
                     options_.destination_connector);
}

uint64_t Pipeline::destination_records_written() const noexcept {
  if (downstreams_.empty()) return metrics_.records_written.load();
  uint64_t m = UINT64_MAX;
  for (const auto& d : downstreams_) m = std::min(m, d->metrics_.records_written.load());
  return m;
}

uint64_t Pipeline::destination_dlq_records() const noexcept {
  if (downstreams_.empty()) return metrics_.dlq_records.load();
  uint64_t n = 0;
  for (const auto& d : downstreams_) n += d->metrics_.dlq_records.load();
  return n;
}

Pipeline::~Pipeline() = default;

void Pipeline::register_metrics(MetricsRegistry& registry) {
  registry_ = &registry;
  const std::string& src = options_.source_connector;
  // With a spool the destination's figures are the downstream pipeline's (spool → destination).
  for (auto& d : downstreams_) d->registry_ = &registry;
  const Pipeline* single =
      downstreams_.size() == 1 && !fan_out_ ? downstreams_.front().get() : nullptr;
  const std::string& dst =
      single ? single->options_.destination_connector : options_.destination_connector;
  auto labels = [&](const std::string& connector) {
    return MetricLabels{{"pipeline", options_.id}, {"connector", connector}};
  };
  // Several spooled destinations: the pipeline's figures are what every one of them has (the
  // slowest one's count) and the sum of their errors, retries and dead letters; each one's own
  // are the sluice_destination_* series below.
  const PipelineMetrics& m = single     ? single->metrics_
                             : fan_out_ ? downstreams_.front()->metrics_
                                        : metrics_;
  const PipelineMetrics& up = metrics_;
  // The names, labels and order /metrics has always had (dashboards and tests depend on them).
  std::vector<MetricDef> main = {
      MetricDef::counter("sluice_records_read_total", "Records read from the source.", labels(src),
                         up.records_read),
      MetricDef::counter("sluice_records_filtered_total", "Records dropped by processors.",
                         labels(src), up.records_filtered),
      MetricDef::counter("sluice_records_written_total",
                         "Records durably written by the destination.", labels(dst),
                         m.records_written),
      MetricDef::counter("sluice_bytes_written_total",
                         "Approximate payload bytes written by the destination.", labels(dst),
                         m.bytes_written),
      MetricDef::counter("sluice_batches_written_total",
                         "Batches durably written by the destination.", labels(dst),
                         m.batches_written),
      MetricDef::counter("sluice_errors_total", "Batch writes that failed.", labels(dst),
                         m.write_errors),
      MetricDef::counter("sluice_write_retries_total",
                         "Batch writes retried after a retriable error.", labels(dst),
                         m.write_retries),
      MetricDef::counter("sluice_dlq_records_total",
                         "Records the destination rejected, sent to the dead-letter queue.",
                         labels(dst), m.dlq_records),
      MetricDef::counter("sluice_checkpoints_total", "Checkpoints persisted.", labels(src),
                         up.checkpoints),
      MetricDef::latency("sluice_batch_write_seconds",
                         "Time from handing a batch to the destination until it is durable.",
                         labels(dst), m.write_latency),
      MetricDef::gauge("sluice_checkpoint_age_seconds",
                       "Seconds since the last checkpoint was persisted (-1: none yet).",
                       labels(src),
                       [&up] {
                         const int64_t last = up.last_checkpoint_unix_ms.load();
                         return MetricValue(last ? double(now_unix_ms() - last) / 1000.0 : -1.0);
                       }),
      MetricDef::gauge("sluice_records_in_flight", "Records read but not yet durably written.",
                       labels(src), [this] { return MetricValue(in_flight_records()); }),
  };
  if (fan_out_) {
    using Field = std::atomic<uint64_t> PipelineMetrics::*;
    auto over = [this](Field f, bool sum) {
      return [this, f, sum] {
        uint64_t v = sum ? 0 : UINT64_MAX;
        for (const auto& d : downstreams_) {
          const uint64_t x = (d->metrics_.*f).load(std::memory_order_relaxed);
          v = sum ? v + x : std::min(v, x);
        }
        return MetricValue(v);
      };
    };
    const std::pair<const char*, std::pair<Field, bool>> reads[] = {
        {"sluice_records_written_total", {&PipelineMetrics::records_written, false}},
        {"sluice_bytes_written_total", {&PipelineMetrics::bytes_written, false}},
        {"sluice_batches_written_total", {&PipelineMetrics::batches_written, false}},
        {"sluice_errors_total", {&PipelineMetrics::write_errors, true}},
        {"sluice_write_retries_total", {&PipelineMetrics::write_retries, true}},
        {"sluice_dlq_records_total", {&PipelineMetrics::dlq_records, true}},
    };
    for (MetricDef& d : main)
      for (const auto& [name, how] : reads)
        if (d.name == name) d.read = over(how.first, how.second);
  }
  probes_.push_back(registry.add(std::move(main)));
  // The source's standard probe: what it stores in ConnectorContext::stats.
  const ConnectorStats& s = metrics_.source_stats;
  MetricLabels done = labels(src), total = labels(src);
  done.emplace_back("kind", "done");
  total.emplace_back("kind", "total");
  probes_.push_back(registry.add({
      MetricDef::gauge("sluice_source_lag_seconds",
                       "Age of the newest change read from the source (-1: unknown).", labels(src),
                       [&s] {
                         const int64_t lag = s.lag_ms.load();
                         return MetricValue(lag < 0 ? -1.0 : double(lag) / 1000.0);
                       }),
      MetricDef::gauge("sluice_snapshot_rows",
                       "Snapshot rows done and estimated total (-1: no snapshot).", done,
                       [&s] { return MetricValue(s.snapshot_rows_done.load()); }),
      MetricDef::gauge("sluice_snapshot_rows",
                       "Snapshot rows done and estimated total (-1: no snapshot).", total,
                       [&s] { return MetricValue(s.snapshot_rows_total.load()); }),
  }));
  MetricLabels source_side{{"pipeline", options_.id}, {"side", "source"}};
  MetricLabels destination_side{{"pipeline", options_.id}, {"side", "destination"}};
  auto stalled = [this](const char* side) {
    return [this, side] {
      int64_t on = 0;
      for (const Stall& st : stalls()) on = on || st.side.starts_with(side);
      return MetricValue(on);
    };
  };
  probes_.push_back(registry.add({
      MetricDef::counter("sluice_pipeline_stalls_total",
                         "Stalls: a side made no progress for stall_timeout with work pending.",
                         source_side, up.source_stalls),
      MetricDef::counter("sluice_pipeline_stalls_total",
                         "Stalls: a side made no progress for stall_timeout with work pending.",
                         destination_side, m.destination_stalls),
      MetricDef::gauge("sluice_pipeline_stalled", "1 while the side is stalled, else 0.",
                       source_side, stalled("source")),
      MetricDef::gauge("sluice_pipeline_stalled", "1 while the side is stalled, else 0.",
                       destination_side, stalled("destination")),
  }));
  probes_.push_back(registry.add({
      MetricDef::gauge("sluice_pipeline_up", "1 while the pipeline runs, 0 once stopped or failed.",
                       {{"pipeline", options_.id}},
                       [this] {
                         const auto st = state();
                         return MetricValue(int64_t(
                             st == PipelineState::running || st == PipelineState::starting ? 1
                                                                                           : 0));
                       }),
  }));
  if (spool_) {
    MetricLabels sl{{"pipeline", options_.id}, {"type", options_.spool_type}};
    spool::Spool* sp = spool_.get();
    probes_.push_back(registry.add({
        MetricDef::gauge("sluice_spool_records",
                         "Records in the spool that the destination has not yet made durable.", sl,
                         [sp] { return MetricValue(sp->depth().records); }),
        MetricDef::gauge("sluice_spool_bytes",
                         "Bytes of spool segments the destination has not yet made durable.", sl,
                         [sp] { return MetricValue(sp->depth().bytes); }),
        MetricDef::gauge("sluice_spool_oldest_seconds",
                         "Age of the oldest batch in the spool not yet durable at the destination "
                         "(0: none).",
                         sl,
                         [sp] {
                           const int64_t oldest = sp->depth().oldest_unix_ms;
                           return MetricValue(oldest ? double(now_unix_ms() - oldest) / 1000.0
                                                     : 0.0);
                         }),
    }));
    // Each destination's own lag behind the spool's end, and its own figures (several
    // destinations: the progress line and /metrics show which one is behind or down).
    for (size_t i = 0; i < downstreams_.size(); ++i) {
      const Pipeline* d = downstreams_[i].get();
      const std::string name = reader_names_[i];
      const std::string& connector = d->options_.destination_connector;
      MetricLabels rl{{"pipeline", options_.id}, {"destination", name}, {"connector", connector}};
      const PipelineMetrics& dm = d->metrics_;
      std::vector<MetricDef> defs = {
          MetricDef::gauge("sluice_spool_destination_records",
                           "Records in the spool this destination has not yet made durable.", rl,
                           [sp, name] { return MetricValue(sp->reader_depth(name).records); }),
          MetricDef::gauge("sluice_spool_destination_bytes",
                           "Bytes of spool segments this destination has not yet made durable.", rl,
                           [sp, name] { return MetricValue(sp->reader_depth(name).bytes); }),
          MetricDef::gauge(
              "sluice_spool_destination_oldest_seconds",
              "Age of the oldest spooled batch this destination has not yet made durable (0: "
              "none).",
              rl,
              [sp, name] {
                const int64_t oldest = sp->reader_depth(name).oldest_unix_ms;
                return MetricValue(oldest ? double(now_unix_ms() - oldest) / 1000.0 : 0.0);
              }),
          MetricDef::gauge(
              "sluice_spool_destination_up",
              "1 while this destination is open and writing, 0 while it is being "
              "retried at open or once stopped.",
              rl,
              [d] { return MetricValue(int64_t(d->state() == PipelineState::running ? 1 : 0)); }),
      };
      if (fan_out_) {
        // The fan-out's per-destination series, as without a spool.
        defs.push_back(
            MetricDef::counter("sluice_destination_records_written_total",
                               "Records durably written by this destination of the pipeline.", rl,
                               dm.records_written));
        defs.push_back(
            MetricDef::counter("sluice_destination_batches_written_total",
                               "Batches durably written by this destination of the pipeline.", rl,
                               dm.batches_written));
        defs.push_back(MetricDef::counter("sluice_destination_records_filtered_total",
                                          "Records dropped by this destination's own processors.",
                                          rl, dm.records_filtered));
        defs.push_back(
            MetricDef::counter("sluice_destination_dlq_records_total",
                               "Records this destination rejected, sent to its dead-letter queue.",
                               rl, dm.dlq_records));
        defs.push_back(
            MetricDef::counter("sluice_destination_errors_total",
                               "Batch writes to this destination that failed (retried or fatal).",
                               rl, dm.write_errors));
      }
      probes_.push_back(registry.add(std::move(defs)));
    }
  }
}

std::optional<spool::SpoolDepth> Pipeline::spool_depth() const {
  if (!spool_) return std::nullopt;
  return spool_->depth();
}

void Pipeline::request_stop() {
  stop_.request_stop();
  pool_cv_.notify_all();
  for (auto& d : downstreams_) d->request_stop();
}

void Pipeline::fail(Error error) {
  {
    std::lock_guard lock(fail_mu_);
    if (!failure_) failure_ = std::move(error);
  }
  request_stop();
}

bool Pipeline::idle() const noexcept {
  const bool here = (source_idle_.load() || source_ended_.load()) && acker_.pending() == 0;
  // With a spool: idle once every destination has caught up with the spool as well.
  if (!here) return false;
  for (const auto& d : downstreams_)
    if (!d->idle()) return false;
  return true;
}

std::optional<std::chrono::steady_clock::time_point> Pipeline::idle_since() const {
  if (!idle()) return std::nullopt;
  return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(idle_since_ns_.load()));
}

uint64_t Pipeline::in_flight_records() const noexcept {
  // A record is settled once written or dead-lettered (by the destination or the source).
  const uint64_t begun = records_begun_.load();
  if (fan_out_) {
    // Not yet spooled, plus what the slowest destination has not made durable of the spool.
    const uint64_t spooled = metrics_.records_written.load();
    uint64_t behind = 0;
    for (const std::string& name : reader_names_)
      behind = std::max(behind, spool_->reader_depth(name).records);
    return (begun > spooled ? begun - spooled : 0) + behind;
  }
  const PipelineMetrics& m = downstreams_.empty() ? metrics_ : downstreams_.front()->metrics_;
  const uint64_t settled = m.records_written.load() + m.dlq_records.load();
  return begun > settled ? begun - settled : 0;
}

std::vector<Stall> Pipeline::stalls() const {
  std::vector<Stall> out;
  {
    std::lock_guard lock(stall_mu_);
    out = stalls_;
  }
  if (!downstreams_.empty()) {
    // The source side's own, and the destinations' from the downstream pipelines.
    std::erase_if(out, [](const Stall& s) { return s.side != "source"; });
    for (size_t i = 0; i < downstreams_.size(); ++i)
      for (Stall& s : downstreams_[i]->stalls())
        if (s.side == "destination") {
          if (fan_out_) s.side = "destination " + reader_names_[i];
          out.push_back(std::move(s));
        }
  }
  return out;
}

void Pipeline::note_destination_progress() noexcept { destination_progress_ns_ = steady_ns(); }

void Pipeline::check_stalls() {
  if (options_.stall_timeout.count() <= 0) return;
  const int64_t now = steady_ns();
  const int64_t timeout_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(options_.stall_timeout).count();
  std::vector<Stall> now_stalled;
  // Source: a read that has not returned (reads return within poll/linger when there is nothing).
  if (const int64_t since = read_started_ns_.load(); since != 0 && now - since >= timeout_ns)
    now_stalled.push_back({"source", "a read that has not returned", double(now - since) / 1e9});
  // Destination: batches handed on that have not become durable, none settled meanwhile.
  if (const uint64_t batches = acker_.pending(); batches > 0) {
    const int64_t since = destination_progress_ns_.load();
    if (since != 0 && now - since >= timeout_ns)
      now_stalled.push_back({"destination",
                             fmt::format("{} batch{} ({} records) not yet durable", batches,
                                         batches == 1 ? "" : "es", in_flight_records()),
                             double(now - since) / 1e9});
  }
  std::lock_guard lock(stall_mu_);
  auto find = [](const std::vector<Stall>& v, const std::string& side) -> const Stall* {
    for (const Stall& s : v)
      if (s.side == side) return &s;
    return nullptr;
  };
  for (const Stall& s : now_stalled) {
    if (find(stalls_, s.side)) continue;
    const bool source = s.side == "source";
    (source ? metrics_.source_stalls : metrics_.destination_stalls)
        .fetch_add(1, std::memory_order_relaxed);
    spdlog::warn(
        "pipeline {}: {} {} stalled: no progress for {}; pending: {} (stall_timeout {} ms)",
        options_.id, source ? options_.source_connector : options_.destination_connector, s.side,
        seconds_text(s.seconds), s.pending, options_.stall_timeout.count());
  }
  for (const Stall& s : stalls_) {
    if (find(now_stalled, s.side)) continue;
    const bool source = s.side == "source";
    // s.seconds: as of the last check that found the side stalled (≤ one acker wake-up ago).
    spdlog::info("pipeline {}: {} {} progressing again after a stall of {}", options_.id,
                 source ? options_.source_connector : options_.destination_connector, s.side,
                 seconds_text(s.seconds));
  }
  stalls_ = std::move(now_stalled);
}

void Pipeline::count_snapshot_rows(const Batch& batch, size_t first) {
  const auto& records = batch.records();
  size_t i = first;
  while (i < records.size()) {
    if (records[i].op != Operation::snapshot) {
      ++i;
      continue;
    }
    // A run of one table's snapshot rows (a snapshot reads a table at a time). Rows whose
    // metadata is the very object of the run's first row (sources share one per table and batch)
    // belong to it without a lookup.
    const std::string_view schema = records[i].meta(meta::kSchema);
    const std::string_view table = records[i].meta(meta::kTable);
    const Field* const shared =
        records[i].metadata.is_object() ? records[i].metadata.fields().data() : nullptr;
    auto same_table = [&](const Record& r) {
      if (shared != nullptr && r.metadata.is_object() && r.metadata.fields().data() == shared)
        return true;
      return r.meta(meta::kTable) == table && r.meta(meta::kSchema) == schema;
    };
    uint64_t rows = 0;
    while (i < records.size() && records[i].op == Operation::snapshot && same_table(records[i])) {
      ++rows;
      ++i;
    }
    std::string name =
        schema.empty() ? std::string(table) : std::string(schema) + "." + std::string(table);
    std::lock_guard lock(snapshot_tables_mu_);
    auto it = std::find_if(snapshot_tables_.begin(), snapshot_tables_.end(),
                           [&](const auto& e) { return e.first == name; });
    if (it == snapshot_tables_.end()) snapshot_tables_.emplace_back(std::move(name), rows);
    else it->second += rows;
  }
}

std::vector<std::pair<std::string, uint64_t>> Pipeline::snapshot_rows_by_table() const {
  std::lock_guard lock(snapshot_tables_mu_);
  return snapshot_tables_;
}

std::string Pipeline::checkpoint_position() const {
  std::lock_guard lock(pos_mu_);
  return checkpoint_position_;
}

std::string Pipeline::read_position() const {
  std::lock_guard lock(pos_mu_);
  return read_position_;
}

std::string Pipeline::written_position() const {
  std::lock_guard lock(pos_mu_);
  return written_position_;
}

Status Pipeline::run() {
  LogScope log_scope(options_.id, {});
  if (!spool_) return run_stages();
  if (Status st = spool_->open(); !st.ok()) {
    metrics_.state = static_cast<int>(PipelineState::failed);
    return st.error().with_context("spool: ");
  }
  // spdlog's registry is created on first use; have it made before the second thread exists, so
  // the two sides never race to create it (TSan saw that in a process that had not logged yet).
  (void)spdlog::default_logger_raw();
  if (Status st = prepare_readers(); !st.ok()) {
    spool_->close();
    metrics_.state = static_cast<int>(PipelineState::failed);
    return st;
  }
  // Each destination side runs on its own thread, at its own pace; a failure (not a retriable
  // one: those are retried in place) stops them all.
  std::vector<std::thread> downs;
  for (size_t i = 0; i < downstreams_.size(); ++i) {
    downs.emplace_back([this, i] {
      Status st = downstreams_[i]->run();
      if (st.ok()) return;
      fail(fan_out_ ? st.error().with_context("destination " + reader_names_[i] + ": ")
                    : st.error());
    });
  }
  Status upstream = run_stages();
  // The source ended (a finite source): the destination sides drain the spool, then end.
  // Otherwise (a stop, a failure) they stop now; what is spooled waits for the next run.
  if (stop_.stop_requested()) {
    for (auto& d : downstreams_) d->request_stop();
  } else {
    spool_->finish();
  }
  for (std::thread& t : downs) t.join();
  spool_->close();
  std::optional<Error> failure;
  {
    std::lock_guard lock(fail_mu_);
    failure = failure_;
  }
  if (failure) {
    metrics_.state = static_cast<int>(PipelineState::failed);
    return *failure;
  }
  return upstream;
}

Status Pipeline::prepare_readers() {
  // Where the spool began: a fresh spool records whether the source had a position then (a
  // pipeline that ran without the spool before) — only one made at the beginning holds every
  // batch a destination added later needs.
  auto source_checkpoint = checkpoints_->load(checkpoint_key());
  if (!source_checkpoint.ok()) return source_checkpoint.error().with_context("checkpoint store: ");
  SLUICE_TRY(spool_->mark_origin(!source_checkpoint.value().has_value()));
  for (size_t i = 0; i < downstreams_.size(); ++i) {
    const std::string& name = reader_names_[i];
    const std::string key = downstreams_[i]->checkpoint_key();
    auto loaded = checkpoints_->load(key);
    if (!loaded.ok()) return loaded.error().with_context("checkpoint store: ");
    std::optional<uint64_t> after;
    if (loaded.value()) {
      after = spool::parse_spool_position(*loaded.value());
      if (!after) continue;  // the reader's open refuses it with the fix
    } else if (!spool_->covers_beginning(name)) {
      const std::string who =
          fan_out_ ? "destination '" + name + "'" : std::string("the destination");
      return Error(
          Errc::config,
          fmt::format("pipeline {}: {} has no spool checkpoint ({}) and the spool {} no longer "
                      "holds the pipeline's beginning (its first batches were released, or it "
                      "was added to a pipeline that ran without it): give the destination a "
                      "pipeline of its own (it snapshots), keep its old `name` if it was "
                      "renamed, or reset the whole pipeline with `sluice cleanup`",
                      options_.id, who, key,
                      options_.spool ? options_.spool->path : options_.spool_type));
    } else {
      after = 0;  // a destination added later: from the spool's first batch
      if (fan_out_)
        spdlog::info("pipeline {}: destination {} is new: it starts from the spool's first batch",
                     options_.id, name);
    }
    // Registers the reader where its checkpoint is (its destination may store a later position:
    // it moves on from there when it opens), so retention and its lag count from it at once.
    auto reader = spool_->open_reader(name, after);
    if (!reader.ok())
      return reader.error().with_context(fan_out_ ? "destination " + name + ": " : "");
  }
  return ok_status();
}

Status Pipeline::run_stages() {
  auto loaded = checkpoints_->load(checkpoint_key());
  if (!loaded.ok()) return std::move(loaded).error();
  std::optional<std::string> checkpoint = std::move(loaded.value());
  if (checkpoint) {
    std::lock_guard lock(pos_mu_);
    checkpoint_position_ = *checkpoint;
  }

  source_history_ = std::make_unique<CheckpointStoreHistory>(checkpoints_, options_.id);
  ConnectorContext source_ctx{options_.id, options_.source_connector, &metrics_.source_stats,
                              registry_};
  source_ctx.dead_letters = dlq_ && options_.on_error == PipelineOptions::OnError::dlq;
  source_ctx.history = source_history_.get();
  ConnectorContext dest_ctx{options_.id, options_.destination_connector,
                            &metrics_.destination_stats, registry_};
  dest_ctx.destination = options_.destination_name;
  // The destination opens first: one that stores positions (in the same transaction as the rows)
  // decides where the source resumes.
  for (Backoff backoff;;) {
    Status st = destination_->open(dest_ctx);
    if (st.ok()) break;
    if (options_.retry_destination_open && st.error().retriable() && !stop_.stop_requested()) {
      // The destination side of a spool: the source keeps spooling meanwhile.
      spdlog::warn("pipeline {}: {} (retrying in ~{} ms; the source keeps spooling)", options_.id,
                   prefix_context(destination_label() + ": ", st.error().message()),
                   backoff.next_delay().count());
      destination_->close();
      if (backoff.wait(stop_.get_token())) continue;
      metrics_.state = static_cast<int>(PipelineState::stopped);
      return ok_status();
    }
    metrics_.state = static_cast<int>(PipelineState::failed);
    return st.error().with_context(destination_label() + ": ");
  }
  const char* resumed_from = checkpoint ? "checkpoint store" : nullptr;
  if (destination_->stores_positions()) {
    auto stored = destination_->stored_position(options_.id);
    if (!stored.ok()) {
      destination_->close();
      metrics_.state = static_cast<int>(PipelineState::failed);
      return stored.error().with_context(options_.destination_connector +
                                         " destination: cannot read the stored position: ");
    }
    if (stored.value()) {
      if (!checkpoint || *checkpoint != *stored.value()) {
        spdlog::info(
            "pipeline {}: using the position stored in the destination ({}); the checkpoint store "
            "is updated to match",
            options_.id,
            checkpoint ? "it differs from the checkpoint store's"
                       : "the checkpoint store has none");
        if (Status st = checkpoints_->save(checkpoint_key(), *stored.value()); !st.ok()) {
          destination_->close();
          metrics_.state = static_cast<int>(PipelineState::failed);
          return st.error().with_context("checkpoint store: ");
        }
      }
      checkpoint = std::move(stored.value());
      resumed_from = "destination";
      std::lock_guard lock(pos_mu_);
      checkpoint_position_ = *checkpoint;
    }
  }
  if (Status st = source_->open(source_ctx, checkpoint); !st.ok()) {
    destination_->close();
    metrics_.state = static_cast<int>(PipelineState::failed);
    return st.error().with_context(options_.source_connector + " source: ");
  }
  if (Status st = destination_->check_routing(source_->captured_tables()); !st.ok()) {
    destination_->close();
    source_->close();
    metrics_.state = static_cast<int>(PipelineState::failed);
    return st.error().with_context(destination_label() + ": ");
  }
  if (dlq_) {
    ConnectorContext dlq_ctx{options_.id, options_.dlq_connector, nullptr, registry_};
    dlq_ctx.is_dead_letter_queue = true;
    if (!options_.destination_name.empty())
      dlq_ctx.destination = options_.destination_name + ".dlq";
    if (Status st = dlq_->open(dlq_ctx); !st.ok()) {
      destination_->close();
      source_->close();
      metrics_.state = static_cast<int>(PipelineState::failed);
      return st.error().with_context(options_.dlq_connector + " dead-letter destination: ");
    }
  }
  for (auto& p : processors_) {
    ConnectorContext processor_ctx{options_.id, "processor", nullptr, registry_};
    processor_ctx.destination = options_.destination_name;
    if (Status st = p->open(processor_ctx); !st.ok()) {
      destination_->close();
      source_->close();
      if (dlq_) dlq_->close();
      metrics_.state = static_cast<int>(PipelineState::failed);
      return st.error().with_context("processor: ");
    }
  }
  if (checkpoint) last_position_written_ = *checkpoint;
  max_in_flight_ = destination_->max_in_flight() + options_.spare_batches;
  idle_since_ns_ = steady_ns();
  metrics_.state = static_cast<int>(PipelineState::running);
  spdlog::info("pipeline {}: started ({} → {}){}", options_.id, options_.source_connector,
               options_.destination_connector,
               checkpoint ? fmt::format(", resuming from checkpoint (position stored in the {})",
                                        resumed_from)
                          : std::string());

  std::jthread acker([this](std::stop_token st) { acker_loop(st); });
  std::thread writer([this] { writer_loop(); });
  std::thread reader([this] { reader_loop(stop_.get_token()); });

  reader.join();
  if (stop_.stop_requested()) metrics_.state = static_cast<int>(PipelineState::stopping);
  writer.join();
  if (Status st = destination_->flush(std::chrono::seconds(60)); !st.ok()) fail(st.error());
  {
    // Every batch handed to the destination comes back through on_written (or is released).
    std::unique_lock lock(pool_mu_);
    bool drained = pool_cv_.wait_for(lock, std::chrono::seconds(60),
                                     [&] { return free_batches_.size() == all_batches_.size(); });
    if (!drained) {
      lock.unlock();
      fail(Error(Errc::timeout, "destination did not complete in-flight batches within 60 s"));
    }
  }
  acker.request_stop();
  acker_.notify();
  acker.join();

  source_->close();
  destination_->close();
  if (dlq_) dlq_->close();

  std::optional<Error> failure;
  {
    std::lock_guard lock(fail_mu_);
    failure = failure_;
  }
  if (failure) {
    metrics_.state = static_cast<int>(PipelineState::failed);
    return *failure;
  }
  metrics_.state = static_cast<int>(PipelineState::stopped);
  return ok_status();
}

Batch* Pipeline::take_batch(std::stop_token stop) {
  std::unique_lock lock(pool_mu_);
  pool_cv_.wait(lock, stop,
                [&] { return !free_batches_.empty() || all_batches_.size() < max_in_flight_; });
  if (stop.stop_requested()) return nullptr;
  if (!free_batches_.empty()) {
    Batch* b = free_batches_.back();
    free_batches_.pop_back();
    return b;
  }
  all_batches_.push_back(std::make_unique<Batch>());
  return all_batches_.back().get();
}

void Pipeline::release_batch(Batch* batch) {
  batch->clear();
  // Notified under the lock: run() returns (and the pipeline may be destroyed) once every batch is
  // back, which it can only see after this unlock — never while notify_all() still runs on a
  // destination's completion thread (TSan saw that use after free).
  std::lock_guard lock(pool_mu_);
  free_batches_.push_back(batch);
  pool_cv_.notify_all();
}

void Pipeline::reader_loop(std::stop_token stop) {
  LogScope log_scope(options_.id, options_.source_connector);
  ReadRequest req;
  req.max_records = options_.max_records;
  req.max_bytes = options_.max_bytes;
  req.linger = options_.linger;
  req.poll = options_.poll;
  while (!stop.stop_requested()) {
    Batch* batch = take_batch(stop);
    if (batch == nullptr) break;
    read_started_ns_ = steady_ns();
    auto result = source_->read(*batch, req, stop);
    read_started_ns_ = 0;
    if (!result.ok()) {
      release_batch(batch);
      if (result.error().code() != Errc::cancelled)
        fail(result.error().with_context(options_.source_connector + " source: "));
      break;
    }
    const ReadStatus status = result.value();
    const ReadCounts counts = count_read(*batch);
    const size_t n = batch->size() - counts.control;  // data records read
    batch->set_read_count(n);
    metrics_.records_read.fetch_add(n, std::memory_order_relaxed);
    count_snapshot_rows(*batch, counts.first_snapshot);
    if (batch->size() > 0) {
      // A source that tracks positions per record may leave the batch's own unset.
      if (!batch->has_position() && !batch->records().back().position.empty())
        batch->set_position(batch->records().back().position);
      idle_since_ns_ = steady_ns();
      bool ok = true;
      if (processors_pending_.load(std::memory_order_acquire)) {
        if (Status st = swap_pending_processors(); !st.ok()) {
          fail(std::move(st).error());
          release_batch(batch);
          break;
        }
      }
      for (auto& p : processors_) {
        if (Status st = p->process(*batch); !st.ok()) {
          fail(st.error().with_context("processor: "));
          ok = false;
          break;
        }
      }
      if (!ok) {
        release_batch(batch);
        break;
      }
      // Processors may drop, add or change records; without any, the batch is as it was read.
      size_t control = processors_.empty() ? counts.control : count_control(*batch);
      metrics_.records_filtered.fetch_add(n - (batch->size() - control), std::memory_order_relaxed);
      if (control > 0 && !destination_->accepts_control_records()) {
        std::erase_if(batch->records(), [](const Record& r) { return is_control(r.op); });
        control = 0;
      }
      batch->set_control_count(control);
    }
    source_idle_ = status != ReadStatus::more;
    if (batch->empty() && !batch->has_position()) {
      release_batch(batch);
    } else {
      const uint64_t seq = next_seq_++;
      batch->set_sequence(seq);
      records_begun_.fetch_add(batch->data_count(), std::memory_order_relaxed);
      // Nothing was pending: the destination's wait for this batch starts now.
      if (acker_.pending() == 0) note_destination_progress();
      acker_.begin(seq, batch->position());
      if (batch->has_position()) {
        std::lock_guard lock(pos_mu_);
        read_position_.assign(batch->position());
      }
      if (!queue_.push(batch)) {
        release_batch(batch);
        break;
      }
    }
    if (status == ReadStatus::end) {
      source_ended_ = true;
      spdlog::info("pipeline {}: source finished", options_.id);
      break;
    }
  }
  queue_.close();
}

struct Pipeline::WriteAttempt {
  explicit WriteAttempt(Batch* b) : batch(b) {}
  Batch* batch;
  std::chrono::steady_clock::time_point started;
  std::optional<Backoff> backoff;  // across the retries of this batch; made at the first retry
};

bool Pipeline::failed() const {
  std::lock_guard lock(fail_mu_);
  return failure_.has_value();
}

void Pipeline::writer_loop() {
  LogScope log_scope(options_.id, options_.destination_connector);
  for (;;) {
    run_redo();
    auto item = queue_.pop_unless([this] { return redo_pending_.load(std::memory_order_acquire); });
    if (!item) {
      if (redo_pending_.load(std::memory_order_acquire)) continue;
      break;  // closed and drained
    }
    Batch* batch = *item;
    if (failed()) {  // never write past a failure; these batches are simply not acknowledged
      release_batch(batch);
      continue;
    }
    if (batch->source_rejects() > 0) {
      if (Status st = divert_source_rejects(*batch); !st.ok()) {
        on_written(batch, std::chrono::steady_clock::now(), std::move(st));
        continue;
      }
    }
    if (batch->empty()) {
      // Everything filtered: nothing to write, but its position advances — in the checkpoint
      // store through the acker, and in a destination that stores positions by an empty write
      // (else its stored position, which wins on restart, stays behind).
      const bool advance_destination = destination_->stores_positions() && batch->has_position() &&
                                       batch->position() != last_position_written_;
      if (!advance_destination) {
        note_destination_progress();
        (void)acker_.complete(batch->sequence(), ok_status());
        release_batch(batch);
        continue;
      }
    }
    write_batch(batch);
  }
  drain_async();
}

void Pipeline::write_batch(Batch* batch) {
  if (batch->has_position()) last_position_written_ = batch->position();
  write_attempt(std::make_shared<WriteAttempt>(batch));
}

void Pipeline::write_attempt(const std::shared_ptr<WriteAttempt>& attempt) {
  for (;;) {
    std::optional<Status> early = issue(attempt);
    if (!early) return;  // asynchronous: the completion settles it or posts it back to the writer
    if (!needs_recovery(*early)) {
      on_written(attempt->batch, attempt->started, std::move(*early));
      return;
    }
    if (!recover(attempt, std::move(*early))) return;
  }
}

std::optional<Status> Pipeline::issue(const std::shared_ptr<WriteAttempt>& attempt) {
  struct Call {
    std::mutex mu;
    bool returned = false;
    std::optional<Status> early;
  };
  auto call = std::make_shared<Call>();
  attempt->started = std::chrono::steady_clock::now();
  destination_->write(*attempt->batch, [this, attempt, call](Status st) {
    {
      std::lock_guard lock(call->mu);
      if (!call->returned) {  // completed synchronously: handled by the writer once write() returns
        call->early = std::move(st);
        return;
      }
    }
    if (needs_recovery(st)) post_redo(attempt, std::move(st));
    else on_written(attempt->batch, attempt->started, std::move(st));
  });
  std::lock_guard lock(call->mu);
  call->returned = true;
  return std::move(call->early);
}

bool Pipeline::needs_recovery(const Status& status) const noexcept {
  if (status.ok()) return false;
  if (status.error().code() == Errc::data && options_.on_error == PipelineOptions::OnError::dlq &&
      dlq_)
    return true;
  return status.error().retriable();
}

bool Pipeline::recover(const std::shared_ptr<WriteAttempt>& attempt, Status status) {
  Batch* batch = attempt->batch;
  if (failed()) {  // another batch failed meanwhile: write nothing more
    on_written(batch, attempt->started, std::move(status));
    return false;
  }
  if (status.error().code() == Errc::data && options_.on_error == PipelineOptions::OnError::dlq &&
      dlq_) {
    const uint64_t dlq_before = metrics_.dlq_records.load();
    Status isolated = destination_->isolates_rejected_records()
                          ? isolate_in_destination(*batch, status.error())
                          : isolate_rejected(*batch, status.error());
    on_written(batch, attempt->started, std::move(isolated),
               metrics_.dlq_records.load() - dlq_before);
    return false;
  }
  // A retriable error (connection lost, deadlock, busy): the batch is idempotent, write it again.
  metrics_.write_retries.fetch_add(1, std::memory_order_relaxed);
  if (!attempt->backoff) attempt->backoff.emplace();
  Backoff& backoff = *attempt->backoff;
  const bool give_up =
      options_.max_write_retries > 0 && backoff.attempts() >= options_.max_write_retries;
  spdlog::warn("{} (retrying in ~{} ms)",
               prefix_context(fmt::format("pipeline {}: {}: ", options_.id, destination_label()),
                              status.error().message()),
               backoff.next_delay().count());
  if (give_up || !backoff.wait(stop_.get_token())) {
    on_written(batch, attempt->started, std::move(status));
    return false;
  }
  return true;
}

void Pipeline::post_redo(std::shared_ptr<WriteAttempt> attempt, Status status) {
  {
    std::lock_guard lock(redo_mu_);
    redo_.emplace_back(std::move(attempt), std::move(status));
    redo_pending_.store(true, std::memory_order_release);
  }
  queue_.wake();
  std::lock_guard lock(pool_mu_);  // drain_async() waits on pool_cv_ (notified under the lock)
  pool_cv_.notify_all();
}

void Pipeline::run_redo() {
  for (;;) {
    std::pair<std::shared_ptr<WriteAttempt>, Status> item{nullptr, ok_status()};
    {
      std::lock_guard lock(redo_mu_);
      if (redo_.empty()) {
        redo_pending_.store(false, std::memory_order_release);
        return;
      }
      item = std::move(redo_.front());
      redo_.pop_front();
    }
    if (recover(item.first, std::move(item.second))) write_attempt(item.first);
  }
}

void Pipeline::drain_async() {
  for (;;) {
    run_redo();
    std::unique_lock lock(pool_mu_);
    // Every batch not in the pool is with the destination (the queue is drained). When they do
    // not come back in time, run() reports the timeout.
    const bool settled = pool_cv_.wait_for(lock, std::chrono::seconds(60), [&] {
      return redo_pending_.load(std::memory_order_acquire) ||
             free_batches_.size() == all_batches_.size();
    });
    if (!settled) return;
    if (!redo_pending_.load(std::memory_order_acquire)) return;
  }
}

Status Pipeline::write_with_retry(Batch& batch) {
  Backoff backoff;
  std::stop_token stop = stop_.get_token();
  for (;;) {
    auto done = std::make_shared<std::promise<Status>>();
    std::future<Status> result = done->get_future();
    destination_->write(batch, [done](Status st) { done->set_value(std::move(st)); });
    Status st = result.get();
    if (st.ok() || !st.error().retriable()) return st;
    metrics_.write_retries.fetch_add(1, std::memory_order_relaxed);
    spdlog::warn("{} (retrying)",
                 prefix_context(fmt::format("pipeline {}: {}: ", options_.id, destination_label()),
                                st.error().message()));
    if (!backoff.wait(stop)) return st;
  }
}

Status Pipeline::isolate_rejected(const Batch& batch, const Error& error) {
  const std::span<const Record> all(batch.records());
  const Record* const end = all.data() + all.size();
  bool position_written = !batch.has_position();
  // Rejected records are collected and sent in one dead-letter write — before the sub-write that
  // carries the batch's position, so that the position never commits ahead of them.
  std::vector<DeadLetter> letters;
  // Depth-first over halves keeps the records the destination accepts in their original order;
  // the sub-write that ends with the batch's last record is the last write of all and carries
  // the batch's position.
  std::function<Status(std::span<const Record>, const Error&)> split =
      [&](std::span<const Record> part, const Error& err) -> Status {
    if (part.size() == 1) {
      // A schema change or marker the destination refused is not a row: it stops the pipeline.
      if (is_control(part.front().op)) return err;
      letters.push_back({&part.front(), err.message()});
      return ok_status();
    }
    const size_t mid = part.size() / 2;
    for (std::span<const Record> half : {part.first(mid), part.subspan(mid)}) {
      Batch sub;
      sub.records().assign(half.begin(), half.end());
      sub.set_control_count(count_control(sub));
      const bool last = half.data() + half.size() == end;
      if (last && batch.has_position()) {
        sub.set_position(batch.position());
        SLUICE_TRY(send_dead_letters(letters, batch.size()));
      }
      Status st = write_with_retry(sub);
      if (st.ok()) {
        position_written = position_written || last;
        continue;
      }
      if (st.error().code() != Errc::data) return st;
      if (Status inner = split(half, st.error()); !inner.ok()) return inner;
    }
    return ok_status();
  };
  SLUICE_TRY(split(all, error));
  SLUICE_TRY(send_dead_letters(letters, batch.size()));
  if (!position_written && destination_->stores_positions()) {
    // The batch's last record went to the dead-letter queue: its position commits on its own.
    Batch tail;
    tail.set_position(batch.position());
    SLUICE_TRY(write_with_retry(tail));
  }
  return ok_status();
}

Status Pipeline::isolate_in_destination(Batch& batch, const Error& error) {
  // A destination that stores positions commits the batch's position only after the rejected
  // records are in the dead-letter queue: with an empty batch of its own, at the end.
  const bool position_after = destination_->stores_positions() && batch.has_position();
  std::vector<RejectedRecord> rejected;
  Backoff backoff;
  for (;;) {
    Status st = destination_->write_isolating(batch, !position_after, rejected);
    if (st.ok()) break;
    if (!st.error().retriable()) {
      // Not a record's fault (e.g. DDL the server refuses): isolate by halving instead.
      if (st.error().code() == Errc::data || st.error().code() == Errc::unsupported)
        return isolate_rejected(batch, error);
      return st;
    }
    metrics_.write_retries.fetch_add(1, std::memory_order_relaxed);
    spdlog::warn("pipeline {}: {}: {} (retrying)", options_.id, destination_label(),
                 st.error().message());
    if (!backoff.wait(stop_.get_token())) return st;
  }
  std::vector<DeadLetter> letters;
  letters.reserve(rejected.size());
  for (const RejectedRecord& r : rejected)
    letters.push_back({&batch.records()[r.index], r.error.message()});
  SLUICE_TRY(send_dead_letters(letters, batch.size()));
  if (position_after) {
    Batch tail;
    tail.set_position(batch.position());
    SLUICE_TRY(write_with_retry(tail));
  }
  return ok_status();
}

Status Pipeline::divert_source_rejects(Batch& batch) {
  std::vector<DeadLetter> letters;
  for (const Record& r : batch.records()) {
    const Value* reason = r.metadata.is_object() ? r.metadata.find(meta::kError) : nullptr;
    if (reason) letters.push_back({&r, std::string(reason->as_text()), true});
  }
  batch.clear_source_rejects();
  if (letters.empty()) return ok_status();
  const size_t n = batch.size();
  SLUICE_TRY(send_dead_letters(letters, n));
  // The records stay in the batch's arena; only their slots go.
  std::erase_if(batch.records(), [](const Record& r) {
    return r.metadata.is_object() && r.metadata.find(meta::kError) != nullptr;
  });
  return ok_status();
}

Status Pipeline::send_dead_letters(std::vector<DeadLetter>& letters, size_t batch_size) {
  if (letters.empty()) return ok_status();
  Batch dl;
  dl.records().reserve(letters.size());
  for (const DeadLetter& d : letters) {
    Record& r = dl.add();
    r = *d.record;
    // The record as it was, plus why it was rejected and by whom.
    const uint32_t n = d.record->metadata.is_object() ? d.record->metadata.size() : 0;
    ObjectBuilder m = dl.object(n + 4);
    if (n) {
      for (const Field& f : d.record->metadata.fields())
        if (f.name != meta::kError) m.add(f.name, f.value);
    }
    m.add(meta::kError, Value::string(dl.copy(redact(d.reason))));
    m.add("sluice.pipeline", Value::string(dl.copy(options_.id)));
    if (d.by_source) m.add("sluice.source", Value::string(dl.copy(options_.source_connector)));
    else m.add("sluice.destination", Value::string(dl.copy(options_.destination_connector)));
    if (!d.by_source && !options_.destination_name.empty())
      m.add("sluice.destination_name", Value::string(dl.copy(options_.destination_name)));
    r.metadata = m.build();
  }
  auto done = std::make_shared<std::promise<Status>>();
  std::future<Status> result = done->get_future();
  dlq_->write(dl, [done](Status st) { done->set_value(std::move(st)); });
  Status st = result.get();
  if (!st.ok())
    return st.error().with_context("dead-letter queue (" + options_.dlq_connector + "): ");
  metrics_.dlq_records.fetch_add(letters.size(), std::memory_order_relaxed);
  // One line per batch, however many records it rejected (sluice_dlq_records_total counts them).
  spdlog::warn("pipeline {}: {} of {} records sent to the dead-letter queue by the {}; first: {}",
               options_.id, letters.size(), batch_size,
               letters.front().by_source ? options_.source_connector + " source"
                                         : options_.destination_connector + " destination",
               letters.front().reason);
  letters.clear();
  return ok_status();
}

void Pipeline::on_written(Batch* batch, std::chrono::steady_clock::time_point started,
                          Status status, uint64_t dead_lettered) {
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  metrics_.write_latency.observe(seconds);
  if (status.ok()) {
    metrics_.records_written.fetch_add(batch->data_count() - dead_lettered,
                                       std::memory_order_relaxed);
    metrics_.bytes_written.fetch_add(batch->bytes(), std::memory_order_relaxed);
    // A position-only write of an emptied batch is not a batch of records.
    if (!batch->empty()) metrics_.batches_written.fetch_add(1, std::memory_order_relaxed);
    if (batch->has_position()) {
      std::lock_guard lock(pos_mu_);
      written_position_.assign(batch->position());
    }
  } else if (status.error().code() == Errc::cancelled && stop_.stop_requested()) {
    // A write the stop interrupted (a wait for room in a full spool): not acknowledged, so the
    // next run writes it again; a graceful stop, not a failure.
  } else {
    metrics_.write_errors.fetch_add(1, std::memory_order_relaxed);
    fail(status.error().with_context(destination_label() + ": "));
  }
  // The destination committed the batch (a Kafka transaction, a SQL transaction with the position
  // stored in it); the checkpoint store does not have it yet.
  if (status.ok() && !batch->empty()) SLUICE_FAILPOINT("after_destination_commit");
  note_destination_progress();
  (void)acker_.complete(batch->sequence(), status);
  release_batch(batch);
}

void Pipeline::persist(const std::string& position) {
  if (Status st = checkpoints_->save(checkpoint_key(), position); !st.ok()) {
    fail(st.error().with_context("checkpoint store: "));
    return;
  }
  SLUICE_FAILPOINT("after_checkpoint");  // checkpointed, the source not yet acknowledged
  source_->ack(position);
  metrics_.checkpoints.fetch_add(1, std::memory_order_relaxed);
  metrics_.last_checkpoint_unix_ms = now_unix_ms();
  std::lock_guard lock(pos_mu_);
  checkpoint_position_ = position;
}

void Pipeline::acker_loop(std::stop_token stop) {
  LogScope log_scope(options_.id, options_.source_connector);  // acks go to the source
  while (!stop.stop_requested()) {
    acker_.wait_for_change(options_.checkpoint_interval);
    if (auto pos = acker_.take_advanced()) persist(*pos);
    check_stalls();
  }
  if (auto pos = acker_.take_advanced()) persist(*pos);
  std::lock_guard lock(stall_mu_);
  stalls_.clear();  // a pipeline that stopped is not stalled
}

void Pipeline::replace_processors(std::vector<std::unique_ptr<Processor>> processors) {
  std::lock_guard lock(pending_processors_mu_);
  pending_processors_ = std::move(processors);
  processors_pending_.store(true, std::memory_order_release);
}

Status Pipeline::swap_pending_processors() {
  std::vector<std::unique_ptr<Processor>> next;
  {
    std::lock_guard lock(pending_processors_mu_);
    processors_pending_.store(false, std::memory_order_release);
    if (!pending_processors_) return ok_status();
    next = std::move(*pending_processors_);
    pending_processors_.reset();
  }
  for (auto& p : next) {
    ConnectorContext processor_ctx{options_.id, "processor", nullptr, registry_};
    if (Status st = p->open(processor_ctx); !st.ok())
      return st.error().with_context("reloaded processor: ");
  }
  // The old chain (and its probes) goes here, on the thread that ran it.
  processors_ = std::move(next);
  spdlog::info("pipeline {}: processors replaced ({} processor{})", options_.id, processors_.size(),
               processors_.size() == 1 ? "" : "s");
  return ok_status();
}

}  // namespace sluice
