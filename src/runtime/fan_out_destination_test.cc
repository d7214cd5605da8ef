// The fan-out over several destinations with scripted connectors: every batch to each destination
// after its own processors, the checkpoint at the slowest, per-destination dead-letter queues and
// retries, and the skip of replayed batches a destination that stores positions already holds.
#include "runtime/fan_out_destination.h"

#include <gtest/gtest.h>

#include <mutex>
#include <set>

#include "runtime/memory_checkpoints_test.h"
#include "runtime/pipeline.h"

namespace sluice {
namespace {

using namespace std::chrono_literals;
using test::MemoryCheckpoints;

// Emits ids from the checkpoint (a number) up to n-1, one record per position; ids in `bad` are
// negated (a destination below rejects negative ones).
class NumberSource final : public Source {
 public:
  NumberSource(int n, std::set<int> bad = {}) : n_(n), bad_(std::move(bad)) {}
  Status open(const ConnectorContext&, const std::optional<std::string>& cp) override {
    if (cp) next_ = std::stoi(*cp);
    opened_at = next_;
    return ok_status();
  }
  Result<ReadStatus> read(Batch& b, const ReadRequest& req, std::stop_token) override {
    while (next_ < n_ && b.size() < req.max_records) {
      Record& r = b.add();
      r.op = Operation::create;
      r.key = b.object(1).add("id", Value::int64(bad_.count(next_) ? -next_ : next_)).build();
      ++next_;
    }
    b.set_position(std::to_string(next_));
    return next_ >= n_ ? ReadStatus::end : ReadStatus::more;
  }
  void ack(std::string_view) override {}
  std::optional<std::weak_ordering> compare_positions(std::string_view a,
                                                      std::string_view b) const override {
    return std::stoi(std::string(a)) <=> std::stoi(std::string(b));
  }
  int opened_at = -1;

 private:
  int n_;
  std::set<int> bad_;
  int next_ = 0;
};

// Keeps the ids it wrote; rejects negative ids (data error); fails the first `retriable` writes
// with a retriable error; stores positions when given one.
class Lane final : public Destination {
 public:
  explicit Lane(std::optional<std::string> stored = std::nullopt, bool stores = false)
      : stores_(stores || stored), stored_(std::move(stored)) {}
  Status open(const ConnectorContext& ctx) override {
    destination_label = ctx.destination;
    return ok_status();
  }
  void write(Batch& b, WriteDone done) override {
    std::lock_guard lock(mu);
    ++writes;
    if (retriable > 0) {
      --retriable;
      done(Error(Errc::io, "connection lost", true));
      return;
    }
    for (const Record& r : b.records())
      if (r.key.find("id")->as_int64() < 0) {
        done(Error(Errc::data, "negative id"));
        return;
      }
    for (const Record& r : b.records()) ids.push_back(r.key.find("id")->as_int64());
    if (stores_ && b.has_position()) stored_ = b.position();
    done(ok_status());
  }
  bool stores_positions() const noexcept override { return stores_; }
  Result<std::optional<std::string>> stored_position(std::string_view) override { return stored_; }
  std::mutex mu;
  std::vector<int64_t> ids;
  int writes = 0;
  int retriable = 0;
  std::string destination_label;

 private:
  bool stores_;
  std::optional<std::string> stored_;
};

// Keeps every record's id, the negative ones too.
class AcceptAll final : public Destination {
 public:
  Status open(const ConnectorContext&) override { return ok_status(); }
  void write(Batch& batch, WriteDone done) override {
    for (const Record& r : batch.records()) ids.push_back(r.key.find("id")->as_int64());
    done(ok_status());
  }
  std::vector<int64_t> ids;
};

// Drops odd ids.
class DropOdd final : public Processor {
 public:
  Status process(Batch& b) override {
    std::erase_if(b.records(), [](const Record& r) { return r.key.find("id")->as_int64() % 2; });
    return ok_status();
  }
};

std::vector<int64_t> range(int from, int to, int step = 1) {
  std::vector<int64_t> v;
  for (int i = from; i < to; i += step) v.push_back(i);
  return v;
}

PipelineOptions options(size_t max_records) {
  PipelineOptions o;
  o.id = "t";
  o.source_connector = "numbers";
  o.destination_connector = "a+b";
  o.max_records = max_records;
  o.checkpoint_interval = 10ms;
  return o;
}

FanOutLane lane(std::string name, std::unique_ptr<Destination> d) {
  FanOutLane l;
  l.name = std::move(name);
  l.connector = "test";
  l.destination = std::move(d);
  return l;
}

std::unique_ptr<FanOutDestination> fan_out(std::vector<FanOutLane> lanes, const Source* src) {
  return std::make_unique<FanOutDestination>(
      std::move(lanes),
      [src](std::string_view a, std::string_view b) { return src->compare_positions(a, b); });
}

TEST(FanOut, EveryBatchReachesEachDestinationAfterItsOwnProcessors) {
  MemoryCheckpoints cps;
  auto a = std::make_unique<Lane>(), b = std::make_unique<Lane>();
  Lane *pa = a.get(), *pb = b.get();
  auto src = std::make_unique<NumberSource>(250);
  std::vector<FanOutLane> lanes;
  lanes.push_back(lane("a", std::move(a)));
  lanes.push_back(lane("b", std::move(b)));
  lanes[1].processors.push_back(std::make_unique<DropOdd>());
  auto f = fan_out(std::move(lanes), src.get());
  FanOutDestination* fp = f.get();
  Pipeline p(options(40), std::move(src), {}, std::move(f), &cps);
  Status st = p.run();
  ASSERT_TRUE(st.ok()) << st.error().message();
  EXPECT_EQ(pa->ids, range(0, 250));
  EXPECT_EQ(pb->ids, range(0, 250, 2));  // b's processor saw its own copy; a's records are whole
  EXPECT_EQ(pa->destination_label, "a");
  EXPECT_EQ(fp->lane_metrics(0).records_written.load(), 250u);
  EXPECT_EQ(fp->lane_metrics(1).records_written.load(), 125u);
  EXPECT_EQ(fp->lane_metrics(1).records_filtered.load(), 125u);
  EXPECT_EQ(cps.saved["t"], "250");
}

TEST(FanOut, RejectedRecordGoesToThatDestinationsDeadLetterQueueOnly) {
  MemoryCheckpoints cps;
  auto a = std::make_unique<Lane>();
  auto q = std::make_unique<AcceptAll>(), all = std::make_unique<AcceptAll>();
  Lane* pa = a.get();
  AcceptAll *pq = q.get(), *pall = all.get();
  auto src = std::make_unique<NumberSource>(100, std::set<int>{5, 60});
  std::vector<FanOutLane> lanes;
  lanes.push_back(lane("a", std::move(a)));
  lanes[0].dead_letters = true;
  lanes[0].dlq_connector = "test";
  lanes[0].dlq = std::move(q);
  lanes.push_back(lane("b", std::move(all)));
  auto f = fan_out(std::move(lanes), src.get());
  FanOutDestination* fp = f.get();
  Pipeline p(options(30), std::move(src), {}, std::move(f), &cps);
  Status st = p.run();
  ASSERT_TRUE(st.ok()) << st.error().message();
  std::vector<int64_t> expected;
  for (int i = 0; i < 100; ++i)
    if (i != 5 && i != 60) expected.push_back(i);
  EXPECT_EQ(pa->ids, expected);
  EXPECT_EQ(pq->ids, (std::vector<int64_t>{-5, -60}));
  EXPECT_EQ(pall->ids.size(), 100u);  // the other destination wrote every record
  EXPECT_EQ(fp->lane_metrics(0).dlq_records.load(), 2u);
  EXPECT_EQ(fp->lane_metrics(0).records_written.load(), 98u);
  EXPECT_EQ(fp->lane_metrics(1).dlq_records.load(), 0u);
  EXPECT_EQ(cps.saved["t"], "100");
}

TEST(FanOut, RejectedRecordAtADestinationWithoutDeadLetterQueueStopsBeforeItsBatch) {
  MemoryCheckpoints cps;
  auto src = std::make_unique<NumberSource>(100, std::set<int>{45});
  std::vector<FanOutLane> lanes;
  lanes.push_back(lane("a", std::make_unique<Lane>()));
  lanes.push_back(lane("b", std::make_unique<Lane>()));
  auto f = fan_out(std::move(lanes), src.get());
  Pipeline p(options(20), std::move(src), {}, std::move(f), &cps);
  Status st = p.run();
  ASSERT_FALSE(st.ok());
  // Both reject it; the first to report is named.
  EXPECT_NE(st.error().message().find(": negative id"), std::string::npos) << st.error().message();
  EXPECT_EQ(cps.saved["t"], "40");  // before the batch holding 45
}

TEST(FanOut, RetriableErrorIsRetriedAtThatDestinationOnly) {
  MemoryCheckpoints cps;
  auto a = std::make_unique<Lane>(), b = std::make_unique<Lane>();
  Lane *pa = a.get(), *pb = b.get();
  pb->retriable = 2;
  auto src = std::make_unique<NumberSource>(50);
  std::vector<FanOutLane> lanes;
  lanes.push_back(lane("a", std::move(a)));
  lanes.push_back(lane("b", std::move(b)));
  auto f = fan_out(std::move(lanes), src.get());
  Pipeline p(options(10), std::move(src), {}, std::move(f), &cps);
  Status st = p.run();
  ASSERT_TRUE(st.ok()) << st.error().message();
  EXPECT_EQ(pa->ids, range(0, 50));  // a wrote the retried batch once
  EXPECT_EQ(pa->writes, 5);
  EXPECT_EQ(pb->ids, range(0, 50));
  EXPECT_EQ(pb->writes, 7);
  EXPECT_EQ(p.metrics().write_retries.load(), 2u);
}

TEST(FanOut, ResumesFromTheOldestStoredPositionAndSkipsWhatEachDestinationHolds) {
  MemoryCheckpoints cps;
  ASSERT_TRUE(cps.save("t", "2").ok());  // older than both
  auto a = std::make_unique<Lane>("4"), b = std::make_unique<Lane>("7");
  Lane *pa = a.get(), *pb = b.get();
  auto src = std::make_unique<NumberSource>(10);
  NumberSource* ps = src.get();
  std::vector<FanOutLane> lanes;
  lanes.push_back(lane("a", std::move(a)));
  lanes.push_back(lane("b", std::move(b)));
  auto f = fan_out(std::move(lanes), src.get());
  FanOutDestination* fp = f.get();
  Pipeline p(options(1), std::move(src), {}, std::move(f), &cps);
  Status st = p.run();
  ASSERT_TRUE(st.ok()) << st.error().message();
  EXPECT_EQ(ps->opened_at, 4);       // the oldest destination's position
  EXPECT_EQ(pa->ids, range(4, 10));  // a held 0..3
  EXPECT_EQ(pb->ids, range(7, 10));  // b held 0..6: 4, 5, 6 skipped, not applied twice
  EXPECT_EQ(fp->lane_metrics(1).records_skipped.load(), 3u);
  EXPECT_EQ(cps.saved["t"], "10");
}

TEST(FanOut, TheLastDestinationThatStoresPositionsAnchorsTheResume) {
  MemoryCheckpoints cps;
  ASSERT_TRUE(cps.save("t", "3").ok());  // behind: the anchor committed 6, so every lane holds 6
  auto a = std::make_unique<Lane>(), b = std::make_unique<Lane>("6");
  Lane *pa = a.get(), *pb = b.get();
  auto src = std::make_unique<NumberSource>(10);
  NumberSource* ps = src.get();
  std::vector<FanOutLane> lanes;
  lanes.push_back(lane("a", std::move(a)));
  lanes.push_back(lane("b", std::move(b)));
  auto f = fan_out(std::move(lanes), src.get());
  Pipeline p(options(1), std::move(src), {}, std::move(f), &cps);
  ASSERT_TRUE(p.run().ok());
  EXPECT_EQ(ps->opened_at, 6);
  EXPECT_EQ(pa->ids, range(6, 10));
  EXPECT_EQ(pb->ids, range(6, 10));
  EXPECT_EQ(cps.saved["t"], "10");
}

TEST(FanOut, TheAnchorWritesABatchOnlyOnceTheOthersHoldIt) {
  MemoryCheckpoints cps;
  auto a = std::make_unique<Lane>(), b = std::make_unique<Lane>(std::nullopt, true);
  Lane *pa = a.get(), *pb = b.get();
  pa->retriable = 3;  // a fails its first writes: b (the anchor) must not be written meanwhile
  auto src = std::make_unique<NumberSource>(20);
  std::vector<FanOutLane> lanes;
  lanes.push_back(lane("a", std::move(a)));
  lanes.push_back(lane("b", std::move(b)));
  auto f = fan_out(std::move(lanes), src.get());
  Pipeline p(options(10), std::move(src), {}, std::move(f), &cps);
  ASSERT_TRUE(p.run().ok());
  EXPECT_EQ(pa->writes, 5);
  EXPECT_EQ(pb->writes, 2);  // once per batch, after a held it
  EXPECT_EQ(pb->ids, range(0, 20));
}

}  // namespace
}  // namespace sluice
