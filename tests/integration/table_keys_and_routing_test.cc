// Against the real servers, through the binary: tables without a primary key keyed by
// `message.key.columns` (snapshot, then updates and deletes streamed), and same-named tables of two
// schemas or databases refused instead of merged at one destination table (issue 13, items 1
// and 14).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/env.h"
#include "support/pipeline_file.h"
#include "support/process.h"
#include "support/readers.h"
#include "support/sql.h"
#include "support/sqlite.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

PipelineYaml& pg_pipeline(PipelineFile& f, const std::string& id, const PgDatabase& db,
                          const std::string& slot, const std::vector<std::string>& tables) {
  PipelineYaml& p = f.pipeline(id);
  p.source("postgres")
      .set("url", db.url())
      .set("slot", slot)
      .set("publication", slot)
      .set("tables", Yaml::strings(tables));
  return p;
}

int run(const TempDir& dir, std::string* err) {
  Process p({"run", "p.yaml", "--idle-exit", "1"}, dir.path());
  const int rc = p.wait_for(60s);
  *err = p.stderr_text();
  return rc;
}

// ── message.key.columns ─────────────────────────────────────────────────────

TEST(MessageKeyColumns, PostgresTableWithoutPrimaryKeyIsKeyedByTheListedColumns) {
  PgDatabase db(unique_name("mkc_" + current_test_slug()));
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(
      db.sql().exec("CREATE TABLE readings (device text NOT NULL, ts int NOT NULL, v int);"
                    "ALTER TABLE readings REPLICA IDENTITY FULL;"
                    "INSERT INTO readings VALUES ('a', 1, 10), ('a', 2, 20), ('b', 1, 30);"));
  TempDir dir("mkc-pg");
  PipelineFile f;
  pg_pipeline(f, "p", db, unique_name("mkc_slot"), {"public.readings"})
      .source_.set("message.key.columns", Yaml::map({{"public.readings", "device, ts"}}));
  f.pipeline("p").destination("sqlite").set("path", "out.db");
  f.write(dir / "p.yaml");
  std::string err;
  ASSERT_EQ(run(dir, &err), 0) << err;
  // The stream: an update and a delete that only a key can apply to the right row.
  ASSERT_TRUE(
      db.sql().exec("UPDATE readings SET v = 11 WHERE device = 'a' AND ts = 1;"
                    "DELETE FROM readings WHERE device = 'b' AND ts = 1;"
                    "INSERT INTO readings VALUES ('b', 2, 40);"));
  ASSERT_EQ(run(dir, &err), 0) << err;
  const auto rows = read_sqlite_table(dir / "out.db", "readings", {"device", "ts", "v"});
  ASSERT_TRUE(rows);
  EXPECT_EQ(show(*rows), show({{"a", "1", "11"}, {"a", "2", "20"}, {"b", "2", "40"}}));
  // The destination table got the listed columns as its primary key.
  SqliteFile out(dir / "out.db");
  const auto pk = out.rows("SELECT name, pk FROM pragma_table_info('readings') ORDER BY cid");
  ASSERT_TRUE(pk);
  EXPECT_EQ(show(*pk), show({{"device", "1"}, {"ts", "2"}, {"v", "0"}}));
}

TEST(MessageKeyColumns, PostgresRefusesATableWithAPrimaryKeyOrAnUnknownColumn) {
  PgDatabase db(unique_name("mkc_" + current_test_slug()));
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(
      db.sql().exec("CREATE TABLE keyed (id int PRIMARY KEY, v int);"
                    "CREATE TABLE loose (a int, b int);"));
  for (const auto& [entry, expected] : std::vector<std::pair<Yaml, std::string>>{
           {Yaml::map({{"public.keyed", "v"}}),
            "\"public\".\"keyed\" has a primary key (id), which is its records' key"},
           {Yaml::map({{"public.loose", "a, nope"}}),
            "\"public\".\"loose\" has no column \"nope\""},
           {Yaml::map({{"public.other", "a"}}), "\"public\".\"other\" is not a captured table"}}) {
    TempDir dir("mkc-pg-bad");
    PipelineFile f;
    pg_pipeline(f, "p", db, unique_name("mkc_slot"), {"public.keyed", "public.loose"})
        .source_.set("message.key.columns", entry);
    f.pipeline("p").destination("sqlite").set("path", "out.db");
    f.write(dir / "p.yaml");
    std::string err;
    EXPECT_NE(run(dir, &err), 0) << err;
    EXPECT_NE(err.find("message.key.columns"), std::string::npos) << err;
    EXPECT_NE(err.find(expected), std::string::npos) << err;
    drop_pg_slots(db.admin(), db.name());
  }
}

TEST(MessageKeyColumns, MariadbTableWithoutPrimaryKeyIsKeyedByTheListedColumns) {
  MysqlDatabase db(unique_name("mkc_" + current_test_slug(), 64));
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(
      db.sql().exec("CREATE TABLE readings (device varchar(10) NOT NULL, ts int NOT NULL, v int);"
                    "INSERT INTO readings VALUES ('a', 1, 10), ('a', 2, 20), ('b', 1, 30);"));
  TempDir dir("mkc-my");
  PipelineFile f;
  PipelineYaml& p = f.pipeline("p");
  p.source("mysql")
      .set("url", db.url())
      .set("tables", Yaml::strings({db.name() + ".readings"}))
      .set("message.key.columns", Yaml::map({{db.name() + ".readings", "device,TS"}}))
      .set("snapshot.chunk_size", 2);  // pages by offset: more than one chunk
  p.destination("sqlite").set("path", "out.db");
  f.write(dir / "p.yaml");
  std::string err;
  ASSERT_EQ(run(dir, &err), 0) << err;
  ASSERT_TRUE(
      db.sql().exec("UPDATE readings SET v = 11 WHERE device = 'a' AND ts = 1;"
                    "DELETE FROM readings WHERE device = 'b' AND ts = 1;"
                    "INSERT INTO readings VALUES ('b', 2, 40);"));
  ASSERT_EQ(run(dir, &err), 0) << err;
  const auto rows = read_sqlite_table(dir / "out.db", "readings", {"device", "ts", "v"});
  ASSERT_TRUE(rows);
  EXPECT_EQ(show(*rows), show({{"a", "1", "11"}, {"a", "2", "20"}, {"b", "2", "40"}}));
}

// ── same-named tables of two schemas / databases ────────────────────────────

TEST(TableRouting, PostgresSameNamedTablesOfTwoSchemasStopInsteadOfMerging) {
  PgDatabase db(unique_name("route_" + current_test_slug()));
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(
      db.sql().exec("CREATE SCHEMA s1; CREATE SCHEMA s2;"
                    "CREATE TABLE s1.t (id int PRIMARY KEY, v text);"
                    "CREATE TABLE s2.t (id int PRIMARY KEY, v text);"
                    "INSERT INTO s1.t VALUES (1, 'one');"
                    "INSERT INTO s2.t VALUES (1, 'uno');"));
  {
    // "*": the source resolves the tables at start; the destination refuses before any row.
    TempDir dir("route-pg");
    PipelineFile f;
    pg_pipeline(f, "p", db, unique_name("route_slot"), {"*"})
        .destination("sqlite")
        .set("path", "out.db");
    f.write(dir / "p.yaml");
    std::string err;
    EXPECT_NE(run(dir, &err), 0) << err;
    EXPECT_NE(err.find("source tables s1.t and s2.t would both be written to table \"t\""),
              std::string::npos)
        << err;
    EXPECT_NE(err.find("set `table: \"{{schema}}_{{table}}\"`"), std::string::npos) << err;
    EXPECT_FALSE(read_sqlite_table(dir / "out.db", "t", {"id", "v"}).value_or(Rows{}).size() > 0);
    drop_pg_slots(db.admin(), db.name());
  }
  {
    // The setting the error names keeps them apart.
    TempDir dir("route-pg-ok");
    PipelineFile f;
    pg_pipeline(f, "p", db, unique_name("route_slot"), {"*"})
        .destination("sqlite")
        .set("path", "out.db")
        .set("table", "{{schema}}_{{table}}");
    f.write(dir / "p.yaml");
    std::string err;
    ASSERT_EQ(run(dir, &err), 0) << err;
    EXPECT_EQ(show(read_sqlite_table(dir / "out.db", "s1_t", {"id", "v"}).value_or(Rows{})),
              show({{"1", "one"}}));
    EXPECT_EQ(show(read_sqlite_table(dir / "out.db", "s2_t", {"id", "v"}).value_or(Rows{})),
              show({{"1", "uno"}}));
  }
}

TEST(TableRouting, MariadbSameNamedTablesOfTwoDatabasesStopInsteadOfMerging) {
  MysqlDatabase db(unique_name("route_" + current_test_slug(), 60));
  ASSERT_TRUE(db.ok());
  const std::string other = db.name() + "_b";
  ASSERT_TRUE(db.admin().exec("DROP DATABASE IF EXISTS " + my_ident(other) + ";CREATE DATABASE " +
                              my_ident(other)));
  ASSERT_TRUE(
      db.sql().exec("CREATE TABLE t (id int PRIMARY KEY, v text);"
                    "INSERT INTO t VALUES (1, 'one');"
                    "CREATE TABLE " +
                    my_ident(other) +
                    ".t (id int PRIMARY KEY, v text);"
                    "INSERT INTO " +
                    my_ident(other) + ".t VALUES (1, 'uno');"));
  TempDir dir("route-my");
  PipelineFile f;
  PipelineYaml& p = f.pipeline("p");
  p.source("mysql")
      .set("url", db.url())
      .set("tables", Yaml::strings({db.name() + ".*", other + ".*"}));
  p.destination("sqlite").set("path", "out.db");
  f.write(dir / "p.yaml");
  std::string err;
  EXPECT_NE(run(dir, &err), 0) << err;
  EXPECT_NE(err.find("would both be written to table \"t\""), std::string::npos) << err;
  db.admin().exec("DROP DATABASE IF EXISTS " + my_ident(other));
}

}  // namespace
}  // namespace sluice::test
