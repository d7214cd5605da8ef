#include "connectors/postgres/pg_types.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::pg {
namespace {

constexpr int64_t kDay = 86400LL * 1000000LL;
constexpr int64_t kSec = 1000000LL;

class PgTypes : public ::testing::Test {
 protected:
  // Converts from a heap copy that is scribbled over afterwards: the Value must not point into it.
  Value conv(uint32_t type_oid, std::string_view text) {
    std::string input(text);
    Result<Value> r = text_to_value(types_, type_oid, input, arena_);
    EXPECT_TRUE(r.ok()) << type_oid << " '" << text << "': " << (r.ok() ? "" : r.error().message());
    std::fill(input.begin(), input.end(), '#');
    return r.ok() ? r.value() : Value();
  }
  // Expects an Errc::data error; returns its message.
  std::string fail(uint32_t type_oid, std::string_view text) {
    Result<Value> r = text_to_value(types_, type_oid, text, arena_);
    EXPECT_FALSE(r.ok()) << type_oid << " '" << text << "' converted to "
                         << (r.ok() ? to_debug_string(*r) : "");
    if (r.ok()) return "converted";
    EXPECT_EQ(r.error().code(), Errc::data);
    return r.error().message();
  }
  static std::vector<std::string> strings(const Value& arr) {
    std::vector<std::string> out;
    for (const Value& v : arr.items())
      out.push_back(v.is_null() ? "<null>" : std::string(v.as_text()));
    return out;
  }

  TypeRegistry types_;
  Arena arena_{4096};
};

TEST_F(PgTypes, RegistryKnowsBuiltinArrays) {
  struct {
    uint32_t array, elem;
  } expected[] = {{1007, 23},   {1009, 25},   {1016, 20},   {1005, 21},   {1000, 16},
                  {1021, 700},  {1022, 701},  {1231, 1700}, {1015, 1043}, {1014, 1042},
                  {1182, 1082}, {1183, 1083}, {1115, 1114}, {1185, 1184}, {1187, 1186},
                  {1270, 1266}, {2951, 2950}, {199, 114},   {3807, 3802}, {1001, 17},
                  {1002, 18},   {1003, 19},   {1028, 26}};
  for (const auto& e : expected) {
    const TypeInfo* info = types_.find(e.array);
    ASSERT_NE(info, nullptr) << e.array;
    EXPECT_EQ(info->kind, TypeInfo::Kind::array) << e.array;
    EXPECT_EQ(info->element_oid, e.elem) << e.array;
    EXPECT_EQ(info->delimiter, ',');
    ASSERT_TRUE(types_.known(e.elem)) << e.elem;
    EXPECT_EQ(types_.find(e.elem)->kind, TypeInfo::Kind::base);
  }
  EXPECT_EQ(types_.find(1020)->delimiter, ';');  // _box
  EXPECT_FALSE(types_.known(424242));
}

TEST_F(PgTypes, Booleans) {
  EXPECT_EQ(conv(oid::kBool, "t"), Value::boolean(true));
  EXPECT_EQ(conv(oid::kBool, "f"), Value::boolean(false));
  fail(oid::kBool, "x");
  fail(oid::kBool, "");
}

TEST_F(PgTypes, Integers) {
  EXPECT_EQ(conv(oid::kInt2, "-32768"), Value::int64(-32768));
  EXPECT_EQ(conv(oid::kInt4, "2147483647"), Value::int64(2147483647));
  EXPECT_EQ(conv(oid::kInt8, "-9223372036854775808"),
            Value::int64(std::numeric_limits<int64_t>::min()));
  EXPECT_EQ(conv(oid::kInt8, "9223372036854775807"),
            Value::int64(std::numeric_limits<int64_t>::max()));
  EXPECT_EQ(conv(oid::kOid, "4294967295"), Value::int64(4294967295LL));
  fail(oid::kInt2, "32768");
  fail(oid::kInt4, "2147483648");
  fail(oid::kInt8, "9223372036854775808");
  fail(oid::kInt4, "12a");
  fail(oid::kInt4, "");
  fail(oid::kInt4, " 1");
  fail(oid::kOid, "-1");
  std::string e = fail(oid::kInt4, "abc");
  EXPECT_NE(e.find("int4"), std::string::npos) << e;
  EXPECT_NE(e.find("abc"), std::string::npos) << e;
}

TEST_F(PgTypes, Floats) {
  EXPECT_EQ(conv(oid::kFloat8, "0.1"), Value::float64(0.1));
  EXPECT_EQ(conv(oid::kFloat4, "1.1"), Value::float64(1.1));
  EXPECT_EQ(conv(oid::kFloat8, "-1.2345678901234567e+300"),
            Value::float64(-1.2345678901234567e+300));
  EXPECT_EQ(conv(oid::kFloat8, "5e-324"), Value::float64(5e-324));
  EXPECT_EQ(conv(oid::kFloat8, "1.7976931348623157e+308"), Value::float64(1.7976931348623157e+308));
  EXPECT_EQ(conv(oid::kFloat8, "-0").as_double(), 0.0);
  EXPECT_TRUE(std::signbit(conv(oid::kFloat8, "-0").as_double()));
  EXPECT_TRUE(std::isnan(conv(oid::kFloat8, "NaN").as_double()));
  EXPECT_TRUE(std::isnan(conv(oid::kFloat4, "NaN").as_double()));
  EXPECT_EQ(conv(oid::kFloat8, "Infinity"),
            Value::float64(std::numeric_limits<double>::infinity()));
  EXPECT_EQ(conv(oid::kFloat4, "-Infinity"),
            Value::float64(-std::numeric_limits<double>::infinity()));
  fail(oid::kFloat8, "");
  fail(oid::kFloat8, "1.0.0");
  fail(oid::kFloat8, "1e999");
  fail(oid::kFloat8, "abc");
  fail(oid::kFloat8, "1 ");
}

TEST_F(PgTypes, NumericIsExactText) {
  Value v = conv(oid::kNumeric, "12345678901234567890.000000000000000001");
  EXPECT_EQ(v.kind(), ValueKind::decimal);
  EXPECT_EQ(v.as_text(), "12345678901234567890.000000000000000001");
  EXPECT_EQ(conv(oid::kNumeric, "-0.50"), Value::decimal("-0.50"));
  EXPECT_EQ(conv(oid::kNumeric, "42"), Value::decimal("42"));
  EXPECT_EQ(conv(oid::kNumeric, "NaN"), Value::decimal("NaN"));
  EXPECT_EQ(conv(oid::kNumeric, "Infinity"), Value::decimal("Infinity"));
  EXPECT_EQ(conv(oid::kNumeric, "-Infinity"), Value::decimal("-Infinity"));
  std::string huge(1000, '9');
  huge += ".5";
  EXPECT_EQ(conv(oid::kNumeric, huge).as_text(), huge);
  fail(oid::kNumeric, "");
  fail(oid::kNumeric, "1.");
  fail(oid::kNumeric, ".5");
  fail(oid::kNumeric, "1e5");
  fail(oid::kNumeric, "12,3");
  fail(oid::kNumeric, "-");
}

TEST_F(PgTypes, Strings) {
  for (uint32_t t : {oid::kText, oid::kVarchar, oid::kBpchar, oid::kName, oid::kChar, oid::kXml,
                     oid::kInet, oid::kCidr, oid::kMacaddr, oid::kMoney, oid::kBit}) {
    Value v = conv(t, "héllo wörld ");
    EXPECT_EQ(v.kind(), ValueKind::string) << t;
    EXPECT_EQ(v.as_text(), "héllo wörld ") << t;
  }
  EXPECT_EQ(conv(oid::kText, "").as_text(), "");
  EXPECT_EQ(conv(oid::kText, "").kind(), ValueKind::string);
}

TEST_F(PgTypes, Bytea) {
  EXPECT_EQ(conv(oid::kBytea, "\\x0a0b"), Value::bytes("\x0a\x0b"));
  EXPECT_EQ(conv(oid::kBytea, "\\x"), Value::bytes(""));
  EXPECT_EQ(conv(oid::kBytea, "\\x00FFfe"), Value::bytes(std::string_view("\x00\xff\xfe", 3)));
  // Legacy escape format (bytea_output = escape).
  EXPECT_EQ(conv(oid::kBytea, "abc\\000\\\\d\\377"),
            Value::bytes(std::string_view("abc\0\\d\xff", 7)));
  fail(oid::kBytea, "\\x0");
  fail(oid::kBytea, "\\x0g");
  fail(oid::kBytea, "\\9");
  fail(oid::kBytea, "ab\\");
}

TEST_F(PgTypes, Dates) {
  EXPECT_EQ(conv(oid::kDate, "2024-02-29"), Value::date(days_from_civil(2024, 2, 29)));
  EXPECT_EQ(conv(oid::kDate, "1970-01-01"), Value::date(0));
  EXPECT_EQ(conv(oid::kDate, "1969-12-31"), Value::date(-1));
  EXPECT_EQ(conv(oid::kDate, "infinity"), Value::date(std::numeric_limits<int32_t>::max()));
  EXPECT_EQ(conv(oid::kDate, "-infinity"), Value::date(std::numeric_limits<int32_t>::min()));
  // 44 BC is astronomical year -43; 1 BC is year 0 (a leap year).
  EXPECT_EQ(conv(oid::kDate, "0044-03-15 BC"), Value::date(days_from_civil(-43, 3, 15)));
  EXPECT_EQ(conv(oid::kDate, "0001-01-01 BC"), Value::date(days_from_civil(0, 1, 1)));
  EXPECT_EQ(conv(oid::kDate, "0001-02-29 BC"), Value::date(days_from_civil(0, 2, 29)));
  EXPECT_EQ(conv(oid::kDate, "0001-01-01").as_date() - conv(oid::kDate, "0001-12-31 BC").as_date(),
            1);
  EXPECT_EQ(conv(oid::kDate, "4713-01-01 BC"), Value::date(days_from_civil(-4712, 1, 1)));
  EXPECT_EQ(conv(oid::kDate, "5874897-12-31"), Value::date(days_from_civil(5874897, 12, 31)));
  EXPECT_EQ(format_date(conv(oid::kDate, "12345-06-07").as_date()), "+12345-06-07");
  fail(oid::kDate, "2023-02-29");
  fail(oid::kDate, "2024-13-01");
  fail(oid::kDate, "2024-04-31");
  fail(oid::kDate, "24-01-01");
  fail(oid::kDate, "0000-01-01");
  fail(oid::kDate, "2024-01-01 AD");
  fail(oid::kDate, "2024-01-01x");
  fail(oid::kDate, "");
}

TEST_F(PgTypes, Times) {
  EXPECT_EQ(conv(oid::kTime, "13:45:00.123456"),
            Value::time((13 * 3600 + 45 * 60) * kSec + 123456));
  EXPECT_EQ(conv(oid::kTime, "00:00:00"), Value::time(0));
  EXPECT_EQ(conv(oid::kTime, "24:00:00"), Value::time(kDay));
  EXPECT_EQ(conv(oid::kTimetz, "13:45:00+02"), Value::timetz((13 * 3600 + 45 * 60) * kSec, 7200));
  EXPECT_EQ(conv(oid::kTimetz, "13:45:00.123+05:30"),
            Value::timetz((13 * 3600 + 45 * 60) * kSec + 123000, 5 * 3600 + 30 * 60));
  EXPECT_EQ(conv(oid::kTimetz, "13:45:00-03:30:15"),
            Value::timetz((13 * 3600 + 45 * 60) * kSec, -(3 * 3600 + 30 * 60 + 15)));
  EXPECT_EQ(conv(oid::kTimetz, "00:00:00+00"), Value::timetz(0, 0));
  fail(oid::kTime, "25:00:00");
  fail(oid::kTime, "13:60:00");
  fail(oid::kTime, "13:45:00+02");
  fail(oid::kTimetz, "13:45:00");
  fail(oid::kTime, "");
}

TEST_F(PgTypes, Timestamps) {
  const int64_t base = int64_t(days_from_civil(2024, 2, 29)) * kDay + (13 * 3600 + 45 * 60) * kSec;
  EXPECT_EQ(conv(oid::kTimestamp, "2024-02-29 13:45:00.5"), Value::timestamp(base + 500000));
  EXPECT_EQ(conv(oid::kTimestamp, "2024-02-29 13:45:00"), Value::timestamp(base));
  EXPECT_EQ(conv(oid::kTimestamp, "1969-12-31 23:59:59.999999"), Value::timestamp(-1));
  EXPECT_EQ(conv(oid::kTimestamptz, "2024-02-29 13:45:00.5+00"), Value::timestamptz(base + 500000));
  EXPECT_EQ(conv(oid::kTimestamptz, "2024-02-29 19:15:00.5+05:30"),
            Value::timestamptz(base + 500000));
  EXPECT_EQ(conv(oid::kTimestamptz, "2024-02-29 10:44:45-03:00:15"), Value::timestamptz(base));
  const int64_t bc = int64_t(days_from_civil(-43, 3, 15)) * kDay + (13 * 3600 + 45 * 60) * kSec;
  EXPECT_EQ(conv(oid::kTimestamp, "0044-03-15 13:45:00 BC"), Value::timestamp(bc));
  EXPECT_EQ(conv(oid::kTimestamptz, "0044-03-15 13:45:00.5+00 BC"),
            Value::timestamptz(bc + 500000));
  EXPECT_EQ(conv(oid::kTimestamp, "4713-11-24 00:00:00 BC"),
            Value::timestamp(int64_t(days_from_civil(-4712, 11, 24)) * kDay));
  // int64 microseconds since 1970 end in 294247 AD, before PostgreSQL's own limit (294276 AD).
  EXPECT_EQ(conv(oid::kTimestamp, "294247-01-10 04:00:54.775807"),
            Value::timestamp(std::numeric_limits<int64_t>::max()));
  EXPECT_NE(fail(oid::kTimestamptz, "294276-12-31 23:59:59.999999+00").find("range"),
            std::string::npos);
  fail(oid::kTimestamp, "294247-01-10 04:00:54.775808");
  EXPECT_EQ(conv(oid::kTimestamp, "infinity"),
            Value::timestamp(std::numeric_limits<int64_t>::max()));
  EXPECT_EQ(conv(oid::kTimestamptz, "-infinity"),
            Value::timestamptz(std::numeric_limits<int64_t>::min()));
  fail(oid::kTimestamp, "2024-02-29");
  fail(oid::kTimestamp, "2024-02-29 13:45:00+00");
  fail(oid::kTimestamptz, "2024-02-29 13:45:00");
  fail(oid::kTimestamp, "2024-02-30 13:45:00");
  fail(oid::kTimestamp, "5000000-01-01 00:00:00");  // beyond int64 microseconds
  fail(oid::kTimestamptz, "");
}

TEST_F(PgTypes, Intervals) {
  auto iv = [&](std::string_view text) {
    Value v = conv(oid::kInterval, text);
    EXPECT_EQ(v.kind(), ValueKind::interval) << text;
    return v.kind() == ValueKind::interval ? v.as_interval() : Interval{};
  };
  EXPECT_EQ(iv("P1Y2M3DT4H5M6.5S"), (Interval{14, 3, (4 * 3600 + 5 * 60 + 6) * kSec + 500000}));
  EXPECT_EQ(iv("P-1Y-2M3DT-4H-5M-6.5S"),
            (Interval{-14, 3, -((4 * 3600 + 5 * 60 + 6) * kSec + 500000)}));
  EXPECT_EQ(iv("PT0S"), (Interval{0, 0, 0}));
  EXPECT_EQ(iv("P1DT-0.000001S"), (Interval{0, 1, -1}));
  EXPECT_EQ(iv("PT-0.5S"), (Interval{0, 0, -500000}));
  EXPECT_EQ(iv("P2W"), (Interval{0, 14, 0}));
  EXPECT_EQ(iv("P178000000Y"), (Interval{178000000 * 12, 0, 0}));
  EXPECT_EQ(iv("PT2562047788H54.775807S"), (Interval{0, 0, std::numeric_limits<int64_t>::max()}));
  EXPECT_EQ(iv("PT-2562047788H-54.775808S"), (Interval{0, 0, std::numeric_limits<int64_t>::min()}));
  // Round trip through the shared formatter.
  for (std::string_view s : {"P1Y2M3DT4H5M6.5S", "P1DT-0.000001S", "PT0S", "P-3D"})
    EXPECT_EQ(format_interval(iv(s)), s);
  fail(oid::kInterval, "");
  fail(oid::kInterval, "P");
  fail(oid::kInterval, "PT");
  fail(oid::kInterval, "P1X");
  fail(oid::kInterval, "P1.5Y");
  fail(oid::kInterval, "PT1.5H");
  fail(oid::kInterval, "1 day");
  fail(oid::kInterval, "P1D2");
  fail(oid::kInterval, "PT1H T1M");
  fail(oid::kInterval, "PT99999999999999999999H");
  fail(oid::kInterval, "PT2562047789H");
  fail(oid::kInterval, "P300000000Y");
}

TEST_F(PgTypes, UuidAndJson) {
  Value u = conv(oid::kUuid, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
  ASSERT_EQ(u.kind(), ValueKind::uuid);
  EXPECT_EQ(format_uuid(u.uuid_bytes()), "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
  fail(oid::kUuid, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1");
  fail(oid::kUuid, "not-a-uuid");
  EXPECT_EQ(conv(oid::kJson, "{\"a\": [1, 2]}"), Value::json("{\"a\": [1, 2]}"));
  EXPECT_EQ(conv(oid::kJsonb, "{\"a\": 1}"), Value::json("{\"a\": 1}"));
}

TEST_F(PgTypes, OneDimensionalArrays) {
  Value v = conv(1007, "{1,2,NULL}");
  ASSERT_EQ(v.kind(), ValueKind::array);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v.items()[0], Value::int64(1));
  EXPECT_EQ(v.items()[1], Value::int64(2));
  EXPECT_TRUE(v.items()[2].is_null());

  Value t = conv(1009, R"({"a b","c\"d",NULL,"NULL","","x\\y",plain,null})");
  ASSERT_EQ(t.kind(), ValueKind::array);
  EXPECT_EQ(strings(t), (std::vector<std::string>{"a b", "c\"d", "<null>", "NULL", "", "x\\y",
                                                  "plain", "<null>"}));
  for (const Value& item : t.items())
    if (!item.is_null()) {
      EXPECT_EQ(item.kind(), ValueKind::string);
    }

  Value empty = conv(1007, "{}");
  ASSERT_EQ(empty.kind(), ValueKind::array);
  EXPECT_EQ(empty.size(), 0u);

  Value spaced = conv(1007, "{ 1 , 2 }");
  ASSERT_EQ(spaced.size(), 2u);
  EXPECT_EQ(spaced.items()[1], Value::int64(2));
  EXPECT_EQ(strings(conv(1009, "{a b ,c}")), (std::vector<std::string>{"a b", "c"}));
  EXPECT_EQ(strings(conv(1009, R"({a\,b,\NULL})")), (std::vector<std::string>{"a,b", "NULL"}));

  // A decoration with the default lower bound is the plain array.
  Value deco = conv(1007, "[1:2]={1,2}");
  ASSERT_EQ(deco.size(), 2u);
  EXPECT_EQ(deco.items()[0], Value::int64(1));
}

// Arrays have no lower bound: one that PostgreSQL starts elsewhere than 1 cannot be represented
// (read as starting at 1, every subscript would shift), so it is a data error naming the value.
TEST_F(PgTypes, ArraysWithAnotherLowerBoundAreRefused) {
  for (const char* text : {"[0:2]={1,2,3}", "[-1:0]={1,2}", "[1:1][0:1]={{1,2}}"}) {
    const std::string message = fail(1007, text);
    EXPECT_NE(message.find(text), std::string::npos) << message;
    EXPECT_NE(message.find("do not start at 1"), std::string::npos) << message;
  }
}

TEST_F(PgTypes, MultiDimensionalArrays) {
  Value v = conv(1007, "{{1,2},{3,4}}");
  ASSERT_EQ(v.kind(), ValueKind::array);
  ASSERT_EQ(v.size(), 2u);
  ASSERT_EQ(v.items()[0].kind(), ValueKind::array);
  EXPECT_EQ(v.items()[0].items()[0], Value::int64(1));
  EXPECT_EQ(v.items()[1].items()[1], Value::int64(4));

  Value t = conv(1009, R"({{"a,b","c\"d"},{NULL,"NULL"}})");
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(strings(t.items()[0]), (std::vector<std::string>{"a,b", "c\"d"}));
  EXPECT_EQ(strings(t.items()[1]), (std::vector<std::string>{"<null>", "NULL"}));

  Value three = conv(1016, "[1:1][1:2][1:2]={{{1,2},{3,-4}}}");
  ASSERT_EQ(three.size(), 1u);
  ASSERT_EQ(three.items()[0].size(), 2u);
  EXPECT_EQ(three.items()[0].items()[1].items()[1], Value::int64(-4));

  Value braces = conv(1009, R"({"{x}","}"})");
  EXPECT_EQ(strings(braces), (std::vector<std::string>{"{x}", "}"}));
}

TEST_F(PgTypes, ArraysOfEveryElementKind) {
  Value ts = conv(1185, R"({"2024-01-01 10:00:00+00",NULL})");
  ASSERT_EQ(ts.size(), 2u);
  EXPECT_EQ(ts.items()[0],
            Value::timestamptz(int64_t(days_from_civil(2024, 1, 1)) * kDay + 10 * 3600 * kSec));
  Value ivs = conv(1187, "{P1D,PT-1S}");
  ASSERT_EQ(ivs.size(), 2u);
  EXPECT_EQ(ivs.items()[0].as_interval(), (Interval{0, 1, 0}));
  EXPECT_EQ(ivs.items()[1].as_interval(), (Interval{0, 0, -kSec}));
  EXPECT_EQ(conv(3807, R"({"{\"a\": 1}"})").items()[0], Value::json("{\"a\": 1}"));
  Value nums = conv(1231, "{1.5,NaN,-Infinity}");
  EXPECT_EQ(nums.items()[0], Value::decimal("1.5"));
  EXPECT_EQ(nums.items()[1], Value::decimal("NaN"));
  EXPECT_EQ(nums.items()[2], Value::decimal("-Infinity"));
  Value fl = conv(1022, "{NaN,Infinity,0.5}");
  EXPECT_TRUE(std::isnan(fl.items()[0].as_double()));
  EXPECT_EQ(fl.items()[2], Value::float64(0.5));
  EXPECT_EQ(conv(1000, "{t,f,NULL}").items()[1], Value::boolean(false));
  EXPECT_EQ(conv(1001, R"({"\\x0a0b"})").items()[0], Value::bytes("\x0a\x0b"));
  EXPECT_EQ(conv(1182, R"({2024-02-29,"0044-03-15 BC"})").items()[1],
            Value::date(days_from_civil(-43, 3, 15)));
  EXPECT_EQ(conv(1270, "{13:45:00+02}").items()[0],
            Value::timetz((13 * 3600 + 45 * 60) * kSec, 7200));
  EXPECT_EQ(
      format_uuid(conv(2951, "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}").items()[0].uuid_bytes()),
      "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
  // box uses ';' as its delimiter.
  EXPECT_EQ(strings(conv(1020, "{(3,4),(1,2);(1,1),(0,0)}")),
            (std::vector<std::string>{"(3,4),(1,2)", "(1,1),(0,0)"}));
}

// timetz's binary form: microseconds, then the zone in seconds west of UTC (the Value's offset is
// east). A zone beyond PostgreSQL's ±15:59:59 is malformed, INT32_MIN among them (found by the
// pg_binary fuzzer: its negation overflowed).
TEST_F(PgTypes, BinaryTimetzZonesBeyondPostgresqlsBoundAreDataErrors) {
  auto timetz = [](int64_t micros, int32_t zone_west) {
    std::string b;
    for (int i = 7; i >= 0; --i) b.push_back(char(uint64_t(micros) >> (8 * i) & 0xff));
    for (int i = 3; i >= 0; --i) b.push_back(char(uint32_t(zone_west) >> (8 * i) & 0xff));
    return b;
  };
  const int64_t t = (13 * 3600 + 45 * 60) * kSec;
  Result<Value> east = binary_to_value(types_, oid::kTimetz, timetz(t, -7200), arena_);
  ASSERT_TRUE(east.ok()) << east.error().message();
  EXPECT_EQ(east.value(), Value::timetz(t, 7200));
  Result<Value> edge = binary_to_value(types_, oid::kTimetz, timetz(t, 57599), arena_);
  ASSERT_TRUE(edge.ok()) << edge.error().message();
  EXPECT_EQ(edge.value(), Value::timetz(t, -57599));
  for (const int32_t zone :
       {std::numeric_limits<int32_t>::min(), -57600, 57600, std::numeric_limits<int32_t>::max()}) {
    Result<Value> r = binary_to_value(types_, oid::kTimetz, timetz(t, zone), arena_);
    ASSERT_FALSE(r.ok()) << zone;
    EXPECT_EQ(r.error().code(), Errc::data) << zone;
    EXPECT_NE(r.error().message().find("time zone displacement"), std::string::npos)
        << r.error().message();
  }
}

// binary_to_value_fast: whatever it takes, it decodes exactly as binary_to_value does; what the
// full decoder must judge (a wrong size, ±infinity, a timestamp beyond sluice's range, a bool byte
// of 2) it leaves to it; other types it never takes.
TEST_F(PgTypes, TheBinaryFastPathAgreesWithTheFullDecoderOrDeclines) {
  auto be = [](uint64_t v, int bytes) {
    std::string b;
    for (int i = bytes - 1; i >= 0; --i) b.push_back(char(v >> (8 * i) & 0xff));
    return b;
  };
  const uint64_t i64max = uint64_t(std::numeric_limits<int64_t>::max());
  const uint64_t i64min = uint64_t(std::numeric_limits<int64_t>::min());
  struct Case {
    uint32_t oid;
    std::string bytes;
    bool taken;
  };
  const std::vector<Case> cases = {
      {oid::kBool, be(1, 1), true},
      {oid::kBool, be(0, 1), true},
      {oid::kBool, be(2, 1), false},
      {oid::kBool, be(1, 2), false},
      {oid::kInt2, be(0xfffe, 2), true},
      {oid::kInt2, be(1, 4), false},
      {oid::kInt4, be(0x80000000u, 4), true},
      {oid::kInt4, be(1, 3), false},
      {oid::kInt8, be(i64min, 8), true},
      {oid::kInt8, be(1, 4), false},
      {oid::kFloat8, be(0x7ff8000000000001ULL, 8), true},  // a NaN, bit for bit
      {oid::kFloat8, be(0x3ff0000000000000ULL, 8), true},
      {oid::kFloat8, be(1, 4), false},
      {oid::kDate, be(uint32_t(-10957), 4), true},  // 1970-01-01
      {oid::kDate, be(0x7fffffffu, 4), false},      // infinity
      {oid::kDate, be(0x80000000u, 4), false},      // -infinity
      {oid::kDate, be(0x7ffffffeu, 4), false},      // beyond int32 days once moved to 1970
      {oid::kDate, be(1, 8), false},
      {oid::kTimestamp, be(0, 8), true},
      {oid::kTimestamptz, be(uint64_t(-1), 8), true},
      {oid::kTimestamptz, be(i64max, 8), false},      // infinity
      {oid::kTimestamp, be(i64min, 8), false},        // -infinity
      {oid::kTimestamptz, be(i64max - 1, 8), false},  // beyond 294247 AD
      {oid::kTimestamp, be(1, 4), false},
      {oid::kText, "caf\xc3\xa9", true},
      {oid::kVarchar, "", true},
      {oid::kBpchar, "ab  ", true},
      {oid::kName, "relname", true},
      {oid::kFloat4, be(0x3f800000u, 4), false},  // the full decoder's shortest-form reading
      {oid::kNumeric, be(0, 8), false},
      {oid::kUuid, std::string(16, 'x'), false},
      {oid::kJsonb, "\x01{}", false},
  };
  for (const Case& c : cases) {
    Value fast;
    const bool taken = binary_to_value_fast(c.oid, c.bytes, arena_, &fast);
    EXPECT_EQ(taken, c.taken) << c.oid << " " << c.bytes.size() << " bytes";
    if (!taken) continue;
    Result<Value> full = binary_to_value(types_, c.oid, c.bytes, arena_);
    ASSERT_TRUE(full.ok()) << c.oid << ": " << full.error().message();
    EXPECT_EQ(fast, full.value()) << c.oid;
  }
}

TEST_F(PgTypes, MalformedArrays) {
  for (std::string_view bad :
       {"", "1,2", "{1,2", "{1,,2}", "{,}", "{1,2}x", "{\"a}", "[0:1{1}", "[0:1]{1}", "[a:1]={1}",
        "{a{b}}", "{{1},2", "{1 2\"}", "{\"a\"b}", "{a\\"}) {
    Result<Value> r = text_to_value(types_, 1009, bad, arena_);
    EXPECT_FALSE(r.ok()) << bad << " -> " << (r.ok() ? to_debug_string(*r) : "");
  }
  std::string e = fail(1007, "{1,x}");
  EXPECT_NE(e.find("int4"), std::string::npos) << e;
  std::string deep(5000, '{');
  deep += std::string(5000, '}');
  fail(1007, deep);
}

TEST_F(PgTypes, EnumsDomainsAndUnknownTypes) {
  constexpr uint32_t kMood = 70001, kPositive = 70002, kPosArr = 70003, kMoodArr = 70004,
                     kTiny = 70005, kLoopA = 70006, kLoopB = 70007;
  types_.add(kMood, {TypeInfo::Kind::enumeration, 0, ','});
  types_.add(kPositive, {TypeInfo::Kind::domain, oid::kInt4, ','});
  types_.add(kTiny, {TypeInfo::Kind::domain, kPositive, ','});  // domain over a domain
  types_.add(kPosArr, {TypeInfo::Kind::array, kPositive, ','});
  types_.add(kMoodArr, {TypeInfo::Kind::array, kMood, ','});
  types_.add(kLoopA, {TypeInfo::Kind::domain, kLoopB, ','});
  types_.add(kLoopB, {TypeInfo::Kind::domain, kLoopA, ','});

  EXPECT_EQ(conv(kMood, "happy"), Value::string("happy"));
  EXPECT_EQ(conv(kPositive, "7"), Value::int64(7));
  EXPECT_EQ(conv(kTiny, "8"), Value::int64(8));
  std::string e = fail(kPositive, "seven");
  EXPECT_NE(e.find("int4"), std::string::npos) << e;
  Value pa = conv(kPosArr, "{1,NULL,3}");
  ASSERT_EQ(pa.size(), 3u);
  EXPECT_EQ(pa.items()[2], Value::int64(3));
  EXPECT_EQ(strings(conv(kMoodArr, "{happy,\"so so\"}")),
            (std::vector<std::string>{"happy", "so so"}));
  fail(kLoopA, "1");  // a broken registry never recurses forever

  EXPECT_EQ(conv(424242, "(1,2)"), Value::string("(1,2)"));
  types_.add(70008, {TypeInfo::Kind::composite, 0, ','});
  EXPECT_EQ(conv(70008, "(1,\"a b\")"), Value::string("(1,\"a b\")"));
  // Types with a non-array text form stay strings.
  EXPECT_EQ(conv(22, "1 2 3"), Value::string("1 2 3"));
  EXPECT_EQ(conv(3904, "[1,5)"), Value::string("[1,5)"));
}

TEST_F(PgTypes, MemoryComesFromTheArena) {
  Arena arena(1024);
  size_t before = arena.used();
  std::string input = "some text value";
  Result<Value> r = text_to_value(types_, oid::kText, input, arena);
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->as_text().data(), input.data());
  EXPECT_GE(arena.used(), before + input.size());
  Result<Value> a = text_to_value(types_, 1009, "{abc,\"d\\\"e\"}", arena);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(strings(*a), (std::vector<std::string>{"abc", "d\"e"}));
}

TEST(PgTypesCopy, Unescape) {
  std::string out = "stale";
  copy_unescape("plain", &out);
  EXPECT_EQ(out, "plain");
  copy_unescape("a\\tb\\nc\\rd\\\\e\\bf\\fg\\vh", &out);
  EXPECT_EQ(out, "a\tb\nc\rd\\e\bf\fg\vh");
  copy_unescape("\\101\\7\\0x", &out);
  EXPECT_EQ(out, std::string("A\a\0x", 4));
  copy_unescape("\\x41\\x4g\\xz", &out);
  EXPECT_EQ(out, "A\x04gxz");
  copy_unescape("\\q\\.", &out);
  EXPECT_EQ(out, "q.");
  copy_unescape("", &out);
  EXPECT_EQ(out, "");
  copy_unescape("end\\", &out);
  EXPECT_EQ(out, "end\\");
}

}  // namespace
}  // namespace sluice::pg
