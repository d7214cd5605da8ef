// The log-source skeleton: one Source implementation for every connector that reads a database's
// change log after an optional consistent snapshot (postgres, mysql; next mongodb, redis). The
// connector writes a driver — connect, snapshot chunks, open the stream, decode its events — and
// the skeleton owns, once, what every such source needs:
//
//   open(checkpoint) ─▶ decode (LogPosition) ─▶ driver.connect ─▶ done? ──yes──▶ read: end
//                                                       │ no
//                                                       ▼
//                                     driver.plan_start: phase + point (+ snapshot begun)
//                                                       │
//   read():  reset per-batch caches, then by phase      ▼
//    ┌──────────── snapshot ────────────┐   finished   ┌──────────── stream ────────────────┐
//    │ driver.read_snapshot (a chunk)   │─────────────▶│ down? wait for the backoff's due    │
//    │ skeleton: rows/progress stats,   │ finish_snap- │   time, return idle (never blocks   │
//    │ position "snapshot …"            │ shot; done   │   stop); else driver.start_stream   │
//    └──────────────────────────────────┘ if initial_  │ driver.read_stream → more|idle|lost │
//                                         only         │ lost: resume point from what was    │
//                                                      │   returned, reconnect with backoff  │
//                                                      │ position "cdc <point> [<tx> <n>]"   │
//                                                      └─────────────────────────────────────┘
//
// Reported (connection_probe.h, registered in open(), unregistered in close()): connected or
// down, reconnects, the current outage's length and the phase — stored at connection events
// only, read at scrape time.
//
// Who owns what: the skeleton owns the position (LogState::position), the transaction-resume
// counters (LogState::tx), the per-batch caches (LogState::caches), the reconnect backoff and
// the stats; the driver owns its connections, catalogue and decoder, and moves the position's
// point forward as transactions commit. Every call reaches the driver from the reader thread,
// except ack() (the acker thread).
#pragma once

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <compare>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "connectors/common/connection_probe.h"
#include "connectors/common/incremental_snapshot.h"
#include "connectors/common/log_position.h"
#include "sluice/connector.h"
#include "support/backoff.h"
#include "support/failpoint.h"

namespace sluice {

// Resume inside a transaction. A position may say "the first n changes of the transaction starting
// at tx are durable"; after a restart (or a reconnect) that transaction comes again from its start,
// and its first n changes must be skipped. The driver reports transaction boundaries and changes;
// this class decides what to skip and what the next position names.
template <class TxPoint>
class TransactionResume {
 public:
  // The first `n` changes of the transaction starting at `tx` were written (checkpoint).
  void resume_at(const TxPoint& tx, uint64_t n) {
    resume_tx_ = tx;
    resume_n_ = n;
  }
  // A transaction starts at `tx`; when it is the interrupted one, its written changes are skipped.
  void begin(const TxPoint& tx) {
    in_tx_ = true;
    tx_ = tx;
    n_ = 0;
    skip_ = 0;
    if (resume_n_ && resume_tx_ == tx) skip_ = resume_n_;
    resume_n_ = 0;
  }
  // Counts one change; false when it was written before the restart (the driver drops it).
  bool next_change() { return ++n_ > skip_; }
  void end() {
    in_tx_ = false;
    n_ = 0;
    skip_ = 0;
  }
  bool in_transaction() const { return in_tx_; }
  // Between transactions with no interrupted one pending: the point may move past the last
  // commit (an idle heartbeat).
  bool settled() const { return !in_tx_ && resume_n_ == 0; }
  // The partly durable transaction the next position must name, if any.
  std::optional<std::pair<TxPoint, uint64_t>> partial() const {
    if (in_tx_ && std::max(n_, skip_) > 0)
      return std::make_pair(tx_, std::max(n_, skip_));  // skipped ones count
    if (!in_tx_ && resume_n_ > 0)
      return std::make_pair(resume_tx_, resume_n_);  // not come again yet
    return std::nullopt;
  }
  // The stream broke: it restarts from the last commit, so what was read of the current
  // transaction becomes the part to skip.
  void connection_lost() {
    if (auto p = partial(); p && in_tx_) resume_at(p->first, p->second);
    in_tx_ = false;
    n_ = 0;
    skip_ = 0;
  }

 private:
  bool in_tx_ = false;
  TxPoint tx_{};
  uint64_t n_ = 0, skip_ = 0;
  TxPoint resume_tx_{};
  uint64_t resume_n_ = 0;
};

// Caches that live for one batch (reset by every read()): the shared descriptions the batch's
// records point into, retained once each, and the current transaction's metadata strings copied
// into the batch's arena once, not per record.
class BatchCaches {
 public:
  static constexpr size_t kTxFields = 4;

  void reset() {
    retained_.clear();
    tx_valid_ = false;
  }
  template <class T>
  void retain(Batch& batch, const std::shared_ptr<T>& p) {
    if (std::find(retained_.begin(), retained_.end(), p.get()) != retained_.end()) return;
    batch.retain(p);
    retained_.push_back(p.get());
  }
  // The transaction's metadata in this batch, or null when it must be copied in (then fill the
  // array and call set_tx_metadata()).
  const std::array<std::string_view, kTxFields>* tx_metadata() const {
    return tx_valid_ ? &tx_ : nullptr;
  }
  const std::array<std::string_view, kTxFields>& set_tx_metadata(
      const std::array<std::string_view, kTxFields>& v) {
    tx_ = v;
    tx_valid_ = true;
    return tx_;
  }
  void invalidate_tx_metadata() { tx_valid_ = false; }

 private:
  std::vector<const void*> retained_;
  std::array<std::string_view, kTxFields> tx_{};
  bool tx_valid_ = false;
};

// What the skeleton shares with its driver.
template <class Traits>
struct LogState {
  using Position = LogPosition<Traits>;
  Position position;  // read so far: the next batch's position (tx fields: see `tx`)
  TransactionResume<typename Traits::TxPoint> tx;
  BatchCaches caches;
  ConnectorContext ctx;
  int64_t snapshot_rows = 0;
  IncrementalSnapshot incremental;  // windows and buffer; its tables/cursor: position.incremental

  // A transaction starts (the driver saw its first event).
  void begin_transaction(const typename Traits::TxPoint& at) {
    tx.begin(at);
    caches.invalidate_tx_metadata();
  }
  // A transaction committed at `commit_unix_micros` (lag).
  void report_commit_time(int64_t commit_unix_micros) {
    if (!ctx.stats) return;
    const int64_t now = std::chrono::duration_cast<std::chrono::microseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    ctx.stats->lag_ms = std::max<int64_t>(0, (now - commit_unix_micros) / 1000);
  }
  // position.restart_if_tables_changed(tables), with the warning when the snapshot restarts.
  bool restart_snapshot_if_tables_changed(
      const std::vector<std::pair<std::string, std::string>>& tables) {
    if (!position.restart_if_tables_changed(tables)) return false;
    spdlog::warn(
        "pipeline {}: the captured tables changed while the snapshot was unfinished: it starts "
        "again from the first table",
        ctx.pipeline_id);
    return true;
  }
  // A snapshot (re)starts with about `estimated_rows` to read.
  void snapshot_started(int64_t estimated_rows) {
    snapshot_rows = 0;
    if (ctx.stats) {
      ctx.stats->snapshot_rows_total = estimated_rows;
      ctx.stats->snapshot_rows_done = 0;
    }
  }
};

// lost: the snapshot's connection broke; timed_out: the driver gave it up as dead because the
// server stayed silent beyond its timeout (counted as a timeout). Either way the batch holds only
// rows the position names; the skeleton reconnects with backoff (resume_snapshot) and the
// snapshot goes on from the position.
enum class SnapshotRead { more, finished, lost, timed_out };
// lost: the stream broke (reconnect); timed_out: the driver gave the stream up as dead because
// the server stayed silent beyond its timeout (reconnect, and counted as a timeout).
enum class StreamRead { more, idle, lost, timed_out };

// What a connector implements. Calls come from the reader thread (ack: the acker thread).
template <class Traits>
class LogSourceDriver {
 public:
  using State = LogState<Traits>;
  using Position = LogPosition<Traits>;
  virtual ~LogSourceDriver() = default;

  // The connector's name, for messages ("postgres").
  virtual std::string_view name() const = 0;
  // initial_only: the snapshot ends the source.
  virtual bool snapshot_only() const = 0;
  // Connects and checks the server, its configuration and the tables.
  virtual Status connect(State& s) = 0;
  // Decides where to start from s.position (phase none without a checkpoint): sets the phase
  // (snapshot or stream) and the point, and begins the snapshot when that is the phase.
  virtual Status plan_start(State& s) = 0;
  // Reads snapshot rows into `batch` within `req`, advancing s.position's table index and cursor;
  // `finished` once every table is read.
  virtual Result<SnapshotRead> read_snapshot(Batch& batch, const ReadRequest& req,
                                             std::stop_token stop, State& s) = 0;
  // After read_snapshot returned lost or timed_out: reconnects and opens the snapshot again at
  // s.position. A retriable error is retried with backoff.
  virtual Status resume_snapshot(State&) {
    return Error(Errc::unsupported,
                 fmt::format("the {} source cannot resume a snapshot without a restart", name()));
  }
  // Ends the snapshot transaction (the skeleton moves the phase on).
  virtual Status finish_snapshot(State& s) = 0;
  // Whether open() starts the stream at once (failing open when it cannot), or the first read.
  virtual bool start_stream_on_open() const { return false; }
  // Opens the change stream at s.position.point. A retriable error is retried with backoff.
  virtual Status start_stream(State& s) = 0;
  // Reads and decodes events into `batch` within `req`; `lost` when the stream broke (retriable),
  // `timed_out` when the driver closed it because the server went silent beyond its timeout.
  virtual Result<StreamRead> read_stream(Batch& batch, const ReadRequest& req, std::stop_token stop,
                                         State& s) = 0;
  // Closes a broken stream before the skeleton reconnects.
  virtual void stop_stream(State& s) noexcept = 0;
  // After a successful open (e.g. start a status thread).
  virtual void opened(State&) {}
  // A streaming position is durable (acker thread).
  virtual void ack(const Position&) {}
  virtual void close() noexcept = 0;
  virtual Status cleanup(const ConnectorContext&) { return ok_status(); }
  // `sluice doctor` (Source::doctor).
  virtual Result<std::vector<DoctorCheck>> doctor(const ConnectorContext&,
                                                  const std::optional<std::string>& checkpoint) {
    (void)checkpoint;
    return Error(Errc::unsupported, fmt::format("the {} source has no doctor checks yet", name()));
  }
  // `sluice snapshot`: writes an execute-snapshot signal for `tables` (incremental_snapshot.h).
  virtual Status request_snapshot(const ConnectorContext&, const std::vector<std::string>&) {
    return Error(Errc::unsupported,
                 fmt::format("the {} source has no incremental snapshots yet", name()));
  }
  // The tables resolved by connect() (Source::captured_tables).
  virtual std::vector<SourceTable> captured_tables() const { return {}; }
  virtual std::string server_state() const { return {}; }  // Source::server_state()
  // The reconnect schedule (the connector's reconnect.* settings), read once by open().
  virtual BackoffPolicy reconnect_backoff() const { return {}; }
};

// Sleeps until `until` or a stop request, whichever comes first.
void wait_until_or_stop(std::chrono::steady_clock::time_point until, std::stop_token stop);

template <class Traits>
class LogSource final : public Source {
 public:
  using Driver = LogSourceDriver<Traits>;
  using Position = LogPosition<Traits>;

  explicit LogSource(std::unique_ptr<Driver> driver) : driver_(std::move(driver)) {}
  ~LogSource() override { close(); }

  Status open(const ConnectorContext& ctx, const std::optional<std::string>& checkpoint) override {
    s_.ctx = ctx;
    reconnect_ = Backoff(driver_->reconnect_backoff());
    probe_.register_into(ctx, "source", /*with_phase=*/true);
    if (checkpoint) {
      auto p = Position::decode(*checkpoint);
      if (!p)
        return Error(
            Errc::data,
            fmt::format("checkpoint '{}' is not a {} position; run `sluice cleanup` to start over",
                        *checkpoint, driver_->name()));
      s_.position = *p;
    }
    SLUICE_TRY(driver_->connect(s_));
    probe_.connected();
    if (s_.position.phase == LogPhase::done) {
      report_phase();
      spdlog::info("pipeline {}: initial_only snapshot already complete", s_.ctx.pipeline_id);
      return ok_status();
    }
    SLUICE_TRY(driver_->plan_start(s_));
    if (s_.position.phase == LogPhase::none)
      return Error(Errc::internal, fmt::format("{} source: no start phase", driver_->name()));
    if (s_.position.phase == LogPhase::stream) {
      if (s_.position.tx_n) s_.tx.resume_at(s_.position.tx, s_.position.tx_n);
      s_.position.tx_n = 0;
      if (driver_->start_stream_on_open()) {
        // Fail now, not on the first read, when the position is gone or a grant is missing.
        SLUICE_TRY(driver_->start_stream(s_));
        streaming_ = true;
      }
    }
    report_phase();
    driver_->opened(s_);
    return ok_status();
  }

  std::vector<SourceTable> captured_tables() const override { return driver_->captured_tables(); }

  Result<ReadStatus> read(Batch& batch, const ReadRequest& req, std::stop_token stop) override {
    s_.caches.reset();
    switch (s_.position.phase) {
      case LogPhase::snapshot: return read_snapshot(batch, req, stop);
      case LogPhase::stream: return read_stream(batch, req, stop);
      case LogPhase::done: batch.set_position(s_.position.encode()); return ReadStatus::end;
      case LogPhase::none: break;
    }
    return Error(Errc::internal, fmt::format("{} source read before open", driver_->name()));
  }

  void ack(std::string_view position) override {
    auto p = Position::decode(position);
    if (p && p->phase == LogPhase::stream) driver_->ack(*p);
  }

  void close() noexcept override {
    probe_.unregister();
    driver_->close();
  }

  Status cleanup(const ConnectorContext& ctx) override { return driver_->cleanup(ctx); }
  Result<std::vector<DoctorCheck>> doctor(const ConnectorContext& ctx,
                                          const std::optional<std::string>& checkpoint) override {
    return driver_->doctor(ctx, checkpoint);
  }
  Status request_snapshot(const ConnectorContext& ctx,
                          const std::vector<std::string>& tables) override {
    return driver_->request_snapshot(ctx, tables);
  }
  std::string server_state() const override { return driver_->server_state(); }

  // Snapshot positions come before streaming ones; two streaming positions order by their point
  // (everything before it is durable; a point moves only past commits, so a partly durable
  // transaction at an earlier point is covered by any later point), then by how much of the same
  // partly durable transaction they cover. Anything else (two snapshot cursors, another
  // transaction at the same point, a pending incremental snapshot, other captured tables) is left
  // undecided.
  std::optional<std::weak_ordering> compare_positions(std::string_view a,
                                                      std::string_view b) const override {
    if (a == b) return std::weak_ordering::equivalent;
    auto pa = Position::decode(a), pb = Position::decode(b);
    if (!pa || !pb) return std::nullopt;
    auto rank = [](LogPhase phase) { return phase == LogPhase::snapshot ? 0 : 1; };
    if (pa->phase == LogPhase::done || pb->phase == LogPhase::done) return std::nullopt;
    if (rank(pa->phase) != rank(pb->phase)) return rank(pa->phase) <=> rank(pb->phase);
    if (pa->phase != LogPhase::stream) return std::nullopt;
    if (!(pa->incremental == pb->incremental) || pa->captured != pb->captured) return std::nullopt;
    using Point = typename Traits::Point;
    if constexpr (std::three_way_comparable<Point, std::weak_ordering>) {
      if (pa->point != pb->point) return std::weak_ordering(pa->point <=> pb->point);
      if ((pa->tx_n == 0) != (pb->tx_n == 0)) return pa->tx_n <=> pb->tx_n;
      if (pa->tx_n == 0) return std::weak_ordering::equivalent;
      if (!(pa->tx == pb->tx)) return std::nullopt;
      return pa->tx_n <=> pb->tx_n;
    } else {
      return std::nullopt;
    }
  }

  // The position the next batch covers while streaming.
  std::string stream_position() const {
    Position p = s_.position;
    p.phase = LogPhase::stream;
    p.tx_n = 0;
    if (auto partial = s_.tx.partial()) {
      p.tx = partial->first;
      p.tx_n = partial->second;
    }
    return p.encode();
  }

 private:
  Result<ReadStatus> read_snapshot(Batch& batch, const ReadRequest& req, std::stop_token stop) {
    if (snapshot_down_) {
      if (auto not_yet = reconnect([&] { return driver_->resume_snapshot(s_); }, req, stop))
        return std::move(*not_yet);
      snapshot_down_ = false;
    }
    SLUICE_TRY_ASSIGN(const SnapshotRead r, driver_->read_snapshot(batch, req, stop, s_));
    if (r == SnapshotRead::lost || r == SnapshotRead::timed_out) {
      snapshot_down_ = true;
      if (r == SnapshotRead::timed_out) probe_.timed_out();
      else probe_.lost();
    }
    if (r == SnapshotRead::finished) {
      SLUICE_TRY(driver_->finish_snapshot(s_));
      spdlog::info("pipeline {}: snapshot complete ({} rows)", s_.ctx.pipeline_id,
                   s_.snapshot_rows);
      Position next;
      next.phase = driver_->snapshot_only() ? LogPhase::done : LogPhase::stream;
      next.point = s_.position.point;
      next.captured = std::move(s_.position.captured);
      s_.position = std::move(next);
      report_phase();
    }
    if (s_.ctx.stats) s_.ctx.stats->snapshot_rows_done = s_.snapshot_rows;
    // A batch of snapshot rows and more to come (of this table's chunk or the next ones).
    if (s_.position.phase == LogPhase::snapshot && !batch.empty())
      SLUICE_FAILPOINT("mid_snapshot_chunk");
    batch.set_position(s_.position.encode());
    return s_.position.phase == LogPhase::done ? ReadStatus::end : ReadStatus::more;
  }

  Result<ReadStatus> read_stream(Batch& batch, const ReadRequest& req, std::stop_token stop) {
    if (!streaming_) {
      if (auto not_yet = reconnect([&] { return driver_->start_stream(s_); }, req, stop))
        return std::move(*not_yet);
      streaming_ = true;
    }
    SLUICE_TRY_ASSIGN(const StreamRead r, driver_->read_stream(batch, req, stop, s_));
    if (r == StreamRead::lost || r == StreamRead::timed_out) {
      // Restart from exactly what this and earlier batches cover.
      driver_->stop_stream(s_);
      s_.tx.connection_lost();
      streaming_ = false;
      if (r == StreamRead::timed_out) probe_.timed_out();
      else probe_.lost();
    }
    std::string position = stream_position();
    // A batch that ends inside a transaction: its rest comes in the next batches.
    if (!batch.empty() && s_.tx.partial()) SLUICE_FAILPOINT("mid_transaction");
    if (!batch.empty() || position != last_returned_position_) {
      batch.set_position(position);
      last_returned_position_ = std::move(position);
    }
    return r == StreamRead::idle ? ReadStatus::idle : ReadStatus::more;
  }

  // Reconnecting (the stream, or the snapshot): one attempt per due time, returning idle in
  // between, so that the runtime keeps seeing stop requests and idleness while the server is
  // away. Nothing once `attempt` succeeded; else what read() returns now (idle, or the error
  // that is not retriable).
  template <class Attempt>
  std::optional<Result<ReadStatus>> reconnect(Attempt attempt, const ReadRequest& req,
                                              const std::stop_token& stop) {
    const auto now = std::chrono::steady_clock::now();
    if (now < next_attempt_) {
      wait_until_or_stop(std::min(next_attempt_, now + req.poll), stop);
      return ReadStatus::idle;
    }
    if (Status st = attempt(); !st.ok()) {
      if (!st.error().retriable()) return Result<ReadStatus>(st.error());
      probe_.lost();
      const auto delay = reconnect_.next();
      spdlog::warn("pipeline {}: {} (retrying in {} ms)", s_.ctx.pipeline_id, st.error().message(),
                   delay.count());
      next_attempt_ = std::chrono::steady_clock::now() + delay;
      return ReadStatus::idle;
    }
    reconnect_.reset();
    probe_.connected();
    return std::nullopt;
  }

  void report_phase() noexcept {
    switch (s_.position.phase) {
      case LogPhase::snapshot: probe_.set_phase(ConnectionPhase::snapshot); break;
      case LogPhase::stream: probe_.set_phase(ConnectionPhase::stream); break;
      case LogPhase::done: probe_.set_phase(ConnectionPhase::done); break;
      case LogPhase::none: probe_.set_phase(ConnectionPhase::none); break;
    }
  }

  std::unique_ptr<Driver> driver_;
  LogState<Traits> s_;
  bool streaming_ = false;
  bool snapshot_down_ = false;  // the snapshot's connection broke: resume_snapshot() is due
  Backoff reconnect_;           // driver_->reconnect_backoff(), set by open()
  std::chrono::steady_clock::time_point next_attempt_{};
  std::string last_returned_position_;
  ConnectionProbe probe_;
};

}  // namespace sluice
