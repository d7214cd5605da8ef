// Runtime behaviour with scripted connectors: ordered acknowledgement under out-of-order
// completion, batch limits, back-pressure, graceful stop.
#include "runtime/pipeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "runtime/memory_checkpoints_test.h"
#include "sluice/registry.h"
#include "sluice/schema_change.h"

namespace sluice {
namespace {

using namespace std::chrono_literals;

using test::MemoryCheckpoints;

// Emits `total` records, position = record number, one batch per read up to max_records.
class CountingSource final : public Source {
 public:
  explicit CountingSource(int total, std::vector<std::string>* acks = nullptr)
      : total_(total), acks_(acks) {}
  Status open(const ConnectorContext&, const std::optional<std::string>& cp) override {
    if (cp) next_ = std::stoi(*cp);
    return ok_status();
  }
  Result<ReadStatus> read(Batch& b, const ReadRequest& req, std::stop_token) override {
    while (next_ < total_ && b.size() < req.max_records) {
      Record& r = b.add();
      r.op = Operation::create;
      r.key = b.object(1).add("id", Value::int64(next_)).build();
      ++next_;
      r.position = b.copy(std::to_string(next_));
    }
    b.set_position(std::to_string(next_));
    return next_ >= total_ ? ReadStatus::end : ReadStatus::more;
  }
  void ack(std::string_view p) override {
    if (acks_) acks_->emplace_back(p);
  }

 private:
  int total_;
  int next_ = 0;
  std::vector<std::string>* acks_;
};

// Holds every batch until the test completes it, in any order.
class ManualDestination final : public Destination {
 public:
  Status open(const ConnectorContext&) override { return ok_status(); }
  size_t max_in_flight() const noexcept override { return 8; }
  void write(Batch& b, WriteDone done) override {
    std::lock_guard l(mu);
    pending.push_back({b.position(), std::move(done)});
    cv.notify_all();
  }
  void wait_for(size_t n) {
    std::unique_lock l(mu);
    ASSERT_TRUE(cv.wait_for(l, 10s, [&] { return pending.size() >= n; }));
  }
  void complete(size_t i, Status st = ok_status()) {
    WriteDone d;
    {
      std::lock_guard l(mu);
      d = std::move(pending[i].done);
    }
    d(std::move(st));
  }
  struct Pending {
    std::string position;
    WriteDone done;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Pending> pending;
};

class RecordingDestination final : public Destination {
 public:
  explicit RecordingDestination(std::chrono::milliseconds delay = 0ms) : delay_(delay) {}
  Status open(const ConnectorContext&) override { return ok_status(); }
  void write(Batch& b, WriteDone done) override {
    if (delay_.count()) std::this_thread::sleep_for(delay_);
    sizes.push_back(b.size());
    done(ok_status());
  }
  std::vector<size_t> sizes;

 private:
  std::chrono::milliseconds delay_;
};

PipelineOptions options(size_t max_records) {
  PipelineOptions o;
  o.id = "t";
  o.source_connector = "test";
  o.destination_connector = "test";
  o.max_records = max_records;
  o.checkpoint_interval = 10ms;
  return o;
}

TEST(Pipeline, CheckpointNeverPassesAGapWhenBatchesCompleteOutOfOrder) {
  MemoryCheckpoints cps;
  std::vector<std::string> acks;
  auto dest = std::make_unique<ManualDestination>();
  ManualDestination* d = dest.get();
  Pipeline p(options(1), std::make_unique<CountingSource>(4, &acks), {}, std::move(dest), &cps);
  Status result;
  std::thread t([&] { result = p.run(); });
  d->wait_for(4);
  d->complete(2);
  d->complete(1);
  std::this_thread::sleep_for(150ms);
  EXPECT_TRUE(cps.saves().empty()) << "checkpoint advanced past the unfinished first batch";
  d->complete(0);  // batches 1..3 now contiguous
  for (int i = 0; i < 200 && cps.saves().empty(); ++i) std::this_thread::sleep_for(5ms);
  ASSERT_FALSE(cps.saves().empty());
  EXPECT_EQ(cps.saves().back(), "3");
  d->complete(3);
  t.join();
  ASSERT_TRUE(result.ok()) << result.error().message();
  EXPECT_EQ(cps.saved["t"], "4");
  for (const auto& s : cps.saves()) EXPECT_TRUE(s == "3" || s == "4") << s;
  ASSERT_FALSE(acks.empty());
  EXPECT_EQ(acks.back(), "4");
}

TEST(Pipeline, FailedBatchFreezesTheCheckpointBelowIt) {
  MemoryCheckpoints cps;
  auto dest = std::make_unique<ManualDestination>();
  ManualDestination* d = dest.get();
  Pipeline p(options(1), std::make_unique<CountingSource>(3), {}, std::move(dest), &cps);
  Status result;
  std::thread t([&] { result = p.run(); });
  d->wait_for(3);
  d->complete(0);
  d->complete(1, Error(Errc::data, "rejected"));
  d->complete(2);
  t.join();
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.error().message().find("rejected"), std::string::npos);
  EXPECT_EQ(cps.saved["t"], "1");
  EXPECT_EQ(p.state(), PipelineState::failed);
}

TEST(Pipeline, BatchesRespectMaxRecordsAndResumeFromCheckpoint) {
  MemoryCheckpoints cps;
  auto dest = std::make_unique<RecordingDestination>();
  RecordingDestination* d = dest.get();
  {
    Pipeline p(options(10000), std::make_unique<CountingSource>(25000), {}, std::move(dest), &cps);
    ASSERT_TRUE(p.run().ok());
    EXPECT_EQ(d->sizes, (std::vector<size_t>{10000, 10000, 5000}));
    EXPECT_EQ(p.metrics().records_written.load(), 25000u);
  }
  EXPECT_EQ(cps.saved["t"], "25000");
  // A second run with the same checkpoint store resumes at the end: nothing to do.
  auto dest2 = std::make_unique<RecordingDestination>();
  RecordingDestination* d2 = dest2.get();
  Pipeline p2(options(10000), std::make_unique<CountingSource>(25000), {}, std::move(dest2), &cps);
  ASSERT_TRUE(p2.run().ok());
  size_t total = 0;
  for (size_t s : d2->sizes) total += s;
  EXPECT_EQ(total, 0u);
}

Result<std::unique_ptr<Source>> generator(std::map<std::string, std::string> text) {
  const ConnectorSpec* spec = Registry::builtin().connector("generator");
  Settings s;
  if (auto err = settings_from_text(spec->source_settings, text, &s))
    return Error(Errc::config, *err);
  return spec->make_source(s);
}

TEST(Pipeline, SlowDestinationBoundsRecordsInFlight) {
  MemoryCheckpoints cps;
  auto src = generator({});  // unlimited, as fast as possible
  ASSERT_TRUE(src.ok());
  auto dest = std::make_unique<RecordingDestination>(20ms);
  Pipeline p(options(100), std::move(src.value()), {}, std::move(dest), &cps);
  Status result;
  std::thread t([&] { result = p.run(); });
  uint64_t max_gap = 0;
  for (int i = 0; i < 30; ++i) {
    std::this_thread::sleep_for(10ms);
    const uint64_t read = p.metrics().records_read.load(),
                   written = p.metrics().records_written.load();
    max_gap = std::max(max_gap, read - std::min(read, written));
  }
  p.request_stop();
  t.join();
  ASSERT_TRUE(result.ok());
  // At most max_in_flight (1 + 2) batches of 100 are read ahead of the destination.
  EXPECT_LE(max_gap, 300u);
  // Graceful stop drains: everything read was written and checkpointed.
  EXPECT_EQ(p.metrics().records_read.load(), p.metrics().records_written.load());
  EXPECT_EQ(cps.saved["t"], std::to_string(p.metrics().records_written.load()));
}

TEST(Pipeline, LingerClosesBatchesOfASlowSource) {
  MemoryCheckpoints cps;
  auto src = generator({{"count", "60"}, {"rate", "300"}});
  ASSERT_TRUE(src.ok());
  auto dest = std::make_unique<RecordingDestination>();
  RecordingDestination* d = dest.get();
  PipelineOptions o = options(10000);
  o.linger = 50ms;
  Pipeline p(o, std::move(src.value()), {}, std::move(dest), &cps);
  ASSERT_TRUE(p.run().ok());
  size_t total = 0;
  for (size_t s : d->sizes) total += s;
  EXPECT_EQ(total, 60u);
  // 60 records at 300/s take ~200 ms: with 50 ms linger they cannot all land in one batch, and
  // batching means far fewer batches than records.
  EXPECT_GT(d->sizes.size(), 1u);
  EXPECT_LT(d->sizes.size(), 30u);
}

// A transactional destination: a batch containing a record with a negative id fails as a whole
// with a data error (like a constraint violation rolling back the batch's transaction).
class RejectingDestination final : public Destination {
 public:
  Status open(const ConnectorContext&) override { return ok_status(); }
  void write(Batch& b, WriteDone done) override {
    for (const Record& r : b.records())
      if (r.key.find("id")->as_int64() < 0) {
        ++failed_writes;
        done(Error(Errc::data, "id " + std::to_string(r.key.find("id")->as_int64()) + " rejected"));
        return;
      }
    for (const Record& r : b.records()) ids.push_back(r.key.find("id")->as_int64());
    done(ok_status());
  }
  std::vector<int64_t> ids;
  int failed_writes = 0;
};

class CollectingDestination final : public Destination {
 public:
  Status open(const ConnectorContext&) override { return ok_status(); }
  void write(Batch& b, WriteDone done) override {
    for (const Record& r : b.records()) {
      ids.push_back(r.key.find("id")->as_int64());
      errors.emplace_back(r.meta("sluice.error"));
    }
    done(ok_status());
  }
  std::vector<int64_t> ids;
  std::vector<std::string> errors;
};

// Emits ids 0..n-1 with every id in `bad` negated.
class IdSource final : public Source {
 public:
  IdSource(int n, std::set<int> bad) : n_(n), bad_(std::move(bad)) {}
  Status open(const ConnectorContext&, const std::optional<std::string>&) override {
    return ok_status();
  }
  Result<ReadStatus> read(Batch& b, const ReadRequest& req, std::stop_token) override {
    while (next_ < n_ && b.size() < req.max_records) {
      Record& r = b.add();
      r.key = b.object(1).add("id", Value::int64(bad_.count(next_) ? -next_ : next_)).build();
      ++next_;
    }
    b.set_position(std::to_string(next_));
    return next_ >= n_ ? ReadStatus::end : ReadStatus::more;
  }
  void ack(std::string_view) override {}

 private:
  int n_;
  std::set<int> bad_;
  int next_ = 0;
};

TEST(Pipeline, RejectedRecordsGoToTheDeadLetterQueueAndTheRestLandsInOrder) {
  MemoryCheckpoints cps;
  auto dest = std::make_unique<RejectingDestination>();
  auto dlq = std::make_unique<CollectingDestination>();
  RejectingDestination* d = dest.get();
  CollectingDestination* q = dlq.get();
  PipelineOptions o = options(100);
  o.on_error = PipelineOptions::OnError::dlq;
  o.dlq_connector = "test";
  Pipeline p(o, std::make_unique<IdSource>(250, std::set<int>{3, 150, 151, 249}), {},
             std::move(dest), &cps, std::move(dlq));
  Status st = p.run();
  ASSERT_TRUE(st.ok()) << st.error().message();
  std::vector<int64_t> expected;
  for (int i = 0; i < 250; ++i)
    if (i != 3 && i != 150 && i != 151 && i != 249) expected.push_back(i);
  EXPECT_EQ(d->ids, expected);
  EXPECT_EQ(q->ids, (std::vector<int64_t>{-3, -150, -151, -249}));
  EXPECT_EQ(q->errors[0], "id -3 rejected");
  EXPECT_EQ(p.metrics().dlq_records.load(), 4u);
  EXPECT_EQ(p.metrics().records_written.load(), 246u);
  EXPECT_EQ(cps.saved["t"], "250");
}

TEST(Pipeline, DeadLetteredRecordsAreNotInFlight) {
  MemoryCheckpoints cps;
  PipelineOptions o = options(100);
  o.on_error = PipelineOptions::OnError::dlq;
  o.dlq_connector = "test";
  Pipeline p(o, std::make_unique<IdSource>(250, std::set<int>{3, 150, 151, 249}), {},
             std::make_unique<RejectingDestination>(), &cps,
             std::make_unique<CollectingDestination>());
  Status st = p.run();
  ASSERT_TRUE(st.ok()) << st.error().message();
  EXPECT_EQ(p.metrics().dlq_records.load(), 4u);
  // Settled: 246 written, 4 in the dead-letter queue; none waits any more.
  EXPECT_EQ(p.in_flight_records(), 0u);
}

// Five records, then nothing (idle reads); with `block_reads`, a read waits until released.
class GatedSource final : public Source {
 public:
  Status open(const ConnectorContext&, const std::optional<std::string>&) override {
    return ok_status();
  }
  Result<ReadStatus> read(Batch& b, const ReadRequest& req, std::stop_token stop) override {
    if (!sent_) {
      for (int i = 0; i < 5; ++i) {
        Record& r = b.add();
        r.op = Operation::create;
        r.key = b.object(1).add("id", Value::int64(i)).build();
      }
      b.set_position("5");
      sent_ = true;
      return ReadStatus::idle;
    }
    std::unique_lock l(mu);
    cv.wait_for(l, stop, req.poll, [&] { return false; });
    cv.wait(l, stop, [&] { return !block_reads; });
    return ReadStatus::idle;
  }
  void ack(std::string_view) override {}
  void set_blocking(bool on) {
    {
      std::lock_guard l(mu);
      block_reads = on;
    }
    cv.notify_all();
  }
  std::mutex mu;
  std::condition_variable_any cv;
  bool block_reads = false;

 private:
  bool sent_ = false;
};

// Blocks every write until opened (a locked table, a hung server).
class GatedDestination final : public Destination {
 public:
  Status open(const ConnectorContext&) override { return ok_status(); }
  void write(Batch& b, WriteDone done) override {
    std::unique_lock l(mu);
    cv.wait(l, [&] { return open_; });
    written += b.size();
    done(ok_status());
  }
  void open_gate() {
    {
      std::lock_guard l(mu);
      open_ = true;
    }
    cv.notify_all();
  }
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<size_t> written{0};

 private:
  bool open_ = false;
};

bool eventually(const std::function<bool()>& f, std::chrono::milliseconds within = 10s) {
  const auto until = std::chrono::steady_clock::now() + within;
  while (!f()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

TEST(Pipeline, BlockedDestinationIsReportedAsStalledOnceAndRecovers) {
  MemoryCheckpoints cps;
  auto dest = std::make_unique<GatedDestination>();
  GatedDestination* d = dest.get();
  PipelineOptions o = options(100);
  o.poll = 20ms;
  o.stall_timeout = 200ms;
  MetricsRegistry registry;
  Pipeline p(o, std::make_unique<GatedSource>(), {}, std::move(dest), &cps);
  p.register_metrics(registry);
  std::thread t([&] { (void)p.run(); });
  const MetricLabels destination{{"pipeline", "t"}, {"side", "destination"}};
  ASSERT_TRUE(eventually([&] { return !p.stalls().empty(); }));
  std::vector<Stall> stalls = p.stalls();
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_EQ(stalls[0].side, "destination");
  EXPECT_EQ(stalls[0].pending, "1 batch (5 records) not yet durable");
  EXPECT_GE(stalls[0].seconds, 0.2);
  EXPECT_EQ(registry.sum("sluice_pipeline_stalled", destination), 1.0);
  // Still stalled a while later: one stall, counted once.
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(p.stalls().size(), 1u);
  EXPECT_EQ(registry.sum("sluice_pipeline_stalls_total", destination), 1.0);
  EXPECT_EQ(registry.sum("sluice_pipeline_stalls_total", {{"side", "source"}}), 0.0);

  d->open_gate();
  EXPECT_TRUE(eventually([&] { return p.stalls().empty(); }));
  EXPECT_EQ(d->written.load(), 5u);
  EXPECT_EQ(registry.sum("sluice_pipeline_stalled", destination), 0.0);
  EXPECT_EQ(registry.sum("sluice_pipeline_stalls_total", destination), 1.0);
  p.request_stop();
  t.join();
}

TEST(Pipeline, ReadThatDoesNotReturnIsReportedAsASourceStall) {
  MemoryCheckpoints cps;
  auto src = std::make_unique<GatedSource>();
  GatedSource* s = src.get();
  PipelineOptions o = options(100);
  o.poll = 20ms;
  o.stall_timeout = 200ms;
  MetricsRegistry registry;
  Pipeline p(o, std::move(src), {}, std::make_unique<RecordingDestination>(), &cps);
  p.register_metrics(registry);
  std::thread t([&] { (void)p.run(); });
  // Idle reads that return within poll are no stall, however long nothing arrives.
  std::this_thread::sleep_for(400ms);
  EXPECT_TRUE(p.stalls().empty());
  s->set_blocking(true);
  ASSERT_TRUE(eventually([&] { return !p.stalls().empty(); }));
  EXPECT_EQ(p.stalls()[0].side, "source");
  EXPECT_EQ(registry.sum("sluice_pipeline_stalls_total", {{"side", "source"}}), 1.0);
  s->set_blocking(false);
  EXPECT_TRUE(eventually([&] { return p.stalls().empty(); }));
  p.request_stop();
  t.join();
}

TEST(Pipeline, StallsAreNotReportedWhenTheTimeoutIsZero) {
  MemoryCheckpoints cps;
  auto dest = std::make_unique<GatedDestination>();
  GatedDestination* d = dest.get();
  PipelineOptions o = options(100);
  o.poll = 20ms;
  o.stall_timeout = 0ms;
  Pipeline p(o, std::make_unique<GatedSource>(), {}, std::move(dest), &cps);
  std::thread t([&] { (void)p.run(); });
  std::this_thread::sleep_for(300ms);
  EXPECT_TRUE(p.stalls().empty());
  d->open_gate();
  p.request_stop();
  t.join();
}

TEST(Pipeline, RejectedRecordStopsThePipelineWithTheCheckpointBeforeItsBatch) {
  MemoryCheckpoints cps;
  auto dest = std::make_unique<RejectingDestination>();
  PipelineOptions o = options(100);
  Pipeline p(o, std::make_unique<IdSource>(250, std::set<int>{150}), {}, std::move(dest), &cps);
  Status st = p.run();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("id -150 rejected"), std::string::npos);
  EXPECT_EQ(cps.saved["t"], "100");
}

// Stores positions like `checkpoint_in_destination: true`: reports `stored` for pipeline "t".
class PositionStoringDestination final : public Destination {
 public:
  explicit PositionStoringDestination(std::optional<std::string> stored)
      : stored_(std::move(stored)) {}
  Status open(const ConnectorContext&) override {
    opened = true;
    return ok_status();
  }
  bool stores_positions() const noexcept override { return true; }
  Result<std::optional<std::string>> stored_position(std::string_view id) override {
    EXPECT_TRUE(opened) << "stored_position() before open()";
    if (id != "t") return std::optional<std::string>();
    return stored_;
  }
  void write(Batch& b, WriteDone done) override {
    first_keys.push_back(b.records().front().key.find("id")->as_int64());
    stored_ = std::string(b.position());
    done(ok_status());
  }
  bool opened = false;
  std::vector<int64_t> first_keys;

 private:
  std::optional<std::string> stored_;
};

TEST(Pipeline, PositionStoredInTheDestinationWinsOverAnOlderCheckpoint) {
  MemoryCheckpoints cps;
  ASSERT_TRUE(cps.save("t", "2").ok());  // older than what the destination committed
  auto dest = std::make_unique<PositionStoringDestination>("7");
  PositionStoringDestination* d = dest.get();
  Pipeline p(options(100), std::make_unique<CountingSource>(10), {}, std::move(dest), &cps);
  ASSERT_TRUE(p.run().ok());
  ASSERT_EQ(d->first_keys.size(), 1u);
  EXPECT_EQ(d->first_keys[0], 7);  // resumed at 7, not 2: records 2..6 are not applied again
  auto saves = cps.saves();
  ASSERT_GE(saves.size(), 3u);
  EXPECT_EQ(saves[1], "7");  // the store was brought in line before the run
  EXPECT_EQ(cps.saved["t"], "10");
}

TEST(Pipeline, DestinationWithoutAStoredPositionLeavesTheCheckpointInCharge) {
  MemoryCheckpoints cps;
  ASSERT_TRUE(cps.save("t", "4").ok());
  auto dest = std::make_unique<PositionStoringDestination>(std::nullopt);
  PositionStoringDestination* d = dest.get();
  Pipeline p(options(100), std::make_unique<CountingSource>(10), {}, std::move(dest), &cps);
  ASSERT_TRUE(p.run().ok());
  ASSERT_EQ(d->first_keys.size(), 1u);
  EXPECT_EQ(d->first_keys[0], 4);
  EXPECT_EQ(cps.saved["t"], "10");
}

// ---- The runtime contract (include/sluice/connector.h) for synchronous and asynchronous
// destinations alike.

// Runs completions on a thread of its own, after write() returned (like Kafka's delivery reports).
class CompletionThread {
 public:
  CompletionThread() : thread_([this] { loop(); }) {}
  ~CompletionThread() {
    {
      std::lock_guard l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void post(std::function<void()> fn) {
    {
      std::lock_guard l(mu_);
      work_.push_back(std::move(fn));
    }
    cv_.notify_all();
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock l(mu_);
        cv_.wait(l, [&] { return stop_ || !work_.empty(); });
        if (work_.empty()) return;
        fn = std::move(work_.front());
        work_.erase(work_.begin());
      }
      std::this_thread::sleep_for(1ms);  // well after write() returned
      fn();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::function<void()>> work_;
  bool stop_ = false;
  std::thread thread_;
};

// A keyed, transactional destination: a batch with a negative id fails as a whole (Errc::data);
// the first `transient_failures` writes fail with a retriable error. With `async`, every write
// completes on another thread. With `stores`, it stores positions: the position of every batch
// it accepts (also an empty one) is committed with it.
class ContractDestination final : public Destination {
 public:
  ContractDestination(bool async, bool stores, int transient_failures = 0)
      : async_(async), stores_(stores), transient_(transient_failures) {}
  Status open(const ConnectorContext&) override { return ok_status(); }
  size_t max_in_flight() const noexcept override { return async_ ? 3 : 1; }
  bool stores_positions() const noexcept override { return stores_; }
  Result<std::optional<std::string>> stored_position(std::string_view) override {
    std::lock_guard l(mu);
    if (committed.empty()) return std::optional<std::string>();
    return std::optional<std::string>(committed.back());
  }
  void write(Batch& b, WriteDone done) override {
    Status st = apply(b);
    if (!async_) {
      done(std::move(st));
      return;
    }
    completions_.post(
        [done = std::move(done), st = std::move(st)]() mutable { done(std::move(st)); });
  }
  std::vector<int64_t> ids_copy() {
    std::lock_guard l(mu);
    return ids;
  }

  std::mutex mu;
  std::vector<int64_t> ids;            // records accepted, in order
  std::vector<std::string> committed;  // positions committed, in order
  std::vector<size_t> write_sizes;     // every write, accepted or not
  int retriable_failures = 0;

 private:
  Status apply(const Batch& b) {
    std::lock_guard l(mu);
    write_sizes.push_back(b.size());
    if (transient_ > 0) {
      --transient_;
      ++retriable_failures;
      return Error(Errc::connection, "connection lost", /*retriable=*/true);
    }
    for (const Record& r : b.records())
      if (r.key.find("id")->as_int64() < 0)
        return Error(Errc::data,
                     "id " + std::to_string(r.key.find("id")->as_int64()) + " rejected");
    for (const Record& r : b.records()) ids.push_back(r.key.find("id")->as_int64());
    if (stores_ && b.has_position()) committed.push_back(b.position());
    return ok_status();
  }
  bool async_;
  bool stores_;
  int transient_;
  CompletionThread completions_;  // last: joined before the rest is destroyed
};

// Drops every record whose id is at least `from` (a `filter` processor).
class DropFrom final : public Processor {
 public:
  explicit DropFrom(int64_t from) : from_(from) {}
  Status process(Batch& b) override {
    auto& rs = b.records();
    rs.erase(std::remove_if(rs.begin(), rs.end(),
                            [&](const Record& r) { return r.key.find("id")->as_int64() >= from_; }),
             rs.end());
    return ok_status();
  }

 private:
  int64_t from_;
};

class RuntimeContract : public ::testing::TestWithParam<bool> {  // param: asynchronous completion
 protected:
  bool async() const { return GetParam(); }
};

INSTANTIATE_TEST_SUITE_P(SyncAndAsync, RuntimeContract, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Async" : "Sync"; });

TEST_P(RuntimeContract, RetriableErrorsAreRetried) {
  MemoryCheckpoints cps;
  auto dest = std::make_unique<ContractDestination>(async(), false, /*transient_failures=*/2);
  ContractDestination* d = dest.get();
  Pipeline p(options(10), std::make_unique<IdSource>(50, std::set<int>{}), {}, std::move(dest),
             &cps);
  Status st = p.run();
  ASSERT_TRUE(st.ok()) << st.error().message();
  std::vector<int64_t> expected;
  for (int i = 0; i < 50; ++i) expected.push_back(i);
  std::vector<int64_t> ids = d->ids_copy();
  // Asynchronous with several batches in flight, a retried batch may land after later ones.
  if (async()) std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, expected);
  EXPECT_EQ(d->retriable_failures, 2);
  EXPECT_EQ(p.metrics().write_retries.load(), 2u);
  EXPECT_EQ(p.metrics().records_written.load(), 50u);
  EXPECT_EQ(cps.saved["t"], "50");
}

TEST_P(RuntimeContract, RejectedRecordsGoToTheDeadLetterQueue) {
  MemoryCheckpoints cps;
  auto dest = std::make_unique<ContractDestination>(async(), false);
  auto dlq = std::make_unique<CollectingDestination>();
  ContractDestination* d = dest.get();
  CollectingDestination* q = dlq.get();
  PipelineOptions o = options(100);
  o.on_error = PipelineOptions::OnError::dlq;
  o.dlq_connector = "test";
  Pipeline p(o, std::make_unique<IdSource>(250, std::set<int>{3, 150, 151, 249}), {},
             std::move(dest), &cps, std::move(dlq));
  Status st = p.run();
  ASSERT_TRUE(st.ok()) << st.error().message();
  std::vector<int64_t> expected;
  for (int i = 0; i < 250; ++i)
    if (i != 3 && i != 150 && i != 151 && i != 249) expected.push_back(i);
  EXPECT_EQ(d->ids_copy(), expected);
  EXPECT_EQ(q->ids, (std::vector<int64_t>{-3, -150, -151, -249}));
  EXPECT_EQ(p.metrics().dlq_records.load(), 4u);
  EXPECT_EQ(p.metrics().records_written.load(), 246u);
  EXPECT_EQ(cps.saved["t"], "250");
}

TEST_P(RuntimeContract, RejectedRecordWithoutADeadLetterQueueStopsBeforeItsBatch) {
  MemoryCheckpoints cps;
  auto dest = std::make_unique<ContractDestination>(async(), false);
  Pipeline p(options(100), std::make_unique<IdSource>(250, std::set<int>{150}), {}, std::move(dest),
             &cps);
  Status st = p.run();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("id -150 rejected"), std::string::npos);
  EXPECT_EQ(cps.saved["t"], "100");
}

// The parent's position is committed once, by the last write of the isolation: also when the
// batch's last record is the rejected one (then by an empty write after it).
TEST_P(RuntimeContract, DeadLetterIsolationCommitsTheParentPositionOnceAtTheEnd) {
  for (const std::set<int>& bad :
       {std::set<int>{3}, std::set<int>{9}, std::set<int>{1, 9}, std::set<int>{4, 5}}) {
    SCOPED_TRACE(::testing::PrintToString(bad));
    MemoryCheckpoints cps;
    auto dest = std::make_unique<ContractDestination>(async(), /*stores=*/true);
    ContractDestination* d = dest.get();
    PipelineOptions o = options(10);
    o.on_error = PipelineOptions::OnError::dlq;
    o.dlq_connector = "test";
    Pipeline p(o, std::make_unique<IdSource>(10, bad), {}, std::move(dest), &cps,
               std::make_unique<CollectingDestination>());
    Status st = p.run();
    ASSERT_TRUE(st.ok()) << st.error().message();
    EXPECT_EQ(d->committed, (std::vector<std::string>{"10"}));
    EXPECT_EQ(d->ids_copy().size(), 10 - bad.size());
    EXPECT_EQ(cps.saved["t"], "10");
  }
}

// Batches 21..30 are all filtered out: a destination that stores positions still commits 30,
// else a restart would resume from its stale 20.
TEST_P(RuntimeContract, BatchEmptiedByProcessorsAdvancesADestinationThatStoresPositions) {
  MemoryCheckpoints cps;
  auto dest = std::make_unique<ContractDestination>(async(), /*stores=*/true);
  ContractDestination* d = dest.get();
  std::vector<std::unique_ptr<Processor>> procs;
  procs.push_back(std::make_unique<DropFrom>(20));
  Pipeline p(options(10), std::make_unique<CountingSource>(30), std::move(procs), std::move(dest),
             &cps);
  Status st = p.run();
  ASSERT_TRUE(st.ok()) << st.error().message();
  EXPECT_EQ(d->committed, (std::vector<std::string>{"10", "20", "30"}));
  EXPECT_EQ(d->ids_copy().size(), 20u);
  EXPECT_EQ(cps.saved["t"], "30");
  EXPECT_EQ(p.metrics().records_filtered.load(), 10u);
}

TEST_P(RuntimeContract, BatchEmptiedByProcessorsIsNotWrittenToOtherDestinations) {
  MemoryCheckpoints cps;
  auto dest = std::make_unique<ContractDestination>(async(), /*stores=*/false);
  ContractDestination* d = dest.get();
  std::vector<std::unique_ptr<Processor>> procs;
  procs.push_back(std::make_unique<DropFrom>(20));
  Pipeline p(options(10), std::make_unique<CountingSource>(30), std::move(procs), std::move(dest),
             &cps);
  ASSERT_TRUE(p.run().ok());
  EXPECT_EQ(d->write_sizes, (std::vector<size_t>{10, 10}));
  EXPECT_EQ(cps.saved["t"], "30");
}

// Emits `n` rows and, after each third row, a schema change of the same table.
class SchemaChangingSource final : public Source {
 public:
  explicit SchemaChangingSource(int n) : n_(n) {}
  Status open(const ConnectorContext&, const std::optional<std::string>&) override {
    return ok_status();
  }
  Result<ReadStatus> read(Batch& b, const ReadRequest& req, std::stop_token) override {
    while (next_ < n_ && b.size() < req.max_records) {
      Record& r = b.add();
      r.op = Operation::create;
      r.key = b.object(1).add("id", Value::int64(next_)).build();
      if (++next_ % 3 == 0) {
        Record& c = b.add();
        SchemaChange change;
        change.kind = SchemaChangeKind::rename_column;
        change.column = "a";
        change.to = "b";
        set_schema_change(b, c, change);
      }
    }
    b.set_position(std::to_string(next_));
    return next_ >= n_ ? ReadStatus::end : ReadStatus::more;
  }
  void ack(std::string_view) override {}

 private:
  int n_;
  int next_ = 0;
};

// Takes what it is given; accepts control records when told to.
class OpsDestination final : public Destination {
 public:
  explicit OpsDestination(bool control) : control_(control) {}
  Status open(const ConnectorContext&) override { return ok_status(); }
  bool accepts_control_records() const noexcept override { return control_; }
  void write(Batch& b, WriteDone done) override {
    for (const Record& r : b.records()) ops.push_back(r.op);
    done(ok_status());
  }
  std::vector<Operation> ops;

 private:
  bool control_;
};

TEST(Pipeline, ControlRecordsReachOnlyDestinationsThatAcceptThemAndAreNotCounted) {
  for (bool accepts : {false, true}) {
    MemoryCheckpoints cps;
    auto dest = std::make_unique<OpsDestination>(accepts);
    OpsDestination* d = dest.get();
    Pipeline p(options(4), std::make_unique<SchemaChangingSource>(9), {}, std::move(dest), &cps);
    Status st = p.run();
    ASSERT_TRUE(st.ok()) << st.error().message();
    std::vector<Operation> expected;
    for (int i = 1; i <= 9; ++i) {
      expected.push_back(Operation::create);
      if (accepts && i % 3 == 0) expected.push_back(Operation::schema);
    }
    EXPECT_EQ(d->ops, expected) << "accepts=" << accepts;
    EXPECT_EQ(p.metrics().records_read.load(), 9u);
    EXPECT_EQ(p.metrics().records_written.load(), 9u);
    EXPECT_EQ(p.metrics().records_filtered.load(), 0u);
    EXPECT_EQ(cps.saved["t"], "9");
  }
}

TEST(SchemaChange, RoundTripsThroughARecord) {
  Batch b;
  Record& r = b.add();
  SchemaChange add;
  add.kind = SchemaChangeKind::add_column;
  add.column = "flag";
  add.type = "boolean";
  add.default_value = Value::boolean(true);
  set_schema_change(b, r, add);
  EXPECT_TRUE(is_control(r.op));
  EXPECT_EQ(operation_name(r.op), "schema");
  auto c = schema_change_of(r);
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c.value().kind, SchemaChangeKind::add_column);
  EXPECT_EQ(c.value().column, "flag");
  EXPECT_EQ(c.value().type, "boolean");
  EXPECT_TRUE(c.value().default_value.as_bool());

  Record bad;
  bad.op = Operation::schema;
  bad.after = b.object(1).add("change", Value::string("explode_column")).build();
  auto e = schema_change_of(bad);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message().find("unknown change 'explode_column'"), std::string::npos);
}

TEST(OrderedAcker, AdvancesOnlyOverContiguousPrefix) {
  OrderedAcker a;
  a.begin(1, "a");
  a.begin(2, "b");
  a.begin(3, "c");
  EXPECT_FALSE(a.complete(3, ok_status()));
  EXPECT_FALSE(a.take_advanced());
  EXPECT_TRUE(a.complete(1, ok_status()));
  EXPECT_EQ(a.take_advanced().value_or(""), "a");
  EXPECT_TRUE(a.complete(2, ok_status()));
  EXPECT_EQ(a.take_advanced().value_or(""), "c");
  EXPECT_EQ(a.pending(), 0u);
}

TEST(OrderedAcker, FailureStopsAdvancing) {
  OrderedAcker a;
  a.begin(1, "a");
  a.begin(2, "b");
  EXPECT_FALSE(a.complete(1, Error(Errc::data, "x")));
  EXPECT_FALSE(a.complete(2, ok_status()));
  EXPECT_FALSE(a.take_advanced());
  ASSERT_TRUE(a.failure());
}

}  // namespace
}  // namespace sluice
