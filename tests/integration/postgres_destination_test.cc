// The postgres destination against the real PostgreSQL 15 test server: the sqlite destination's
// semantic cases (auto-create, upsert, delete, replay, absent vs null, added columns, composite
// keys, quoted identifiers, truncate, latest-wins), every value kind round-tripping, data errors,
// and the binary end to end: postgres source → postgres destination in a second database.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "integration/pg_harness.h"
#include "sluice/temporal.h"

namespace sluice::pgtest {
namespace {

using e2e::Process;

class PostgresDestinationTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (dest_) dest_->close();
  }

  Destination& open(TestDb& db, std::map<std::string, std::string> settings = {}) {
    const ConnectorSpec* spec = Registry::builtin().connector("postgres");
    EXPECT_NE(spec, nullptr);
    EXPECT_NE(spec->make_destination, nullptr);
    settings["url"] = db.url();
    Settings s(spec->destination_settings);
    auto err = settings_from_text(spec->destination_settings, settings, &s);
    EXPECT_FALSE(err.has_value()) << *err;
    auto d = spec->make_destination(s);
    EXPECT_TRUE(d.ok()) << d.error().message();
    dest_ = std::move(d.value());
    Status st = dest_->open(ConnectorContext{"test", "postgres", nullptr});
    EXPECT_TRUE(st.ok()) << st.error().message();
    return *dest_;
  }

  Status write(Batch& b) {
    int calls = 0;
    Status result = Error(Errc::internal, "done not called");
    dest_->write(b, [&](Status s) {
      ++calls;
      result = std::move(s);
    });
    EXPECT_EQ(calls, 1);
    return result;
  }
  void write_ok(Batch& b) {
    Status s = write(b);
    ASSERT_TRUE(s.ok()) << s.error().message();
  }

  static Record& add(Batch& b, Operation op, std::string_view table, Value key,
                     Value after = Value()) {
    Value meta =
        table.empty() ? Value() : b.object(1).add("table", Value::string(b.copy(table))).build();
    Record& r = b.add();
    r.op = op;
    r.metadata = meta;
    r.key = key;
    r.after = after;
    return r;
  }
  static Value id_key(Batch& b, int64_t id) {
    return b.object(1).add("id", Value::int64(id)).build();
  }
  static Value person(Batch& b, int64_t id, std::string_view name, double salary) {
    return b.object(3)
        .add("id", Value::int64(id))
        .add("name", Value::string(b.copy(name)))
        .add("salary", Value::float64(salary))
        .build();
  }

  // Rows as "a|b|c" (NULL for nulls).
  static std::vector<std::string> rows(Conn& c, const std::string& sql) {
    std::vector<std::string> out;
    for (const Row& r : c.query(sql)) {
      std::string s;
      for (size_t i = 0; i < r.size(); ++i)
        s += (i ? "|" : "") + (r[i] ? *r[i] : std::string("NULL"));
      out.push_back(s);
    }
    return out;
  }

  std::unique_ptr<Destination> dest_;
};

TEST_F(PostgresDestinationTest, CreatesTableWithKeyAsPrimaryKeyAndUpserts) {
  TestDb db("pgd_create");
  ASSERT_TRUE(db.ok());
  open(db);
  Batch b;
  add(b, Operation::snapshot, "t", id_key(b, 1), person(b, 1, "Ada", 10.5));
  add(b, Operation::create, "t", id_key(b, 2), person(b, 2, "Grace", 20));
  write_ok(b);
  EXPECT_EQ(db.sql().scalar(
                "SELECT string_agg(a.attname, ',') FROM pg_index i JOIN pg_attribute a ON "
                "a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) WHERE i.indisprimary AND "
                "i.indrelid = 'public.t'::regclass"),
            "id");
  EXPECT_EQ(
      db.sql().scalar("SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = "
                      "'public.t'::regclass AND attname = 'salary'"),
      "double precision");
  Batch b2;
  add(b2, Operation::update, "t", id_key(b2, 1), person(b2, 1, "Ada L", 11));
  write_ok(b2);
  EXPECT_EQ(rows(db.sql(), "SELECT id, name, salary FROM t ORDER BY id"),
            (std::vector<std::string>{"1|Ada L|11", "2|Grace|20"}));
}

TEST_F(PostgresDestinationTest, DeleteRemovesByKeyAndDeleteOfUnknownTableCreatesNothing) {
  TestDb db("pgd_delete");
  ASSERT_TRUE(db.ok());
  open(db);
  Batch b;
  add(b, Operation::create, "t", id_key(b, 1), person(b, 1, "Ada", 1));
  add(b, Operation::create, "t", id_key(b, 2), person(b, 2, "Grace", 2));
  add(b, Operation::remove, "t", id_key(b, 1));
  add(b, Operation::remove, "nosuch", id_key(b, 1));
  write_ok(b);
  EXPECT_EQ(rows(db.sql(), "SELECT id, name FROM t ORDER BY id"),
            (std::vector<std::string>{"2|Grace"}));
  EXPECT_EQ(db.sql().scalar("SELECT count(*) FROM pg_class WHERE relname = 'nosuch'"), "0");
}

TEST_F(PostgresDestinationTest, ReplayingTheSameBatchLeavesIdenticalState) {
  TestDb db("pgd_replay");
  ASSERT_TRUE(db.ok());
  open(db);
  Batch b;
  add(b, Operation::create, "t", id_key(b, 1), person(b, 1, "Ada", 1));
  add(b, Operation::create, "t", id_key(b, 2), person(b, 2, "Grace", 2));
  add(b, Operation::update, "t", id_key(b, 1), person(b, 1, "Ada2", 3));
  add(b, Operation::remove, "t", id_key(b, 2));
  add(b, Operation::create, "t", id_key(b, 3), person(b, 3, "Linus", 4));
  write_ok(b);
  auto first = rows(db.sql(), "SELECT * FROM t ORDER BY id");
  write_ok(b);
  write_ok(b);
  EXPECT_EQ(rows(db.sql(), "SELECT * FROM t ORDER BY id"), first);
  EXPECT_EQ(first, (std::vector<std::string>{"1|Ada2|3", "3|Linus|4"}));
}

TEST_F(PostgresDestinationTest, AbsentFieldKeepsStoredValueAndNullSetsNull) {
  TestDb db("pgd_absent");
  ASSERT_TRUE(db.ok());
  open(db);
  Batch b;
  add(b, Operation::create, "t", id_key(b, 1), person(b, 1, "Ada", 1));
  add(b, Operation::create, "t", id_key(b, 2), person(b, 2, "Grace", 2));
  write_ok(b);
  Batch b2;
  // salary absent (unchanged TOAST): kept; name null: set NULL.
  add(b2, Operation::update, "t", id_key(b2, 1),
      b2.object(3)
          .add("id", Value::int64(1))
          .add("name", Value::string("Ada!"))
          .add("salary", Value())
          .build());
  add(b2, Operation::update, "t", id_key(b2, 2),
      b2.object(3)
          .add("id", Value::int64(2))
          .add("name", Value::null())
          .add("salary", Value::float64(5))
          .build());
  write_ok(b2);
  EXPECT_EQ(rows(db.sql(), "SELECT id, name, salary FROM t ORDER BY id"),
            (std::vector<std::string>{"1|Ada!|1", "2|NULL|5"}));
}

TEST_F(PostgresDestinationTest, NewFieldAddsAColumn) {
  TestDb db("pgd_addcol");
  ASSERT_TRUE(db.ok());
  open(db);
  Batch b;
  add(b, Operation::create, "t", id_key(b, 1), person(b, 1, "Ada", 1));
  write_ok(b);
  Batch b2;
  add(b2, Operation::create, "t", id_key(b2, 2),
      b2.object(3)
          .add("id", Value::int64(2))
          .add("name", Value::string("G"))
          .add("age", Value::int64(85))
          .build());
  write_ok(b2);
  EXPECT_EQ(rows(db.sql(), "SELECT id, name, salary, age FROM t ORDER BY id"),
            (std::vector<std::string>{"1|Ada|1|NULL", "2|G|NULL|85"}));
  EXPECT_EQ(
      db.sql().scalar("SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = "
                      "'public.t'::regclass AND attname = 'age'"),
      "bigint");
}

TEST_F(PostgresDestinationTest, CompositeKeyAndKeyFieldsMissingFromAfter) {
  TestDb db("pgd_composite");
  ASSERT_TRUE(db.ok());
  open(db);
  auto key = [](Batch& b, int64_t a, std::string_view c) {
    return b.object(2).add("a", Value::int64(a)).add("c", Value::string(b.copy(c))).build();
  };
  Batch b;
  add(b, Operation::create, "t", key(b, 1, "x"), b.object(1).add("v", Value::int64(1)).build());
  add(b, Operation::create, "t", key(b, 1, "y"), b.object(1).add("v", Value::int64(2)).build());
  add(b, Operation::create, "t", key(b, 2, "x"), b.object(1).add("v", Value::int64(3)).build());
  add(b, Operation::update, "t", key(b, 1, "y"), b.object(1).add("v", Value::int64(20)).build());
  add(b, Operation::remove, "t", key(b, 2, "x"));
  write_ok(b);
  EXPECT_EQ(rows(db.sql(), "SELECT a, c, v FROM t ORDER BY a, c"),
            (std::vector<std::string>{"1|x|1", "1|y|20"}));
  EXPECT_EQ(
      db.sql().scalar(
          "SELECT count(*) FROM pg_index WHERE indisprimary AND indrelid = 'public.t'::regclass "
          "AND indnatts = 2"),
      "1");
}

TEST_F(PostgresDestinationTest, IdentifiersAreQuoted) {
  TestDb db("pgd_quoted");
  ASSERT_TRUE(db.ok());
  open(db, {{"schema", "My \"Schema\""}});
  Batch b;
  add(b, Operation::create, "Odd \"Table\"; DROP",
      b.object(1).add("Key Col", Value::int64(1)).build(),
      b.object(2).add("Key Col", Value::int64(1)).add("select", Value::string("v\t\n\\x")).build());
  write_ok(b);
  write_ok(b);
  EXPECT_EQ(
      rows(db.sql(),
           "SELECT \"Key Col\", \"select\" FROM \"My \"\"Schema\"\"\".\"Odd \"\"Table\"\"; DROP\""),
      (std::vector<std::string>{"1|v\t\n\\x"}));
}

TEST_F(PostgresDestinationTest, TwoTablesInOneBatchAndTemplate) {
  TestDb db("pgd_two");
  ASSERT_TRUE(db.ok());
  open(db, {{"table", "dst_{{table}}"}});
  Batch b;
  add(b, Operation::create, "a", id_key(b, 1), person(b, 1, "A1", 1));
  add(b, Operation::create, "b", id_key(b, 1), person(b, 1, "B1", 1));
  add(b, Operation::create, "a", id_key(b, 2), person(b, 2, "A2", 2));
  add(b, Operation::remove, "b", id_key(b, 1));
  add(b, Operation::create, "b", id_key(b, 3), person(b, 3, "B3", 3));
  write_ok(b);
  EXPECT_EQ(rows(db.sql(), "SELECT id, name FROM dst_a ORDER BY id"),
            (std::vector<std::string>{"1|A1", "2|A2"}));
  EXPECT_EQ(rows(db.sql(), "SELECT id, name FROM dst_b ORDER BY id"),
            (std::vector<std::string>{"3|B3"}));
}

TEST_F(PostgresDestinationTest, TruncateRecordEmptiesTheTableAndLaterInsertsLand) {
  TestDb db("pgd_truncate");
  ASSERT_TRUE(db.ok());
  open(db);
  Batch b;
  add(b, Operation::create, "t", id_key(b, 1), person(b, 1, "Ada", 1));
  add(b, Operation::create, "t", id_key(b, 2), person(b, 2, "Grace", 2));
  Record& tr = b.add();
  tr.op = Operation::remove;
  tr.metadata =
      b.object(2).add("table", Value::string("t")).add("truncate", Value::string("true")).build();
  add(b, Operation::create, "t", id_key(b, 3), person(b, 3, "Linus", 3));
  write_ok(b);
  EXPECT_EQ(rows(db.sql(), "SELECT id FROM t ORDER BY id"), (std::vector<std::string>{"3"}));
  write_ok(b);  // replay
  EXPECT_EQ(rows(db.sql(), "SELECT id FROM t ORDER BY id"), (std::vector<std::string>{"3"}));
}

TEST_F(PostgresDestinationTest, LatestRecordForTheSameKeyWinsInOneBatch) {
  TestDb db("pgd_latest");
  ASSERT_TRUE(db.ok());
  open(db);
  Batch b;
  for (int i = 0; i < 5; ++i)
    add(b, Operation::update, "t", id_key(b, 1), person(b, 1, "v" + std::to_string(i), i));
  add(b, Operation::create, "t", id_key(b, 2), person(b, 2, "x", 1));
  add(b, Operation::remove, "t", id_key(b, 2));
  add(b, Operation::create, "t", id_key(b, 2), person(b, 2, "back", 2));
  write_ok(b);
  EXPECT_EQ(rows(db.sql(), "SELECT id, name, salary FROM t ORDER BY id"),
            (std::vector<std::string>{"1|v4|4", "2|back|2"}));
}

TEST_F(PostgresDestinationTest, UpdateThatChangesTheKeyMovesTheRow) {
  TestDb db("pgd_move");
  ASSERT_TRUE(db.ok());
  open(db);
  Batch b1;
  add(b1, Operation::create, "t", id_key(b1, 1), person(b1, 1, "Ada", 1));
  add(b1, Operation::create, "t", id_key(b1, 5), person(b1, 5, "Grace", 5));
  write_ok(b1);
  Batch b2;
  add(b2, Operation::update, "t", id_key(b2, 1), person(b2, 2, "Ada", 1));
  Record& r = add(b2, Operation::update, "t", id_key(b2, 6), person(b2, 6, "Grace", 5));
  r.before = person(b2, 5, "Grace", 5);
  write_ok(b2);
  write_ok(b2);
  EXPECT_EQ(rows(db.sql(), "SELECT id, name FROM t ORDER BY id"),
            (std::vector<std::string>{"2|Ada", "6|Grace"}));
}

TEST_F(PostgresDestinationTest, EveryValueKindRoundTrips) {
  TestDb db("pgd_kinds");
  ASSERT_TRUE(db.ok());
  open(db);
  Batch b;
  auto* iv = b.arena().allocate_array<Interval>(1);
  iv[0] = Interval{14, 3, -3723000001};
  static const uint8_t uuid[16] = {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0,
                                   0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef};
  auto* ints = b.arena().allocate_array<Value>(3);
  ints[0] = Value::int64(1);
  ints[1] = Value::null();
  ints[2] = Value::int64(-3);
  auto* strs = b.arena().allocate_array<Value>(2);
  strs[0] = Value::string("a \"b\"");
  strs[1] = Value::string("c,{d}\\");
  auto* mixed = b.arena().allocate_array<Value>(2);
  mixed[0] = Value::int64(1);
  mixed[1] = Value::string("x");
  int32_t d0;
  ASSERT_TRUE(parse_date("2024-02-29", &d0));
  int64_t ts;
  ASSERT_TRUE(parse_timestamp("2024-02-29T13:45:00.123456", &ts));
  struct Case {
    const char* name;
    Value v;
    const char* type;
    const char* text;  // as PostgreSQL prints it (DateStyle ISO, IntervalStyle postgres, UTC)
  };
  std::vector<Case> cases = {
      {"c_bool", Value::boolean(true), "boolean", "true"},
      {"c_int", Value::int64(std::numeric_limits<int64_t>::min()), "bigint",
       "-9223372036854775808"},
      {"c_uint", Value::uint64(std::numeric_limits<uint64_t>::max()), "numeric(20,0)",
       "18446744073709551615"},
      {"c_float", Value::float64(0.1), "double precision", "0.1"},
      {"c_float_big", Value::float64(1.2345678901234567e300), "double precision",
       "1.2345678901234567e+300"},
      {"c_nan", Value::float64(std::nan("")), "double precision", "NaN"},
      {"c_inf", Value::float64(-std::numeric_limits<double>::infinity()), "double precision",
       "-Infinity"},
      {"c_dec", Value::decimal("-12345678901234567890.123456789"), "numeric",
       "-12345678901234567890.123456789"},
      {"c_str", Value::string("héllo\t\\ \"x\"\n"), "text", "héllo\t\\ \"x\"\n"},
      {"c_bytes", Value::bytes(std::string_view("\x00\x01\xff\\", 4)), "bytea", "\\x0001ff5c"},
      {"c_date", Value::date(d0), "date", "2024-02-29"},
      {"c_date_bc", Value::date(days_from_civil(-43, 3, 15)), "date", "0044-03-15 BC"},
      {"c_date_inf", Value::date(std::numeric_limits<int32_t>::max()), "date", "infinity"},
      {"c_time", Value::time(49500123456), "time without time zone", "13:45:00.123456"},
      {"c_timetz", Value::timetz(49500000000, 2 * 3600 + 1800), "time with time zone",
       "13:45:00+02:30"},
      {"c_ts", Value::timestamp(ts), "timestamp without time zone", "2024-02-29 13:45:00.123456"},
      {"c_ts_neg", Value::timestamp(-1), "timestamp without time zone",
       "1969-12-31 23:59:59.999999"},
      {"c_tstz", Value::timestamptz(ts), "timestamp with time zone",
       "2024-02-29 13:45:00.123456+00"},
      {"c_tstz_inf", Value::timestamptz(std::numeric_limits<int64_t>::min()),
       "timestamp with time zone", "-infinity"},
      {"c_interval", Value::interval(iv), "interval", "1 year 2 mons 3 days -01:02:03.000001"},
      {"c_uuid", Value::uuid(uuid), "uuid", "12345678-9abc-def0-0123-456789abcdef"},
      {"c_json", Value::json("{\"a\": [1, 2.5, null], \"b\": \"x\"}"), "jsonb",
       "{\"a\": [1, 2.5, null], \"b\": \"x\"}"},
      {"c_ints", Value::array(ints, 3), "bigint[]", "{1,NULL,-3}"},
      {"c_strs", Value::array(strs, 2), "text[]", "{\"a \\\"b\\\"\",\"c,{d}\\\\\"}"},
      {"c_mixed", Value::array(mixed, 2), "jsonb", "[1, \"x\"]"},
      {"c_obj", b.object(2).add("k", Value::int64(1)).add("s", Value::string("v")).build(), "jsonb",
       "{\"k\": 1, \"s\": \"v\"}"},
      {"c_null", Value::null(), "text", nullptr},
  };
  auto o = b.object(uint32_t(cases.size() + 1));
  o.add("id", Value::int64(1));
  for (const auto& c : cases) o.add(c.name, c.v);
  add(b, Operation::snapshot, "kinds", id_key(b, 1), o.build());
  write_ok(b);
  write_ok(b);  // replay into the existing table: values as text cast to the actual types
  db.sql().exec("SET IntervalStyle = postgres; SET TimeZone = UTC; SET DateStyle = ISO");
  for (const auto& c : cases) {
    auto r = db.sql().query(
        std::string("SELECT format_type(a.atttypid, a.atttypmod), (SELECT ") + c.name +
        "::text FROM kinds) FROM pg_attribute a WHERE attrelid = 'kinds'::regclass AND attname = '" +
        c.name + "'");
    ASSERT_EQ(r.size(), 1u) << c.name;
    EXPECT_EQ(r[0][0].value_or("NULL"), c.type) << c.name;
    if (c.text == nullptr) EXPECT_FALSE(r[0][1].has_value()) << c.name;
    else EXPECT_EQ(r[0][1].value_or("NULL"), c.text) << c.name;
  }
}

// PostgreSQL holds every float64 (NaN, ±Infinity) and every timestamp sluice has (infinity
// included), but not all its dates and timestamps: date and timestamp start in 4713 BC, date ends
// in 5874897 AD. Such a value is a data error naming the record, so it goes to the dead-letter
// queue with on_error: dlq and stops the pipeline otherwise — never NULL, never another date.
TEST_F(PostgresDestinationTest, DatesBeyondPostgresRangeRejectTheRecord) {
  TestDb db("pgd_range");
  ASSERT_TRUE(db.ok());
  open(db);
  const int64_t day_us = int64_t(86400) * 1000000;
  const std::vector<std::pair<std::string, Value>> cases = {
      {"date 5000 BC", Value::date(days_from_civil(-4999, 1, 1))},
      {"date 5874898 AD", Value::date(days_from_civil(5874898, 1, 1))},
      {"timestamp 5000 BC", Value::timestamp(int64_t(days_from_civil(-4999, 1, 1)) * day_us)},
      {"timestamptz 5000 BC", Value::timestamptz(int64_t(days_from_civil(-4999, 1, 1)) * day_us)}};
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].first);
    Batch b;
    add(b, Operation::create, "r" + std::to_string(i), id_key(b, 7),
        b.object(2).add("id", Value::int64(7)).add("x", cases[i].second).build());
    Status s = write(b);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().code(), Errc::data) << s.error().message();
    EXPECT_FALSE(s.error().retriable());
    EXPECT_NE(s.error().message().find("out of range"), std::string::npos) << s.error().message();
    EXPECT_NE(s.error().message().find("\"id\":7"), std::string::npos) << s.error().message();
  }
  // The edges themselves are stored as they are.
  Batch b;
  add(b, Operation::create, "edges", id_key(b, 1),
      b.object(4)
          .add("id", Value::int64(1))
          .add("d", Value::date(days_from_civil(-4712, 1, 1)))
          .add("t", Value::timestamp(std::numeric_limits<int64_t>::max()))
          .add("f", Value::float64(-std::numeric_limits<double>::infinity()))
          .build());
  write_ok(b);
  EXPECT_EQ(rows(db.sql(), "SELECT d, t, f FROM edges"),
            (std::vector<std::string>{"4713-01-01 BC|infinity|-Infinity"}));
}

TEST_F(PostgresDestinationTest, ExistingTableColumnTypesAreUsed) {
  TestDb db("pgd_existing");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec(
      "CREATE TABLE t (id int PRIMARY KEY, n smallint, amount numeric(10,2), tags varchar(10)[], doc json, "
      "at timestamptz, ip inet, m int[][])"));
  open(db);
  Batch b;
  auto* tags = b.arena().allocate_array<Value>(2);
  tags[0] = Value::string("a");
  tags[1] = Value::string("b c");
  auto* row1 = b.arena().allocate_array<Value>(2);
  row1[0] = Value::int64(1);
  row1[1] = Value::int64(2);
  auto* row2 = b.arena().allocate_array<Value>(2);
  row2[0] = Value::int64(3);
  row2[1] = Value::int64(4);
  auto* m = b.arena().allocate_array<Value>(2);
  m[0] = Value::array(row1, 2);
  m[1] = Value::array(row2, 2);
  add(b, Operation::create, "t", id_key(b, 7),
      b.object(8)
          .add("id", Value::int64(7))
          .add("n", Value::int64(12))
          .add("amount", Value::decimal("3.5"))
          .add("tags", Value::array(tags, 2))
          .add("doc", b.object(1).add("x", Value::boolean(true)).build())
          .add("at", Value::timestamptz(0))
          .add("ip", Value::string("10.0.0.1"))
          .add("m", Value::array(m, 2))
          .build());
  write_ok(b);
  EXPECT_EQ(
      rows(db.sql(), "SELECT id, n, amount, tags, doc::text, at, ip, m FROM t"),
      (std::vector<std::string>{
          "7|12|3.50|{a,\"b c\"}|{\"x\":true}|1970-01-01 00:00:00+00|10.0.0.1|{{1,2},{3,4}}"}));
}

TEST_F(PostgresDestinationTest, DataErrorNamesTableAndKeyAndRollsBack) {
  TestDb db("pgd_dataerr");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id bigint PRIMARY KEY, n smallint)"));
  open(db);
  Batch b;
  add(b, Operation::create, "t", id_key(b, 1),
      b.object(2).add("id", Value::int64(1)).add("n", Value::int64(1)).build());
  add(b, Operation::create, "t", id_key(b, 42),
      b.object(2).add("id", Value::int64(42)).add("n", Value::int64(100000)).build());
  add(b, Operation::create, "t", id_key(b, 3),
      b.object(2).add("id", Value::int64(3)).add("n", Value::int64(3)).build());
  Status s = write(b);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), Errc::data) << s.error().message();
  EXPECT_FALSE(s.error().retriable());
  EXPECT_NE(s.error().message().find("\"public\".\"t\""), std::string::npos) << s.error().message();
  EXPECT_NE(s.error().message().find("42"), std::string::npos) << s.error().message();
  EXPECT_EQ(s.error().message().find('\n'), std::string::npos);
  EXPECT_EQ(db.sql().scalar("SELECT count(*) FROM t"), "0");  // rolled back
  // The destination keeps working after a failed batch.
  Batch b2;
  add(b2, Operation::create, "t", id_key(b2, 5),
      b2.object(2).add("id", Value::int64(5)).add("n", Value::int64(5)).build());
  write_ok(b2);
  EXPECT_EQ(db.sql().scalar("SELECT count(*) FROM t"), "1");
}

TEST_F(PostgresDestinationTest, LostConnectionIsRetriableAndTheNextWriteReconnects) {
  TestDb db("pgd_lost");
  ASSERT_TRUE(db.ok());
  open(db);
  Batch b;
  add(b, Operation::create, "t", id_key(b, 1), person(b, 1, "Ada", 1));
  write_ok(b);
  db.admin().exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '" +
                  db.name() + "' AND application_name = 'sluice'");
  Batch b2;
  add(b2, Operation::create, "t", id_key(b2, 2), person(b2, 2, "Grace", 2));
  Status s = write(b2);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(s.error().retriable()) << s.error().message();
  write_ok(b2);
  EXPECT_EQ(db.sql().scalar("SELECT count(*) FROM t"), "2");
}

TEST_F(PostgresDestinationTest, ManyRowsInOneBatch) {
  TestDb db("pgd_many");
  ASSERT_TRUE(db.ok());
  open(db);
  const int n = 50000;
  Batch b;
  for (int i = 0; i < n; ++i)
    add(b, Operation::snapshot, "t", id_key(b, i), person(b, i, "name" + std::to_string(i), i));
  auto t0 = std::chrono::steady_clock::now();
  write_ok(b);
  write_ok(b);
  auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "[ info ] " << 2 * n << " upserts in " << secs << " s (" << int(2 * n / secs)
            << " records/s)\n";
  EXPECT_EQ(db.sql().scalar("SELECT count(*) FROM t"), std::to_string(n));
}

// ── the binary: postgres source → postgres destination ─────────────────────

TEST(PostgresDestinationEndToEnd, SnapshotAndChangesOfManyTypesEndEqualToTheSource) {
  TestDb src("pgd_e2e_src");
  TestDb dst("pgd_e2e_dst");
  ASSERT_TRUE(src.ok());
  ASSERT_TRUE(dst.ok());
  ASSERT_TRUE(src.sql().exec(
      "CREATE TABLE items (id bigint PRIMARY KEY, i2 smallint, i4 int, f4 real, f8 double precision, "
      "num numeric(12,3), t text, vc varchar(20), b boolean, by bytea, d date, tm time, tmtz timetz, "
      "ts timestamp, tstz timestamptz, iv interval, u uuid, j json, jb jsonb, ia int[], ta text[], "
      "big text)"));
  ASSERT_TRUE(src.sql().exec(
      "INSERT INTO items SELECT g, g % 30000, g * 1000, g / 7.0, g / 3.0, g * 1.125, 'row ' || g || E'\\t\"q\"', "
      "'v' || g, g % 2 = 0, decode(md5(g::text), 'hex'), DATE '2000-01-01' + g, TIME '10:00' + g * INTERVAL '1 s', "
      "TIMETZ '10:00+05:30', TIMESTAMP '2020-01-01' + g * INTERVAL '1 min', "
      "TIMESTAMPTZ '2020-01-01 00:00+00' + g * INTERVAL '1 h', make_interval(0, g, 0, g, 0, 0, g / 1000.0), "
      "md5(g::text)::uuid, json_build_object('g', g), jsonb_build_object('g', g, 'a', ARRAY[g, g + 1]), "
      "ARRAY[g, NULL, -g], ARRAY['x' || g, 'y,\"z\"'], repeat(md5(g::text), 200) "
      "FROM generate_series(1, 3000) g"));
  ASSERT_TRUE(src.sql().exec("INSERT INTO items (id) VALUES (100000)"));  // nulls everywhere
  auto dir = e2e::make_temp_dir("pgd-e2e");
  test::PipelineFile f;
  f.pipeline("pgd_e2e")
      .source("postgres")
      .set("url", src.url())
      .set("tables", test::Yaml::strings({"public.items"}));
  f.pipeline("pgd_e2e").destination("postgres").set("url", dst.url());
  f.pipeline("pgd_e2e").max_records(1000).linger_ms(20);
  const std::string yaml = f.yaml();
  e2e::write_file(dir / "p.yaml", yaml);
  Process p({"run", "p.yaml"}, dir);
  ASSERT_TRUE(wait_for_checkpoint(p, dir, "pgd_e2e", [](const std::string& c) {
    return starts_with(c, "cdc ");
  })) << p.stderr_text();
  // Changes: updates (one leaving the TOASTed column unchanged), deletes, inserts, nulls.
  ASSERT_TRUE(
      src.sql().exec("UPDATE items SET t = 'upd', f8 = -0.5, ia = ARRAY[7] WHERE id % 10 = 0"));
  ASSERT_TRUE(src.sql().exec("UPDATE items SET big = repeat('z', 5000) WHERE id % 10 = 1"));
  ASSERT_TRUE(src.sql().exec("DELETE FROM items WHERE id % 10 = 2"));
  ASSERT_TRUE(src.sql().exec(
      "UPDATE items SET jb = NULL, u = NULL, iv = INTERVAL '-1 day' WHERE id % 10 = 3"));
  ASSERT_TRUE(src.sql().exec("INSERT INTO items (id, t, ts) VALUES (200000, 'new', 'infinity')"));
  const std::string cols =
      "id, i2, i4, f4, f8, num, t, vc, b, by, d, tm, tmtz, ts, tstz, iv, u, j::jsonb::text, jb, ia, ta, big";
  const std::string dst_cols =
      "id, i2::smallint, i4::int, f4::real, f8, num, t, vc::varchar(20), b, by, d, tm, tmtz, ts, tstz, iv, u, "
      "j::text, jb, ia::int[], ta, big";
  // Equal when the destination (read back into the source's types) matches the source exactly.
  auto differences = [&] {
    Conn link(src.url());
    // Compare as text rows: both sides render through the same output functions.
    auto a = link.query("SELECT " + cols + " FROM items ORDER BY id");
    Conn other(dst.url());
    other.exec("SET TimeZone = UTC");
    link.exec("SET TimeZone = UTC");
    a = link.query("SELECT " + cols + " FROM items ORDER BY id");
    auto bq = other.query("SELECT " + dst_cols + " FROM items ORDER BY id");
    return std::make_pair(a, bq);
  };
  bool equal = wait_until(
      [&] {
        auto [a, bq] = differences();
        return a == bq;
      },
      60s, 200ms);
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  auto [a, bq] = differences();
  EXPECT_TRUE(equal);
  EXPECT_EQ(a.size(), bq.size());
  for (size_t i = 0; i < std::min(a.size(), bq.size()); ++i)
    if (a[i] != bq[i]) {
      std::string x, y;
      for (auto& v : a[i]) x += (v ? v->substr(0, 60) : "NULL") + " | ";
      for (auto& v : bq[i]) y += (v ? v->substr(0, 60) : "NULL") + " | ";
      ADD_FAILURE() << "row differs:\n  source " << x << "\n  dest   " << y;
      break;
    }
  // And with SQL: the same rows both ways (destination loaded into a copy in the source's types).
  Conn s2(src.url());
  ASSERT_TRUE(s2.exec("CREATE TABLE items_copy (LIKE items)"));
  {
    Conn d2(dst.url());
    d2.exec("SET TimeZone = UTC");
    auto rowsd = d2.query("SELECT " + dst_cols + " FROM items");
    for (const auto& r : rowsd) {
      std::string sql = "INSERT INTO items_copy VALUES (";
      for (size_t i = 0; i < r.size(); ++i)
        sql += (i ? "," : "") + (r[i] ? quote_literal(*r[i]) : std::string("NULL"));
      ASSERT_TRUE(s2.exec(sql + ")"));
    }
  }
  const std::string cmp =
      "SELECT id, i2, i4, f4, f8, num, t, vc, b, by, d, tm, tmtz, ts, tstz, iv, u, j::jsonb::text, jb, "
      "ia, ta, big FROM ";
  EXPECT_EQ(s2.scalar("SELECT count(*) FROM (" + cmp + "items EXCEPT " + cmp + "items_copy) x"),
            "0");
  EXPECT_EQ(s2.scalar("SELECT count(*) FROM (" + cmp + "items_copy EXCEPT " + cmp + "items) x"),
            "0");
  EXPECT_EQ(s2.scalar("SELECT count(*) FROM items"), s2.scalar("SELECT count(*) FROM items_copy"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sluice::pgtest
