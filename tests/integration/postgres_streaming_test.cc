// stream.in_progress against the real PostgreSQL 15 test server: large transactions the server
// streams before they commit (pgoutput protocol 2, `streaming on`; the walsender's
// logical_decoding_work_mem set to its 64 kB minimum so that a few thousand rows stream) are held
// by sluice — in memory, then spilled — and forwarded at their commit in commit order; aborted ones
// and rolled-back subtransactions never arrive; a reconnect mid-transaction loses and repeats
// nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "integration/pg_harness.h"

namespace sluice::pgtest {
namespace {

// The walsender streams an in-progress transaction once it holds more than 64 kB of it.
std::string streaming_url(const TestDb& db) {
  const std::string& u = db.url();
  return u + (u.find('?') == std::string::npos ? "?" : "&") +
         "options=-c%20logical_decoding_work_mem%3D64kB";
}

std::unique_ptr<Source> open_streaming(TestDb& db, const std::string& id,
                                       std::map<std::string, std::string> extra = {}) {
  extra["url"] = streaming_url(db);
  extra["tables"] = "public.big";
  auto src = make_source(extra);
  if (!src) return nullptr;
  Status st = src->open(ConnectorContext{id, "postgres", nullptr}, std::nullopt);
  if (!st.ok()) {
    ADD_FAILURE() << "open failed: " << st.error().message();
    return nullptr;
  }
  return src;
}

std::vector<int64_t> ids_of(const std::vector<const Record*>& rs) {
  std::vector<int64_t> ids;
  for (const Record* r : rs) {
    const Value* id = r->after.is_object() ? r->after.find("id") : nullptr;
    ids.push_back(id && id->kind() == ValueKind::int64 ? id->as_int64() : -1);
  }
  return ids;
}

// The records' ids are exactly `want`, in order (else where they first differ).
void expect_ids(const std::vector<int64_t>& got, const std::vector<int64_t>& want) {
  ASSERT_EQ(got.size(), want.size());
  EXPECT_TRUE(got == want) << "first difference at record "
                           << (std::mismatch(got.begin(), got.end(), want.begin()).first -
                               got.begin());
}

void append_range(std::vector<int64_t>* v, int64_t from, int64_t to) {
  for (int64_t i = from; i <= to; ++i) v->push_back(i);
}

int64_t slot_stat(TestDb& db, const std::string& slot, const std::string& column) {
  // admin(): db.sql() may be inside a transaction, whose statistics snapshot does not move.
  const std::string v = db.admin().scalar(
      "SELECT " + column + " FROM pg_stat_replication_slots WHERE slot_name = '" + slot + "'");
  return v.empty() ? -1 : std::stoll(v);
}

// Transactions, in commit order:
//   small 9001, committed while `open` is in progress;
//   open: 1..3000, a savepoint 3001..4000 rolled back, a savepoint 4001..5000 released, 5001
//         updated (then deleted in a rolled-back savepoint), committed;
//   aborted: 10001..16000 rolled back;
//   small 9002.
std::vector<int64_t> run_workload(TestDb& db) {
  Conn other(db.url());
  EXPECT_TRUE(other.ok());
  EXPECT_TRUE(db.sql().exec(
      "BEGIN; INSERT INTO big SELECT g, repeat(md5(g::text), 4) FROM generate_series(1, 3000) g;"
      "SAVEPOINT s1; INSERT INTO big SELECT g, 'rolled back' FROM generate_series(3001, 4000) g;"
      "ROLLBACK TO s1;"
      "SAVEPOINT s2; INSERT INTO big SELECT g, md5(g::text) FROM generate_series(4001, 5000) g;"
      "RELEASE s2; INSERT INTO big VALUES (5001, 'before'); UPDATE big SET v = 'after' WHERE id = "
      "5001; SAVEPOINT s3; DELETE FROM big WHERE id = 5001; ROLLBACK TO s3;"));
  EXPECT_TRUE(other.exec("INSERT INTO big VALUES (9001, 'small, committed first')"));
  EXPECT_TRUE(db.sql().exec("COMMIT"));
  EXPECT_TRUE(db.sql().exec(
      "BEGIN; INSERT INTO big SELECT g, repeat(md5(g::text), 4) FROM generate_series(10001, 16000) "
      "g; ROLLBACK; INSERT INTO big VALUES (9002, 'small, last')"));
  std::vector<int64_t> want{9001};
  append_range(&want, 1, 3000);
  append_range(&want, 4001, 5001);
  want.push_back(5001);  // the update
  want.push_back(9002);
  return want;
}

TEST(PgStreaming, InProgressTransactionsArriveAtCommitWithoutWhatWasRolledBack) {
  TestDb db("streaming");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE big (id int PRIMARY KEY, v text)"));
  for (const char* memory : {"16MiB", "64KiB"}) {  // held in memory; spilled to a file
    SCOPED_TRACE(std::string("stream.in_progress_memory ") + memory);
    ASSERT_TRUE(db.sql().exec("TRUNCATE big"));
    const std::string id = std::string("t_streaming_") + (memory[0] == '1' ? "mem" : "spill");
    auto src = open_streaming(db, id, {{"stream.in_progress_memory", memory}});
    ASSERT_TRUE(src);
    Reader reader(*src);
    ASSERT_TRUE(reader.drain());
    const auto want = run_workload(db);
    ASSERT_TRUE(reader.read_until(
        [&](const auto& rs) { return !rs.empty() && ids_of(rs).back() == 9002; }, 60s));
    ASSERT_TRUE(reader.drain());
    const auto got = ids_of(reader.records());
    ASSERT_NO_FATAL_FAILURE(expect_ids(got, want));
    // The update of 5001 within the transaction, and the delete rolled back to s3 never arrived.
    const Record* upd = reader.records()[want.size() - 2];
    EXPECT_EQ(upd->op, Operation::update);
    EXPECT_EQ(to_debug_string(*upd->after.find("v")), "\"after\"");
    for (const Record* r : reader.records()) EXPECT_NE(r->op, Operation::remove);
    // The server did stream them (else this tested protocol 1).
    EXPECT_GE(slot_stat(db, "sluice_" + id, "stream_txns"), 2) << "the server streamed nothing";
    src->close();
  }
}

// The same workload with stream.in_progress off (protocol 1: the server spills and sends at
// commit) gives the same records.
TEST(PgStreaming, OffGivesTheSameRecordsThroughTheServersSpill) {
  TestDb db("streaming_off");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE big (id int PRIMARY KEY, v text)"));
  auto src = open_streaming(db, "t_streaming_off", {{"stream.in_progress", "false"}});
  ASSERT_TRUE(src);
  Reader reader(*src);
  ASSERT_TRUE(reader.drain());
  const auto want = run_workload(db);
  ASSERT_TRUE(reader.read_until(
      [&](const auto& rs) { return !rs.empty() && ids_of(rs).back() == 9002; }, 60s));
  ASSERT_TRUE(reader.drain());
  EXPECT_TRUE(ids_of(reader.records()) == want);
  EXPECT_EQ(slot_stat(db, "sluice_t_streaming_off", "stream_txns"), 0);
  EXPECT_GE(slot_stat(db, "sluice_t_streaming_off", "spill_txns"), 1);
  src->close();
}

// Two large transactions in progress at once, their blocks interleaved and one of them spilled
// while the other grows: each arrives whole at its own commit, the later-begun one first.
TEST(PgStreaming, InterleavedInProgressTransactionsArriveEachWholeInCommitOrder) {
  TestDb db("streaming_two");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE big (id int PRIMARY KEY, v text)"));
  auto src = open_streaming(db, "t_streaming_two", {{"stream.in_progress_memory", "64KiB"}});
  ASSERT_TRUE(src);
  Reader reader(*src);
  ASSERT_TRUE(reader.drain());
  Conn b(db.url());
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(db.sql().exec("BEGIN"));
  ASSERT_TRUE(b.exec("BEGIN"));
  for (int round = 0; round < 4; ++round) {  // A: 1..4000, B: 100001..104000, 1,000 at a time
    const int a0 = round * 1000 + 1, b0 = 100000 + round * 1000 + 1;
    ASSERT_TRUE(
        db.sql().exec("INSERT INTO big SELECT g, repeat(md5(g::text), 4) FROM "
                      "generate_series(" +
                      std::to_string(a0) + ", " + std::to_string(a0 + 999) + ") g"));
    ASSERT_TRUE(b.exec("INSERT INTO big SELECT g, repeat(md5(g::text), 4) FROM generate_series(" +
                       std::to_string(b0) + ", " + std::to_string(b0 + 999) + ") g"));
  }
  ASSERT_TRUE(b.exec("COMMIT"));
  ASSERT_TRUE(db.sql().exec("COMMIT"));
  ASSERT_TRUE(reader.read_count(8000, 60s));
  ASSERT_TRUE(reader.drain());
  std::vector<int64_t> want;
  append_range(&want, 100001, 104000);
  append_range(&want, 1, 4000);
  const auto got = ids_of(reader.records());
  ASSERT_NO_FATAL_FAILURE(expect_ids(got, want));
  EXPECT_GE(slot_stat(db, "sluice_t_streaming_two", "stream_txns"), 2);
  src->close();
}

// A column added in the middle of a streamed transaction: the changes before it have the old
// columns, those after it the new one, and so has a transaction after it — the Relation messages
// held with the transaction take effect at its commit, in order.
TEST(PgStreaming, AColumnAddedInsideAStreamedTransactionAppliesFromThereOn) {
  TestDb db("streaming_ddl");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE big (id int PRIMARY KEY, v text)"));
  auto src = open_streaming(db, "t_streaming_ddl", {{"stream.in_progress_memory", "64KiB"}});
  ASSERT_TRUE(src);
  Reader reader(*src);
  ASSERT_TRUE(reader.drain());
  ASSERT_TRUE(db.sql().exec(
      "BEGIN; INSERT INTO big SELECT g, repeat(md5(g::text), 4) FROM generate_series(1, 2000) g;"
      "ALTER TABLE big ADD COLUMN extra int;"
      "INSERT INTO big SELECT g, repeat(md5(g::text), 4), g FROM generate_series(2001, 4000) g;"
      "COMMIT; INSERT INTO big (id, v) VALUES (4001, 'after')"));
  ASSERT_TRUE(reader.read_until(
      [&](const auto& rs) {
        size_t n = 0;
        for (const Record* r : rs) n += r->op == Operation::create;
        return n >= 4001;
      },
      60s));
  std::vector<const Record*> rows;
  for (const Record* r : reader.records())
    if (r->op == Operation::create) rows.push_back(r);
  ASSERT_EQ(rows.size(), 4001u);
  for (size_t i = 0; i < rows.size(); ++i) {
    const int64_t id = int64_t(i + 1);
    ASSERT_EQ(rows[i]->after.find("id")->as_int64(), id);
    const Value* extra = rows[i]->after.find("extra");
    if (id <= 2000) {
      EXPECT_EQ(extra, nullptr) << "row " << id << " has " << to_debug_string(*extra);
    } else {
      ASSERT_NE(extra, nullptr) << "row " << id;
      if (id <= 4000) EXPECT_EQ(extra->as_int64(), id) << "row " << id;
      else EXPECT_TRUE(extra->is_null()) << "row " << id << ": " << to_debug_string(*extra);
    }
  }
  EXPECT_GE(slot_stat(db, "sluice_t_streaming_ddl", "stream_txns"), 1);
  src->close();
}

// The walsender is terminated while a large transaction is streamed (before its commit) and again
// while its records are forwarded: every change arrives once, in order, and the positions never go
// back. Batches are small, so the held transaction is forwarded over many reads.
TEST(PgStreaming, AReconnectWhileATransactionIsHeldOrForwardedRepeatsAndLosesNothing) {
  TestDb db("streaming_reconnect");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE big (id int PRIMARY KEY, v text)"));
  auto src = open_streaming(db, "t_streaming_reconnect", {{"stream.in_progress_memory", "64KiB"}});
  ASSERT_TRUE(src);
  Reader reader(*src);
  reader.request().max_records = 500;
  ASSERT_TRUE(reader.drain());
  constexpr int kRows = 20000;
  ASSERT_TRUE(db.sql().exec(
      "BEGIN; INSERT INTO big SELECT g, repeat(md5(g::text), 4) FROM generate_series(1, 10000) g"));
  // Streamed in part, not committed: the walsender goes.
  ASSERT_TRUE(wait_until(
      [&] { return slot_stat(db, "sluice_t_streaming_reconnect", "stream_bytes") > 0; }, 30s));
  std::string pid = wait_for_walsender(db.admin(), "sluice_t_streaming_reconnect", 10s);
  ASSERT_FALSE(pid.empty());
  ASSERT_TRUE(terminate_pg_backend(db.admin(), pid));
  ASSERT_TRUE(db.sql().exec("INSERT INTO big SELECT g, md5(g::text) FROM generate_series(10001, " +
                            std::to_string(kRows) + ") g; COMMIT; INSERT INTO big VALUES (" +
                            std::to_string(kRows + 1) + ", 'next')"));
  // And again while its records are being forwarded.
  ASSERT_TRUE(reader.read_count(3000, 60s));
  pid = wait_for_walsender(db.admin(), "sluice_t_streaming_reconnect", 10s);
  ASSERT_FALSE(pid.empty());
  ASSERT_TRUE(terminate_pg_backend(db.admin(), pid));
  ASSERT_TRUE(reader.read_count(kRows + 1, 90s));
  ASSERT_TRUE(reader.drain());
  std::vector<int64_t> want;
  append_range(&want, 1, kRows + 1);
  const auto got = ids_of(reader.records());
  ASSERT_NO_FATAL_FAILURE(expect_ids(got, want));
  expect_positions_never_go_back(reader);
  src->close();
}

}  // namespace
}  // namespace sluice::pgtest
