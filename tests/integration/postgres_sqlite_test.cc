// The sluice binary, PostgreSQL → SQLite, against the real PostgreSQL 15 test server: a snapshot
// under concurrent writes, kill -9 during the snapshot, during CDC and inside one large
// transaction, truncate and unchanged TOAST end to end, and the idle heartbeat. Every test ends by
// comparing the whole PostgreSQL table with the SQLite one.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <random>
#include <sstream>

#include "integration/pg_harness.h"

namespace sluice::pgtest {
namespace {

using e2e::Process;

constexpr const char* kBigDdl =
    "CREATE TABLE big (id bigserial PRIMARY KEY, n int NOT NULL, s text NOT NULL, amount numeric(12,2) NOT NULL)";

// `width` md5s per row: 3 makes 300,000 rows about 5,400 heap pages, more than one snapshot chunk.
std::string fill_big(int64_t rows, int width = 1) {
  return "INSERT INTO big (n, s, amount) SELECT g, repeat(md5(g::text), " + std::to_string(width) +
         "), (g % 100000) / 100.0 FROM generate_series(1, " + std::to_string(rows) + ") g";
}

int compare_big(TestDb& db, const std::filesystem::path& dir) {
  return compare_tables(db.sql(),
                        "SELECT id::text, n::text, s, amount::text FROM big ORDER BY big.id",
                        dir / "out.db", "SELECT id, n, s, amount FROM big ORDER BY id");
}

// One writer transaction: inserts, updates and a delete of pseudo-random existing rows.
std::function<bool(Conn&, uint64_t)> mixed_writes(int64_t max_id, int inserts, int updates,
                                                  bool deletes) {
  return [=](Conn& c, uint64_t i) {
    std::mt19937_64 rng(i * 7919 + 13);
    std::string sql = "BEGIN;";
    for (int k = 0; k < inserts; ++k)
      sql += "INSERT INTO big (n, s, amount) VALUES (" + std::to_string(-int64_t(i)) + ", 'w" +
             std::to_string(i) + "_" + std::to_string(k) + "', 1.25);";
    for (int k = 0; k < updates; ++k)
      sql += "UPDATE big SET n = n + 1, s = md5(s), amount = amount + 0.01 WHERE id = " +
             std::to_string(int64_t(rng() % uint64_t(max_id)) + 1) + ";";
    if (deletes)
      sql += "DELETE FROM big WHERE id = " + std::to_string(int64_t(rng() % uint64_t(max_id)) + 1) +
             ";";
    sql += "COMMIT;";
    return c.exec(sql);
  };
}

PipelineFile big_pipeline(TestDb& db, const std::string& id, size_t max_records = 5000) {
  PipelineFile f;
  f.id = id;
  f.url = db.url();
  f.tables = {"public.big"};
  f.max_records = max_records;
  return f;
}

// ── snapshot under concurrent writes ────────────────────────────────────────

TEST(PostgresToSqlite, SnapshotWhileAWriterInsertsAndUpdatesEndsEqualToTheSource) {
  TestDb db("snap_writes");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec(kBigDdl));
  ASSERT_TRUE(db.sql().exec(fill_big(200000)));
  auto dir = e2e::make_temp_dir("pg-snap-writes");
  e2e::write_file(dir / "p.yaml", big_pipeline(db, "snap_writes").yaml());

  Writer writer(db.url(), mixed_writes(200000, 3, 3, true), 2ms);
  ASSERT_TRUE(wait_until([&] { return writer.steps() > 0; }, 10s));
  Process p({"run", "p.yaml", "--idle-exit", "2"}, dir);
  ASSERT_TRUE(wait_for_checkpoint(p, dir, "snap_writes", [](const std::string& c) {
    return !c.empty();
  })) << p.stderr_text();
  const uint64_t steps_in_snapshot =
      writer.steps();  // at the first checkpoint (usually mid-snapshot)
  ASSERT_TRUE(wait_for_checkpoint(p, dir, "snap_writes", [](const std::string& c) {
    return starts_with(c, "cdc ");
  })) << p.stderr_text();
  // Keep writing while changes stream, then stop: the pipeline catches up and exits when idle.
  const uint64_t at_cdc = writer.steps();
  ASSERT_TRUE(wait_until([&] { return writer.steps() >= at_cdc + 50; }, 30s));
  const uint64_t steps = writer.stop();
  EXPECT_FALSE(writer.failed());
  ASSERT_EQ(p.wait_for(120s), 0) << p.stderr_text();
  EXPECT_EQ(compare_big(db, dir), 0);
  std::cout << "writer transactions: " << steps_in_snapshot << " before the first checkpoint, "
            << at_cdc << " before the first CDC one, " << steps << " in all\n";
  std::filesystem::remove_all(dir);
}

// ── kill -9 during the snapshot ─────────────────────────────────────────────

TEST(PostgresToSqlite, KillNineDuringTheSnapshotThenResumeEndsEqualToTheSource) {
  TestDb db("snap_kill");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec(kBigDdl));
  ASSERT_TRUE(db.sql().exec(fill_big(300000, 3)));
  auto dir = e2e::make_temp_dir("pg-snap-kill");
  e2e::write_file(dir / "p.yaml", big_pipeline(db, "snap_kill").yaml());
  // A writer runs throughout: before the kill, while sluice is down and after the restart.
  Writer writer(db.url(), mixed_writes(300000, 2, 4, true), 2ms);
  {
    Process p({"run", "p.yaml"}, dir);
    // "v3 snapshot <lsn> <table> <page> [t<tables>] s<mvcc>": killed past the first batches,
    // the restart resumes at the page the last durable batch ended before.
    ASSERT_TRUE(wait_for_checkpoint(p, dir, "snap_kill", [](const std::string& c) {
      std::istringstream in(c);
      std::string phase, lsn, table, page;
      in >> phase;
      if (phase == "v3") in >> phase;
      in >> lsn >> table >> page;
      return phase == "snapshot" && !page.empty() && page != "0";
    })) << p.stderr_text();
    p.signal(SIGKILL);
    EXPECT_EQ(p.wait(), 128 + SIGKILL);
  }
  const std::string at_kill = checkpoint_of(dir, "snap_kill");
  ASSERT_TRUE(starts_with(at_kill, "v3 snapshot "))
      << "killed too late to test a snapshot resume: " << at_kill;
  // Changes while sluice is down: some to rows already copied, some to rows not yet copied.
  ASSERT_TRUE(
      db.sql().exec("UPDATE big SET n = -n, s = 'changed' WHERE id % 1000 = 0;"
                    "DELETE FROM big WHERE id % 997 = 0;" +
                    fill_big(100)));
  Process p2({"run", "p.yaml", "--idle-exit", "2"}, dir);
  ASSERT_TRUE(wait_for_checkpoint(p2, dir, "snap_kill", [](const std::string& c) {
    return starts_with(c, "cdc ");
  })) << p2.stderr_text();
  const uint64_t at_cdc = writer.steps();
  ASSERT_TRUE(wait_until([&] { return writer.steps() >= at_cdc + 20; }, 30s));
  writer.stop();
  EXPECT_FALSE(writer.failed());
  ASSERT_EQ(p2.wait_for(120s), 0) << p2.stderr_text();
  EXPECT_NE(p2.stderr_text().find("resuming from checkpoint"), std::string::npos);
  EXPECT_TRUE(starts_with(checkpoint_of(dir, "snap_kill"), "cdc "))
      << checkpoint_of(dir, "snap_kill");
  EXPECT_EQ(compare_big(db, dir), 0);
  std::filesystem::remove_all(dir);
}

// ── kill -9 during CDC ──────────────────────────────────────────────────────

TEST(PostgresToSqlite, KillNineDuringCdcWithAWriterThenResumeLosesNothing) {
  TestDb db("cdc_kill");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec(kBigDdl));
  ASSERT_TRUE(db.sql().exec(fill_big(2000)));
  auto dir = e2e::make_temp_dir("pg-cdc-kill");
  e2e::write_file(dir / "p.yaml", big_pipeline(db, "cdc_kill", 500).yaml());
  Writer writer(db.url(), mixed_writes(2000, 20, 10, true), 1ms);
  {
    Process p({"run", "p.yaml"}, dir);
    std::string first_cdc;
    ASSERT_TRUE(wait_for_checkpoint(p, dir, "cdc_kill", [&](const std::string& c) {
      if (starts_with(c, "cdc ") && first_cdc.empty()) first_cdc = c;
      return !first_cdc.empty() && starts_with(c, "cdc ") &&
             c != first_cdc;  // a second CDC checkpoint
    })) << p.stderr_text();
    const uint64_t at = writer.steps();
    ASSERT_TRUE(wait_until([&] { return writer.steps() >= at + 20; }, 30s));
    p.signal(SIGKILL);
    EXPECT_EQ(p.wait(), 128 + SIGKILL);
  }
  ASSERT_TRUE(starts_with(checkpoint_of(dir, "cdc_kill"), "cdc "));
  // The writer goes on while sluice is down, and while it restarts.
  const uint64_t at_kill = writer.steps();
  ASSERT_TRUE(wait_until([&] { return writer.steps() >= at_kill + 20; }, 30s));
  Process p2({"run", "p.yaml", "--idle-exit", "2"}, dir);
  ASSERT_TRUE(wait_until([&] { return writer.steps() >= at_kill + 60; }, 30s));
  writer.stop();
  EXPECT_FALSE(writer.failed());
  ASSERT_EQ(p2.wait_for(120s), 0) << p2.stderr_text();
  EXPECT_NE(p2.stderr_text().find("resuming from checkpoint"), std::string::npos);
  EXPECT_EQ(compare_big(db, dir), 0);
  std::filesystem::remove_all(dir);
}

// ── kill -9 inside one large transaction ────────────────────────────────────

// 50,000 inserts committed at once share one commit LSN. Batches of 1,000 checkpoint positions
// inside the transaction ("cdc <flush> <commit-lsn> <n>"); killed there, the restart skips exactly
// the n changes already written and delivers the rest.
TEST(PostgresToSqlite, KillNineInsideOneLargeTransactionResumesWithoutSkippingOrRepeating) {
  TestDb db("tx_kill");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE tx (id int PRIMARY KEY, payload text NOT NULL)"));
  auto dir = e2e::make_temp_dir("pg-tx-kill");
  PipelineFile f;
  f.id = "tx_kill";
  f.url = db.url();
  f.tables = {"public.tx"};
  f.max_records = 1000;
  e2e::write_file(dir / "p.yaml", f.yaml());
  std::string at_kill;
  {
    Process p({"run", "p.yaml"}, dir);
    ASSERT_TRUE(wait_for_checkpoint(p, dir, "tx_kill", [](const std::string& c) {
      return starts_with(c, "cdc ");
    })) << p.stderr_text();
    // Wide rows make each batch take a while at the destination.
    ASSERT_TRUE(db.sql().exec(
        "INSERT INTO tx SELECT g, repeat(md5(g::text), 64) FROM generate_series(1, 50000) g"));
    const bool mid = wait_for_checkpoint(
        p, dir, "tx_kill",
        [](const std::string& whole) {
          const std::string c = without_captured(whole);
          return std::count(c.begin(), c.end(), ' ') == 3;
        },
        60s, 2ms);
    p.signal(SIGKILL);
    p.wait();
    ASSERT_TRUE(mid) << "no checkpoint inside the transaction: " << checkpoint_of(dir, "tx_kill")
                     << "\n"
                     << p.stderr_text();
  }
  at_kill = without_captured(checkpoint_of(dir, "tx_kill"));
  ASSERT_EQ(std::count(at_kill.begin(), at_kill.end(), ' '), 3) << at_kill;
  const int64_t written = std::stoll(at_kill.substr(at_kill.rfind(' ') + 1));
  ASSERT_GT(written, 0);
  ASSERT_LT(written, 50000);
  {
    e2e::Db out(dir / "out.db");
    EXPECT_GE(out.scalar("SELECT count(*) FROM tx"), written);
  }
  Process p2({"run", "p.yaml", "--idle-exit", "2"}, dir);
  ASSERT_EQ(p2.wait_for(120s), 0) << p2.stderr_text();
  const std::string err = p2.stderr_text();
  // Exactly the changes after the checkpoint are read again.
  const std::string expect_read = std::to_string(50000 - written);
  std::string read_count;
  for (const auto& line : lines_of(err))
    if (line.find("pipeline tx_kill stopped: ") != std::string::npos) {
      const size_t at = line.find("stopped: ") + 9;
      read_count = line.substr(at, line.find(" read") - at);
      read_count.erase(std::remove(read_count.begin(), read_count.end(), ','), read_count.end());
    }
  EXPECT_EQ(read_count, expect_read) << err;
  EXPECT_EQ(
      compare_tables(
          db.sql(),
          "SELECT id::text, length(payload)::text, substr(payload, 1, 40) FROM tx ORDER BY tx.id",
          dir / "out.db", "SELECT id, length(payload), substr(payload, 1, 40) FROM tx ORDER BY id"),
      0);
  std::filesystem::remove_all(dir);
}

// ── truncate and unchanged TOAST, end to end ────────────────────────────────

TEST(PostgresToSqlite, TruncateEmptiesTheTableAndUnchangedToastKeepsTheStoredValue) {
  TestDb db("trunc_toast");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec(
      "CREATE TABLE tr (id int PRIMARY KEY, v text);"
      "INSERT INTO tr SELECT g, 'v' || g FROM generate_series(1, 5) g;"
      "CREATE TABLE tt (id int PRIMARY KEY, big text, n int);"
      "ALTER TABLE tt ALTER COLUMN big SET STORAGE EXTERNAL;"
      "INSERT INTO tt SELECT 1, string_agg(md5(random()::text), ''), 1 FROM generate_series(1, 4096);"));
  auto dir = e2e::make_temp_dir("pg-trunc-toast");
  PipelineFile f;
  f.id = "trunc_toast";
  f.url = db.url();
  f.tables = {"public.tr", "public.tt"};
  e2e::write_file(dir / "p.yaml", f.yaml());
  Process p({"run", "p.yaml"}, dir);
  ASSERT_TRUE(wait_for_checkpoint(p, dir, "trunc_toast", [](const std::string& c) {
    return starts_with(c, "cdc ");
  })) << p.stderr_text();
  ASSERT_TRUE(db.sql().exec(
      "INSERT INTO tr VALUES (6, 'v6'); TRUNCATE tr; INSERT INTO tr VALUES (7, 'v7'), (8, 'v8');"
      "UPDATE tt SET n = 2 WHERE id = 1;"));
  ASSERT_TRUE(wait_until(
      [&] {
        e2e::Db out(dir / "out.db");
        return out.scalar("SELECT count(*) FROM tt WHERE n = 2") == 1 &&
               out.scalar("SELECT count(*) FROM tr") == 2 &&
               out.scalar("SELECT min(id) FROM tr") == 7;
      },
      30s, 100ms))
      << p.stderr_text();
  p.signal(SIGTERM);
  ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  EXPECT_EQ(compare_tables(db.sql(), "SELECT id::text, v FROM tr ORDER BY tr.id", dir / "out.db",
                           "SELECT id, v FROM tr ORDER BY id"),
            0);
  // The big value was absent from the update's `after`: the stored one is kept, not nulled.
  EXPECT_EQ(compare_tables(db.sql(), "SELECT id::text, big, n::text FROM tt ORDER BY tt.id",
                           dir / "out.db", "SELECT id, big, n FROM tt ORDER BY id"),
            0);
  std::filesystem::remove_all(dir);
}

// ── values sluice cannot represent ──────────────────────────────────────────

// PostgreSQL's largest timestamp (294276 AD) is beyond sluice's (µs since 1970 in an int64 end in
// 294247 AD): one such row in the snapshot and one in the stream. And an array whose subscripts
// start at 0, which an array value cannot say.
constexpr const char* kPoisonDdl =
    "CREATE TABLE ev (id int PRIMARY KEY, at timestamp, arr int[]);"
    "INSERT INTO ev VALUES (1, '2024-01-01 10:00:00', NULL), (2, '294276-12-31 23:59:59.999999', NULL),"
    " (3, '2024-01-03 10:00:00', '{1,2}')";
constexpr const char* kPoisonCdc =
    "INSERT INTO ev VALUES (4, '294276-12-31 23:59:59.999999');"
    "INSERT INTO ev VALUES (6, '2024-01-06 10:00:00', '[0:2]={1,2,3}');"
    "INSERT INTO ev VALUES (5, '2024-01-05 10:00:00')";

TEST(PostgresToSqlite, ValuesSluiceCannotRepresentGoToTheDeadLetterQueueAsText) {
  TestDb db("poison_dlq");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec(kPoisonDdl));
  auto dir = e2e::make_temp_dir("pg-poison-dlq");
  PipelineFile f;
  f.id = "poison_dlq";
  f.url = db.url();
  f.tables = {"public.ev"};
  f.on_error = "dlq";
  f.dlq_path = "dead.jsonl";
  e2e::write_file(dir / "p.yaml", f.yaml());
  Process p({"run", "p.yaml"}, dir);
  ASSERT_TRUE(wait_for_checkpoint(p, dir, "poison_dlq", [](const std::string& c) {
    return starts_with(c, "cdc ");
  })) << p.stderr_text();
  ASSERT_TRUE(db.sql().exec(kPoisonCdc));
  ASSERT_TRUE(wait_until(
      [&] {
        e2e::Db out(dir / "out.db");
        return out.scalar("SELECT count(*) FROM ev WHERE id = 5") == 1;
      },
      30s, 100ms))
      << p.stderr_text();
  p.signal(SIGTERM);
  ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  e2e::Db out(dir / "out.db");
  EXPECT_EQ(out.scalar("SELECT count(*) FROM ev"), 3);  // 1, 3, 5
  EXPECT_EQ(out.scalar("SELECT count(*) FROM ev WHERE id IN (2, 4, 6)"), 0);
  const std::string dead = e2e::read_file(dir / "dead.jsonl");
  ASSERT_EQ(std::count(dead.begin(), dead.end(), '\n'), 3) << dead;
  for (int id : {2, 4, 6}) {
    const std::string line = "\"id\":" + std::to_string(id) + ",";
    const size_t at = dead.find(line);
    ASSERT_NE(at, std::string::npos) << dead;
    const size_t begin = dead.rfind('\n', at) == std::string::npos ? 0 : dead.rfind('\n', at) + 1;
    const std::string rec = dead.substr(begin, dead.find('\n', at) - begin);
    // The raw value as text, and why.
    if (id == 6) {
      EXPECT_NE(rec.find("\"[0:2]={1,2,3}\""), std::string::npos) << rec;
      EXPECT_NE(rec.find("do not start at 1"), std::string::npos) << rec;
    } else {
      EXPECT_NE(rec.find("\"294276-12-31 23:59:59.999999\""), std::string::npos) << rec;
      EXPECT_NE(rec.find("294247 AD"), std::string::npos) << rec;
    }
    EXPECT_NE(rec.find("\"sluice.source\":\"postgres\""), std::string::npos) << rec;
  }
  std::filesystem::remove_all(dir);
}

TEST(PostgresToSqlite, AValueSluiceCannotRepresentStopsThePipelineNamingTheWayOut) {
  TestDb db("poison_stop");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec(kPoisonDdl));
  auto dir = e2e::make_temp_dir("pg-poison-stop");
  PipelineFile f;
  f.id = "poison_stop";
  f.url = db.url();
  f.tables = {"public.ev"};
  e2e::write_file(dir / "p.yaml", f.yaml());
  Process p({"run", "p.yaml"}, dir);
  EXPECT_NE(p.wait_for(60s), 0);
  const std::string err = p.stderr_text();
  EXPECT_NE(err.find("public.ev.at"), std::string::npos) << err;
  EXPECT_NE(err.find("294276-12-31"), std::string::npos) << err;
  EXPECT_NE(err.find("on_error: dlq"), std::string::npos) << err;
  std::filesystem::remove_all(dir);
}

// An update of the primary key sends the new row without its unchanged TOAST value (absent, not
// null) under REPLICA IDENTITY DEFAULT and FULL: the destination moves the stored row to the new
// key, so the value survives — never a new row with NULL there.
TEST(PostgresToSqlite, UpdateOfThePrimaryKeyKeepsTheUnchangedToastValue) {
  TestDb db("pk_toast");
  ASSERT_TRUE(db.ok());
  std::string ddl;
  for (const char* t : {"td", "tf"})
    ddl += std::string("CREATE TABLE ") + t + " (id int PRIMARY KEY, big text, n int);" +
           "ALTER TABLE " + t + " ALTER COLUMN big SET STORAGE EXTERNAL;" +
           // incompressible and > 2 kB: stored out of line
           "INSERT INTO " + t + " SELECT g, (SELECT string_agg(md5(g::text || i::text), '') FROM " +
           "generate_series(1, 100) i), g FROM generate_series(1, 20) g;";
  ddl += "ALTER TABLE tf REPLICA IDENTITY FULL;";
  ASSERT_TRUE(db.sql().exec(ddl));
  auto dir = e2e::make_temp_dir("pg-pk-toast");
  PipelineFile f;
  f.id = "pk_toast";
  f.url = db.url();
  f.tables = {"public.td", "public.tf"};
  e2e::write_file(dir / "p.yaml", f.yaml());
  Process p({"run", "p.yaml"}, dir);
  ASSERT_TRUE(wait_for_checkpoint(p, dir, "pk_toast", [](const std::string& c) {
    return starts_with(c, "cdc ");
  })) << p.stderr_text();
  ASSERT_TRUE(db.sql().exec(
      "UPDATE td SET id = id + 1000; UPDATE tf SET id = id + 1000;"
      "UPDATE td SET n = n + 1 WHERE id = 1001; UPDATE tf SET id = id + 1000, n = 0 WHERE id = 1002;"));
  ASSERT_TRUE(wait_until(
      [&] {
        e2e::Db out(dir / "out.db");
        return out.scalar("SELECT count(*) FROM td WHERE id > 1000") == 20 &&
               out.scalar("SELECT count(*) FROM tf WHERE id = 2002") == 1;
      },
      30s, 100ms))
      << p.stderr_text();
  p.signal(SIGTERM);
  ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  for (std::string t : {"td", "tf"}) {
    SCOPED_TRACE(t);
    EXPECT_EQ(compare_tables(db.sql(), "SELECT id::text, big, n::text FROM " + t + " ORDER BY id",
                             dir / "out.db", "SELECT id, big, n FROM " + t + " ORDER BY id"),
              0);
    e2e::Db out(dir / "out.db");
    EXPECT_EQ(out.scalar("SELECT count(*) FROM " + t + " WHERE big IS NULL OR length(big) < 3200"),
              0);
  }
  std::filesystem::remove_all(dir);
}

// ── heartbeat ───────────────────────────────────────────────────────────────

// The pipeline's table is idle while another table, not in its publication, gets writes: with
// heartbeat.interval 1s the slot's confirmed_flush_lsn still advances, so the slot does not pin
// WAL.
TEST(PostgresToSqlite, HeartbeatAdvancesTheSlotWhileThePublishedTablesAreIdle) {
  TestDb db("heartbeat");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec(
      "CREATE TABLE hb_main (id int PRIMARY KEY); CREATE TABLE hb_other (id serial PRIMARY KEY, v text);"
      "INSERT INTO hb_main VALUES (1);"));
  auto dir = e2e::make_temp_dir("pg-heartbeat");
  PipelineFile f;
  f.id = "heartbeat";
  f.url = db.url();
  f.tables = {"public.hb_main"};
  f.source_settings["heartbeat.interval"] = "1s";
  e2e::write_file(dir / "p.yaml", f.yaml());
  Process p({"run", "p.yaml"}, dir);
  ASSERT_TRUE(wait_for_checkpoint(p, dir, "heartbeat", [](const std::string& c) {
    return starts_with(c, "cdc ");
  })) << p.stderr_text();
  const std::string start = checkpoint_of(dir, "heartbeat");
  ASSERT_TRUE(db.sql().exec("INSERT INTO hb_other (v) VALUES ('first')"));
  const std::string target = db.sql().scalar("SELECT pg_current_wal_lsn()::text");
  Writer other(
      db.url(),
      [](Conn& c, uint64_t i) {
        return c.exec("INSERT INTO hb_other (v) VALUES ('" + std::to_string(i) + "')");
      },
      100ms);
  std::string confirmed;
  const bool advanced = wait_until(
      [&] {
        confirmed = db.sql().scalar(
            "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = "
            "'sluice_heartbeat'");
        return db.sql().scalar("SELECT '" + confirmed + "'::pg_lsn >= '" + target + "'::pg_lsn") ==
               "t";
      },
      20s, 200ms);
  other.stop();
  EXPECT_TRUE(advanced) << "confirmed_flush_lsn " << confirmed << " never reached " << target
                        << " (checkpoint at start " << start << ", now "
                        << checkpoint_of(dir, "heartbeat") << ")";
  EXPECT_NE(checkpoint_of(dir, "heartbeat"), start);
  EXPECT_EQ(p.wait_for(0ms), -1) << p.stderr_text();
  p.signal(SIGTERM);
  ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  e2e::Db out(dir / "out.db");
  EXPECT_EQ(out.scalar("SELECT count(*) FROM hb_main"), 1);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sluice::pgtest
