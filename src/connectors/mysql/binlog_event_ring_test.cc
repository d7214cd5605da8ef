#include "connectors/mysql/binlog_event_ring.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace sluice::mysql {
namespace {

using Clock = std::chrono::steady_clock;

bool put(EventRing& ring, std::string_view ev, bool verified = false) {
  char* p = ring.reserve(ev.size());
  if (!p) return false;
  if (!ev.empty()) std::memcpy(p, ev.data(), ev.size());
  ring.commit(verified);
  return true;
}

std::string take(EventRing& ring, bool* verified = nullptr) {
  EventRing::Event e;
  auto got = ring.pop(&e, Clock::now() + std::chrono::seconds(5));
  EXPECT_TRUE(got.ok() && got.value());
  if (!got.ok() || !got.value()) return "<none>";
  if (verified) *verified = e.crc_verified;
  std::string s(e.bytes);
  ring.release();
  return s;
}

TEST(EventRing, EventsComeOutInOrderWithTheirFlag) {
  EventRing ring(64);
  ASSERT_TRUE(put(ring, "first", true));
  ASSERT_TRUE(put(ring, "", false));
  ASSERT_TRUE(put(ring, "third", false));
  bool v = false;
  EXPECT_EQ(take(ring, &v), "first");
  EXPECT_TRUE(v);
  EXPECT_EQ(take(ring, &v), "");
  EXPECT_FALSE(v);
  EXPECT_EQ(take(ring, &v), "third");
  EventRing::Event e;
  auto none = ring.pop(&e, Clock::now() + std::chrono::milliseconds(10));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none.value());
}

// Popped events stay readable until released, while the reader writes after them and wraps.
TEST(EventRing, PoppedEventsStayIntactWhileTheRingWraps) {
  EventRing ring(32);
  ASSERT_TRUE(put(ring, "aaaaaaaaaa"));  // [0, 10)
  ASSERT_TRUE(put(ring, "bbbbbbbbbb"));  // [10, 20)
  EventRing::Event a, b;
  ASSERT_TRUE(ring.pop(&a, Clock::now()).value());
  ASSERT_TRUE(ring.pop(&b, Clock::now()).value());
  ring.release();                        // a's room is free: [0, 10)
  ASSERT_TRUE(put(ring, "cccccccccc"));  // [20, 30)
  ASSERT_TRUE(put(ring, "dddddddd"));    // does not fit after 30: wraps to [0, 8)
  EXPECT_EQ(b.bytes, "bbbbbbbbbb");
  ring.release();
  EXPECT_EQ(take(ring), "cccccccccc");
  EXPECT_EQ(take(ring), "dddddddd");
}

// A full ring makes the reader wait until the decoder releases an event.
TEST(EventRing, AFullRingMakesTheReaderWait) {
  EventRing ring(16);
  ASSERT_TRUE(put(ring, "0123456789"));
  std::atomic<bool> written{false};
  std::thread reader([&] {
    put(ring, "abcdefghij");  // 10 more bytes: no room until the first is released
    written = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(written.load());
  EXPECT_EQ(take(ring), "0123456789");
  reader.join();
  EXPECT_TRUE(written.load());
  EXPECT_EQ(take(ring), "abcdefghij");
}

// An event larger than the ring gets a buffer of its own once everything before it was released.
TEST(EventRing, AnEventLargerThanTheRingHasItsOwnBuffer) {
  EventRing ring(8);
  const std::string big(100, 'x');
  ASSERT_TRUE(put(ring, "small"));
  std::thread reader([&] {
    put(ring, big);
    put(ring, "after");
  });
  EXPECT_EQ(take(ring), "small");
  EventRing::Event e;
  ASSERT_TRUE(ring.pop(&e, Clock::now() + std::chrono::seconds(5)).value());
  EXPECT_EQ(e.bytes, big);
  // The next event goes to the ring while the big one is still being read.
  EventRing::Event next;
  ASSERT_TRUE(ring.pop(&next, Clock::now() + std::chrono::seconds(5)).value());
  EXPECT_EQ(next.bytes, "after");
  EXPECT_EQ(e.bytes, big);
  ring.release();
  ring.release();
  reader.join();
}

// An error comes after the events committed before it.
TEST(EventRing, AnErrorComesAfterTheEventsBeforeIt) {
  EventRing ring(64);
  ASSERT_TRUE(put(ring, "one"));
  ring.fail(Error(Errc::connection, "gone", true));
  EXPECT_EQ(take(ring), "one");
  EventRing::Event e;
  auto got = ring.pop(&e, Clock::now() + std::chrono::seconds(5));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().message(), "gone");
}

TEST(EventRing, StopEndsAWaitingReader) {
  EventRing ring(4);
  ASSERT_TRUE(put(ring, "full"));
  std::thread reader([&] { EXPECT_FALSE(put(ring, "more")); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ring.stop();
  reader.join();
  EXPECT_EQ(ring.reserve(1), nullptr);
}

// Two threads, events of random sizes (some larger than the ring): every byte arrives, in order.
TEST(EventRing, AReaderAndADecoderMoveEveryEventInOrder) {
  EventRing ring(1000);
  constexpr int kEvents = 20000;
  std::mt19937 rng(7);
  std::vector<std::string> events(kEvents);
  for (int i = 0; i < kEvents; ++i) {
    const size_t n = rng() % 50 == 0 ? 1000 + rng() % 3000 : rng() % 300;
    events[i].resize(n);
    for (size_t k = 0; k < n; ++k) events[i][k] = char('a' + (i + int(k)) % 26);
  }
  std::thread reader([&] {
    for (const std::string& ev : events)
      if (!put(ring, ev, ev.size() % 2 == 1)) return;  // stopped: the decoder failed
  });
  for (int i = 0; i < kEvents; ++i) {
    bool v = false;
    const std::string got = take(ring, &v);
    EXPECT_EQ(got, events[i]) << "event " << i;
    EXPECT_EQ(v, events[i].size() % 2 == 1);
    if (got != events[i]) break;
  }
  ring.stop();
  reader.join();
}

// A reader waiting for room is woken once a quarter of the ring is free, not when one event's
// room is; and at once when the decoder has taken everything.
TEST(EventRing, AWaitingReaderIsWokenForAStretchOfRoom) {
  EventRing ring(1000);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(put(ring, std::string(100, char('a' + i))));
  std::atomic<bool> written{false};
  std::thread reader([&] {
    put(ring, std::string(100, 'z'));
    written = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // its wait begins
  EXPECT_EQ(take(ring), std::string(100, 'a'));  // 100 bytes free: enough for it, not a quarter
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(written.load());
  EXPECT_EQ(take(ring), std::string(100, 'b'));
  EXPECT_EQ(take(ring), std::string(100, 'c'));  // 300 bytes free in one piece: woken
  reader.join();
  EXPECT_TRUE(written.load());
  for (int i = 3; i < 10; ++i) EXPECT_EQ(take(ring), std::string(100, char('a' + i)));
  EXPECT_EQ(take(ring), std::string(100, 'z'));
}

}  // namespace
}  // namespace sluice::mysql
