// Source and destination interfaces. Connectors are created by factories registered in one explicit
// table (src/connectors/registry.cc) from validated Settings.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <compare>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/batch.h"
#include "sluice/metrics.h"
#include "sluice/result.h"

namespace sluice {

// The standard probe of a source: the runtime registers these figures in the metrics registry
// (sluice_source_lag_seconds, sluice_snapshot_rows{kind=done|total}, labelled pipeline and
// connector), so a source only stores them. Written by the connector's thread, read by others;
// -1 means unknown. Further figures: register a probe of your own through
// ConnectorContext::metrics.
struct ConnectorStats {
  std::atomic<int64_t> lag_ms{-1};               // age of the newest record read (CDC sources)
  std::atomic<int64_t> snapshot_rows_done{-1};   // snapshot progress
  std::atomic<int64_t> snapshot_rows_total{-1};  // estimate
};

// State a source keeps beside its checkpoint (the mysql source's schema history): one text per
// pipeline, durable when save() returns, removed with the checkpoint by `sluice cleanup`. A source
// writes it before it returns the records that depend on it, so it may run ahead of the
// checkpoint (the source must read it correctly from any older position). Thread-safe.
class SourceHistory {
 public:
  virtual ~SourceHistory() = default;
  virtual Result<std::optional<std::string>> load() = 0;
  virtual Status save(std::string_view state) = 0;
};

struct ConnectorContext {
  std::string pipeline_id;
  std::string connector;  // registered name
  ConnectorStats* stats = nullptr;
  // Where a connector registers probes beyond `stats` (keep the Registration as a member: the
  // registry outlives the connector). Null when nothing collects metrics (tests, `sluice cleanup`).
  MetricsRegistry* metrics = nullptr;
  // Sources: the pipeline sends records it cannot write to a dead-letter queue (on_error: dlq).
  // A source then marks a record holding a value it cannot represent (Batch::add_source_reject)
  // instead of failing the read.
  bool dead_letters = false;
  // Destinations: this one is a pipeline's dead-letter queue. Destinations that drop metadata
  // (SQL tables) keep meta::kError, why the record was rejected, in a column of its own.
  bool is_dead_letter_queue = false;
  // Sources: where to keep state beside the checkpoint; null when nothing keeps it (tests,
  // `sluice cleanup`).
  SourceHistory* history = nullptr;
  // Destinations of a pipeline with several (`destinations:`): this one's name, unique in the
  // pipeline; empty otherwise. Its series carry it as the label `destination`.
  std::string destination{};

  // The labels every series of this connector carries: pipeline and connector (and destination,
  // when the pipeline has several).
  MetricLabels metric_labels() const {
    MetricLabels labels{{"pipeline", pipeline_id}, {"connector", connector}};
    if (!destination.empty()) labels.emplace_back("destination", destination);
    return labels;
  }
};

struct ReadRequest {
  size_t max_records = 10000;
  size_t max_bytes = 64u << 20;
  // Once the batch holds a record, return at most this long afterwards (batch linger).
  std::chrono::milliseconds linger{50};
  // With nothing to read, return an empty batch after at most this long (lets the runtime check
  // for stop requests and idleness).
  std::chrono::milliseconds poll{200};

  // When a read holding records returns: `linger` after its first record (`first`), or sooner,
  // once nothing arrived for a tenth of the linger after the last (`last`). A burst that ended is
  // not held back: its last records would wait the whole linger for records that are not coming.
  // Records arriving closer together than that still fill one batch.
  std::chrono::steady_clock::time_point linger_deadline(
      std::chrono::steady_clock::time_point first,
      std::chrono::steady_clock::time_point last) const {
    return std::min(first + linger, last + linger / 10);
  }
};

enum class ReadStatus {
  more,  // batch filled to a limit; more is available now
  idle,  // returned because nothing more was available within linger/poll (batch may hold records)
  end,   // finite source finished; batch may hold its last records
};

// A table a source captures, named as its records' metadata name it (`schema`, `table`).
struct SourceTable {
  std::string schema;
  std::string table;
  // After Source::doctor only (else empty): each column's name and its type as the source's
  // server names it ("integer", "varchar(20)"), and the key columns; a destination's doctor
  // compares them with the tables it would write.
  std::vector<std::pair<std::string, std::string>> columns{};
  std::vector<std::string> key{};
};

// One line of `sluice doctor`: a check of a server's set-up made without moving data or creating
// anything on the server. `fix` says what to do when the outcome is not `pass`.
struct DoctorCheck {
  enum class Outcome { pass, warn, fail };
  Outcome outcome = Outcome::pass;
  std::string name;    // what is checked: "wal_level is logical"
  std::string detail;  // what was found: "wal_level = replica"
  std::string fix;     // the remedy, for warn and fail
};

class Source {
 public:
  virtual ~Source() = default;
  // `checkpoint` is the last acknowledged position of this pipeline, if any.
  virtual Status open(const ConnectorContext& ctx,
                      const std::optional<std::string>& checkpoint) = 0;
  // Appends records to `batch` respecting `req`, sets batch.set_position() to the position covered.
  virtual Result<ReadStatus> read(Batch& batch, const ReadRequest& req, std::stop_token stop) = 0;
  // Called in order, from the acker thread, with the position of every batch once it is durable
  // at the destination and checkpointed. Must be cheap and thread-safe with read().
  virtual void ack(std::string_view position) = 0;
  virtual void close() noexcept {}
  // Removes server-side state the source created (replication slot, publication): `sluice cleanup`.
  virtual Status cleanup(const ConnectorContext&) { return ok_status(); }
  // `sluice doctor`: checks the server's configuration, privileges and this pipeline's state on it
  // (nothing is created or moved); `checkpoint` is the pipeline's stored position, if any (e.g. is
  // the log it names still on the server). After it, captured_tables() names the tables it found.
  // Sources without checks refuse with Errc::unsupported.
  virtual Result<std::vector<DoctorCheck>> doctor(const ConnectorContext&,
                                                  const std::optional<std::string>& checkpoint) {
    (void)checkpoint;
    return Error(Errc::unsupported, "this source has no doctor checks yet");
  }
  // Asks a running (or the next) pipeline to snapshot `tables` incrementally while it streams, by
  // writing a signal the source reads in its change stream: `sluice snapshot`. Sources without
  // incremental snapshots refuse.
  virtual Status request_snapshot(const ConnectorContext&, const std::vector<std::string>& tables) {
    (void)tables;
    return Error(Errc::unsupported, "this source has no incremental snapshots");
  }
  // The tables known after open() (empty: the source does not know them up front). The runtime
  // hands them to Destination::check_routing before the first read.
  virtual std::vector<SourceTable> captured_tables() const { return {}; }
  // What this source holds on a server between runs once it has created it ("replication slot
  // \"sluice_p\""), empty if nothing: a failed run names it and `sluice cleanup`. Thread-safe.
  virtual std::string server_state() const { return {}; }
  // How two positions this source returned order in its log: less when everything `a` covers
  // is covered by `b` too and b covers more; nullopt when the source cannot tell (the caller
  // must then assume nothing). A pipeline with several destinations uses it to skip, at a
  // destination that stores positions, the replayed batches it already holds. Thread-safe.
  virtual std::optional<std::weak_ordering> compare_positions(std::string_view a,
                                                              std::string_view b) const {
    if (a == b) return std::weak_ordering::equivalent;
    return std::nullopt;
  }
};

// Called exactly once per written batch, from any thread, when the batch is durable (ok) or failed.
using WriteDone = std::function<void(Status)>;

// A record a destination refused (write_isolating): its index in the batch and why.
struct RejectedRecord {
  size_t index;
  Error error;
};

// The runtime contract for destinations (src/runtime/pipeline.cc makes it true for every one):
//
// - Completion. write() may call `done` before returning (synchronous) or later from any thread
//   (asynchronous). Everything below holds for both: the runtime decides what a failure means
//   from the Status alone, never from when or where `done` ran.
// - Retry. A retriable error (Error::retriable(): connection lost, deadlock, timeout, an aborted
//   transaction) makes the runtime write the same batch again after a backoff, until it succeeds,
//   `max_write_retries` is reached or the pipeline stops. Writes must therefore be idempotent
//   (upserts by key, transactional positions). An asynchronous destination with max_in_flight() > 1
//   may see the retried batch after later batches (at-least-once; as after a restart).
// - Dead letters. With `on_error: dlq`, an Errc::data error makes the runtime write the batch again
//   in halves, down to single records, depth first: every record the destination accepts lands in
//   its original order, each record it rejects goes to the dead-letter destination. Sub-batches
//   carry no position, except the last sub-write (the one that ends with the parent's last record),
//   which carries the parent batch's position; when that last record itself is dead-lettered, an
//   empty batch with the parent's position follows. A destination that stores positions thus
//   commits the parent position exactly once, at the end of the isolation. A destination that
//   isolates rejected records itself (isolates_rejected_records(): the SQL destinations, a
//   savepoint per record) gets the batch once through write_isolating() instead, without its
//   position when it stores positions; the rejected records then go to the dead-letter queue in
//   one write, and an empty batch with the parent's position follows.
// - Empty batches. A batch that processors emptied is written only to a destination that stores
//   positions (and only when its position moved): such a destination must commit the position of
//   an empty batch, or its stored position falls behind the checkpoint store's. Other
//   destinations never see empty batches.
// - The batch (records, arena, position) stays alive and untouched by the runtime until `done`.
class Destination {
 public:
  virtual ~Destination() = default;
  virtual Status open(const ConnectorContext& ctx) = 0;
  // Writes the batch. May complete synchronously (calling `done` before returning) or later, from
  // another thread, possibly out of order with other batches. The batch stays alive and untouched
  // by the runtime until `done` is called. Retries, dead letters and empty batches: the runtime
  // contract above.
  virtual void write(Batch& batch, WriteDone done) = 0;
  // Batches the destination accepts before earlier ones complete.
  virtual size_t max_in_flight() const noexcept { return 1; }
  // Dead-letter isolation in one pass (optional; the runtime contract above): writes every record
  // of `batch` it accepts, in order and in one transaction — with batch.position() only when
  // `commit_position` — and appends each record it refuses with a data error to `rejected`.
  // Synchronous. An error it returns concerns the whole batch (connection lost: retriable).
  virtual bool isolates_rejected_records() const noexcept { return false; }
  virtual Status write_isolating(Batch& /*batch*/, bool /*commit_position*/,
                                 std::vector<RejectedRecord>& /*rejected*/) {
    return Error(Errc::unsupported, "this destination does not isolate rejected records");
  }
  // Records per batch this destination prefers when the pipeline file sets no batch.max_records
  // (0: no preference). A destination that batches on its own (Kafka's producer) holds less in
  // flight with smaller batches at the same speed.
  virtual size_t preferred_max_records() const noexcept { return 0; }
  // Waits until every written batch has completed (or the timeout passed).
  virtual Status flush(std::chrono::milliseconds /*timeout*/) { return ok_status(); }
  virtual void close() noexcept {}
  // Refuses a routing that would merge distinct source tables into one destination table (s1.t and
  // s2.t both written to t); called after open() with the source's captured_tables().
  virtual Status check_routing(const std::vector<SourceTable>& /*tables*/) { return ok_status(); }

  // Control records (Operation::schema, Operation::marker; include/sluice/record.h) reach write()
  // only when this returns true; the runtime removes them from the batches of a destination that
  // declines them (their position still advances, as for any emptied batch). A destination that
  // accepts them applies them in order with the rows around them, or fails the write with a
  // non-retriable error — a schema change is never dead-lettered (it is not a row).
  virtual bool accepts_control_records() const noexcept { return false; }

  // Positions stored in the destination (e.g. `checkpoint_in_destination: true`). When true, each
  // write() commits batch.position() (when non-empty) for ctx.pipeline_id in the same transaction
  // as the batch's rows — also when the batch holds no record — and stored_position() returns the
  // last one committed. The runtime calls
  // stored_position() after open() and, when it holds a position, resumes the source from it
  // rather than from the checkpoint store: the destination's own record is authoritative.
  virtual bool stores_positions() const noexcept { return false; }
  // The position last committed for `pipeline_id`; empty when none (or not stored here).
  virtual Result<std::optional<std::string>> stored_position(std::string_view /*pipeline_id*/) {
    return std::optional<std::string>();
  }
  // Forgets the position stored for `pipeline_id` (after open(); `sluice cleanup`, a full reset):
  // the next run starts afresh rather than resume from it.
  virtual Status erase_stored_position(std::string_view /*pipeline_id*/) { return ok_status(); }

  // `sluice doctor`: checks reachability, credentials and privileges, and the tables (topics,
  // keys) the pipeline would write, without writing or creating anything. `tables` are the
  // source's (Source::captured_tables after its doctor; empty when it does not know them).
  // Destinations without checks refuse with Errc::unsupported.
  virtual Result<std::vector<DoctorCheck>> doctor(const ConnectorContext&,
                                                  const std::vector<SourceTable>& tables) {
    (void)tables;
    return Error(Errc::unsupported, "this destination has no doctor checks yet");
  }
};

class Processor {
 public:
  virtual ~Processor() = default;
  // Called once before the first batch; a processor registers its probes here (ctx.connector is
  // the processor's type). Keep the Registration as a member, like connectors do.
  virtual Status open(const ConnectorContext& /*ctx*/) { return ok_status(); }
  // Edits records in place; may drop records (the batch position is unchanged).
  virtual Status process(Batch& batch) = 0;
};

}  // namespace sluice
