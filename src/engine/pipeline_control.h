// What the engine needs, beyond a built Pipeline, to operate one through the HTTP API (pause,
// resume, restart, ad-hoc snapshots, the dead-letter queue, its resolved configuration). Whoever
// builds pipelines from the configuration (the CLI) supplies it with Engine::add: the engine sees
// no configuration and no connector registry (layering: engine depends on runtime only).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/pipeline.h"
#include "sluice/result.h"

namespace sluice {

// One rejected record of a dead-letter queue, as the queue stores it.
struct DeadLetterEntry {
  size_t index = 0;         // 0-based, oldest first: the handle replay/discard take
  std::string reason;       // metadata sluice.error
  std::string destination;  // metadata sluice.destination
  std::string record_json;  // the record as stored (OpenCDC JSON)
};

struct DeadLetterReplay {
  size_t replayed = 0;  // written to the destination and removed from the queue
  size_t failed = 0;    // rejected again: kept in the queue with the new reason
  std::vector<std::string> errors;
};

// A dead-letter queue that can be read back and edited. Calls are made with the pipeline stopped
// (Engine::with_pipeline_stopped), so nothing appends to it meanwhile.
class DeadLetterQueue {
 public:
  virtual ~DeadLetterQueue() = default;
  // Every entry, oldest first.
  virtual Result<std::vector<DeadLetterEntry>> list() = 0;
  // Writes entry `index` (all: nullopt) into the pipeline's destination; a replayed record
  // leaves the queue.
  virtual Result<DeadLetterReplay> replay(std::optional<size_t> index) = 0;
  // Removes entry `index` (all: nullopt); returns how many were removed.
  virtual Result<size_t> discard(std::optional<size_t> index) = 0;
};

struct PipelineControl {
  // A fresh pipeline from the same configuration (resume, restart): it resumes from the
  // checkpoint like a new run. Null: the pipeline cannot be resumed or restarted.
  std::function<Result<std::unique_ptr<Pipeline>>()> rebuild;
  // Asks the source for an incremental snapshot of `tables` (Source::request_snapshot).
  std::function<Status(const std::vector<std::string>& tables)> request_snapshot;
  // What the stopped pipeline's source retains on its server ("wal_status = reserved, …, retains
  // 1.2 MiB"), empty when the source cannot tell.
  std::function<std::string()> retained_log;
  // The pipeline's resolved configuration as a JSON object, secrets redacted.
  std::string config_json = "{}";
  // The dead-letter queue when it can be browsed; else null and `dead_letters_unsupported` says
  // why (no queue, or a kind that cannot be read back).
  std::shared_ptr<DeadLetterQueue> dead_letters;
  std::string dead_letters_unsupported = "the pipeline has no dead-letter queue";
};

}  // namespace sluice
