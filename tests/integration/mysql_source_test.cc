// The mysql source against the real MariaDB 10.11 test server: every type in snapshot and CDC,
// updates and deletes (FULL and MINIMAL row images), DDL mid-stream, positions and exact resume
// inside a transaction, a dropped binlog connection, and the one-line errors of bad set-ups.
#include <fmt/format.h>

#include <limits>
#include <set>

#include "integration/mysql_source_harness.h"
#include "support/bursts.h"

namespace sluice::mytest {
namespace {

constexpr const char* kTypesDdl =
    "CREATE TABLE alltypes (id INT PRIMARY KEY, ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED, "
    "mi MEDIUMINT, miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED, "
    "dec1 DECIMAL(10,2), dec2 DECIMAL(30,10), fl FLOAT, db DOUBLE, c CHAR(5), vc VARCHAR(300), tx TEXT, "
    "bn BINARY(4), vb VARBINARY(10), bl BLOB, d DATE, t TIME, t6 TIME(6), dt DATETIME, dt3 DATETIME(3), "
    "ts TIMESTAMP(6) NULL, y YEAR, e ENUM('red','green','blue'), st SET('a','b','c'), bt BIT(12), j JSON, "
    "l1 VARCHAR(10) CHARACTER SET latin1, n INT)";

std::string types_row(int id) {
  return "(" + std::to_string(id) +
         ", -128, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295, -9223372036854775808, "
         "18446744073709551615, -12345678.90, 12345678901234567890.0123456789, 1.1, -2.25e100, 'ab', "
         "'h\xc3\xa9llo w\xc3\xb6rld \xf0\x9f\x98\x80', 'long text', 'ab', 0x00ff, 0xdeadbeef, '2024-02-29', "
         "'-838:59:59', '-12:34:56.789012', '1999-12-31 23:59:59', '2000-01-01 00:00:00.123', "
         "'2024-06-01 12:00:00.654321', 2155, 'blue', 'a,c', b'101010101010', '{\"k\": [1, 2.5, \"x\", null, true]}', "
         "'caf\xc3\xa9', NULL)";
}

int64_t micros(int64_t y, unsigned mo, unsigned d, int64_t h, int64_t mi, int64_t s,
               int64_t us = 0) {
  return int64_t(days_from_civil(y, mo, d)) * 86400000000LL + ((h * 60 + mi) * 60 + s) * 1000000 +
         us;
}

void expect_types(const Value& a, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(field(a, "ti"), Value::int64(-128));
  EXPECT_EQ(field(a, "tiu"), Value::uint64(255));
  EXPECT_EQ(field(a, "si"), Value::int64(-32768));
  EXPECT_EQ(field(a, "siu"), Value::uint64(65535));
  EXPECT_EQ(field(a, "mi"), Value::int64(-8388608));
  EXPECT_EQ(field(a, "miu"), Value::uint64(16777215));
  EXPECT_EQ(field(a, "i"), Value::int64(-2147483648LL));
  EXPECT_EQ(field(a, "iu"), Value::uint64(4294967295ULL));
  EXPECT_EQ(field(a, "bi"), Value::int64(std::numeric_limits<int64_t>::min()));
  EXPECT_EQ(field(a, "biu"), Value::uint64(std::numeric_limits<uint64_t>::max()));
  EXPECT_EQ(field(a, "dec1"), Value::decimal("-12345678.90"));
  EXPECT_EQ(field(a, "dec2"), Value::decimal("12345678901234567890.0123456789"));
  EXPECT_EQ(field(a, "fl"), Value::float64(double(1.1f)));
  EXPECT_EQ(field(a, "db"), Value::float64(-2.25e100));
  EXPECT_EQ(field(a, "c"), Value::string("ab"));
  EXPECT_EQ(field(a, "vc"), Value::string("h\xc3\xa9llo w\xc3\xb6rld \xf0\x9f\x98\x80"));
  EXPECT_EQ(field(a, "tx"), Value::string("long text"));
  EXPECT_EQ(field(a, "bn"), Value::bytes(std::string_view("ab\0\0", 4)));
  EXPECT_EQ(field(a, "vb"), Value::bytes(std::string_view("\x00\xff", 2)));
  EXPECT_EQ(field(a, "bl"), Value::bytes("\xde\xad\xbe\xef"));
  EXPECT_EQ(field(a, "d"), Value::date(days_from_civil(2024, 2, 29)));
  EXPECT_EQ(field(a, "t"), Value::time(-((838LL * 60 + 59) * 60 + 59) * 1000000));
  EXPECT_EQ(field(a, "t6"), Value::time(-(((12LL * 60 + 34) * 60 + 56) * 1000000 + 789012)));
  EXPECT_EQ(field(a, "dt"), Value::timestamp(micros(1999, 12, 31, 23, 59, 59)));
  EXPECT_EQ(field(a, "dt3"), Value::timestamp(micros(2000, 1, 1, 0, 0, 0, 123000)));
  EXPECT_EQ(field(a, "y"), Value::int64(2155));
  EXPECT_EQ(field(a, "e"), Value::string("blue"));
  EXPECT_EQ(field(a, "st"), Value::string("a,c"));
  EXPECT_EQ(field(a, "bt"), Value::uint64(0b101010101010));
  EXPECT_EQ(field(a, "j").kind(), ValueKind::json);
  EXPECT_EQ(field(a, "j").as_text(), R"({"k": [1, 2.5, "x", null, true]})");
  EXPECT_EQ(field(a, "l1"), Value::string("caf\xc3\xa9"));
  EXPECT_EQ(field(a, "n"), Value::null());
}

std::unique_ptr<Source> open_source(TestDb& db, const std::string& pipeline,
                                    std::map<std::string, std::string> extra = {},
                                    const std::optional<std::string>& checkpoint = std::nullopt) {
  extra.emplace("url", db.url());
  extra.emplace("tables", "*");
  auto src = make_source(extra);
  if (!src) return nullptr;
  Status st = src->open(context(pipeline), checkpoint);
  if (!st.ok()) {
    ADD_FAILURE() << "open: " << st.error().message();
    return nullptr;
  }
  return src;
}

TEST(MysqlSource, EveryTypeHasExactValuesInSnapshotAndCdc) {
  TestDb db("types");
  ASSERT_TRUE(db.sql().ok());
  ASSERT_TRUE(db.sql().exec("SET time_zone = '+00:00'"));
  ASSERT_TRUE(db.sql().exec(kTypesDdl));
  ASSERT_TRUE(db.sql().exec("INSERT INTO alltypes VALUES " + types_row(1)));
  auto src = open_source(db, "types");
  ASSERT_TRUE(src);
  Reader reader(*src);
  ASSERT_TRUE(reader.read_count(1));
  const Record* snap = reader.records()[0];
  EXPECT_EQ(snap->op, Operation::snapshot);
  EXPECT_EQ(snap->meta("schema"), db.name());
  EXPECT_EQ(snap->meta("table"), "alltypes");
  EXPECT_EQ(field(snap->key, "id"), Value::int64(1));
  expect_types(snap->after, "snapshot");
  EXPECT_EQ(field(snap->after, "ts"), Value::timestamptz(micros(2024, 6, 1, 12, 0, 0, 654321)));

  ASSERT_TRUE(db.sql().exec("INSERT INTO alltypes VALUES " + types_row(2)));
  ASSERT_TRUE(reader.read_count(2));
  const Record* cdc = reader.records()[1];
  EXPECT_EQ(cdc->op, Operation::create);
  EXPECT_EQ(field(cdc->key, "id"), Value::int64(2));
  expect_types(cdc->after, "cdc");
  EXPECT_EQ(field(cdc->after, "ts"), Value::timestamptz(micros(2024, 6, 1, 12, 0, 0, 654321)));
  EXPECT_TRUE(cdc->before.is_absent());
  // Snapshot and stream agree field by field.
  ASSERT_EQ(snap->after.size(), cdc->after.size());
  for (size_t i = 1; i < snap->after.size(); ++i)
    EXPECT_EQ(snap->after.fields()[i], cdc->after.fields()[i]) << snap->after.fields()[i].name;
  // Metadata: schema, table, binlog file/pos, gtid, commit time.
  EXPECT_EQ(cdc->meta("schema"), db.name());
  EXPECT_EQ(cdc->meta("table"), "alltypes");
  EXPECT_TRUE(cdc->meta("binlog_file").starts_with("binlog.")) << cdc->meta("binlog_file");
  EXPECT_FALSE(cdc->meta("binlog_pos").empty());
  EXPECT_TRUE(cdc->meta("gtid").starts_with("0-1-")) << cdc->meta("gtid");
  EXPECT_FALSE(cdc->meta("commit_time").empty());
  EXPECT_EQ(cdc->meta("server_id"), "1");
  src->close();
}

// The text protocol writes a FLOAT with 6 significant digits: the snapshot must read it exactly,
// as the binlog does (the 4-byte value widened).
TEST(MysqlSource, FloatsAndNegativeTimesAreExactInTheSnapshotAsInTheStream) {
  TestDb db("floats");
  ASSERT_TRUE(db.sql().ok());
  ASSERT_TRUE(
      db.sql().exec("CREATE TABLE f (id INT PRIMARY KEY, fl FLOAT, t TIME(6), k FLOAT NOT NULL)"));
  const std::string row1 = "(1, 0.123456789, '-00:00:01', 3.14159274)";
  const std::string row2 = "(2, 16777217, '-00:00:00.5', -1.17549435e-38)";
  ASSERT_TRUE(db.sql().exec("INSERT INTO f VALUES " + row1 + ", " + row2));
  auto src = open_source(db, "floats");
  ASSERT_TRUE(src);
  Reader reader(*src);
  ASSERT_TRUE(reader.read_count(2));
  ASSERT_TRUE(db.sql().exec("DELETE FROM f"));
  ASSERT_TRUE(db.sql().exec("INSERT INTO f VALUES " + row1 + ", " + row2));
  ASSERT_TRUE(reader.read_count(6));  // 2 snapshot, 2 deletes, 2 inserts
  const Record& s1 = *reader.records()[0];
  const Record& s2 = *reader.records()[1];
  EXPECT_EQ(field(s1.after, "fl"), Value::float64(double(0.123456789f)));
  EXPECT_EQ(field(s1.after, "k"), Value::float64(double(3.14159274f)));
  EXPECT_EQ(field(s2.after, "fl"), Value::float64(double(16777217.0f)));
  EXPECT_EQ(field(s2.after, "k"), Value::float64(double(-1.17549435e-38f)));
  EXPECT_EQ(field(s1.after, "t"), Value::time(-1000000));
  EXPECT_EQ(field(s2.after, "t"), Value::time(-500000));
  for (size_t i : {0u, 1u}) {
    const Record& snap = *reader.records()[i];
    const Record& cdc = *reader.records()[4 + i];
    ASSERT_EQ(cdc.op, Operation::create);
    for (const char* name : {"fl", "t", "k"})
      EXPECT_EQ(field(snap.after, name), field(cdc.after, name)) << name;
  }
}

TEST(MysqlSource, UpdatesAndDeletesWithFullAndMinimalRowImages) {
  TestDb db("upd");
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(10), b INT)"));
  auto src = open_source(db, "upd");
  ASSERT_TRUE(src);
  Reader reader(*src);
  ASSERT_TRUE(reader.drain());
  ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES (1, 'x', 10), (2, 'y', 20)"));
  ASSERT_TRUE(db.sql().exec("UPDATE t SET a = 'z' WHERE id = 1"));
  ASSERT_TRUE(db.sql().exec("UPDATE t SET id = 3 WHERE id = 2"));  // key change
  ASSERT_TRUE(db.sql().exec("DELETE FROM t WHERE id = 1"));
  ASSERT_TRUE(db.sql().exec("SET SESSION binlog_row_image = MINIMAL"));
  ASSERT_TRUE(db.sql().exec("UPDATE t SET b = 30 WHERE id = 3"));
  ASSERT_TRUE(db.sql().exec("DELETE FROM t WHERE id = 3"));
  ASSERT_TRUE(reader.read_count(7));
  const auto& r = reader.records();
  EXPECT_EQ(r[0]->op, Operation::create);
  EXPECT_EQ(r[1]->op, Operation::create);
  EXPECT_EQ(r[2]->op, Operation::update);
  EXPECT_EQ(field(r[2]->before, "a"), Value::string("x"));
  EXPECT_EQ(field(r[2]->after, "a"), Value::string("z"));
  EXPECT_EQ(field(r[2]->after, "b"), Value::int64(10));  // FULL: every column
  EXPECT_EQ(r[3]->op, Operation::update);
  EXPECT_EQ(field(r[3]->before, "id"), Value::int64(2));
  EXPECT_EQ(field(r[3]->key, "id"), Value::int64(3));  // the key of the new row
  EXPECT_EQ(r[4]->op, Operation::remove);
  EXPECT_EQ(field(r[4]->key, "id"), Value::int64(1));
  EXPECT_TRUE(r[4]->after.is_absent());
  // MINIMAL: before holds the key only, after the changed columns only; the rest stays absent.
  EXPECT_EQ(r[5]->op, Operation::update);
  EXPECT_EQ(r[5]->after.size(), 1u);
  EXPECT_EQ(field(r[5]->after, "b"), Value::int64(30));
  EXPECT_TRUE(field(r[5]->after, "a").is_absent());
  EXPECT_EQ(field(r[5]->key, "id"), Value::int64(3));
  EXPECT_EQ(r[6]->op, Operation::remove);
  EXPECT_EQ(field(r[6]->key, "id"), Value::int64(3));
  EXPECT_TRUE(field(r[6]->before, "a").is_absent());
  src->close();
}

TEST(MysqlSource, AlterTableMidStreamIsPickedUpWithoutRestart) {
  TestDb db("ddl");
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id INT PRIMARY KEY, a INT)"));
  auto src = open_source(db, "ddl", {{"snapshot.mode", "never"}});
  ASSERT_TRUE(src);
  Reader reader(*src);
  ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES (1, 1)"));
  ASSERT_TRUE(reader.read_count(1));
  // The schema history follows each DDL (replays across DDL: mysql_schema_history_test.cc); the
  // schema records between the rows are left out here.
  auto rows = [](const std::vector<const Record*>& all) {
    std::vector<const Record*> out;
    for (const Record* x : all)
      if (!is_control(x->op)) out.push_back(x);
    return out;
  };
  auto read_rows = [&](size_t n) {
    return reader.read_until([&](const auto& all) { return rows(all).size() >= n; });
  };
  ASSERT_TRUE(db.sql().exec(
      "ALTER TABLE t ADD COLUMN note VARCHAR(20) DEFAULT 'n', ADD COLUMN amount DECIMAL(6,2) UNSIGNED"));
  ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES (2, 2, 'hello', 12.5)"));
  ASSERT_TRUE(read_rows(2));
  ASSERT_TRUE(db.sql().exec("ALTER TABLE t DROP COLUMN a"));
  ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES (3, 'bye', 1.25)"));
  ASSERT_TRUE(read_rows(3));
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t2 (k VARCHAR(5) PRIMARY KEY)"));
  ASSERT_TRUE(db.sql().exec("INSERT INTO t2 VALUES ('new')"));
  ASSERT_TRUE(read_rows(4));
  const auto r = rows(reader.records());
  EXPECT_EQ(r[0]->after.size(), 2u);
  EXPECT_EQ(field(r[1]->after, "note"), Value::string("hello"));
  EXPECT_EQ(field(r[1]->after, "amount"), Value::decimal("12.50"));
  EXPECT_TRUE(field(r[2]->after, "a").is_absent());
  EXPECT_EQ(field(r[2]->after, "note"), Value::string("bye"));
  EXPECT_EQ(r[3]->meta("table"), "t2");  // a table created later in a captured database
  EXPECT_EQ(field(r[3]->key, "k"), Value::string("new"));
  src->close();
}

TEST(MysqlSource, OnlyListedTablesAreCaptured) {
  TestDb db("filter");
  ASSERT_TRUE(db.sql().exec("CREATE TABLE a (id INT PRIMARY KEY)"));
  ASSERT_TRUE(db.sql().exec("CREATE TABLE b (id INT PRIMARY KEY)"));
  ASSERT_TRUE(db.sql().exec("INSERT INTO a VALUES (1)"));
  ASSERT_TRUE(db.sql().exec("INSERT INTO b VALUES (1)"));
  auto src = open_source(db, "filter", {{"tables", db.name() + ".b"}});
  ASSERT_TRUE(src);
  Reader reader(*src);
  ASSERT_TRUE(reader.read_count(1));
  ASSERT_TRUE(db.sql().exec("INSERT INTO a VALUES (2)"));
  ASSERT_TRUE(db.sql().exec("INSERT INTO b VALUES (2)"));
  ASSERT_TRUE(reader.read_count(2));
  ASSERT_TRUE(reader.drain());
  ASSERT_EQ(reader.records().size(), 2u);
  for (const Record* r : reader.records()) EXPECT_EQ(r->meta("table"), "b");
  src->close();
}

// A burst's last records wait a tenth of batch.linger_ms after the last change of a captured
// table, not the whole linger, also while another database writes to the server's binlog without
// a pause: its events reach every binlog reader, and they are no changes of this source. They
// once held every batch for the whole linger.
TEST(MysqlSource, ABurstEndsItsBatchWhileAnotherDatabaseWritesTheBinlog) {
  using namespace std::chrono_literals;
  TestDb db("burst_busy"), other("burst_other");
  ASSERT_TRUE(db.sql().exec("CREATE TABLE b (id INT PRIMARY KEY)"));
  ASSERT_TRUE(other.sql().exec("CREATE TABLE w (id INT AUTO_INCREMENT PRIMARY KEY, v TEXT)"));
  auto src = open_source(db, "burst_busy", {{"tables", db.name() + ".b"}});
  ASSERT_TRUE(src);
  Reader reader(*src);
  reader.request().linger = 6000ms;
  ASSERT_TRUE(reader.drain());
  test::expect_bursts_land_beside_a_busy_writer(
      [&] { return other.sql().exec("INSERT INTO w (v) VALUES (REPEAT('x', 100))"); },
      [&](int from) {
        return db.sql().exec("INSERT INTO b SELECT seq FROM seq_" + std::to_string(from) + "_to_" +
                             std::to_string(from + 49));
      },
      [&](size_t n) { return reader.read_count(n, 20s); });
  src->close();
}

// A snapshot larger than one chunk, resumed from a mid-snapshot checkpoint: every row exactly once
// from the checkpoint on, and the stream then starts at the snapshot's binlog position.
TEST(MysqlSource, SnapshotResumesFromAChunkCheckpointAndStreamsFromItsPosition) {
  TestDb db("snapres");
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (a INT, b VARCHAR(10), v INT, PRIMARY KEY (a, b))"));
  std::string values;
  for (int i = 0; i < 250; ++i)
    values += (i ? "," : "") + ("(" + std::to_string(i / 10) + ", 'k" + std::to_string(i % 10) +
                                "', " + std::to_string(i) + ")");
  ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES " + values));
  std::string checkpoint;
  {
    auto src = open_source(db, "snapres", {{"snapshot.chunk_size", "40"}});
    ASSERT_TRUE(src);
    Reader reader(*src);
    reader.request().max_records = 40;
    ASSERT_TRUE(reader.read_count(120));
    checkpoint = reader.positions().back().second;
    EXPECT_TRUE(checkpoint.starts_with("snapshot ")) << checkpoint;
    EXPECT_EQ(reader.positions().back().first, 120u);
    src->close();
  }
  ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES (100, 'late', 1000)"));
  auto src = open_source(db, "snapres", {{"snapshot.chunk_size", "40"}}, checkpoint);
  ASSERT_TRUE(src);
  Reader reader(*src);
  ASSERT_TRUE(reader.read_until([](const auto& r) {
    for (const Record* x : r)
      if (x->op == Operation::create) return true;
    return false;
  }));
  std::set<int64_t> seen;
  size_t snapshot_rows = 0;
  for (const Record* r : reader.records()) {
    if (r->op != Operation::snapshot) continue;
    ++snapshot_rows;
    EXPECT_TRUE(seen.insert(field(r->after, "v").as_int64()).second)
        << "duplicate " << field(r->after, "v").as_int64();
  }
  // The resumed snapshot (newer) sees the late row too; the stream replays it as a create.
  EXPECT_EQ(snapshot_rows, 250u - 120u + 1u);
  EXPECT_EQ(*seen.begin(), 120);
  src->close();
}

// Rows of 1 MiB each: a snapshot query's rows all went into one batch, so a query sized by rows
// alone (chunk_size, max_records) held the whole table in memory. The first query of a table
// reads a few rows, the next ones as many as the bytes left in the batch hold, and a query that
// runs over ends the batch at the row that fills it. Keyed and keyless tables; every row comes
// once, in order, and a restart from a batch's position reads exactly the rows after it.
TEST(MysqlSource, LargeRowsKeepEachSnapshotBatchWithinItsBytes) {
  TestDb db("largerows");
  ASSERT_TRUE(db.sql().exec("CREATE TABLE keyed (id INT PRIMARY KEY, v LONGTEXT NOT NULL)"));
  ASSERT_TRUE(db.sql().exec("CREATE TABLE keyless (id INT NOT NULL, v LONGTEXT NOT NULL)"));
  for (const char* t : {"keyed", "keyless"}) {
    ASSERT_TRUE(db.sql().exec(fmt::format(
        "INSERT INTO {} SELECT seq, REPEAT(MD5(seq), 32768) FROM seq_1_to_24 ORDER BY seq", t)));
  }
  // The ids of each table, in the order read.
  auto ids = [](const std::vector<const Record*>& rs) {
    std::map<std::string, std::vector<int64_t>> by_table;
    for (const Record* r : rs) {
      if (r->op != Operation::snapshot) continue;
      EXPECT_EQ(field(r->after, "v").as_text().size(), size_t(1) << 20);
      by_table[std::string(r->meta("table"))].push_back(field(r->after, "id").as_int64());
    }
    return by_table;
  };
  auto from = [](int64_t first) {
    std::vector<int64_t> v;
    for (int64_t i = first; i <= 24; ++i) v.push_back(i);
    return v;
  };
  std::vector<std::pair<size_t, std::string>> positions;
  {
    auto src = open_source(db, "largerows", {{"snapshot.mode", "initial_only"}});
    ASSERT_TRUE(src);
    Reader reader(*src, /*ack=*/false);
    reader.request().max_records = 1000;
    reader.request().max_bytes = 4 << 20;
    ASSERT_TRUE(reader.read_count(48));
    auto got = ids(reader.records());
    EXPECT_EQ(got["keyed"], from(1));
    EXPECT_EQ(got["keyless"], from(1));
    EXPECT_LE(reader.largest_batch_bytes(), size_t(5) << 20)
        << "a batch ran over max_bytes by more than a row";
    positions = reader.positions();
    src->close();
  }
  // Restarts from positions inside each table: the keyed table goes on after the last key read;
  // the keyless one is read again from its first row (offsets shift under a newer snapshot).
  ASSERT_GE(positions.size(), 8u);
  for (size_t k : {positions.size() / 4, positions.size() * 3 / 4}) {
    const auto& [done, cut] = positions[k];
    SCOPED_TRACE("resuming from " + cut);
    ASSERT_TRUE(cut.starts_with("snapshot ")) << cut;
    ASSERT_GT(done, 0u);
    auto src = open_source(db, "largerows", {{"snapshot.mode", "initial_only"}}, cut);
    ASSERT_TRUE(src);
    Reader reader(*src, /*ack=*/false);
    reader.request().max_bytes = 4 << 20;
    const size_t keyed_done = std::min<size_t>(done, 24);
    ASSERT_TRUE(reader.read_count(24 - keyed_done + 24));
    auto got = ids(reader.records());
    EXPECT_EQ(got["keyed"], from(int64_t(keyed_done) + 1));
    EXPECT_EQ(got["keyless"], from(1));
    EXPECT_LE(reader.largest_batch_bytes(), size_t(5) << 20);
    src->close();
  }
}

// Positions inside a transaction: a restart from any batch's position yields exactly the changes
// after it, even in the middle of a transaction.
TEST(MysqlSource, ResumeFromInsideATransactionSkipsExactlyWhatWasWritten) {
  TestDb db("txres");
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id INT PRIMARY KEY)"));
  std::string start;
  {
    auto src = open_source(db, "txres", {{"snapshot.mode", "never"}});
    ASSERT_TRUE(src);
    Reader reader(*src);
    ASSERT_TRUE(reader.drain());
    start = reader.positions().empty() ? "" : reader.positions().back().second;
    src->close();
  }
  ASSERT_TRUE(db.sql().exec("BEGIN"));
  std::string values;
  for (int i = 1; i <= 100; ++i) values += (i > 1 ? "," : "") + ("(" + std::to_string(i) + ")");
  ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES " + values));
  ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES (101), (102)"));
  ASSERT_TRUE(db.sql().exec("COMMIT"));
  ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES (103)"));
  auto src = open_source(db, "txres", {{"snapshot.mode", "never"}},
                         start.empty() ? std::nullopt : std::optional(start));
  ASSERT_TRUE(src);
  Reader reader(*src);
  reader.request().max_records = 7;
  ASSERT_TRUE(reader.read_count(103));
  src->close();
  ASSERT_EQ(reader.records().size(), 103u);
  // Restart from every position seen; the continuation must be exactly the rest.
  for (const auto& [count, pos] : reader.positions()) {
    if (count == 0 || count >= 103) continue;
    auto again = open_source(db, "txres", {{"snapshot.mode", "never"}}, pos);
    ASSERT_TRUE(again);
    Reader r2(*again);
    ASSERT_TRUE(r2.read_count(103 - count)) << pos;
    ASSERT_TRUE(r2.drain());
    ASSERT_EQ(r2.records().size(), 103 - count) << pos;
    EXPECT_EQ(field(r2.records()[0]->after, "id"), Value::int64(int64_t(count) + 1)) << pos;
    again->close();
    if (count > 30) break;  // enough positions inside the transaction
  }
}

// The binlog connection killed on the server: the source reconnects and loses nothing.
TEST(MysqlSource, KilledBinlogConnectionIsReopenedWithoutLoss) {
  TestDb db("reconnect");
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id INT PRIMARY KEY)"));
  // A user of its own, so that only this source's binlog connection is killed.
  const std::string url =
      db.user_url("recon", {"GRANT SELECT ON {db}.* TO {user}",
                            "GRANT BINLOG MONITOR, REPLICATION SLAVE ON *.* TO {user}"});
  const std::string user = MyUrl::parse(url).user;
  auto src = make_source({{"url", url}, {"tables", "*"}, {"snapshot.mode", "never"}});
  ASSERT_TRUE(src);
  ASSERT_TRUE(src->open(context("reconnect"), std::nullopt).ok());
  Reader reader(*src);
  ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES (1)"));
  ASSERT_TRUE(reader.read_count(1));
  int killed = 0;
  for (const auto& row : db.admin().query(
           "SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%' "
           "AND USER = '" +
           user + "'"))
    if (db.admin().exec("KILL " + *row[0], true)) ++killed;
  EXPECT_EQ(killed, 1);
  ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES (2), (3)"));
  ASSERT_TRUE(reader.read_count(3, 60s));
  ASSERT_TRUE(reader.drain());
  ASSERT_EQ(reader.records().size(), 3u);
  EXPECT_EQ(field(reader.records()[1]->after, "id"), Value::int64(2));
  EXPECT_EQ(field(reader.records()[2]->after, "id"), Value::int64(3));
  src->close();
}

// ── bad set-ups: one-line errors naming the fix ─────────────────────────────

std::string open_error(const std::string& url, std::map<std::string, std::string> extra = {},
                       const std::optional<std::string>& checkpoint = std::nullopt) {
  extra.emplace("url", url);
  extra.emplace("tables", "*");
  auto src = make_source(extra);
  if (!src) return "no source";
  Status st = src->open(context("errors"), checkpoint);
  src->close();
  if (st.ok()) return "";
  EXPECT_EQ(st.error().message().find('\n'), std::string::npos) << st.error().message();
  EXPECT_EQ(st.error().message().find("pw"), std::string::npos)
      << "password leaked: " << st.error().message();
  return st.error().message();
}

TEST(MysqlSource, WrongCredentialsNameTheUrl) {
  TestDb db("creds");
  MyUrl u = MyUrl::parse(db.url());
  u.password = "pw-wrong";
  const std::string e = open_error(u.str());
  EXPECT_NE(e.find("Access denied"), std::string::npos) << e;
  EXPECT_NE(e.find("check the user and password"), std::string::npos) << e;
  EXPECT_EQ(e.find("pw-wrong"), std::string::npos) << e;
}

TEST(MysqlSource, MissingPrivilegesNameTheGrant) {
  TestDb db("privs");
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id INT PRIMARY KEY)"));
  // No REPLICATION CLIENT / BINLOG MONITOR.
  std::string e = open_error(db.user_url(
      "nocl", {"GRANT SELECT ON {db}.* TO {user}", "GRANT REPLICATION SLAVE ON *.* TO {user}"}));
  EXPECT_NE(e.find("REPLICATION CLIENT"), std::string::npos) << e;
  EXPECT_NE(e.find("GRANT"), std::string::npos) << e;
  // No REPLICATION SLAVE.
  e = open_error(db.user_url(
      "nosl", {"GRANT SELECT ON {db}.* TO {user}", "GRANT BINLOG MONITOR ON *.* TO {user}"}));
  EXPECT_NE(e.find("REPLICATION SLAVE"), std::string::npos) << e;
  // No SELECT on the table.
  e = open_error(db.user_url("nosel", {"GRANT INSERT ON {db}.* TO {user}",
                                       "GRANT BINLOG MONITOR, REPLICATION SLAVE ON *.* TO {user}"}),
                 {{"tables", db.name() + ".t"}});
  EXPECT_NE(e.find("SELECT"), std::string::npos) << e;
  // Everything granted: opens.
  e = open_error(db.user_url("ok", {"GRANT SELECT ON {db}.* TO {user}",
                                    "GRANT BINLOG MONITOR, REPLICATION SLAVE ON *.* TO {user}"}));
  EXPECT_EQ(e, "");
}

TEST(MysqlSource, PurgedOrUnknownBinlogPositionSaysStartOver) {
  TestDb db("purged");
  const std::string e =
      open_error(db.url(), {{"snapshot.mode", "never"}}, std::string("cdc binlog.999999 4 -"));
  EXPECT_NE(e.find("no longer on"), std::string::npos) << e;
  EXPECT_NE(e.find("sluice cleanup"), std::string::npos) << e;
  const std::string g = open_error(db.url(), {{"snapshot.mode", "never"}},
                                   std::string("cdc binlog.000001 4 0-1-99999999"));
  EXPECT_NE(g.find("sluice cleanup"), std::string::npos) << g;
}

TEST(MysqlSource, MissingTableAndBadSettingsAreConfigErrors) {
  TestDb db("cfg");
  std::string e = open_error(db.url(), {{"tables", db.name() + ".nope"}});
  EXPECT_NE(e.find("does not exist"), std::string::npos) << e;
  const ConnectorSpec* spec = Registry::builtin().connector("mysql");
  ASSERT_TRUE(spec);
  Settings s(spec->source_settings);
  ASSERT_FALSE(
      settings_from_text(spec->source_settings, {{"url", db.url()}, {"tables", "a.b.c"}}, &s));
  auto src = spec->make_source(s);
  ASSERT_FALSE(src.ok());
  EXPECT_NE(src.error().message().find("tables"), std::string::npos);
  Settings s2(spec->source_settings);
  ASSERT_FALSE(settings_from_text(spec->source_settings, {{"url", "postgres://x@y/z"}}, &s2));
  EXPECT_FALSE(spec->make_source(s2).ok());
}

TEST(MysqlSource, SnapshotProgressIsPublished) {
  TestDb db("progress");
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id INT PRIMARY KEY)"));
  ASSERT_TRUE(db.sql().exec("INSERT INTO t SELECT seq FROM seq_1_to_500"));
  ASSERT_TRUE(db.sql().exec("ANALYZE TABLE t"));
  ConnectorStats stats;
  auto src = make_source({{"url", db.url()}, {"tables", "*"}, {"snapshot.mode", "initial_only"}});
  ASSERT_TRUE(src);
  ASSERT_TRUE(src->open(context("progress", &stats), std::nullopt).ok());
  Reader reader(*src);
  ASSERT_TRUE(
      reader.read_until([&](const auto&) { return reader.last_status() == ReadStatus::end; }));
  EXPECT_EQ(reader.records().size(), 500u);
  EXPECT_EQ(stats.snapshot_rows_done.load(), 500);
  EXPECT_GT(stats.snapshot_rows_total.load(), 0);
  EXPECT_TRUE(reader.positions().back().second.starts_with("done "))
      << reader.positions().back().second;
  src->close();
}

}  // namespace
}  // namespace sluice::mytest

namespace sluice::mytest {
namespace {

// The mariadb-nobinlog service (no log_bin): streaming is refused with the fix; a snapshot alone
// works.
TEST(MysqlSource, BinlogOffIsRefusedButInitialOnlyWorks) {
  const std::string url = pgtest::env_url("SLUICE_TEST_MYSQL_NOBINLOG_URL", "mariadb-nobinlog");
  ASSERT_FALSE(url.empty());
  MyConn admin(url);
  ASSERT_TRUE(admin.ok());
  const std::string name = unique_name("sl_nobinlog");
  ASSERT_TRUE(admin.exec("CREATE DATABASE `" + name + "`"));
  ASSERT_TRUE(admin.exec("CREATE TABLE `" + name + "`.t (id INT PRIMARY KEY)"));
  ASSERT_TRUE(admin.exec("INSERT INTO `" + name + "`.t VALUES (1), (2)"));
  MyUrl u = MyUrl::parse(url);
  u.db = name;
  const std::string e = open_error(u.str());
  EXPECT_NE(e.find("binary logging is off"), std::string::npos) << e;
  EXPECT_NE(e.find("log_bin"), std::string::npos) << e;
  auto src = make_source({{"url", u.str()}, {"tables", "*"}, {"snapshot.mode", "initial_only"}});
  ASSERT_TRUE(src);
  ASSERT_TRUE(src->open(context("nobinlog"), std::nullopt).ok());
  Reader reader(*src);
  ASSERT_TRUE(
      reader.read_until([&](const auto&) { return reader.last_status() == ReadStatus::end; }));
  EXPECT_EQ(reader.records().size(), 2u);
  src->close();
  admin.exec("DROP DATABASE `" + name + "`");
}

}  // namespace
}  // namespace sluice::mytest

namespace sluice::mytest {
namespace {

TEST(MysqlSource, TruncateIsAKeylessDeleteMarkedTruncate) {
  TestDb db("trunc");
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id INT PRIMARY KEY)"));
  ASSERT_TRUE(db.sql().exec("CREATE TABLE other (id INT PRIMARY KEY)"));
  auto src = open_source(db, "trunc", {{"snapshot.mode", "never"}, {"tables", db.name() + ".t"}});
  ASSERT_TRUE(src);
  Reader reader(*src);
  ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES (1)"));
  ASSERT_TRUE(db.sql().exec("TRUNCATE TABLE other"));
  ASSERT_TRUE(db.sql().exec("TRUNCATE `" + db.name() + "`.`t`"));
  ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES (2)"));
  ASSERT_TRUE(reader.read_count(3));
  ASSERT_TRUE(reader.drain());
  const auto& r = reader.records();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_TRUE(is_truncate(*r[1]));
  EXPECT_EQ(r[1]->meta("table"), "t");
  EXPECT_EQ(r[1]->meta("schema"), db.name());
  EXPECT_EQ(field(r[2]->key, "id"), Value::int64(2));
  src->close();
}

}  // namespace
}  // namespace sluice::mytest

namespace sluice::mytest {
namespace {

// Replaying events written before DDL: with binlog_row_metadata=FULL the events name their
// columns, so each record has the columns of its time. (The test sets the global variable and
// restores it; only the mysql source reads the binlog's table maps.)
TEST(MysqlSource, ReplayAcrossDdlWithFullRowMetadataKeepsEachEventsColumns) {
  TestDb db("replayddl");
  const std::string before = db.admin().scalar("SELECT @@global.binlog_row_metadata");
  ASSERT_TRUE(db.admin().exec("SET GLOBAL binlog_row_metadata = FULL"));
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(5))"));
  std::string start;
  {
    auto src = open_source(db, "replayddl", {{"snapshot.mode", "never"}});
    ASSERT_TRUE(src);
    Reader reader(*src);
    ASSERT_TRUE(reader.drain());
    start = reader.positions().back().second;
    src->close();
  }
  ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES (1, 'x')"));
  ASSERT_TRUE(db.sql().exec("ALTER TABLE t ADD COLUMN b INT UNSIGNED AFTER id"));
  ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES (2, 4000000000, 'y')"));
  ASSERT_TRUE(db.sql().exec("ALTER TABLE t DROP COLUMN a"));
  ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES (3, 7)"));
  db.admin().exec("SET GLOBAL binlog_row_metadata = " +
                  (before.empty() ? std::string("NO_LOG") : before));
  auto src = open_source(db, "replayddl", {{"snapshot.mode", "never"}}, start);
  ASSERT_TRUE(src);
  Reader reader(*src);
  auto rows = [](const std::vector<const Record*>& all) {
    std::vector<const Record*> out;
    for (const Record* x : all)
      if (!is_control(x->op)) out.push_back(x);
    return out;
  };
  ASSERT_TRUE(reader.read_until([&](const auto& all) { return rows(all).size() >= 3; }));
  const auto r = rows(reader.records());
  EXPECT_EQ(r[0]->after.size(), 2u);
  EXPECT_EQ(field(r[0]->after, "a"), Value::string("x"));
  EXPECT_EQ(r[1]->after.size(), 3u);
  EXPECT_EQ(field(r[1]->after, "b"), Value::uint64(4000000000ULL));
  EXPECT_EQ(field(r[1]->after, "a"), Value::string("y"));
  EXPECT_EQ(r[2]->after.size(), 2u);
  EXPECT_EQ(field(r[2]->after, "b"), Value::uint64(7));
  EXPECT_EQ(field(r[2]->key, "id"), Value::int64(3));
  src->close();
}

}  // namespace
}  // namespace sluice::mytest

namespace sluice::mytest {
namespace {

TEST(MysqlSource, TablesWithoutPrimaryKeyAndOddNamesAreSnapshottedAndStreamed) {
  TestDb db("nopk");
  ASSERT_TRUE(db.sql().exec("CREATE TABLE `odd ``name`` t` (`col one` INT, `ü` VARCHAR(5))"));
  ASSERT_TRUE(db.sql().exec("INSERT INTO `odd ``name`` t` SELECT seq, 'x' FROM seq_1_to_25"));
  auto src = open_source(db, "nopk", {{"snapshot.chunk_size", "10"}});
  ASSERT_TRUE(src);
  Reader reader(*src);
  reader.request().max_records = 10;
  ASSERT_TRUE(reader.read_count(25));
  std::set<int64_t> seen;
  for (const Record* r : reader.records()) {
    EXPECT_TRUE(r->key.is_absent());
    seen.insert(field(r->after, "col one").as_int64());
  }
  EXPECT_EQ(seen.size(), 25u);
  ASSERT_TRUE(db.sql().exec("INSERT INTO `odd ``name`` t` VALUES (26, '\xc3\xbc')"));
  ASSERT_TRUE(reader.read_count(26));
  EXPECT_EQ(reader.records()[25]->meta("table"), "odd `name` t");
  EXPECT_EQ(field(reader.records()[25]->after, "\xc3\xbc"), Value::string("\xc3\xbc"));
  src->close();
}

}  // namespace
}  // namespace sluice::mytest

namespace sluice::mytest {
namespace {

// binlog.decode_threads: rows events decoded ahead on the pool's threads (binlog_decode_pool.h)
// make the same records, in the same order, as the source's thread alone. The changes are all
// written before either source reads, so the ring holds many events at once and the pool takes
// most rows events; among them: several tables in one transaction, updates of many rows, deletes,
// a MINIMAL image (decoded in turn), an ALTER TABLE (the look ahead stops at it) and rows after it.
TEST(MysqlSource, RowsDecodedOnSeveralThreadsAreTheSameRecordsInTheSameOrder) {
  TestDb db("pool");
  ASSERT_TRUE(db.sql().exec(
      "CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(60), b BIGINT, d DATETIME(3), e ENUM('x','y'))"));
  ASSERT_TRUE(db.sql().exec("CREATE TABLE u (k VARCHAR(10) PRIMARY KEY, v INT)"));
  auto one =
      open_source(db, "pool-one", {{"snapshot.mode", "never"}, {"binlog.decode_threads", "1"}});
  auto four =
      open_source(db, "pool-four", {{"snapshot.mode", "never"}, {"binlog.decode_threads", "4"}});
  ASSERT_TRUE(one && four);
  size_t expect = 0;
  auto values = [](int from, int to) {
    std::string v;
    for (int i = from; i < to; ++i)
      v += fmt::format("{}({}, 'row {} {}', {}, '2024-01-{:02} 10:00:{:02}.{:03}', '{}')",
                       v.empty() ? "" : ",", i, i, std::string(size_t(i % 40), 'p'),
                       int64_t(i) * 1000003, 1 + i % 28, i % 60, i % 1000, i % 2 ? "x" : "y");
    return v;
  };
  for (int tx = 0; tx < 20; ++tx) {  // 20 transactions of 400 rows in two tables
    ASSERT_TRUE(db.sql().exec("START TRANSACTION"));
    ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES " + values(tx * 300, tx * 300 + 300)));
    std::string u;
    for (int i = 0; i < 100; ++i)
      u += fmt::format("{}('k{}_{}', {})", u.empty() ? "" : ",", tx, i, i);
    ASSERT_TRUE(db.sql().exec("INSERT INTO u VALUES " + u));
    ASSERT_TRUE(db.sql().exec("COMMIT"));
    expect += 400;
  }
  ASSERT_TRUE(db.sql().exec("UPDATE t SET b = b + 1, a = CONCAT(a, '!') WHERE id % 3 = 0"));
  expect += 2000;
  ASSERT_TRUE(db.sql().exec("DELETE FROM u WHERE v % 2 = 1"));
  expect += 1000;
  ASSERT_TRUE(db.sql().exec("SET SESSION binlog_row_image = MINIMAL"));
  ASSERT_TRUE(db.sql().exec("UPDATE t SET b = -1 WHERE id < 500"));
  expect += 500;
  ASSERT_TRUE(db.sql().exec("SET SESSION binlog_row_image = FULL"));
  ASSERT_TRUE(db.sql().exec("ALTER TABLE t ADD COLUMN note VARCHAR(10) DEFAULT 'n'"));
  ASSERT_TRUE(db.sql().exec("UPDATE t SET note = 'after' WHERE id >= 3000"));
  expect += 3000;
  ASSERT_TRUE(db.sql().exec("INSERT INTO t (id, a, b, d, e) VALUES " + values(6000, 7000)));
  expect += 1000;
  // Rows only (the ALTER's schema record aside); same count from both.
  auto rows_of = [](const std::vector<const Record*>& all) {
    std::vector<const Record*> out;
    for (const Record* x : all)
      if (!is_control(x->op)) out.push_back(x);
    return out;
  };
  Reader r1(*one), r4(*four);
  for (Reader* r : {&r1, &r4})
    ASSERT_TRUE(r->read_until([&](const auto& all) { return rows_of(all).size() >= expect; }, 60s));
  const auto a = rows_of(r1.records()), b = rows_of(r4.records());
  ASSERT_EQ(a.size(), expect);
  ASSERT_EQ(b.size(), expect);
  size_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const bool same = a[i]->op == b[i]->op && a[i]->key == b[i]->key &&
                      a[i]->before == b[i]->before && a[i]->after == b[i]->after &&
                      a[i]->meta("table") == b[i]->meta("table") &&
                      a[i]->meta("binlog_pos") == b[i]->meta("binlog_pos") &&
                      a[i]->meta("gtid") == b[i]->meta("gtid");
    if (!same && differ++ < 5) ADD_FAILURE() << "record " << i << " differs";
  }
  EXPECT_EQ(differ, 0u);
  // The records are what was written: spot checks on either side of the ALTER and the MINIMAL.
  EXPECT_EQ(field(b[0]->after, "a"), Value::string("row 0 "));
  EXPECT_EQ(field(b[expect - 1]->after, "id"), Value::int64(6999));
  EXPECT_EQ(field(b[expect - 1]->after, "note"), Value::string("n"));
  EXPECT_EQ(field(b[expect - 1001]->after, "note"), Value::string("after"));
  one->close();
  four->close();
}

}  // namespace
}  // namespace sluice::mytest
