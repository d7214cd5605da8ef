// MariaDB → PostgreSQL through the binary with DDL mid-stream, the end state compared to the
// source row by row.
#include "integration/mysql_source_harness.h"

namespace sluice::mytest {
namespace {

TEST(MysqlDdlPostgres, ColumnChangesMidStreamEndEqualToTheSource) {
  TestDb db("ddl_pg");
  pgtest::TestDb pg("my_ddl_pg");
  ASSERT_TRUE(pg.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(10), n INT, old INT)"));
  ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES (1, 'one', 1, 11), (2, 'two', 2, 22)"));
  auto dir = e2e::make_temp_dir("mysql-ddl-pg");
  {
    test::PipelineFile f = pipeline_file("my-ddl-pg", db.url(), {"t"});
    f.pipeline("my-ddl-pg").destination("postgres").set("url", pg.url());
    e2e::write_file(dir / "p.yaml", f.yaml());
  }
  e2e::Process p({"run", "p.yaml"}, dir);
  // Polled while the table and its columns are still being created: a failing query is no
  // failure of the test.
  auto pg_scalar = [&](const std::string& sql) -> std::string {
    const auto rows = pg.sql().query(sql, /*quiet=*/true);
    return rows.empty() || rows[0].empty() || !rows[0][0] ? std::string() : *rows[0][0];
  };
  auto pg_rows = [&] {
    return pg_scalar(
        "SELECT string_agg(concat_ws('|', id, a2, n, c, old), ',' ORDER BY id) FROM t");
  };
  auto my_rows = [&] {
    return db.sql().scalar(
        "SELECT group_concat(concat_ws('|', id, a2, n, c, old) ORDER BY id) FROM t");
  };
  ASSERT_TRUE(
      pgtest::wait_until([&] { return pg_scalar("SELECT count(*) FROM t") == "2"; }, 60s, 200ms))
      << p.stderr_text();
  // Old rows read the default at the source: they must read it at the destination too; a renamed
  // column keeps its values; a dropped and re-added column never shows the old values.
  ASSERT_TRUE(db.sql().exec("ALTER TABLE t ADD COLUMN c VARCHAR(8) NOT NULL DEFAULT 'dflt'"));
  ASSERT_TRUE(db.sql().exec("ALTER TABLE t RENAME COLUMN a TO a2, MODIFY n BIGINT"));
  ASSERT_TRUE(db.sql().exec("ALTER TABLE t DROP COLUMN old"));
  ASSERT_TRUE(db.sql().exec("ALTER TABLE t ADD COLUMN old INT"));
  ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES (3, 'three', 5000000000, 'x', 33)"));
  ASSERT_TRUE(db.sql().exec("UPDATE t SET a2 = 'uno' WHERE id = 1"));
  const bool same = pgtest::wait_until([&] { return pg_rows() == my_rows(); }, 60s, 200ms);
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(), 0) << p.stderr_text();
  EXPECT_TRUE(same) << pg_rows() << " vs " << my_rows() << "\n" << p.stderr_text();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sluice::mytest
