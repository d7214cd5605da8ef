// A slow destination must not cost the replication connection: while the reader waits for the
// destination, status updates keep the walsender (here with a 2 s wal_sender_timeout) satisfied.
#include <gtest/gtest.h>

#include <thread>

#include "integration/pg_harness.h"
#include "runtime/pipeline.h"

namespace sluice::pgtest {
namespace {

class SlowDestination final : public Destination {
 public:
  Status open(const ConnectorContext&) override { return ok_status(); }
  void write(Batch& b, WriteDone done) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    written += b.size();
    done(ok_status());
  }
  std::atomic<size_t> written{0};
};

class NoCheckpoints final : public CheckpointStore {
 public:
  Result<std::optional<std::string>> load(std::string_view) override {
    return std::optional<std::string>();
  }
  Status save(std::string_view, std::string_view) override { return ok_status(); }
  Status erase(std::string_view) override { return ok_status(); }
};

TEST(PostgresKeepalive, SlowDestinationDoesNotLetTheWalsenderTimeOut) {
  TestDb db("keepalive");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id int PRIMARY KEY, v text)"));
  const std::string url = db.url() + (db.url().find('?') == std::string::npos ? "?" : "&") +
                          "options=-c%20wal_sender_timeout%3D2s";
  auto src = make_source({{"url", url},
                          {"tables", "public.t"},
                          {"snapshot.mode", "never"},
                          {"heartbeat.interval", "300ms"}});
  ASSERT_TRUE(src);
  auto dest = std::make_unique<SlowDestination>();
  SlowDestination* d = dest.get();
  NoCheckpoints cps;
  PipelineOptions o;
  o.id = "keepalive";
  o.source_connector = "postgres";
  o.destination_connector = "slow";
  o.max_records = 10;
  o.linger = std::chrono::milliseconds(10);
  Pipeline p(o, std::move(src), {}, std::move(dest), &cps);
  Status result;
  std::thread t([&] { result = p.run(); });

  // Wait until the walsender streams: the slot is already active while CREATE_REPLICATION_SLOT
  // waits for a consistent point, and rows written before that point are not part of the stream.
  std::string pid;
  ASSERT_TRUE(wait_until(
      [&] {
        pid = db.admin().scalar(
            "SELECT s.active_pid FROM pg_replication_slots s JOIN pg_stat_replication r ON r.pid = s.active_pid "
            "WHERE s.slot_name = 'sluice_keepalive' AND r.state = 'streaming'");
        return !pid.empty() && pid != "0";
      },
      std::chrono::seconds(60)));
  for (int i = 0; i < 40; ++i)
    ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES (" + std::to_string(i) + ", 'x')"));
  // Four batches of 10 take ≥ 10 s at the destination: five times the walsender's timeout.
  const bool all = wait_until([&] { return d->written.load() >= 40; }, std::chrono::seconds(60),
                              std::chrono::milliseconds(100));
  const std::string pid_after = db.admin().scalar(
      "SELECT coalesce(active_pid, 0) FROM pg_replication_slots WHERE slot_name = 'sluice_keepalive'");
  p.request_stop();
  t.join();
  ASSERT_TRUE(result.ok()) << result.error().message();
  EXPECT_TRUE(all) << d->written.load() << " of 40 written";
  EXPECT_EQ(pid_after, pid) << "the replication connection was replaced: the walsender timed out";
}

}  // namespace
}  // namespace sluice::pgtest
