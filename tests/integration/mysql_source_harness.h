// Tests of the mysql source against the real MariaDB test server (scripts/services start
// mariadb): the names they use for the shared test support (tests/support: SLUICE_TEST_MYSQL_URL,
// a database per test, the libmariadb client, the pipeline-file builder), the source in-process
// (the Reader of pg_harness.h) and a writer thread.
#pragma once

#include <random>

#include "integration/pg_harness.h"
#include "support/env.h"
#include "support/pipeline_file.h"
#include "support/sql.h"

namespace sluice::mytest {

using namespace std::chrono_literals;
using pgtest::Reader;

using MyUrl = test::MyUrl;
using MyConn = test::MysqlClient;

inline std::string env_url() { return test::mysql_url(); }

inline std::string unique_name(const std::string& prefix) { return test::unique_name(prefix); }

// A database of its own (sl_<name>_<unique>), dropped (with the users the test created) at the end.
class TestDb : public test::MysqlDatabase {
 public:
  explicit TestDb(const std::string& name) : MysqlDatabase(test::unique_name("sl_" + name, 64)) {}
};

inline std::unique_ptr<Source> make_source(const std::map<std::string, std::string>& text) {
  return pgtest::make_connector_source("mysql", text);
}

inline ConnectorContext context(const std::string& pipeline, ConnectorStats* stats = nullptr) {
  ConnectorContext ctx;
  ctx.pipeline_id = pipeline;
  ctx.connector = "mysql";
  ctx.stats = stats;
  return ctx;
}

// Field of a record's after/before image; absent Value when missing.
inline Value field(const Value& obj, std::string_view name) {
  const Value* v = obj.is_object() ? obj.find(name) : nullptr;
  return v ? *v : Value();
}

// A pipeline file: mysql source (`tables` of `url`) → the destination the caller sets
// (f.pipeline(id).destination(...)).
inline test::PipelineFile pipeline_file(const std::string& id, const std::string& url,
                                        const std::vector<std::string>& tables,
                                        size_t max_records = 1000) {
  test::PipelineFile f;
  test::PipelineYaml& p = f.pipeline(id);
  p.source("mysql").set("url", url).set("tables", test::Yaml::strings(tables));
  p.max_records(max_records).linger_ms(20);
  return f;
}

}  // namespace sluice::mytest

namespace sluice::mytest {

// Rows of `mysql_sql` and of `sqlite_sql` on the SQLite file, as text; the number of differences.
inline int diff_mysql_sqlite(MyConn& my, const std::string& mysql_sql,
                             const std::filesystem::path& sqlite_path,
                             const std::string& sqlite_sql, bool report = true) {
  const auto want = my.query(mysql_sql);
  std::vector<pgtest::Row> got;
  try {
    if (!std::filesystem::exists(sqlite_path)) return int(want.size()) + 1;
    e2e::Db db(sqlite_path);
    if (!db.query(sqlite_sql, [&](sqlite3_stmt* st) {
          pgtest::Row r;
          for (int i = 0; i < sqlite3_column_count(st); ++i) {
            if (sqlite3_column_type(st, i) == SQLITE_NULL) r.push_back(std::nullopt);
            else r.push_back(e2e::column_text(st, i));
          }
          got.push_back(std::move(r));
        }))
      return int(want.size()) + 1;
  } catch (const std::exception&) {
    return int(want.size()) + 1;
  }
  int bad = std::abs(int(want.size()) - int(got.size()));
  for (size_t i = 0; i < std::min(want.size(), got.size()); ++i) {
    if (want[i] != got[i]) {
      if (report && bad < 3)
        ADD_FAILURE() << "row " << i << " differs: mysql " << (want[i][0] ? *want[i][0] : "NULL")
                      << " vs sqlite " << (got[i][0] ? *got[i][0] : "NULL");
      ++bad;
    }
  }
  if (report && want.size() != got.size())
    ADD_FAILURE() << "mysql has " << want.size() << " rows, sqlite " << got.size();
  return bad;
}

// Keeps inserting, updating and deleting rows of `table` (id INT PRIMARY KEY, v INT, note
// VARCHAR) in small transactions until stopped.
class Writer {
 public:
  Writer(const std::string& url, const std::string& table, int first_id, int max_steps = 1 << 30)
      : url_(url), table_(table), next_(first_id), max_steps_(max_steps) {
    thread_ = std::thread([this] { run(); });
  }
  ~Writer() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int steps() const { return steps_.load(); }
  bool failed() const { return failed_.load(); }

 private:
  void run() {
    MyConn c(url_);
    std::mt19937 rng(42);
    while (!stop_ && steps_ < max_steps_) {
      std::string sql = "BEGIN; INSERT INTO " + table_ + " VALUES (" + std::to_string(next_) +
                        ", " + std::to_string(rng() % 1000) + ", 'w'), (" +
                        std::to_string(next_ + 1) + ", 1, 'w'); UPDATE " + table_ +
                        " SET v = v + 1, note = 'u' WHERE id = " + std::to_string(rng() % next_) +
                        "; DELETE FROM " + table_ + " WHERE id = " + std::to_string(rng() % next_) +
                        "; COMMIT";
      next_ += 2;
      if (!c.exec(sql, true)) {
        failed_ = true;
        return;
      }
      ++steps_;
    }
  }
  std::string url_, table_;
  int next_;
  int max_steps_;
  std::atomic<bool> stop_{false}, failed_{false};
  std::atomic<int> steps_{0};
  std::thread thread_;
};

}  // namespace sluice::mytest
