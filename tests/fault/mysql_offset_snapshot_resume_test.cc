// A MariaDB table without a unique key is snapshotted by offsets (LIMIT … OFFSET). A crash in its
// snapshot resumes under a newer snapshot: rows deleted while sluice was stopped shift the rest,
// so resuming at the stored offset would skip rows that still exist — they must all arrive.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <string>

#include "e2e/harness.h"
#include "integration/mysql_source_harness.h"
#include "support/env.h"
#include "support/pipeline_file.h"
#include "support/sql.h"

namespace sluice {
namespace {

using namespace std::chrono_literals;
using e2e::Process;

TEST(MysqlOffsetSnapshotResume, RowsDeletedWhileStoppedDoNotMakeTheResumeSkipRows) {
  test::MysqlDatabase db(test::unique_name("offres", 64));
  ASSERT_TRUE(db.ok());
  // No primary key: keyed for the destination by message.key.columns, paged by offsets.
  ASSERT_TRUE(
      db.sql().exec("CREATE TABLE t (id INT NOT NULL, n INT, s VARCHAR(40));"
                    "INSERT INTO t SELECT seq, seq % 97, REPEAT('x', 30) FROM seq_1_to_30000;"));
  auto dir = e2e::make_temp_dir("offres");
  test::PipelineFile f;
  test::PipelineYaml& p = f.pipeline("offres");
  p.source("mysql")
      .set("url", db.url())
      .set("tables", test::Yaml::strings({db.name() + ".t"}))
      .set("message.key.columns", test::Yaml::map({{db.name() + ".t", "id"}}))
      .set("snapshot.chunk_size", 200);
  p.max_records(200).linger_ms(20);
  p.destination("sqlite").set("path", "out.db");
  f.write(dir / "p.yaml");

  {  // kill -9 once a batch of the table is durable, the table unfinished.
    Process run({"run", "p.yaml"}, dir);
    ASSERT_TRUE(pgtest::wait_for_checkpoint(run, dir, "offres", [](const std::string& c) {
      return c.starts_with("snapshot ") && c.find(" o") != std::string::npos;
    })) << run.stderr_text();
    run.kill9();
  }
  const std::string cp = pgtest::checkpoint_of(dir, "offres");
  ASSERT_TRUE(cp.starts_with("snapshot ")) << "the snapshot ended before the kill: " << cp;
  // While sluice is stopped, rows of the part already copied go away.
  ASSERT_TRUE(db.sql().exec("DELETE FROM t WHERE id <= 500"));

  Process resumed({"run", "p.yaml", "--idle-exit", "2"}, dir);
  ASSERT_EQ(resumed.wait_for(90s), 0) << resumed.stderr_text();
  EXPECT_NE(resumed.stderr_text().find("resumes from its first row"), std::string::npos)
      << resumed.stderr_text();
  EXPECT_EQ(mytest::diff_mysql_sqlite(db.sql(), "SELECT id, n, s FROM t ORDER BY id",
                                      dir / "out.db", "SELECT id, n, s FROM t ORDER BY id"),
            0);
}

}  // namespace
}  // namespace sluice
