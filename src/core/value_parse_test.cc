// The text parsers of value.h on input that is not a date or time at all: a run of digits longer
// than int64 (the filter processor tries every operand as a date) is rejected, without the signed
// overflow UBSan reported in `make test-asan`.
#include <gtest/gtest.h>

#include <cstdint>

#include "sluice/value.h"

namespace sluice {
namespace {

TEST(ValueParse, DigitRunLongerThanInt64IsNotADate) {
  int32_t days = 0;
  EXPECT_FALSE(parse_date("18446744073709551615", &days));
  EXPECT_FALSE(parse_date("99999999999999999999-01-01", &days));
  int64_t micros = 0;
  EXPECT_FALSE(parse_timestamp("99999999999999999999-01-01 00:00:00", &micros));
  EXPECT_TRUE(parse_date("2024-02-29", &days));
  EXPECT_EQ(days, days_from_civil(2024, 2, 29));
}

// Found by fuzz/json_record_fuzz.cc: a year whose day count does not fit the date's int32 was
// wrapped into an unrelated date (and overflowed int64 on the way); a timestamp whose microseconds
// do not fit int64 overflowed likewise. Both are now "not a date".
TEST(ValueParse, YearsBeyondTheValueRangeAreNotDates) {
  int32_t days = 0;
  EXPECT_FALSE(parse_date("7173733806442603534-01-01", &days));
  EXPECT_FALSE(parse_date("5879610-01-01", &days));
  EXPECT_FALSE(parse_date("-5877641-01-01", &days));
  EXPECT_TRUE(parse_date("5879609-12-31", &days));
  EXPECT_EQ(days, days_from_civil(5879609, 12, 31));
  EXPECT_TRUE(parse_date("-5877640-01-01", &days));
  EXPECT_EQ(days, days_from_civil(-5877640, 1, 1));
  int64_t micros = 0;
  EXPECT_FALSE(parse_timestamp("300000-01-01 00:00:00", &micros));
  EXPECT_FALSE(parse_timestamptz("-300000-01-01T00:00:00Z", &micros));
  EXPECT_TRUE(parse_timestamp("290000-01-01 00:00:00", &micros));
  EXPECT_EQ(micros, int64_t(days_from_civil(290000, 1, 1)) * 86400000000LL);
  EXPECT_TRUE(parse_date("2024-02-29", &days));
  EXPECT_EQ(days, days_from_civil(2024, 2, 29));
}

}  // namespace
}  // namespace sluice
