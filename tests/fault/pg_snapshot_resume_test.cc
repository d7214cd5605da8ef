// A PostgreSQL snapshot resumed after a crash reads the rest of its table under a newer MVCC
// snapshot, while the stream replays from the slot's consistent point (issue 14 item 1). Rows
// updated while sluice was down are skipped by the resumed COPY (the stream delivers them), and an
// updated row's new version may have moved to a page below the cursor. Under REPLICA IDENTITY
// DEFAULT an UPDATE that leaves a TOASTed (out-of-line) value alone reaches pgoutput without it:
// a destination that never saw the row would get the column NULL. PostgreSQL → PostgreSQL: big
// values (out of line), a crash mid-snapshot by fail point, updates of the other columns while
// down (moving versions below the cursor into space a VACUUM freed), then the end state is
// compared row by row.
#include <signal.h>
#include <stdlib.h>

#include "connectors/postgres/postgres_source_driver.h"
#include "fault/fault_suite.h"
#include "support/sql.h"
#include "support/sqlite.h"

namespace sluice::test::fault {
namespace {

class ArmedFailPoints {
 public:
  explicit ArmedFailPoints(const char* spec) { setenv("SLUICE_FAILPOINTS", spec, 1); }
  ~ArmedFailPoints() { unsetenv("SLUICE_FAILPOINTS"); }
  ArmedFailPoints(const ArmedFailPoints&) = delete;
  ArmedFailPoints& operator=(const ArmedFailPoints&) = delete;
};

// One line per row: id, n and an md5 of the big value ("NULL" when missing).
constexpr const char* kImage =
    "SELECT count(*)::text || ' rows, ' || count(*) FILTER (WHERE big IS NULL) || ' null; ' || "
    "coalesce(md5(string_agg(id || ':' || n || ':' || coalesce(md5(big), 'NULL'), ',' ORDER BY "
    "id)), '-') FROM t";

// Crashes at the snapshot's `crash_at`-th batch, changes rows while down, runs to the end: the
// destination must equal the source, and the run after the crash must log `resumed_line`.
void crash_change_and_compare(int crash_at, const std::string& resumed_line, int parallel = 1) {
  PgDatabase src(unique_name("snapres_src")), dst(unique_name("snapres_dst"));
  ASSERT_TRUE(src.ok() && dst.ok());
  // Even ids hold 2,560 bytes of hex (incompressible for pglz: stored out of line), odd ones a
  // short value. About 100 rows per heap page.
  ASSERT_TRUE(src.sql().exec(
      "CREATE TABLE t (id int PRIMARY KEY, n int NOT NULL, big text);"
      "INSERT INTO t SELECT g, 0, CASE WHEN g % 2 = 0 THEN (SELECT string_agg(md5(g || '/' || i), "
      "'') FROM generate_series(1, 80) i) ELSE 'small ' || g END FROM generate_series(1, 6000) g;"
      "DELETE FROM t WHERE id <= 600"));
  ASSERT_TRUE(src.sql().exec("VACUUM t"));  // free space below any cursor for moved versions
  ASSERT_EQ(src.sql().scalar("SELECT count(*) FROM pg_class c JOIN pg_class x ON x.oid = "
                             "c.reltoastrelid WHERE c.relname = 't' AND x.relpages > 0"),
            "1")
      << "the big values are not out of line";
  TempDir dir("pg-snapshot-resume");
  const std::string id = unique_name("snapres", 40);
  PipelineFile f;
  PipelineYaml& p = f.pipeline(id);
  p.source("postgres")
      .set("url", src.url())
      .set("tables", Yaml::strings({"public.t"}))
      .set("snapshot.parallel", parallel);
  p.destination("postgres").set("url", dst.url());
  p.max_records(200).linger_ms(20);
  f.write(dir / "p.yaml");
  {
    const std::string spec = "mid_snapshot_chunk=crash@" + std::to_string(crash_at);
    ArmedFailPoints armed(spec.c_str());
    Process run({"run", "p.yaml"}, dir.path());
    ASSERT_EQ(run.wait_for(60s), 128 + SIGKILL) << run.stderr_text();
  }
  const std::string at_crash = stored_checkpoint(dir / "state" / "checkpoints.db", id);
  if (crash_at == 1) ASSERT_EQ(at_crash, "") << "the first batch was not to be durable";
  else ASSERT_TRUE(at_crash.starts_with("v3 snapshot ")) << at_crash;
  // While down: rows past the cursor (ids above 3,000 lie on pages past it) change their n only;
  // the full pages cannot keep the new versions, which go to the space freed below the cursor or
  // to the table's end. Some big values change too, a few rows go and come.
  ASSERT_TRUE(src.sql().exec(
      "UPDATE t SET n = n + 1 WHERE id > 3000 AND id % 3 <> 0;"
      "UPDATE t SET big = 'changed ' || id WHERE id BETWEEN 4000 AND 4010;"
      "DELETE FROM t WHERE id BETWEEN 5000 AND 5020;"
      "INSERT INTO t SELECT g, 7, repeat(md5(g::text), 90) FROM generate_series(7001, 7020) g"));
  {
    Process run({"run", "p.yaml", "--idle-exit", "2"}, dir.path());
    ASSERT_EQ(run.wait_for(60s), 0) << run.stderr_text();
    EXPECT_NE(run.stderr_text().find(resumed_line), std::string::npos) << run.stderr_text();
  }
  const std::string want = src.sql().scalar(kImage);
  EXPECT_EQ(dst.sql().scalar(kImage), want) << "checkpoint at the crash: " << at_crash;
  EXPECT_EQ(dst.sql().scalar("SELECT count(*) FROM t WHERE big IS NULL"), "0");
}

TEST(PgSnapshotResume, RowsUpdatedWhileDownKeepTheirToastedValues) {
  crash_change_and_compare(12, "the pages before it are read");
}

// The same with three connections reading the snapshot (snapshot.parallel): the resumed run's
// connections share its newer snapshot, and the filter by the first one applies to each.
TEST(PgSnapshotResume, ParallelReadersResumeAndKeepTheToastedValues) {
  crash_change_and_compare(12, "the pages before it are read", 3);
}

// A crash before the first checkpoint: the snapshot starts again under a newer MVCC snapshot,
// filtered by the slot's exported one (kept beside the checkpoint); the big values survive.
TEST(PgSnapshotResume, CrashBeforeTheFirstCheckpointStartsAgainFilteredByTheSlotsSnapshot) {
  crash_change_and_compare(1, "the snapshot starts again (no checkpoint)");
}

// pg_current_snapshot() lists top-level xids in progress, not their subtransactions'. A row
// inserted in a subtransaction of a transaction in progress at the first snapshot has an xmin the
// filter takes as seen: the resumed COPY emits it and the stream delivers it too — a duplicate,
// never a loss. The top-level transaction's own row is skipped (the stream delivers it), and a
// row committed before the snapshot is kept. (The slot's exported snapshot lists every
// uncommitted xid below its xmax, subtransactions included, so there both rows are skipped.)
TEST(PgSnapshotResume, SubtransactionOfATransactionInProgressIsEmittedNeverSkippedAlone) {
  PgDatabase db(unique_name("snapres_subx"));
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1)"));
  ASSERT_TRUE(
      db.sql().exec("BEGIN; INSERT INTO t VALUES (2); SAVEPOINT s; INSERT INTO t VALUES "
                    "(3); RELEASE SAVEPOINT s"));
  // A later transaction commits, so the snapshot's xmax passes the subtransaction's xid.
  ASSERT_NE(db.admin().scalar("SELECT pg_current_xact_id()"), "");
  const std::string first = db.admin().scalar("SELECT pg_current_snapshot()::text");
  ASSERT_TRUE(db.sql().exec("COMMIT"));
  ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES (4)"));  // after the snapshot
  const auto snap = pg::XidSnapshot::parse(first);
  ASSERT_TRUE(snap) << first;
  EXPECT_EQ(db.sql().scalar("SELECT string_agg(id || ':' || " +
                            snap->sees_sql("xmin::text::bigint") + ", ',' ORDER BY id) FROM t"),
            "1:true,2:false,3:true,4:false")
      << "snapshot " << first;
}

}  // namespace
}  // namespace sluice::test::fault
