// The Redis spool's contract against the real server (connectors/redis/redis_spool.h): batches
// come back in order with their records and position, a reopened spool continues the sequence
// and knows where the source resumes, two named readers each resume after their own release,
// the stream is trimmed only behind the slowest one, depth counts what the slowest holds, and
// max_bytes holds the appender back (or fails it).
#include <gtest/gtest.h>
#include <unistd.h>

#include <deque>
#include <thread>

#include "connectors/redis/redis_spool.h"
#include "support/redis.h"
#include "support/spool/batch_codec.h"

namespace sluice::redis {
namespace {

using namespace std::chrono_literals;

void fill(Batch& b, int first, int n, const std::string& position) {
  for (int i = first; i < first + n; ++i) {
    Record& r = b.add();
    r.op = Operation::create;
    r.key = b.object(1).add("id", Value::int64(i)).build();
    r.after = b.object(1).add("id", Value::int64(i)).build();
  }
  b.set_position(position);
}

// The batches are appended from here (a Batch owns its records' storage and does not move).
struct Batches {
  std::deque<Batch> all;
  const Batch& make(int first, int n, const std::string& position) {
    fill(all.emplace_back(), first, n, position);
    return all.back();
  }
};

class RedisSpoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    key_ = "sluice:test:spool-unit:" + std::to_string(::getpid()) + ":" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    auto c = test::redis_connect();
    (void)c.command({"DEL", key_});
  }
  void TearDown() override {
    auto c = test::redis_connect();
    (void)c.command({"DEL", key_});
  }
  RedisSpoolOptions options(std::vector<std::string> readers = {"a", "b"}) {
    RedisSpoolOptions o;
    o.url = test::redis_url();
    o.key = key_;
    o.fsync = false;
    o.readers = std::move(readers);
    return o;
  }
  long long xlen() {
    auto c = test::redis_connect();
    auto r = c.command({"XLEN", key_});
    return r.ok() ? r.value()->integer : -1;
  }
  // The next batch of `reader` (failing the test when none comes in 2 s): its first id.
  int64_t next_first_id(spool::SpoolReader& reader, uint64_t* seq = nullptr) {
    auto b = reader.next(2000ms, {});
    EXPECT_TRUE(b.ok()) << (b.ok() ? "" : b.error().message());
    if (!b.ok() || !b.value()) {
      ADD_FAILURE() << "no batch";
      return -1;
    }
    if (seq) *seq = b.value()->seq;
    Batch out;
    EXPECT_TRUE(spool::decode_batch(b.value()->payload, out).ok());
    return out.records().empty() ? -1 : out.records().front().key.fields()[0].value.as_int64();
  }
  std::string key_;
  Batches batches_;
};

TEST_F(RedisSpoolTest, ReadersResumeAfterTheirOwnReleaseAndTrimmingWaitsForTheSlowest) {
  {
    RedisSpool s(options());
    ASSERT_TRUE(s.open().ok());
    EXPECT_FALSE(s.last_position().has_value());
    for (int i = 0; i < 5; ++i)
      ASSERT_TRUE(s.append(batches_.make(i * 10, 10, "p" + std::to_string(i)), {}).ok());
    EXPECT_EQ(s.last_position().value_or(""), "p4");
    auto a = s.open_reader("a", std::nullopt);
    auto b = s.open_reader("b", std::nullopt);
    ASSERT_TRUE(a.ok() && b.ok());
    uint64_t seq = 0;
    for (int i = 0; i < 5; ++i) EXPECT_EQ(next_first_id(*a.value(), &seq), i * 10);
    EXPECT_EQ(seq, 5u);
    a.value()->release(5);
    EXPECT_EQ(next_first_id(*b.value(), &seq), 0);
    b.value()->release(1);
    // Depth is what the slowest reader (b) has not released: batches 2..5.
    EXPECT_EQ(s.depth().records, 40u);
    // Trimming runs at most once a second, from an append or a reader.
    std::this_thread::sleep_for(1100ms);
    ASSERT_TRUE(s.append(batches_.make(50, 10, "p5"), {}).ok());
    EXPECT_EQ(xlen(), 5) << "only what both readers released is trimmed";
    EXPECT_EQ(s.depth().records, 50u);
    EXPECT_GT(s.depth().oldest_unix_ms, 0);
  }
  // Reopened: the sequence continues, the source resumes after p5, each reader after its own
  // checkpoint (a at 5, b at 1).
  RedisSpool s(options());
  ASSERT_TRUE(s.open().ok());
  EXPECT_EQ(s.last_position().value_or(""), "p5");
  ASSERT_TRUE(s.append(batches_.make(60, 10, "p6"), {}).ok());
  auto a = s.open_reader("a", 5);
  auto b = s.open_reader("b", 1);
  ASSERT_TRUE(a.ok() && b.ok()) << (a.ok() ? "" : a.error().message());
  uint64_t seq = 0;
  EXPECT_EQ(next_first_id(*a.value(), &seq), 50);
  EXPECT_EQ(seq, 6u);
  EXPECT_EQ(next_first_id(*a.value(), &seq), 60);
  EXPECT_EQ(seq, 7u);
  EXPECT_EQ(next_first_id(*b.value()), 10);
  // Nothing more: next() waits `wait` and returns none.
  auto none = a.value()->next(50ms, {});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none.value().has_value());
  // Both at the end: everything but the last entry goes.
  a.value()->release(7);
  for (int i = 0; i < 5; ++i) {
    uint64_t q = 0;
    next_first_id(*b.value(), &q);
    b.value()->release(q);
  }
  EXPECT_EQ(s.depth().records, 0u);
  std::this_thread::sleep_for(1100ms);
  (void)a.value()->next(10ms, {});
  EXPECT_EQ(xlen(), 1);
  // A checkpoint past the stream's end is a replaced stream: refused with the fix.
  auto c = s.open_reader("a", 99);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message().find("sluice cleanup"), std::string::npos) << c.error().message();
}

TEST_F(RedisSpoolTest, MaxBytesHoldsTheAppenderBackOrFailsIt) {
  RedisSpoolOptions o = options({"a"});
  const Batch& big = batches_.make(0, 200, "p");
  std::string encoded;
  spool::encode_batch(big, encoded);
  o.max_bytes = encoded.size() * 2 + encoded.size() / 2;
  o.fail_when_full = true;
  {
    RedisSpool s(o);
    ASSERT_TRUE(s.open().ok());
    auto a = s.open_reader("a", std::nullopt);
    ASSERT_TRUE(a.ok());
    ASSERT_TRUE(s.append(big, {}).ok());
    ASSERT_TRUE(s.append(big, {}).ok());
    Status full = s.append(big, {});
    ASSERT_FALSE(full.ok());
    EXPECT_NE(full.error().message().find("spool.max_bytes"), std::string::npos);
    uint64_t seq = 0;
    next_first_id(*a.value(), &seq);
    a.value()->release(seq);
    EXPECT_TRUE(s.append(big, {}).ok()) << "released space is reused";
  }
  // block: the appender waits until the reader releases.
  o.fail_when_full = false;
  RedisSpool s(o);
  ASSERT_TRUE(s.open().ok());
  auto a = s.open_reader("a", std::nullopt);
  ASSERT_TRUE(a.ok());
  std::atomic<bool> appended{false};
  std::thread t([&] {
    EXPECT_TRUE(s.append(big, {}).ok());
    appended = true;
  });
  std::this_thread::sleep_for(500ms);
  EXPECT_FALSE(appended.load()) << "the appender did not wait for space";
  uint64_t seq = 0;
  next_first_id(*a.value(), &seq);
  next_first_id(*a.value(), &seq);
  a.value()->release(seq);
  t.join();
  EXPECT_TRUE(appended.load());
}

}  // namespace
}  // namespace sluice::redis
