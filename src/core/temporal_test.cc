#include "sluice/temporal.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <iterator>
#include <limits>
#include <random>

namespace sluice {
namespace {

// The fmt-based renderers sluice wrote before the codec had allocation-free writers: the text of
// every value must stay byte-identical (checkpointed keys, destination rows and Kafka messages
// depend on it).
std::string reference_date(int32_t days) {
  int64_t y;
  unsigned m, d;
  civil_from_days(days, &y, &m, &d);
  if (y >= 0 && y <= 9999) return fmt::format("{:04}-{:02}-{:02}", y, m, d);
  return fmt::format("{:+05}-{:02}-{:02}", y, m, d);
}

std::string reference_time(int64_t micros) {
  // A negative duration (MySQL TIME) is its magnitude after a minus sign; sluice once wrote
  // -1 s as "00:00:-1" (issue 13).
  if (micros < 0) return "-" + reference_time(-micros);
  std::string out;
  int64_t s = micros / 1000000, frac = micros % 1000000;
  fmt::format_to(std::back_inserter(out), "{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
  if (frac) {
    std::string f = fmt::format("{:06}", frac);
    while (!f.empty() && f.back() == '0') f.pop_back();
    out += '.';
    out += f;
  }
  return out;
}

std::string reference_offset(int32_t off) {
  std::string out;
  char sign = off < 0 ? '-' : '+';
  int32_t a = off < 0 ? -off : off;
  fmt::format_to(std::back_inserter(out), "{}{:02}:{:02}", sign, a / 3600, (a / 60) % 60);
  if (a % 60) fmt::format_to(std::back_inserter(out), ":{:02}", a % 60);
  return out;
}

std::string reference_timestamp(int64_t micros) {
  int64_t days =
      micros / temporal::kMicrosPerDay -
      ((micros % temporal::kMicrosPerDay != 0) && ((micros < 0) != (temporal::kMicrosPerDay < 0)));
  return reference_date(int32_t(days)) + 'T' +
         reference_time(micros - days * temporal::kMicrosPerDay);
}

TEST(Temporal, WritersMatchTheCanonicalTextOverManyValues) {
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<int32_t> any_day(-4000000, 4000000);
  std::uniform_int_distribution<int32_t> near_day(-800000, 3000000);  // ~ -220 .. 10200 AD
  std::uniform_int_distribution<int64_t> in_day(0, temporal::kMicrosPerDay - 1);
  std::uniform_int_distribution<int64_t> any_time(-temporal::kMicrosPerDay * 200,
                                                  temporal::kMicrosPerDay * 200);
  std::uniform_int_distribution<int32_t> offsets(-20 * 3600, 20 * 3600);
  for (int i = 0; i < 200000; ++i) {
    const int32_t d = (i % 2) ? any_day(rng) : near_day(rng);
    ASSERT_EQ(format_date(d), reference_date(d)) << d;
    const int64_t t = (i % 3) ? in_day(rng) : any_time(rng);
    ASSERT_EQ(format_time(t), reference_time(t)) << t;
    const int64_t whole = (i % 5 == 0) ? t - t % 1000000 : t;  // plenty of whole seconds
    ASSERT_EQ(format_time(whole), reference_time(whole)) << whole;
    const int32_t o = offsets(rng);
    ASSERT_EQ(format_timetz(t, o), reference_time(t) + reference_offset(o)) << t << " " << o;
    const int64_t ts = int64_t(d) * temporal::kMicrosPerDay + t;
    ASSERT_EQ(format_timestamp(ts), reference_timestamp(ts)) << ts;
    ASSERT_EQ(format_timestamptz(ts), reference_timestamp(ts) + "Z") << ts;
  }
  for (int32_t d : {0, -1, 1, -719528, -719529, 2932896, 2932897,
                    std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min()})
    EXPECT_EQ(format_date(d), reference_date(d)) << d;
  for (int64_t t : {int64_t(0), int64_t(1), int64_t(-1), temporal::kMicrosPerDay,
                    int64_t(100) * 3600 * 1000000, int64_t(-1000000), int64_t(-1500000)})
    EXPECT_EQ(format_time(t), reference_time(t)) << t;
}

TEST(Temporal, NegativeTimesAreWrittenWithOneLeadingMinus) {
  const int64_t s = temporal::kMicrosPerSecond;
  EXPECT_EQ(format_time(-s), "-00:00:01");
  EXPECT_EQ(format_time(-s / 2), "-00:00:00.5");
  EXPECT_EQ(format_time(-(838 * 3600 + 59 * 60 + 59) * s - 999999), "-838:59:59.999999");
  EXPECT_EQ(format_time(std::numeric_limits<int64_t>::min()), "-2562047788:00:54.775808");
}

TEST(Temporal, DurationsParseSignedAndBeyondADay) {
  const int64_t s = temporal::kMicrosPerSecond;
  auto parse = [](std::string_view text, int64_t* out) {
    return temporal::parse_duration_prefix(text, out) && text.empty();
  };
  int64_t v = 0;
  ASSERT_TRUE(parse("-00:00:01", &v));
  EXPECT_EQ(v, -s);
  ASSERT_TRUE(parse("838:59:59.5", &v));
  EXPECT_EQ(v, (838 * 3600 + 59 * 60 + 59) * s + s / 2);
  ASSERT_TRUE(parse("-838:59:59.000001", &v));
  EXPECT_EQ(v, -((838 * 3600 + 59 * 60 + 59) * s + 1));
  ASSERT_TRUE(parse("0:00:00", &v));
  EXPECT_EQ(v, 0);
  for (int64_t t : {-s, 25 * 3600 * s + 7, -(838 * 3600) * s - 123456})  // what sluice writes
    EXPECT_TRUE(parse(format_time(t), &v) && v == t) << format_time(t);
  for (const char* bad : {"", "-", "12:60:00", "12:00:60", "12:00", "1234567890:00:00", "12:00:00.",
                          "+12:00:00", "12:0:00"})
    EXPECT_FALSE(parse(bad, &v)) << bad;
}

TEST(Temporal, CivilDatesParseWithABoundedYear) {
  temporal::CivilDate c{};
  std::string_view s = "294276-12-31 rest";
  ASSERT_TRUE(temporal::parse_civil_prefix(s, 9, &c));
  EXPECT_EQ(c.year, 294276);
  EXPECT_EQ(c.month, 12u);
  EXPECT_EQ(c.day, 31u);
  EXPECT_EQ(s, " rest");
  for (const char* bad : {"123-01-01", "1234567890-01-01", "2024-13-01", "2024-00-15", "2024-01-00",
                          "2024-01-32", "2024-1-01", "-2024-01-01"}) {
    std::string_view b = bad;
    EXPECT_FALSE(temporal::parse_civil_prefix(b, 9, &c)) << bad;
  }
}

TEST(Temporal, CanonicalTextRoundTrips) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> micros(-62135596800LL * 1000000,
                                                253402300799LL * 1000000);  // 1..9999 AD
  for (int i = 0; i < 50000; ++i) {
    const int64_t ts = micros(rng);
    int64_t back = 0;
    ASSERT_TRUE(parse_timestamp(format_timestamp(ts), &back)) << format_timestamp(ts);
    ASSERT_EQ(back, ts);
    ASSERT_TRUE(parse_timestamptz(format_timestamptz(ts), &back));
    ASSERT_EQ(back, ts);
    const auto [days, t] = temporal::split_timestamp(ts);
    int32_t d = 0;
    ASSERT_TRUE(parse_date(format_date(int32_t(days)), &d));
    ASSERT_EQ(d, days);
    int64_t tt = 0;
    ASSERT_TRUE(parse_time(format_time(t), &tt));
    ASSERT_EQ(tt, t);
  }
}

TEST(Temporal, ParsesOffsetsAndSeparatorsAndRejectsMalformedText) {
  int64_t us = 0;
  ASSERT_TRUE(parse_timestamptz("2024-02-29 13:45:00.5+05:30", &us));
  EXPECT_EQ(format_timestamptz(us), "2024-02-29T08:15:00.5Z");
  ASSERT_TRUE(parse_timestamptz("2024-02-29T13:45:00-0130", &us));
  EXPECT_EQ(format_timestamptz(us), "2024-02-29T15:15:00Z");
  int64_t t = 0;
  int32_t off = 0;
  ASSERT_TRUE(parse_timetz("13:45:00+02", &t, &off));
  EXPECT_EQ(off, 7200);
  int32_t d = 0;
  ASSERT_TRUE(parse_date("-0044-03-15", &d));
  EXPECT_EQ(format_date(d), "-0044-03-15");
  ASSERT_TRUE(parse_date("+12345-01-01", &d));
  EXPECT_EQ(format_date(d), "+12345-01-01");
  for (const char* bad : {"2024-13-01", "2024-00-10", "2024-01-00", "24-01-01", "2024/01/01",
                          "2024-01-01x", "99999999999-01-01", "1234567890123456789012-01-01", "",
                          "2024-02-30", "2023-02-29", "2024-04-31", "1900-02-29"})
    EXPECT_FALSE(parse_date(bad, &d)) << bad;
  ASSERT_TRUE(parse_date("2000-02-29", &d));
  EXPECT_EQ(format_date(d), "2000-02-29");
  EXPECT_FALSE(parse_timestamp("2024-02-31 00:00:00", &us));
  for (const char* bad : {"25:00:00", "12:60", "12:00:00.", "1:00", "12:00:00Z"})
    EXPECT_FALSE(parse_time(bad, &t)) << bad;
  EXPECT_FALSE(parse_timestamp("2024-01-01", &us));
  EXPECT_FALSE(parse_timestamptz("2024-01-01T00:00:00", &us));
}

TEST(Temporal, CalendarHelpers) {
  EXPECT_EQ(temporal::days_in_month(2024, 2), 29u);
  EXPECT_EQ(temporal::days_in_month(1900, 2), 28u);
  EXPECT_EQ(temporal::days_in_month(2000, 2), 29u);
  EXPECT_EQ(temporal::days_in_month(2023, 12), 31u);
  EXPECT_EQ(days_from_civil(2000, 1, 1), temporal::kPostgresEpochDays);
  EXPECT_EQ(int64_t(temporal::kPostgresEpochDays) * temporal::kMicrosPerDay,
            temporal::kPostgresEpochMicros);
  EXPECT_EQ(temporal::floor_div(-1, temporal::kMicrosPerDay), -1);
  const auto c = temporal::civil_date(days_from_civil(-4, 2, 29));
  EXPECT_EQ(c.year, -4);
  EXPECT_EQ(c.month, 2u);
  EXPECT_EQ(c.day, 29u);
}

TEST(Temporal, CombineCheckedDetectsOverflow) {
  int64_t us = 0;
  // 2024-02-29 13:45:00 at +02:00 is 11:45:00 UTC.
  const int32_t day = days_from_civil(2024, 2, 29);
  const int64_t time = (13 * 3600 + 45 * 60) * temporal::kMicrosPerSecond;
  ASSERT_TRUE(temporal::combine_checked(day, time, 7200, &us));
  EXPECT_EQ(format_timestamptz(us), "2024-02-29T11:45:00Z");
  ASSERT_TRUE(temporal::combine_checked(-1, 0, 0, &us));
  EXPECT_EQ(us, -temporal::kMicrosPerDay);
  // The largest and smallest days overflow an int64 of µs; the output is left alone.
  us = 42;
  EXPECT_FALSE(temporal::combine_checked(std::numeric_limits<int32_t>::max(), 0, 0, &us));
  EXPECT_FALSE(temporal::combine_checked(std::numeric_limits<int32_t>::min(), 0, 0, &us));
  // In range as days, out of range once the time or the offset is added.
  const int32_t last_day = int32_t(std::numeric_limits<int64_t>::max() / temporal::kMicrosPerDay);
  EXPECT_TRUE(temporal::combine_checked(last_day, 0, 0, &us));
  EXPECT_FALSE(temporal::combine_checked(last_day, temporal::kMicrosPerDay, 0, &us));
  EXPECT_FALSE(temporal::combine_checked(last_day, temporal::kMicrosPerDay - 1, -86400, &us));
  EXPECT_FALSE(temporal::combine_checked(0, 0, std::numeric_limits<int64_t>::max(), &us));
}

}  // namespace
}  // namespace sluice
