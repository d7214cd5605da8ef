#include "support/sqlite.h"

#include <stdexcept>

namespace sluice::test {

SqliteFile::SqliteFile(const std::filesystem::path& p) {
  if (sqlite3_open_v2(p.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw std::runtime_error("cannot open " + p.string());
  }
  sqlite3_busy_timeout(db_, 5000);
}

SqliteFile::~SqliteFile() { sqlite3_close(db_); }

bool SqliteFile::query(const std::string& sql, const std::function<void(sqlite3_stmt*)>& row) {
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) return false;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) row(st);
  sqlite3_finalize(st);
  return rc == SQLITE_DONE;
}

std::optional<Rows> SqliteFile::rows(const std::string& sql) {
  Rows out;
  const bool ok = query(sql, [&](sqlite3_stmt* st) {
    Row r;
    for (int i = 0; i < sqlite3_column_count(st); ++i) {
      if (sqlite3_column_type(st, i) == SQLITE_NULL) r.push_back(std::nullopt);
      else r.push_back(sqlite_column_text(st, i));
    }
    out.push_back(std::move(r));
  });
  if (!ok) return std::nullopt;
  return out;
}

int64_t SqliteFile::scalar(const std::string& sql) {
  int64_t v = -1;
  query(sql, [&](sqlite3_stmt* st) { v = sqlite3_column_int64(st, 0); });
  return v;
}

std::string SqliteFile::text(const std::string& sql) {
  std::string v;
  query(sql, [&](sqlite3_stmt* st) {
    auto p = sqlite3_column_text(st, 0);
    v = p ? reinterpret_cast<const char*>(p) : "";
  });
  return v;
}

std::string sqlite_column_text(sqlite3_stmt* st, int i) {
  auto p = sqlite3_column_text(st, i);
  return p ? std::string(reinterpret_cast<const char*>(p)) : std::string("<null>");
}

std::string stored_checkpoint(const std::filesystem::path& checkpoints_db,
                              const std::string& pipeline) {
  if (!std::filesystem::exists(checkpoints_db)) return "";
  try {
    SqliteFile db(checkpoints_db);
    return db.text("SELECT CAST(position AS TEXT) FROM checkpoints WHERE pipeline = " +
                   sql_literal(pipeline));
  } catch (const std::exception&) {
    return "";
  }
}

}  // namespace sluice::test
