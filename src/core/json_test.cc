#include "sluice/json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace sluice {
namespace {

// Builds values with memory in a batch arena.
struct Builder {
  Batch& b;
  Value str(std::string_view s) { return Value::string(b.copy(s)); }
  Value arr(std::initializer_list<Value> items) {
    Value* p = b.arena().allocate_array<Value>(items.size());
    size_t i = 0;
    for (const Value& v : items) p[i++] = v;
    return Value::array(p, uint32_t(items.size()));
  }
  Value obj(std::initializer_list<std::pair<std::string_view, Value>> fields) {
    ObjectBuilder ob = b.object(uint32_t(fields.size()));
    for (const auto& [n, v] : fields) ob.add(b.copy(n), v);
    return ob.build();
  }
  Value uuid(std::string_view text) {
    auto* p = static_cast<uint8_t*>(b.arena().allocate(16, 1));
    EXPECT_TRUE(parse_uuid(text, p));
    return Value::uuid(p);
  }
  Value interval(int32_t months, int32_t days, int64_t micros) {
    auto* p = static_cast<Interval*>(b.arena().allocate(sizeof(Interval), alignof(Interval)));
    *p = Interval{months, days, micros};
    return Value::interval(p);
  }
};

void expect_records_equal(const Record& a, const Record& b) {
  EXPECT_EQ(a.op, b.op);
  EXPECT_EQ(a.position, b.position);
  EXPECT_TRUE(a.metadata == b.metadata)
      << to_debug_string(a.metadata) << " vs " << to_debug_string(b.metadata);
  EXPECT_TRUE(a.key == b.key) << to_debug_string(a.key) << " vs " << to_debug_string(b.key);
  EXPECT_TRUE(a.before == b.before)
      << to_debug_string(a.before) << " vs " << to_debug_string(b.before);
  EXPECT_TRUE(a.after == b.after) << to_debug_string(a.after) << " vs " << to_debug_string(b.after);
}

// Encodes, decodes and checks the record came back identical; returns the JSON line.
std::string round_trip(const Record& r) {
  std::string line;
  encode_record_json(r, line);
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  Batch out;
  Status st = decode_record_json(line, out);
  EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message()) << "\n" << line;
  if (!st.ok() || out.size() != 1) return line;
  expect_records_equal(r, out.records()[0]);
  // Encoding the decoded record gives the same text.
  std::string again;
  encode_record_json(out.records()[0], again);
  EXPECT_EQ(line, again);
  return line;
}

TEST(Json, RoundTripsEveryKind) {
  Batch b;
  Builder x{b};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  Value every = x.obj({
      {"null", Value::null()},
      {"t", Value::boolean(true)},
      {"f", Value::boolean(false)},
      {"i", Value::int64(-42)},
      {"imin", Value::int64(std::numeric_limits<int64_t>::min())},
      {"imax", Value::int64(std::numeric_limits<int64_t>::max())},
      {"u_small", Value::uint64(7)},
      {"umax", Value::uint64(std::numeric_limits<uint64_t>::max())},
      {"u_edge", Value::uint64(uint64_t(1) << 63)},
      {"d", Value::float64(3.25)},
      {"d_int", Value::float64(3.0)},
      {"d_neg0", Value::float64(-0.0)},
      {"d_tiny", Value::float64(5e-324)},
      {"d_big", Value::float64(1.7976931348623157e308)},
      {"d_1e16", Value::float64(1e16)},
      {"d_third", Value::float64(1.0 / 3.0)},
      {"nan", Value::float64(nan)},
      {"inf", Value::float64(inf)},
      {"ninf", Value::float64(-inf)},
      {"dec", Value::decimal(b.copy("-12.340"))},
      {"dec_nan", Value::decimal(b.copy("NaN"))},
      {"s", x.str("plain")},
      {"empty", Value::string({})},
      {"esc", x.str("q\"b\\s/\n\r\t\b\f\x01\x1f\x7f"
                    " end")},
      {"nul", x.str(std::string_view("a\0b", 3))},
      {"unicode", x.str("héllo wörld ✓ 日本 😀")},
      {"bytes", Value::bytes(b.copy(std::string_view("\x00\xff\x10 bin\n", 8)))},
      {"bytes1", Value::bytes(b.copy("a"))},
      {"bytes2", Value::bytes(b.copy("ab"))},
      {"bytes_empty", Value::bytes({})},
      {"date", Value::date(days_from_civil(2024, 2, 29))},
      {"date_old", Value::date(days_from_civil(-44, 3, 15))},
      {"date_far", Value::date(days_from_civil(12345, 12, 31))},
      {"time", Value::time(((13 * 60 + 45) * 60) * 1000000LL + 123456)},
      {"time0", Value::time(0)},
      {"timetz", Value::timetz(((13 * 60 + 45) * 60) * 1000000LL + 500000, 2 * 3600)},
      {"timetz_neg", Value::timetz(1000000, -(5 * 3600 + 30 * 60))},
      {"ts", Value::timestamp(1709214300123456LL)},
      {"ts_pre_epoch", Value::timestamp(-1234567890123LL)},
      {"tstz", Value::timestamptz(1709214300000000LL)},
      {"interval", x.interval(14, 3, 4 * 3600000000LL + 5 * 60000000LL + 6500000)},
      {"interval_neg", x.interval(-14, -3, -1500000)},
      {"interval_zero", x.interval(0, 0, 0)},
      {"uuid", x.uuid("123e4567-e89b-12d3-a456-426614174000")},
      {"json_obj", Value::json(b.copy(R"({"a": [1, 2.50, "x"], "b": null})"))},
      {"json_arr", Value::json(b.copy("[1,2,3]"))},
      {"json_num", Value::json(b.copy("1.50"))},
      {"json_str", Value::json(b.copy(R"("text")"))},
      {"json_multiline", Value::json(b.copy("{\n  \"a\": 1\n}\n"))},
      {"json_spaced", Value::json(b.copy(" true "))},
      {"json_empty", Value::json({})},
      {"k\"ey\\",
       x.arr({x.str("s\"]}"), Value::json(b.copy(R"({"x":[1,{"y":"]}\"{"}],"z":-1.5e3})")),
              x.obj({{"deep\"", Value::json(b.copy("false"))}}), Value::json(b.copy("[ ]"))})},
      {"arr_plain", x.arr({Value::int64(1), x.str("two"), Value::null()})},
      {"arr_mixed",
       x.arr({Value::int64(1), Value::date(0), x.arr({Value::float64(nan), Value::boolean(true)}),
              x.obj({{"u", x.uuid("00000000-0000-0000-0000-000000000001")},
                     {"n", Value::int64(2)}})})},
      {"arr_empty", x.arr({})},
      {"obj_empty", x.obj({})},
      {"nested",
       x.obj({{"plain", Value::int64(1)},
              {"deeper", x.obj({{"dec", Value::decimal(b.copy("1e-5"))}, {"s", x.str("s")}})},
              {"plain_obj", x.obj({{"a", Value::int64(1)}})}})},
      {"absent_field", Value()},
      {"arr_absent", x.arr({Value(), Value::int64(1)})},
      {"types", x.str("a field named types")},
      {"we\"ird\nname", Value::int64(1)},
  });

  Record r;
  r.op = Operation::update;
  r.position = b.copy(std::string_view("\x00\x01pos\xff", 6));
  r.metadata = x.obj(
      {{"table", x.str("employees")}, {"schema", x.str("public")}, {"lsn", x.str("0/16B3748")}});
  r.key =
      x.obj({{"id", Value::uint64(5)}, {"region", x.uuid("123e4567-e89b-12d3-a456-426614174000")}});
  r.before = x.obj({{"id", Value::int64(5)}, {"at", Value::timestamptz(0)}});
  r.after = every;
  std::string line = round_trip(r);
  EXPECT_NE(line.find(R"("d_int":3.0,)"), std::string::npos) << line;
  EXPECT_NE(line.find(R"("d_neg0":-0.0,)"), std::string::npos) << line;
  EXPECT_NE(line.find(R"("date":"2024-02-29")"), std::string::npos) << line;
  EXPECT_NE(line.find(R"("nan":"NaN","inf":"Infinity","ninf":"-Infinity")"), std::string::npos)
      << line;
  EXPECT_NE(line.find(R"("json_obj":{"a": [1, 2.50, "x"], "b": null})"), std::string::npos) << line;
  EXPECT_NE(line.find(R"("umax":18446744073709551615,)"), std::string::npos) << line;
  EXPECT_NE(line.find(R"("esc":"q\"b\\s/\n\r\t\b\f\u0001\u001f)"), std::string::npos) << line;
  EXPECT_NE(line.find("\"unicode\":\"héllo wörld ✓ 日本 😀\""), std::string::npos) << line;
}

TEST(Json, TypesMemberMirrorsOnlyWhatNeedsIt) {
  Batch b;
  Builder x{b};
  Record r;
  r.op = Operation::create;
  r.key = Value::int64(1);
  r.after = x.obj({{"id", Value::int64(1)},
                   {"name", x.str("ann")},
                   {"born", Value::date(0)},
                   {"tags", x.arr({x.str("a"), Value::uint64(3)})},
                   {"score", Value::float64(2.0)}});
  std::string line = round_trip(r);
  EXPECT_EQ(
      line,
      R"({"position":"","operation":"create","key":1,"payload":{"after":{"id":1,"name":"ann",)"
      R"("born":"1970-01-01","tags":["a",3],"score":2.0}},)"
      R"("types":{"after":{"born":"date","tags":[null,"uint64"]}}})");

  // Nothing to annotate: no "types" member at all.
  Record plain;
  plain.op = Operation::snapshot;
  plain.after =
      x.obj({{"id", Value::int64(1)}, {"x", Value::float64(0.5)}, {"big", Value::uint64(~0ull)}});
  line = round_trip(plain);
  EXPECT_EQ(line.find("types"), std::string::npos) << line;

  // Scalar key needing annotation.
  Record k;
  k.op = Operation::remove;
  k.key = x.uuid("123e4567-e89b-12d3-a456-426614174000");
  k.before = Value::null();
  line = round_trip(k);
  EXPECT_EQ(line,
            R"({"position":"","operation":"delete","key":"123e4567-e89b-12d3-a456-426614174000",)"
            R"("payload":{"before":null},"types":{"key":"uuid"}})");
}

TEST(Json, AbsentAndNullAreDistinct) {
  Batch b;
  Builder x{b};
  Record insert;
  insert.op = Operation::create;
  insert.after = x.obj({{"id", Value::int64(1)}});
  std::string line = round_trip(insert);
  EXPECT_EQ(line.find("before"), std::string::npos);
  EXPECT_EQ(line.find("key"), std::string::npos);
  EXPECT_EQ(line.find("metadata"), std::string::npos);

  Record null_before;
  null_before.op = Operation::update;
  null_before.before = Value::null();
  null_before.after = Value::null();
  line = round_trip(null_before);
  EXPECT_NE(line.find(R"("payload":{"before":null,"after":null})"), std::string::npos) << line;

  Record empty;  // no key, no before/after, empty metadata object
  empty.op = Operation::remove;
  empty.metadata = x.obj({});
  line = round_trip(empty);
  EXPECT_NE(line.find(R"("metadata":{},"payload":{})"), std::string::npos) << line;
}

TEST(Json, DecodesPlainOpenCdcWithoutTypes) {
  Batch b;
  std::string line =
      R"({"position":"cG9zLTE=","operation":"snapshot","metadata":{"opencdc.readAt":"1700000000","table":"t"},)"
      R"("key":{"id":9223372036854775808},"payload":{"before":null,"after":{"id":-3,"n":1.5,"e":1e3,"s":"\u00e9\ud83d\ude00",)"
      R"("list":[true,false,null]}},"extra":{"ignored":[1,2]}})";
  Status st = decode_record_json(line, b);
  ASSERT_TRUE(st.ok()) << st.error().message();
  ASSERT_EQ(b.size(), 1u);
  const Record& r = b.records()[0];
  EXPECT_EQ(r.op, Operation::snapshot);
  EXPECT_EQ(r.position, "pos-1");
  EXPECT_EQ(r.meta("table"), "t");
  EXPECT_EQ(r.meta(meta::kReadAt), "1700000000");
  ASSERT_NE(r.key.find("id"), nullptr);
  EXPECT_EQ(r.key.find("id")->kind(), ValueKind::uint64);
  EXPECT_EQ(r.key.find("id")->as_uint64(), uint64_t(1) << 63);
  EXPECT_TRUE(r.before.is_null());
  const Value& a = r.after;
  EXPECT_EQ(a.find("id")->kind(), ValueKind::int64);
  EXPECT_EQ(a.find("id")->as_int64(), -3);
  EXPECT_EQ(a.find("n")->kind(), ValueKind::float64);
  EXPECT_EQ(a.find("n")->as_double(), 1.5);
  EXPECT_EQ(a.find("e")->kind(), ValueKind::float64);
  EXPECT_EQ(a.find("e")->as_double(), 1000.0);
  EXPECT_EQ(a.find("s")->as_text(), "é😀");
  EXPECT_EQ(a.find("list")->size(), 3u);

  // Members in any order; several records share the batch.
  ASSERT_TRUE(
      decode_record_json(
          R"({"payload":{"after":{"x":1}},"types":{"after":{"x":"uint64"}},"operation":"create"})",
          b)
          .ok());
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b.records()[1].after.find("x")->kind(), ValueKind::uint64);
  EXPECT_TRUE(b.records()[1].key.is_absent());
  EXPECT_TRUE(b.records()[1].before.is_absent());
  EXPECT_TRUE(b.records()[1].metadata.is_absent());
}

TEST(Json, MalformedInputIsADataError) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "invalid JSON"},
      {"not json", ""},
      {"[1,2]", "not a JSON object"},
      {R"({"operation":"create")", ""},
      {R"({"operation":"create"} {"operation":"create"})", "invalid JSON"},
      {R"({"operation":"create","key":123456789012345678901234567890})", "invalid JSON"},
      {R"({"payload":{"after":{}}})", "missing \"operation\""},
      {R"({"operation":"upsert"})", "operation: unknown 'upsert'"},
      {R"({"operation":7})", "operation"},
      {R"({"operation":"create","position":"***"})", "position: invalid base64"},
      {R"({"operation":"create","payload":{"after":{"d":"2024-13-01"}},"types":{"after":{"d":"date"}}})",
       "after.d: bad date value '2024-13-01'"},
      {R"({"operation":"create","payload":{"after":{"a":[1,{"u":"zz"}]}},"types":{"after":{"a":[null,{"u":"uuid"}]}}})",
       "after.a[1].u: bad uuid"},
      {R"({"operation":"create","payload":{"after":{"b":12}},"types":{"after":{"b":"bytes"}}})",
       "after.b: expected a string holding a bytes"},
      {R"({"operation":"create","payload":{"after":{"b":1}},"types":{"after":{"b":"flubber"}}})",
       "after.b: unknown type 'flubber' in \"types\""},
      {R"({"operation":"create","payload":{"after":{"x":[1,2}}})", ""},
      {R"({"operation":"create","metadata":"m"})", "metadata: expected an object"},
      {R"({"operation":"create","payload":{"after":{"s":"bad \x escape"}}})", ""},
  };
  for (const auto& [text, want] : cases) {
    Batch b;
    Status st = decode_record_json(text, b);
    ASSERT_FALSE(st.ok()) << text;
    EXPECT_EQ(st.error().code(), Errc::data) << text;
    EXPECT_NE(st.error().message().find(want), std::string::npos)
        << text << " -> " << st.error().message();
    EXPECT_EQ(b.size(), 0u) << text;
  }
  // Invalid UTF-8 in a line is rejected.
  Batch b;
  EXPECT_FALSE(decode_record_json("{\"operation\":\"create\",\"key\":\"\xff\"}", b).ok());
}

// The word-at-a-time escape scan must find a special byte at any position of any length.
TEST(Json, EscapesEverySpecialByteAtEveryPosition) {
  const char specials[] = {'"', '\\', '\n', '\x01', '\x1f', '\0'};
  const char fillers[] = {'a', ' ', '\x7f', '~'};
  for (size_t len = 1; len <= 40; ++len) {
    for (size_t pos = 0; pos < len; ++pos) {
      for (char sp : specials) {
        for (char fl : fillers) {
          std::string text(len, fl);
          text[pos] = sp;
          Batch b;
          Record r;
          r.after = Value::string(b.copy(text));
          std::string line;
          encode_record_json(r, line);
          ASSERT_TRUE(decode_record_json(line, b).ok()) << line;
          ASSERT_EQ(b.records()[0].after.as_text(), text) << line;
        }
      }
    }
    // Clean strings (including UTF-8) of every length are copied unchanged.
    std::string clean;
    for (size_t i = 0; i < len; ++i) clean += char('A' + i % 26);
    std::string out;
    encode_value_json(Value::string(clean), out);
    EXPECT_EQ(out, "\"" + clean + "\"");
    std::string utf = clean + "é";
    out.clear();
    encode_value_json(Value::string(utf), out);
    EXPECT_EQ(out, "\"" + utf + "\"");
  }
}

// The 16-byte scan sends any string with a byte above 0x7f to the UTF-8 check, wherever the byte
// is: valid UTF-8 passes unchanged, an invalid byte becomes U+FFFD, at every position and length.
TEST(Json, NonAsciiAtEveryPositionIsKeptOrRepaired) {
  for (size_t len = 0; len <= 40; ++len) {
    for (size_t pos = 0; pos <= len; ++pos) {
      std::string base;
      for (size_t i = 0; i < len; ++i) base += char('a' + i % 26);
      std::string valid = base;
      valid.insert(pos, "\xc3\xa9");  // é
      std::string out;
      encode_value_json(Value::string(valid), out);
      ASSERT_EQ(out, "\"" + valid + "\"") << len << " " << pos;
      std::string invalid = base;
      invalid.insert(pos, "\xff");
      std::string repaired = base;
      repaired.insert(pos, "\xEF\xBF\xBD");
      out.clear();
      encode_value_json(Value::string(invalid), out);
      ASSERT_EQ(out, "\"" + repaired + "\"") << len << " " << pos;
    }
  }
}

TEST(Json, InvalidUtf8StringsAreRepairedOnEncode) {
  Batch b;
  Record r;
  r.after = Value::string(b.copy("ok\xff\xc3("));
  std::string line;
  encode_record_json(r, line);
  EXPECT_NE(line.find("\"ok\xEF\xBF\xBD\xEF\xBF\xBD(\""), std::string::npos) << line;
  EXPECT_TRUE(decode_record_json(line, b).ok());
}

TEST(Json, EncodeValueIsNaturalJson) {
  Batch b;
  Builder x{b};
  std::string out;
  encode_value_json(
      x.obj({{"a", Value::int64(1)}, {"b", x.arr({Value::date(0), Value::float64(1.0)})}}), out);
  EXPECT_EQ(out, R"({"a":1,"b":["1970-01-01",1.0]})");
}

TEST(Json, Base64) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
  std::string out;
  EXPECT_TRUE(base64_decode("Zm9vYg==", &out));
  EXPECT_EQ(out, "foob");
  EXPECT_TRUE(base64_decode("Zm9vYg", &out));  // unpadded
  EXPECT_EQ(out, "foob");
  EXPECT_FALSE(base64_decode("Zm9vY", &out));
  EXPECT_FALSE(base64_decode("Zm9v!A==", &out));
  std::mt19937 rng(7);
  for (int n = 0; n < 64; ++n) {
    std::string s(size_t(n), '\0');
    for (char& c : s) c = char(rng());
    ASSERT_TRUE(base64_decode(base64_encode(s), &out));
    EXPECT_EQ(out, s);
  }
}

// The codec's allocation-free date/time writers must match value.cc's canonical formatters.
TEST(Json, TemporalTextMatchesCanonicalFormatters) {
  std::mt19937_64 rng(42);
  for (int i = 0; i < 20000; ++i) {
    Batch b;
    int64_t ts = int64_t(rng() % (400ull * 365 * 86400 * 1000000)) - 200ll * 365 * 86400 * 1000000;
    if (i % 3 == 0) ts -= ts % 1000000;
    int64_t tod = int64_t(rng() % (86400ull * 1000000));
    int32_t off = int32_t(rng() % (28 * 3600)) - 14 * 3600;
    int32_t day = int32_t(int64_t(rng() % 8000000) - 4000000);
    Value v[] = {Value::date(day), Value::time(tod), Value::timetz(tod, off), Value::timestamp(ts),
                 Value::timestamptz(ts)};
    std::string want[] = {format_date(day), format_time(tod), format_timetz(tod, off),
                          format_timestamp(ts), format_timestamptz(ts)};
    for (int k = 0; k < 5; ++k) {
      std::string out;
      encode_value_json(v[k], out);
      ASSERT_EQ(out, "\"" + want[k] + "\"");
    }
    Record r;
    r.after = Value::array(v, 5);
    std::string line;
    encode_record_json(r, line);
    ASSERT_TRUE(decode_record_json(line, b).ok()) << line;
    ASSERT_TRUE(b.records()[0].after == r.after) << line;
  }
}

TEST(Json, FloatsRoundTripExactly) {
  std::mt19937_64 rng(1);
  Batch b;
  for (int i = 0; i < 20000; ++i) {
    uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, sizeof d);
    if (std::isnan(d)) d = std::numeric_limits<double>::quiet_NaN();  // NaN payloads are not kept
    Record r;
    r.after = Value::float64(d);
    std::string line;
    encode_record_json(r, line);
    b.clear();
    ASSERT_TRUE(decode_record_json(line, b).ok()) << line;
    ASSERT_TRUE(b.records()[0].after == r.after) << line;
  }
}

}  // namespace
}  // namespace sluice
