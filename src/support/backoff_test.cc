#include "support/backoff.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>

namespace sluice {
namespace {

using std::chrono::milliseconds;

TEST(Backoff, DoublesFromTheInitialDelayAndStaysAtTheCap) {
  Backoff b(BackoffPolicy{milliseconds(200), milliseconds(5000)}, 1);
  const int64_t steps[] = {200, 400, 800, 1600, 3200, 5000, 5000, 5000, 5000, 5000};
  for (int64_t step : steps) {
    EXPECT_EQ(b.next_delay().count(), step);
    const milliseconds d = b.next();
    EXPECT_GE(d.count(), step / 2) << "step " << step;
    EXPECT_LE(d.count(), step) << "step " << step;
  }
  EXPECT_EQ(b.attempts(), 10);
}

TEST(Backoff, TheDefaultCapMakesRecoveryAfterAFortySecondOutageTakeSeconds) {
  // Attempts start at the outage; the server is back at 40 s; the first attempt after that is
  // at most one capped delay later.
  Backoff b;
  EXPECT_EQ(b.max_delay(), milliseconds(5000));
  milliseconds at{0};
  while (at < milliseconds(40000)) at += b.next();
  EXPECT_LE(at - milliseconds(40000), milliseconds(5000));
}

TEST(Backoff, DelaysAreJittered) {
  // Two clients that lost the same server at the same moment do not retry in lock-step.
  std::set<int64_t> seen;
  for (uint32_t i = 1; i <= 20; ++i) {
    // Seeds as std::random_device gives them: spread over the range, not 1, 2, 3.
    Backoff b(BackoffPolicy{milliseconds(1000), milliseconds(1000)}, i * 2654435761u);
    seen.insert(b.next().count());
  }
  EXPECT_GT(seen.size(), 10u);
  for (int64_t d : seen) {
    EXPECT_GE(d, 500);
    EXPECT_LE(d, 1000);
  }
}

TEST(Backoff, ResetStartsOverAndACapBelowTheInitialDelayIsRaisedToIt) {
  Backoff b(BackoffPolicy{milliseconds(300), milliseconds(100)}, 7);
  EXPECT_EQ(b.max_delay(), milliseconds(300));
  for (int i = 0; i < 3; ++i) EXPECT_LE(b.next().count(), 300);
  b.reset();
  EXPECT_EQ(b.attempts(), 0);
  EXPECT_EQ(b.next_delay(), milliseconds(300));

  Backoff zero(BackoffPolicy{milliseconds(0), milliseconds(0)}, 7);
  EXPECT_EQ(zero.next_delay(), milliseconds(1));  // never a busy loop
  EXPECT_LE(zero.next().count(), 1);
}

TEST(Backoff, ALargeCapDoesNotOverflow) {
  Backoff b(BackoffPolicy{milliseconds(1), milliseconds(INT64_MAX / 2)}, 3);
  for (int i = 0; i < 200; ++i) {
    const milliseconds d = b.next();
    ASSERT_GE(d.count(), 0);
    ASSERT_LE(d, b.max_delay());
  }
  EXPECT_EQ(b.next_delay(), b.max_delay());
}

TEST(Backoff, WaitReturnsFalseOnStop) {
  Backoff b(BackoffPolicy{milliseconds(60000), milliseconds(60000)}, 1);
  std::stop_source stop;
  std::thread t([&] {
    std::this_thread::sleep_for(milliseconds(20));
    stop.request_stop();
  });
  EXPECT_FALSE(b.wait(stop.get_token()));
  t.join();
}

}  // namespace
}  // namespace sluice
