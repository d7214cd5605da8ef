// The Kafka broker stops and starts again while the kafka source reads from it into PostgreSQL:
// the pipeline keeps polling (librdkafka reconnects), resumes where it was, and every message
// arrives — the keyed destination ends equal to the input and the group is committed to the end.
// The broker it restarts is its own (serial/private_kafka.h), never the shared one of
// SLUICE_TEST_KAFKA_BROKERS.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "integration/pg_harness.h"
#include "kafka_harness.h"
#include "serial/private_kafka.h"
#include "support/metrics.h"

namespace sluice::pgtest {
namespace {

using e2e::Process;
using test::opencdc_json;
using test::ProduceMessage;
using test::services;

std::vector<ProduceMessage> changes(std::mt19937_64& rng, int n, int64_t keys, int round,
                                    std::map<int64_t, std::string>& want) {
  std::vector<ProduceMessage> out;
  for (int i = 0; i < n; ++i) {
    const int64_t id = int64_t(rng() % uint64_t(keys)) + 1;
    const std::string key = "{\"id\":" + std::to_string(id) + "}";
    if (want.count(id) && rng() % 6 == 0) {
      out.push_back({key, opencdc_json("delete", "items", id)});
      want.erase(id);
    } else {
      const std::string v = "r" + std::to_string(round) + "_" + std::to_string(i);
      out.push_back({key, opencdc_json(want.count(id) ? "update" : "create", "items", id, v)});
      want[id] = v;
    }
  }
  return out;
}

std::map<int64_t, std::string> rows(Conn& c) {
  std::map<int64_t, std::string> got;
  for (const Row& r : c.query("SELECT id, v FROM items ORDER BY id"))
    got[std::stoll(*r[0])] = r[1] ? *r[1] : "<null>";
  return got;
}

TEST(KafkaSourceBrokerRestart, TheBrokerRestartsMidStreamAndEveryMessageStillArrives) {
  test::PrivateKafka kafka;  // restarted below: never a shared broker
  ASSERT_TRUE(kafka.ok());
  TestDb db("ks_restart");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE items (id bigint PRIMARY KEY, v text)"));
  const std::string topic = test::unique_topic("ks_restart");
  test::create_topic(topic, 2);
  std::mt19937_64 rng(99);
  std::map<int64_t, std::string> want;
  auto first = changes(rng, 20000, 2000, 1, want);
  test::produce(topic, first);

  auto dir = e2e::make_temp_dir("ks-restart");
  test::KafkaSourcePipelineFile f;
  f.id = "ks_restart";
  f.topics = {topic};
  f.pg_url = db.url();
  f.source_settings = {{"start", "earliest"}};
  f.max_records = 200;
  f.metrics = true;
  e2e::write_file(dir / "p.yaml", f.yaml());

  Process p({"run", "p.yaml"}, dir);
  const int port = test::metrics_port(p);
  ASSERT_GT(port, 0) << p.stderr_text();
  // The source's connection probe (from librdkafka's error and statistics callbacks).
  const std::string labels = test::connector_labels("ks_restart", "kafka");
  auto probe = [&](const std::string& name) {
    return test::metric_series(test::scrape_metrics(port), "sluice_source_" + name + labels);
  };
  ASSERT_TRUE(wait_for_checkpoint(p, dir, "ks_restart", [](const std::string& c) {
    return !c.empty();
  })) << p.stderr_text();
  EXPECT_EQ(probe("connected"), 1) << test::scrape_metrics(port);
  EXPECT_EQ(probe("reconnects_total"), 0) << test::scrape_metrics(port);
  ASSERT_EQ(services("stop kafka"), 0);
  EXPECT_TRUE(
      wait_until([&] { return probe("connected") == 0 && probe("down_seconds") > 0; }, 30s, 50ms))
      << test::scrape_metrics(port) << p.stderr_text();
  // The source notices, says so, and keeps running.
  EXPECT_TRUE(
      wait_until([&] { return p.stderr_text().find("still polling") != std::string::npos; }, 60s))
      << p.stderr_text();
  EXPECT_EQ(p.wait_for(0ms), -1) << p.stderr_text();
  ASSERT_EQ(services("start kafka"), 0);
  EXPECT_TRUE(wait_until([&] { return probe("connected") == 1 && probe("reconnects_total") >= 1; },
                         60s, 50ms))
      << test::scrape_metrics(port) << p.stderr_text();

  auto second = changes(rng, 20000, 2000, 2, want);
  test::produce(topic, second);
  const bool equal = wait_until([&] { return rows(db.sql()) == want; }, 180s, 500ms);
  EXPECT_TRUE(equal) << p.stderr_text();
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  EXPECT_EQ(rows(db.sql()).size(), want.size());
  auto committed = test::committed_offsets("sluice-ks_restart", topic, 2);
  EXPECT_EQ(committed[0] + committed[1], int64_t(first.size() + second.size()));
  test::delete_topics({topic});
  test::delete_groups({"sluice-ks_restart"});
}

}  // namespace
}  // namespace sluice::pgtest
