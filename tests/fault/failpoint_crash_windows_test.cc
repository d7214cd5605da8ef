// PostgreSQL → PostgreSQL crashed by each fail point (src/support/failpoint.h) at its crash
// window — after the destination commit but before the checkpoint, after the checkpoint but before
// the source ack, inside a CDC transaction, inside the snapshot — then run to the end: the
// destination equals the source, row for row, with no duplicate key. Also: a typo in
// SLUICE_FAILPOINTS is a one-line error, never a crash that cannot come.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <ostream>
#include <string>

#include "integration/pg_harness.h"
#include "support/failpoints.h"

namespace sluice::pgtest {
namespace {

using e2e::Process;
using test::ArmedFailPoints;

struct CrashWindow {
  const char* name;
  const char* id;          // pipeline id and database names: cases run in parallel
  const char* failpoints;  // SLUICE_FAILPOINTS
  bool in_cdc;             // the hit comes in the big transaction, not in the snapshot
};

// Snapshot windows: armed from the start (the snapshot is 3,000 rows, batches of about 200).
// CDC windows: armed in a second run, once the snapshot is done, then a transaction of 1,200
// changes (6 batches and more).
const CrashWindow kWindows[] = {
    {"AfterDestinationCommitInSnapshot", "fpw_dcs", "after_destination_commit=crash@5", false},
    {"AfterDestinationCommitInCdc", "fpw_dcc", "after_destination_commit=crash@3", true},
    {"AfterCheckpointInSnapshot", "fpw_cps", "after_checkpoint=crash@2", false},
    {"AfterCheckpointInCdc", "fpw_cpc", "after_checkpoint=crash@2", true},
    {"MidTransaction", "fpw_mtx", "mid_transaction=crash@3", true},
    {"MidSnapshotChunk", "fpw_msc", "mid_snapshot_chunk=crash@4", false},
};

void PrintTo(const CrashWindow& w, std::ostream* os) {
  *os << w.name << " (" << w.failpoints << ")";
}

class CrashWindows : public ::testing::TestWithParam<CrashWindow> {};

TEST_P(CrashWindows, ResumeEndsEqualToTheSourceWithoutDuplicates) {
  const CrashWindow& w = GetParam();
  const std::string id = w.id;
  TestDb src(id + "_src");
  TestDb dst(id + "_dst");
  ASSERT_TRUE(src.ok() && dst.ok());
  ASSERT_TRUE(src.sql().exec(
      "CREATE TABLE t (id int PRIMARY KEY, n int, s text);"
      "INSERT INTO t SELECT g, g % 13, md5(g::text) FROM generate_series(1, 3000) g"));
  auto dir = e2e::make_temp_dir(id);
  test::PipelineFile f;
  test::PipelineYaml& pl = f.pipeline(id);
  pl.source("postgres").set("url", src.url()).set("tables", test::Yaml::strings({"public.t"}));
  pl.destination("postgres").set("url", dst.url());
  pl.max_records(200).linger_ms(20);
  e2e::write_file(dir / "p.yaml", f.yaml());
  const char* big_transaction =
      "BEGIN; UPDATE t SET n = -n, s = 'changed' WHERE id <= 1000;"
      "DELETE FROM t WHERE id BETWEEN 2001 AND 2100;"
      "INSERT INTO t SELECT g, 1, 'new' FROM generate_series(3001, 3100) g; COMMIT";
  if (w.in_cdc) {  // the snapshot first, unarmed
    Process p({"run", "p.yaml"}, dir);
    ASSERT_TRUE(wait_for_checkpoint(p, dir, id, [](const std::string& c) {
      return starts_with(c, "cdc ");
    })) << p.stderr_text();
    p.terminate();
    ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  }
  {
    ArmedFailPoints armed(w.failpoints);
    Process p({"run", "p.yaml"}, dir);
    if (w.in_cdc) {
      // Streaming: the slot of this database is in use.
      ASSERT_TRUE(wait_until(
          [&] {
            return src.sql().scalar(
                       "SELECT count(*) FROM pg_replication_slots WHERE database = "
                       "current_database() AND active") != "0";
          },
          30s))
          << p.stderr_text();
      ASSERT_TRUE(src.sql().exec(big_transaction));
    }
    EXPECT_EQ(p.wait_for(60s), 128 + SIGKILL) << p.stderr_text();
    const std::string spec = w.failpoints;
    EXPECT_NE(p.stderr_text().find("fail point " + spec.substr(0, spec.find('=')) + " fired"),
              std::string::npos)
        << p.stderr_text();
    if (!w.in_cdc) {
      EXPECT_FALSE(starts_with(checkpoint_of(dir, id), "cdc "))
          << "crashed after the snapshot: " << checkpoint_of(dir, id);
    }
  }
  // A crash early in the snapshot may come before the first checkpoint (the batches before it
  // still in flight at the destination): the next run then starts the snapshot again on the
  // slot the first one created, not from a checkpoint. Both must end equal to the source.
  const bool had_checkpoint = !checkpoint_of(dir, id).empty();
  {
    Process p({"run", "p.yaml"}, dir);
    if (!w.in_cdc) {
      ASSERT_TRUE(wait_for_checkpoint(p, dir, id, [](const std::string& c) {
        return starts_with(c, "cdc ");
      })) << p.stderr_text();
      ASSERT_TRUE(src.sql().exec(big_transaction));
    }
    // Everything the source has is at the destination: then a graceful stop.
    const std::string q = "SELECT id, n, s FROM t ORDER BY id";
    const bool same =
        wait_until([&] { return src.sql().query(q) == dst.sql().query(q); }, 60s, 100ms);
    p.terminate();
    EXPECT_EQ(p.wait_for(60s), 0) << p.stderr_text();
    EXPECT_TRUE(same) << p.stderr_text();
    if (had_checkpoint) {
      EXPECT_NE(p.stderr_text().find("resuming from checkpoint"), std::string::npos)
          << p.stderr_text();
    }
  }
  EXPECT_EQ(dst.sql().scalar("SELECT count(*) FROM t"), "3000");
  EXPECT_EQ(dst.sql().scalar("SELECT count(DISTINCT id) FROM t"), "3000");
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(FailPoints, CrashWindows, ::testing::ValuesIn(kWindows),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(FailPoints, AMisspelledFailPointIsAOneLineErrorAtStartUp) {
  auto dir = e2e::make_temp_dir("fpw-typo");
  ArmedFailPoints armed("after_checkpiont=crash");
  Process p({"--version"}, dir);
  EXPECT_EQ(p.wait_for(30s), 2);
  const std::string err = p.stderr_text();
  EXPECT_NE(err.find("unknown fail point 'after_checkpiont'"), std::string::npos) << err;
  EXPECT_NE(err.find("after_checkpoint"), std::string::npos) << err;  // names the right ones
  EXPECT_EQ(lines_of(err).size(), 1u) << err;
  std::filesystem::remove_all(dir);
}

TEST(FailPoints, AMalformedDelayIsAOneLineErrorAtStartUp) {
  for (const char* spec : {"mid_snapshot_chunk=delay:", "mid_snapshot_chunk=delay:0",
                           "mid_snapshot_chunk=delay:5ms", "mid_snapshot_chunk=delay:600000"}) {
    auto dir =
        e2e::make_temp_dir("fpw-delay");  // one per run: a Process appends to its stderr file
    ArmedFailPoints armed(spec);
    Process p({"--version"}, dir);
    EXPECT_EQ(p.wait_for(30s), 2) << spec;
    const std::string err = p.stderr_text();
    EXPECT_NE(err.find("delay:MS needs 1 to 60000 milliseconds"), std::string::npos) << err;
    EXPECT_EQ(lines_of(err).size(), 1u) << err;
    std::filesystem::remove_all(dir);
  }
  {
    auto dir = e2e::make_temp_dir("fpw-delay-ok");
    ArmedFailPoints armed("mid_snapshot_chunk=delay:5");  // well formed: --version runs
    Process p({"--version"}, dir);
    EXPECT_EQ(p.wait_for(30s), 0) << p.stderr_text();
    std::filesystem::remove_all(dir);
  }
}

}  // namespace
}  // namespace sluice::pgtest
