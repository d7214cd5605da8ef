// float_as_shortest_double against its definition: the double that the float's shortest decimal
// text (std::to_chars) reads as (std::from_chars), over a spread of bit patterns that covers every
// exponent, plus the values its fast path takes (integers, short binary fractions) and its edges.
#include <gtest/gtest.h>

#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "sluice/value.h"

namespace sluice {
namespace {

double by_text(float f) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, f);
  EXPECT_EQ(ec, std::errc());
  double d = 0;
  std::from_chars(buf, end, d);
  return d;
}

void expect_same(float f) {
  const double want = by_text(f);
  const double got = float_as_shortest_double(f);
  ASSERT_EQ(std::bit_cast<uint64_t>(got), std::bit_cast<uint64_t>(want))
      << "float bits 0x" << std::hex << std::bit_cast<uint32_t>(f) << ": " << got << " vs " << want;
}

TEST(FloatAsShortestDouble, MatchesTheShortestTextOverEveryExponent) {
  // Every 1021st bit pattern (both signs, every exponent, subnormals), about 4 M values.
  for (uint64_t b = 1; b < (uint64_t(1) << 32); b += 1021) {
    const float f = std::bit_cast<float>(uint32_t(b));
    if (!std::isfinite(f)) continue;
    expect_same(f);
  }
}

TEST(FloatAsShortestDouble, MatchesTheShortestTextOnTheValuesItsFastPathTakes) {
  // Integers up to and past 2^24, where neighbouring floats stop being 1 apart.
  for (int64_t i = -(int64_t(1) << 25); i <= (int64_t(1) << 25); i += 61) expect_same(float(i));
  for (int64_t i = (int64_t(1) << 24) - 50; i <= (int64_t(1) << 24) + 50; ++i)
    expect_same(float(i));
  // Short binary fractions at every magnitude (salaries such as 30001.25, 0.5, 1048576.25, …).
  for (int k = 1; k <= 20; ++k)
    for (int64_t m = 1; m < 2000000; m += 61) {
      expect_same(float(std::ldexp(double(m), -k)));
      expect_same(float(std::ldexp(double(m), -k) + 1048576.0));
      expect_same(-float(std::ldexp(double(m), -k) + 30000.0));
    }
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(-1e6f, 1e6f);
  for (int i = 0; i < 500000; ++i) expect_same(u(rng));
}

TEST(FloatAsShortestDouble, KeepsTheEdges) {
  EXPECT_EQ(float_as_shortest_double(0.1f), 0.1);
  EXPECT_EQ(float_as_shortest_double(1.1f), 1.1);
  EXPECT_EQ(float_as_shortest_double(30001.25f), 30001.25);
  EXPECT_EQ(float_as_shortest_double(-0.0f), 0.0);
  EXPECT_TRUE(std::signbit(float_as_shortest_double(-0.0f)));
  EXPECT_EQ(float_as_shortest_double(std::numeric_limits<float>::max()), 3.4028235e38);
  EXPECT_EQ(float_as_shortest_double(std::numeric_limits<float>::denorm_min()), 1e-45);
  EXPECT_TRUE(std::isinf(float_as_shortest_double(std::numeric_limits<float>::infinity())));
  EXPECT_TRUE(std::isnan(float_as_shortest_double(std::numeric_limits<float>::quiet_NaN())));
}

}  // namespace
}  // namespace sluice
