// The Kafka broker stops and starts again while PostgreSQL changes stream into it: the idempotent
// producer's own in-order retries (within delivery.timeout) absorb the outage, the pipeline keeps
// running and every change arrives; the destination's connection probe shows the outage and
// counts the reconnect (sluice_destination_connected, _reconnects_total). The broker it restarts is
// its own (serial/private_kafka.h), never the shared one of SLUICE_TEST_KAFKA_BROKERS.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

#include "integration/pg_harness.h"
#include "kafka_harness.h"
#include "serial/private_kafka.h"
#include "support/metrics.h"

namespace sluice::pgtest {
namespace {

using e2e::Process;
using test::services;

TEST(KafkaDestinationBrokerRestart, ChangesStreamingThroughABrokerRestartAllArrive) {
  test::PrivateKafka kafka;  // restarted below: never a shared broker
  ASSERT_TRUE(kafka.ok());
  TestDb db("kd_broker_restart");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id int PRIMARY KEY, n int)"));
  const std::string topic = test::unique_topic("kd_restart");
  test::create_topic(topic, 3);
  test::TopicsCleanup cleanup({topic});
  test::KafkaPipelineFile f;
  f.id = "kd_broker_restart";
  f.pg_url = db.url();
  f.tables = {"public.t"};
  f.max_records = 200;
  f.destination_settings = {{"topic", topic}, {"delivery.timeout", "300s"}};
  f.metrics = true;
  auto dir = e2e::make_temp_dir("kd-restart");
  e2e::write_file(dir / "p.yaml", f.yaml());

  Writer writer(
      db.url(),
      [](Conn& c, uint64_t i) {
        return c.exec("INSERT INTO t SELECT g, 1 FROM generate_series(" +
                      std::to_string(i * 20 + 1) + ", " + std::to_string(i * 20 + 20) + ") g");
      },
      5ms);
  Process p({"run", "p.yaml", "--idle-exit", "3"}, dir);
  const int port = test::metrics_port(p);
  ASSERT_GT(port, 0) << p.stderr_text();
  const std::string labels = test::connector_labels("kd_broker_restart", "kafka");
  auto probe = [&](const std::string& name) {
    return test::metric_series(test::scrape_metrics(port), "sluice_destination_" + name + labels);
  };
  ASSERT_TRUE(wait_for_checkpoint(
      p, dir, "kd_broker_restart", [](const std::string& c) { return starts_with(c, "cdc "); },
      120s))
      << p.stderr_text();
  ASSERT_TRUE(wait_until([&] { return writer.steps() >= 50; }, 60s));
  EXPECT_EQ(probe("connected"), 1) << test::scrape_metrics(port);
  EXPECT_EQ(probe("reconnects_total"), 0) << test::scrape_metrics(port);
  ASSERT_EQ(services("stop kafka"), 0);
  EXPECT_TRUE(
      wait_until([&] { return probe("connected") == 0 && probe("down_seconds") > 0; }, 30s, 50ms))
      << test::scrape_metrics(port) << p.stderr_text();
  // Changes keep coming while the broker is down.
  const uint64_t down_at = writer.steps();
  ASSERT_TRUE(wait_until([&] { return writer.steps() >= down_at + 50; }, 60s));
  EXPECT_EQ(p.wait_for(10ms), -1) << "sluice exited while the broker was down:\n"
                                  << p.stderr_text();
  ASSERT_EQ(services("start kafka"), 0);
  EXPECT_TRUE(wait_until([&] { return probe("connected") == 1 && probe("reconnects_total") >= 1; },
                         60s, 50ms))
      << test::scrape_metrics(port) << p.stderr_text();
  const uint64_t up_at = writer.steps();
  ASSERT_TRUE(wait_until([&] { return writer.steps() >= up_at + 50; }, 60s));
  writer.stop();
  EXPECT_FALSE(writer.failed());
  ASSERT_EQ(p.wait_for(300s), 0) << p.stderr_text();

  const int64_t rows = std::stoll(db.sql().scalar("SELECT count(*) FROM t"));
  auto msgs = test::consume_all(topic, size_t(rows), 120s);
  std::set<int64_t> ids;
  for (const auto& m : msgs) ids.insert(test::key_id(m).value_or(-1));
  EXPECT_EQ(int64_t(ids.size()), rows);
  EXPECT_EQ(ids.count(-1), 0u);
  // The idempotent producer retried in order: within each partition, ids of one key never repeat.
  EXPECT_EQ(int64_t(msgs.size()), rows) << "duplicates after the restart";
}

}  // namespace
}  // namespace sluice::pgtest
