#include <gtest/gtest.h>

#include "sluice/result.h"

namespace sluice {
namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return Error(Errc::invalid_argument, "not positive");
  return v;
}

Status check(int v) {
  SLUICE_TRY(parse_positive(v));
  return ok_status();
}

Result<int> doubled(int v) {
  SLUICE_TRY_ASSIGN(int x, parse_positive(v));
  SLUICE_TRY(check(x));
  return x * 2;
}

TEST(ResultTry, PropagatesTheErrorAndKeepsTheValue) {
  EXPECT_TRUE(check(3).ok());
  Status bad = check(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), Errc::invalid_argument);
  auto good = doubled(21);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 42);
  auto fail = doubled(0);
  ASSERT_FALSE(fail.ok());
  EXPECT_EQ(fail.error().message(), "not positive");
}

}  // namespace
}  // namespace sluice
