// Move-only RAII owners of SQLite handles, shared by the checkpoint store and the sqlite
// destination, plus the mapping of SQLite result codes onto sluice errors.
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <string>
#include <string_view>
#include <utility>

#include "sluice/result.h"

namespace sluice::sqlite {

class Stmt {
 public:
  Stmt() = default;
  explicit Stmt(sqlite3_stmt* s) noexcept : s_(s) {}
  Stmt(Stmt&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  Stmt& operator=(Stmt&& o) noexcept {
    if (this != &o) {
      sqlite3_finalize(s_);
      s_ = std::exchange(o.s_, nullptr);
    }
    return *this;
  }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt() { sqlite3_finalize(s_); }

  sqlite3_stmt* get() const noexcept { return s_; }
  explicit operator bool() const noexcept { return s_ != nullptr; }

 private:
  sqlite3_stmt* s_ = nullptr;
};

// Resets a statement when the scope ends, so an early return never leaves it holding a read
// transaction open or a lock.
class ResetOnExit {
 public:
  explicit ResetOnExit(sqlite3_stmt* s) noexcept : s_(s) {}
  ResetOnExit(const ResetOnExit&) = delete;
  ResetOnExit& operator=(const ResetOnExit&) = delete;
  ~ResetOnExit() { sqlite3_reset(s_); }

 private:
  sqlite3_stmt* s_;
};

struct OpenOptions {
  std::string journal_mode = "wal";    // PRAGMA journal_mode
  std::string synchronous = "normal";  // PRAGMA synchronous
  std::chrono::milliseconds busy_timeout{5000};
};

class Db {
 public:
  Db() = default;
  Db(Db&& o) noexcept : db_(std::exchange(o.db_, nullptr)), path_(std::move(o.path_)) {}
  Db& operator=(Db&& o) noexcept {
    if (this != &o) {
      sqlite3_close_v2(db_);
      db_ = std::exchange(o.db_, nullptr);
      path_ = std::move(o.path_);
    }
    return *this;
  }
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;
  ~Db() { sqlite3_close_v2(db_); }

  // Opens (creating the file and its parent directories) read-write, applies the pragmas and
  // checks that the file is writable. Errors are Errc::io naming the path and the fix.
  static Result<Db> open(const std::string& path, const OpenOptions& options);

  sqlite3* get() const noexcept { return db_; }
  const std::string& path() const noexcept { return path_; }

  // Runs SQL without results (pragmas, DDL). `what` names the action in the error message.
  Status exec(const std::string& sql, std::string_view what);
  // Prepares a statement meant to be kept and reused.
  Result<Stmt> prepare(std::string_view sql, std::string_view what);

  // The last error message on this connection.
  std::string errmsg() const { return db_ ? sqlite3_errmsg(db_) : "out of memory"; }

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
};

// "name" with embedded quotes doubled: safe for any table or column name.
std::string quote_identifier(std::string_view name);
void append_quoted_identifier(std::string& out, std::string_view name);

// Classification of a SQLite result code (primary or extended).
Errc errc_for(int rc) noexcept;
bool retriable(int rc) noexcept;
// An Error with errc_for(rc)/retriable(rc) and `message`, plus a hint for codes that have an
// obvious fix (busy, read-only, disk full).
Error make_error(int rc, std::string message);

// Creates the parent directories of `path` (no-op for ":memory:" and "file:" URIs).
Status create_parent_directories(const std::string& path);

}  // namespace sluice::sqlite
