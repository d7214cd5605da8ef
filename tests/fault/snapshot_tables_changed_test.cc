// A snapshot's position names its table by an index into the sorted list of captured tables. A
// crash mid-snapshot, then `tables` edited to add a table that sorts earlier, used to apply that
// index (and the cursor of the table being read) to another list: a table was skipped, and its
// rows — older than the snapshot, so never in the log — were lost. The position now carries a
// fingerprint of the list: when it differs, the snapshot starts again from the first table.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <string>
#include <vector>

#include "e2e/harness.h"
#include "integration/mysql_source_harness.h"
#include "integration/pg_harness.h"
#include "support/env.h"
#include "support/failpoints.h"
#include "support/pipeline_file.h"
#include "support/sql.h"
#include "support/sqlite.h"

namespace sluice {
namespace {

using namespace std::chrono_literals;
using e2e::Process;

constexpr int kRows = 4000;  // per table: 20 snapshot batches of 200

// Runs the pipeline with `first` tables until a fail point crashes it inside the second table's
// snapshot, then with `second` (which adds `a`, sorting first) to the end; every table must be
// complete at the SQLite destination.
void crash_then_add_a_table(const std::string& id, const std::filesystem::path& dir,
                            const std::function<std::string(const std::vector<std::string>&)>& yaml,
                            const std::vector<std::string>& first,
                            const std::vector<std::string>& second) {
  e2e::write_file(dir / "p.yaml", yaml(first));
  {
    Process p = [&] {
      test::ArmedFailPoints armed("mid_snapshot_chunk=crash@30");
      return Process({"run", "p.yaml"}, dir);
    }();
    ASSERT_EQ(p.wait_for(60s), 128 + SIGKILL) << p.stderr_text();
  }
  const std::string cp = pgtest::checkpoint_of(dir, id);
  ASSERT_TRUE(cp.starts_with("snapshot ") || cp.starts_with("v3 snapshot ")) << cp;
  e2e::write_file(dir / "p.yaml", yaml(second));
  Process p({"run", "p.yaml", "--idle-exit", "2"}, dir);
  ASSERT_EQ(p.wait_for(90s), 0) << p.stderr_text();
  EXPECT_NE(p.stderr_text().find("starts again from the first table"), std::string::npos)
      << "checkpoint at the crash: " << cp << "\n"
      << p.stderr_text();
  test::SqliteFile out(dir / "out.db");
  for (const char* t : {"a", "b", "c"}) {
    EXPECT_EQ(out.scalar(std::string("SELECT count(*) FROM ") + t), kRows) << t;
    EXPECT_EQ(out.scalar(std::string("SELECT count(DISTINCT id) FROM ") + t), kRows) << t;
  }
}

TEST(SnapshotTablesChanged, MariadbTableAddedBeforeTheOneBeingReadIsCopiedWhole) {
  test::MysqlDatabase db(test::unique_name("tabchg", 64));
  ASSERT_TRUE(db.ok());
  for (const char* t : {"a", "b", "c"})
    ASSERT_TRUE(db.sql().exec(std::string("CREATE TABLE ") + t +
                              " (id INT PRIMARY KEY, s VARCHAR(40));"
                              "INSERT INTO " +
                              t + " SELECT seq, REPEAT('x', 30) FROM seq_1_to_" +
                              std::to_string(kRows)));
  auto dir = e2e::make_temp_dir("tabchg-my");
  auto yaml = [&](const std::vector<std::string>& tables) {
    std::vector<std::string> q;
    for (const auto& t : tables) q.push_back(db.name() + "." + t);
    test::PipelineFile f = mytest::pipeline_file("tabchg", db.url(), q, 200);
    f.pipeline("tabchg").source_.set("snapshot.chunk_size", 200);
    f.pipeline("tabchg").destination("sqlite").set("path", "out.db");
    return f.yaml();
  };
  crash_then_add_a_table("tabchg", dir, yaml, {"b", "c"}, {"a", "b", "c"});
}

TEST(SnapshotTablesChanged, PostgresTableAddedBeforeTheOneBeingReadIsCopiedWhole) {
  pgtest::TestDb db("tabchg_pg");
  ASSERT_TRUE(db.ok());
  for (const char* t : {"a", "b", "c"})
    ASSERT_TRUE(db.sql().exec(std::string("CREATE TABLE ") + t +
                              " (id int PRIMARY KEY, s text);"
                              "INSERT INTO " +
                              t + " SELECT g, repeat('x', 30) FROM generate_series(1, " +
                              std::to_string(kRows) + ") g"));
  auto dir = e2e::make_temp_dir("tabchg-pg");
  auto yaml = [&](const std::vector<std::string>& tables) {
    std::vector<std::string> q;
    for (const auto& t : tables) q.push_back("public." + t);
    test::PipelineFile f;
    test::PipelineYaml& p = f.pipeline("tabchg_pg");
    p.source("postgres").set("url", db.url()).set("tables", test::Yaml::strings(q));
    p.max_records(200).linger_ms(20);
    p.destination("sqlite").set("path", "out.db");
    return f.yaml();
  };
  crash_then_add_a_table("tabchg_pg", dir, yaml, {"b", "c"}, {"a", "b", "c"});
}

}  // namespace
}  // namespace sluice
