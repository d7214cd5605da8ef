// Fault suite, PostgreSQL → Kafka with `transactions: true`, faults on the broker's side: a private
// broker that advertises the address of a fault proxy in front of it, so every connection sluice
// opens to it (bootstrap, partition leader, transaction coordinator) goes through the proxy. While
// a writer keeps changing the source table, the proxy resets every connection, adds latency, caps
// the bandwidth, blackholes the link beyond socket_timeout (TCP open, nothing answers: librdkafka
// must take the connection for dead) and refuses connections for a while (a broker restart as
// seen from sluice). After each, a read_committed consumer must see every snapshot row and every
// change exactly once. Serial: the private broker is a JVM of its own.
#include <iostream>

#include "fault/fault_kafka.h"
#include "fault/fault_suite.h"
#include "serial/private_kafka.h"
#include "support/kafka.h"
#include "support/sql.h"

namespace sluice::test::fault {
namespace {

constexpr const char* kTable = "fault_rows";

struct Step {
  const char* name;
  std::function<void(FaultProxy&)> on, off;
  std::chrono::milliseconds lasting;
};

TEST(PostgresToKafkaBroker, ProxyFaultsInFrontOfTheBroker) {
  PrivateKafka kafka(PrivateKafka::Via::fault_proxy);
  ASSERT_TRUE(kafka.ok());
  FaultProxy& proxy = kafka.proxy();
  const uint64_t seed = case_seed();
  PgDatabase src{unique_name("fault_pkb_src")};
  ASSERT_TRUE(src.ok());
  SourceWriter writer(SourceWriter::Db::postgres, src.url(), kTable, seed);
  ASSERT_TRUE(writer.create(2000));
  KafkaScope scope;
  const std::string topic = scope.topic("fault_pkb", 1);
  const std::string id = unique_name("fpkb", 40);
  TempDir dir("fault-pg-kafka-broker");
  PipelineFile f;
  PipelineYaml& p = f.pipeline(id);
  p.source("postgres").set("url", src.url()).set("tables", Yaml::strings({"public.fault_rows"}));
  p.destination("kafka")
      .set("brokers", kafka.brokers())
      .set("topic", topic)
      .set("transactions", true)
      .set("socket_timeout", "10s");
  p.max_records(500).linger_ms(20);
  f.write(dir / "p.yaml");
  const Checker check = kafka_exactly_once_checker(src.url(), kTable, topic);

  Process run({"run", "p.yaml"}, dir.path());
  FaultResult r{"postgres->kafka", "broker proxy faults", 0, 0, 0, 0, 0, 0, seed};
  double seconds = 0;
  Check c = wait_exact(check, 90s, &seconds);  // the snapshot
  ASSERT_EQ(c.problem, "") << run.stderr_text();
  const std::chrono::milliseconds outage = fault_soak() ? 40000ms : 1500ms;
  const std::vector<Step> steps = {
      {"reset", [](FaultProxy& x) { x.reset(); }, [](FaultProxy&) {}, 0ms},
      {"latency 200 ms", [](FaultProxy& x) { x.set_latency(200); },
       [](FaultProxy& x) { x.set_normal(); }, 3000ms},
      {"bandwidth 64 KiB/s", [](FaultProxy& x) { x.set_bandwidth(64 << 10); },
       [](FaultProxy& x) { x.set_normal(); }, 3000ms},
      {"blackhole 12 s (beyond socket_timeout)", [](FaultProxy& x) { x.set_blackhole(true); },
       [](FaultProxy& x) { x.set_blackhole(false); }, 12000ms},
      {"outage (broker restart)", [](FaultProxy& x) { x.set_outage(true); },
       [](FaultProxy& x) { x.set_outage(false); }, outage},
  };
  for (const Step& s : steps) {
    const int64_t bytes = proxy.bytes_forwarded(), resets = proxy.connections_reset();
    writer.start(20ms);
    std::this_thread::sleep_for(500ms);
    s.on(proxy);
    std::this_thread::sleep_for(s.lasting);
    s.off(proxy);
    std::this_thread::sleep_for(300ms);
    writer.stop();
    c = wait_exact(check, 120s, &seconds);
    r.iterations++;
    r.faults++;
    r.recovery_seconds = std::max(r.recovery_seconds, seconds);
    std::cout << "fault " << s.name << ": recovered in " << seconds << " s\n";
    EXPECT_GT(proxy.bytes_forwarded(), bytes) << s.name << ": no traffic through the proxy";
    if (std::string_view(s.name) == "reset") {
      EXPECT_GT(proxy.connections_reset(), resets) << "the reset hit no connection";
    }
    EXPECT_EQ(c.problem, "") << "after " << s.name << " (seed " << seed << "):\n"
                             << run.stderr_text();
    if (!c.problem.empty()) break;
  }
  r.rows_verified = c.verified;
  r.lost = c.lost;
  r.duplicated = c.duplicated;
  record_fault_result(r);
  // The blackhole outlasted socket_timeout: librdkafka took a connection for dead.
  EXPECT_NE(run.stderr_text().find("timed out"), std::string::npos) << run.stderr_text();
  run.terminate();
  EXPECT_EQ(run.wait_for(60s), 0) << run.stderr_text();
}

}  // namespace
}  // namespace sluice::test::fault
