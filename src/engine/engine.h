// The engine: the one owner of running pipelines. It holds the pipelines and their threads, the
// metrics registry every component publishes into, idle detection (`--idle-exit`) and the
// figures of the progress line; the CLI and the HTTP server talk to it, never to a Pipeline.
// Thread model and stop order: docs/development/engine.md.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "engine/pipeline_control.h"
#include "runtime/pipeline.h"
#include "sluice/metrics.h"
#include "sluice/result.h"

namespace sluice {

// What list()/status() report about one pipeline.
struct PipelineStatus {
  std::string id;
  std::string source;  // connector names
  std::string destination;
  PipelineState state = PipelineState::starting;
  bool started = false;        // start() was called
  bool ended = false;          // run() returned
  std::optional<Error> error;  // why it failed (ended and failed)
  uint64_t records_read = 0;
  uint64_t records_written = 0;
  uint64_t records_filtered = 0;
  uint64_t records_dead_lettered = 0;
  uint64_t records_in_flight = 0;
  std::string checkpoint;           // last checkpointed position (opaque bytes)
  std::string read_position;        // of the last batch read (this run)
  std::string written_position;     // of the last batch written (this run)
  std::string source_server_state;  // Source::server_state(): a failed run names it
  // Since when the source has had nothing to read with everything acknowledged.
  std::optional<std::chrono::steady_clock::time_point> idle_since;
  // The sides stalled now (PipelineOptions::stall_timeout): /healthz shows them as degraded.
  std::vector<Stall> stalls;
  // Paused through pause(): ended, its source's server state (slot) kept, resumable.
  bool paused = false;
  // Runs of this pipeline so far (resume and restart start a new one; its counters start at 0).
  uint64_t runs = 0;
  uint64_t write_errors = 0;
  uint64_t write_retries = 0;
  // Records written per second over the last few seconds (the supervisor samples it).
  double records_per_second = 0;
  // The last error of any run (kept after a restart cleared `error`).
  std::string last_error;
  // Snapshot rows read per table in this run (Pipeline::snapshot_rows_by_table()).
  std::vector<std::pair<std::string, uint64_t>> snapshot_tables;
};

// What a reload applied (Engine::reload), or why it was rejected.
struct ReloadOutcome {
  bool applied = false;
  std::string error;  // rejected: the one-line error (file:line:col …)
  std::vector<std::string> added, removed, restarted, processors_replaced, refused;
  std::string summary;  // one line
};

struct EngineOptions {
  // Stop every pipeline once all running ones have been idle this long (0: never).
  std::chrono::duration<double> idle_exit{0};
  // How often wait() checks idleness and calls its tick.
  std::chrono::milliseconds tick{100};
};

class Engine {
 public:
  explicit Engine(EngineOptions options = {});
  // Stops what still runs and joins every pipeline thread.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  MetricsRegistry& metrics() noexcept { return metrics_; }
  const MetricsRegistry& metrics() const noexcept { return metrics_; }

  // Takes a pipeline (not started) and registers its probes. Fails on a duplicate id. `control`
  // is what pause/resume/restart/snapshot/the DLQ need (pipeline_control.h).
  Status add(std::unique_ptr<Pipeline> pipeline, PipelineControl control = {});
  // Starts pipeline `id` (one thread running Pipeline::run()); an error if unknown or started.
  Status start(std::string_view id);
  // Starts every pipeline not started yet.
  void start_all();
  // Graceful stop of `id` (drain, checkpoint); idempotent; an error if unknown.
  Status stop(std::string_view id);
  // Graceful stop of every pipeline. Thread-safe (the signal thread calls it).
  void stop_all() noexcept;

  // Operating one pipeline (the HTTP API). Each is serialised with the others; errors:
  // not_found (unknown id), conflict (not in a state that allows it), timeout, unsupported.
  //
  // pause: graceful stop (drain, checkpoint, close the connectors) that keeps the source's
  // server state (slot, consumer group offsets); wait() keeps supervising a paused pipeline.
  // Returns once the pipeline has ended (within `timeout`).
  Status pause(std::string_view id, std::chrono::milliseconds timeout = std::chrono::seconds(60));
  // A paused pipeline runs again: a fresh one from its configuration, from its checkpoint.
  Status resume(std::string_view id);
  // Stops a running pipeline (as pause) and starts it again from its checkpoint; a stopped,
  // failed or paused one just starts again.
  Status restart(std::string_view id, std::chrono::milliseconds timeout = std::chrono::seconds(60));
  // Runs `fn` with the pipeline not running: pauses a running one first and resumes it after
  // (the DLQ is edited so, with nothing appending to it). `was_running` says whether it ran.
  Status with_pipeline_stopped(std::string_view id, const std::function<void()>& fn,
                               bool* was_running = nullptr,
                               std::chrono::milliseconds timeout = std::chrono::seconds(60));
  // POST /api/v1/reload: the run installs how its file is reloaded (`sluice run FILE`:
  // cli/reloader.h); reload() runs it on the caller's thread (it waits for the reload to apply)
  // and is nullopt when nothing is installed (no file to reload).
  void set_reload_handler(std::function<ReloadOutcome()> handler);
  std::optional<ReloadOutcome> reload();
  // What add() was given for `id` (null: unknown). Stable for the engine's life.
  const PipelineControl* control(std::string_view id) const;
  // Ids in add() order.
  std::vector<std::string> ids() const;
  // Hot reload (src/cli/reloader.h). Not thread-safe against wait()'s final joins: call them from
  // wait()'s tick (the reloader does), or before wait().
  // Drains, checkpoints and stops `id`, joins its thread and forgets it (its probes go too).
  // Returns how its run ended (an error if unknown).
  Status remove(std::string_view id);
  // remove(id) and then add() + start() of `pipeline` (same id) in its place, started when the old
  // one was started: it resumes from the checkpoint the old one saved.
  Status replace(std::string_view id, std::unique_ptr<Pipeline> pipeline,
                 PipelineControl control = {});
  // Pipeline::replace_processors() of `id`: the source keeps running.
  Status replace_processors(std::string_view id, std::vector<std::unique_ptr<Processor>> chain);

  std::vector<PipelineStatus> list() const;
  std::optional<PipelineStatus> status(std::string_view id) const;
  // True while a started pipeline has not ended.
  bool running() const;

  // Supervises on the calling thread until every started pipeline ended: applies --idle-exit,
  // calls `tick` every options.tick (the progress line), then joins the pipeline threads.
  // Returns true when every pipeline ended without error.
  bool wait(const std::function<void()>& tick = {});

  // Seconds since the engine was constructed.
  double uptime_seconds() const;

 private:
  struct Entry {
    std::unique_ptr<Pipeline> pipeline;
    std::thread thread;
    bool started = false;
    bool ended = false;
    std::optional<Status> result;
    PipelineControl control;
    bool paused = false;
    uint64_t runs = 0;
    std::string last_error;
    // (time, records written) samples of the last seconds, for records_per_second.
    std::deque<std::pair<std::chrono::steady_clock::time_point, uint64_t>> samples;
  };
  Entry* find(std::string_view id);
  const Entry* find(std::string_view id) const;
  PipelineStatus status_of(const Entry& e) const;  // mu_ held
  void check_idle();
  void sample_rates();
  // Starts the entry's thread running its pipeline (mu_ held).
  void launch(Entry* e);
  // Requests the stop of a running entry and waits until it ended; control_mu_ held.
  Status stop_and_wait(Entry* e, std::chrono::milliseconds timeout, bool pause);
  // Replaces an ended entry's pipeline with a fresh one and starts it; control_mu_ held.
  Status relaunch(Entry* e);

  EngineOptions options_;
  const std::chrono::steady_clock::time_point started_at_;
  // Declared before the pipelines: destroyed after them (their probes unregister first).
  MetricsRegistry metrics_;
  mutable std::mutex mu_;
  std::condition_variable ended_cv_;
  std::vector<std::unique_ptr<Entry>> entries_;  // in add() order; entries never move
  bool idle_stop_ = false;
  bool stopping_all_ = false;  // stop_all() was called: paused pipelines count as ended
  bool finished_ = false;      // wait() saw every pipeline end: nothing starts again
  // Serialises pause/resume/restart (taken before mu_, never while holding it).
  std::mutex control_mu_;
  std::function<ReloadOutcome()> reload_handler_;  // guarded by mu_
  Status remove_entry(std::string_view id);        // remove() with control_mu_ held
};

}  // namespace sluice
