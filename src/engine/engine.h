// The engine: the one owner of running pipelines. It holds the pipelines and their threads, the
// metrics registry every component publishes into, idle detection (`--idle-exit`) and the
// figures of the progress line; the CLI and the HTTP server talk to it, never to a Pipeline.
// Thread model and stop order: docs/development/engine.md.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

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
  std::string source_server_state;  // Source::server_state(): a failed run names it
  // Since when the source has had nothing to read with everything acknowledged.
  std::optional<std::chrono::steady_clock::time_point> idle_since;
  // The sides stalled now (PipelineOptions::stall_timeout): /healthz shows them as degraded.
  std::vector<Stall> stalls;
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

  // Takes a pipeline (not started) and registers its probes. Fails on a duplicate id.
  Status add(std::unique_ptr<Pipeline> pipeline);
  // Starts pipeline `id` (one thread running Pipeline::run()); an error if unknown or started.
  Status start(std::string_view id);
  // Starts every pipeline not started yet.
  void start_all();
  // Graceful stop of `id` (drain, checkpoint); idempotent; an error if unknown.
  Status stop(std::string_view id);
  // Graceful stop of every pipeline. Thread-safe (the signal thread calls it).
  void stop_all() noexcept;

  // Hot reload (src/cli/reloader.h). Not thread-safe against wait()'s final joins: call them from
  // wait()'s tick (the reloader does), or before wait().
  // Drains, checkpoints and stops `id`, joins its thread and forgets it (its probes go too).
  // Returns how its run ended (an error if unknown).
  Status remove(std::string_view id);
  // remove(id) and then add() + start() of `pipeline` (same id) in its place, started when the old
  // one was started: it resumes from the checkpoint the old one saved.
  Status replace(std::string_view id, std::unique_ptr<Pipeline> pipeline);
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
  };
  Entry* find(std::string_view id);
  const Entry* find(std::string_view id) const;
  PipelineStatus status_of(const Entry& e) const;  // mu_ held
  void check_idle();

  EngineOptions options_;
  const std::chrono::steady_clock::time_point started_at_;
  // Declared before the pipelines: destroyed after them (their probes unregister first).
  MetricsRegistry metrics_;
  mutable std::mutex mu_;
  std::condition_variable ended_cv_;
  std::vector<std::unique_ptr<Entry>> entries_;  // in add() order; entries never move
  bool idle_stop_ = false;
};

}  // namespace sluice
