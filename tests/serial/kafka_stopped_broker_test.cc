// A Kafka broker that stops answering while TCP stays open (SIGSTOP of the broker of
// SLUICE_TEST_KAFKA_BROKERS: its kernel keeps ACKing) while PostgreSQL changes stream into a
// transactional kafka destination. With socket_timeout 2s librdkafka takes the connection for
// dead and the destination's probe shows it down; once the broker is continued, the pipeline
// recovers by itself and a read_committed consumer sees every change exactly once. The broker's
// pid is read from scripts/services' directory (SLUICE_SERVICES_DIR): a serial test.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <set>

#include "integration/pg_harness.h"
#include "kafka_harness.h"
#include "support/metrics.h"

namespace sluice::pgtest {
namespace {

using e2e::Process;

pid_t broker_pid() {
  const char* dir = std::getenv("SLUICE_SERVICES_DIR");
  std::ifstream in(std::string(dir && *dir ? dir : "/tmp/sluice-services") + "/kafka/kafka.pid");
  pid_t pid = 0;
  in >> pid;
  return pid;
}

TEST(KafkaStoppedBroker, TheConnectionIsTakenForDeadAndTheTransactionalPipelineRecoversExactly) {
  TestDb db("kd_stopped_broker");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id int PRIMARY KEY, n int)"));
  ASSERT_TRUE(db.sql().exec("INSERT INTO t SELECT g, 1 FROM generate_series(1, 100) g"));
  const std::string topic = test::unique_topic("kd_stopped");
  test::create_topic(topic, 1);
  test::TopicsCleanup cleanup({topic});
  // A pipeline id of its own: with transactions the position lives in the broker's positions
  // topic, which outlives the test's database.
  const std::string id = test::unique_name("kd_stopped");
  test::KafkaPipelineFile f;
  f.id = id;
  f.pg_url = db.url();
  f.tables = {"public.t"};
  f.max_records = 50;
  f.destination_settings = {{"topic", topic}, {"transactions", "true"}, {"socket_timeout", "2s"}};
  f.metrics = true;
  auto dir = e2e::make_temp_dir("kd-stopped");
  e2e::write_file(dir / "p.yaml", f.yaml());
  Process p({"run", "p.yaml"}, dir);
  const int port = test::metrics_port(p);
  ASSERT_GT(port, 0) << p.stderr_text();
  const std::string labels = test::connector_labels(id, "kafka");
  auto probe = [&](const std::string& name) {
    return test::metric_series(test::scrape_metrics(port), "sluice_destination_" + name + labels);
  };
  ASSERT_TRUE(wait_for_checkpoint(
      p, dir, id, [](const std::string& c) { return starts_with(c, "cdc "); }, 120s))
      << p.stderr_text();
  EXPECT_EQ(probe("connected"), 1) << test::scrape_metrics(port);

  const pid_t pid = broker_pid();
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  ASSERT_TRUE(db.sql().exec("INSERT INTO t SELECT g, 1 FROM generate_series(101, 200) g"));
  ASSERT_TRUE(db.sql().exec("UPDATE t SET n = 2 WHERE id <= 20"));
  const bool noticed = wait_until([&] { return probe("connected") == 0; }, 15s, 100ms);
  ::kill(pid, SIGCONT);
  EXPECT_TRUE(noticed) << test::scrape_metrics(port) << p.stderr_text();
  EXPECT_TRUE(wait_until([&] { return probe("connected") == 1; }, 30s, 100ms))
      << test::scrape_metrics(port) << p.stderr_text();
  EXPECT_TRUE(p.running()) << p.stderr_text();

  // 100 snapshot rows, 100 inserts, 20 updates: each exactly once for read_committed.
  auto msgs = test::consume_all(topic, 220, 60s);
  EXPECT_EQ(msgs.size(), 220u);
  std::multiset<int64_t> ids;
  for (const auto& m : msgs) ids.insert(test::key_id(m).value_or(-1));
  for (int64_t id = 1; id <= 200; ++id) EXPECT_EQ(ids.count(id), id <= 20 ? 2u : 1u) << id;
  p.terminate();
  EXPECT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sluice::pgtest
