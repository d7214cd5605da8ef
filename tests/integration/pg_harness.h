// Helpers for tests against the real PostgreSQL test server (scripts/services start postgres):
// server addresses from the environment (a missing one fails the test, never skips it), one
// database per test (created at start, dropped with its replication slots at the end), libpq
// for SQL, the postgres source driven in-process, and the sluice binary driven postgres → SQLite.
// Shared by tests/integration and tests/fault (#include "integration/pg_harness.h").
#pragma once

#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "e2e/harness.h"
#include "sluice/batch.h"
#include "sluice/connector.h"
#include "sluice/registry.h"
#include "sluice/settings.h"

namespace sluice::pgtest {

using namespace std::chrono_literals;

// The address a service exports, or "" after failing the current test with how to get it.
inline std::string env_url(const char* var = "SLUICE_TEST_PG_URL", const char* service = "postgres") {
  const char* v = std::getenv(var);
  if (v == nullptr || *v == '\0') {
    ADD_FAILURE() << var << " is not set: start the server with `eval \"$(scripts/services start " << service
                  << ")\"` (or run `make test`), then run the tests again";
    return "";
  }
  return v;
}

// postgresql://user:password@host:port/db?params with another database and/or credentials.
struct PgUrl {
  std::string scheme, userinfo, hostport, db, query;

  static PgUrl parse(const std::string& url) {
    PgUrl u;
    size_t p = url.find("://");
    if (p == std::string::npos) throw std::runtime_error("not a postgresql:// URL: " + url);
    u.scheme = url.substr(0, p);
    std::string rest = url.substr(p + 3);
    if (size_t q = rest.find('?'); q != std::string::npos) {
      u.query = rest.substr(q);
      rest.resize(q);
    }
    if (size_t at = rest.rfind('@'); at != std::string::npos) {
      u.userinfo = rest.substr(0, at);
      rest = rest.substr(at + 1);
    }
    if (size_t slash = rest.find('/'); slash != std::string::npos) {
      u.db = rest.substr(slash + 1);
      rest.resize(slash);
    }
    u.hostport = rest;
    return u;
  }
  std::string str() const {
    return scheme + "://" + (userinfo.empty() ? "" : userinfo + "@") + hostport + "/" + db + query;
  }
};

inline std::string url_with_database(const std::string& url, const std::string& db) {
  PgUrl u = PgUrl::parse(url);
  u.db = db;
  return u.str();
}
inline std::string url_with_credentials(const std::string& url, const std::string& user, const std::string& password) {
  PgUrl u = PgUrl::parse(url);
  u.userinfo = user + ":" + password;
  return u.str();
}
inline std::string url_with_port(const std::string& url, int port) {
  PgUrl u = PgUrl::parse(url);
  u.hostport = u.hostport.substr(0, u.hostport.rfind(':')) + ":" + std::to_string(port);
  return u.str();
}

// Rows of text (nullopt = NULL).
using Row = std::vector<std::optional<std::string>>;

// A plain libpq connection. Errors fail the current test (ADD_FAILURE) and return false/empty.
class Conn {
 public:
  Conn() = default;
  explicit Conn(const std::string& url) { connect(url); }
  Conn(Conn&& o) noexcept : c_(o.c_) { o.c_ = nullptr; }
  Conn& operator=(Conn&& o) noexcept {
    std::swap(c_, o.c_);
    return *this;
  }
  ~Conn() {
    if (c_) PQfinish(c_);
  }

  bool connect(const std::string& url) {
    if (c_) PQfinish(c_);
    c_ = PQconnectdb(url.c_str());
    if (PQstatus(c_) != CONNECTION_OK) {
      ADD_FAILURE() << "cannot connect to PostgreSQL: " << PQerrorMessage(c_);
      PQfinish(c_);
      c_ = nullptr;
      return false;
    }
    PQsetNoticeProcessor(c_, [](void*, const char*) {}, nullptr);  // e.g. terminating an exited backend
    return true;
  }
  bool ok() const { return c_ != nullptr && PQstatus(c_) == CONNECTION_OK; }
  PGconn* get() const { return c_; }

  // Runs one or more statements; false (and a test failure unless `quiet`) on error.
  bool exec(const std::string& sql, bool quiet = false) {
    if (!c_) return false;
    PGresult* r = PQexec(c_, sql.c_str());
    const auto st = PQresultStatus(r);
    const bool good = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
    if (!good && !quiet) ADD_FAILURE() << "SQL failed: " << PQresultErrorMessage(r) << "  in: " << sql.substr(0, 300);
    PQclear(r);
    return good;
  }
  std::vector<Row> query(const std::string& sql) {
    std::vector<Row> rows;
    if (!c_) return rows;
    PGresult* r = PQexec(c_, sql.c_str());
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
      ADD_FAILURE() << "query failed: " << PQresultErrorMessage(r) << "  in: " << sql.substr(0, 300);
      PQclear(r);
      return rows;
    }
    const int n = PQntuples(r), m = PQnfields(r);
    rows.reserve(size_t(n));
    for (int i = 0; i < n; ++i) {
      Row row;
      row.reserve(size_t(m));
      for (int j = 0; j < m; ++j)
        row.push_back(PQgetisnull(r, i, j) ? std::nullopt : std::optional<std::string>(PQgetvalue(r, i, j)));
      rows.push_back(std::move(row));
    }
    PQclear(r);
    return rows;
  }
  // First column of the first row ("" if none or NULL).
  std::string scalar(const std::string& sql) {
    auto rows = query(sql);
    return rows.empty() || rows[0].empty() || !rows[0][0] ? std::string() : *rows[0][0];
  }

 private:
  PGconn* c_ = nullptr;
};

inline std::string quote_literal(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += '\'';
    out += c;
  }
  return out + "'";
}

// Drops the replication slots of `db` (terminating whoever holds them), retrying while a
// just-stopped walsender still holds one. Returns the slots it could not drop.
inline std::vector<std::string> drop_slots(Conn& admin, const std::string& db) {
  std::vector<std::string> left;
  for (int attempt = 0; attempt < 100; ++attempt) {
    left.clear();
    auto slots = admin.query("SELECT slot_name, coalesce(active_pid, 0) FROM pg_replication_slots WHERE database = " +
                             quote_literal(db));
    for (const Row& s : slots) {
      if (*s[1] != "0") admin.exec("SELECT pg_terminate_backend(" + *s[1] + ")", true);
      if (!admin.exec("SELECT pg_drop_replication_slot(" + quote_literal(*s[0]) + ")", true)) left.push_back(*s[0]);
    }
    if (left.empty()) break;
    std::this_thread::sleep_for(100ms);
  }
  return left;
}

// A database of its own for one test: sluice_t_<name>, created fresh, dropped (after its slots)
// when the test ends.
class TestDb {
 public:
  explicit TestDb(const std::string& name, const char* var = "SLUICE_TEST_PG_URL", const char* service = "postgres")
      : name_("sluice_t_" + name) {
    admin_url_ = env_url(var, service);
    if (admin_url_.empty()) return;
    if (!admin_.connect(admin_url_)) return;
    cleanup();
    if (!admin_.exec("CREATE DATABASE " + name_)) return;
    url_ = url_with_database(admin_url_, name_);
    ok_ = conn_.connect(url_);
  }
  ~TestDb() {
    conn_ = Conn();
    if (admin_.ok()) {
      const auto left = cleanup();
      EXPECT_TRUE(left.empty()) << "could not drop replication slot " << left.front();
    }
  }
  TestDb(const TestDb&) = delete;
  TestDb& operator=(const TestDb&) = delete;

  bool ok() const { return ok_; }
  const std::string& name() const { return name_; }
  const std::string& url() const { return url_; }              // this test's database
  const std::string& admin_url() const { return admin_url_; }  // the `postgres` database
  Conn& sql() { return conn_; }
  Conn& admin() { return admin_; }

 private:
  std::vector<std::string> cleanup() {
    auto left = drop_slots(admin_, name_);
    admin_.exec("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
    return left;
  }

  std::string name_, admin_url_, url_;
  Conn admin_, conn_;
  bool ok_ = false;
};

// Polls `pred` every `every` until it holds or `timeout` passes.
inline bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout,
                       std::chrono::milliseconds every = 50ms) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(every);
  }
  return true;
}

// ── the source in-process ──────────────────────────────────────────────────

inline std::unique_ptr<Source> make_source(const std::map<std::string, std::string>& text) {
  const ConnectorSpec* spec = Registry::builtin().connector("postgres");
  if (spec == nullptr || spec->make_source == nullptr) {
    ADD_FAILURE() << "no postgres source in the registry";
    return nullptr;
  }
  Settings s(spec->source_settings);
  if (auto err = settings_from_text(spec->source_settings, text, &s)) {
    ADD_FAILURE() << "settings: " << *err;
    return nullptr;
  }
  auto src = spec->make_source(s);
  if (!src.ok()) {
    ADD_FAILURE() << "make_source: " << src.error().message();
    return nullptr;
  }
  return std::move(src.value());
}

// Drives a Source directly: reads batches and keeps them (records stay valid), optionally
// acknowledging each batch's position as a pipeline would once it is durable.
class Reader {
 public:
  explicit Reader(Source& src, bool ack = true) : src_(src), ack_(ack) {
    req_.max_records = 1000;
    req_.linger = 20ms;
    req_.poll = 100ms;
  }
  ReadRequest& request() { return req_; }

  // Reads until `pred(records())` holds; false (and a test failure) on a read error or timeout.
  bool read_until(const std::function<bool(const std::vector<const Record*>&)>& pred,
                  std::chrono::milliseconds timeout = 30s) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (!pred(records_)) {
      if (std::chrono::steady_clock::now() >= until) {
        ADD_FAILURE() << "timed out reading from the source (" << records_.size() << " records so far)";
        return false;
      }
      if (!read_once()) return false;
    }
    return true;
  }
  bool read_count(size_t n, std::chrono::milliseconds timeout = 30s) {
    return read_until([n](const auto& r) { return r.size() >= n; }, timeout);
  }
  // One read call; false on error. `last_status()` tells what it returned.
  bool read_once() {
    auto b = std::make_unique<Batch>(64 * 1024);
    auto st = src_.read(*b, req_, std::stop_token{});
    if (!st.ok()) {
      ADD_FAILURE() << "read failed: " << st.error().message();
      return false;
    }
    status_ = st.value();
    if (b->has_position()) {
      positions_.push_back({records_.size() + b->size(), b->position()});
      if (ack_) src_.ack(b->position());
    }
    for (const Record& r : b->records()) records_.push_back(&r);
    if (!b->empty()) batches_.push_back(std::move(b));
    return true;
  }
  // Reads until the source reports idle with no records (caught up); false on error.
  bool drain(std::chrono::milliseconds timeout = 30s) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const size_t before = records_.size();
      if (!read_once()) return false;
      if (status_ == ReadStatus::idle && records_.size() == before) return true;
      if (std::chrono::steady_clock::now() >= until) return false;
    }
  }

  const std::vector<const Record*>& records() const { return records_; }
  ReadStatus last_status() const { return status_; }
  // (records read when the batch was returned, the batch's position), in order.
  const std::vector<std::pair<size_t, std::string>>& positions() const { return positions_; }

 private:
  Source& src_;
  bool ack_;
  ReadRequest req_;
  ReadStatus status_ = ReadStatus::more;
  std::vector<std::unique_ptr<Batch>> batches_;
  std::vector<const Record*> records_;
  std::vector<std::pair<size_t, std::string>> positions_;
};

// ── the binary, postgres → SQLite ──────────────────────────────────────────

struct PipelineFile {
  std::string id;
  std::string url;
  std::vector<std::string> tables;
  std::map<std::string, std::string> source_settings;  // extra settings (YAML scalars as written)
  size_t max_records = 10000;
  std::string sqlite_path = "out.db";

  std::string yaml() const {
    std::string t;
    for (const auto& x : tables) t += (t.empty() ? "" : ", ") + x;
    std::string extra;
    for (const auto& [k, v] : source_settings) extra += "        " + k + ": " + v + "\n";
    return "version: 1\n"
           "pipelines:\n"
           "  - id: " + id + "\n"
           "    source:\n"
           "      connector: postgres\n"
           "      settings:\n"
           "        url: \"" + url + "\"\n"
           "        tables: [" + t + "]\n" + extra +
           "    destination:\n"
           "      connector: sqlite\n"
           "      settings: {path: " + sqlite_path + "}\n"
           "    batch: {max_records: " + std::to_string(max_records) + ", linger_ms: 20}\n"
           "checkpoints: {path: state/checkpoints.db}\n"
           "http: {enabled: false}\n";
  }
};

// The pipeline's checkpoint ("" if none yet).
inline std::string checkpoint_of(const std::filesystem::path& dir, const std::string& pipeline) {
  if (!std::filesystem::exists(dir / "state/checkpoints.db")) return "";
  try {
    e2e::Db db(dir / "state/checkpoints.db");
    return db.text("SELECT CAST(position AS TEXT) FROM checkpoints WHERE pipeline = '" + pipeline + "'");
  } catch (const std::exception&) {
    return "";
  }
}

// Waits until the checkpoint satisfies `pred`; false on timeout or if the process exited.
inline bool wait_for_checkpoint(e2e::Process& p, const std::filesystem::path& dir, const std::string& pipeline,
                                const std::function<bool(const std::string&)>& pred,
                                std::chrono::milliseconds timeout = 60s, std::chrono::milliseconds every = 20ms) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (pred(checkpoint_of(dir, pipeline))) return true;
    if (p.wait_for(every) >= 0) return false;
  }
  return false;
}

inline bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// Compares table `table` in PostgreSQL with the SQLite table of the same name, row by row on the
// given columns (PostgreSQL side cast to text; `pg_cols` and `sqlite_cols` pair up, the first is
// the key, ordered by it). Returns the number of differences (the first few are reported).
inline int compare_tables(Conn& pg, const std::string& pg_sql, const std::filesystem::path& sqlite_path,
                          const std::string& sqlite_sql) {
  const auto want = pg.query(pg_sql);
  std::vector<Row> got;
  try {
    e2e::Db db(sqlite_path);
    const bool ok = db.query(sqlite_sql, [&](sqlite3_stmt* st) {
      Row r;
      for (int i = 0; i < sqlite3_column_count(st); ++i) {
        if (sqlite3_column_type(st, i) == SQLITE_NULL) r.push_back(std::nullopt);
        else r.push_back(e2e::column_text(st, i));
      }
      got.push_back(std::move(r));
    });
    if (!ok) {
      ADD_FAILURE() << "SQLite query failed: " << sqlite_sql;
      return 1;
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
    return 1;
  }
  int bad = 0;
  auto show = [](const Row& r) {
    std::string s;
    for (const auto& v : r) s += (s.empty() ? "" : " | ") + (v ? *v : std::string("NULL"));
    return s;
  };
  size_t i = 0, j = 0;
  auto key = [](const Row& r) { return std::stoll(*r[0]); };
  while (i < want.size() || j < got.size()) {
    if (j >= got.size() || (i < want.size() && key(want[i]) < key(got[j]))) {
      if (bad++ < 5) ADD_FAILURE() << "missing at the destination: " << show(want[i]);
      ++i;
    } else if (i >= want.size() || key(got[j]) < key(want[i])) {
      if (bad++ < 5) ADD_FAILURE() << "at the destination but not in PostgreSQL: " << show(got[j]);
      ++j;
    } else {
      if (want[i] != got[j] && bad++ < 5)
        ADD_FAILURE() << "row differs:\n  postgres " << show(want[i]) << "\n  sqlite   " << show(got[j]);
      ++i;
      ++j;
    }
  }
  if (want.size() != got.size())
    ADD_FAILURE() << "PostgreSQL has " << want.size() << " rows, SQLite " << got.size();
  return bad;
}

// A thread with its own connection running `step(conn, i)` (i = 0, 1, ...) until stopped.
class Writer {
 public:
  Writer(const std::string& url, std::function<bool(Conn&, uint64_t)> step, std::chrono::milliseconds pause = 1ms)
      : url_(url), step_(std::move(step)), pause_(pause) {
    thread_ = std::thread([this] { run(); });
  }
  ~Writer() { stop(); }
  // Stops and joins; returns the number of steps completed.
  uint64_t stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    return steps_;
  }
  uint64_t steps() const { return steps_; }
  bool failed() const { return failed_; }

 private:
  void run() {
    // Conn reports failures with ADD_FAILURE, which is thread-safe in gtest on Linux.
    Conn conn;
    if (!conn.connect(url_)) {
      failed_ = true;
      return;
    }
    while (!stop_) {
      if (!step_(conn, steps_)) {
        failed_ = true;
        return;
      }
      ++steps_;
      if (pause_.count() > 0) std::this_thread::sleep_for(pause_);
    }
  }

  std::string url_;
  std::function<bool(Conn&, uint64_t)> step_;
  std::chrono::milliseconds pause_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  std::atomic<uint64_t> steps_{0};
  std::thread thread_;
};

// Lines of a process's stderr.
inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    out.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

// A log line: "2024-01-02 03:04:05.678 level message".
inline bool is_log_line(const std::string& line) {
  return line.size() > 24 && line[4] == '-' && line[7] == '-' && line[10] == ' ' && line[13] == ':';
}
inline bool is_error_log_line(const std::string& line) {
  return is_log_line(line) && line.compare(24, 5, "error") == 0;
}

}  // namespace sluice::pgtest
