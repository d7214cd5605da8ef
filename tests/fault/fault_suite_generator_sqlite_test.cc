// Fault suite, generator → SQLite: the generator's deterministic changes (creates, updates,
// deletes) written once without a fault (the reference) and once under faults; both files must
// hold the same rows (canonical checksums). Faults: kill -9 at seeded random moments, the
// checkpoint store's disk full and the destination's disk full (each a small tmpfs the test
// mounts; root only, as in CI). A full disk must end in a clear error and a non-zero exit or in a
// recovery once space is back, never in a silent loss.
#include <iostream>

#include "fault/fault_suite.h"
#include "support/sqlite.h"

namespace sluice::test::fault {
namespace {

constexpr const char* kTable = "employees";
// Enough events for every kill of the run to land before the generator's end (about 0.6 s of
// 1,000 events per second per kill).
int64_t event_count() { return fault_soak() ? 100000 : 20000; }

const std::vector<FaultColumn>& employee_columns() {
  using K = FaultColumn::Kind;
  static const std::vector<FaultColumn> cols = {
      {"id", K::integer},           {"name", K::text},
      {"email", K::text},           {"full_time", K::boolean},
      {"position", K::text},        {"hire_date", K::date},
      {"salary", K::decimal},       {"updated_at", K::timestamp},
      {"created_at", K::timestamp},
  };
  return cols;
}

class GeneratorToSqlite : public ::testing::Test {
 protected:
  // p.yaml in `dir`: generator (event_count() events, `rate` per second) → SQLite at `out`,
  // checkpoints at `checkpoints`.
  void write_pipeline(const std::filesystem::path& dir, const std::filesystem::path& out,
                      const std::filesystem::path& checkpoints, int rate) {
    PipelineFile f;
    f.checkpoints_path = checkpoints.string();
    PipelineYaml& p = f.pipeline("gen");
    p.source("generator")
        .set("count", event_count())
        .set("seed", int64_t(seed_ % 1000000))
        .set("rate", rate)
        .set("operations", Yaml::map({{"create", 0.6}, {"update", 0.3}, {"delete", 0.1}}));
    p.destination("sqlite").set("path", out.string());
    p.max_records(500).linger_ms(20);
    f.write(dir / "p.yaml");
  }
  void SetUp() override {
    std::filesystem::create_directories(ref_.path());
    write_pipeline(ref_.path(), ref_ / "ref.db", ref_ / "ref-checkpoints.db", 0);
    ASSERT_EQ(run_sluice({"run", "p.yaml", "--idle-exit", "1"}, ref_.path(), 120s), 0)
        << read_file(ref_ / "stderr.txt");
  }
  Checker checker(const std::filesystem::path& out) {
    return images_checker(
        [this] { return read_sqlite_image(ref_ / "ref.db", kTable, employee_columns()); },
        [out] { return read_sqlite_image(out, kTable, employee_columns()); },
        [this] { return sqlite_fingerprint(ref_ / "ref.db", kTable); },
        [out] { return sqlite_fingerprint(out, kTable); });
  }
  // Runs to the end of the events (the generator stops) and compares with the reference.
  void finish_and_record(const std::filesystem::path& dir, const std::filesystem::path& out,
                         FaultResult r) {
    const auto t0 = Clock::now();
    const int rc = run_sluice({"run", "p.yaml", "--idle-exit", "1"}, dir, 110s);
    EXPECT_EQ(rc, 0) << read_file(dir / "stderr.txt");
    r.recovery_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    const Check c = checker(out)();
    EXPECT_EQ(c.problem, "") << "after " << r.fault << " (seed " << seed_ << ")";
    r.rows_verified = c.verified;
    r.lost = c.lost;
    r.duplicated = c.duplicated;
    record_fault_result(r);
  }
  // Fills `fs` while sluice runs in `dir`, holds it full for 3 s, frees it: sluice must either
  // go on (and finish exactly) or stop with an error line and a non-zero exit (then a restart
  // finishes exactly).
  void disk_full(const std::string& fault, SmallTmpfs& fs, const std::filesystem::path& dir,
                 const std::filesystem::path& out, const std::filesystem::path& checkpoints) {
    Process p({"run", "p.yaml"}, dir);
    ASSERT_TRUE(wait_until([&] { return !stored_checkpoint(checkpoints, "gen").empty(); }, 30s))
        << p.stderr_text();
    fs.fill();
    int rc = p.wait_for(3s);
    fs.free_space();
    FaultResult r{"generator->sqlite", fault, 1, 1, 0, 0, 0, 0, seed_};
    if (rc == -1) {
      // Space is back: sluice must go on by itself (its checkpoint advances).
      const std::string at_free = stored_checkpoint(checkpoints, "gen");
      const bool advanced = wait_until(
          [&] { return !p.running() || stored_checkpoint(checkpoints, "gen") != at_free; }, 20s);
      rc = p.wait_for(0ms);
      if (rc == -1) {
        EXPECT_TRUE(advanced) << "no progress once space was back:\n" << p.stderr_text();
        std::cout << fault << ": sluice kept running and went on once space was back\n";
        p.terminate();
        EXPECT_EQ(p.wait_for(60s), 0) << p.stderr_text();
      }
    }
    if (rc != -1) {
      EXPECT_NE(rc, 0) << "sluice exited 0 on a full disk:\n" << p.stderr_text();
      bool error_line = false;
      for (const auto& l : lines_of(p.stderr_text()))
        error_line = error_line || is_error_log_line(l);
      EXPECT_TRUE(error_line) << "no error line for the full disk:\n" << p.stderr_text();
      std::cout << fault << ": sluice stopped with exit " << rc << "\n";
    }
    finish_and_record(dir, out, r);
  }

  uint64_t seed_ = case_seed();
  TempDir ref_{"fault-gen-ref"};
  TempDir dir_{"fault-gen"};
};

TEST_F(GeneratorToSqlite, KillNineAtRandomMoments) {
  // 1,000 events per second: the kills land all along the events.
  write_pipeline(dir_.path(), dir_ / "out.db", dir_ / "state" / "checkpoints.db", 1000);
  std::mt19937_64 rng(seed_);
  const int kills = kill_loop(dir_.path(), kill_count(), rng);
  EXPECT_EQ(kills, kill_count());
  finish_and_record(dir_.path(), dir_ / "out.db",
                    {"generator->sqlite", "kill -9", kills, kills, 0, 0, 0, 0, seed_});
}

TEST_F(GeneratorToSqlite, CheckpointStoreDiskFull) {
  // 8 MiB: room for the checkpoint store and its WAL (auto-checkpointed at about 4 MiB).
  SmallTmpfs fs(dir_ / "state", "8m");
  if (!fs.mounted())
    GTEST_SKIP() << "needs root to mount a small tmpfs for the checkpoint store (CI runs as root)";
  write_pipeline(dir_.path(), dir_ / "out.db", dir_ / "state" / "checkpoints.db", 4000);
  disk_full("checkpoint store disk full", fs, dir_.path(), dir_ / "out.db",
            dir_ / "state" / "checkpoints.db");
}

TEST_F(GeneratorToSqlite, DestinationDiskFull) {
  SmallTmpfs fs(dir_ / "dest", "16m");
  if (!fs.mounted())
    GTEST_SKIP() << "needs root to mount a small tmpfs for the destination (CI runs as root)";
  write_pipeline(dir_.path(), dir_ / "dest" / "out.db", dir_ / "state" / "checkpoints.db", 4000);
  disk_full("destination disk full", fs, dir_.path(), dir_ / "dest" / "out.db",
            dir_ / "state" / "checkpoints.db");
}

}  // namespace
}  // namespace sluice::test::fault
