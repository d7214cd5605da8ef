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

}  // namespace
}  // namespace sluice
