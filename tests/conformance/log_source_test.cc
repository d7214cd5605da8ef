// The log-source contract: what every change-data-capture source (a snapshot, then the server's
// change log) must do, checked end to end through the sluice binary (the source on its real server
// → SQLite) and compared with the source table: a snapshot taken while a writer keeps writing
// converges; a kill -9 inside a large transaction, or anywhere in the stream, resumes to the exact
// end state; a dropped replication connection is reconnected without a restart; a burst's last
// records are not held back for the whole batch linger.
//
// A source gets the whole suite with a LogSource (its pipeline settings, SQL on its server, how
// to drop its replication connection) and one INSTANTIATE_TEST_SUITE_P line at the end of this
// file; see docs/development/testing.md.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "support/env.h"
#include "support/pipeline_file.h"
#include "support/process.h"
#include "support/readers.h"
#include "support/sql.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

// ── the source under test ───────────────────────────────────────────────────

// The table every case captures: t (id INT PRIMARY KEY, v INT, note VARCHAR(64)).
class LogSource {
 public:
  virtual ~LogSource() = default;
  virtual bool ready() const = 0;
  // The source block of a pipeline capturing table t of this test's database.
  virtual ConnectorYaml source() = 0;
  // A new connection to this test's database, for a writer thread: runs one statement.
  virtual std::function<bool(const std::string&)> connect() = 0;
  virtual bool exec(const std::string& sql) = 0;
  virtual Rows rows(const std::string& sql) = 0;
  // INSERT INTO t of ids from..to (v = id % 13, note 'seed').
  virtual std::string insert_range(int from, int to) const = 0;
  // Drops the source's replication connection from the server side; false if none was found.
  virtual bool drop_replication_connection() = 0;
};

struct LogSourceKind {
  std::string name;
  std::function<std::unique_ptr<LogSource>()> make;
};

class PostgresLog final : public LogSource {
 public:
  PostgresLog() : db_(unique_name("ls_" + current_test_slug())), slot_(unique_name("ls_slot")) {}
  bool ready() const override { return db_.ok(); }
  ConnectorYaml source() override {
    return ConnectorYaml{"postgres", {}}
        .set("url", db_.url())
        .set("tables", Yaml::strings({"public.t"}))
        .set("slot", slot_)
        .set("heartbeat.interval", "1s");
  }
  std::function<bool(const std::string&)> connect() override {
    auto c = std::make_shared<PgClient>(db_.url());
    return [c](const std::string& sql) { return c->exec(sql, true); };
  }
  bool exec(const std::string& sql) override { return db_.sql().exec(sql); }
  Rows rows(const std::string& sql) override { return db_.sql().query(sql); }
  std::string insert_range(int from, int to) const override {
    return "INSERT INTO t SELECT g, g % 13, 'seed' FROM generate_series(" + std::to_string(from) +
           ", " + std::to_string(to) + ") g";
  }
  bool drop_replication_connection() override {
    return test::terminate_pg_backend(db_.admin(),
                                      test::wait_for_walsender(db_.admin(), slot_, 0ms));
  }

 private:
  PgDatabase db_;
  std::string slot_;
};

class MysqlLog final : public LogSource {
 public:
  MysqlLog() : db_(unique_name("ls_" + current_test_slug(), 64)) {
    // A user of its own, so its binlog connection is told apart from other tests' on the server.
    if (db_.ok())
      url_ =
          db_.user_url("ls", {"GRANT SELECT ON {db}.* TO {user}",
                              "GRANT BINLOG MONITOR, REPLICATION SLAVE, RELOAD ON *.* TO {user}"});
    user_ = MyUrl::parse(url_.empty() ? db_.url() : url_).user;
  }
  bool ready() const override { return db_.ok() && !url_.empty(); }
  ConnectorYaml source() override {
    std::random_device rd;
    return ConnectorYaml{"mysql", {}}
        .set("url", url_)
        .set("tables", Yaml::strings({"t"}))
        .set("server_id", int64_t(100000 + rd() % 1000000000))
        .set("snapshot.chunk_size", 200)
        .set("heartbeat.interval", "1s");
  }
  std::function<bool(const std::string&)> connect() override {
    auto c = std::make_shared<MysqlClient>(db_.url());
    return [c](const std::string& sql) { return c->exec(sql, true); };
  }
  bool exec(const std::string& sql) override { return db_.sql().exec(sql); }
  Rows rows(const std::string& sql) override { return db_.sql().query(sql); }
  std::string insert_range(int from, int to) const override {
    return "INSERT INTO t SELECT seq, seq % 13, 'seed' FROM seq_" + std::to_string(from) + "_to_" +
           std::to_string(to);
  }
  bool drop_replication_connection() override {
    auto ids = db_.admin().query("SELECT ID FROM information_schema.PROCESSLIST WHERE USER = " +
                                 sql_literal(user_) + " AND COMMAND LIKE 'Binlog Dump%'");
    bool killed = false;
    for (const Row& r : ids) killed = db_.admin().exec("KILL " + *r[0], true) || killed;
    return killed;
  }

 private:
  MysqlDatabase db_;
  std::string url_, user_;
};

// ── the suite ───────────────────────────────────────────────────────────────

// A thread writing small transactions into t until stopped: two inserts of new ids, an update and
// a delete of earlier ids.
class Writer {
 public:
  Writer(std::function<bool(const std::string&)> exec, int first_id)
      : exec_(std::move(exec)), next_(first_id) {
    thread_ = std::thread([this] { run(); });
  }
  ~Writer() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int steps() const { return steps_; }
  bool failed() const { return failed_; }

 private:
  void run() {
    std::mt19937 rng(7);
    while (!stop_) {
      const int a = next_, b = next_ + 1;
      next_ += 2;
      const bool good =
          exec_("BEGIN") &&
          exec_("INSERT INTO t VALUES (" + std::to_string(a) + ", 1, 'w'), (" + std::to_string(b) +
                ", 2, 'w')") &&
          exec_("UPDATE t SET v = v + 1, note = 'u' WHERE id = " + std::to_string(rng() % a)) &&
          exec_("DELETE FROM t WHERE id = " + std::to_string(rng() % a)) && exec_("COMMIT");
      if (!good) {
        failed_ = true;
        return;
      }
      ++steps_;
      std::this_thread::sleep_for(2ms);
    }
  }
  std::function<bool(const std::string&)> exec_;
  int next_;
  std::atomic<bool> stop_{false}, failed_{false};
  std::atomic<int> steps_{0};
  std::thread thread_;
};

class LogSourceContract : public ::testing::TestWithParam<LogSourceKind> {
 protected:
  void SetUp() override {
    src_ = GetParam().make();
    ASSERT_TRUE(src_->ready());
    ASSERT_TRUE(src_->exec("CREATE TABLE t (id INT PRIMARY KEY, v INT, note VARCHAR(64))"));
  }

  void write_pipeline(size_t max_records, int linger_ms = 10) {
    PipelineFile f;
    PipelineYaml& p = f.pipeline("ls");
    p.source_ = src_->source();
    p.destination("sqlite").set("path", "out.db");
    p.max_records(max_records).linger_ms(linger_ms);
    f.write(dir_ / "p.yaml");
  }

  Rows source_rows() { return sorted(src_->rows("SELECT id, v, note FROM t")); }
  Rows destination_rows() {
    return read_sqlite_table(dir_ / "out.db", "t", {"id", "v", "note"}).value_or(Rows{});
  }

  // Waits until the SQLite copy equals the source table; reports the difference otherwise.
  void expect_converges(Process& p, std::chrono::seconds timeout = 60s) {
    Rows want;
    const bool equal = wait_until(
        [&] {
          want = source_rows();
          return destination_rows() == want;
        },
        timeout, 100ms);
    EXPECT_TRUE(equal) << "source " << want.size() << " rows, destination "
                       << destination_rows().size() << "; stderr:\n"
                       << p.stderr_text();
  }
  size_t destination_count() { return destination_rows().size(); }

  std::unique_ptr<LogSource> src_;
  TempDir dir_{"conformance-ls"};
};

TEST_P(LogSourceContract, SnapshotUnderAConcurrentWriterConverges) {
  ASSERT_TRUE(src_->exec(src_->insert_range(1, 3000)));
  write_pipeline(200);
  Writer writer(src_->connect(), 10000);
  ASSERT_TRUE(wait_until([&] { return writer.steps() > 0; }, 10s));
  Process p({"run", "p.yaml"}, dir_.path());
  // The writer keeps going through the snapshot and into the stream.
  ASSERT_TRUE(wait_until([&] { return destination_count() > 0; }, 30s)) << p.stderr_text();
  std::this_thread::sleep_for(1500ms);
  writer.stop();
  EXPECT_FALSE(writer.failed());
  expect_converges(p);
  p.terminate();
  EXPECT_EQ(p.wait_for(30s), 0) << p.stderr_text();
}

TEST_P(LogSourceContract, Kill9InsideALargeTransactionResumesToTheExactEndState) {
  ASSERT_TRUE(src_->exec(src_->insert_range(1, 10)));
  write_pipeline(50);
  {
    Process p({"run", "p.yaml"}, dir_.path());
    expect_converges(p);
    // One transaction of about 25000 changes, read in batches of 50: killed as soon as part of it
    // landed, so the restart resumes inside it (rows_at_kill in the test's XML output tells).
    auto tx = src_->connect();
    ASSERT_TRUE(tx("BEGIN"));
    ASSERT_TRUE(tx(src_->insert_range(11, 20000)));
    ASSERT_TRUE(tx("UPDATE t SET v = v + 100, note = 'tx' WHERE id <= 5000"));
    ASSERT_TRUE(tx("COMMIT"));
    ASSERT_TRUE(wait_until([&] { return destination_count() > 100; }, 60s, 2ms)) << p.stderr_text();
    p.kill9();
  }
  const size_t at_kill = destination_count();
  ASSERT_TRUE(src_->exec(src_->insert_range(20001, 20010)));  // after the transaction, while down
  Process again({"run", "p.yaml"}, dir_.path());
  expect_converges(again);
  RecordProperty("rows_at_kill", int(at_kill));
  again.terminate();
  EXPECT_EQ(again.wait_for(30s), 0) << again.stderr_text();
}

TEST_P(LogSourceContract, Kill9DuringTheStreamResumesToTheExactEndState) {
  ASSERT_TRUE(src_->exec(src_->insert_range(1, 500)));
  write_pipeline(20);
  Writer writer(src_->connect(), 10000);
  {
    Process p({"run", "p.yaml"}, dir_.path());
    const int steps = writer.steps();
    ASSERT_TRUE(
        wait_until([&] { return destination_count() > 500 && writer.steps() > steps + 50; }, 60s))
        << p.stderr_text();
    p.kill9();
  }
  std::this_thread::sleep_for(300ms);  // the writer goes on while sluice is down
  Process again({"run", "p.yaml"}, dir_.path());
  std::this_thread::sleep_for(500ms);
  writer.stop();
  EXPECT_FALSE(writer.failed());
  expect_converges(again);
  again.terminate();
  EXPECT_EQ(again.wait_for(30s), 0) << again.stderr_text();
}

TEST_P(LogSourceContract, ReconnectsAfterTheReplicationConnectionDrops) {
  ASSERT_TRUE(src_->exec(src_->insert_range(1, 100)));
  write_pipeline(100);
  Process p({"run", "p.yaml"}, dir_.path());
  expect_converges(p);
  ASSERT_TRUE(src_->exec(src_->insert_range(101, 110)));
  expect_converges(p);  // streaming now
  ASSERT_TRUE(wait_until([&] { return src_->drop_replication_connection(); }, 10s))
      << "no replication connection";
  ASSERT_TRUE(src_->exec(src_->insert_range(111, 200)));
  ASSERT_TRUE(src_->exec("UPDATE t SET note = 'after the drop' WHERE id <= 50"));
  expect_converges(p);
  EXPECT_TRUE(p.running()) << p.stderr_text();
  // A second drop, once reconnected.
  ASSERT_TRUE(wait_until([&] { return src_->drop_replication_connection(); }, 30s))
      << "did not reconnect";
  ASSERT_TRUE(src_->exec("DELETE FROM t WHERE id > 150"));
  expect_converges(p);
  p.terminate();
  EXPECT_EQ(p.wait_for(30s), 0) << p.stderr_text();
}

// batch.linger_ms bounds how long a batch waits for more records after its first; a burst that
// ended is not held back that long: the source ends the batch once nothing arrived for a tenth of
// the linger. Here the linger is 6 s, so the burst's rows must land well before it runs out.
TEST_P(LogSourceContract, ABurstsLastRecordsAreNotHeldForTheWholeLinger) {
  ASSERT_TRUE(src_->exec(src_->insert_range(1, 20)));
  write_pipeline(10000, 6000);
  Process p({"run", "p.yaml"}, dir_.path());
  expect_converges(p);
  ASSERT_TRUE(src_->exec(src_->insert_range(21, 40)));  // streaming from here
  expect_converges(p);
  for (int round = 0; round < 2; ++round) {
    const int from = 100 + round * 100;
    const auto burst = std::chrono::steady_clock::now();
    ASSERT_TRUE(src_->exec(src_->insert_range(from, from + 49)));
    expect_converges(p);
    const auto took = std::chrono::steady_clock::now() - burst;
    EXPECT_LT(took, 3s) << "a burst of 50 rows took "
                        << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                        << " ms to land with batch.linger_ms 6000";
  }
  p.terminate();
  EXPECT_EQ(p.wait_for(30s), 0) << p.stderr_text();
}

std::string kind_name(const ::testing::TestParamInfo<LogSourceKind>& info) {
  return info.param.name;
}

// ── one line per source ─────────────────────────────────────────────────────

INSTANTIATE_TEST_SUITE_P(Postgres, LogSourceContract,
                         ::testing::Values(LogSourceKind{
                             "postgres", [] { return std::make_unique<PostgresLog>(); }}),
                         kind_name);
INSTANTIATE_TEST_SUITE_P(Mysql, LogSourceContract,
                         ::testing::Values(LogSourceKind{
                             "mysql", [] { return std::make_unique<MysqlLog>(); }}),
                         kind_name);

}  // namespace
}  // namespace sluice::test
