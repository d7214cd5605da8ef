// The default checkpoint store: one row per pipeline in an embedded SQLite file.
//
//   checkpoints(pipeline TEXT PRIMARY KEY, position BLOB NOT NULL, updated_at INTEGER)
//                                                       unix epoch milliseconds of the last save
//
// WAL with synchronous=NORMAL: a committed save is in the WAL before save() returns, so it
// survives a crash of the process (not necessarily a power loss), without an fsync per save.
//
// One process per store: opening takes an exclusive flock on "<path>.lock" (holding the owner's
// pid, for the error a second process prints) for as long as the store is open. Two runs on one
// checkpoint file would otherwise both read and both advance it, duplicating every record.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>

#include "sluice/checkpoint.h"
#include "support/sqlite_handles.h"

namespace sluice {

namespace {

// The exclusive lock on "<path>.lock"; released (closed) with the store.
class StoreLock {
 public:
  StoreLock() = default;
  StoreLock(StoreLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  StoreLock& operator=(StoreLock&&) = delete;
  StoreLock(const StoreLock&) = delete;
  StoreLock& operator=(const StoreLock&) = delete;
  ~StoreLock() {
    if (fd_ >= 0) ::close(fd_);
  }

  static Result<StoreLock> acquire(const std::string& db_path) {
    StoreLock lock;
    if (db_path.empty() || db_path == ":memory:" || db_path.starts_with("file:")) return lock;
    const std::string path = db_path + ".lock";
    lock.fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock.fd_ < 0)
      return Error(Errc::io, fmt::format("checkpoint store \"{}\": cannot open the lock file "
                                         "\"{}\": {}; check that its directory is writable",
                                         db_path, path, std::strerror(errno)));
    if (::flock(lock.fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      if (err != EWOULDBLOCK)
        return Error(Errc::io, fmt::format("checkpoint store \"{}\": cannot lock \"{}\": {}",
                                           db_path, path, std::strerror(err)));
      char buf[32] = {};
      const ssize_t n = ::pread(lock.fd_, buf, sizeof(buf) - 1, 0);
      std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
      while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
      return Error(Errc::conflict,
                   fmt::format("checkpoint store \"{}\" is in use by another sluice process{}; "
                               "stop that process first, or give this run its own "
                               "checkpoints.path",
                               db_path, pid.empty() ? "" : " (pid " + pid + ")"));
    }
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(lock.fd_, 0) == 0 &&
        ::pwrite(lock.fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
      // The pid is only for the other process's message; the lock itself holds.
    }
    return lock;
  }

 private:
  int fd_ = -1;
};

class SqliteCheckpointStore final : public CheckpointStore {
 public:
  SqliteCheckpointStore(sqlite::Db db, StoreLock lock)
      : lock_(std::move(lock)), db_(std::move(db)) {}

  Status prepare() {
    auto prep = [&](sqlite::Stmt& out, std::string_view sql, std::string_view what) -> Status {
      auto s = db_.prepare(sql, what);
      if (!s) return std::move(s).error();
      out = std::move(s.value());
      return ok_status();
    };
    if (Status s = prep(load_, "SELECT position FROM checkpoints WHERE pipeline = ?1",
                        "prepare the checkpoint query");
        !s)
      return s;
    if (Status s =
            prep(save_,
                 "INSERT INTO checkpoints(pipeline, position, updated_at) VALUES(?1, ?2, ?3) "
                 "ON CONFLICT(pipeline) DO UPDATE SET position = excluded.position, "
                 "updated_at = excluded.updated_at",
                 "prepare the checkpoint upsert");
        !s)
      return s;
    return prep(erase_, "DELETE FROM checkpoints WHERE pipeline = ?1",
                "prepare the checkpoint delete");
  }

  Result<std::optional<std::string>> load(std::string_view pipeline_id) override {
    std::lock_guard lock(mu_);
    sqlite3_stmt* st = load_.get();
    sqlite::ResetOnExit reset(st);
    bind_text(st, 1, pipeline_id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) return std::optional<std::string>();
    if (rc != SQLITE_ROW) return failure(rc, "read the checkpoint of", pipeline_id);
    // A zero-length blob comes back as a null pointer.
    const char* p = static_cast<const char*>(sqlite3_column_blob(st, 0));
    int n = sqlite3_column_bytes(st, 0);
    return std::optional<std::string>(p ? std::string(p, static_cast<size_t>(n)) : std::string());
  }

  Status save(std::string_view pipeline_id, std::string_view position) override {
    int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    std::lock_guard lock(mu_);
    sqlite3_stmt* st = save_.get();
    sqlite::ResetOnExit reset(st);
    bind_text(st, 1, pipeline_id);
    // zeroblob keeps an empty position NOT NULL (a null pointer would bind NULL).
    if (position.empty()) sqlite3_bind_zeroblob(st, 2, 0);
    else sqlite3_bind_blob64(st, 2, position.data(), position.size(), SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, now_ms);
    int rc = sqlite3_step(st);
    if (rc != SQLITE_DONE) return failure(rc, "save the checkpoint of", pipeline_id);
    return ok_status();
  }

  Status erase(std::string_view pipeline_id) override {
    std::lock_guard lock(mu_);
    sqlite3_stmt* st = erase_.get();
    sqlite::ResetOnExit reset(st);
    bind_text(st, 1, pipeline_id);
    int rc = sqlite3_step(st);
    if (rc != SQLITE_DONE) return failure(rc, "erase the checkpoint of", pipeline_id);
    return ok_status();
  }

 private:
  static void bind_text(sqlite3_stmt* st, int i, std::string_view s) {
    sqlite3_bind_text64(st, i, s.empty() ? "" : s.data(), s.size(), SQLITE_STATIC, SQLITE_UTF8);
  }

  Error failure(int rc, std::string_view what, std::string_view pipeline_id) const {
    Error e =
        sqlite::make_error(rc, fmt::format("checkpoint store \"{}\": cannot {} pipeline \"{}\": {}",
                                           db_.path(), what, pipeline_id, db_.errmsg()));
    // Whatever SQLite's code, a checkpoint that cannot be written is a local I/O problem.
    return Error(Errc::io, e.message(), e.retriable());
  }

  std::mutex mu_;   // the acker saves while the pipeline thread may load or erase
  StoreLock lock_;  // declared before db_: released after the database is closed
  sqlite::Db db_;
  sqlite::Stmt load_, save_, erase_;
};

}  // namespace

Result<std::unique_ptr<CheckpointStore>> open_sqlite_checkpoint_store(const std::string& path) {
  if (Status s = sqlite::create_parent_directories(path); !s)
    return Error(Errc::io, "checkpoint store: " + s.error().message(), s.error().retriable());
  auto lock = StoreLock::acquire(path);
  if (!lock) return std::move(lock).error();
  sqlite::OpenOptions options;  // WAL, synchronous=NORMAL, 5 s busy timeout
  auto db = sqlite::Db::open(path, options);
  if (!db) {
    const Error& e = db.error();
    return Error(Errc::io, "checkpoint store: " + e.message(), e.retriable());
  }
  if (Status s = db->exec("CREATE TABLE IF NOT EXISTS checkpoints(pipeline TEXT PRIMARY KEY, "
                          "position BLOB NOT NULL, updated_at INTEGER)",
                          "create the checkpoints table");
      !s)
    return Error(Errc::io, "checkpoint store: " + s.error().message(), s.error().retriable());
  auto store =
      std::make_unique<SqliteCheckpointStore>(std::move(db.value()), std::move(lock.value()));
  if (Status s = store->prepare(); !s)
    return Error(Errc::io, "checkpoint store: " + s.error().message(), s.error().retriable());
  return std::unique_ptr<CheckpointStore>(std::move(store));
}

}  // namespace sluice
