// End to end through the binary: generator → SQLite, verified row by row against the generator's
// deterministic data; kill -9 mid-run then resume; an update/delete mix; graceful SIGTERM.
#include <gtest/gtest.h>

#include <algorithm>
#include <initializer_list>
#include <map>

#include "connectors/generator/employees.h"
#include "e2e/harness.h"
#include "sluice/value.h"
#include "support/pipeline_file.h"
#include "support/sqlite.h"

namespace sluice::e2e {
namespace {

using namespace std::chrono_literals;

std::string pipeline_yaml(int64_t count, const std::string& operations, double rate = 0,
                          bool checkpoint_in_destination = false) {
  test::PipelineFile f;
  test::ConnectorYaml& src =
      f.pipeline("gen-to-sqlite").source("generator").set("count", count).set("rate", rate);
  src.set("seed", 7);
  if (!operations.empty())
    src.set("operations", test::Yaml::raw(operations));  // a flow map as written
  test::ConnectorYaml& dst =
      f.pipeline("gen-to-sqlite").destination("sqlite").set("path", "out.db");
  dst.set("table", "employees");
  if (checkpoint_in_destination) dst.set("checkpoint_in_destination", true);
  return f.yaml();
}

// Expected final table: id -> event index of the row's latest version; deleted ids absent.
std::map<int64_t, uint64_t> expected_state(int64_t count, double c, double u, double d) {
  generator::EventPlanner planner(7, c, u, d);
  std::map<int64_t, uint64_t> rows;
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t index = planner.events();
    auto ev = planner.next();
    if (ev.op == generator::GenOp::remove) rows.erase(ev.id);
    else rows[ev.id] = index;
  }
  return rows;
}

// Compares the whole table with the expected rows, value by value. Returns the number of
// mismatches.
int verify_table(const std::filesystem::path& db_path,
                 const std::map<int64_t, uint64_t>& expected) {
  Db db(db_path);
  int bad = 0;
  auto it = expected.begin();
  int64_t rows = 0;
  bool ok = db.query(
      "SELECT id, name, email, full_time, position, hire_date, salary, updated_at, created_at "
      "FROM \"employees\" ORDER BY id",
      [&](sqlite3_stmt* st) {
        ++rows;
        const int64_t id = sqlite3_column_int64(st, 0);
        if (it == expected.end() || it->first != id) {
          if (bad++ < 5) ADD_FAILURE() << "unexpected row id " << id;
          while (it != expected.end() && it->first < id) ++it;
          if (it != expected.end() && it->first == id) ++it;
          return;
        }
        const auto row = generator::employee_row(7, id, it->second);
        ++it;
        const std::string got = column_text(st, 1) + "|" + column_text(st, 2) + "|" +
                                std::to_string(sqlite3_column_int64(st, 3)) + "|" +
                                column_text(st, 4) + "|" + column_text(st, 5) + "|" +
                                std::to_string(sqlite3_column_double(st, 6)) + "|" +
                                column_text(st, 7) + "|" + column_text(st, 8);
        const std::string want =
            row.name() + "|" + row.email() + "|" + (row.full_time ? "1" : "0") + "|" +
            std::string(row.position) + "|" + format_date(row.hire_date) + "|" +
            std::to_string(row.salary) + "|" + format_timestamptz(row.updated_at) + "|" +
            format_timestamptz(row.created_at);
        if (got != want && bad++ < 5)
          ADD_FAILURE() << "row " << id << ":\n got  " << got << "\n want " << want;
      });
  EXPECT_TRUE(ok) << "query failed";
  if (rows != int64_t(expected.size())) {
    ADD_FAILURE() << "table has " << rows << " rows, expected " << expected.size();
    ++bad;
  }
  return bad;
}

std::string checkpoint(const std::filesystem::path& dir) {
  if (!std::filesystem::exists(dir / "state/checkpoints.db")) return "";
  Db db(dir / "state/checkpoints.db");
  return db.text("SELECT CAST(position AS TEXT) FROM checkpoints WHERE pipeline = 'gen-to-sqlite'");
}

// Waits until the running pipeline checkpointed at least `at_least`; false on timeout or exit.
bool wait_for_checkpoint(Process& p, const std::filesystem::path& dir, int64_t at_least) {
  for (int i = 0; i < 6000; ++i) {
    const std::string cp = checkpoint(dir);
    if (!cp.empty() && std::stoll(cp) >= at_least) return true;
    if (p.wait_for(10ms) >= 0) return false;
  }
  return false;
}

TEST(GeneratorToSqlite, MillionRowsVerifiedRowByRow) {
  auto dir = make_temp_dir("million");
  write_file(dir / "p.yaml", pipeline_yaml(1000000, ""));
  Process p({"run", "p.yaml"}, dir);
  ASSERT_EQ(p.wait_for(300s), 0) << p.stderr_text();
  EXPECT_NE(p.stderr_text().find("1,000,000 written"), std::string::npos) << p.stderr_text();
  EXPECT_EQ(checkpoint(dir), "1000000");
  EXPECT_EQ(verify_table(dir / "out.db", expected_state(1000000, 1, 0, 0)), 0);
  std::filesystem::remove_all(dir);
}

TEST(GeneratorToSqlite, KillNineMidRunThenResumeLosesAndDuplicatesNothing) {
  auto dir = make_temp_dir("kill9");
  write_file(dir / "p.yaml", pipeline_yaml(1000000, ""));
  {
    Process p({"run", "p.yaml"}, dir);
    ASSERT_TRUE(wait_for_checkpoint(p, dir, 150000))
        << "no checkpoint before exit: " << p.stderr_text();
    p.signal(SIGKILL);
    EXPECT_EQ(p.wait(), 128 + SIGKILL);
  }
  const std::string at_kill = checkpoint(dir);
  ASSERT_LT(std::stoll(at_kill), 1000000) << "killed too late to test a resume";
  {
    Db db(dir / "out.db");
    // Rows beyond the checkpoint may already be there (written, not yet checkpointed): they are
    // replayed and upserted, never duplicated.
    EXPECT_GE(db.scalar("SELECT count(*) FROM employees"), std::stoll(at_kill));
  }
  Process p2({"run", "p.yaml"}, dir);
  ASSERT_EQ(p2.wait_for(300s), 0) << p2.stderr_text();
  EXPECT_NE(p2.stderr_text().find("resuming from checkpoint"), std::string::npos);
  EXPECT_EQ(checkpoint(dir), "1000000");
  EXPECT_EQ(verify_table(dir / "out.db", expected_state(1000000, 1, 0, 0)), 0);
  std::filesystem::remove_all(dir);
}

// checkpoint_in_destination: the position commits with the rows, so even with the checkpoint
// store lost the resume starts exactly after the last batch applied.
TEST(GeneratorToSqlite, CrashThenLostCheckpointStoreResumesFromTheDestinationsPosition) {
  auto dir = make_temp_dir("cid");
  write_file(dir / "p.yaml", pipeline_yaml(50000, "", 20000, /*checkpoint_in_destination=*/true));
  {
    Process p({"run", "p.yaml"}, dir);
    ASSERT_TRUE(wait_for_checkpoint(p, dir, 5000))
        << "no checkpoint before exit: " << p.stderr_text();
    p.signal(SIGKILL);
    EXPECT_EQ(p.wait(), 128 + SIGKILL);
  }
  const std::string in_store = checkpoint(dir);
  std::string in_dest;
  {
    Db db(dir / "out.db");
    in_dest = db.text(
        "SELECT CAST(position AS TEXT) FROM sluice_checkpoints WHERE pipeline = 'gen-to-sqlite'");
    ASSERT_FALSE(in_dest.empty());
    // The destination commits a position before the store saves it, and its rows are exactly
    // those up to it.
    EXPECT_GE(std::stoll(in_dest), std::stoll(in_store));
    EXPECT_EQ(db.scalar("SELECT count(*) FROM employees"), std::stoll(in_dest));
  }
  ASSERT_LT(std::stoll(in_dest), 50000) << "killed too late to test a resume";
  std::filesystem::remove(dir / "state/checkpoints.db");
  std::filesystem::remove(dir / "state/checkpoints.db-wal");
  std::filesystem::remove(dir / "state/checkpoints.db-shm");
  ASSERT_EQ(checkpoint(dir), "");

  Process p2({"run", "p.yaml"}, dir);
  ASSERT_EQ(p2.wait_for(300s), 0) << p2.stderr_text();
  const std::string log = p2.stderr_text();
  EXPECT_NE(log.find("resuming from checkpoint (position stored in the destination)"),
            std::string::npos)
      << log;
  EXPECT_EQ(checkpoint(dir), "50000");
  {
    Db db(dir / "out.db");
    EXPECT_EQ(
        db.text(
            "SELECT CAST(position AS TEXT) FROM sluice_checkpoints WHERE pipeline = 'gen-to-sqlite'"),
        "50000");
  }
  EXPECT_EQ(verify_table(dir / "out.db", expected_state(50000, 1, 0, 0)), 0);
  std::filesystem::remove_all(dir);
}

TEST(GeneratorToSqlite, UpdateDeleteMixEndsInExactlyTheExpectedTable) {
  auto dir = make_temp_dir("mix");
  write_file(dir / "p.yaml", pipeline_yaml(300000, "{create: 0.6, update: 0.3, delete: 0.1}"));
  {
    // Crash once in the middle as well: replaying updates and deletes must converge too.
    Process p({"run", "p.yaml"}, dir);
    ASSERT_TRUE(wait_for_checkpoint(p, dir, 50000)) << p.stderr_text();
    p.signal(SIGKILL);
    p.wait();
  }
  ASSERT_LT(std::stoll(checkpoint(dir)), 300000);
  ASSERT_EQ(run_sluice({"run", "p.yaml"}, dir), 0) << read_file(dir / "stderr.txt");
  const auto expected = expected_state(300000, 0.6, 0.3, 0.1);
  EXPECT_LT(expected.size(), 300000u * 6 / 10);  // deletes happened
  EXPECT_EQ(verify_table(dir / "out.db", expected), 0);
  std::filesystem::remove_all(dir);
}

// Runs an unlimited generator → SQLite pipeline (20k/s) until it has checkpointed 5,000 rows,
// sends `signals` back to back, and expects a drain: exit 0, and exactly the rows the checkpoint
// covers in the table (everything read was written). `stderr_text` gets sluice's stderr.
void expect_drain_after(const char* name, std::initializer_list<int> signals,
                        std::string* stderr_text) {
  auto dir = make_temp_dir(name);
  write_file(dir / "p.yaml", pipeline_yaml(0, "", 20000));
  Process p({"run", "p.yaml"}, dir);
  ASSERT_TRUE(wait_for_checkpoint(p, dir, 5000)) << p.stderr_text();
  for (int sig : signals) p.signal(sig);
  ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  *stderr_text = p.stderr_text();
  Db db(dir / "out.db");
  EXPECT_EQ(db.scalar("SELECT count(*) FROM employees"), std::stoll(checkpoint(dir)));
  std::filesystem::remove_all(dir);
}

TEST(GeneratorToSqlite, SigtermDrainsCheckpointsAndExitsZero) {
  std::string err;
  ASSERT_NO_FATAL_FAILURE(expect_drain_after("sigterm", {SIGTERM}, &err));
  EXPECT_NE(err.find("stopped"), std::string::npos) << err;
}

// timeout(1) sends its signal to the process and then to its process group: the same SIGINT twice
// within microseconds is one request to drain, not an operator's second Ctrl-C asking to abort.
TEST(GeneratorToSqlite, TheSameSignalTwiceAtOnceStillDrainsAndExitsZero) {
  std::string err;
  ASSERT_NO_FATAL_FAILURE(expect_drain_after("sigint-twice", {SIGINT, SIGINT}, &err));
  EXPECT_EQ(err.find("aborting"), std::string::npos) << err;
}

TEST(Cli, BadConfigIsOneLineWithLocationAndExitTwo) {
  auto dir = make_temp_dir("badcfg");
  write_file(
      dir / "bad.yaml",
      "version: 1\npipelines:\n  - id: x\n    source: {connector: generator, settings: {count: ten}}\n"
      "    destination: {connector: discard}\n");
  Process p({"validate", "bad.yaml"}, dir);
  EXPECT_EQ(p.wait_for(30s), 2);
  const std::string err = p.stderr_text();
  EXPECT_NE(err.find("bad.yaml:4:"), std::string::npos) << err;
  EXPECT_NE(err.find("count"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;

  write_file(
      dir / "unknown.yaml",
      "version: 1\npipelines:\n  - id: x\n    source: {connector: nosuch}\n    destination: {connector: discard}\n");
  Process p2({"run", "unknown.yaml"}, dir);
  EXPECT_EQ(p2.wait_for(30s), 2);
  EXPECT_NE(p2.stderr_text().find("nosuch"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(Cli, IdleExitStopsAFollowingPipelineOnceEverythingIsAcknowledged) {
  auto dir = make_temp_dir("idle");
  write_file(dir / "in.jsonl", "");
  test::PipelineFile f;
  f.checkpoints_path = "cp.db";
  f.pipeline("tail").source("file").set("path", "in.jsonl").set("follow", true);
  f.pipeline("tail").destination("discard");
  f.write(dir / "p.yaml");
  Process p({"run", "p.yaml", "--idle-exit", "1"}, dir);
  EXPECT_EQ(p.wait_for(30s), 0) << p.stderr_text();
  std::filesystem::remove_all(dir);
}

// A spooled pipeline holds batches on both sides of the spool, so unless the file sets
// batch.max_records its batches are at most 2,500 records (the spool's sequence numbers count
// them); a max_records the file sets is kept.
TEST(GeneratorToSqlite, ASpooledPipelineBatchesAtMost2500RecordsUnlessTheFileSaysOtherwise) {
  for (const bool set : {false, true}) {
    auto dir = make_temp_dir("spool-batch");
    test::PipelineFile f;
    test::PipelineYaml& p = f.pipeline("gen");
    p.source("generator").set("count", 12000);  // 5 batches of at most 2,500, or 2 of 10,000
    p.destination("sqlite").set("path", "out.db");
    if (set) p.max_records(10000);
    p.extra.set("spool", test::Yaml::map({{"type", "disk"}, {"path", "spool"}}));
    f.write(dir / "p.yaml");
    Process run({"run", "p.yaml", "--idle-exit", "1"}, dir);
    ASSERT_EQ(run.wait_for(60s), 0) << run.stderr_text();
    EXPECT_EQ(test::stored_checkpoint(dir / "state/checkpoints.db", "gen/spool/destination"),
              set ? "spool:2" : "spool:5")
        << "batch.max_records " << (set ? "set" : "not set");
    std::filesystem::remove_all(dir);
  }
}

}  // namespace
}  // namespace sluice::e2e
