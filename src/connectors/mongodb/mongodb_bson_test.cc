// The mongodb type mapping, both ways (docs/mongodb.md documents it): sluice values
// appended with append_value and checked as canonical Extended JSON (libbson's own rendering),
// and BSON documents built with libbson read back with read_document.
#include "connectors/mongodb/mongodb_bson.h"

#include <gtest/gtest.h>

#include <string>

#include "sluice/batch.h"

namespace sluice::mongodb {
namespace {

std::string canonical(const bson_t* doc) {
  size_t n = 0;
  char* s = bson_as_canonical_extended_json(doc, &n);
  std::string out(s, n);
  bson_free(s);
  return out;
}

// `v` under key "v", as canonical Extended JSON; the error message when it is refused.
std::string written(const Value& v, BsonWriteOptions o = {}) {
  BsonPtr doc = make_bson();
  Status s = append_value(doc.get(), "v", v, o);
  if (!s) return "error: " + s.error().message();
  return canonical(doc.get());
}

TEST(MongodbBsonWrite, ScalarsMapExactly) {
  EXPECT_EQ(written(Value::null()), R"({ "v" : null })");
  EXPECT_EQ(written(Value::boolean(true)), R"({ "v" : true })");
  EXPECT_EQ(written(Value::int64(-7)), R"({ "v" : { "$numberLong" : "-7" } })");
  EXPECT_EQ(written(Value::uint64(18446744073709551615ull)),
            R"({ "v" : { "$numberDecimal" : "18446744073709551615" } })");
  EXPECT_EQ(written(Value::uint64(5)), R"({ "v" : { "$numberLong" : "5" } })");
  EXPECT_EQ(written(Value::float64(1.5)), R"({ "v" : { "$numberDouble" : "1.5" } })");
  EXPECT_EQ(written(Value::decimal("-12.340")), R"({ "v" : { "$numberDecimal" : "-12.340" } })");
  EXPECT_EQ(written(Value::decimal("NaN")), R"({ "v" : { "$numberDecimal" : "NaN" } })");
  EXPECT_EQ(written(Value::decimal("Infinity")), R"({ "v" : { "$numberDecimal" : "Infinity" } })");
  EXPECT_EQ(written(Value::string("héllo")), R"({ "v" : "héllo" })");
  EXPECT_EQ(written(Value::bytes(std::string_view("\x00\xff", 2))),
            R"({ "v" : { "$binary" : { "base64" : "AP8=", "subType" : "00" } } })");
  static const uint8_t u[16] = {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0,
                                0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0};
  EXPECT_EQ(
      written(Value::uuid(u)),
      R"({ "v" : { "$binary" : { "base64" : "EjRWeJq83vASNFZ4mrze8A==", "subType" : "04" } } })");
}

TEST(MongodbBsonWrite, DecimalsBeyondDecimal128AreRefused) {
  // 35 significant digits: Decimal128 holds 34; rounding would be silent loss.
  EXPECT_NE(written(Value::decimal("1.2345678901234567890123456789012345")).find("error: "),
            std::string::npos);
  EXPECT_NE(written(Value::decimal("1e7000")).find("does not fit a Decimal128"), std::string::npos);
  // 34 digits fit.
  EXPECT_EQ(written(Value::decimal("1.234567890123456789012345678901234")),
            R"({ "v" : { "$numberDecimal" : "1.234567890123456789012345678901234" } })");
}

TEST(MongodbBsonWrite, DecimalsAsStringForServersWithoutDecimal128) {
  BsonWriteOptions o;
  o.decimals = Decimals::string;
  EXPECT_EQ(written(Value::decimal("-12.340"), o), R"({ "v" : "-12.340" })");
  EXPECT_EQ(written(Value::uint64(18446744073709551615ull), o),
            R"({ "v" : "18446744073709551615" })");
  EXPECT_EQ(written(Value::uint64(5), o), R"({ "v" : { "$numberLong" : "5" } })");
}

TEST(MongodbBsonWrite, TemporalValues) {
  // 2024-02-29T13:45:00.123Z = 1709214300123 ms.
  EXPECT_EQ(written(Value::timestamptz(1709214300123000)),
            R"({ "v" : { "$date" : { "$numberLong" : "1709214300123" } } })");
  EXPECT_EQ(written(Value::timestamp(1709214300123000)),
            R"({ "v" : { "$date" : { "$numberLong" : "1709214300123" } } })");
  // A sub-millisecond part is kept as text by default, refused on request.
  EXPECT_EQ(written(Value::timestamptz(1709214300123456)),
            R"({ "v" : "2024-02-29T13:45:00.123456Z" })");
  EXPECT_NE(written(Value::timestamptz(1709214300123456), {SubMillisecond::reject})
                .find("sub-millisecond"),
            std::string::npos);
  EXPECT_EQ(written(Value::timestamptz(-1000)),
            R"({ "v" : { "$date" : { "$numberLong" : "-1" } } })");
  EXPECT_EQ(written(Value::date(19782)),  // 2024-02-29
            R"({ "v" : { "$date" : { "$numberLong" : "1709164800000" } } })");
  EXPECT_EQ(written(Value::time(49500123456)), R"({ "v" : "13:45:00.123456" })");
  Interval iv{14, 3, 1500000};
  EXPECT_EQ(written(Value::interval(&iv)), R"({ "v" : "P1Y2M3DT1.5S" })");
}

TEST(MongodbBsonWrite, JsonBecomesDocumentsAndArraysWithoutExtendedJsonMagic) {
  EXPECT_EQ(
      written(Value::json(R"({"a":1,"b":[true,null,"x",1.5],"$date":"kept"})")),
      R"({ "v" : { "a" : { "$numberLong" : "1" }, "b" : [ true, null, "x", { "$numberDouble" : "1.5" } ], "$date" : "kept" } })");
  EXPECT_EQ(written(Value::json("12345678901234567890")),
            R"({ "v" : { "$numberDecimal" : "12345678901234567890" } })");
  EXPECT_NE(written(Value::json("{nope")).find("does not parse"), std::string::npos);
}

TEST(MongodbBsonWrite, ArraysObjectsAndAbsentFields) {
  Value items[] = {Value::int64(1), Value::string("two")};
  Field fields[] = {{"x", Value::array(items, 2)}, {"gone", Value()}, {"n", Value::null()}};
  EXPECT_EQ(written(Value::object(fields, 3)),
            R"({ "v" : { "x" : [ { "$numberLong" : "1" }, "two" ], "n" : null } })");
  // Invalid UTF-8 is refused, not written as a corrupt string.
  EXPECT_NE(written(Value::string("\xc3(")).find("UTF-8"), std::string::npos);
}

// ── BSON → values ───────────────────────────────────────────────────────────

std::string read_back(const char* extended_json) {
  bson_error_t err;
  BsonPtr doc(bson_new_from_json(reinterpret_cast<const uint8_t*>(extended_json), -1, &err));
  EXPECT_TRUE(doc) << err.message;
  if (!doc) return "";
  Batch batch;
  return to_debug_string(read_document(doc.get(), batch.arena()));
}

TEST(MongodbBsonRead, EveryBsonType) {
  EXPECT_EQ(
      read_back(R"({"d":{"$numberDouble":"2.5"},"s":"x","i":{"$numberInt":"-3"},)"
                R"("l":{"$numberLong":"9007199254740993"},"b":true,"n":null})"),
      read_back(
          R"({"d":2.5,"s":"x","i":{"$numberLong":"-3"},"l":{"$numberLong":"9007199254740993"},"b":true,"n":null})"));
  Batch batch;
  bson_error_t err;
  BsonPtr doc(bson_new_from_json(
      reinterpret_cast<const uint8_t*>(
          R"({"oid":{"$oid":"65f0a1b2c3d4e5f601234567"},"dec":{"$numberDecimal":"1.20E+3"},)"
          R"("small":{"$numberDecimal":"1E-2"},"date":{"$date":{"$numberLong":"1709214300123"}},)"
          R"("ts":{"$timestamp":{"t":1700000000,"i":7}},"re":{"$regularExpression":{"pattern":"^a","options":"i"}},)"
          R"("uuid":{"$binary":{"base64":"EjRWeJq83vASNFZ4mrze8A==","subType":"04"}},)"
          R"("bin":{"$binary":{"base64":"AP8=","subType":"00"}},"md5":{"$binary":{"base64":"AP8=","subType":"05"}},)"
          R"("min":{"$minKey":1},"max":{"$maxKey":1},"nested":{"a":[1,{"b":"c"}]},"code":{"$code":"return 1"}})"),
      -1, &err));
  ASSERT_TRUE(doc) << err.message;
  Value v = read_document(doc.get(), batch.arena());
  ASSERT_TRUE(v.is_object());
  EXPECT_EQ(v.find("oid")->kind(), ValueKind::string);
  EXPECT_EQ(v.find("oid")->as_text(), "65f0a1b2c3d4e5f601234567");
  EXPECT_EQ(v.find("dec")->kind(), ValueKind::decimal);
  EXPECT_EQ(v.find("dec")->as_text(), "1200");
  EXPECT_EQ(v.find("small")->as_text(), "0.01");
  EXPECT_EQ(*v.find("date"), Value::timestamptz(1709214300123000));
  EXPECT_EQ(v.find("uuid")->kind(), ValueKind::uuid);
  EXPECT_EQ(v.find("bin")->kind(), ValueKind::bytes);
  EXPECT_EQ(v.find("bin")->as_text(), std::string_view("\x00\xff", 2));
  EXPECT_EQ(to_debug_string(*v.find("ts")), R"({"$timestamp":{"t":1700000000,"i":7}})");
  EXPECT_EQ(to_debug_string(*v.find("re")),
            R"({"$regularExpression":{"pattern":"^a","options":"i"}})");
  EXPECT_EQ(to_debug_string(*v.find("md5")), R"({"$binary":{"base64":"AP8=","subType":"05"}})");
  EXPECT_EQ(to_debug_string(*v.find("min")), R"({"$minKey":1})");
  EXPECT_EQ(to_debug_string(*v.find("max")), R"({"$maxKey":1})");
  EXPECT_EQ(to_debug_string(*v.find("nested")), R"({"a":[1,{"b":"c"}]})");
  EXPECT_EQ(to_debug_string(*v.find("code")), R"({"$code":"return 1"})");
}

// A BSON date is any int64 of milliseconds: one whose microseconds fit int64 is a timestamptz, at
// the very edge too; beyond it, its exact milliseconds as {"$date": {"$numberLong": …}}, never a
// wrapped value.
TEST(MongodbBsonRead, DatesBeyondMicrosecondRangeKeepTheirMilliseconds) {
  Batch batch;
  BsonPtr doc = make_bson();
  const int64_t edge = INT64_MIN / 1000;  // -9223372036854775 ms: its µs still fit
  ASSERT_TRUE(bson_append_date_time(doc.get(), "edge", -1, edge));
  ASSERT_TRUE(bson_append_date_time(doc.get(), "past", -1, edge - 1));
  ASSERT_TRUE(bson_append_date_time(doc.get(), "max", -1, INT64_MAX));
  Value v = read_document(doc.get(), batch.arena());
  EXPECT_EQ(*v.find("edge"), Value::timestamptz(edge * 1000));
  EXPECT_EQ(to_debug_string(*v.find("past")), R"({"$date":{"$numberLong":"-9223372036854776"}})");
  EXPECT_EQ(to_debug_string(*v.find("max")), R"({"$date":{"$numberLong":"9223372036854775807"}})");
}

TEST(MongodbBsonRoundTrip, ExtendedShapesWriteBackAsTheirBsonTypes) {
  // MongoDB → MongoDB: the objects the source makes for types sluice has no kind of are written
  // back as those types.
  const char* src =
      R"({"ts":{"$timestamp":{"t":1700000000,"i":7}},"re":{"$regularExpression":{"pattern":"^a","options":"i"}},)"
      R"("md5":{"$binary":{"base64":"AP8=","subType":"05"}},"min":{"$minKey":1},"max":{"$maxKey":1},)"
      R"("code":{"$code":"return 1"},"dec":{"$numberDecimal":"-0.000120"},"date":{"$date":{"$numberLong":"-5"}}})";
  bson_error_t err;
  BsonPtr doc(bson_new_from_json(reinterpret_cast<const uint8_t*>(src), -1, &err));
  ASSERT_TRUE(doc) << err.message;
  Batch batch;
  Value v = read_document(doc.get(), batch.arena());
  BsonPtr out = make_bson();
  for (const Field& f : v.fields()) ASSERT_TRUE(append_value(out.get(), f.name, f.value, {}));
  EXPECT_EQ(canonical(out.get()), canonical(doc.get()));
}

TEST(MongodbBsonDecimal, PlainText) {
  auto text = [](const char* s) {
    bson_decimal128_t d;
    EXPECT_TRUE(bson_decimal128_from_string(s, &d));
    return decimal_text(d);
  };
  EXPECT_EQ(text("1.20E+3"), "1200");
  EXPECT_EQ(text("12.340"), "12.340");
  EXPECT_EQ(text("-0.0012"), "-0.0012");
  EXPECT_EQ(text("1E-7"), "0.0000001");
  EXPECT_EQ(text("0"), "0");
  EXPECT_EQ(text("0E+3"), "0");
  EXPECT_EQ(text("-Inf"), "-Infinity");
  EXPECT_EQ(text("NaN"), "NaN");
}

}  // namespace
}  // namespace sluice::mongodb
