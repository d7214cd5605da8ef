// The engine with scripted connectors: start/stop/list/status, idle exit, probes registered in
// its metrics registry and gone with the engine.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>

#include "engine/progress.h"
#include "runtime/memory_checkpoints_test.h"

namespace sluice {
namespace {

using namespace std::chrono_literals;

using test::MemoryCheckpoints;

// Emits `total` records (position = count so far), then reports idle forever (total < 0: never
// ends, never idle before stop).
class TickingSource final : public Source {
 public:
  explicit TickingSource(int total, bool finite = false) : total_(total), finite_(finite) {}
  Status open(const ConnectorContext& ctx, const std::optional<std::string>&) override {
    if (ctx.stats) ctx.stats->lag_ms = 1500;
    if (ctx.metrics) {
      probe_ = ctx.metrics->add({MetricDef::counter("sluice_test_source_reads_total", "Reads.",
                                                    ctx.metric_labels(), reads_)});
    }
    return ok_status();
  }
  Result<ReadStatus> read(Batch& b, const ReadRequest& req, std::stop_token stop) override {
    reads_.fetch_add(1);
    while (next_ < total_ && b.size() < req.max_records) {
      Record& r = b.add();
      r.key = b.object(1).add("id", Value::int64(next_)).build();
      ++next_;
    }
    if (next_ >= total_ && finite_) {
      b.set_position(std::to_string(next_));
      return ReadStatus::end;
    }
    if (b.empty()) {
      std::mutex mu;
      std::condition_variable_any cv;
      std::unique_lock lock(mu);
      cv.wait_for(lock, stop, req.poll, [] { return false; });
      return ReadStatus::idle;
    }
    b.set_position(std::to_string(next_));
    return ReadStatus::more;
  }
  void ack(std::string_view) override {}

 private:
  int total_;
  bool finite_;
  int next_ = 0;
  std::atomic<uint64_t> reads_{0};
  MetricsRegistry::Registration probe_;
};

class NullDestination final : public Destination {
 public:
  Status open(const ConnectorContext&) override { return ok_status(); }
  void write(Batch&, WriteDone done) override { done(ok_status()); }
};

class FailingDestination final : public Destination {
 public:
  Status open(const ConnectorContext&) override { return Error(Errc::connection, "no server"); }
  void write(Batch&, WriteDone done) override { done(ok_status()); }
};

std::unique_ptr<Pipeline> pipeline(const std::string& id, std::unique_ptr<Source> src,
                                   std::unique_ptr<Destination> dst, CheckpointStore* cps) {
  PipelineOptions o;
  o.id = id;
  o.source_connector = "ticking";
  o.destination_connector = "null";
  o.max_records = 10;
  o.poll = 20ms;
  o.checkpoint_interval = 10ms;
  return std::make_unique<Pipeline>(o, std::move(src), std::vector<std::unique_ptr<Processor>>{},
                                    std::move(dst), cps);
}

TEST(Engine, StartsListsAndStopsPipelines) {
  MemoryCheckpoints cps;
  Engine engine;
  ASSERT_TRUE(engine
                  .add(pipeline("a", std::make_unique<TickingSource>(30),
                                std::make_unique<NullDestination>(), &cps))
                  .ok());
  ASSERT_TRUE(engine
                  .add(pipeline("b", std::make_unique<TickingSource>(5, true),
                                std::make_unique<NullDestination>(), &cps))
                  .ok());
  EXPECT_FALSE(engine
                   .add(pipeline("a", std::make_unique<TickingSource>(1),
                                 std::make_unique<NullDestination>(), &cps))
                   .ok());

  auto listed = engine.list();
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].id, "a");
  EXPECT_EQ(listed[1].id, "b");
  EXPECT_FALSE(listed[0].started);
  EXPECT_FALSE(engine.running());

  ASSERT_TRUE(engine.start("a").ok());
  EXPECT_FALSE(engine.start("a").ok()) << "started twice";
  EXPECT_FALSE(engine.start("nope").ok());
  engine.start_all();
  EXPECT_TRUE(engine.running());

  // b ends on its own; a runs until stopped.
  for (int i = 0;
       i < 500 && !(engine.status("b")->ended && engine.status("a")->records_written == 30); ++i)
    std::this_thread::sleep_for(5ms);
  auto b = engine.status("b");
  ASSERT_TRUE(b);
  EXPECT_TRUE(b->ended);
  EXPECT_EQ(b->state, PipelineState::stopped);
  EXPECT_EQ(b->records_written, 5u);
  EXPECT_EQ(b->checkpoint, "5");
  auto a = engine.status("a");
  EXPECT_FALSE(a->ended);
  EXPECT_EQ(a->state, PipelineState::running);
  EXPECT_EQ(a->records_written, 30u);
  EXPECT_FALSE(engine.status("nope"));

  EXPECT_FALSE(engine.stop("nope").ok());
  ASSERT_TRUE(engine.stop("a").ok());
  EXPECT_TRUE(engine.wait());
  EXPECT_FALSE(engine.running());
  EXPECT_EQ(engine.status("a")->state, PipelineState::stopped);
  EXPECT_EQ(cps.saved["a"], "30");
}

TEST(Engine, APausedPipelineIsSupervisedUntilResumedOrStoppedAndRunsAgainFromItsControl) {
  MemoryCheckpoints cps;
  Engine engine;
  PipelineControl control;
  std::atomic<int> rebuilt{0};
  control.rebuild = [&]() -> Result<std::unique_ptr<Pipeline>> {
    ++rebuilt;
    return pipeline("p", std::make_unique<TickingSource>(-1), std::make_unique<NullDestination>(),
                    &cps);
  };
  ASSERT_TRUE(engine
                  .add(pipeline("p", std::make_unique<TickingSource>(-1),
                                std::make_unique<NullDestination>(), &cps),
                       control)
                  .ok());
  ASSERT_TRUE(engine
                  .add(pipeline("fixed", std::make_unique<TickingSource>(-1),
                                std::make_unique<NullDestination>(), &cps))
                  .ok());
  EXPECT_EQ(engine.pause("p").error().code(), Errc::conflict) << "not started yet";
  engine.start_all();
  std::atomic<bool> waited{false};
  std::thread supervisor([&] {
    EXPECT_TRUE(engine.wait());
    waited = true;
  });
  ASSERT_TRUE(engine.pause("p").ok());
  auto s = engine.status("p");
  EXPECT_TRUE(s->paused);
  EXPECT_TRUE(s->ended);
  EXPECT_EQ(engine.pause("p").error().code(), Errc::conflict);
  EXPECT_EQ(engine.pause("nope").error().code(), Errc::not_found);
  // No rebuild given: the other pipeline cannot run again.
  ASSERT_TRUE(engine.pause("fixed").ok());
  EXPECT_EQ(engine.resume("fixed").error().code(), Errc::unsupported);
  std::this_thread::sleep_for(200ms);
  EXPECT_FALSE(waited) << "wait() returned while pipelines were paused";
  ASSERT_TRUE(engine.resume("p").ok());
  EXPECT_EQ(rebuilt, 1);
  EXPECT_EQ(engine.status("p")->runs, 2u);
  EXPECT_FALSE(engine.status("p")->paused);
  EXPECT_EQ(engine.resume("p").error().code(), Errc::conflict);
  ASSERT_TRUE(engine.restart("p").ok());
  EXPECT_EQ(rebuilt, 2);
  EXPECT_EQ(engine.status("p")->runs, 3u);
  ASSERT_TRUE(engine.pause("p").ok());
  // A graceful stop of the run ends the supervision of the paused ones too.
  engine.stop_all();
  supervisor.join();
  EXPECT_TRUE(waited);
  EXPECT_EQ(engine.resume("p").error().code(), Errc::conflict);
}

TEST(Engine, IdleExitStopsOnceEveryRunningPipelineIsIdle) {
  MemoryCheckpoints cps;
  EngineOptions o;
  o.idle_exit = 200ms;
  o.tick = 10ms;
  Engine engine(o);
  ASSERT_TRUE(engine
                  .add(pipeline("a", std::make_unique<TickingSource>(20),
                                std::make_unique<NullDestination>(), &cps))
                  .ok());
  ASSERT_TRUE(engine
                  .add(pipeline("b", std::make_unique<TickingSource>(40),
                                std::make_unique<NullDestination>(), &cps))
                  .ok());
  const auto t0 = std::chrono::steady_clock::now();
  engine.start_all();
  int ticks = 0;
  EXPECT_TRUE(engine.wait([&] { ++ticks; }));
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, 200ms);
  EXPECT_LT(took, 5s);
  EXPECT_GT(ticks, 5);
  for (const PipelineStatus& s : engine.list()) {
    EXPECT_TRUE(s.ended) << s.id;
    EXPECT_EQ(s.state, PipelineState::stopped) << s.id;
  }
  EXPECT_EQ(cps.saved["a"], "20");
  EXPECT_EQ(cps.saved["b"], "40");
}

TEST(Engine, AFailedPipelineIsReportedAndTheOthersKeepRunning) {
  MemoryCheckpoints cps;
  Engine engine;
  ASSERT_TRUE(engine
                  .add(pipeline("bad", std::make_unique<TickingSource>(1),
                                std::make_unique<FailingDestination>(), &cps))
                  .ok());
  ASSERT_TRUE(engine
                  .add(pipeline("good", std::make_unique<TickingSource>(10),
                                std::make_unique<NullDestination>(), &cps))
                  .ok());
  engine.start_all();
  for (int i = 0; i < 500 && !engine.status("bad")->ended; ++i) std::this_thread::sleep_for(5ms);
  auto bad = engine.status("bad");
  ASSERT_TRUE(bad->ended);
  EXPECT_EQ(bad->state, PipelineState::failed);
  ASSERT_TRUE(bad->error);
  EXPECT_NE(bad->error->message().find("no server"), std::string::npos);
  EXPECT_FALSE(engine.status("good")->ended);
  engine.stop_all();
  EXPECT_FALSE(engine.wait()) << "a pipeline failed";
  EXPECT_EQ(engine.status("good")->state, PipelineState::stopped);
}

TEST(Engine, ComponentsPublishTheirProbesInTheRegistry) {
  MemoryCheckpoints cps;
  Engine engine;
  ASSERT_TRUE(engine
                  .add(pipeline("p", std::make_unique<TickingSource>(25, true),
                                std::make_unique<NullDestination>(), &cps))
                  .ok());
  const MetricsRegistry& m = engine.metrics();
  // The pipeline's probe exists as soon as it is added.
  EXPECT_EQ(
      m.values("sluice_records_written_total", {{"pipeline", "p"}, {"connector", "null"}}).size(),
      1u);
  EXPECT_TRUE(m.values("sluice_test_source_reads_total").empty())
      << "the source has not opened yet";
  engine.start_all();
  EXPECT_TRUE(engine.wait());
  EXPECT_EQ(m.sum("sluice_records_written_total"), 25);
  EXPECT_EQ(m.sum("sluice_records_read_total", {{"pipeline", "p"}, {"connector", "ticking"}}), 25);
  EXPECT_EQ(m.sum("sluice_source_lag_seconds", {{"pipeline", "p"}}),
            1.5);  // ConnectorStats, registered by the runtime
  // A probe the source registered itself, with its context's labels.
  EXPECT_GE(m.sum("sluice_test_source_reads_total", {{"pipeline", "p"}, {"connector", "ticking"}}),
            3);
  EXPECT_EQ(m.sum("sluice_pipeline_up", {{"pipeline", "p"}}), 0);

  ProgressLine progress(m);
  const std::string line = progress.render(1.0);
  EXPECT_NE(line.find("25 records written"), std::string::npos) << line;
  EXPECT_NE(line.find("in flight 0"), std::string::npos) << line;
  EXPECT_NE(line.find("lag 1.5s"), std::string::npos) << line;
}

TEST(MetricsRegistry, FamiliesKeepFirstRegistrationOrderAndProbesLeaveWithTheirRegistration) {
  MetricsRegistry r;
  std::atomic<uint64_t> a{1}, b{2};
  auto first = r.add({MetricDef::counter("x_total", "X.", {{"k", "1"}}, a),
                      MetricDef::gauge("y", "Y.", {{"k", "1"}}, [] { return MetricValue(-1.0); })});
  auto second = std::make_unique<MetricsRegistry::Registration>(
      r.add({MetricDef::counter("x_total", "X.", {{"k", "2"}}, b)}));
  std::vector<std::string> seen;
  r.visit([&](const MetricDef& family, const std::vector<const MetricDef*>& members) {
    for (const MetricDef* m : members) seen.push_back(family.name + "/" + m->labels.front().second);
  });
  EXPECT_EQ(seen, (std::vector<std::string>{"x_total/1", "x_total/2", "y/1"}));
  EXPECT_EQ(r.sum("x_total"), 3);
  EXPECT_EQ(r.sum("x_total", {{"k", "2"}}), 2);
  second.reset();
  EXPECT_EQ(r.sum("x_total"), 1);
  MetricsRegistry::Registration moved = std::move(first);
  EXPECT_FALSE(
      first.active());  // NOLINT(bugprone-use-after-move): the moved-from state is the test
  EXPECT_TRUE(moved.active());
  moved.reset();
  EXPECT_TRUE(r.values("y").empty());
}

// Issue 13, item 11: each pipeline's segment is labelled, the snapshot segment goes once the
// source leaves the snapshot phase, and an estimate the snapshot overtakes never shows > 100 %.
TEST(Progress, LabelsPipelinesCapsAtOneHundredPercentAndDropsAFinishedSnapshot) {
  MetricsRegistry m;
  std::atomic<int64_t> done_a{50}, total_a{40}, done_b{10}, total_b{100}, in_snapshot_b{1};
  auto gauge = [](std::string name, MetricLabels labels, std::atomic<int64_t>& v) {
    return MetricDef::gauge(std::move(name), "x", std::move(labels),
                            [&v] { return MetricValue(v.load()); });
  };
  auto reg = m.add({
      MetricDef::gauge("sluice_source_lag_seconds", "x", {{"pipeline", "a"}, {"connector", "pg"}},
                       [] { return MetricValue(0.5); }),
      gauge("sluice_snapshot_rows", {{"pipeline", "a"}, {"connector", "pg"}, {"kind", "done"}},
            done_a),
      gauge("sluice_snapshot_rows", {{"pipeline", "a"}, {"connector", "pg"}, {"kind", "total"}},
            total_a),
      MetricDef::gauge("sluice_source_lag_seconds", "x", {{"pipeline", "b"}, {"connector", "my"}},
                       [] { return MetricValue(-1.0); }),
      gauge("sluice_snapshot_rows", {{"pipeline", "b"}, {"connector", "my"}, {"kind", "done"}},
            done_b),
      gauge("sluice_snapshot_rows", {{"pipeline", "b"}, {"connector", "my"}, {"kind", "total"}},
            total_b),
      gauge("sluice_source_phase", {{"pipeline", "b"}, {"connector", "my"}, {"phase", "snapshot"}},
            in_snapshot_b),
  });
  ProgressLine progress(m);
  std::string line = progress.render(10.0);
  EXPECT_NE(line.find("| a: 0 written lag 0.5s snapshot 50 rows (~100%)"), std::string::npos)
      << line;
  EXPECT_NE(line.find("| b: 0 written snapshot 10/100 (10%) ETA"), std::string::npos) << line;
  EXPECT_EQ(line.find("125%"), std::string::npos) << line;
  in_snapshot_b = 0;
  line = progress.render(11.0);
  EXPECT_NE(line.find("| b: 0 written"), std::string::npos) << line;
  EXPECT_EQ(line.find("snapshot 10/100"), std::string::npos) << line;
  EXPECT_NE(line.find("| a:"), std::string::npos) << line;
}

TEST(Progress, APipelineWithASpoolShowsItsDepth) {
  MetricsRegistry m;
  std::atomic<int64_t> records{35000}, oldest{12};
  const MetricLabels spool{{"pipeline", "a"}, {"type", "disk"}};
  auto reg = m.add({
      MetricDef::gauge("sluice_source_lag_seconds", "x", {{"pipeline", "a"}, {"connector", "pg"}},
                       [] { return MetricValue(-1.0); }),
      MetricDef::gauge("sluice_spool_records", "x", spool,
                       [&] { return MetricValue(records.load()); }),
      MetricDef::gauge("sluice_spool_bytes", "x", spool,
                       [] { return MetricValue(uint64_t(4.1 * 1024 * 1024)); }),
      MetricDef::gauge("sluice_spool_oldest_seconds", "x", spool,
                       [&] { return MetricValue(double(oldest.load())); }),
      MetricDef::gauge("sluice_source_lag_seconds", "x", {{"pipeline", "b"}, {"connector", "pg"}},
                       [] { return MetricValue(-1.0); }),
  });
  ProgressLine progress(m);
  std::string line = progress.render(1.0);
  EXPECT_NE(line.find("| a: 0 written spool 35,000 rec 4.1 MiB oldest 12s"), std::string::npos)
      << line;
  EXPECT_EQ(line.find("| b: 0 written spool"), std::string::npos) << line;  // b has none
  records = 0;
  oldest = 0;
  line = progress.render(2.0);
  EXPECT_NE(line.find("| a: 0 written spool 0 rec"), std::string::npos) << line;
  EXPECT_EQ(line.find("oldest"), std::string::npos) << line;
}

TEST(Progress, FormatsNumbersAndDurations) {
  EXPECT_EQ(thousands(0), "0");
  EXPECT_EQ(thousands(1234567), "1,234,567");
  EXPECT_EQ(duration_text(42), "42s");
  EXPECT_EQ(duration_text(7200), "2.0h");
}

}  // namespace
}  // namespace sluice
