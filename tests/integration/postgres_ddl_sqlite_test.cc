// The sluice binary, PostgreSQL (ddl.capture: true) → SQLite: a rename keeps the values, a drop +
// re-add of a name never shows the old values, an added column with a default reads it in the
// rows that existed; the end state is compared with the source row by row.
#include <gtest/gtest.h>

#include "integration/pg_harness.h"

namespace sluice::pgtest {
namespace {

using e2e::Process;

TEST(PostgresDdlToSqlite, RenameDropAddAndDefaultEndEqualToTheSource) {
  TestDb db("ddl_e2e");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(
      db.sql().exec("CREATE TABLE t (id int PRIMARY KEY, a text, n int);"
                    "INSERT INTO t SELECT g, 'a' || g, g FROM generate_series(1, 100) g;"));
  auto dir = e2e::make_temp_dir("pg-ddl-e2e");
  PipelineFile f;
  f.id = "ddl_e2e";
  f.url = db.url();
  f.tables = {"public.t"};
  f.source_settings = {{"ddl.capture", "true"}};
  e2e::write_file(dir / "p.yaml", f.yaml());
  Process p({"run", "p.yaml", "--idle-exit", "2"}, dir);
  ASSERT_TRUE(wait_for_checkpoint(p, dir, "ddl_e2e", [](const std::string& c) {
    return starts_with(c, "cdc ");
  })) << p.stderr_text();
  ASSERT_TRUE(db.sql().exec(
      "INSERT INTO t VALUES (101, 'a101', 101);"
      "ALTER TABLE t RENAME a TO b;"
      "UPDATE t SET b = b || '!' WHERE id % 10 = 0;"
      "ALTER TABLE t DROP n; ALTER TABLE t ADD n int;"  // the old n values must never reappear
      "UPDATE t SET n = -id WHERE id % 7 = 0;"
      "ALTER TABLE t ADD d text DEFAULT 'dflt';"
      "INSERT INTO t (id, b) VALUES (102, 'a102');"));
  ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  EXPECT_EQ(compare_tables(db.sql(), "SELECT id::text, b, n::text, d FROM t ORDER BY t.id",
                           dir / "out.db", "SELECT id, b, n, d FROM t ORDER BY id"),
            0);
  std::filesystem::remove_all(dir);
}

// The same changes into PostgreSQL (another database of the same server), compared row by row.
TEST(PostgresDdlToPostgres, RenameDropAddAndDefaultEndEqualToTheSource) {
  TestDb db("ddl_e2e_src");
  TestDb dst("ddl_e2e_dst");
  ASSERT_TRUE(db.ok() && dst.ok());
  ASSERT_TRUE(
      db.sql().exec("CREATE TABLE t (id int PRIMARY KEY, a text, n int);"
                    "INSERT INTO t SELECT g, 'a' || g, g FROM generate_series(1, 100) g;"));
  auto dir = e2e::make_temp_dir("pg-ddl-e2e-pg");
  test::PipelineFile f;
  test::PipelineYaml& pl = f.pipeline("ddl_e2e_pg");
  pl.source("postgres")
      .set("url", db.url())
      .set("tables", test::Yaml::strings({"public.t"}))
      .set("ddl.capture", test::Yaml::raw("true"));
  pl.destination("postgres").set("url", dst.url());
  pl.max_records(1000).linger_ms(20);
  e2e::write_file(dir / "p.yaml", f.yaml());
  Process p({"run", "p.yaml", "--idle-exit", "2"}, dir);
  ASSERT_TRUE(wait_for_checkpoint(p, dir, "ddl_e2e_pg", [](const std::string& c) {
    return starts_with(c, "cdc ");
  })) << p.stderr_text();
  ASSERT_TRUE(
      db.sql().exec("INSERT INTO t VALUES (101, 'a101', 101);"
                    "ALTER TABLE t RENAME a TO b;"
                    "UPDATE t SET b = b || '!' WHERE id % 10 = 0;"
                    "ALTER TABLE t DROP n; ALTER TABLE t ADD n bigint;"
                    "UPDATE t SET n = -id WHERE id % 7 = 0;"
                    "ALTER TABLE t ADD d text DEFAULT 'dflt';"
                    "INSERT INTO t (id, b) VALUES (102, 'a102');"));
  ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  const std::string q = "SELECT id::text, b, n::text, d FROM t ORDER BY t.id";
  EXPECT_EQ(db.sql().query(q), dst.sql().query(q));
  EXPECT_EQ(dst.sql().scalar("SELECT count(*) FROM t"), "102");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sluice::pgtest
