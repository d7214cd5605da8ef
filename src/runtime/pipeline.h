// One running pipeline: source → processors → destination with ordered acknowledgement.
//
//   reader thread                          writer thread                 acker thread
//   ─────────────                          ─────────────                 ────────────
//   take a free batch (≤ max_in_flight)    pop batch from queue          wait for watermark
//   source.read(batch, limits)    ──queue──▶ destination.write(batch) ──▶ checkpoint.save(pos)
//   processors(batch)               (cap 2)   done(status) [any thread]    source.ack(pos)
//   acker.begin(seq, position)                acker.complete(seq)
//
// Memory is bounded by max_in_flight batches of at most max_bytes each: the reader blocks until a
// batch comes back from the destination. The checkpoint never passes a batch that has not been
// durably written, whatever order the destination completes batches in.
//
// Retries and dead-letter isolation run on the writer thread whatever thread completed the write:
// a failed asynchronous completion is handed back to the writer (the "redo" list), which retries
// it or isolates its rejected records exactly as it does a synchronous one (the contract is in
// include/sluice/connector.h).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "runtime/bounded_queue.h"
#include "runtime/fan_out_destination.h"
#include "runtime/ordered_acker.h"
#include "runtime/pipeline_metrics.h"
#include "runtime/spool/disk_spool.h"
#include "sluice/checkpoint.h"
#include "sluice/connector.h"

namespace sluice {

struct PipelineOptions {
  std::string id;
  std::string source_connector;
  std::string destination_connector;
  size_t max_records = 10000;
  size_t max_bytes = 64u << 20;
  std::chrono::milliseconds linger{50};
  std::chrono::milliseconds poll{200};
  // How often the acker persists the watermark (it always persists at the end).
  std::chrono::milliseconds checkpoint_interval{100};
  // Upper bound on retries of a batch after retriable write errors (0 = retry until stopped).
  int max_write_retries = 0;
  // What a record the destination rejects (Errc::data) does: stop the pipeline (the checkpoint
  // stays before its batch), or go to the dead-letter destination while the rest lands.
  enum class OnError { stop, dlq } on_error = OnError::stop;
  std::string dlq_connector;
  // A side that makes no progress this long while work is pending is reported as stalled: logged
  // once (with what is pending), counted, shown by stalls(); recovery logs once (0: never).
  std::chrono::milliseconds stall_timeout{0};
  // With a spool, the pipeline runs as two: source → processors → spool (acknowledged once
  // spooled; its checkpoint is the source's) and spool → destination (its own checkpoint, under
  // checkpoint_key; its destination retried at open). See runtime/spool/spool_stages.h.
  std::optional<spool::DiskSpoolOptions> spool;
  // A spool of another kind (redis), made for the named readers; set instead of `spool`.
  std::function<std::unique_ptr<spool::Spool>(const std::vector<std::string>& readers)> make_spool;
  std::string spool_type = "disk";  // the spool metrics' `type` label
  // The checkpoint store key of this pipeline's position (empty: id).
  std::string checkpoint_key;
  // A destination that fails to open with a retriable error (unreachable) is retried with backoff
  // until it opens or the pipeline stops, instead of failing the pipeline.
  bool retry_destination_open = false;
  // Batches the pool holds beyond the destination's max_in_flight (the one being read, and one
  // waiting in the queue).
  size_t spare_batches = 2;
  // The destination's name among several (`destinations:` with a spool): its connector's series
  // carry it as the label `destination`, and logs name it. Empty for a single destination.
  std::string destination_name;
};

// One destination of a spooled fan-out, as the pipeline gets it from the pipeline file.
using SpoolLane = FanOutLane;

// A side of the pipeline that has made no progress for PipelineOptions::stall_timeout while work
// is pending: the source (a read that has not returned) or the destination (batches handed to it
// that have not become durable).
struct Stall {
  std::string side;     // "source" or "destination"
  std::string pending;  // what waits, e.g. "2 batches (20 records) not yet durable"
  double seconds = 0;   // since the last progress
};

class Pipeline {
 public:
  Pipeline(PipelineOptions options, std::unique_ptr<Source> source,
           std::vector<std::unique_ptr<Processor>> processors,
           std::unique_ptr<Destination> destination, CheckpointStore* checkpoints,
           std::unique_ptr<Destination> dlq = nullptr);
  // With a spool and several destinations (options.spool must be set): one source side that
  // writes the spool, and per destination a pipeline of its own that reads it — its own spool
  // reader and checkpoint (ID/spool/NAME), processors, on_error and dead-letter destination, its
  // destination's open retried with backoff. A destination that is down or slow holds only its
  // own reader back: the source and the other destinations go on (until spool.max_bytes).
  Pipeline(PipelineOptions options, std::unique_ptr<Source> source,
           std::vector<std::unique_ptr<Processor>> processors, std::vector<SpoolLane> lanes,
           CheckpointStore* checkpoints);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Opens the connectors, resumes from the checkpoint and runs until the source ends, a fatal
  // error happens, or request_stop() is called (then drains in-flight batches and checkpoints).
  Status run();
  // Graceful stop: stop reading, finish and checkpoint what was read. Thread-safe, idempotent.
  void request_stop();
  // Hot reload of a processor-only edit: the read loop opens `processors` and puts them in place
  // of the current chain between two batches (a batch is processed wholly by one chain); the
  // source keeps running. Thread-safe; a later call before the swap replaces the pending chain.
  void replace_processors(std::vector<std::unique_ptr<Processor>> processors);

  const PipelineOptions& options() const noexcept { return options_; }
  const PipelineMetrics& metrics() const noexcept { return metrics_; }
  // The destination's figures (written, dead-lettered) and connector name: with a spool, those
  // of the side that reads the spool into the destination; else metrics() and options().
  // With several spooled destinations: the first one's (see destination_records_written()).
  const PipelineMetrics& destination_metrics() const noexcept {
    return downstreams_.empty() ? metrics_ : downstreams_.front()->metrics_;
  }
  const std::string& destination_connector() const noexcept {
    if (fan_out_) return destinations_label_;
    return downstreams_.size() == 1 ? downstreams_.front()->options_.destination_connector
                                    : options_.destination_connector;
  }
  // Records every destination has (the slowest one's count) and records dead-lettered by all.
  uint64_t destination_records_written() const noexcept;
  uint64_t destination_dlq_records() const noexcept;
  // The pipelines that read the spool into each destination (empty without a spool).
  size_t spool_destination_count() const noexcept { return downstreams_.size(); }
  const Pipeline& spool_destination(size_t i) const { return *downstreams_[i]; }
  // Publishes the pipeline's probe and its source's standard probe (ConnectorStats) in `registry`,
  // and hands `registry` to the connectors (ConnectorContext::metrics) so they can add their own.
  // Call once, before run(); the registry must outlive the pipeline.
  void register_metrics(MetricsRegistry& registry);
  PipelineState state() const noexcept { return static_cast<PipelineState>(metrics_.state.load()); }
  // True when the source last reported nothing to read and every batch read has been acknowledged.
  bool idle() const noexcept;
  // Since when idle() has been true (steady clock), if it is.
  std::optional<std::chrono::steady_clock::time_point> idle_since() const;
  // Records read and handed on but not yet settled (durably written or dead-lettered).
  uint64_t in_flight_records() const noexcept;
  // The sides stalled now (empty when none is, or stall_timeout is 0). Thread-safe.
  std::vector<Stall> stalls() const;
  std::string checkpoint_position() const;
  // Snapshot rows read per table in this run ("schema.table", or the table alone when the source
  // names no schema), in the order the tables were first seen: the snapshot's progress per table
  // (initial and incremental snapshots alike). Thread-safe.
  std::vector<std::pair<std::string, uint64_t>> snapshot_rows_by_table() const;
  // The position of the last batch read from the source, and of the last one the destination
  // completed (with a spool: the last one spooled), in this run. Empty: none yet. Thread-safe.
  std::string read_position() const;
  std::string written_position() const;
  // The spool's depth (records, bytes, oldest), when the pipeline has a spool.
  std::optional<spool::SpoolDepth> spool_depth() const;
  // Source::server_state(): what the source holds on its server between runs.
  std::string source_server_state() const { return source_ ? source_->server_state() : ""; }

 private:
  // The pipeline's stages: source → processors → destination (which is the spool writer when
  // there is a spool).
  Status run_stages();
  const std::string& checkpoint_key() const noexcept {
    return options_.checkpoint_key.empty() ? options_.id : options_.checkpoint_key;
  }
  void reader_loop(std::stop_token stop);
  void writer_loop();
  void acker_loop(std::stop_token stop);
  struct WriteAttempt;
  void write_batch(Batch* batch);
  // Writes `attempt`'s batch until it is settled (on_written ran) or left to an asynchronous
  // completion. Writer thread.
  void write_attempt(const std::shared_ptr<WriteAttempt>& attempt);
  // Hands the batch to the destination; returns the status when `done` ran before write()
  // returned, nullopt when the completion is asynchronous.
  std::optional<Status> issue(const std::shared_ptr<WriteAttempt>& attempt);
  // True for a failure the writer handles (retriable, or a data error with on_error: dlq).
  bool needs_recovery(const Status& status) const noexcept;
  // Handles such a failure on the writer thread: isolates rejected records (settles the batch) or
  // waits the backoff. Returns true when the batch must be written again.
  bool recover(const std::shared_ptr<WriteAttempt>& attempt, Status status);
  // From a completion thread: queues a failed asynchronous write for the writer.
  void post_redo(std::shared_ptr<WriteAttempt> attempt, Status status);
  void run_redo();
  // After the queue closed: waits for outstanding asynchronous writes, recovering failed ones.
  void drain_async();
  bool failed() const;
  // Synchronous write of `batch`, retrying retriable errors with backoff.
  Status write_with_retry(Batch& batch);
  // After a data error: writes the batch in halves down to single records, so every record the
  // destination accepts lands (in order) and each rejected one goes to the dead-letter queue; the
  // last sub-write carries the batch's position (see the contract in sluice/connector.h).
  Status isolate_rejected(const Batch& batch, const Error& error);
  // The same in one pass, by a destination that isolates records itself (a savepoint per record).
  Status isolate_in_destination(Batch& batch, const Error& error);
  // A record for the dead-letter queue and why; `by_source`: the source marked it.
  struct DeadLetter {
    const Record* record;
    std::string reason;
    bool by_source = false;
  };
  // Writes `letters` to the dead-letter queue in one batch, counts them, logs one summary line
  // (`batch_size`: the records of the batch they came from), and empties `letters`.
  Status send_dead_letters(std::vector<DeadLetter>& letters, size_t batch_size);
  // Moves the records the source marked (Batch::source_rejects) to the dead-letter queue.
  Status divert_source_rejects(Batch& batch);
  void on_written(Batch* batch, std::chrono::steady_clock::time_point started, Status status,
                  uint64_t dead_lettered = 0);
  Batch* take_batch(std::stop_token stop);
  void release_batch(Batch* batch);
  void fail(Error error);
  void persist(const std::string& position);
  // Acker thread, every wake-up: compares each side's last progress with stall_timeout, logs and
  // counts a stall once when it begins and once when it ends.
  void check_stalls();
  // The writer (or a completion) settled a batch: the destination progressed.
  void note_destination_progress() noexcept;

  PipelineOptions options_;
  std::unique_ptr<Source> source_;
  std::vector<std::unique_ptr<Processor>> processors_;
  std::unique_ptr<Destination> destination_;
  CheckpointStore* checkpoints_;
  std::unique_ptr<CheckpointStoreHistory> source_history_;  // the source's state beside it
  std::unique_ptr<Destination> dlq_;
  // With a spool: the spool and the downstream pipeline (spool → the real destination).
  std::unique_ptr<spool::Spool> spool_;
  std::vector<std::unique_ptr<Pipeline>> downstreams_;
  std::vector<std::string> reader_names_;  // downstreams_[i] reads the spool as reader_names_[i]
  bool fan_out_ = false;                   // several named destinations (not one `destination`)
  std::string destinations_label_;         // their names, "a+b"
  // Builds the spool, the downstream pipelines and the spool writer (both constructors).
  void init_spool(std::vector<SpoolLane> lanes, bool single);
  // Before the sides start: each reader's checkpoint checked against the spool (and the reader
  // registered there, so retention and lag count from it even while its destination is down); a
  // reader without one (a destination added later) starts from the spool's history only when
  // the spool still covers the pipeline's beginning.
  Status prepare_readers();
  // "postgres destination" or "destination pg (postgres)": how logs and errors name it.
  std::string destination_label() const;

  PipelineMetrics metrics_;
  OrderedAcker acker_;
  BoundedQueue<Batch*> queue_{2};
  std::stop_source stop_;

  // Batch pool: at most max_in_flight_ batches exist; the reader waits for a free one.
  std::mutex pool_mu_;
  std::condition_variable_any pool_cv_;
  std::vector<std::unique_ptr<Batch>> all_batches_;
  std::vector<Batch*> free_batches_;
  size_t max_in_flight_ = 4;

  // Failed asynchronous writes waiting for the writer thread (retry or dead-letter isolation).
  std::mutex redo_mu_;
  std::deque<std::pair<std::shared_ptr<WriteAttempt>, Status>> redo_;
  std::atomic<bool> redo_pending_{false};
  // The last position handed to a destination that stores positions (writer thread): an emptied
  // batch is written to it only when its position moved past this one.
  std::string last_position_written_;

  MetricsRegistry* registry_ = nullptr;
  // replace_processors(): the chain waiting to be swapped in by the read loop.
  std::mutex pending_processors_mu_;
  std::optional<std::vector<std::unique_ptr<Processor>>> pending_processors_;
  std::atomic<bool> processors_pending_{false};
  Status swap_pending_processors();  // on the read loop
  std::vector<MetricsRegistry::Registration> probes_;

  mutable std::mutex fail_mu_;
  std::optional<Error> failure_;

  std::atomic<bool> source_idle_{false};
  std::atomic<bool> source_ended_{false};
  std::atomic<int64_t> idle_since_ns_{0};
  std::atomic<uint64_t> records_acked_{0};
  std::atomic<uint64_t> records_begun_{0};
  // Stall detection: since when the reader waits in source.read (0: it does not); when the
  // destination last settled a batch, or work for it appeared while none was pending.
  std::atomic<int64_t> read_started_ns_{0};
  std::atomic<int64_t> destination_progress_ns_{0};
  mutable std::mutex stall_mu_;
  std::vector<Stall> stalls_;  // the sides stalled now (acker thread writes, anyone reads)
  uint64_t next_seq_ = 1;

  mutable std::mutex pos_mu_;  // guards the three positions below
  std::string checkpoint_position_;
  std::string read_position_;
  std::string written_position_;

  // snapshot_rows_by_table(): counted by the reader from `first`, the batch's first snapshot row
  // (count_read found it), a lookup per run of one table's rows.
  void count_snapshot_rows(const Batch& batch, size_t first);
  mutable std::mutex snapshot_tables_mu_;
  std::vector<std::pair<std::string, uint64_t>> snapshot_tables_;
};

}  // namespace sluice
