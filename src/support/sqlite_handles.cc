#include "support/sqlite_handles.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace sluice::sqlite {

namespace {

bool is_special_path(const std::string& path) {
  return path.empty() || path == ":memory:" || path.starts_with("file:");
}

// strerror of the OS error behind a failed open, if SQLite recorded one.
std::string system_reason(sqlite3* db) {
  int e = db ? sqlite3_system_errno(db) : 0;
  return e ? fmt::format(" ({})", std::strerror(e)) : std::string();
}

}  // namespace

Status create_parent_directories(const std::string& path) {
  if (is_special_path(path)) return ok_status();
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (parent.empty()) return ok_status();
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  if (ec)
    return Error(Errc::io,
                 fmt::format("cannot create directory \"{}\" for \"{}\": {}; create it or "
                             "choose a path in a writable directory",
                             parent.string(), path, ec.message()));
  return ok_status();
}

Result<Db> Db::open(const std::string& path, const OpenOptions& options) {
  if (path.empty()) return Error(Errc::invalid_argument, "SQLite path is empty; set a file path");
  if (Status s = create_parent_directories(path); !s) return std::move(s).error();
  if (std::error_code ec; !is_special_path(path) && std::filesystem::is_directory(path, ec))
    return Error(Errc::io,
                 fmt::format("SQLite path \"{}\" is a directory; give a file path", path));

  Db db;
  db.path_ = path;
  // NOMUTEX: every connection here is used by one thread at a time (callers serialise).
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI;
  int rc = sqlite3_open_v2(path.c_str(), &db.db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    return Error(Errc::io, fmt::format("cannot open SQLite file \"{}\": {}{}; check that the file "
                                       "and its directory are writable by this user",
                                       path, db.errmsg(), system_reason(db.db_)));
  }
  sqlite3_extended_result_codes(db.db_, 1);
  sqlite3_busy_timeout(db.db_, static_cast<int>(options.busy_timeout.count()));
  // An existing file without write permission opens read-only without complaint; say so now
  // rather than at the first write.
  if (sqlite3_db_readonly(db.db_, "main") == 1)
    return Error(Errc::io, fmt::format("SQLite file \"{}\" is read-only; make it writable by this "
                                       "user or choose another path",
                                       path));
  if (!options.journal_mode.empty()) {
    if (Status s = db.exec("PRAGMA journal_mode=" + options.journal_mode, "set journal_mode"); !s)
      return std::move(s).error();
  }
  if (!options.synchronous.empty()) {
    if (Status s = db.exec("PRAGMA synchronous=" + options.synchronous, "set synchronous"); !s)
      return std::move(s).error();
  }
  return db;
}

Status Db::exec(const std::string& sql, std::string_view what) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
  if (rc == SQLITE_OK) return ok_status();
  std::string msg = err ? err : errmsg();
  sqlite3_free(err);
  return make_error(rc, fmt::format("SQLite file \"{}\": cannot {}: {}", path_, what, msg));
}

Result<Stmt> Db::prepare(std::string_view sql, std::string_view what) {
  sqlite3_stmt* s = nullptr;
  int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                              SQLITE_PREPARE_PERSISTENT, &s, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(s);
    return make_error(rc, fmt::format("SQLite file \"{}\": cannot {}: {}", path_, what, errmsg()));
  }
  return Stmt(s);
}

void append_quoted_identifier(std::string& out, std::string_view name) {
  out.push_back('"');
  for (char c : name) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  out.push_back('"');
}

std::string quote_identifier(std::string_view name) {
  std::string out;
  out.reserve(name.size() + 2);
  append_quoted_identifier(out, name);
  return out;
}

Errc errc_for(int rc) noexcept {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return Errc::conflict;
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
    case SQLITE_TOOBIG:
    case SQLITE_RANGE: return Errc::data;
    case SQLITE_PERM:
    case SQLITE_AUTH: return Errc::permission;
    case SQLITE_INTERRUPT: return Errc::cancelled;
    case SQLITE_NOMEM:
    case SQLITE_INTERNAL:
    case SQLITE_MISUSE: return Errc::internal;
    default: return Errc::io;  // IOERR, FULL, READONLY, CANTOPEN, CORRUPT, NOTADB, ERROR, ...
  }
}

bool retriable(int rc) noexcept {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_FULL:  // succeeds once space is freed
    case SQLITE_NOMEM: return true;
    default: return false;
  }
}

Error make_error(int rc, std::string message) {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      message +=
          "; another connection holds the database lock (raise busy_timeout or stop the "
          "other writer)";
      break;
    case SQLITE_READONLY:
      message += "; make the file and its directory writable by this user";
      break;
    case SQLITE_FULL: message += "; free disk space"; break;
    default: break;
  }
  return Error(errc_for(rc), std::move(message), retriable(rc));
}

}  // namespace sluice::sqlite
