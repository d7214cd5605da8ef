// Setting types: text parsing (durations, sizes, scalars), lookup, accessors and
// settings_from_text.
#include "sluice/settings.h"

#include <gtest/gtest.h>

namespace sluice {
namespace {

using std::chrono::milliseconds;

TEST(ParseDuration, UnitsAndBareMilliseconds) {
  milliseconds d{};
  EXPECT_FALSE(parse_duration("250ms", &d));
  EXPECT_EQ(d, milliseconds(250));
  EXPECT_FALSE(parse_duration("5s", &d));
  EXPECT_EQ(d, milliseconds(5000));
  EXPECT_FALSE(parse_duration("2m", &d));
  EXPECT_EQ(d, milliseconds(120000));
  EXPECT_FALSE(parse_duration("1h", &d));
  EXPECT_EQ(d, milliseconds(3600000));
  EXPECT_FALSE(parse_duration("1.5s", &d));
  EXPECT_EQ(d, milliseconds(1500));
  EXPECT_FALSE(parse_duration("1h30m", &d));
  EXPECT_EQ(d, milliseconds(5400000));
  EXPECT_FALSE(parse_duration("750", &d));
  EXPECT_EQ(d, milliseconds(750));
  EXPECT_FALSE(parse_duration("0", &d));
  EXPECT_EQ(d, milliseconds(0));
}

TEST(ParseDuration, Rejects) {
  milliseconds d{};
  for (const char* bad : {"", "ms", "-5s", "5 parsecs", "5sec", "abc", "1s2", "1e999h"}) {
    auto err = parse_duration(bad, &d);
    ASSERT_TRUE(err) << bad;
    EXPECT_EQ(err->find('\n'), std::string::npos);
  }
  EXPECT_EQ(*parse_duration("5x", &d), "unknown duration unit 'x' in '5x' (use ms, s, m, h or d)");
}

TEST(ParseSize, BinaryDecimalAndBytes) {
  uint64_t n = 0;
  EXPECT_FALSE(parse_size("64MiB", &n));
  EXPECT_EQ(n, 64ull << 20);
  EXPECT_FALSE(parse_size("512KiB", &n));
  EXPECT_EQ(n, 512ull << 10);
  EXPECT_FALSE(parse_size("1GiB", &n));
  EXPECT_EQ(n, 1ull << 30);
  EXPECT_FALSE(parse_size("10MB", &n));
  EXPECT_EQ(n, 10'000'000u);
  EXPECT_FALSE(parse_size("1kB", &n));
  EXPECT_EQ(n, 1000u);
  EXPECT_FALSE(parse_size("4096", &n));
  EXPECT_EQ(n, 4096u);
  EXPECT_FALSE(parse_size("1.5KiB", &n));
  EXPECT_EQ(n, 1536u);
  EXPECT_FALSE(parse_size("2 mib", &n));
  EXPECT_EQ(n, 2ull << 20);
}

TEST(ParseSize, Rejects) {
  uint64_t n = 0;
  for (const char* bad : {"", "MiB", "-1", "1.5", "12 parsecs", "1MiBs", "99999999TiB"})
    EXPECT_TRUE(parse_size(bad, &n)) << bad;
  EXPECT_EQ(*parse_size("3 ZiB", &n),
            "unknown size unit 'ZiB' in '3 ZiB' (use B, kB, MB, GB, TB, KiB, MiB, GiB or TiB)");
}

SettingValue parsed(const SettingSpec& spec, std::string_view text) {
  SettingValue v;
  auto err = parse_setting_scalar(spec, text, &v);
  EXPECT_FALSE(err) << *err;
  return v;
}

std::string parse_error(const SettingSpec& spec, std::string_view text) {
  SettingValue v;
  auto err = parse_setting_scalar(spec, text, &v);
  EXPECT_TRUE(err) << text;
  return err.value_or("");
}

TEST(ParseSettingScalar, Integer) {
  SettingSpec s{"count", SettingType::integer, "", false, ""};
  EXPECT_EQ(std::get<int64_t>(parsed(s, "42")), 42);
  EXPECT_EQ(std::get<int64_t>(parsed(s, "-7")), -7);
  EXPECT_EQ(std::get<int64_t>(parsed(s, "+7")), 7);
  EXPECT_EQ(std::get<int64_t>(parsed(s, "9223372036854775807")), INT64_MAX);
  EXPECT_EQ(parse_error(s, "ten"), "expected an integer, got 'ten'");
  parse_error(s, "1.0");
  parse_error(s, "+-1");
  parse_error(s, "9223372036854775808");
  parse_error(s, "");
}

TEST(ParseSettingScalar, NumberBooleanString) {
  SettingSpec num{"rate", SettingType::number, "", false, ""};
  EXPECT_DOUBLE_EQ(std::get<double>(parsed(num, "0.25")), 0.25);
  EXPECT_DOUBLE_EQ(std::get<double>(parsed(num, "3")), 3.0);
  EXPECT_DOUBLE_EQ(std::get<double>(parsed(num, "1e3")), 1000.0);
  EXPECT_EQ(parse_error(num, "fast"), "expected a number, got 'fast'");
  parse_error(num, "nan");
  parse_error(num, "inf");

  SettingSpec b{"on", SettingType::boolean, "", false, ""};
  for (const char* t : {"true", "yes", "on", "True", "YES"})
    EXPECT_TRUE(std::get<bool>(parsed(b, t))) << t;
  for (const char* f : {"false", "no", "off", "FALSE"})
    EXPECT_FALSE(std::get<bool>(parsed(b, f))) << f;
  EXPECT_EQ(parse_error(b, "maybe"), "expected a boolean (true or false), got 'maybe'");

  SettingSpec s{"name", SettingType::string, "", false, ""};
  EXPECT_EQ(std::get<std::string>(parsed(s, " keep spaces ")), " keep spaces ");
}

TEST(ParseSettingScalar, DurationAndSize) {
  SettingSpec d{"timeout", SettingType::duration, "", false, ""};
  EXPECT_EQ(std::get<milliseconds>(parsed(d, "5s")), milliseconds(5000));
  EXPECT_NE(parse_error(d, "soon").find("expected a duration"), std::string::npos);
  SettingSpec z{"buffer", SettingType::size, "", false, ""};
  EXPECT_EQ(std::get<uint64_t>(parsed(z, "64MiB")), 64ull << 20);
  EXPECT_NE(parse_error(z, "big").find("expected a size"), std::string::npos);
}

TEST(ParseSettingScalar, StringListFromOneString) {
  SettingSpec s{"tables", SettingType::string_list, "", false, ""};
  EXPECT_EQ(std::get<std::vector<std::string>>(parsed(s, "a,b")), std::vector<std::string>{"a,b"});
  EXPECT_EQ(std::get<std::vector<std::string>>(parsed(s, "*")), std::vector<std::string>{"*"});
  // Flow form, as spec defaults may write it.
  EXPECT_EQ(std::get<std::vector<std::string>>(parsed(s, "[a, 'b']")),
            (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(std::get<std::vector<std::string>>(parsed(s, "[]")).empty());
}

TEST(ParseSettingScalar, MapsFromText) {
  SettingSpec n{"ops", SettingType::number_map, "", false, ""};
  auto m = std::get<std::map<std::string, double>>(parsed(n, "{create: 0.8, update: 0.2}"));
  EXPECT_DOUBLE_EQ(m.at("create"), 0.8);
  EXPECT_DOUBLE_EQ(m.at("update"), 0.2);
  m = std::get<std::map<std::string, double>>(parsed(n, "create=1,delete=0"));
  EXPECT_EQ(m.size(), 2u);
  parse_error(n, "create=lots");
  SettingSpec s{"headers", SettingType::string_map, "", false, ""};
  auto sm = std::get<std::map<std::string, std::string>>(parsed(s, "a=x,b=y"));
  EXPECT_EQ(sm.at("b"), "y");
  parse_error(s, "nonsense");
}

TEST(ParseSettingScalar, Enumeration) {
  SettingSpec s{
      "snapshot.mode", SettingType::enumeration, "", false, "", "initial, never,initial_only"};
  EXPECT_EQ(std::get<std::string>(parsed(s, "never")), "never");
  EXPECT_EQ(std::get<std::string>(parsed(s, "initial_only")), "initial_only");
  EXPECT_EQ(parse_error(s, "always"), "expected one of initial, never, initial_only, got 'always'");
}

TEST(ParseSettingScalar, SecretValuesNeverEchoed) {
  for (auto type :
       {SettingType::integer, SettingType::number, SettingType::boolean, SettingType::duration,
        SettingType::size, SettingType::number_map, SettingType::enumeration}) {
    SettingSpec s{"password", type, "", false, "", "a,b", /*secret=*/true};
    std::string err = parse_error(s, "hunter2-secret");
    EXPECT_EQ(err.find("hunter2"), std::string::npos) << err;
  }
}

TEST(ParseSettingScalar, EchoStaysOnOneLine) {
  SettingSpec s{"count", SettingType::integer, "", false, ""};
  std::string err = parse_error(s, "a\nb" + std::string(200, 'x'));
  EXPECT_EQ(err.find('\n'), std::string::npos);
  EXPECT_LT(err.size(), 150u);
}

constexpr SettingSpec kSpec[] = {
    {"url", SettingType::string, "", true, "Server URL.", {}, true},
    {"count", SettingType::integer, "10", false, "How many."},
    {"timeout", SettingType::duration, "5s", false, "Timeout."},
    {"snapshot.mode", SettingType::enumeration, "initial", false, "Snapshot.", "initial,never"},
    {"headers.*", SettingType::string, "", false, "Pass-through headers."},
    {"headers.special.*", SettingType::integer, "", false, "Narrower pattern."},
};

TEST(FindSetting, ExactAndPattern) {
  EXPECT_EQ(find_setting(kSpec, "count"), &kSpec[1]);
  EXPECT_EQ(find_setting(kSpec, "snapshot.mode"), &kSpec[3]);
  EXPECT_EQ(find_setting(kSpec, "headers.X-Trace"), &kSpec[4]);
  EXPECT_EQ(find_setting(kSpec, "headers.a.b"), &kSpec[4]);
  EXPECT_EQ(find_setting(kSpec, "headers.special.x"), &kSpec[5]);
  EXPECT_EQ(find_setting(kSpec, "headers"), nullptr);
  EXPECT_EQ(find_setting(kSpec, "headers."), nullptr);
  EXPECT_EQ(find_setting(kSpec, "snapshot"), nullptr);
  EXPECT_EQ(find_setting(kSpec, "nope"), nullptr);
}

TEST(SettingsFromText, AppliesDefaultsAndParses) {
  Settings s;
  auto err =
      settings_from_text(kSpec, {{"url", "pg://x"}, {"count", "3"}, {"headers.X-Trace", "on"}}, &s);
  ASSERT_FALSE(err) << *err;
  EXPECT_EQ(s.get_string("url"), "pg://x");
  EXPECT_EQ(s.get_int("count"), 3);
  EXPECT_EQ(s.get_duration("timeout"), milliseconds(5000));
  EXPECT_EQ(s.get_string("snapshot.mode"), "initial");
  EXPECT_EQ(s.with_prefix("headers"), (std::map<std::string, std::string>{{"X-Trace", "on"}}));
  EXPECT_EQ(s.spec().size(), std::size(kSpec));
}

TEST(SettingsFromText, Errors) {
  Settings s;
  EXPECT_EQ(*settings_from_text(kSpec, {}, &s), "missing required setting 'url'");
  EXPECT_EQ(
      *settings_from_text(kSpec, {{"url", "x"}, {"cont", "1"}}, &s),
      "unknown setting 'cont' (known: url, count, timeout, snapshot.mode, headers.*, headers.special.*)");
  EXPECT_EQ(*settings_from_text(kSpec, {{"url", "x"}, {"count", "many"}}, &s),
            "setting 'count': expected an integer, got 'many'");
  EXPECT_EQ(*settings_from_text(kSpec, {{"url", "x"}, {"snapshot.mode", "sometimes"}}, &s),
            "setting 'snapshot.mode': expected one of initial, never, got 'sometimes'");
}

TEST(Settings, AccessorsReturnDefaultOnMissingOrMismatch) {
  Settings s;
  s.set("n", int64_t{5});
  s.set("size", uint64_t{1024});
  s.set("list", std::vector<std::string>{"a", "b"});
  EXPECT_EQ(s.get_int("n"), 5);
  EXPECT_EQ(s.get_size("size"), 1024u);
  EXPECT_EQ(s.get_int("size"), 0);  // uint64_t is the size alternative, not an integer
  EXPECT_EQ(s.get_size("n"), 0u);
  EXPECT_EQ(s.get_string("n"), "");
  EXPECT_EQ(s.get_bool("missing"), false);
  EXPECT_EQ(s.get_duration("missing"), milliseconds(0));
  EXPECT_EQ(s.get_list("list"), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(s.get_number_map("list").empty());
  EXPECT_TRUE(s.has("n"));
  EXPECT_FALSE(s.has("missing"));
}

TEST(Settings, WithPrefixRendersText) {
  Settings s;
  s.set("props.acks", std::string("all"));
  s.set("props.linger", milliseconds(5));
  s.set("props.batch.size", uint64_t{16384});
  s.set("props.idempotence", true);
  s.set("props.ratio", 0.5);
  s.set("propsx", std::string("not mine"));
  s.set("other.a", std::string("no"));
  std::map<std::string, std::string> want{{"acks", "all"},
                                          {"linger", "5ms"},
                                          {"batch.size", "16384"},
                                          {"idempotence", "true"},
                                          {"ratio", "0.5"}};
  EXPECT_EQ(s.with_prefix("props"), want);
  EXPECT_EQ(s.with_prefix("props."), want);
  EXPECT_EQ(s.with_prefix("props.*"), want);
  EXPECT_TRUE(s.with_prefix("nothing").empty());
}

TEST(SettingTypeName, Names) {
  EXPECT_EQ(setting_type_name(SettingType::integer), "integer");
  EXPECT_EQ(setting_type_name(SettingType::duration), "duration");
  EXPECT_EQ(setting_type_name(SettingType::enumeration), "enum");
  EXPECT_EQ(setting_type_name(SettingType::string_list), "string list");
}

}  // namespace
}  // namespace sluice
