// Where acknowledged source positions are kept between runs. The default is an embedded SQLite
// file.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

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

// Opens (creating if needed, with parent directories) a SQLite checkpoint file.
Result<std::unique_ptr<CheckpointStore>> open_sqlite_checkpoint_store(const std::string& path);

}  // namespace sluice
