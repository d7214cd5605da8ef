// Reading SQLite files (a destination's output, a checkpoint store) in tests: read-only, waiting
// up to 5 s on a writer's lock.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "support/sql.h"

namespace sluice::test {

class SqliteFile {
 public:
  explicit SqliteFile(const std::filesystem::path& p);  // throws std::runtime_error
  ~SqliteFile();
  SqliteFile(const SqliteFile&) = delete;
  SqliteFile& operator=(const SqliteFile&) = delete;

  // Calls `row` for each result row; false on an SQL error.
  bool query(const std::string& sql, const std::function<void(sqlite3_stmt*)>& row);
  // Rows as text (NULL as nullopt); nullopt on an SQL error.
  std::optional<Rows> rows(const std::string& sql);
  int64_t scalar(const std::string& sql);  // -1 when there is no row
  std::string text(const std::string& sql);

 private:
  sqlite3* db_ = nullptr;
};

// Column `i` as text ("<null>" for NULL).
std::string sqlite_column_text(sqlite3_stmt* st, int i);

// The checkpoint of pipeline `pipeline` in a checkpoint store file ("" if none yet).
std::string stored_checkpoint(const std::filesystem::path& checkpoints_db,
                              const std::string& pipeline);

}  // namespace sluice::test
