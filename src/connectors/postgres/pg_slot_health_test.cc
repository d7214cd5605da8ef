// Slot lag in seconds as the monitor derives it from its samples of the server's WAL position.
#include "connectors/postgres/pg_slot_health.h"

#include <gtest/gtest.h>

namespace sluice::pg {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST(SlotLagClock, CaughtUpIsZero) {
  SlotLagClock c;
  const auto t0 = Clock::time_point() + 100s;
  EXPECT_EQ(c.observe(t0, 1000, 1000), 0.0);
  EXPECT_EQ(c.observe(t0 + 5s, 2000, 2000), 0.0);
}

TEST(SlotLagClock, AgeOfTheOldestUnconfirmedSample) {
  SlotLagClock c;
  const auto t0 = Clock::time_point() + 100s;
  EXPECT_EQ(c.observe(t0, 1000, 900), 0.0);          // first seen now
  EXPECT_EQ(c.observe(t0 + 4s, 2000, 900), 4.0);     // still behind the first sample
  EXPECT_EQ(c.observe(t0 + 6s, 3000, 1500), 2.0);    // 1000 confirmed: the 2000 sample is oldest
  EXPECT_EQ(c.observe(t0 + 7s, 3000, 3000), 0.0);    // caught up
  EXPECT_EQ(c.observe(t0 + 9s, 3500, 3000), 0.0);    // new WAL, seen now
  EXPECT_EQ(c.observe(t0 + 19s, 3500, 3000), 10.0);  // the slot stays behind
}

TEST(SlotLagClock, ManySamplesKeepTheOldest) {
  SlotLagClock c;
  const auto t0 = Clock::time_point() + 100s;
  for (int i = 0; i < 10000; ++i) (void)c.observe(t0 + i * 1s, 1000 + uint64_t(i), 10);
  EXPECT_EQ(c.observe(t0 + 10000s, 20000, 10), 10000.0);
}

}  // namespace
}  // namespace sluice::pg
