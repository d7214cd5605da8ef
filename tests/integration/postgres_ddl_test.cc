// Schema changes and slot safety of the postgres source, in-process against the real PostgreSQL
// server: with `ddl.capture: true` (event trigger → sluice.ddl_log in the publication) every DDL
// kind becomes schema records in stream order; without it, what Relation messages tell apart is
// forwarded and the rest stops with an error naming the setting; a slot lost or moved under a
// checkpoint stops with the LSN range that was lost.
#include <gtest/gtest.h>

#include "integration/pg_harness.h"
#include "sluice/schema_change.h"
#include "sluice/value.h"

namespace sluice::pgtest {
namespace {

ConnectorContext context(const std::string& id) {
  return ConnectorContext{id, "postgres", nullptr};
}

struct Opened {
  std::unique_ptr<Source> src;
  std::string error;  // open's error message, "" when it opened
};

Opened open_with(TestDb& db, const std::string& id, const std::string& tables,
                 std::map<std::string, std::string> extra = {},
                 const std::optional<std::string>& checkpoint = std::nullopt,
                 const std::string& url = "") {
  extra["url"] = url.empty() ? db.url() : url;
  extra["tables"] = tables;
  Opened o;
  o.src = make_source(extra);
  if (!o.src) return o;
  Status st = o.src->open(context(id), checkpoint);
  if (!st.ok()) {
    o.error = st.error().message();
    o.src.reset();
  }
  return o;
}

std::map<std::string, std::string> capture() { return {{"ddl.capture", "true"}}; }

// "<op> <after>" per record: the order and content of what the source emitted.
std::vector<std::string> summary(const std::vector<const Record*>& rs) {
  std::vector<std::string> out;
  for (const Record* r : rs)
    out.push_back(std::string(operation_name(r->op)) + " " + to_debug_string(r->after));
  return out;
}

// Reads until the source fails; the error message ("" if it never failed within `timeout`).
std::string read_error(Source& src, std::chrono::milliseconds timeout = 20s) {
  ReadRequest req;
  req.max_records = 1000;
  req.linger = 20ms;
  req.poll = 100ms;
  const auto until = std::chrono::steady_clock::now() + timeout;
  std::vector<std::unique_ptr<Batch>> keep;
  while (std::chrono::steady_clock::now() < until) {
    auto b = std::make_unique<Batch>(64 * 1024);
    auto st = src.read(*b, req, std::stop_token{});
    if (!st.ok()) return st.error().message();
    if (b->has_position()) src.ack(b->position());
    keep.push_back(std::move(b));
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// ── ddl.capture: true ───────────────────────────────────────────────────────

// Rename, drop, add with a (non-volatile) default, drop + re-add of a name and widenings, mixed
// with rows in the same transactions: each arrives as schema records exactly between the rows
// written before and after it, with the default old rows read.
TEST(PostgresDdl, CapturedDdlArrivesAsSchemaRecordsInStreamOrder) {
  TestDb db("ddl_capture");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(
      db.sql().exec("CREATE TABLE t (id int PRIMARY KEY, a text, n int, v varchar(10));"
                    "CREATE TABLE other (id int PRIMARY KEY);"
                    "INSERT INTO t VALUES (1, 'one', 1, 'v1');"));
  auto o = open_with(db, "t_ddl_capture", "public.t", capture());
  ASSERT_TRUE(o.src) << o.error;
  Reader reader(*o.src);
  ASSERT_TRUE(reader.read_count(1));
  ASSERT_TRUE(reader.drain());
  ASSERT_TRUE(
      db.sql().exec("BEGIN; INSERT INTO t VALUES (2, 'two', 2, 'v2'); ALTER TABLE t RENAME a TO b;"
                    "INSERT INTO t VALUES (3, 'three', 3, 'v3'); COMMIT;"));
  ASSERT_TRUE(
      db.sql().exec("ALTER TABLE t DROP n; ALTER TABLE t ADD n int DEFAULT 42;"
                    "ALTER TABLE other ADD x int;"  // not a captured table: nothing
                    "INSERT INTO t (id, b, v) VALUES (4, 'four', 'v4');"));
  ASSERT_TRUE(
      db.sql().exec("ALTER TABLE t ALTER v TYPE varchar(20), ALTER n TYPE bigint;"
                    "UPDATE t SET v = 'longer than ten' WHERE id = 1;"));
  ASSERT_TRUE(
      db.sql().exec("ALTER TABLE t ADD s text DEFAULT 'it''s {x}'; ALTER TABLE t ADD z int;"
                    "INSERT INTO t (id) VALUES (5);"));
  ASSERT_TRUE(reader.read_count(13));
  ASSERT_TRUE(reader.drain());
  const std::vector<std::string> want = {
      R"j(snapshot {"id":1,"a":"one","n":1,"v":"v1"})j",
      R"j(create {"id":2,"a":"two","n":2,"v":"v2"})j",
      R"j(schema {"change":"rename_column","column":"a","to":"b"})j",
      R"j(create {"id":3,"b":"three","n":3,"v":"v3"})j",
      R"j(schema {"change":"drop_column","column":"n"})j",
      R"j(schema {"change":"add_column","column":"n","type":"integer","default":42})j",
      R"j(create {"id":4,"b":"four","v":"v4","n":42})j",
      R"j(schema {"change":"alter_column_type","column":"v","type":"character varying(20)","from":"character varying(10)"})j",
      R"j(schema {"change":"alter_column_type","column":"n","type":"bigint","from":"integer"})j",
      R"j(update {"id":1,"b":"one","v":"longer than ten","n":42})j",
      R"j(schema {"change":"add_column","column":"s","type":"text","default":"it's {x}"})j",
      R"j(schema {"change":"add_column","column":"z","type":"integer"})j",
      R"j(create {"id":5,"b":null,"v":null,"n":42,"s":"it's {x}","z":null})j",
  };
  EXPECT_EQ(summary(reader.records()), want);
  for (const Record* r : reader.records()) {
    if (r->op != Operation::schema) continue;
    EXPECT_EQ(r->meta("schema"), "public");
    EXPECT_EQ(r->meta("table"), "t");
    EXPECT_FALSE(r->meta("commit_lsn").empty());
    EXPECT_TRUE(schema_change_of(*r).ok());
  }
  o.src->close();
}

// A restart replays the log from the checkpoint: a schema record not yet acknowledged comes
// again; one acknowledged never does. Installing again is idempotent.
TEST(PostgresDdl, CapturedDdlSurvivesARestartAndReinstallIsIdempotent) {
  TestDb db("ddl_restart");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id int PRIMARY KEY, a text);"));
  std::string checkpoint;
  {
    auto o = open_with(db, "t_ddl_restart", "public.t", capture());
    ASSERT_TRUE(o.src) << o.error;
    Reader reader(*o.src);
    ASSERT_TRUE(reader.drain());
    ASSERT_FALSE(reader.positions().empty());
    checkpoint = reader.positions().back().second;
    o.src->close();
  }
  // While sluice is away.
  ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES (1, 'x'); ALTER TABLE t RENAME a TO b;"));
  auto o = open_with(db, "t_ddl_restart", "public.t", capture(), checkpoint);
  ASSERT_TRUE(o.src) << o.error;
  Reader reader(*o.src);
  ASSERT_TRUE(reader.read_count(2));
  ASSERT_TRUE(reader.drain());
  EXPECT_EQ(
      summary(reader.records()),
      (std::vector<std::string>{R"j(create {"id":1,"a":"x"})j",
                                R"j(schema {"change":"rename_column","column":"a","to":"b"})j"}));
  EXPECT_EQ(db.sql().scalar("SELECT count(*) FROM pg_event_trigger WHERE evtname LIKE 'sluice_%'"),
            "2");
  EXPECT_EQ(db.sql().scalar("SELECT count(*) FROM sluice.ddl_state"), "1");
  o.src->close();
}

// A table renamed while captured: its rows would go to a new destination table while the old
// one goes stale, so the source stops naming both names and the recovery.
TEST(PostgresDdl, TableRenameStopsNamingBothNamesAndRecovery) {
  TestDb db("ddl_rename_table");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1);"));
  auto o = open_with(db, "t_ddl_rename_table", "public.t", capture());
  ASSERT_TRUE(o.src) << o.error;
  Reader reader(*o.src);
  ASSERT_TRUE(reader.drain());
  ASSERT_TRUE(db.sql().exec("ALTER TABLE t RENAME TO u; INSERT INTO u VALUES (2);"));
  const std::string e = read_error(*o.src);
  EXPECT_TRUE(contains(e, "\"public\".\"t\" was renamed to \"public\".\"u\"") &&
              contains(e, "table renames") && contains(e, "sluice cleanup"))
      << e;
  o.src->close();
}

// The binary: the pipeline stops with a non-zero exit and an error line naming the tables and
// the recovery; nothing written after the change reaches the destination.
TEST(PostgresDdl, BinaryExitsNonZeroWithOneErrorLineOnATableRename) {
  TestDb db("ddl_binary");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1);"));
  auto dir = e2e::make_temp_dir("pg-ddl-binary");
  PipelineFile f;
  f.id = "ddl_binary";
  f.url = db.url();
  f.tables = {"public.t"};
  f.source_settings = {{"ddl.capture", "true"}};
  e2e::write_file(dir / "p.yaml", f.yaml());
  e2e::Process p({"run", "p.yaml"}, dir);
  ASSERT_TRUE(wait_for_checkpoint(p, dir, "ddl_binary", [](const std::string& c) {
    return starts_with(c, "cdc ");
  })) << p.stderr_text();
  ASSERT_TRUE(
      db.sql().exec("INSERT INTO t VALUES (2); ALTER TABLE t RENAME TO t2; INSERT INTO t2 "
                    "VALUES (3);"));
  const int rc = p.wait_for(60s);
  EXPECT_NE(rc, 0) << p.stderr_text();
  EXPECT_GT(rc, 0) << "still running or killed: " << p.stderr_text();
  int errors = 0;
  for (const std::string& line : lines_of(p.stderr_text()))
    if (is_error_log_line(line) || line.rfind("sluice:", 0) == 0)
      errors += line.find("was renamed to \"public\".\"t2\"") != std::string::npos;
  EXPECT_GE(errors, 1) << p.stderr_text();
  EXPECT_EQ(db.sql().scalar("SELECT count(*) FROM t2"), "3");
  e2e::Db out(dir / "out.db");
  std::string n;
  out.query("SELECT count(*) FROM t", [&](sqlite3_stmt* st) { n = e2e::column_text(st, 0); });
  EXPECT_TRUE(n == "1" || n == "2") << n << " rows: row 3 came after the change";
  bool t2 = false;
  out.query("SELECT 1 FROM sqlite_master WHERE name = 't2'", [&](sqlite3_stmt*) { t2 = true; });
  EXPECT_FALSE(t2) << "rows went to a new table";
  std::filesystem::remove_all(dir);
}

// A non-widening type change of a key column stops (its old keys cannot be told from new ones);
// of another column, the column is made anew and the table read again (PostgresDdlToSqlite).
TEST(PostgresDdl, NarrowingKeyTypeChangeStops) {
  TestDb db("ddl_narrow");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id varchar(20) PRIMARY KEY, v int);"));
  auto o = open_with(db, "t_ddl_narrow", "public.t", capture());
  ASSERT_TRUE(o.src) << o.error;
  Reader reader(*o.src);
  ASSERT_TRUE(reader.drain());
  ASSERT_TRUE(db.sql().exec("ALTER TABLE t ALTER id TYPE varchar(5);"));
  const std::string e = read_error(*o.src);
  EXPECT_TRUE(contains(e, "key column \"id\"") && contains(e, "character varying(20)") &&
              contains(e, "character varying(5)") && contains(e, "widenings of key columns"))
      << e;
  o.src->close();
}

// Without superuser, the install is refused with what to do; once a superuser installed it (the
// SQL in docs/schema-changes.md), the same role runs.
TEST(PostgresDdl, WithoutSuperuserTheErrorNamesTheManualInstall) {
  TestDb db("ddl_nosuper");
  ASSERT_TRUE(db.ok());
  db.admin().exec("DROP ROLE IF EXISTS sluice_ddl_user", true);
  ASSERT_TRUE(db.admin().exec(
      "CREATE ROLE sluice_ddl_user LOGIN REPLICATION PASSWORD 'pw'; GRANT ALL ON DATABASE " +
      db.name() + " TO sluice_ddl_user;"));
  ASSERT_TRUE(db.sql().exec(
      "CREATE TABLE t (id int PRIMARY KEY); ALTER TABLE t OWNER TO sluice_ddl_user;"));
  const std::string url = url_with_credentials(db.url(), "sluice_ddl_user", "pw");
  auto o = open_with(db, "t_ddl_nosuper", "public.t", capture(), std::nullopt, url);
  EXPECT_FALSE(o.src);
  EXPECT_TRUE(contains(o.error, "ddl.capture") && contains(o.error, "superuser") &&
              contains(o.error, "docs/schema-changes.md"))
      << o.error;
  EXPECT_EQ(o.error.find('\n'), std::string::npos) << o.error;
  db.sql().exec("DROP OWNED BY sluice_ddl_user CASCADE", true);
  db.admin().exec("REVOKE ALL ON DATABASE " + db.name() + " FROM sluice_ddl_user", true);
  db.admin().exec("DROP ROLE IF EXISTS sluice_ddl_user", true);
}

TEST(PostgresDdl, CleanupRemovesTheDdlCapture) {
  TestDb db("ddl_cleanup");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id int PRIMARY KEY);"));
  {
    auto o = open_with(db, "t_ddl_cleanup", "public.t", capture());
    ASSERT_TRUE(o.src) << o.error;
    EXPECT_EQ(db.sql().scalar("SELECT count(*) FROM pg_publication_tables WHERE schemaname = "
                              "'sluice' AND tablename = 'ddl_log'"),
              "1");
    o.src->close();
  }
  auto src = make_source({{"url", db.url()}, {"tables", "public.t"}, {"ddl.capture", "true"}});
  ASSERT_TRUE(src);
  ASSERT_TRUE(wait_until(
      [&] {
        return db.sql().scalar(
                   "SELECT count(*) FROM pg_replication_slots WHERE active AND database = current_database()") ==
               "0";
      },
      10s));
  Status st = src->cleanup(context("t_ddl_cleanup"));
  ASSERT_TRUE(st.ok()) << st.error().message();
  EXPECT_EQ(db.sql().scalar("SELECT count(*) FROM pg_event_trigger WHERE evtname LIKE 'sluice_%'"),
            "0");
  EXPECT_EQ(db.sql().scalar("SELECT count(*) FROM pg_namespace WHERE nspname = 'sluice'"), "0");
  ASSERT_TRUE(db.sql().exec("ALTER TABLE t ADD c int;"));  // DDL still works afterwards
}

// ── without ddl.capture: Relation messages ─────────────────────────────────

TEST(PostgresDdl, WithoutCaptureAddDropAndWideningAreSchemaRecords) {
  TestDb db("ddl_relation");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec(
      "CREATE TABLE t (id int PRIMARY KEY, a text, n smallint); INSERT INTO t VALUES (1, 'one', 1);"));
  auto o = open_with(db, "t_ddl_relation", "public.t");
  ASSERT_TRUE(o.src) << o.error;
  Reader reader(*o.src);
  ASSERT_TRUE(reader.read_count(1));
  ASSERT_TRUE(reader.drain());
  ASSERT_TRUE(
      db.sql().exec("ALTER TABLE t ADD b int; INSERT INTO t VALUES (2, 'two', 2, 20);"
                    "ALTER TABLE t DROP a; INSERT INTO t VALUES (3, 3, 30);"
                    "ALTER TABLE t ALTER n TYPE bigint; INSERT INTO t VALUES (4, 4, 40);"));
  ASSERT_TRUE(reader.read_count(7));
  ASSERT_TRUE(reader.drain());
  const std::vector<std::string> want = {
      R"j(snapshot {"id":1,"a":"one","n":1})j",
      R"j(schema {"change":"add_column","column":"b","type":"integer"})j",
      R"j(create {"id":2,"a":"two","n":2,"b":20})j",
      R"j(schema {"change":"drop_column","column":"a"})j",
      R"j(create {"id":3,"n":3,"b":30})j",
      R"j(schema {"change":"alter_column_type","column":"n","type":"bigint","from":"smallint"})j",
      R"j(create {"id":4,"n":4,"b":40})j",
  };
  EXPECT_EQ(summary(reader.records()), want);
  o.src->close();
}

TEST(PostgresDdl, WithoutCaptureRenameStopsNamingDdlCapture) {
  TestDb db("ddl_rel_rename");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(
      db.sql().exec("CREATE TABLE t (id int PRIMARY KEY, a text); INSERT INTO t VALUES (1, 'x');"));
  auto o = open_with(db, "t_ddl_rel_rename", "public.t");
  ASSERT_TRUE(o.src) << o.error;
  Reader reader(*o.src);
  ASSERT_TRUE(reader.read_count(1));
  ASSERT_TRUE(reader.drain());
  ASSERT_TRUE(db.sql().exec("ALTER TABLE t RENAME a TO b; INSERT INTO t VALUES (2, 'y');"));
  const std::string e = read_error(*o.src);
  EXPECT_TRUE(contains(e, "\"a\"") && contains(e, "\"b\"") && contains(e, "ddl.capture: true"))
      << e;
  o.src->close();
}

TEST(PostgresDdl, WithoutCaptureAddWithDefaultStopsNamingDdlCapture) {
  TestDb db("ddl_rel_default");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1);"));
  auto o = open_with(db, "t_ddl_rel_default", "public.t");
  ASSERT_TRUE(o.src) << o.error;
  Reader reader(*o.src);
  ASSERT_TRUE(reader.read_count(1));
  ASSERT_TRUE(reader.drain());
  ASSERT_TRUE(db.sql().exec("ALTER TABLE t ADD d int DEFAULT 7; INSERT INTO t VALUES (2, 8);"));
  const std::string e = read_error(*o.src);
  EXPECT_TRUE(contains(e, "\"d\"") && contains(e, "default") && contains(e, "ddl.capture: true"))
      << e;
  o.src->close();
}

// An identity column numbers the rows that existed from its sequence: a value the stream never
// carried, like a default.
TEST(PostgresDdl, WithoutCaptureAddIdentityStopsNamingDdlCapture) {
  TestDb db("ddl_rel_identity");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1);"));
  auto o = open_with(db, "t_ddl_rel_identity", "public.t");
  ASSERT_TRUE(o.src) << o.error;
  Reader reader(*o.src);
  ASSERT_TRUE(reader.read_count(1));
  ASSERT_TRUE(reader.drain());
  ASSERT_TRUE(
      db.sql().exec("ALTER TABLE t ADD g int GENERATED ALWAYS AS IDENTITY; INSERT INTO t (id) "
                    "VALUES (2);"));
  const std::string e = read_error(*o.src);
  EXPECT_TRUE(contains(e, "\"g\"") && contains(e, "ddl.capture: true")) << e;
  o.src->close();
}

TEST(PostgresDdl, WithoutCaptureNarrowingStops) {
  TestDb db("ddl_rel_narrow");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(
      db.sql().exec("CREATE TABLE t (id int PRIMARY KEY, n bigint); INSERT INTO t VALUES (1, 1);"));
  auto o = open_with(db, "t_ddl_rel_narrow", "public.t");
  ASSERT_TRUE(o.src) << o.error;
  Reader reader(*o.src);
  ASSERT_TRUE(reader.read_count(1));
  ASSERT_TRUE(reader.drain());
  ASSERT_TRUE(db.sql().exec("ALTER TABLE t ALTER n TYPE int; INSERT INTO t VALUES (2, 2);"));
  const std::string e = read_error(*o.src);
  EXPECT_TRUE(contains(e, "\"n\"") && contains(e, "from bigint to integer") &&
              contains(e, "widenings only"))
      << e;
  o.src->close();
}

// ── slot and position safety ────────────────────────────────────────────────

// Streams, acknowledges, stops; returns the last position (the checkpoint).
std::string stream_a_little(TestDb& db, const std::string& id) {
  auto o = open_with(db, id, "public.t");
  EXPECT_TRUE(o.src) << o.error;
  if (!o.src) return "";
  Reader reader(*o.src);
  EXPECT_TRUE(reader.drain());
  EXPECT_TRUE(db.sql().exec("INSERT INTO t VALUES (1);"));
  EXPECT_TRUE(reader.read_count(1));
  EXPECT_TRUE(reader.drain());
  std::string pos = reader.positions().empty() ? "" : reader.positions().back().second;
  o.src->close();
  EXPECT_TRUE(wait_until(
      [&] {
        return db.sql().scalar(
                   "SELECT count(*) FROM pg_replication_slots WHERE active AND database = current_database()") ==
               "0";
      },
      10s));
  return pos;
}

TEST(PostgresSlotSafety, NormalRestartFromTheCheckpointPasses) {
  TestDb db("slot_ok");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id int PRIMARY KEY);"));
  const std::string cp = stream_a_little(db, "t_slot_ok");
  ASSERT_TRUE(starts_with(cp, "cdc ")) << cp;
  ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES (2);"));
  auto o = open_with(db, "t_slot_ok", "public.t", {}, cp);
  ASSERT_TRUE(o.src) << o.error;
  Reader reader(*o.src);
  ASSERT_TRUE(reader.read_count(1));
  EXPECT_EQ(summary(reader.records()), std::vector<std::string>{R"j(create {"id":2})j"});
  o.src->close();
}

TEST(PostgresSlotSafety, SlotRecreatedUnderTheSameNameStopsWithTheLostRange) {
  TestDb db("slot_recreated");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id int PRIMARY KEY);"));
  const std::string cp = stream_a_little(db, "t_slot_recreated");
  ASSERT_TRUE(starts_with(cp, "cdc ")) << cp;
  ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES (2);"));  // lost with the old slot
  ASSERT_EQ(db.sql().scalar(
                "SELECT count(*) FROM (SELECT pg_drop_replication_slot('sluice_t_slot_recreated'), "
                "pg_create_logical_replication_slot('sluice_t_slot_recreated', 'pgoutput')) s"),
            "1");
  auto o = open_with(db, "t_slot_recreated", "public.t", {}, cp);
  EXPECT_FALSE(o.src);
  const std::string at = cp.substr(4, cp.find(' ', 4) - 4);
  EXPECT_TRUE(contains(o.error, "are lost") && contains(o.error, at) &&
              contains(o.error, "sluice cleanup"))
      << o.error;
}

TEST(PostgresSlotSafety, SlotAdvancedBySomeoneElseStops) {
  TestDb db("slot_advanced");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id int PRIMARY KEY);"));
  const std::string cp = stream_a_little(db, "t_slot_advanced");
  ASSERT_TRUE(starts_with(cp, "cdc ")) << cp;
  ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES (2);"));
  ASSERT_FALSE(db.sql()
                   .scalar("SELECT end_lsn FROM pg_replication_slot_advance("
                           "'sluice_t_slot_advanced', pg_current_wal_lsn())")
                   .empty());
  auto o = open_with(db, "t_slot_advanced", "public.t", {}, cp);
  EXPECT_FALSE(o.src);
  EXPECT_TRUE(contains(o.error, "are lost") && contains(o.error, "sluice cleanup")) << o.error;
}

TEST(PostgresSlotSafety, SlotDroppedStopsNamingTheCheckpoint) {
  TestDb db("slot_dropped");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id int PRIMARY KEY);"));
  const std::string cp = stream_a_little(db, "t_slot_dropped");
  ASSERT_TRUE(starts_with(cp, "cdc ")) << cp;
  ASSERT_EQ(
      db.sql().scalar(
          "SELECT count(*) FROM (SELECT pg_drop_replication_slot('sluice_t_slot_dropped')) s"),
      "1");
  auto o = open_with(db, "t_slot_dropped", "public.t", {}, cp);
  EXPECT_FALSE(o.src);
  const std::string at = cp.substr(4, cp.find(' ', 4) - 4);
  EXPECT_TRUE(contains(o.error, "is gone") && contains(o.error, at) &&
              contains(o.error, "sluice cleanup"))
      << o.error;
  EXPECT_EQ(db.sql().scalar(
                "SELECT count(*) FROM pg_replication_slots WHERE database = current_database()"),
            "0")
      << "the slot must not be re-created silently";
}

}  // namespace
}  // namespace sluice::pgtest
