// The widening table of the postgres source's schema changes: what it forwards as
// alter_column_type, and what stops the pipeline.
#include <gtest/gtest.h>

#include "connectors/postgres/postgres_source_driver.h"

namespace sluice::pg {
namespace {

constexpr int32_t varchar_mod(int32_t n) { return n + 4; }
constexpr int32_t numeric_mod(int32_t p, int32_t s) { return ((p << 16) | s) + 4; }

TEST(PgWidening, IntegersWidenUpwardsOnly) {
  EXPECT_TRUE(is_widening(oid::kInt2, -1, oid::kInt4, -1));
  EXPECT_TRUE(is_widening(oid::kInt2, -1, oid::kInt8, -1));
  EXPECT_TRUE(is_widening(oid::kInt4, -1, oid::kInt8, -1));
  EXPECT_FALSE(is_widening(oid::kInt8, -1, oid::kInt4, -1));
  EXPECT_FALSE(is_widening(oid::kInt4, -1, oid::kInt2, -1));
  EXPECT_TRUE(is_widening(oid::kInt8, -1, oid::kNumeric, -1));
  EXPECT_TRUE(is_widening(oid::kInt4, -1, oid::kNumeric, numeric_mod(12, 2)));
  EXPECT_FALSE(is_widening(oid::kInt4, -1, oid::kNumeric, numeric_mod(9, 0)));
  EXPECT_FALSE(is_widening(oid::kInt4, -1, oid::kFloat4, -1));  // not exact above 2^24
  EXPECT_FALSE(is_widening(oid::kInt4, -1, oid::kText, -1));
}

TEST(PgWidening, FloatsTextAndNumeric) {
  EXPECT_TRUE(is_widening(oid::kFloat4, -1, oid::kFloat8, -1));
  EXPECT_FALSE(is_widening(oid::kFloat8, -1, oid::kFloat4, -1));
  EXPECT_TRUE(is_widening(oid::kVarchar, varchar_mod(10), oid::kVarchar, varchar_mod(20)));
  EXPECT_FALSE(is_widening(oid::kVarchar, varchar_mod(20), oid::kVarchar, varchar_mod(10)));
  EXPECT_TRUE(is_widening(oid::kVarchar, varchar_mod(10), oid::kVarchar, -1));
  EXPECT_TRUE(is_widening(oid::kVarchar, varchar_mod(10), oid::kText, -1));
  EXPECT_TRUE(is_widening(oid::kText, -1, oid::kVarchar, -1));
  EXPECT_FALSE(is_widening(oid::kText, -1, oid::kVarchar, varchar_mod(100)));
  EXPECT_FALSE(is_widening(oid::kBpchar, varchar_mod(5), oid::kText, -1));  // padding changes
  EXPECT_TRUE(is_widening(oid::kNumeric, numeric_mod(10, 2), oid::kNumeric, numeric_mod(12, 2)));
  EXPECT_FALSE(is_widening(oid::kNumeric, numeric_mod(10, 2), oid::kNumeric, numeric_mod(12, 3)));
  EXPECT_FALSE(is_widening(oid::kNumeric, numeric_mod(10, 2), oid::kNumeric, numeric_mod(8, 2)));
  EXPECT_TRUE(is_widening(oid::kNumeric, numeric_mod(10, 2), oid::kNumeric, -1));
  EXPECT_FALSE(is_widening(oid::kNumeric, -1, oid::kNumeric, numeric_mod(38, 10)));
}

TEST(PgWidening, TemporalPrecisionAndIncompatibleTypes) {
  EXPECT_TRUE(is_widening(oid::kTimestamp, 3, oid::kTimestamp, 6));
  EXPECT_TRUE(is_widening(oid::kTimestamptz, 0, oid::kTimestamptz, -1));
  EXPECT_FALSE(is_widening(oid::kTimestamp, -1, oid::kTimestamp, 3));
  EXPECT_FALSE(is_widening(oid::kTimestamp, -1, oid::kTimestamptz, -1));  // reinterpreted
  EXPECT_FALSE(is_widening(oid::kText, -1, oid::kInt8, -1));
  EXPECT_FALSE(is_widening(oid::kInt8, -1, oid::kBool, -1));
}

}  // namespace
}  // namespace sluice::pg
