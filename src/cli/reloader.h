// Hot reload of `sluice run FILE`: watches FILE (stat polled: mtime, size, inode — so both an
// in-place write and an editor's rename are seen) and applies an edit to the pipelines it
// touches only: a removed pipeline is drained, checkpointed and stopped; an added one starts; a
// changed one is drained and checkpointed, then rebuilt and started from its checkpoint; an edit
// of a pipeline's `processors` only swaps its chain between two batches, the source keeps
// running. An invalid edit is rejected (its one-line file:line:col error logged) and nothing
// changes; file-level keys that cannot change live (checkpoints.path, http.*) are refused with a
// warning naming them, the rest applies. Counted in sluice_reloads_total{result}.
//
// Threads: every change is applied by poll(), which `sluice run` calls from Engine::wait()'s tick
// (the only thread that may remove engine entries). reload() may be called from any thread (the
// HTTP API's POST /api/v1/reload): it asks poll() and waits for the result. request() only sets
// a flag (SIGHUP).
#pragma once

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "engine/engine.h"
#include "sluice/checkpoint.h"
#include "sluice/metrics.h"

namespace sluice {

struct ReloadResult {
  bool applied = false;                          // false: rejected (error says why)
  std::string error;                             // the one-line error of a rejected edit
  std::vector<std::string> added;                // pipeline ids started
  std::vector<std::string> removed;              // drained, checkpointed, stopped
  std::vector<std::string> restarted;            // drained, rebuilt, resumed from the checkpoint
  std::vector<std::string> processors_replaced;  // chain swapped, source not restarted
  std::vector<std::string> refused;              // file-level keys changed that need a restart
  // One line: "added a; removed b; restarted c; processors replaced d" or "no pipeline changed".
  std::string summary() const;
};

class Reloader {
 public:
  // `current`: the configuration the engine's pipelines were built from.
  Reloader(std::string file, Engine& engine, CheckpointStore* checkpoints, Config current);
  ~Reloader();
  Reloader(const Reloader&) = delete;
  Reloader& operator=(const Reloader&) = delete;

  // Reloads FILE now and returns what was applied, or the error. Thread-safe; waits (up to
  // `timeout`) for poll() to run it. An error once the run is stopping.
  ReloadResult reload(std::chrono::milliseconds timeout = std::chrono::seconds(120));
  // Asks the next poll() to reload (SIGHUP). Thread-safe, does not block.
  void request() noexcept { requested_.store(true); }
  // From the engine's supervising thread: applies a requested reload, or an edit of FILE seen
  // stable for a moment (a file being written is not read half-way). Returns at once otherwise.
  void poll();
  // The run is stopping: no more reloads; reload() callers get an error.
  void shutdown();

 private:
  struct FileSig {
    bool exists = false;
    int64_t mtime_ns = 0;
    int64_t size = 0;
    uint64_t inode = 0;
    uint64_t device = 0;
    std::string name;  // in `files`: the pipeline file's path
    // A directory: the signature of each of its pipeline files, in order (editing one in place
    // does not change the directory's own times).
    std::vector<FileSig> files;
    bool operator==(const FileSig&) const = default;
  };
  static FileSig stat_path(const std::string& path);
  FileSig stat_file() const;
  ReloadResult apply();

  const std::string file_;
  Engine& engine_;
  CheckpointStore* checkpoints_;
  Config current_;
  std::atomic<bool> requested_{false};
  // File watching (poll() only).
  FileSig applied_sig_;  // the file as last loaded
  std::optional<FileSig> seen_sig_;
  std::chrono::steady_clock::time_point seen_at_{};
  std::chrono::steady_clock::time_point last_stat_{};
  // reload() callers waiting for poll().
  std::mutex mu_;
  bool closed_ = false;
  std::vector<std::promise<ReloadResult>> waiters_;
  std::atomic<uint64_t> applied_total_{0};
  std::atomic<uint64_t> rejected_total_{0};
  MetricsRegistry::Registration metrics_registration_;
};

}  // namespace sluice
