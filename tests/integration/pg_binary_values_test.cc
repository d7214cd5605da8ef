// binary_to_value against the real server: each value is selected twice, its text form (the
// session settings sluice's connections use) and its binary form (the type's send function, as
// COPY (FORMAT binary) and pgoutput `binary` carry it), and both decodings must be the same Value
// — or both refuse it. Edge values of every type binary_decodable() accepts, and the types it
// leaves to the text path.
#include <libpq-fe.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <string>
#include <vector>

#include "connectors/postgres/pg_types.h"
#include "integration/pg_harness.h"

namespace sluice::pgtest {
namespace {

using pg::binary_decodable;
using pg::binary_to_value;
using pg::text_to_value;
using pg::TypeInfo;
using pg::TypeRegistry;
using test::Rows;

class PgBinaryValues : public ::testing::Test {
 protected:
  void SetUp() override {
    // A database per test: ctest runs them side by side.
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return char(std::tolower(c)); });
    db_holder_ = std::make_unique<TestDb>("binary_" + name.substr(0, 40));
    ASSERT_TRUE(db().ok());
    ASSERT_TRUE(
        db().sql().exec("SET DateStyle = ISO; SET IntervalStyle = iso_8601; SET TimeZone = UTC; "
                        "SET extra_float_digits = 3;"
                        "CREATE TYPE mood AS ENUM ('sad', 'ok', 'häppy');"
                        "CREATE DOMAIN posint AS int CHECK (VALUE > 0);"
                        "CREATE DOMAIN code AS char(4);"));
    // What the source registers for user-defined types (pg_catalog.cc).
    for (const char* t : {"mood", "posint", "code", "_mood", "_posint"}) {
      Rows r = db().sql().query(
          "SELECT oid, typtype, typbasetype, typelem FROM pg_type WHERE typname = " +
          quote_literal(t));
      ASSERT_EQ(r.size(), 1u) << t;
      const uint32_t oid = uint32_t(std::stoul(*r[0][0]));
      if (*r[0][1] == "e") types_.add(oid, {TypeInfo::Kind::enumeration, 0, ','});
      else if (*r[0][1] == "d")
        types_.add(oid, {TypeInfo::Kind::domain, uint32_t(std::stoul(*r[0][2])), ','});
      else types_.add(oid, {TypeInfo::Kind::array, uint32_t(std::stoul(*r[0][3])), ','});
    }
  }

  struct Both {
    uint32_t type = 0;
    std::string text, binary;  // decoded (to_debug_string), or "error: ..."
    bool decodable = false;
  };

  // Selects `expr` in both formats and decodes each.
  Both decode(const std::string& expr) {
    Both out;
    const std::string sql = "SELECT " + expr;
    PGresult* t =
        PQexecParams(db().sql().get(), sql.c_str(), 0, nullptr, nullptr, nullptr, nullptr, 0);
    PGresult* b =
        PQexecParams(db().sql().get(), sql.c_str(), 0, nullptr, nullptr, nullptr, nullptr, 1);
    EXPECT_EQ(PQresultStatus(t), PGRES_TUPLES_OK) << expr << ": " << PQresultErrorMessage(t);
    EXPECT_EQ(PQresultStatus(b), PGRES_TUPLES_OK) << expr << ": " << PQresultErrorMessage(b);
    if (PQresultStatus(t) == PGRES_TUPLES_OK && PQresultStatus(b) == PGRES_TUPLES_OK) {
      out.type = PQftype(t, 0);
      auto show = [](const Result<Value>& v) {
        return v.ok() ? to_debug_string(v.value()) : "error: " + v.error().message();
      };
      out.text = show(text_to_value(types_, out.type, PQgetvalue(t, 0, 0), arena_));
      // A heap copy of exactly its size: a read past the end is a sanitizer failure.
      const std::string bytes(PQgetvalue(b, 0, 0), size_t(PQgetlength(b, 0, 0)));
      out.binary = show(binary_to_value(types_, out.type, bytes, arena_));
      out.decodable = binary_decodable(types_, out.type);
    }
    PQclear(t);
    PQclear(b);
    return out;
  }

  void same(const std::string& expr) {
    SCOPED_TRACE(expr);
    Both v = decode(expr);
    EXPECT_TRUE(v.decodable) << "type " << v.type;
    EXPECT_EQ(v.binary, v.text);
    EXPECT_EQ(v.text.rfind("error", 0), std::string::npos) << v.text;
  }

  // Both refuse the value (one sluice cannot represent), naming the same reason.
  void both_refuse(const std::string& expr, const std::string& why) {
    SCOPED_TRACE(expr);
    Both v = decode(expr);
    EXPECT_NE(v.text.find(why), std::string::npos) << v.text;
    EXPECT_NE(v.binary.find(why), std::string::npos) << v.binary;
  }

  TestDb& db() { return *db_holder_; }

  std::unique_ptr<TestDb> db_holder_;
  TypeRegistry types_;
  Arena arena_{4096};
};

TEST_F(PgBinaryValues, NumbersDecodeAsTheirText) {
  for (const char* e : {"true",
                        "false",
                        "(-32768)::int2",
                        "32767::int2",
                        "(-2147483648)::int4",
                        "2147483647",
                        "(-9223372036854775808)::int8",
                        "9223372036854775807::int8",
                        "4294967295::oid",
                        "1.1::float4",
                        "0.1::float4",
                        "(-0.0)::float4",
                        "3.4028235e38::float4",
                        "1e-45::float4",
                        "'NaN'::float4",
                        "'Infinity'::float4",
                        "'-Infinity'::float4",
                        "0.1::float8",
                        "5e-324::float8",
                        "1.7976931348623157e308::float8",
                        "(-0.0)::float8",
                        "'NaN'::float8",
                        "'-Infinity'::float8",
                        "0::numeric",
                        "0.0::numeric",
                        "(-0.50)::numeric",
                        "'12345678901234567890.000000000000000001'::numeric",
                        "0.00000000000000000001::numeric",
                        "10000::numeric",
                        "9999.9999::numeric",
                        "0.000100::numeric",
                        "(-123.456)::numeric",
                        "100000000::numeric",
                        "1.5e100::numeric",
                        "'1e-100'::numeric(200,110)",
                        "round(2::numeric / 3, 30)",
                        "'NaN'::numeric",
                        "'Infinity'::numeric",
                        "'-Infinity'::numeric",
                        "12.5::numeric(10,4)",
                        "(-0.000001)::numeric"})
    same(e);
}

TEST_F(PgBinaryValues, TemporalValuesDecodeAsTheirText) {
  for (const char* e : {"'2024-02-29'::date",
                        "'0001-01-01'::date",
                        "'0001-12-31 BC'::date",
                        "'4713-01-01 BC'::date",
                        "'5874897-12-31'::date",
                        "'infinity'::date",
                        "'-infinity'::date",
                        "'1970-01-01'::date",
                        "'00:00'::time",
                        "'23:59:59.999999'::time",
                        "'24:00:00'::time",
                        "'12:00+05:30'::timetz",
                        "'01:02:03.5-08'::timetz",
                        "'23:59:59.999999-15:59'::timetz",
                        "'2024-01-01 10:00:00.123456'::timestamp",
                        "'1969-12-31 23:59:59.999999'::timestamp",
                        "'4713-01-01 00:00 BC'::timestamp",
                        "'294246-12-31 23:59:59'::timestamp",
                        "'infinity'::timestamp",
                        "'-infinity'::timestamp",
                        "'2024-06-01 12:00+02'::timestamptz",
                        "'0044-03-15 12:00 BC'::timestamptz",
                        "'infinity'::timestamptz",
                        "'1 year 2 months 3 days 04:05:06.5'::interval",
                        "'-1 day'::interval",
                        "'0'::interval",
                        "'-1 year -2 mons +3 days -04:05:06.789'::interval",
                        "'178000000 years'::interval",
                        "'-0.000001 seconds'::interval"})
    same(e);
  both_refuse("'294276-12-31 23:59:59.999999'::timestamp", "294247 AD");
  both_refuse("'294276-12-31 23:59:59.999999+00'::timestamptz", "294247 AD");
}

TEST_F(PgBinaryValues, TextBytesAndOtherValuesDecodeAsTheirText) {
  for (const char* e : {"'héllo\ttab\nnewline\\backslash'::text",
                        "''::text",
                        "'abc'::varchar(10)",
                        "'ab'::char(5)",
                        "'x'::bpchar",
                        "'pg_class'::name",
                        "'\\x'::bytea",
                        "'\\x00ff10805c'::bytea",
                        "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid",
                        "'{\"a\": [1, 2], \"é\": null}'::json",
                        "'{\"b\": 1, \"a\": [1, 2.50]}'::jsonb",
                        "'\"x\"'::jsonb",
                        "'08:00:2b:01:02:03'::macaddr",
                        "B'101'::bit(3)",
                        "B'1'::varbit",
                        "B''::varbit",
                        "B'1010101011'::varbit",
                        "'häppy'::mood",
                        "5::posint",
                        "'ab'::code"})
    same(e);
}

TEST_F(PgBinaryValues, ArraysDecodeAsTheirText) {
  for (const char* e :
       {"'{1,2,NULL}'::int[]", "'{}'::int[]", "'{{1,2},{3,4}}'::int[]",
        "'{{{1},{2}},{{3},{4}}}'::int8[]", "ARRAY['a,b', NULL, '\"q\"', '', 'NULL']::text[]",
        "'{1.50,NaN,-0.001}'::numeric[]", "ARRAY['2024-01-01 00:00+00'::timestamptz, 'infinity']",
        "'{t,f,NULL}'::bool[]", "'{sad,häppy}'::mood[]", "'{1,2}'::posint[]",
        "ARRAY['\\xdead'::bytea]", "'{\"{\\\"a\\\": 1}\"}'::jsonb[]",
        "ARRAY['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid]"})
    same(e);
  both_refuse("'[0:1]={1,2}'::int[]", "do not start at 1");
}

TEST_F(PgBinaryValues, TypesLeftToTheTextPathAreNotDecodable) {
  for (const char* e : {"'x'::\"char\"", "12.5::money", "'<a/>'::xml", "'10.0.0.1'::inet",
                        "'10.0.0.0/8'::cidr", "'(1,2)'::point", "'[1,5)'::int4range", "ROW(1, 'a')",
                        "'{10.0.0.1}'::inet[]", "'1 2'::int2vector"}) {
    SCOPED_TRACE(e);
    Both v = decode(e);
    EXPECT_FALSE(v.decodable) << "type " << v.type;
  }
}

}  // namespace
}  // namespace sluice::pgtest
