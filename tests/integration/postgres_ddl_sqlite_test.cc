// The sluice binary, PostgreSQL (ddl.capture: true) → SQLite and → PostgreSQL: a rename keeps the
// values, a drop + re-add of a name never shows the old values, an added column with a default
// reads it in the rows that existed, a volatile default or a rewriting type change has the table
// read again; without ddl.capture, DDL made while sluice was stopped is seen at the restart. The
// end state is compared with the source row by row.
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

// ── values the WAL never carried: volatile defaults, rewriting type changes ──

constexpr const char* kRewriteTable =
    "CREATE TABLE t (id int PRIMARY KEY, v text, n int);"
    "INSERT INTO t SELECT g, repeat('v', g % 7), g FROM generate_series(1, 200) g;";
// Each gives the rows that existed values only PostgreSQL knows: the table is read again.
constexpr const char* kRewrites =
    "INSERT INTO t VALUES (201, 'vv', 201);"
    "ALTER TABLE t ADD r int DEFAULT (random() * 1000000)::int;"
    "ALTER TABLE t ADD ts text DEFAULT clock_timestamp()::text;"
    "ALTER TABLE t ADD u uuid DEFAULT gen_random_uuid();"
    "ALTER TABLE t ADD g int GENERATED ALWAYS AS IDENTITY;"  // numbered by a sequence
    "ALTER TABLE t ALTER v TYPE int USING length(v);"  // text → int: made anew, values read again
    "ALTER TABLE t ALTER n TYPE bigint USING n * 2;"   // a widening whose values changed
    "INSERT INTO t (id, v, n) VALUES (202, 7, 7);"
    "UPDATE t SET n = -n WHERE id % 10 = 0;"
    "DELETE FROM t WHERE id % 50 = 1;";

bool resnapshot_done(const Process& p) {
  return p.stderr_text().find("incremental snapshot of public.t complete") != std::string::npos;
}

TEST(PostgresDdlToSqlite, VolatileDefaultsAndRewritingTypeChangesAreReadAgain) {
  TestDb db("ddl_rewrite");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec(kRewriteTable));
  auto dir = e2e::make_temp_dir("pg-ddl-rewrite");
  PipelineFile f;
  f.id = "ddl_rewrite";
  f.url = db.url();
  f.tables = {"public.t"};
  f.max_records = 100;
  f.source_settings = {{"ddl.capture", "true"}, {"snapshot.chunk_size", "64"}};
  e2e::write_file(dir / "p.yaml", f.yaml());
  Process p({"run", "p.yaml", "--idle-exit", "2"}, dir);
  ASSERT_TRUE(wait_for_checkpoint(p, dir, "ddl_rewrite", [](const std::string& c) {
    return starts_with(c, "cdc ");
  })) << p.stderr_text();
  ASSERT_TRUE(db.sql().exec(kRewrites));
  ASSERT_TRUE(wait_until([&] { return resnapshot_done(p); }, 60s)) << p.stderr_text();
  ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  // Logged once, naming the table and what rewrote it.
  const std::string err = p.stderr_text();
  EXPECT_NE(err.find("volatile default"), std::string::npos) << err;
  EXPECT_NE(err.find("read again by an incremental snapshot"), std::string::npos) << err;
  EXPECT_EQ(
      compare_tables(db.sql(),
                     "SELECT id::text, v::text, n::text, r::text, ts, u::text, g::text FROM t "
                     "ORDER BY t.id",
                     dir / "out.db", "SELECT id, v, n, r, ts, u, g FROM t ORDER BY id"),
      0);
  std::filesystem::remove_all(dir);
}

TEST(PostgresDdlToPostgres, VolatileDefaultsAndRewritingTypeChangesAreReadAgain) {
  TestDb db("ddl_rewrite_src");
  TestDb dst("ddl_rewrite_dst");
  ASSERT_TRUE(db.ok() && dst.ok());
  ASSERT_TRUE(db.sql().exec(kRewriteTable));
  auto dir = e2e::make_temp_dir("pg-ddl-rewrite-pg");
  test::PipelineFile f;
  test::PipelineYaml& pl = f.pipeline("ddl_rewrite_pg");
  pl.source("postgres")
      .set("url", db.url())
      .set("tables", test::Yaml::strings({"public.t"}))
      .set("ddl.capture", test::Yaml::raw("true"))
      .set("snapshot.chunk_size", test::Yaml::raw("64"));
  pl.destination("postgres").set("url", dst.url());
  pl.max_records(100).linger_ms(20);
  e2e::write_file(dir / "p.yaml", f.yaml());
  Process p({"run", "p.yaml", "--idle-exit", "2"}, dir);
  ASSERT_TRUE(wait_for_checkpoint(p, dir, "ddl_rewrite_pg", [](const std::string& c) {
    return starts_with(c, "cdc ");
  })) << p.stderr_text();
  ASSERT_TRUE(db.sql().exec(kRewrites));
  ASSERT_TRUE(wait_until([&] { return resnapshot_done(p); }, 60s)) << p.stderr_text();
  ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  const std::string q =
      "SELECT id::text, v::text, n::text, r::text, ts, u::text, g::text FROM t ORDER BY t.id";
  EXPECT_EQ(db.sql().query(q), dst.sql().query(q));
  EXPECT_EQ(dst.sql().scalar("SELECT count(*) FROM t"), db.sql().scalar("SELECT count(*) FROM t"));
  std::filesystem::remove_all(dir);
}

// A second rewriting DDL while the first one's re-read is half-way: the chunks read so far lack
// the new column's values, so the table's snapshot starts over (and still converges).
TEST(PostgresDdlToSqlite, ARewriteDuringTheReReadStartsItOver) {
  TestDb db("ddl_rewrite_twice");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(
      db.sql().exec("CREATE TABLE t (id int PRIMARY KEY, n int);"
                    "INSERT INTO t SELECT g, g FROM generate_series(1, 3000) g;"));
  auto dir = e2e::make_temp_dir("pg-ddl-rewrite-twice");
  PipelineFile f;
  f.id = "ddl_rewrite_twice";
  f.url = db.url();
  f.tables = {"public.t"};
  f.max_records = 50;
  f.source_settings = {{"ddl.capture", "true"}, {"snapshot.chunk_size", "20"}};
  e2e::write_file(dir / "p.yaml", f.yaml());
  Process p({"run", "p.yaml", "--idle-exit", "2"}, dir);
  ASSERT_TRUE(wait_for_checkpoint(p, dir, "ddl_rewrite_twice", [](const std::string& c) {
    return starts_with(c, "cdc ");
  })) << p.stderr_text();
  ASSERT_TRUE(db.sql().exec("ALTER TABLE t ADD r int DEFAULT (random() * 1000000)::int;"));
  ASSERT_TRUE(wait_for_checkpoint(p, dir, "ddl_rewrite_twice", [](const std::string& c) {
    return c.find(" isnap 1 ") != std::string::npos && c.find(" k") != std::string::npos;
  })) << p.stderr_text();
  ASSERT_TRUE(db.sql().exec("ALTER TABLE t ADD s text DEFAULT md5(random()::text);"));
  ASSERT_TRUE(wait_until([&] { return resnapshot_done(p); }, 60s)) << p.stderr_text();
  ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  EXPECT_NE(p.stderr_text().find("incremental snapshot of public.t starts over"), std::string::npos)
      << p.stderr_text();
  EXPECT_EQ(compare_tables(db.sql(), "SELECT id::text, n::text, r::text, s FROM t ORDER BY t.id",
                           dir / "out.db", "SELECT id, n, r, s FROM t ORDER BY id"),
            0);
  std::filesystem::remove_all(dir);
}

// ── without ddl.capture: DDL made while sluice was stopped ─────────────────

// The tables' column shapes are kept with the checkpoints, so the first Relation message after
// a restart is compared with them: a drop while stopped is mirrored, a rename while stopped
// stops naming ddl.capture (never a new NULL column beside a stale one).
TEST(PostgresDdlToSqlite, DdlWhileStoppedIsSeenAfterTheRestart) {
  TestDb db("ddl_stopped");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(
      db.sql().exec("CREATE TABLE t (id int PRIMARY KEY, a text, n int);"
                    "INSERT INTO t SELECT g, 'a' || g, g FROM generate_series(1, 50) g;"));
  auto dir = e2e::make_temp_dir("pg-ddl-stopped");
  PipelineFile f;
  f.id = "ddl_stopped";
  f.url = db.url();
  f.tables = {"public.t"};
  e2e::write_file(dir / "p.yaml", f.yaml());
  ASSERT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "1"}, dir, 60s), 0);
  auto columns = [&] {
    std::string out;
    e2e::Db lite(dir / "out.db");
    lite.query("SELECT name FROM pragma_table_info('t') ORDER BY cid",
               [&](sqlite3_stmt* st) { out += e2e::column_text(st, 0) + " "; });
    return out;
  };
  ASSERT_EQ(columns(), "id a n ");
  // Stopped: a drop (mirrored at the restart) ...
  ASSERT_TRUE(db.sql().exec("ALTER TABLE t DROP n; INSERT INTO t VALUES (51, 'a51');"));
  ASSERT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "1"}, dir, 60s), 0);
  EXPECT_EQ(columns(), "id a ");
  EXPECT_EQ(compare_tables(db.sql(), "SELECT id::text, a FROM t ORDER BY t.id", dir / "out.db",
                           "SELECT id, a FROM t ORDER BY id"),
            0);
  // ... and a rename, which the stream cannot tell from a drop plus add: a clear stop.
  ASSERT_TRUE(db.sql().exec("ALTER TABLE t RENAME a TO b; INSERT INTO t VALUES (52, 'b52');"));
  Process p({"run", "p.yaml", "--idle-exit", "1"}, dir);
  const int rc = p.wait_for(60s);
  EXPECT_GT(rc, 0) << p.stderr_text();
  EXPECT_NE(p.stderr_text().find("ddl.capture: true"), std::string::npos) << p.stderr_text();
  EXPECT_NE(p.stderr_text().find("\"a\" is gone and column \"b\" is new"), std::string::npos)
      << p.stderr_text();
  EXPECT_EQ(columns(), "id a ");
  std::filesystem::remove_all(dir);
}

// With `snapshot.mode: never` no snapshot stores the tables' shapes: they are read from the
// catalogue at the fresh slot's point instead, so a rename before the table's first change is
// still a change — made while sluice was stopped after its first start, or while it streams —
// and stops naming ddl.capture (without that baseline the renamed shape was silently taken as
// the first one: a new column where the old one's values belong).
TEST(PostgresDdlToSqlite, WithoutSnapshotARenameBeforeTheFirstChangeStopsClearly) {
  TestDb db("ddl_nosnap");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(
      db.sql().exec("CREATE TABLE t (id int PRIMARY KEY, a text);"
                    "INSERT INTO t SELECT g, 'a' || g FROM generate_series(1, 20) g;"));
  auto dir = e2e::make_temp_dir("pg-ddl-nosnap");
  PipelineFile f;
  f.id = "ddl_nosnap";
  f.url = db.url();
  f.tables = {"public.t"};
  f.source_settings = {{"snapshot.mode", "never"}};
  e2e::write_file(dir / "p.yaml", f.yaml());
  auto clear_stop = [](const Process& p) {
    const std::string err = p.stderr_text();
    return err.find("ddl.capture: true") != std::string::npos &&
           err.find("\"a\" is gone and column \"b\" is new") != std::string::npos;
  };
  {  // The slot is created; nothing changes before the stop.
    Process p({"run", "p.yaml", "--idle-exit", "1"}, dir);
    ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  }
  ASSERT_TRUE(db.sql().exec("ALTER TABLE t RENAME a TO b; INSERT INTO t VALUES (21, 'b21');"));
  {
    Process p({"run", "p.yaml", "--idle-exit", "1"}, dir);
    EXPECT_GT(p.wait_for(60s), 0) << p.stderr_text();
    EXPECT_TRUE(clear_stop(p)) << p.stderr_text();
  }
  std::filesystem::remove_all(dir);

  // The same in one run: the rename right after the start, before any change.
  ASSERT_TRUE(db.sql().exec("CREATE TABLE u (id int PRIMARY KEY, a text);"));
  dir = e2e::make_temp_dir("pg-ddl-nosnap");
  f.id = "ddl_nosnap_run";
  f.tables = {"public.u"};
  e2e::write_file(dir / "p.yaml", f.yaml());
  Process p({"run", "p.yaml", "--idle-exit", "3"}, dir);
  ASSERT_TRUE(wait_until(
      [&] { return p.stderr_text().find("streaming changes from slot") != std::string::npos; }, 30s,
      20ms))
      << p.stderr_text();
  ASSERT_TRUE(db.sql().exec("ALTER TABLE u RENAME a TO b; INSERT INTO u VALUES (1, 'b1');"));
  EXPECT_GT(p.wait_for(60s), 0) << p.stderr_text();
  EXPECT_TRUE(clear_stop(p)) << p.stderr_text();
  std::filesystem::remove_all(dir);
}

// With ddl.capture the same rename is applied: the destination column is renamed.
TEST(PostgresDdlToSqlite, WithoutSnapshotAndWithDdlCaptureARenameBeforeTheFirstChangeIsApplied) {
  TestDb db("ddl_nosnap_cap");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id int PRIMARY KEY, a text);"));
  auto dir = e2e::make_temp_dir("pg-ddl-nosnap-cap");
  PipelineFile f;
  f.id = "ddl_nosnap_cap";
  f.url = db.url();
  f.tables = {"public.t"};
  f.source_settings = {{"snapshot.mode", "never"}, {"ddl.capture", "true"}};
  e2e::write_file(dir / "p.yaml", f.yaml());
  {
    Process p({"run", "p.yaml", "--idle-exit", "1"}, dir);
    ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  }
  ASSERT_TRUE(
      db.sql().exec("INSERT INTO t VALUES (1, 'a1'); ALTER TABLE t RENAME a TO b;"
                    "INSERT INTO t VALUES (2, 'b2');"));
  Process p({"run", "p.yaml", "--idle-exit", "1"}, dir);
  ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  EXPECT_EQ(compare_tables(db.sql(), "SELECT id::text, b FROM t ORDER BY t.id", dir / "out.db",
                           "SELECT id, b FROM t ORDER BY id"),
            0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sluice::pgtest
