// The postgres source in-process against the real PostgreSQL 15 test server: every type with
// exact values in snapshot and CDC, unchanged TOAST, replica identities, truncate, DDL
// mid-stream, CDC metadata, and resuming inside one transaction.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <regex>
#include <set>
#include <tuple>

#include "integration/pg_harness.h"
#include "sluice/arena.h"
#include "sluice/value.h"
#include "support/bursts.h"
#include "support/log_capture.h"

namespace sluice::pgtest {
namespace {

ConnectorContext context(const std::string& id) {
  return ConnectorContext{id, "postgres", nullptr};
}

// Opens the source on `db` for `tables` (pipeline id = slot/publication suffix, unique per test).
std::unique_ptr<Source> open_source(TestDb& db, const std::string& id, const std::string& tables,
                                    const std::optional<std::string>& checkpoint = std::nullopt,
                                    std::map<std::string, std::string> extra = {}) {
  extra["url"] = db.url();
  extra["tables"] = tables;
  auto src = make_source(extra);
  if (!src) return nullptr;
  Status st = src->open(context(id), checkpoint);
  if (!st.ok()) {
    ADD_FAILURE() << "open failed: " << st.error().message();
    return nullptr;
  }
  return src;
}

std::string dbg(const Value* v) { return v ? to_debug_string(*v) : "<missing>"; }

const Record* find_record(const std::vector<const Record*>& rs, Operation op, int64_t id,
                          size_t from = 0) {
  for (size_t i = from; i < rs.size(); ++i) {
    const Record* r = rs[i];
    if (r->op != op) continue;
    const Value* k = r->key.is_object() ? r->key.find("id") : nullptr;
    if (k && k->kind() == ValueKind::int64 && k->as_int64() == id) return r;
  }
  return nullptr;
}

size_t count_ops(const std::vector<const Record*>& rs, Operation op) {
  size_t n = 0;
  for (const Record* r : rs) n += r->op == op;
  return n;
}

// The most data records one batch the reader read held.
size_t largest_batch(const Reader& reader) {
  size_t before = 0, largest = 0;
  for (const auto& [n, pos] : reader.positions()) {
    largest = std::max(largest, n - before);
    before = n;
  }
  return largest;
}

// The reader's snapshot records have ids first, first + 1, ... (page order of a table filled in
// id order).
void expect_snapshot_ids_from(const Reader& reader, int64_t first) {
  int64_t next = first;
  for (const Record* r : reader.records()) {
    if (r->op != Operation::snapshot) continue;
    ASSERT_EQ(r->after.find("id")->as_int64(), next) << "rows out of page order or missing";
    ++next;
  }
}

// Waits until no connection uses the pipeline's slot (the source before was closed).
bool slot_released(TestDb& db, const std::string& pipeline) {
  return wait_until(
      [&] {
        return db.sql().scalar(
                   "SELECT count(*) FROM pg_replication_slots WHERE active AND slot_name = "
                   "'sluice_" +
                   pipeline + "'") == "0";
      },
      10s);
}

// ── every type ──────────────────────────────────────────────────────────────

constexpr const char* kTypesDdl = R"sql(
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN posint AS integer CHECK (VALUE > 0);
CREATE DOMAIN short_text AS varchar(8);
CREATE TABLE types (
  id int PRIMARY KEY,
  i2 smallint, i4 integer, i8 bigint, num numeric, f4 real, f8 double precision,
  t text, vc varchar(20), ch char(5), by bytea, b bool,
  d date, tm time, ttz timetz, ts timestamp, tstz timestamptz, iv interval,
  u uuid, j json, jb jsonb, ai int[], at text[], a2 int[], m mood, dom posint,
  ma mood[], dt short_text
);
)sql";

constexpr const char* kTypesRows = R"sql(
INSERT INTO types VALUES
 (1, -32768, -2147483648, -9223372036854775808,
  '-123456789012345678901234567890.123456789012345678901234567890', '-Infinity', '-Infinity',
  E'tab\there\nnew line \\ back''quote', 'héllo wörld', 'ab', '\x00ff0a5c', false,
  '2024-02-29', '23:59:59.999999', '13:45:00.5+05:30', '2024-02-29 13:45:00.123456',
  '2024-02-29 13:45:00.123456+02', '-1 years -2 mons +3 days -04:05:06.5',
  'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"a": [1, 2.5, null], "b": "x\"y"}', '{"b": 1, "a": [true, null]}',
  '{1,NULL,-3}', ARRAY['a"b', NULL, 'NULL', 'x,y', ' sp ', 'back\slash', ''], '{{1,2},{3,4}}', 'happy', 42,
  '{happy,NULL,sad}', 'dom txt'),
 (2, 32767, 2147483647, 9223372036854775807, 'NaN', 'NaN', 'NaN', '', '', '', '\x', true,
  'infinity', '00:00:00', '00:00:00-08', '-infinity', 'infinity', '0', '00000000-0000-0000-0000-000000000000',
  '[]', '{}', '{}', '{}', '{}', 'sad', 1, '{}', ''),
 (3, 0, 0, 0, '123456789012345678901234567890123456789012345678901234567890.000000000000000000000000000001',
  'Infinity', 'Infinity', 'plain', 'x', 'abcde', '\xdeadbeef', true,
  '0044-03-15 BC', '12:00:00', '12:00:00+00', '1999-12-31 23:59:59', '1970-01-01 00:00:00+00',
  '1 year 2 mons 3 days 04:05:06.000001', 'ffffffff-ffff-ffff-ffff-ffffffffffff', 'null', 'null',
  '{NULL}', '{NULL}', '{{NULL,1},{2,NULL}}', 'ok', 2147483647, NULL, NULL),
 (4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO types (id, f4, f8, num) VALUES (5, 1.5, 0.1, '0.000000000000000000000000000000000000000000000000001');
INSERT INTO types (id, f4, f8, num) VALUES (6, -0.25, 1.7976931348623157e308, '-0.5');
INSERT INTO types (id, tm, ttz, num, ts, tstz, ai, d, iv) VALUES (7, '24:00:00', '24:00:00-15:59:59', 'Infinity',
  '10000-01-01 00:00:00', '0100-01-01 00:00:00+00 BC', '[1:2]={1,2}', '5874897-12-31', '-178000000 years');
)sql";

constexpr int64_t kMicrosPerDay = 86400LL * 1000000LL;

int64_t micros_of(int64_t y, unsigned mo, unsigned d, int64_t h, int64_t mi, int64_t s,
                  int64_t us) {
  return int64_t(days_from_civil(y, mo, d)) * kMicrosPerDay + ((h * 60 + mi) * 60 + s) * 1000000 +
         us;
}

class Expect {
 public:
  Value str(std::string_view s) { return Value::string(arena_.copy(s)); }
  Value dec(std::string_view s) { return Value::decimal(arena_.copy(s)); }
  Value json(std::string_view s) { return Value::json(arena_.copy(s)); }
  Value bytes(std::string_view s) { return Value::bytes(arena_.copy(s)); }
  Value uuid(std::string_view s) {
    auto* b = static_cast<uint8_t*>(arena_.allocate(16, 1));
    EXPECT_TRUE(parse_uuid(s, b));
    return Value::uuid(b);
  }
  Value interval(int32_t months, int32_t days, int64_t micros) {
    auto* iv =
        new (arena_.allocate(sizeof(Interval), alignof(Interval))) Interval{months, days, micros};
    return Value::interval(iv);
  }
  Value array(std::initializer_list<Value> items) {
    Value* v = arena_.allocate_array<Value>(items.size());
    size_t i = 0;
    for (const Value& x : items) new (&v[i++]) Value(x);
    return Value::array(v, uint32_t(items.size()));
  }

 private:
  Arena arena_;
};

void expect_fields(const Record& r, const std::vector<std::pair<std::string, Value>>& want,
                   const std::string& what) {
  ASSERT_TRUE(r.after.is_object()) << what;
  for (const auto& [name, v] : want) {
    const Value* got = r.after.find(name);
    EXPECT_TRUE(got != nullptr && *got == v)
        << what << " column " << name << ": got " << dbg(got) << " (kind "
        << (got ? value_kind_name(got->kind()) : "none") << "), want " << to_debug_string(v)
        << " (kind " << value_kind_name(v.kind()) << ")";
  }
}

TEST(PostgresSource, EveryTypeHasExactValuesInSnapshotAndCdc) {
  TestDb db("types");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec(kTypesDdl));
  ASSERT_TRUE(db.sql().exec(kTypesRows));

  auto src = open_source(db, "t_types", "public.types");
  ASSERT_TRUE(src);
  Reader reader(*src);
  ASSERT_TRUE(reader.read_count(7));
  ASSERT_EQ(reader.records().size(), 7u);
  std::map<int64_t, const Record*> snap;
  for (const Record* r : reader.records()) {
    ASSERT_EQ(r->op, Operation::snapshot);
    EXPECT_EQ(r->meta("schema"), "public");
    EXPECT_EQ(r->meta("table"), "types");
    snap[r->after.find("id")->as_int64()] = r;
  }
  ASSERT_EQ(snap.size(), 7u);

  Expect e;
  const double inf = std::numeric_limits<double>::infinity(),
               nan = std::numeric_limits<double>::quiet_NaN();
  const Value null = Value::null();
  expect_fields(
      *snap[1],
      {{"id", Value::int64(1)},
       {"i2", Value::int64(-32768)},
       {"i4", Value::int64(-2147483648LL)},
       {"i8", Value::int64(std::numeric_limits<int64_t>::min())},
       {"num", e.dec("-123456789012345678901234567890.123456789012345678901234567890")},
       {"f4", Value::float64(-inf)},
       {"f8", Value::float64(-inf)},
       {"t", e.str("tab\there\nnew line \\ back'quote")},
       {"vc", e.str("héllo wörld")},
       {"ch", e.str("ab   ")},
       {"by", e.bytes(std::string_view("\x00\xff\x0a\x5c", 4))},
       {"b", Value::boolean(false)},
       {"d", Value::date(days_from_civil(2024, 2, 29))},
       {"tm", Value::time(86399999999LL)},
       {"ttz", Value::timetz((13 * 3600 + 45 * 60) * 1000000LL + 500000, 5 * 3600 + 30 * 60)},
       {"ts", Value::timestamp(micros_of(2024, 2, 29, 13, 45, 0, 123456))},
       {"tstz", Value::timestamptz(micros_of(2024, 2, 29, 11, 45, 0, 123456))},
       {"iv", e.interval(-14, 3, -((4 * 3600 + 5 * 60 + 6) * 1000000LL + 500000))},
       {"u", e.uuid("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")},
       {"j", e.json(R"({"a": [1, 2.5, null], "b": "x\"y"})")},
       {"jb", e.json(R"({"a": [true, null], "b": 1})")},
       {"ai", e.array({Value::int64(1), null, Value::int64(-3)})},
       {"at", e.array({e.str("a\"b"), null, e.str("NULL"), e.str("x,y"), e.str(" sp "),
                       e.str("back\\slash"), e.str("")})},
       {"a2", e.array({e.array({Value::int64(1), Value::int64(2)}),
                       e.array({Value::int64(3), Value::int64(4)})})},
       {"m", e.str("happy")},
       {"dom", Value::int64(42)},
       {"ma", e.array({e.str("happy"), null, e.str("sad")})},
       {"dt", e.str("dom txt")}},
      "snapshot row 1");
  expect_fields(*snap[2],
                {{"i2", Value::int64(32767)},
                 {"i4", Value::int64(2147483647)},
                 {"i8", Value::int64(std::numeric_limits<int64_t>::max())},
                 {"num", e.dec("NaN")},
                 {"f4", Value::float64(nan)},
                 {"f8", Value::float64(nan)},
                 {"t", e.str("")},
                 {"vc", e.str("")},
                 {"ch", e.str("     ")},
                 {"by", e.bytes("")},
                 {"b", Value::boolean(true)},
                 {"d", Value::date(std::numeric_limits<int32_t>::max())},
                 {"tm", Value::time(0)},
                 {"ttz", Value::timetz(0, -8 * 3600)},
                 {"ts", Value::timestamp(std::numeric_limits<int64_t>::min())},
                 {"tstz", Value::timestamptz(std::numeric_limits<int64_t>::max())},
                 {"iv", e.interval(0, 0, 0)},
                 {"u", e.uuid("00000000-0000-0000-0000-000000000000")},
                 {"j", e.json("[]")},
                 {"jb", e.json("{}")},
                 {"ai", e.array({})},
                 {"at", e.array({})},
                 {"a2", e.array({})},
                 {"m", e.str("sad")},
                 {"dom", Value::int64(1)},
                 {"ma", e.array({})},
                 {"dt", e.str("")}},
                "snapshot row 2");
  expect_fields(
      *snap[3],
      {{"num", e.dec("123456789012345678901234567890123456789012345678901234567890."
                     "000000000000000000000000000001")},
       {"f4", Value::float64(inf)},
       {"f8", Value::float64(inf)},
       {"ch", e.str("abcde")},
       {"by", e.bytes("\xde\xad\xbe\xef")},
       {"d", Value::date(days_from_civil(-43, 3, 15))},
       {"tm", Value::time(12 * 3600 * 1000000LL)},
       {"ttz", Value::timetz(12 * 3600 * 1000000LL, 0)},
       {"ts", Value::timestamp(micros_of(1999, 12, 31, 23, 59, 59, 0))},
       {"tstz", Value::timestamptz(0)},
       {"iv", e.interval(14, 3, (4 * 3600 + 5 * 60 + 6) * 1000000LL + 1)},
       {"u", e.uuid("ffffffff-ffff-ffff-ffff-ffffffffffff")},
       {"j", e.json("null")},
       {"jb", e.json("null")},
       {"ai", e.array({null})},
       {"at", e.array({null})},
       {"a2", e.array({e.array({null, Value::int64(1)}), e.array({Value::int64(2), null})})},
       {"m", e.str("ok")},
       {"dom", Value::int64(2147483647)}},
      "snapshot row 3");
  std::vector<std::pair<std::string, Value>> all_null;
  for (const char* c :
       {"i2", "i4",   "i8", "num", "f4", "f8", "t",  "vc", "ch", "by", "b",   "d",  "tm", "ttz",
        "ts", "tstz", "iv", "u",   "j",  "jb", "ai", "at", "a2", "m",  "dom", "ma", "dt"})
    all_null.emplace_back(c, null);
  expect_fields(*snap[4], all_null, "snapshot row 4");
  expect_fields(*snap[5],
                {{"f4", Value::float64(1.5)},
                 {"f8", Value::float64(0.1)},
                 {"num", e.dec("0.000000000000000000000000000000000000000000000000001")}},
                "snapshot row 5");
  expect_fields(*snap[6],
                {{"f4", Value::float64(-0.25)},
                 {"f8", Value::float64(1.7976931348623157e308)},
                 {"num", e.dec("-0.5")}},
                "snapshot row 6");
  expect_fields(*snap[7],
                {{"tm", Value::time(kMicrosPerDay)},
                 {"ttz", Value::timetz(kMicrosPerDay, -(15 * 3600 + 59 * 60 + 59))},
                 {"num", e.dec("Infinity")},
                 {"ts", Value::timestamp(micros_of(10000, 1, 1, 0, 0, 0, 0))},
                 {"tstz", Value::timestamptz(micros_of(-99, 1, 1, 0, 0, 0, 0))},
                 {"ai", e.array({Value::int64(1), Value::int64(2)})},
                 {"d", Value::date(days_from_civil(5874897, 12, 31))},
                 {"iv", e.interval(-178000000 * 12, 0, 0)}},
                "snapshot row 7");
  EXPECT_EQ(snap[1]->after.size(), 28u);

  // The same rows through logical replication: identical typed values, field for field.
  ASSERT_TRUE(db.sql().exec(std::string("BEGIN; DELETE FROM types;") + kTypesRows + "COMMIT;"));
  ASSERT_TRUE(reader.read_count(7 + 14));
  const auto& rs = reader.records();
  EXPECT_EQ(count_ops(rs, Operation::remove), 7u);
  EXPECT_EQ(count_ops(rs, Operation::create), 7u);
  for (int64_t id = 1; id <= 7; ++id) {
    const Record* c = find_record(rs, Operation::create, id);
    ASSERT_TRUE(c) << "no create for id " << id;
    ASSERT_TRUE(c->after.is_object());
    ASSERT_EQ(c->after.size(), snap[id]->after.size());
    for (size_t i = 0; i < c->after.size(); ++i) {
      const Field& got = c->after.fields()[i];
      const Field& want = snap[id]->after.fields()[i];
      EXPECT_EQ(got.name, want.name);
      EXPECT_TRUE(got.value == want.value && got.value.kind() == want.value.kind())
          << "row " << id << " column " << want.name << ": cdc " << to_debug_string(got.value)
          << ", snapshot " << to_debug_string(want.value);
    }
    EXPECT_TRUE(c->key == snap[id]->key)
        << to_debug_string(c->key) << " vs " << to_debug_string(snap[id]->key);
  }
  src->close();
}

// Binary values (the default: COPY (FORMAT binary), pgoutput `binary`) and text (binary: false)
// give the same records, value for value, in the snapshot and in the stream. `types` has only
// types sluice decodes in binary, `more` adds types it reads only as text: its snapshot reads
// those columns as text, and its stream, once the table is captured, runs in text.
void expect_same_records(const std::vector<const Record*>& a, const std::vector<const Record*>& b,
                         const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i]->op, b[i]->op) << what << " record " << i;
    EXPECT_EQ(to_debug_string(a[i]->after), to_debug_string(b[i]->after))
        << what << " record " << i;
    EXPECT_EQ(to_debug_string(a[i]->before), to_debug_string(b[i]->before))
        << what << " record " << i;
    EXPECT_EQ(to_debug_string(a[i]->key), to_debug_string(b[i]->key)) << what << " record " << i;
  }
}

TEST(PostgresSource, BinaryAndTextValuesGiveTheSameRecords) {
  TestDb db("binary_text");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec(kTypesDdl));
  ASSERT_TRUE(db.sql().exec(kTypesRows));
  ASSERT_TRUE(db.sql().exec(
      "CREATE TYPE pair AS (a int, b text);"
      "CREATE TABLE more (id int PRIMARY KEY, n inet, c cidr, mo money, ch \"char\", p point, "
      "x xml, r int4range, pr pair, ni inet[], b bool, t timestamptz);"
      "INSERT INTO more VALUES (1, '10.0.0.1', '10.0.0.0/8', 12.5, 'x', '(1,2)', '<a>é</a>', "
      "'[1,5)', ROW(1, 'a'), '{10.0.0.1,::1}', true, '2024-01-01 10:00+02'), "
      "(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)"));
  for (const char* tables : {"public.types", "[public.types, public.more]"}) {
    SCOPED_TRACE(tables);
    const std::string id = std::strchr(tables, ',') ? "t_bin_more" : "t_bin_types";
    auto binary = open_source(db, id + "_b", tables);
    auto text = open_source(db, id + "_t", tables, std::nullopt, {{"binary", "false"}});
    ASSERT_TRUE(binary && text);
    Reader rb(*binary), rt(*text);
    const size_t rows = std::strchr(tables, ',') ? 9 : 7;
    ASSERT_TRUE(rb.read_count(rows));
    ASSERT_TRUE(rt.read_count(rows));
    expect_same_records(rb.records(), rt.records(), "snapshot");
    ASSERT_TRUE(db.sql().exec(std::string("BEGIN; DELETE FROM types;") + kTypesRows +
                              "UPDATE types SET t = 'changed', ai = '{9}' WHERE id = 1;"
                              "UPDATE more SET n = '::1', b = false, t = 'infinity';"
                              "COMMIT;"));
    const size_t changes = std::strchr(tables, ',') ? 7 + 7 + 1 + 2 : 7 + 7 + 1;
    ASSERT_TRUE(rb.read_count(rows + changes));
    ASSERT_TRUE(rt.read_count(rows + changes));
    expect_same_records(rb.records(), rt.records(), "stream");
    binary->close();
    text->close();
  }
}

// A column of a type sluice reads only as text, added mid-transaction while the stream runs in
// binary: the stream starts again in text from what was read, and every change comes once, in
// order, typed as the text path types it.
TEST(PostgresSource, AColumnReadOnlyAsTextTurnsTheBinaryStreamToTextMidTransaction) {
  TestDb db("binary_switch");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id int PRIMARY KEY, v text)"));
  auto src = open_source(db, "t_bin_switch", "public.t");
  ASSERT_TRUE(src);
  Reader reader(*src);
  ASSERT_TRUE(reader.drain());  // the snapshot (empty), and the stream started, in binary
  ASSERT_TRUE(
      db.sql().exec("BEGIN; INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c');"
                    "ALTER TABLE t ADD COLUMN n inet;"
                    "INSERT INTO t VALUES (4, 'd', '10.0.0.1'), (5, 'e', NULL); COMMIT;"
                    "INSERT INTO t VALUES (6, 'f', '::1')"));
  ASSERT_TRUE(reader.read_until(
      [](const std::vector<const Record*>& rs) { return count_ops(rs, Operation::create) >= 6; }));
  std::vector<int64_t> ids;
  for (const Record* r : reader.records())
    if (r->op == Operation::create) ids.push_back(r->after.find("id")->as_int64());
  EXPECT_EQ(ids, (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  const Record* four = find_record(reader.records(), Operation::create, 4);
  ASSERT_TRUE(four);
  EXPECT_EQ(dbg(four->after.find("n")), "\"10.0.0.1\"");
  EXPECT_EQ(dbg(find_record(reader.records(), Operation::create, 6)->after.find("n")), "\"::1\"");
  EXPECT_EQ(dbg(find_record(reader.records(), Operation::create, 2)->after.find("v")), "\"b\"");
  src->close();
}

// snapshot.parallel: three connections read the pages in the same MVCC snapshot, and the records
// come in the order one connection gives. Rows changed after the slot's point, before and while
// the snapshot is read, keep there the values of the slot's point: every connection imported
// that snapshot. The changes then come through the stream.
TEST(PostgresSource, ParallelSnapshotReadsOneConsistentSnapshotInPageOrder) {
  TestDb db("parallel_snapshot");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(
      db.sql().exec("CREATE TABLE p (id int PRIMARY KEY, v text NOT NULL);"
                    "INSERT INTO p SELECT g, 'before ' || g FROM generate_series(1, 20000) g;"));
  std::vector<std::vector<std::string>> orders;
  for (const char* parallel : {"1", "3"}) {
    SCOPED_TRACE(parallel);
    auto src = open_source(db, std::string("t_par") + parallel, "public.p", std::nullopt,
                           {{"snapshot.parallel", parallel}});
    ASSERT_TRUE(src);
    // The slot is created and the snapshot opened; before the connections read it, and while
    // they do, every row changes.
    if (std::string(parallel) == "3") {
      ASSERT_TRUE(db.sql().exec("UPDATE p SET v = 'after ' || id WHERE id % 2 = 0"));
    }
    Reader reader(*src);
    reader.request().max_records = 500;  // many chunks, several in flight
    ASSERT_TRUE(reader.read_count(500));
    if (std::string(parallel) == "3") {
      ASSERT_TRUE(db.sql().exec("UPDATE p SET v = 'after ' || id WHERE id % 2 = 1"));
    }
    ASSERT_TRUE(reader.read_until([](const std::vector<const Record*>& rs) {
      return count_ops(rs, Operation::snapshot) >= 20000;
    }));
    std::vector<std::string> order;
    std::set<int64_t> ids;
    for (const Record* r : reader.records()) {
      if (r->op != Operation::snapshot) continue;
      const int64_t id = r->after.find("id")->as_int64();
      ids.insert(id);
      order.push_back(std::to_string(id));
      EXPECT_EQ(r->after.find("v")->as_text(), "before " + std::to_string(id)) << id;
    }
    EXPECT_EQ(ids.size(), 20000u);
    EXPECT_EQ(order.size(), 20000u);
    orders.push_back(std::move(order));
    if (std::string(parallel) == "3") {
      ASSERT_TRUE(reader.read_until([](const std::vector<const Record*>& rs) {
        return count_ops(rs, Operation::update) >= 20000;
      }));
      const Record* u = find_record(reader.records(), Operation::update, 77);
      ASSERT_TRUE(u);
      EXPECT_EQ(u->after.find("v")->as_text(), "after 77");
    }
    src->close();
  }
  EXPECT_TRUE(orders[0] == orders[1]) << "the parallel snapshot's records are in another order";
}

// A snapshot resumed inside a table whose values may be out of line first reads the pages below
// its cursor for rows changed since it began: nearly empty pages, which grow those chunks. The
// chunks above the cursor are sized for the table's real density, so every batch keeps to
// max_records (the below-cursor chunks once sized the first chunk past the cursor for the whole
// rest of the table: one batch of 6,848 records here).
TEST(PostgresSource, AResumedSnapshotKeepsEveryBatchWithinMaxRecords) {
  TestDb db("resumed_batches");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(
      db.sql().exec("CREATE TABLE rb (id int PRIMARY KEY, v text NOT NULL);"
                    "INSERT INTO rb SELECT g, repeat('v', 40) FROM generate_series(1, 20000) g;"
                    "ANALYZE rb"));
  std::string cut;
  size_t done = 0;
  {
    auto src = open_source(db, "t_resumed_batches", "public.rb");
    ASSERT_TRUE(src);
    Reader reader(*src, /*ack=*/false);
    reader.request().max_records = 200;
    ASSERT_TRUE(reader.read_count(2000));
    for (const auto& [n, pos] : reader.positions())
      if (pos.starts_with("v3 snapshot ")) std::tie(done, cut) = std::pair(n, pos);
    ASSERT_GE(done, 2000u) << "no snapshot position";
    src->close();
  }
  ASSERT_TRUE(slot_released(db, "t_resumed_batches"));
  auto src = open_source(db, "t_resumed_batches", "public.rb", cut);
  ASSERT_TRUE(src);
  Reader reader(*src, /*ack=*/false);
  reader.request().max_records = 200;
  ASSERT_TRUE(reader.read_until([&](const std::vector<const Record*>& rs) {
    return count_ops(rs, Operation::snapshot) >= 20000 - done;
  }));
  EXPECT_LE(largest_batch(reader), 200u) << "a batch of the resumed snapshot ran over max_records";
  EXPECT_EQ(count_ops(reader.records(), Operation::snapshot), 20000 - done);
  src->close();
}

// A table whose first pages are empty (rows deleted, then VACUUM) and the rest dense: the empty
// pages grow the chunks, and the first dense chunk holds many times the room of a batch. It is
// parsed a batch at a time, split between heap pages (it selected each row's ctid): every batch
// keeps to max_records, every row comes once and in page order, and a restart from any batch's
// position reads exactly the rows after it. Binary and text COPY.
TEST(PostgresSource, AChunkGrownOverEmptyPagesIsSplitIntoBatchesAtPageBounds) {
  TestDb db("sparse_dense");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(
      db.sql().exec("CREATE TABLE sd (id int PRIMARY KEY, v text NOT NULL);"
                    "INSERT INTO sd SELECT g, repeat('v', 40) FROM generate_series(1, 40000) g;"
                    "DELETE FROM sd WHERE id <= 30000;"));
  ASSERT_TRUE(db.sql().exec("VACUUM ANALYZE sd"));
  for (const char* binary : {"true", "false"}) {
    SCOPED_TRACE(std::string("binary: ") + binary);
    const std::string id = std::string("t_sparse_dense_") + binary;
    std::vector<std::pair<size_t, std::string>> positions;
    {
      auto src = open_source(db, id, "public.sd", std::nullopt, {{"binary", binary}});
      ASSERT_TRUE(src);
      Reader reader(*src, /*ack=*/false);
      reader.request().max_records = 200;
      ASSERT_TRUE(reader.read_until([](const std::vector<const Record*>& rs) {
        return count_ops(rs, Operation::snapshot) >= 10000;
      }));
      for (const auto& [n, pos] : reader.positions())
        if (pos.starts_with("v3 snapshot ")) positions.emplace_back(n, pos);
      EXPECT_LE(largest_batch(reader), 200u) << "a batch ran over max_records";
      ASSERT_EQ(count_ops(reader.records(), Operation::snapshot), 10000u);
      expect_snapshot_ids_from(reader, 30001);
      src->close();
    }
    // batch.max_bytes bounds the parts too: 32 KiB hold a few hundred of these rows.
    {
      auto src = open_source(db, id + "_bytes", "public.sd", std::nullopt, {{"binary", binary}});
      ASSERT_TRUE(src);
      Reader reader(*src);
      reader.request().max_records = 10000;
      reader.request().max_bytes = 32 << 10;
      ASSERT_TRUE(reader.read_until([](const std::vector<const Record*>& rs) {
        return count_ops(rs, Operation::snapshot) >= 10000;
      }));
      EXPECT_LE(largest_batch(reader), 1000u) << "a batch ran over max_bytes";
      expect_snapshot_ids_from(reader, 30001);
      src->close();
    }
    // Restarts from positions in the middle of the dense stretch: exactly the rows after them.
    ASSERT_GE(positions.size(), 10u);
    for (size_t k : {positions.size() / 3, positions.size() / 2}) {
      const auto& [done, cut] = positions[k];
      SCOPED_TRACE("resuming from " + cut);
      ASSERT_TRUE(slot_released(db, id));
      auto src = open_source(db, id, "public.sd", cut, {{"binary", binary}});
      ASSERT_TRUE(src);
      Reader reader(*src, /*ack=*/false);
      reader.request().max_records = 200;
      ASSERT_TRUE(reader.read_until([&](const std::vector<const Record*>& rs) {
        return count_ops(rs, Operation::snapshot) >= 10000 - done;
      }));
      ASSERT_TRUE(reader.drain());
      ASSERT_EQ(count_ops(reader.records(), Operation::snapshot), 10000 - done);
      expect_snapshot_ids_from(reader, 30001 + int64_t(done));
      src->close();
    }
  }
}

// A table of large out-of-line values (16 KiB each, about 150 rows per heap page: 2.4 MB of values
// a page). The catalogue counts rows, so a first chunk sized from it would span the whole table,
// and a chunk is held whole in memory until it is parsed. The first chunk is one page, and once a
// page's bytes are known each chunk keeps to the batch's bytes (here one page: a page's rows are
// never split). Every row comes once, in page order, and a restart from a batch's position reads
// exactly the rows after it.
TEST(PostgresSource, LargeOutOfLineValuesKeepEachChunkWithinTheBatchBytes) {
  TestDb db("large_values");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(
      db.sql().exec("CREATE TABLE lv (id int PRIMARY KEY, v text NOT NULL);"
                    "ALTER TABLE lv ALTER COLUMN v SET STORAGE EXTERNAL;"
                    "INSERT INTO lv SELECT g, (SELECT string_agg(md5(g::text || ':' || i), '') "
                    "FROM generate_series(1, 512) i) FROM generate_series(1, 2000) g;"));
  ASSERT_TRUE(db.sql().exec("VACUUM ANALYZE lv"));
  std::optional<test::LogCapture> log(std::in_place, 4096, spdlog::level::trace);
  std::vector<std::pair<size_t, std::string>> positions;
  size_t largest_bytes = 0;
  {
    auto src = open_source(db, "t_large_values", "public.lv");
    ASSERT_TRUE(src);
    Reader reader(*src, /*ack=*/false);
    reader.request().max_records = 10000;
    reader.request().max_bytes = 4 << 20;
    ASSERT_TRUE(reader.read_until([](const std::vector<const Record*>& rs) {
      return count_ops(rs, Operation::snapshot) >= 2000;
    }));
    ASSERT_EQ(count_ops(reader.records(), Operation::snapshot), 2000u);
    expect_snapshot_ids_from(reader, 1);
    for (const Record* r : reader.records()) {
      if (r->op != Operation::snapshot) continue;
      ASSERT_EQ(r->after.find("v")->as_text().size(), 16384u);
    }
    positions = reader.positions();
    largest_bytes = reader.largest_batch_bytes();
    src->close();
  }
  // The COPYs the snapshot sent ("snapshot of public.lv: pages P +K").
  const std::vector<std::string> lines = log->lines();
  log.reset();
  std::vector<uint64_t> chunk_pages;
  const std::regex chunk(R"(snapshot of public\.lv: pages \d+ \+(\d+))");
  for (const std::string& line : lines)
    if (std::smatch m; std::regex_search(line, m, chunk)) chunk_pages.push_back(std::stoull(m[1]));
  ASSERT_GE(chunk_pages.size(), 5u) << "the table has 14 pages or so";
  EXPECT_EQ(chunk_pages.front(), 1u) << "the first chunk is one page";
  EXPECT_LE(*std::max_element(chunk_pages.begin(), chunk_pages.end()), 2u)
      << "a chunk ran over the batch's bytes";
  // A batch holds whole pages: at most one page (about 2.4 MB of values) over max_bytes.
  EXPECT_LE(largest_bytes, size_t(4 << 20) + (3u << 20));
  // A restart from a position in the middle reads exactly the rows after it.
  ASSERT_GE(positions.size(), 4u);
  const auto& [done, cut] = positions[positions.size() / 2];
  ASSERT_TRUE(cut.starts_with("v3 snapshot ")) << cut;
  ASSERT_TRUE(slot_released(db, "t_large_values"));
  auto src = open_source(db, "t_large_values", "public.lv", cut);
  ASSERT_TRUE(src);
  Reader reader(*src, /*ack=*/false);
  reader.request().max_bytes = 4 << 20;
  ASSERT_TRUE(reader.read_until([&](const std::vector<const Record*>& rs) {
    return count_ops(rs, Operation::snapshot) >= 2000 - done;
  }));
  ASSERT_TRUE(reader.drain());
  ASSERT_EQ(count_ops(reader.records(), Operation::snapshot), 2000 - done);
  expect_snapshot_ids_from(reader, 1 + int64_t(done));
  src->close();
}

// A burst's last records wait a tenth of batch.linger_ms after the last change, not the whole
// linger, also while another database on the server writes WAL without a pause: the walsender
// then sends a keepalive each time it waits for WAL (our reported position trails what it
// decoded), and those are no changes. They once held every batch for the whole linger.
TEST(PostgresSource, ABurstEndsItsBatchWhileAnotherDatabaseWritesWal) {
  TestDb db("burst_busy"), other("burst_other");
  ASSERT_TRUE(db.ok() && other.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE b (id int PRIMARY KEY)"));
  ASSERT_TRUE(other.sql().exec("CREATE TABLE w (id serial PRIMARY KEY, v text)"));
  auto src = open_source(db, "t_burst_busy", "public.b");
  ASSERT_TRUE(src);
  Reader reader(*src);
  reader.request().linger = 6000ms;
  ASSERT_TRUE(reader.drain());
  test::expect_bursts_land_beside_a_busy_writer(
      [&] { return other.sql().exec("INSERT INTO w (v) VALUES (repeat('x', 100))"); },
      [&](int from) {
        return db.sql().exec("INSERT INTO b SELECT g FROM generate_series(" + std::to_string(from) +
                             ", " + std::to_string(from + 49) + ") g");
      },
      [&](size_t n) { return reader.read_count(n, 20s); });
  src->close();
}

// ── unchanged TOAST ─────────────────────────────────────────────────────────

TEST(PostgresSource, UnchangedToastValueIsAbsentFromAfterNotNull) {
  TestDb db("toast");
  ASSERT_TRUE(db.ok());
  // 128 KiB of random hex, stored out of line and uncompressed.
  ASSERT_TRUE(db.sql().exec(
      "CREATE TABLE toasty (id int PRIMARY KEY, big text, n int);"
      "ALTER TABLE toasty ALTER COLUMN big SET STORAGE EXTERNAL;"
      "INSERT INTO toasty SELECT 1, string_agg(md5(random()::text), '') , 1 FROM generate_series(1, 4096);"));
  const std::string big = db.sql().scalar("SELECT big FROM toasty WHERE id = 1");
  ASSERT_EQ(big.size(), 4096u * 32);
  ASSERT_EQ(db.sql().scalar("SELECT pg_column_compression(big) IS NULL AND "
                            "pg_column_size(big) > 100000 FROM toasty"),
            "t");

  auto src = open_source(db, "t_toast", "public.toasty");
  ASSERT_TRUE(src);
  Reader reader(*src);
  ASSERT_TRUE(reader.read_count(1));
  const Value* snap_big = reader.records()[0]->after.find("big");
  ASSERT_TRUE(snap_big && snap_big->kind() == ValueKind::string);
  EXPECT_EQ(snap_big->as_text(), big);

  ASSERT_TRUE(
      db.sql().exec("UPDATE toasty SET n = 2 WHERE id = 1;"
                    "INSERT INTO toasty VALUES (2, repeat('z', 10), 1);"  // small: inline
                    "UPDATE toasty SET n = 3 WHERE id = 2;"
                    "UPDATE toasty SET n = 4, big = 'small now' WHERE id = 1;"));
  ASSERT_TRUE(reader.read_count(5));
  const Record& u1 = *reader.records()[1];
  ASSERT_EQ(u1.op, Operation::update);
  ASSERT_TRUE(u1.after.is_object());
  EXPECT_EQ(u1.after.find("big"), nullptr)
      << "unchanged TOAST must be absent, got " << dbg(u1.after.find("big"));
  EXPECT_TRUE(u1.after.find("n") && *u1.after.find("n") == Value::int64(2))
      << dbg(u1.after.find("n"));
  EXPECT_TRUE(u1.key.find("id") && *u1.key.find("id") == Value::int64(1));
  EXPECT_EQ(u1.after.size(), 2u);  // id, n
  // An inline value is always sent; a changed one too.
  const Record& u2 = *reader.records()[3];
  ASSERT_TRUE(u2.after.find("big"));
  EXPECT_EQ(u2.after.find("big")->as_text(), "zzzzzzzzzz");
  const Record& u3 = *reader.records()[4];
  ASSERT_TRUE(u3.after.find("big"));
  EXPECT_EQ(u3.after.find("big")->as_text(), "small now");
  src->close();
}

// ── replica identity ────────────────────────────────────────────────────────

TEST(PostgresSource, UpdatesAndDeletesUnderReplicaIdentityDefaultAndFull) {
  TestDb db("replident");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(
      db.sql().exec("CREATE TABLE rdef (id int PRIMARY KEY, a text, b int);"
                    "CREATE TABLE rfull (id int PRIMARY KEY, a text, b int);"
                    "ALTER TABLE rfull REPLICA IDENTITY FULL;"
                    "INSERT INTO rdef VALUES (1, 'x', 10), (2, 'y', 20), (3, 'z', 30);"
                    "INSERT INTO rfull VALUES (1, 'x', 10), (2, 'y', 20), (3, NULL, 30);"));
  auto src = open_source(db, "t_replident", "[public.rdef, public.rfull]");
  ASSERT_TRUE(src);
  Reader reader(*src);
  ASSERT_TRUE(reader.read_count(6));

  ASSERT_TRUE(
      db.sql().exec("UPDATE rdef SET a = 'x2' WHERE id = 1;"
                    "DELETE FROM rdef WHERE id = 2;"
                    "UPDATE rdef SET id = 33 WHERE id = 3;"
                    "UPDATE rfull SET a = 'x2' WHERE id = 1;"
                    "DELETE FROM rfull WHERE id = 2;"
                    "UPDATE rfull SET id = 33, b = 31 WHERE id = 3;"));
  ASSERT_TRUE(reader.read_count(12));
  const auto& rs = reader.records();
  Expect e;
  auto obj_text = [](const Value& v) { return to_debug_string(v); };

  // DEFAULT: an update that keeps the key carries no before image.
  const Record& u = *rs[6];
  EXPECT_EQ(u.op, Operation::update);
  EXPECT_EQ(u.meta("table"), "rdef");
  EXPECT_TRUE(u.before.is_absent()) << obj_text(u.before);
  EXPECT_EQ(obj_text(u.after), R"({"id":1,"a":"x2","b":10})");
  EXPECT_EQ(obj_text(u.key), R"({"id":1})");
  // DEFAULT delete: before holds only the key columns; no after.
  const Record& d = *rs[7];
  EXPECT_EQ(d.op, Operation::remove);
  EXPECT_EQ(obj_text(d.before), R"({"id":2})");
  EXPECT_TRUE(d.after.is_absent());
  EXPECT_EQ(obj_text(d.key), R"({"id":2})");
  // DEFAULT key change: before holds the old key, the key is the new one.
  const Record& k = *rs[8];
  EXPECT_EQ(k.op, Operation::update);
  EXPECT_EQ(obj_text(k.before), R"({"id":3})");
  EXPECT_EQ(obj_text(k.after), R"({"id":33,"a":"z","b":30})");
  EXPECT_EQ(obj_text(k.key), R"({"id":33})");

  // FULL: before images have every column.
  const Record& fu = *rs[9];
  EXPECT_EQ(fu.meta("table"), "rfull");
  EXPECT_EQ(fu.op, Operation::update);
  EXPECT_EQ(obj_text(fu.before), R"({"id":1,"a":"x","b":10})");
  EXPECT_EQ(obj_text(fu.after), R"({"id":1,"a":"x2","b":10})");
  EXPECT_EQ(obj_text(fu.key), R"({"id":1})");
  const Record& fd = *rs[10];
  EXPECT_EQ(fd.op, Operation::remove);
  EXPECT_EQ(obj_text(fd.before), R"({"id":2,"a":"y","b":20})");
  EXPECT_TRUE(fd.after.is_absent());
  EXPECT_EQ(obj_text(fd.key), R"({"id":2})");
  const Record& fk = *rs[11];
  EXPECT_EQ(obj_text(fk.before), R"({"id":3,"a":null,"b":30})");
  ASSERT_TRUE(fk.before.find("a"));
  EXPECT_TRUE(fk.before.find("a")->is_null());
  EXPECT_EQ(obj_text(fk.after), R"({"id":33,"a":null,"b":31})");
  EXPECT_EQ(obj_text(fk.key), R"({"id":33})");
  src->close();
}

// ── truncate ────────────────────────────────────────────────────────────────

TEST(PostgresSource, TruncateIsAKeylessDeleteMarkedTruncatePerTable) {
  TestDb db("truncate");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(
      db.sql().exec("CREATE TABLE tr1 (id int PRIMARY KEY); CREATE TABLE tr2 (id int PRIMARY KEY);"
                    "INSERT INTO tr1 VALUES (1), (2);"));
  auto src = open_source(db, "t_truncate", "[public.tr1, public.tr2]");
  ASSERT_TRUE(src);
  Reader reader(*src);
  ASSERT_TRUE(reader.read_count(2));
  ASSERT_TRUE(db.sql().exec(
      "INSERT INTO tr2 VALUES (7); TRUNCATE tr1; TRUNCATE tr1, tr2; INSERT INTO tr1 VALUES (3);"));
  ASSERT_TRUE(reader.read_count(2 + 5));
  const auto& rs = reader.records();
  EXPECT_EQ(rs[2]->op, Operation::create);
  std::vector<std::string> truncated;
  for (size_t i = 3; i < 6; ++i) {
    const Record& r = *rs[i];
    EXPECT_EQ(r.op, Operation::remove);
    EXPECT_EQ(r.meta("truncate"), "true");
    EXPECT_EQ(r.meta("schema"), "public");
    EXPECT_TRUE(r.key.is_absent()) << to_debug_string(r.key);
    EXPECT_TRUE(r.before.is_absent());
    EXPECT_TRUE(r.after.is_absent());
    EXPECT_FALSE(r.meta("lsn").empty());
    EXPECT_FALSE(r.meta("xid").empty());
    truncated.emplace_back(r.meta("table"));
  }
  EXPECT_EQ(truncated, (std::vector<std::string>{"tr1", "tr1", "tr2"}));
  // The two-table truncate is one message: both records share its LSN.
  EXPECT_EQ(rs[4]->meta("lsn"), rs[5]->meta("lsn"));
  EXPECT_EQ(rs[6]->op, Operation::create);
  EXPECT_TRUE(rs[6]->meta("truncate").empty());
  src->close();
}

// ── DDL mid-stream ──────────────────────────────────────────────────────────

TEST(PostgresSource, AddAndDropColumnMidStreamWithoutRestart) {
  TestDb db("ddl");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec(
      "CREATE TABLE ddl (id int PRIMARY KEY, a text); INSERT INTO ddl VALUES (1, 'one');"));
  auto src = open_source(db, "t_ddl", "public.ddl");
  ASSERT_TRUE(src);
  Reader reader(*src);
  ASSERT_TRUE(reader.read_count(1));
  ASSERT_TRUE(reader.drain());  // streaming now

  ASSERT_TRUE(db.sql().exec("INSERT INTO ddl VALUES (2, 'two');"));
  ASSERT_TRUE(reader.read_count(2));
  ASSERT_TRUE(
      db.sql().exec("ALTER TABLE ddl ADD COLUMN b int;"
                    "INSERT INTO ddl VALUES (3, 'three', 8);"
                    "UPDATE ddl SET a = 'uno', b = 7 WHERE id = 1;"
                    "ALTER TABLE ddl DROP COLUMN a;"
                    "INSERT INTO ddl VALUES (4, 9);"
                    "UPDATE ddl SET b = 70 WHERE id = 1;"));
  // The data records; the schema records between them are postgres_ddl_test.cc's subject.
  ASSERT_TRUE(reader.read_count(8));
  std::vector<const Record*> rs;
  for (const Record* r : reader.records())
    if (r->op != Operation::schema) rs.push_back(r);
  ASSERT_EQ(rs.size(), 6u);
  auto s = [](const Record* r) { return to_debug_string(r->after); };
  EXPECT_EQ(s(rs[0]), R"({"id":1,"a":"one"})");
  EXPECT_EQ(s(rs[1]), R"({"id":2,"a":"two"})");
  EXPECT_EQ(s(rs[2]), R"({"id":3,"a":"three","b":8})");
  EXPECT_EQ(s(rs[3]), R"({"id":1,"a":"uno","b":7})");
  EXPECT_EQ(s(rs[4]), R"({"id":4,"b":9})");
  EXPECT_EQ(s(rs[5]), R"({"id":1,"b":70})");
  EXPECT_EQ(to_debug_string(rs[5]->key), R"({"id":1})");
  src->close();
}

// A stored generated column: pgoutput (PostgreSQL 15) never sends it, so the snapshot must not
// either — otherwise a destination keeps the snapshot's value forever while the row changes.
TEST(PostgresSource, SnapshotAndCdcRecordsHaveTheSameColumnsWithGeneratedAndDroppedColumns) {
  TestDb db("generated");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec(
      "CREATE TABLE gen (id int PRIMARY KEY, gone text, a int, twice int GENERATED ALWAYS AS (a * 2) STORED);"
      "ALTER TABLE gen DROP COLUMN gone;"
      "INSERT INTO gen (id, a) VALUES (1, 1);"));
  auto src = open_source(db, "t_generated", "public.gen");
  ASSERT_TRUE(src);
  Reader reader(*src);
  ASSERT_TRUE(reader.read_count(1));
  ASSERT_TRUE(
      db.sql().exec("INSERT INTO gen (id, a) VALUES (2, 2); UPDATE gen SET a = 5 WHERE id = 1;"));
  ASSERT_TRUE(reader.read_count(3));
  const auto& rs = reader.records();
  EXPECT_EQ(rs[0]->op, Operation::snapshot);
  EXPECT_EQ(to_debug_string(rs[0]->after), R"({"id":1,"a":1})");
  EXPECT_EQ(to_debug_string(rs[1]->after), R"({"id":2,"a":2})");
  EXPECT_EQ(to_debug_string(rs[2]->after), R"({"id":1,"a":5})");
  src->close();
}

// ── metadata ────────────────────────────────────────────────────────────────

TEST(PostgresSource, CdcRecordsCarrySchemaTableLsnCommitLsnCommitTimeAndXid) {
  TestDb db("meta");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec(
      "CREATE SCHEMA sales; CREATE TABLE sales.\"Order Items\" (id int PRIMARY KEY, v text);"));
  auto src = open_source(db, "t_meta", "sales.\"Order Items\"");
  ASSERT_TRUE(src);
  Reader reader(*src);
  ASSERT_TRUE(reader.drain());

  auto tx = [&](const std::string& sql) {
    db.sql().exec("BEGIN");
    const std::string xid =
        db.sql().scalar("SELECT (pg_current_xact_id()::text::bigint % 4294967296)::text");
    db.sql().exec(sql);
    db.sql().exec("COMMIT");
    return xid;
  };
  const std::string before = db.sql().scalar("SELECT pg_current_wal_lsn()::text");
  const std::string xid1 = tx("INSERT INTO sales.\"Order Items\" VALUES (1, 'a'), (2, 'b')");
  const std::string xid2 =
      tx("UPDATE sales.\"Order Items\" SET v = 'c' WHERE id = 1; "
         "DELETE FROM sales.\"Order Items\" WHERE id = 2");
  const std::string after = db.sql().scalar("SELECT pg_current_wal_lsn()::text");
  ASSERT_TRUE(reader.read_count(4));
  const auto& rs = reader.records();
  for (size_t i = 0; i < 4; ++i) {
    const Record& r = *rs[i];
    SCOPED_TRACE("record " + std::to_string(i) + " " + to_debug_string(r.metadata));
    EXPECT_EQ(r.meta("schema"), "sales");
    EXPECT_EQ(r.meta("table"), "Order Items");
    EXPECT_EQ(r.meta("xid"), i < 2 ? xid1 : xid2);
    for (const char* k : {"lsn", "commit_lsn", "commit_time"}) EXPECT_FALSE(r.meta(k).empty()) << k;
    // LSNs are within what was written, each change before its commit.
    const std::string q = "SELECT '" + std::string(r.meta("lsn")) + "'::pg_lsn >= '" + before +
                          "'::pg_lsn AND '" + std::string(r.meta("lsn")) + "'::pg_lsn <= '" +
                          std::string(r.meta("commit_lsn")) + "'::pg_lsn AND '" +
                          std::string(r.meta("commit_lsn")) + "'::pg_lsn <= '" + after +
                          "'::pg_lsn";
    EXPECT_EQ(db.sql().scalar(q), "t") << q;
    int64_t micros = 0;
    EXPECT_TRUE(parse_timestamptz(r.meta("commit_time"), &micros)) << r.meta("commit_time");
    const std::string now_check = "SELECT abs(extract(epoch FROM now() - '" +
                                  std::string(r.meta("commit_time")) + "'::timestamptz)) < 600";
    EXPECT_EQ(db.sql().scalar(now_check), "t");
  }
  EXPECT_EQ(rs[0]->meta("commit_lsn"), rs[1]->meta("commit_lsn"));
  EXPECT_EQ(rs[0]->meta("commit_time"), rs[1]->meta("commit_time"));
  EXPECT_EQ(rs[2]->meta("commit_lsn"), rs[3]->meta("commit_lsn"));
  EXPECT_NE(rs[0]->meta("commit_lsn"), rs[2]->meta("commit_lsn"));
  EXPECT_NE(rs[0]->meta("lsn"), rs[1]->meta("lsn"));
  src->close();
}

// ── resume inside a transaction ─────────────────────────────────────────────

// One transaction of 5,000 inserts read in batches of 1,000: a restart from a batch's position
// inside the transaction (several changes share its commit LSN) delivers exactly the changes after
// it — none skipped, none repeated — and so does a restart from just after it.
TEST(PostgresSource, ResumeFromInsideOneTransactionSkipsExactlyWhatWasWritten) {
  TestDb db("resume_tx");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE big_tx (id int PRIMARY KEY, v text);"));
  std::vector<std::pair<size_t, std::string>> cuts;  // (records before the position, position)
  {
    auto src = open_source(db, "t_resume_tx", "public.big_tx");
    ASSERT_TRUE(src);
    // Never acknowledged: the slot stays before the transaction, as it would after a crash.
    Reader reader(*src, /*ack=*/false);
    reader.request().max_records = 1000;
    reader.request().linger =
        500ms;  // batches end at the record limit, not when a read outpaces decoding
    ASSERT_TRUE(reader.drain());
    ASSERT_TRUE(
        db.sql().exec("INSERT INTO big_tx SELECT g, md5(g::text) FROM generate_series(1, 5000) g;"
                      "INSERT INTO big_tx VALUES (5001, 'next tx');"));
    ASSERT_TRUE(reader.read_count(5001));
    for (size_t i = 0; i < reader.records().size(); ++i) {
      const Value* id = reader.records()[i]->after.find("id");
      ASSERT_TRUE(id && id->as_int64() == int64_t(i + 1)) << "record " << i << " is " << dbg(id);
    }
    // Inside the transaction: "cdc <flush> <commit-lsn> <n>", n = the transaction's changes so far.
    // Cut once in the middle and, when a batch ended exactly there, after its last change but
    // before its commit.
    for (const auto& [n, whole] : reader.positions()) {
      if (n == 0 || n > 5000) continue;
      const std::string pos = without_captured(whole);
      EXPECT_EQ(std::count(pos.begin(), pos.end(), ' '), 3) << pos;
      EXPECT_EQ(pos.substr(pos.rfind(' ') + 1), std::to_string(n)) << pos;
      if ((cuts.empty() && n >= 1000 && n < 5000) || n == 5000) cuts.emplace_back(n, whole);
    }
    ASSERT_FALSE(cuts.empty()) << "no position inside the transaction";
    src->close();
  }
  for (const auto& [done, cut] : cuts) {
    SCOPED_TRACE("resuming from " + cut);
    ASSERT_TRUE(slot_released(db, "t_resume_tx"));
    auto src = open_source(db, "t_resume_tx", "public.big_tx", cut);
    ASSERT_TRUE(src);
    Reader reader(*src, /*ack=*/false);
    ASSERT_TRUE(reader.read_count(5001 - done));
    ASSERT_TRUE(reader.drain());
    ASSERT_EQ(reader.records().size(), 5001 - done);
    for (size_t i = 0; i < reader.records().size(); ++i) {
      const Value* id = reader.records()[i]->after.find("id");
      ASSERT_TRUE(id && id->as_int64() == int64_t(done + i + 1))
          << "record " << i << " is " << dbg(id);
    }
    for (const auto& [n, pos] : reader.positions())
      EXPECT_TRUE(position_order(pos) >= position_order(cut))
          << "position " << pos << " is before the checkpoint";
    src->close();
  }
}

// The walsender is terminated while one large transaction streams: the source reconnects on its
// own and the stream goes on exactly where it was — every change once, in order — and the
// positions it reports never go backwards.
TEST(PostgresSource, ReconnectInsideATransactionResumesExactlyAndPositionsNeverRegress) {
  TestDb db("reconnect_tx");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE rtx (id int PRIMARY KEY, v text);"));
  auto src = open_source(db, "t_reconnect_tx", "public.rtx");
  ASSERT_TRUE(src);
  Reader reader(*src);
  reader.request().max_records = 700;
  reader.request().linger = 500ms;
  ASSERT_TRUE(reader.drain());
  constexpr int kRows = 20000;
  ASSERT_TRUE(db.sql().exec("INSERT INTO rtx SELECT g, md5(g::text) FROM generate_series(1, " +
                            std::to_string(kRows) + ") g; INSERT INTO rtx VALUES (" +
                            std::to_string(kRows + 1) + ", 'next tx');"));
  ASSERT_TRUE(reader.read_count(1400));
  ASSERT_EQ(
      db.sql().scalar(
          "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = "
          "'sluice_t_reconnect_tx'"),
      "t");
  ASSERT_TRUE(reader.read_count(kRows + 1, 60s));
  ASSERT_TRUE(reader.drain());
  ASSERT_EQ(reader.records().size(), size_t(kRows + 1));
  for (size_t i = 0; i < reader.records().size(); ++i) {
    const Value* id = reader.records()[i]->after.find("id");
    ASSERT_TRUE(id && id->as_int64() == int64_t(i + 1)) << "record " << i << " is " << dbg(id);
  }
  ASSERT_NO_FATAL_FAILURE(expect_positions_never_go_back(reader, "cdc "));
  src->close();
}

}  // namespace
}  // namespace sluice::pgtest
