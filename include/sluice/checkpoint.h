// Where acknowledged source positions are kept between runs. The default is an embedded SQLite
// file.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "sluice/connector.h"
#include "sluice/result.h"

namespace sluice {

class CheckpointStore {
 public:
  virtual ~CheckpointStore() = default;
  virtual Result<std::optional<std::string>> load(std::string_view pipeline_id) = 0;
  // Durable when it returns ok (survives a crash of the process).
  virtual Status save(std::string_view pipeline_id, std::string_view position) = 0;
  virtual Status erase(std::string_view pipeline_id) = 0;
};

// The key under which a pipeline's source keeps its SourceHistory (connector.h) in the same store;
// pipeline ids have no '/', so it cannot be another pipeline's.
inline std::string source_history_key(std::string_view pipeline_id) {
  return std::string(pipeline_id) + "/source_history";
}

// A SourceHistory kept in a checkpoint store beside the pipeline's position.
class CheckpointStoreHistory final : public SourceHistory {
 public:
  CheckpointStoreHistory(CheckpointStore* store, std::string_view pipeline_id)
      : store_(store), key_(source_history_key(pipeline_id)) {}
  Result<std::optional<std::string>> load() override { return store_->load(key_); }
  Status save(std::string_view state) override { return store_->save(key_, state); }

 private:
  CheckpointStore* store_;
  std::string key_;
};

// Opens (creating if needed, with parent directories) a SQLite checkpoint file.
Result<std::unique_ptr<CheckpointStore>> open_sqlite_checkpoint_store(const std::string& path);

}  // namespace sluice
