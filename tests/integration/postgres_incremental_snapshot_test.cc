// Incremental snapshots of the postgres source, end to end (the sluice binary, PostgreSQL →
// SQLite, the real PostgreSQL 15 server): a table added to `tables` on restart, and one named by
// `sluice snapshot` through the signal table, each read in small key-ordered chunks while a writer
// inserts, updates and deletes the rows being chunked; kill -9 in the middle of a table, then a
// resume that converges; composite text + uuid keys. Every test ends by comparing the PostgreSQL
// table with the SQLite one row by row.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "integration/pg_harness.h"

namespace sluice::pgtest {
namespace {

using e2e::Process;

// The rows of a PostgreSQL query and of an SQLite one as sorted text rows; the differences (the
// first few reported).
int compare_as_text(Conn& pg, const std::string& pg_sql, const std::filesystem::path& sqlite_path,
                    const std::string& sqlite_sql) {
  std::vector<Row> want = pg.query(pg_sql), got;
  e2e::Db db(sqlite_path);
  EXPECT_TRUE(db.query(sqlite_sql, [&](sqlite3_stmt* st) {
    Row r;
    for (int i = 0; i < sqlite3_column_count(st); ++i)
      r.push_back(sqlite3_column_type(st, i) == SQLITE_NULL
                      ? std::nullopt
                      : std::optional<std::string>(e2e::column_text(st, i)));
    got.push_back(std::move(r));
  })) << sqlite_sql;
  std::sort(want.begin(), want.end());
  std::sort(got.begin(), got.end());
  int bad = 0;
  auto show = [](const Row& r) {
    std::string s;
    for (const auto& v : r) s += (s.empty() ? "" : " | ") + (v ? *v : std::string("NULL"));
    return s;
  };
  std::vector<Row> missing, extra;
  std::set_difference(want.begin(), want.end(), got.begin(), got.end(),
                      std::back_inserter(missing));
  std::set_difference(got.begin(), got.end(), want.begin(), want.end(), std::back_inserter(extra));
  for (const Row& r : missing)
    if (bad++ < 5) ADD_FAILURE() << "missing or different at the destination: " << show(r);
  for (const Row& r : extra)
    if (bad++ < 5) ADD_FAILURE() << "at the destination, not in PostgreSQL: " << show(r);
  if (want.size() != got.size())
    ADD_FAILURE() << "PostgreSQL has " << want.size() << " rows, SQLite " << got.size();
  return bad;
}

constexpr const char* kItems =
    "CREATE TABLE items (id int PRIMARY KEY, n int NOT NULL, s text NOT NULL);"
    "INSERT INTO items SELECT g, g, md5(g::text) FROM generate_series(1, 3000) g";

// A writer transaction on `items`: an insert of a new id, updates and a delete of existing ones,
// spread over the whole key range (so over chunks not read yet, being read, and read).
std::function<bool(Conn&, uint64_t)> items_writer() {
  return [](Conn& c, uint64_t i) {
    std::mt19937_64 rng(i * 7919 + 1);
    std::string sql =
        "BEGIN;INSERT INTO items VALUES (" + std::to_string(100000 + i) + ", 0, 'new');";
    for (int k = 0; k < 3; ++k)
      sql += "UPDATE items SET n = n + 1, s = 'u" + std::to_string(i) +
             "' WHERE id = " + std::to_string(rng() % 3000 + 1) + ";";
    sql += "DELETE FROM items WHERE id = " + std::to_string(rng() % 3000 + 1) + ";COMMIT;";
    return c.exec(sql);
  };
}

int compare_items(TestDb& db, const std::filesystem::path& dir) {
  return compare_as_text(db.sql(), "SELECT id::text, n::text, s FROM items", dir / "out.db",
                         "SELECT id, n, s FROM items");
}

PipelineFile items_pipeline(TestDb& db, const std::string& id, std::vector<std::string> tables) {
  PipelineFile f;
  f.id = id;
  f.url = db.url();
  f.tables = std::move(tables);
  f.max_records = 500;
  f.source_settings["snapshot.chunk_size"] = "100";
  return f;
}

// ── a table added to `tables` on restart ───────────────────────────────────

TEST(PostgresIncrementalSnapshot, TableAddedOnRestartIsCopiedWhileAWriterChangesItsRows) {
  TestDb db("inc_added");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE other (id int PRIMARY KEY, v text)"));
  ASSERT_TRUE(db.sql().exec(kItems));
  auto dir = e2e::make_temp_dir("pg-inc-added");
  // First run: only `other`.
  e2e::write_file(dir / "p.yaml", items_pipeline(db, "inc_added", {"public.other"}).yaml());
  ASSERT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "1"}, dir, std::chrono::seconds(60)),
            0);
  ASSERT_TRUE(starts_with(checkpoint_of(dir, "inc_added"), "cdc "));
  // Second run lists `items` too: its 3,000 rows are read in chunks of 100 while the writer runs
  // and `other` keeps streaming.
  e2e::write_file(dir / "p.yaml",
                  items_pipeline(db, "inc_added", {"public.other", "public.items"}).yaml());
  Writer writer(db.url(), items_writer(), 2ms);
  Process p({"run", "p.yaml", "--idle-exit", "2"}, dir);
  ASSERT_TRUE(wait_for_checkpoint(p, dir, "inc_added", [](const std::string& c) {
    return starts_with(c, "v2 cdc ") && c.find(" isnap 1 ") != std::string::npos &&
           c.find(" k") != std::string::npos;  // mid-table
  })) << p.stderr_text();
  ASSERT_TRUE(db.sql().exec("INSERT INTO other VALUES (1, 'streamed meanwhile')"));
  ASSERT_TRUE(wait_until(
      [&] {
        return p.stderr_text().find(
                   "incremental snapshot of public.items "
                   "complete") != std::string::npos;
      },
      60s))
      << p.stderr_text();
  writer.stop();
  EXPECT_FALSE(writer.failed());
  ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  EXPECT_TRUE(starts_with(checkpoint_of(dir, "inc_added"), "cdc "))
      << checkpoint_of(dir, "inc_added");
  EXPECT_EQ(compare_items(db, dir), 0);
  EXPECT_EQ(compare_as_text(db.sql(), "SELECT id::text, v FROM other", dir / "out.db",
                            "SELECT id, v FROM other"),
            0);
  std::filesystem::remove_all(dir);
}

// ── a table taken out of `tables`, then listed again ───────────────────────

// Three runs: [a, b]; [a] after b took an update, a delete and an insert; [a, b] again after b
// gained a column and more changes. The middle run must deliver none of b's changes (the
// publication still carries them when it is the user's), and the last must copy b anew, so that it
// ends equal to the source. With `own_publication`, the pipeline names a publication the user
// created for both tables: sluice leaves it as it is, and only the checkpoint tells that b was
// listed again.
void table_listed_again(const std::string& id, bool own_publication) {
  TestDb db(id);
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE a (id int PRIMARY KEY, v text)"));
  ASSERT_TRUE(db.sql().exec("CREATE TABLE b (id int PRIMARY KEY, v text)"));
  ASSERT_TRUE(db.sql().exec("INSERT INTO b SELECT g, 'v' || g FROM generate_series(1, 300) g"));
  if (own_publication) {
    ASSERT_TRUE(db.sql().exec("CREATE PUBLICATION " + id + "_mine FOR TABLE a, b"));
  }
  auto dir = e2e::make_temp_dir("pg-" + id);
  auto pipeline = [&](std::vector<std::string> tables) {
    PipelineFile f = items_pipeline(db, id, std::move(tables));
    if (own_publication) f.source_settings["publication"] = id + "_mine";
    return f.yaml();
  };
  auto run = [&](const std::string& why) {
    Process p({"run", "p.yaml", "--idle-exit", "2"}, dir);
    EXPECT_EQ(p.wait_for(90s), 0) << why << "\n" << p.stderr_text();
    return p.stderr_text();
  };
  e2e::write_file(dir / "p.yaml", pipeline({"public.a", "public.b"}));
  run("first run, [a, b]");
  ASSERT_EQ(
      compare_as_text(db.sql(), "SELECT id::text, v FROM b", dir / "out.db", "SELECT id, v FROM b"),
      0);
  // b out of `tables`: its changes meanwhile must not reach the destination.
  ASSERT_TRUE(db.sql().exec(
      "UPDATE b SET v = 'changed' WHERE id <= 10; DELETE FROM b WHERE id BETWEEN 11 AND 20;"
      "INSERT INTO b VALUES (1000, 'inserted'); INSERT INTO a VALUES (1, 'a while b is out')"));
  e2e::write_file(dir / "p.yaml", pipeline({"public.a"}));
  const std::string second = run("second run, [a]");
  if (!own_publication) {
    EXPECT_NE(second.find("took \"public\".\"b\" out of publication"), std::string::npos) << second;
  }
  {
    e2e::Db out(dir / "out.db");
    EXPECT_EQ(out.scalar("SELECT count(*) FROM a WHERE id = 1"), 1);
    EXPECT_EQ(out.scalar("SELECT count(*) FROM b WHERE v = 'changed'"), 0);
    EXPECT_EQ(out.scalar("SELECT count(*) FROM b WHERE id BETWEEN 11 AND 20"), 10);
    EXPECT_EQ(out.scalar("SELECT count(*) FROM b WHERE id = 1000"), 0);
  }
  if (own_publication) {  // a user's publication keeps its tables
    EXPECT_EQ(db.sql()
                  .query("SELECT 1 FROM pg_publication_tables WHERE pubname = '" + id +
                         "_mine' AND tablename = 'b'")
                  .size(),
              1u);
  }
  // A column with a default: the rows that existed read 5, a value no change carried. Without
  // ddl.capture a table still streaming stops on it; b is copied anew, so its rows carry it.
  ASSERT_TRUE(
      db.sql().exec("ALTER TABLE b ADD COLUMN w int DEFAULT 5; UPDATE b SET v = 'later', w = 8 "
                    "WHERE id = 30"));
  // b listed again: copied while it streams.
  e2e::write_file(dir / "p.yaml", pipeline({"public.a", "public.b"}));
  ASSERT_TRUE(db.sql().exec("INSERT INTO b VALUES (1001, 'after', 9)"));
  const std::string third = run("third run, [a, b] again");
  EXPECT_NE(third.find("incremental snapshot of the table(s) added to `tables`: public.b"),
            std::string::npos)
      << third;
  EXPECT_EQ(compare_as_text(db.sql(), "SELECT id::text, v, w::text FROM b", dir / "out.db",
                            "SELECT id, v, w FROM b"),
            0);
  EXPECT_EQ(
      compare_as_text(db.sql(), "SELECT id::text, v FROM a", dir / "out.db", "SELECT id, v FROM a"),
      0);
  std::filesystem::remove_all(dir);
}

TEST(PostgresIncrementalSnapshot,
     ATableTakenOutOfTablesLeavesThePublicationAndListedAgainIsCopied) {
  table_listed_again("inc_relisted", false);
}

TEST(PostgresIncrementalSnapshot, AUsersPublicationKeepsATableTakenOutOfTablesButItIsNotDelivered) {
  table_listed_again("inc_relisted_own", true);
}

// ── rows far larger than the ones before them ──────────────────────────────

// 40 rows of 100 bytes, then 20 of 512 KiB: the first chunk and the limits sized from it see only
// small rows, so the chunk that reaches the large ones would hold up to `snapshot.chunk_size` of
// them (10 MiB here) unless the read stops at the batch's bytes.
TEST(PostgresIncrementalSnapshot, LargeRowsAfterSmallOnesKeepEachChunkWithinTheBatchBytes) {
  TestDb db("inc_large");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE other (id int PRIMARY KEY, v text)"));
  ASSERT_TRUE(db.sql().exec("CREATE TABLE blobs (id int PRIMARY KEY, b text)"));
  ASSERT_TRUE(
      db.sql().exec("INSERT INTO blobs SELECT g, repeat('s', 100) FROM generate_series(1, 40) g"));
  ASSERT_TRUE(
      db.sql().exec("INSERT INTO blobs SELECT g, repeat(chr(65 + g % 26), 524288) FROM "
                    "generate_series(41, 60) g"));
  auto dir = e2e::make_temp_dir("pg-inc-large");
  e2e::write_file(dir / "p.yaml", items_pipeline(db, "inc_large", {"public.other"}).yaml());
  ASSERT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "1"}, dir, std::chrono::seconds(60)),
            0);
  constexpr int64_t kMaxBytes = 2 << 20;
  PipelineFile f = items_pipeline(db, "inc_large", {"public.other", "public.blobs"});
  f.max_bytes = kMaxBytes;
  e2e::write_file(dir / "p.yaml", f.yaml());
  Process p({"run", "p.yaml", "--idle-exit", "2", "--log-level", "debug"}, dir);
  ASSERT_EQ(p.wait_for(120s), 0) << p.stderr_text();
  // 60 rows; 20 rows of 512 KiB at most 4 per chunk; each chunk within the batch's bytes and
  // at most the one row that reached them.
  expect_incremental_chunks_within(p.stderr_text(), "public.blobs", kMaxBytes, 600 << 10, 60, 6);
  EXPECT_EQ(compare_as_text(db.sql(), "SELECT id::text, b FROM blobs", dir / "out.db",
                            "SELECT id, b FROM blobs"),
            0);
  std::filesystem::remove_all(dir);
}

// ── kill -9 in the middle of a table ───────────────────────────────────────

TEST(PostgresIncrementalSnapshot, KillNineMidTableThenResumeConverges) {
  TestDb db("inc_kill");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE other (id int PRIMARY KEY, v text)"));
  ASSERT_TRUE(db.sql().exec(kItems));
  auto dir = e2e::make_temp_dir("pg-inc-kill");
  e2e::write_file(dir / "p.yaml", items_pipeline(db, "inc_kill", {"public.other"}).yaml());
  ASSERT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "1"}, dir, std::chrono::seconds(60)),
            0);
  e2e::write_file(dir / "p.yaml",
                  items_pipeline(db, "inc_kill", {"public.other", "public.items"}).yaml());
  Writer writer(db.url(), items_writer(), 2ms);
  {
    Process p({"run", "p.yaml"}, dir);
    ASSERT_TRUE(wait_for_checkpoint(p, dir, "inc_kill", [](const std::string& c) {
      return c.find(" isnap 1 ") != std::string::npos && c.find(" k") != std::string::npos;
    })) << p.stderr_text();
    p.signal(SIGKILL);
    EXPECT_EQ(p.wait(), 128 + SIGKILL);
  }
  const std::string at_kill = checkpoint_of(dir, "inc_kill");
  ASSERT_NE(at_kill.find(" isnap 1 "), std::string::npos) << at_kill;
  // Changes while sluice is down, to rows copied and not yet copied.
  ASSERT_TRUE(
      db.sql().exec("UPDATE items SET s = 'down' WHERE id % 97 = 0;"
                    "DELETE FROM items WHERE id % 89 = 0"));
  Process p2({"run", "p.yaml", "--idle-exit", "2"}, dir);
  ASSERT_TRUE(wait_until(
      [&] {
        return p2.stderr_text().find(
                   "incremental snapshot of public.items "
                   "complete") != std::string::npos;
      },
      60s))
      << p2.stderr_text();
  writer.stop();
  EXPECT_FALSE(writer.failed());
  ASSERT_EQ(p2.wait_for(60s), 0) << p2.stderr_text();
  EXPECT_NE(p2.stderr_text().find("incremental snapshot pending: public.items"), std::string::npos)
      << p2.stderr_text();
  EXPECT_EQ(compare_items(db, dir), 0);
  std::filesystem::remove_all(dir);
}

// ── a signal through `sluice snapshot`, composite text + uuid key ──────────

TEST(PostgresIncrementalSnapshot, SnapshotCommandSignalsACompositeTextUuidKeyedTable) {
  TestDb db("inc_signal");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec(
      "CREATE TABLE sluice_signals (id varchar(42) PRIMARY KEY, type varchar(32) NOT NULL, data "
      "varchar(2048));"
      "CREATE TABLE pairs (region text, uid uuid, v int NOT NULL, PRIMARY KEY (region, uid));"
      "INSERT INTO pairs SELECT 'r' || (g % 7), md5(g::text)::uuid, g FROM generate_series(1, "
      "2000) g"));
  auto dir = e2e::make_temp_dir("pg-inc-signal");
  PipelineFile f;
  f.id = "inc_signal";
  f.url = db.url();
  f.tables = {"public.pairs"};
  f.max_records = 500;
  f.source_settings = {{"snapshot.mode", "never"},  // rows only ever come from the signal
                       {"snapshot.chunk_size", "150"},
                       {"signal.table", "public.sluice_signals"}};
  e2e::write_file(dir / "p.yaml", f.yaml());
  // Bad input: a table the pipeline does not capture is a one-line usage error.
  EXPECT_EQ(e2e::run_sluice({"snapshot", "p.yaml", "inc_signal", "public.nope"}, dir), 2);
  Process p({"run", "p.yaml", "--idle-exit", "3"}, dir);
  ASSERT_TRUE(wait_for_checkpoint(p, dir, "inc_signal", [](const std::string& c) {
    return starts_with(c, "cdc ");
  })) << p.stderr_text();
  Writer writer(
      db.url(),
      [](Conn& c, uint64_t i) {
        const std::string g = std::to_string(i % 2000 + 1);
        return c.exec("BEGIN;UPDATE pairs SET v = -v WHERE uid = md5('" + g +
                      "')::uuid;DELETE FROM pairs WHERE uid = md5('" +
                      std::to_string((i * 13) % 2000 + 1) +
                      "')::uuid;INSERT INTO pairs VALUES ('w', gen_random_uuid(), " +
                      std::to_string(i) + ");COMMIT;");
      },
      2ms);
  ASSERT_EQ(e2e::run_sluice({"snapshot", "p.yaml", "inc_signal", "public.pairs"}, dir), 0);
  ASSERT_TRUE(wait_until(
      [&] {
        return p.stderr_text().find(
                   "incremental snapshot of public.pairs "
                   "complete") != std::string::npos;
      },
      60s))
      << p.stderr_text();
  writer.stop();
  EXPECT_FALSE(writer.failed());
  ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  EXPECT_EQ(compare_as_text(db.sql(), "SELECT region, uid::text, v::text FROM pairs",
                            dir / "out.db", "SELECT region, uid, v FROM pairs"),
            0);
  // The signal table's rows are consumed, not delivered.
  e2e::Db out(dir / "out.db");
  bool has_signals = false;
  EXPECT_TRUE(out.query("SELECT name FROM sqlite_master WHERE name = 'sluice_signals'",
                        [&](sqlite3_stmt*) { has_signals = true; }));
  EXPECT_FALSE(has_signals);
  std::filesystem::remove_all(dir);
}

// ── in-process: markers and the records themselves ─────────────────────────

namespace inproc {

std::unique_ptr<Source> open_source(TestDb& db, const std::string& id, const std::string& tables,
                                    const std::optional<std::string>& checkpoint,
                                    std::map<std::string, std::string> extra = {}) {
  extra["url"] = db.url();
  extra["tables"] = tables;
  auto src = make_source(extra);
  if (!src) return nullptr;
  if (Status st = src->open(ConnectorContext{id, "postgres", nullptr}, checkpoint); !st.ok()) {
    ADD_FAILURE() << "open failed: " << st.error().message();
    return nullptr;
  }
  return src;
}

std::string_view meta_of(const Record* r, std::string_view name) {
  const Value* v = r->metadata.find(name);
  return v ? v->as_text() : std::string_view();
}

// Index of the marker `what` of `table`, or -1.
int marker_at(const std::vector<const Record*>& rs, std::string_view table, std::string_view what) {
  for (size_t i = 0; i < rs.size(); ++i)
    if (rs[i]->op == Operation::marker && meta_of(rs[i], meta::kTable) == table &&
        meta_of(rs[i], meta::kMarker) == what)
      return int(i);
  return -1;
}

}  // namespace inproc

TEST(PostgresIncrementalSnapshot, MarkersBoundEachTableOfTheInitialAndOfAnIncrementalSnapshot) {
  TestDb db("inc_markers");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec(
      "CREATE TABLE a (id int PRIMARY KEY); INSERT INTO a SELECT generate_series(1, 10);"
      "CREATE TABLE b (id int PRIMARY KEY, v text); INSERT INTO b SELECT g, 'v' || g FROM "
      "generate_series(1, 250) g;"
      "CREATE TABLE nokey (v int); INSERT INTO nokey VALUES (1)"));
  std::string checkpoint;
  {
    auto src = inproc::open_source(db, "inc_markers", "public.a", std::nullopt);
    ASSERT_TRUE(src);
    Reader reader(*src);
    reader.keep_control_records();
    ASSERT_TRUE(reader.drain());
    const auto& rs = reader.records();
    const int begin = inproc::marker_at(rs, "a", meta::kSnapshotBegin);
    const int end = inproc::marker_at(rs, "a", meta::kSnapshotEnd);
    ASSERT_EQ(begin, 0);
    ASSERT_EQ(end, 11);  // after the 10 rows
    for (int i = 1; i < end; ++i) EXPECT_EQ(rs[size_t(i)]->op, Operation::snapshot);
    checkpoint = reader.positions().back().second;
    src->close();
  }
  ASSERT_TRUE(starts_with(checkpoint, "cdc ")) << checkpoint;
  {
    // `b` added: read in chunks of 100 while streaming; `a`'s changes keep coming.
    auto src = inproc::open_source(db, "inc_markers", "[public.a, public.b]", checkpoint,
                                   {{"snapshot.chunk_size", "100"}});
    ASSERT_TRUE(src);
    ASSERT_TRUE(db.sql().exec("INSERT INTO a VALUES (11)"));
    Reader reader(*src);
    reader.keep_control_records();
    ASSERT_TRUE(reader.read_until(
        [](const auto& rs) { return inproc::marker_at(rs, "b", meta::kSnapshotEnd) >= 0; }));
    const auto& rs = reader.records();
    const int begin = inproc::marker_at(rs, "b", meta::kSnapshotBegin);
    const int end = inproc::marker_at(rs, "b", meta::kSnapshotEnd);
    ASSERT_GE(begin, 0);
    std::vector<int64_t> ids;
    for (int i = begin + 1; i < end; ++i) {
      const Record* r = rs[size_t(i)];
      if (r->op != Operation::snapshot) continue;
      EXPECT_EQ(inproc::meta_of(r, meta::kTable), "b");
      ids.push_back(r->key.find("id")->as_int64());
    }
    ASSERT_EQ(ids.size(), 250u);
    for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(ids[i], int64_t(i) + 1);  // key order
    EXPECT_GE(inproc::marker_at(rs, "b", meta::kSnapshotBegin), 0);
    bool streamed_a = false;
    for (const Record* r : rs)
      if (r->op == Operation::create && inproc::meta_of(r, meta::kTable) == "a") streamed_a = true;
    EXPECT_TRUE(streamed_a);
    // The positions while `b` was pending carried it; the last one no longer does.
    bool pending_seen = false;
    for (const auto& [n, pos] : reader.positions())
      if (pos.find(" isnap 1 ") != std::string::npos) pending_seen = true;
    EXPECT_TRUE(pending_seen);
    ASSERT_TRUE(reader.drain());
    checkpoint = reader.positions().back().second;
    EXPECT_TRUE(starts_with(checkpoint, "cdc ")) << checkpoint;
    src->close();
  }
  {
    // A table without a primary key cannot be chunked: a clear error naming it.
    auto src =
        inproc::open_source(db, "inc_markers", "[public.a, public.b, public.nokey]", checkpoint);
    ASSERT_TRUE(src);
    ReadRequest req;
    req.max_records = 100;
    req.poll = 100ms;
    req.linger = 20ms;
    Batch batch;
    auto r = src->read(batch, req, std::stop_token{});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message().find("nokey"), std::string::npos) << r.error().message();
    EXPECT_NE(r.error().message().find("primary key"), std::string::npos) << r.error().message();
    src->close();
  }
}

}  // namespace
}  // namespace sluice::pgtest
