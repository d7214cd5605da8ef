// Incremental snapshots of the mysql source, end to end (the sluice binary, MariaDB → PostgreSQL,
// the real servers): a table added to `tables` on restart, read in small key-ordered chunks while
// a writer inserts, updates and deletes the rows being chunked; kill -9 in the middle of the
// table, then a resume that converges; a composite varchar + date key named by `sluice snapshot`
// and a decimal key named by a signal row written by hand; and the one-line errors when the
// signal table is missing, not writable, or not set. Every convergence test ends by comparing
// the MariaDB table with the PostgreSQL one row by row.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <csignal>

#include "integration/mysql_source_harness.h"
#include "support/failpoints.h"
#include "support/sql.h"
#include "support/sqlite.h"

namespace sluice::mytest {
namespace {

constexpr const char* kSignals =
    "CREATE TABLE sluice_signals (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, data "
    "TEXT)";

// The rows of a MariaDB query and of a PostgreSQL one (both ordered alike, as text); the number
// of differences, the first few reported.
int compare(MyConn& my, const std::string& my_sql, test::PgClient& pg, const std::string& pg_sql) {
  const test::Rows want = my.query(my_sql);
  const test::Rows got = pg.query(pg_sql, /*quiet=*/true);
  auto show = [](const test::Row& r) {
    std::string s;
    for (const auto& v : r) s += (s.empty() ? "" : " | ") + (v ? *v : std::string("NULL"));
    return s;
  };
  int bad = 0;
  for (size_t i = 0; i < std::max(want.size(), got.size()); ++i) {
    const bool same = i < want.size() && i < got.size() && want[i] == got[i];
    if (same) continue;
    if (bad++ < 5)
      ADD_FAILURE() << "row " << i << ": mariadb " << (i < want.size() ? show(want[i]) : "-")
                    << " vs postgres " << (i < got.size() ? show(got[i]) : "-");
  }
  if (want.size() != got.size())
    ADD_FAILURE() << "mariadb has " << want.size() << " rows, postgres " << got.size();
  return bad;
}

// A writer transaction on `items`: an insert of a new id, updates and a delete of existing ones,
// spread over the whole key range (so over chunks not read yet, being read, and read).
std::string items_step(uint64_t i) {
  std::mt19937_64 rng(i * 7919 + 1);
  std::string sql =
      "BEGIN; INSERT INTO items VALUES (" + std::to_string(100000 + i) + ", 0, 'new');";
  for (int k = 0; k < 3; ++k)
    sql += "UPDATE items SET v = v + 1, note = 'u" + std::to_string(i) +
           "' WHERE id = " + std::to_string(rng() % 3000 + 1) + ";";
  return sql + "DELETE FROM items WHERE id = " + std::to_string(rng() % 3000 + 1) + "; COMMIT";
}

int compare_items(TestDb& db, pgtest::TestDb& pg) {
  return compare(db.sql(), "SELECT id, v, note FROM items ORDER BY id", pg.sql(),
                 "SELECT id::text, v::text, note FROM items ORDER BY id::bigint");
}

// Keeps running `step` (one transaction of its own) until stopped.
class StepWriter {
 public:
  StepWriter(const std::string& url, std::function<std::string(uint64_t)> step) : step_(step) {
    thread_ = std::thread([this, url] {
      MyConn c(url);
      for (uint64_t i = 0; !stop_; ++i) {
        if (!c.exec(step_(i), true)) {
          failed_ = true;
          return;
        }
        ++steps_;
        std::this_thread::sleep_for(2ms);
      }
    });
  }
  ~StepWriter() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  bool failed() const { return failed_; }
  uint64_t steps() const { return steps_; }

 private:
  std::function<std::string(uint64_t)> step_;
  std::atomic<bool> stop_{false}, failed_{false};
  std::atomic<uint64_t> steps_{0};
  std::thread thread_;
};

test::PipelineFile inc_pipeline(const std::string& id, TestDb& db, pgtest::TestDb& pg,
                                const std::vector<std::string>& tables, bool signal = true) {
  test::PipelineFile f = pipeline_file(id, db.url(), tables, 500);
  test::PipelineYaml& p = f.pipeline(id);
  p.source_.set("snapshot.chunk_size", 100);
  if (signal) p.source_.set("signal.table", "sluice_signals");
  p.destination("postgres").set("url", pg.url());
  return f;
}

bool logged(e2e::Process& p, const std::string& text, std::chrono::seconds timeout = 60s) {
  return pgtest::wait_until([&] { return p.stderr_text().find(text) != std::string::npos; },
                            timeout, 50ms);
}

// A database with the signal table, `other` (captured from the start) and `items` (3,000 rows,
// added later).
void seed_items(TestDb& db) {
  ASSERT_TRUE(db.sql().exec(kSignals));
  ASSERT_TRUE(db.sql().exec("CREATE TABLE other (id INT PRIMARY KEY, v VARCHAR(40))"));
  ASSERT_TRUE(db.sql().exec("CREATE TABLE items (id INT PRIMARY KEY, v INT, note VARCHAR(20))"));
  ASSERT_TRUE(db.sql().exec("INSERT INTO items SELECT seq, seq % 97, 'seed' FROM seq_1_to_3000"));
}

// ── a table added to `tables` on restart ───────────────────────────────────

TEST(MysqlIncrementalSnapshot, TableAddedOnRestartIsCopiedWhileAWriterChangesItsRows) {
  TestDb db("inc_added");
  pgtest::TestDb pg("my_inc_added");
  ASSERT_TRUE(pg.ok());
  seed_items(db);
  auto dir = e2e::make_temp_dir("mysql-inc-added");
  e2e::write_file(dir / "p.yaml", inc_pipeline("inc-added", db, pg, {"other"}).yaml());
  ASSERT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "1"}, dir, 60s), 0);
  ASSERT_TRUE(pgtest::starts_with(pgtest::checkpoint_of(dir, "inc-added"), "cdc "));
  // Second run lists `items` too: its rows are read in chunks of 100 while the writer inserts,
  // updates and deletes them, and `other` keeps streaming.
  e2e::write_file(dir / "p.yaml", inc_pipeline("inc-added", db, pg, {"other", "items"}).yaml());
  StepWriter writer(db.url(), items_step);
  e2e::Process p({"run", "p.yaml", "--idle-exit", "2"}, dir);
  ASSERT_TRUE(pgtest::wait_for_checkpoint(p, dir, "inc-added", [](const std::string& c) {
    return c.starts_with("v2 cdc ") && c.find(" isnap 1 ") != std::string::npos &&
           c.find(" k") != std::string::npos;  // mid-table
  })) << p.stderr_text();
  ASSERT_TRUE(db.sql().exec("INSERT INTO other VALUES (1, 'streamed meanwhile')"));
  ASSERT_TRUE(logged(p, ".items complete")) << p.stderr_text();
  writer.stop();
  EXPECT_FALSE(writer.failed());
  EXPECT_GT(writer.steps(), 0);
  ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  EXPECT_NE(p.stderr_text().find("incremental snapshot of the table(s) added to `tables`"),
            std::string::npos)
      << p.stderr_text();
  EXPECT_TRUE(pgtest::starts_with(pgtest::checkpoint_of(dir, "inc-added"), "cdc "))
      << pgtest::checkpoint_of(dir, "inc-added");
  EXPECT_EQ(compare_items(db, pg), 0);
  EXPECT_EQ(compare(db.sql(), "SELECT id, v FROM other ORDER BY id", pg.sql(),
                    "SELECT id::text, v FROM other ORDER BY id::bigint"),
            0);
  // The watermark rows are consumed, never delivered.
  EXPECT_EQ(pg.sql().scalar("SELECT count(*) FROM pg_tables WHERE tablename = 'sluice_signals'"),
            "0");
  EXPECT_GT(std::stoi(db.sql().scalar(
                "SELECT count(*) FROM sluice_signals WHERE type = 'snapshot-window-close'")),
            30);
  std::filesystem::remove_all(dir);
}

// ── a table listed again after a run without it ────────────────────────────

// The signal table, `other` (empty) and `b` (`rows` rows of 'seed').
void seed_other_and_b(TestDb& db, int rows) {
  ASSERT_TRUE(db.sql().exec(kSignals));
  ASSERT_TRUE(db.sql().exec("CREATE TABLE other (id INT PRIMARY KEY, v VARCHAR(40))"));
  ASSERT_TRUE(db.sql().exec("CREATE TABLE b (id INT PRIMARY KEY, v VARCHAR(40))"));
  ASSERT_TRUE(
      db.sql().exec("INSERT INTO b SELECT seq, 'seed' FROM seq_1_to_" + std::to_string(rows)));
}

// Runs pipeline `id` with `other` alone (not `b`): it must end well and say that `b` left `tables`.
void run_without_b(const std::filesystem::path& dir, const std::string& id, TestDb& db,
                   pgtest::TestDb& pg) {
  e2e::write_file(dir / "p.yaml", inc_pipeline(id, db, pg, {"other"}).yaml());
  e2e::Process p({"run", "p.yaml", "--idle-exit", "2"}, dir);
  ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  EXPECT_NE(p.stderr_text().find("is no longer in `tables`"), std::string::npos) << p.stderr_text();
}

// The rows of `table` (id, v) that differ between MariaDB and PostgreSQL.
int compare_id_v(TestDb& db, pgtest::TestDb& pg, const std::string& table) {
  return compare(db.sql(), "SELECT id, v FROM " + table + " ORDER BY id", pg.sql(),
                 "SELECT id::text, v FROM " + table + " ORDER BY id::bigint");
}

// The changes a table took while it was not in `tables` were skipped by the stream; listed again,
// it is copied anew (an incremental snapshot), so they reach the destination. Before, its old
// schema history entry made it look captured all along: exit 0, those changes lost for good (and
// an ALTER made meanwhile would have been decoded with the old columns).
TEST(MysqlIncrementalSnapshot, ATableListedAgainAfterARunWithoutItIsCopiedAnew) {
  TestDb db("inc_relisted");
  pgtest::TestDb pg("my_inc_relisted");
  ASSERT_TRUE(pg.ok());
  ASSERT_NO_FATAL_FAILURE(seed_other_and_b(db, 5));
  auto dir = e2e::make_temp_dir("mysql-inc-relisted");
  e2e::write_file(dir / "p.yaml", inc_pipeline("inc-relisted", db, pg, {"other", "b"}).yaml());
  ASSERT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "1"}, dir, 60s), 0);
  // A run without `b`, whose stream passes over changes of `b` (and a column it gained).
  ASSERT_TRUE(db.sql().exec("UPDATE b SET v = 'changed while not listed' WHERE id = 2"));
  ASSERT_TRUE(db.sql().exec("DELETE FROM b WHERE id = 3"));
  ASSERT_TRUE(db.sql().exec("ALTER TABLE b ADD COLUMN w INT NOT NULL DEFAULT 7"));
  ASSERT_TRUE(db.sql().exec("INSERT INTO b VALUES (6, 'inserted while not listed', 8)"));
  ASSERT_TRUE(db.sql().exec("INSERT INTO other VALUES (1, 'streamed')"));
  ASSERT_NO_FATAL_FAILURE(run_without_b(dir, "inc-relisted", db, pg));
  // Listed again: copied anew, then streamed with its new columns.
  e2e::write_file(dir / "p.yaml", inc_pipeline("inc-relisted", db, pg, {"other", "b"}).yaml());
  e2e::Process p({"run", "p.yaml", "--idle-exit", "3"}, dir);
  ASSERT_TRUE(logged(p, ".b complete")) << p.stderr_text();
  ASSERT_TRUE(db.sql().exec("INSERT INTO b VALUES (7, 'streamed after', 9)"));
  ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  EXPECT_NE(p.stderr_text().find("incremental snapshot of the table(s) added to `tables`"),
            std::string::npos)
      << p.stderr_text();
  EXPECT_EQ(compare_id_v(db, pg, "b"), 0);
  EXPECT_EQ(compare_id_v(db, pg, "other"), 0);
  std::filesystem::remove_all(dir);
}

// A run that stops after saving the schema history for a DDL but before its checkpoint moves past
// it leaves an entry ahead of the checkpoint. The next run, without that table, must forget the
// entry: otherwise, listed again after that run, the table looks captured all along (the entry is
// before the new checkpoint), is never copied, and the changes it took while not listed are lost
// with exit 0. The stop is reproduced by putting the checkpoint back where it was before the DDL.
TEST(MysqlIncrementalSnapshot,
     HistoryWrittenAheadOfTheCheckpointDoesNotOutliveATableLeavingTables) {
  TestDb db("inc_ahead");
  pgtest::TestDb pg("my_inc_ahead");
  ASSERT_TRUE(pg.ok());
  ASSERT_NO_FATAL_FAILURE(seed_other_and_b(db, 5));
  auto dir = e2e::make_temp_dir("mysql-inc-ahead");
  const auto store = dir / "state/checkpoints.db";
  e2e::write_file(dir / "p.yaml", inc_pipeline("inc-ahead", db, pg, {"other", "b"}).yaml());
  ASSERT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "1"}, dir, 60s), 0);
  const std::string before_ddl = test::stored_checkpoint(store, "inc-ahead");
  ASSERT_FALSE(before_ddl.empty());
  ASSERT_TRUE(db.sql().exec("ALTER TABLE b ADD COLUMN w INT NULL"));
  ASSERT_TRUE(db.sql().exec("INSERT INTO b VALUES (6, 'after the alter', 1)"));
  ASSERT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "1"}, dir, 60s), 0);
  ASSERT_NE(test::stored_checkpoint(store, "inc-ahead"), before_ddl);
  {  // the history keeps the ALTER's entry; the checkpoint goes back before it
    sqlite3* cp = nullptr;
    ASSERT_EQ(sqlite3_open_v2(store.c_str(), &cp, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK);
    const std::string sql = "UPDATE checkpoints SET position = " + test::sql_literal(before_ddl) +
                            " WHERE pipeline = 'inc-ahead'";
    EXPECT_EQ(sqlite3_exec(cp, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(cp);
  }
  ASSERT_EQ(test::stored_checkpoint(store, "inc-ahead"), before_ddl);
  // A run without `b`, from before the ALTER, whose stream passes over more changes of `b`.
  ASSERT_TRUE(db.sql().exec("UPDATE b SET v = 'changed while not listed' WHERE id = 2"));
  ASSERT_TRUE(db.sql().exec("DELETE FROM b WHERE id = 3"));
  ASSERT_TRUE(db.sql().exec("INSERT INTO b VALUES (7, 'inserted while not listed', 2)"));
  ASSERT_TRUE(db.sql().exec("INSERT INTO other VALUES (1, 'streamed')"));
  ASSERT_NO_FATAL_FAILURE(run_without_b(dir, "inc-ahead", db, pg));
  // Listed again: copied anew.
  e2e::write_file(dir / "p.yaml", inc_pipeline("inc-ahead", db, pg, {"other", "b"}).yaml());
  e2e::Process p({"run", "p.yaml", "--idle-exit", "3"}, dir);
  ASSERT_TRUE(logged(p, ".b complete")) << p.stderr_text();
  ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  EXPECT_EQ(compare_id_v(db, pg, "b"), 0);
  EXPECT_EQ(compare_id_v(db, pg, "other"), 0);
  std::filesystem::remove_all(dir);
}

// The run that adds a table saves its schema history (the table's columns at the stream's start)
// before any checkpoint records the table's pending copy. Stopped in between (here: killed right
// after its first batch reached the destination), it leaves the next run a table with an entry at
// the checkpoint; the history also says its copy is pending, so the next run copies it. Before,
// the table looked captured all along and its rows were never copied (exit 0).
TEST(MysqlIncrementalSnapshot, ATableAddedByARunKilledBeforeItsFirstCheckpointIsCopiedByTheNext) {
  TestDb db("inc_added_killed");
  pgtest::TestDb pg("my_inc_added_killed");
  ASSERT_TRUE(pg.ok());
  ASSERT_NO_FATAL_FAILURE(seed_other_and_b(db, 500));
  auto dir = e2e::make_temp_dir("mysql-inc-added-killed");
  const auto store = dir / "state/checkpoints.db";
  e2e::write_file(dir / "p.yaml", inc_pipeline("inc-added-killed", db, pg, {"other"}).yaml());
  ASSERT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "1"}, dir, 60s), 0);
  const std::string before = test::stored_checkpoint(store, "inc-added-killed");
  ASSERT_FALSE(before.empty());
  e2e::write_file(dir / "p.yaml", inc_pipeline("inc-added-killed", db, pg, {"other", "b"}).yaml());
  {
    test::ArmedFailPoints armed("after_destination_commit=crash");
    e2e::Process p({"run", "p.yaml"}, dir);
    ASSERT_NE(p.wait_for(60s), 0) << p.stderr_text();
    EXPECT_NE(p.stderr_text().find("after_destination_commit"), std::string::npos)
        << p.stderr_text();
  }
  ASSERT_EQ(test::stored_checkpoint(store, "inc-added-killed"), before);
  ASSERT_TRUE(db.sql().exec("UPDATE b SET v = 'changed after the kill' WHERE id = 450"));
  e2e::Process p({"run", "p.yaml", "--idle-exit", "3"}, dir);
  ASSERT_TRUE(logged(p, ".b complete")) << p.stderr_text();
  ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  EXPECT_EQ(compare_id_v(db, pg, "b"), 0);
  std::filesystem::remove_all(dir);
}

// ── rows far larger than the ones before them ──────────────────────────────

// 40 rows of 100 bytes, then 20 of 512 KiB: the first chunk and the limits sized from it see only
// small rows, so the chunk that reaches the large ones would hold up to `snapshot.chunk_size` of
// them (10 MiB here) unless the read stops at the batch's bytes.
TEST(MysqlIncrementalSnapshot, LargeRowsAfterSmallOnesKeepEachChunkWithinTheBatchBytes) {
  TestDb db("inc_large");
  pgtest::TestDb pg("my_inc_large");
  ASSERT_TRUE(pg.ok());
  ASSERT_TRUE(db.sql().exec(kSignals));
  ASSERT_TRUE(db.sql().exec("CREATE TABLE other (id INT PRIMARY KEY, v VARCHAR(40))"));
  ASSERT_TRUE(db.sql().exec("CREATE TABLE blobs (id INT PRIMARY KEY, b LONGBLOB)"));
  ASSERT_TRUE(db.sql().exec("INSERT INTO blobs SELECT seq, REPEAT('s', 100) FROM seq_1_to_40"));
  ASSERT_TRUE(db.sql().exec(
      "INSERT INTO blobs SELECT seq, REPEAT(CHAR(65 + seq % 26), 524288) FROM seq_41_to_60"));
  auto dir = e2e::make_temp_dir("mysql-inc-large");
  e2e::write_file(dir / "p.yaml", inc_pipeline("inc-large", db, pg, {"other"}).yaml());
  ASSERT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "1"}, dir, 60s), 0);
  constexpr int64_t kMaxBytes = 2 << 20;
  test::PipelineFile f = inc_pipeline("inc-large", db, pg, {"other", "blobs"});
  f.pipeline("inc-large").batch.set("max_bytes", uint64_t(kMaxBytes));
  e2e::write_file(dir / "p.yaml", f.yaml());
  e2e::Process p({"run", "p.yaml", "--idle-exit", "2", "--log-level", "debug"}, dir);
  ASSERT_EQ(p.wait_for(120s), 0) << p.stderr_text();
  // 60 rows; 20 rows of 512 KiB at most 4 per chunk; each chunk within the batch's bytes and
  // at most the one row that reached them.
  pgtest::expect_incremental_chunks_within(p.stderr_text(), ".blobs", kMaxBytes, 600 << 10, 60, 6);
  EXPECT_EQ(compare(db.sql(), "SELECT id, MD5(b) FROM blobs ORDER BY id", pg.sql(),
                    "SELECT id::text, md5(b) FROM blobs ORDER BY id::bigint"),
            0);
  std::filesystem::remove_all(dir);
}

// ── kill -9 in the middle of the table ─────────────────────────────────────

TEST(MysqlIncrementalSnapshot, KillNineMidTableThenResumeConverges) {
  TestDb db("inc_kill");
  pgtest::TestDb pg("my_inc_kill");
  ASSERT_TRUE(pg.ok());
  seed_items(db);
  auto dir = e2e::make_temp_dir("mysql-inc-kill");
  e2e::write_file(dir / "p.yaml", inc_pipeline("inc-kill", db, pg, {"other"}).yaml());
  ASSERT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "1"}, dir, 60s), 0);
  e2e::write_file(dir / "p.yaml", inc_pipeline("inc-kill", db, pg, {"other", "items"}).yaml());
  StepWriter writer(db.url(), items_step);
  {
    e2e::Process p({"run", "p.yaml"}, dir);
    ASSERT_TRUE(pgtest::wait_for_checkpoint(p, dir, "inc-kill", [](const std::string& c) {
      return c.find(" isnap 1 ") != std::string::npos && c.find(" k") != std::string::npos;
    })) << p.stderr_text();
    p.signal(SIGKILL);
    EXPECT_EQ(p.wait(), 128 + SIGKILL);
  }
  const std::string at_kill = pgtest::checkpoint_of(dir, "inc-kill");
  ASSERT_NE(at_kill.find(" isnap 1 "), std::string::npos) << at_kill;
  writer.stop();
  EXPECT_FALSE(writer.failed());
  // Changes while sluice is down, to rows copied and not yet copied.
  ASSERT_TRUE(db.sql().exec("UPDATE items SET note = 'down' WHERE id % 97 = 0"));
  ASSERT_TRUE(db.sql().exec("DELETE FROM items WHERE id % 89 = 0"));
  StepWriter writer2(db.url(), [](uint64_t i) { return items_step(i + 50000); });
  e2e::Process p2({"run", "p.yaml", "--idle-exit", "2"}, dir);
  ASSERT_TRUE(logged(p2, ".items complete")) << p2.stderr_text();
  writer2.stop();
  EXPECT_FALSE(writer2.failed());
  ASSERT_EQ(p2.wait_for(60s), 0) << p2.stderr_text();
  EXPECT_NE(p2.stderr_text().find("incremental snapshot pending: "), std::string::npos)
      << p2.stderr_text();
  EXPECT_EQ(compare_items(db, pg), 0);
  std::filesystem::remove_all(dir);
}

// ── signals: `sluice snapshot` and a row written by hand; non-integer keys ──

TEST(MysqlIncrementalSnapshot, SnapshotCommandAndASignalRowCopyCompositeAndDecimalKeyedTables) {
  TestDb db("inc_signal");
  pgtest::TestDb pg("my_inc_signal");
  ASSERT_TRUE(pg.ok());
  ASSERT_TRUE(db.sql().exec(kSignals));
  ASSERT_TRUE(db.sql().exec(
      "CREATE TABLE pairs (region VARCHAR(8), day DATE, v INT NOT NULL, PRIMARY KEY (region, "
      "day))"));
  ASSERT_TRUE(db.sql().exec(
      "INSERT INTO pairs SELECT CONCAT('r', seq % 7), '2020-01-01' + INTERVAL seq DAY, seq FROM "
      "seq_1_to_1500"));
  ASSERT_TRUE(db.sql().exec("CREATE TABLE prices (amount DECIMAL(9,2) PRIMARY KEY, label TEXT)"));
  ASSERT_TRUE(
      db.sql().exec("INSERT INTO prices SELECT seq / 4, CONCAT('p', seq) FROM seq_1_to_400"));
  auto dir = e2e::make_temp_dir("mysql-inc-signal");
  test::PipelineFile f = inc_pipeline("inc-signal", db, pg, {"pairs", "prices"});
  f.pipeline("inc-signal").source_.set("snapshot.mode", "never");  // rows only come by signal
  e2e::write_file(dir / "p.yaml", f.yaml());
  // Bad input: a table the pipeline does not capture is a one-line usage error.
  EXPECT_EQ(e2e::run_sluice({"snapshot", "p.yaml", "inc-signal", "nope"}, dir), 2);
  e2e::Process p({"run", "p.yaml", "--idle-exit", "3"}, dir);
  ASSERT_TRUE(pgtest::wait_for_checkpoint(p, dir, "inc-signal", [](const std::string& c) {
    return c.starts_with("cdc ");
  })) << p.stderr_text();
  StepWriter writer(db.url(), [](uint64_t i) {
    const std::string day = "'2020-01-01' + INTERVAL " + std::to_string(i % 1500 + 1) + " DAY";
    const std::string gone =
        "'2020-01-01' + INTERVAL " + std::to_string((i * 13) % 1500 + 1) + " DAY";
    return "BEGIN; UPDATE pairs SET v = -v WHERE day = " + day +
           "; DELETE FROM pairs WHERE day = " + gone +
           "; INSERT INTO pairs VALUES ('w', '2100-01-01' + INTERVAL " + std::to_string(i) +
           " DAY, " + std::to_string(i) + "); UPDATE prices SET label = 'u" + std::to_string(i) +
           "' WHERE amount = " + std::to_string(i % 400 + 1) + " / 4; COMMIT";
  });
  ASSERT_EQ(e2e::run_sluice({"snapshot", "p.yaml", "inc-signal", "pairs"}, dir), 0);
  ASSERT_TRUE(db.sql().exec(
      "INSERT INTO sluice_signals VALUES ('by-hand-1', 'execute-snapshot', '{\"data-collections\": "
      "[\"" +
      db.name() + ".prices\"], \"type\": \"incremental\"}')"));
  ASSERT_TRUE(logged(p, ".pairs complete")) << p.stderr_text();
  ASSERT_TRUE(logged(p, ".prices complete")) << p.stderr_text();
  writer.stop();
  EXPECT_FALSE(writer.failed());
  ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  EXPECT_EQ(compare(db.sql(),
                    "SELECT region, DATE_FORMAT(day, '%Y-%m-%d'), v FROM pairs ORDER BY region, "
                    "day",
                    pg.sql(),
                    "SELECT region, to_char(day, 'YYYY-MM-DD'), v::text FROM pairs ORDER BY "
                    "region COLLATE \"C\", day"),
            0);
  EXPECT_EQ(compare(db.sql(), "SELECT amount, label FROM prices ORDER BY amount", pg.sql(),
                    "SELECT amount::text, label FROM prices ORDER BY amount::numeric"),
            0);
  std::filesystem::remove_all(dir);
}

// ── the signal table missing, not writable, or not set ─────────────────────

TEST(MysqlIncrementalSnapshot, AMissingUnwritableOrUnsetSignalTableIsAOneLineErrorNamingTheFix) {
  TestDb db("inc_errors");
  pgtest::TestDb pg("my_inc_errors");
  ASSERT_TRUE(pg.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE a (id INT PRIMARY KEY)"));
  ASSERT_TRUE(db.sql().exec("CREATE TABLE b (id INT PRIMARY KEY)"));
  auto dir = e2e::make_temp_dir("mysql-inc-errors");
  // The one line of `text` that holds `needle` (empty when none): the rest of the fix must be on
  // it.
  auto line_with = [](const std::string& text, const std::string& needle) {
    const size_t at = text.find(needle);
    if (at == std::string::npos) return std::string();
    const size_t begin = text.rfind('\n', at);
    const size_t end = text.find('\n', at);
    return text.substr(begin == std::string::npos ? 0 : begin + 1,
                       (end == std::string::npos ? text.size() : end) -
                           (begin == std::string::npos ? 0 : begin + 1));
  };
  {  // missing: the CREATE TABLE to run
    e2e::write_file(dir / "p.yaml", inc_pipeline("inc-errors", db, pg, {"a"}).yaml());
    e2e::Process p({"run", "p.yaml", "--idle-exit", "1"}, dir);
    EXPECT_NE(p.wait_for(60s), 0);
    const std::string line = line_with(p.stderr_text(), "(setting 'signal.table') does not exist");
    EXPECT_FALSE(line.empty()) << p.stderr_text();
    EXPECT_NE(line.find("CREATE TABLE `" + db.name() + "`.`sluice_signals` (id VARCHAR(42)"),
              std::string::npos)
        << p.stderr_text();
    // and `sluice snapshot` says the same, exit 1 (the server's state, not the usage)
    EXPECT_EQ(e2e::run_sluice({"snapshot", "p.yaml", "inc-errors", "a"}, dir), 1);
  }
  ASSERT_TRUE(db.sql().exec(kSignals));
  {  // not writable: the GRANT to run
    const std::string url =
        db.user_url("noins", {"GRANT SELECT ON {db}.* TO {user}",
                              "GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO {user}"});
    test::PipelineFile f = inc_pipeline("inc-errors", db, pg, {"a"});
    f.pipeline("inc-errors").source_.set("url", url);
    e2e::write_file(dir / "p.yaml", f.yaml());
    e2e::Process p({"run", "p.yaml", "--idle-exit", "1"}, dir);
    EXPECT_NE(p.wait_for(60s), 0);
    const std::string line = line_with(p.stderr_text(), "cannot write the signal table");
    EXPECT_FALSE(line.empty()) << p.stderr_text();
    EXPECT_NE(line.find("GRANT INSERT ON `" + db.name() + "`.`sluice_signals`"), std::string::npos)
        << p.stderr_text();
  }
  {  // not set: a table added on restart needs it; `sluice snapshot` too (usage: exit 2)
    e2e::write_file(dir / "p.yaml", inc_pipeline("inc-unset", db, pg, {"a"}, false).yaml());
    ASSERT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "1"}, dir, 60s), 0);
    EXPECT_EQ(e2e::run_sluice({"snapshot", "p.yaml", "inc-unset", "a"}, dir), 2);
    e2e::write_file(dir / "p.yaml", inc_pipeline("inc-unset", db, pg, {"a", "b"}, false).yaml());
    e2e::Process p({"run", "p.yaml", "--idle-exit", "1"}, dir);
    EXPECT_NE(p.wait_for(60s), 0);
    const std::string line = line_with(p.stderr_text(), ".b added to `tables`");
    EXPECT_FALSE(line.empty()) << p.stderr_text();
    EXPECT_NE(line.find("Set `signal.table`"), std::string::npos) << p.stderr_text();
  }
  std::filesystem::remove_all(dir);
}

// ── a column whose old rows read what only the server knows ────────────────

// ADD COLUMN … DEFAULT (RAND()) gives every existing row its own value, which the binlog never
// carries (only the ALTER statement): with a signal table the table is read again while the stream
// flows, so the destination ends equal to the source; without one the clear stop names it.
TEST(MysqlIncrementalSnapshot, AnExpressionDefaultMakesTheTableReadAgain) {
  TestDb db("inc_rand");
  pgtest::TestDb pg("my_inc_rand");
  ASSERT_TRUE(pg.ok());
  seed_items(db);
  auto dir = e2e::make_temp_dir("mysql-inc-rand");
  e2e::write_file(dir / "p.yaml", inc_pipeline("inc-rand", db, pg, {"other", "items"}).yaml());
  ASSERT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "1"}, dir, 60s), 0);
  ASSERT_TRUE(db.sql().exec("ALTER TABLE items ADD COLUMN r DOUBLE DEFAULT (RAND())"));
  ASSERT_TRUE(db.sql().exec("UPDATE items SET v = v + 1 WHERE id <= 10"));
  e2e::Process p({"run", "p.yaml", "--idle-exit", "2"}, dir);
  ASSERT_TRUE(logged(p, ".items complete")) << p.stderr_text();
  ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  EXPECT_NE(p.stderr_text().find("reading the table again"), std::string::npos) << p.stderr_text();
  EXPECT_EQ(compare(db.sql(), "SELECT id, v, note, r FROM items ORDER BY id", pg.sql(),
                    "SELECT id::text, v::text, note, r::text FROM items ORDER BY id::bigint"),
            0);
  EXPECT_EQ(pg.sql().scalar("SELECT count(*) FROM items WHERE r IS NULL"), "0");
  std::filesystem::remove_all(dir);

  // Without a signal table: the stop, naming the setting.
  TestDb db2("inc_rand_nosig");
  pgtest::TestDb pg2("my_inc_rand_nosig");
  ASSERT_TRUE(pg2.ok());
  seed_items(db2);
  auto dir2 = e2e::make_temp_dir("mysql-inc-rand-nosig");
  e2e::write_file(dir2 / "p.yaml",
                  inc_pipeline("inc-rand2", db2, pg2, {"other", "items"}, false).yaml());
  ASSERT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "1"}, dir2, 60s), 0);
  ASSERT_TRUE(db2.sql().exec("ALTER TABLE items ADD COLUMN r DOUBLE DEFAULT (RAND())"));
  e2e::Process p2({"run", "p.yaml", "--idle-exit", "2"}, dir2);
  EXPECT_NE(p2.wait_for(60s), 0);
  EXPECT_NE(p2.stderr_text().find("server computes"), std::string::npos) << p2.stderr_text();
  EXPECT_NE(p2.stderr_text().find("signal.table"), std::string::npos) << p2.stderr_text();
  std::filesystem::remove_all(dir2);
}

}  // namespace
}  // namespace sluice::mytest
