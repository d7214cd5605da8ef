// PostgreSQL tests: the names they use for the shared test support (tests/support: the server's
// address, a database per test, the libpq client, process control, the pipeline-file builder),
// and what only they need: the postgres source driven in-process, the sluice binary driven
// postgres → SQLite, comparisons of a PostgreSQL table with its SQLite copy, a writer thread.
// Shared by tests/integration, tests/fault and tests/serial (#include "integration/pg_harness.h").
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <cstdio>

#include <algorithm>
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
#include <tuple>
#include <vector>

#include "e2e/harness.h"
#include "sluice/batch.h"
#include "sluice/connector.h"
#include "sluice/registry.h"
#include "sluice/settings.h"
#include "support/env.h"
#include "support/pipeline_file.h"
#include "support/sql.h"
#include "support/sqlite.h"

namespace sluice::pgtest {

using namespace std::chrono_literals;

inline std::string env_url(const char* var = "SLUICE_TEST_PG_URL",
                           const char* service = "postgres") {
  return test::required_env(var, service);
}

using PgUrl = test::PgUrl;
inline std::string url_with_database(const std::string& url, const std::string& db) {
  return test::pg_url_with_database(url, db);
}
inline std::string url_with_credentials(const std::string& url, const std::string& user,
                                        const std::string& password) {
  return test::pg_url_with_credentials(url, user, password);
}
inline std::string url_with_port(const std::string& url, int port) {
  return test::pg_url_with_port(url, port);
}

using Row = test::Row;
using Conn = test::PgClient;

inline std::string quote_literal(const std::string& s) { return test::sql_literal(s); }
inline std::vector<std::string> drop_slots(Conn& admin, const std::string& db) {
  return test::drop_pg_slots(admin, db);
}

// A database of its own for one test: sluice_t_<name>, created fresh, dropped (after its slots)
// when the test ends.
class TestDb : public test::PgDatabase {
 public:
  explicit TestDb(const std::string& name, const char* var = "SLUICE_TEST_PG_URL",
                  const char* service = "postgres")
      : PgDatabase("sluice_t_" + name, var, service) {}
};

using test::wait_until;

// ── the source in-process ──────────────────────────────────────────────────

// A built-in connector's source from settings as text (a failure fails the test, nullptr).
inline std::unique_ptr<Source> make_connector_source(
    const char* connector, const std::map<std::string, std::string>& text) {
  const ConnectorSpec* spec = Registry::builtin().connector(connector);
  if (spec == nullptr || spec->make_source == nullptr) {
    ADD_FAILURE() << "no " << connector << " source in the registry";
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

inline std::unique_ptr<Source> make_source(const std::map<std::string, std::string>& text) {
  return make_connector_source("postgres", text);
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
  // Keep snapshot markers too; by default records() holds data and schema records (markers,
  // around every snapshotted table, would shift every count).
  void keep_control_records() { keep_control_ = true; }

  // Reads until `pred(records())` holds; false (and a test failure) on a read error or timeout.
  bool read_until(const std::function<bool(const std::vector<const Record*>&)>& pred,
                  std::chrono::milliseconds timeout = 30s) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (!pred(records_)) {
      if (std::chrono::steady_clock::now() >= until) {
        ADD_FAILURE() << "timed out reading from the source (" << records_.size()
                      << " records so far)";
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
      size_t kept = b->size();
      if (!keep_control_)
        kept = size_t(std::count_if(b->records().begin(), b->records().end(),
                                    [](const Record& r) { return r.op != Operation::marker; }));
      positions_.push_back({records_.size() + kept, b->position()});
      if (ack_) src_.ack(b->position());
    }
    for (const Record& r : b->records())
      if (keep_control_ || r.op != Operation::marker) records_.push_back(&r);
    largest_bytes_ = std::max(largest_bytes_, b->bytes());
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
  // The most bytes one batch held (Batch::bytes(), what batch.max_bytes bounds).
  size_t largest_batch_bytes() const { return largest_bytes_; }

 private:
  Source& src_;
  bool ack_;
  bool keep_control_ = false;
  ReadRequest req_;
  ReadStatus status_ = ReadStatus::more;
  size_t largest_bytes_ = 0;
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
  size_t max_bytes = 0;  // batch.max_bytes when set
  std::string sqlite_path = "out.db";
  std::optional<std::string> on_error;  // stop | dlq
  std::string dlq_path;                 // a file dead-letter queue, when set

  std::string yaml() const {
    test::PipelineFile f;
    test::PipelineYaml& p = f.pipeline(id);
    test::ConnectorYaml& src =
        p.source("postgres").set("url", url).set("tables", test::Yaml::strings(tables));
    for (const auto& [k, v] : source_settings) src.set(k, test::Yaml::raw(v));
    p.destination("sqlite").set("path", sqlite_path);
    p.max_records(max_records).linger_ms(20);
    if (max_bytes) p.batch.set("max_bytes", uint64_t(max_bytes));
    p.on_error = on_error;
    if (!dlq_path.empty()) p.dlq("file").set("path", dlq_path);
    return f.yaml();
  }
};

// The chunks an incremental snapshot read of a table whose name ends in `table_suffix` (the
// sources' debug lines "…<table>: chunk of N rows (B bytes) read"): {rows, bytes} each, in order.
inline std::vector<std::pair<int64_t, int64_t>> incremental_chunks_read(
    const std::string& log, const std::string& table_suffix) {
  std::vector<std::pair<int64_t, int64_t>> out;
  const std::string mark = table_suffix + ": chunk of ";
  for (size_t at = log.find(mark); at != std::string::npos; at = log.find(mark, at + 1)) {
    long long rows = 0, bytes = 0;
    if (std::sscanf(log.c_str() + at + mark.size(), "%lld rows (%lld bytes)", &rows, &bytes) == 2)
      out.emplace_back(rows, bytes);
  }
  return out;
}

// An incremental snapshot of `table_suffix` read `rows` rows in at least `min_chunks` chunks, each
// within `max_bytes` and the one row (at most `largest_row` bytes) that reached them.
inline void expect_incremental_chunks_within(const std::string& log,
                                             const std::string& table_suffix, int64_t max_bytes,
                                             int64_t largest_row, int64_t rows, size_t min_chunks) {
  const auto chunks = incremental_chunks_read(log, table_suffix);
  int64_t total = 0;
  for (const auto& [n, bytes] : chunks) {
    total += n;
    EXPECT_LE(bytes, max_bytes + largest_row) << "a chunk of " << n << " rows";
  }
  EXPECT_EQ(total, rows);
  EXPECT_GE(chunks.size(), min_chunks);
}

// The pipeline's checkpoint ("" if none yet).
inline std::string checkpoint_of(const std::filesystem::path& dir, const std::string& pipeline) {
  return test::stored_checkpoint(dir / "state/checkpoints.db", pipeline);
}

// Waits until the checkpoint satisfies `pred`; false on timeout or if the process exited.
inline bool wait_for_checkpoint(e2e::Process& p, const std::filesystem::path& dir,
                                const std::string& pipeline,
                                const std::function<bool(const std::string&)>& pred,
                                std::chrono::milliseconds timeout = 60s,
                                std::chrono::milliseconds every = 20ms) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (pred(checkpoint_of(dir, pipeline))) return true;
    if (p.wait_for(every) >= 0) return false;
  }
  return false;
}

// A streaming position without its trailing list of the tables it delivers (" cap <oid>,…").
inline std::string without_captured(const std::string& pos) {
  const size_t cap = pos.find(" cap ");
  return cap == std::string::npos ? pos : pos.substr(0, cap);
}

// Positions order: "cdc L" < "cdc L T n" < "cdc L T n+1" < "cdc L2" (L2 > L).
inline std::tuple<uint64_t, int, uint64_t> position_order(const std::string& whole) {
  const std::string pos = without_captured(whole);
  auto lsn = [](const std::string& t) {
    const size_t slash = t.find('/');
    return (std::stoull(t.substr(0, slash), nullptr, 16) << 32) |
           std::stoull(t.substr(slash + 1), nullptr, 16);
  };
  std::vector<std::string> parts;
  for (size_t start = 0; start <= pos.size();) {
    size_t sp = pos.find(' ', start);
    if (sp == std::string::npos) sp = pos.size();
    parts.push_back(pos.substr(start, sp - start));
    start = sp + 1;
  }
  if (parts.size() == 2) return {lsn(parts[1]), 0, 0};
  return {lsn(parts[1]), 1, std::stoull(parts[3])};
}

inline bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

// The positions the reader saw never go back (position_order); each starts with `prefix` when one
// is given.
inline void expect_positions_never_go_back(const Reader& reader, const std::string& prefix = "") {
  std::string prev;
  for (const auto& [n, pos] : reader.positions()) {
    if (!prefix.empty()) {
      ASSERT_TRUE(starts_with(pos, prefix)) << pos;
    }
    if (!prev.empty()) {
      EXPECT_TRUE(position_order(pos) >= position_order(prev))
          << "position went back from " << prev << " to " << pos << " after " << n << " records";
    }
    prev = pos;
  }
}

// Compares table `table` in PostgreSQL with the SQLite table of the same name, row by row on the
// given columns (PostgreSQL side cast to text; `pg_cols` and `sqlite_cols` pair up, the first is
// the key, ordered by it). Returns the number of differences (the first few are reported).
inline int compare_tables(Conn& pg, const std::string& pg_sql,
                          const std::filesystem::path& sqlite_path, const std::string& sqlite_sql) {
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
        ADD_FAILURE() << "row differs:\n  postgres " << show(want[i]) << "\n  sqlite   "
                      << show(got[j]);
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
  Writer(const std::string& url, std::function<bool(Conn&, uint64_t)> step,
         std::chrono::milliseconds pause = 1ms)
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

using test::is_error_log_line;
using test::is_log_line;
using test::lines_of;

}  // namespace sluice::pgtest
