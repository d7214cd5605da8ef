// The replication slot's health against the real server: its lag in bytes and seconds in the
// metrics registry while a destination holds changes back, a warning above slot_lag_warning,
// transactional heartbeats that move the slot while the captured table is idle and other WAL
// grows (never a record, even with logical_messages), and a slot that survives a stop and a failed
// run: only cleanup drops it.
#include <gtest/gtest.h>

#include <condition_variable>
#include <thread>

#include "integration/pg_harness.h"
#include "runtime/memory_checkpoints_test.h"
#include "runtime/pipeline.h"
#include "support/log_capture.h"

namespace sluice::pgtest {
namespace {

// Holds every write until opened; counts the records it wrote.
class GatedDestination final : public Destination {
 public:
  Status open(const ConnectorContext&) override { return ok_status(); }
  void write(Batch& b, WriteDone done) override {
    std::unique_lock l(mu_);
    cv_.wait(l, [&] { return open_; });
    written += b.size();
    done(ok_status());
  }
  void open_gate() {
    {
      std::lock_guard l(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  std::atomic<size_t> written{0};

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

class FailingDestination final : public Destination {
 public:
  Status open(const ConnectorContext&) override { return ok_status(); }
  void write(Batch&, WriteDone done) override {
    done(Error(Errc::config, "the destination refuses everything"));
  }
};

std::map<std::string, std::string> source_settings(const std::string& url) {
  return {{"url", url},
          {"tables", "public.t"},
          {"snapshot.mode", "never"},
          {"heartbeat.interval", "300ms"},
          {"logical_messages", "true"},
          {"slot_lag_warning", "16KiB"}};
}

PipelineOptions options() {
  PipelineOptions o;
  o.id = "slot_health";
  o.source_connector = "postgres";
  o.destination_connector = "gated";
  o.max_records = 500;
  o.linger = std::chrono::milliseconds(10);
  return o;
}

bool streaming(TestDb& db) {
  const std::string pid = db.admin().scalar(
      "SELECT s.active_pid FROM pg_replication_slots s JOIN pg_stat_replication r ON r.pid = "
      "s.active_pid WHERE s.slot_name = 'sluice_slot_health' AND r.state = 'streaming'");
  return !pid.empty() && pid != "0";
}

bool slot_exists(TestDb& db) {
  return db.admin().scalar(
             "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'sluice_slot_health'") ==
         "1";
}

// The slot's confirmed_flush_lsn is at or past `lsn`.
bool confirmed_past(TestDb& db, const std::string& lsn) {
  return db.admin().scalar("SELECT confirmed_flush_lsn >= '" + lsn +
                           "'::pg_lsn FROM pg_replication_slots WHERE slot_name = "
                           "'sluice_slot_health'") == "t";
}

TEST(PostgresSlotHealth, LagHeartbeatsWarningAndASlotOnlyCleanupDrops) {
  TestDb db("slot_health");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id int PRIMARY KEY, v text)"));
  ASSERT_TRUE(db.sql().exec("CREATE TABLE other (id serial PRIMARY KEY, v text)"));
  test::LogCapture log(512);
  auto logged = [&](const std::string& what) { return log.contains(what); };

  MetricsRegistry registry;
  test::MemoryCheckpoints cps;
  auto dest = std::make_unique<GatedDestination>();
  GatedDestination* d = dest.get();
  auto src = make_source(source_settings(db.url()));
  ASSERT_TRUE(src);
  {
    Pipeline p(options(), std::move(src), {}, std::move(dest), &cps);
    p.register_metrics(registry);
    Status result;
    std::thread t([&] { result = p.run(); });
    auto figure = [&](const char* name) {
      return registry.sum(name, {{"pipeline", "slot_health"}});
    };
    ASSERT_TRUE(wait_until([&] { return streaming(db); }, 60s));
    ASSERT_TRUE(wait_until([&] { return figure("sluice_source_slot_lag_bytes") >= 0; }, 30s));

    // The destination holds the changes back: the slot falls behind, in bytes and in seconds.
    ASSERT_TRUE(
        db.sql().exec("INSERT INTO t SELECT g, repeat('x', 100) FROM generate_series(1, 2000) g"));
    const std::string after_rows = db.sql().scalar("SELECT pg_current_wal_lsn()");
    EXPECT_TRUE(wait_until([&] { return figure("sluice_source_slot_lag_bytes") > 16384; }, 30s))
        << figure("sluice_source_slot_lag_bytes");
    EXPECT_TRUE(wait_until([&] { return figure("sluice_source_slot_lag_seconds") >= 1.0; }, 30s))
        << figure("sluice_source_slot_lag_seconds");
    EXPECT_GT(figure("sluice_source_slot_retained_bytes"), 16384);
    EXPECT_TRUE(
        wait_until([&] { return logged("replication slot \"sluice_slot_health\" is"); }, 30s));

    // Released: the slot confirms everything written so far.
    d->open_gate();
    EXPECT_TRUE(wait_until([&] { return confirmed_past(db, after_rows); }, 60s));
    EXPECT_EQ(d->written.load(), 2000u);

    // The captured table idle, other WAL growing: heartbeats move the slot past it.
    ASSERT_TRUE(db.sql().exec(
        "INSERT INTO other (v) SELECT repeat('y', 100) FROM generate_series(1, 2000)"));
    const std::string after_other = db.sql().scalar("SELECT pg_current_wal_lsn()");
    EXPECT_TRUE(wait_until([&] { return figure("sluice_source_heartbeats_total") >= 1; }, 30s));
    EXPECT_TRUE(wait_until([&] { return confirmed_past(db, after_other); }, 60s));
    // A heartbeat is sluice's own message: no record, although logical_messages is on.
    std::this_thread::sleep_for(1s);
    EXPECT_EQ(d->written.load(), 2000u);

    p.request_stop();
    t.join();
    ASSERT_TRUE(result.ok()) << result.error().message();
  }
  // Stopped: the slot stays (it holds the position the next run resumes from).
  EXPECT_TRUE(slot_exists(db));

  // A failed run does not drop it either.
  {
    auto again = make_source(source_settings(db.url()));
    ASSERT_TRUE(again);
    Pipeline p(options(), std::move(again), {}, std::make_unique<FailingDestination>(), &cps);
    Status result;
    std::thread t([&] { result = p.run(); });
    ASSERT_TRUE(wait_until([&] { return streaming(db); }, 60s));
    ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES (5000, 'fails')"));
    t.join();
    EXPECT_FALSE(result.ok());
  }
  EXPECT_TRUE(slot_exists(db));

  // Only cleanup (`sluice cleanup`) drops it.
  auto cleaner = make_source(source_settings(db.url()));
  ASSERT_TRUE(cleaner);
  Status cleaned = cleaner->cleanup(ConnectorContext{"slot_health", "postgres", nullptr});
  ASSERT_TRUE(cleaned.ok()) << cleaned.error().message();
  EXPECT_FALSE(slot_exists(db));
}

}  // namespace
}  // namespace sluice::pgtest
