// kill -9 of sluice while PostgreSQL changes stream into Kafka, then a restart: nothing is lost
// with the idempotent producer (at-least-once: a replay may duplicate), and with
// `transactions: true` a read_committed consumer sees every change exactly once.
#include <gtest/gtest.h>
#include <signal.h>

#include <map>

#include "integration/pg_harness.h"
#include "kafka_harness.h"

namespace sluice::pgtest {
namespace {

using e2e::Process;

constexpr int kRowsPerTx = 50;

std::function<bool(Conn&, uint64_t)> inserts() {
  return [](Conn& c, uint64_t i) {
    return c.exec("INSERT INTO t SELECT g, g % 97 FROM generate_series(" +
                  std::to_string(i * kRowsPerTx + 1) + ", " + std::to_string((i + 1) * kRowsPerTx) +
                  ") g");
  };
}

// Runs the pipeline, kills it with SIGKILL twice while a writer inserts, restarts it, and returns
// (per id) how many messages the topic holds.
std::map<int64_t, int> kill_and_resume(TestDb& db, const std::string& id, bool transactions,
                                       int64_t* rows) {
  std::map<int64_t, int> seen;
  EXPECT_TRUE(db.sql().exec("CREATE TABLE t (id int PRIMARY KEY, n int)"));
  const std::string topic = test::unique_topic(id);
  test::TopicsCleanup cleanup({topic});
  test::KafkaPipelineFile f;
  f.id = id;
  f.pg_url = db.url();
  f.tables = {"public.t"};
  f.max_records = 500;
  f.destination_settings = {{"topic", topic}, {"format", "debezium"}};
  if (transactions) {
    f.destination_settings["transactions"] = "true";
    f.destination_settings["positions.topic"] = topic + "_positions";
    f.destination_settings["transactional.id"] = topic + "_txn";
    cleanup.add(topic + "_positions");
  }
  auto dir = e2e::make_temp_dir("kd-kill");
  e2e::write_file(dir / "p.yaml", f.yaml());

  Writer writer(db.url(), inserts(), 2ms);
  for (int round = 0; round < 2; ++round) {
    Process p({"run", "p.yaml"}, dir);
    const std::string before = checkpoint_of(dir, id);
    // Killed once changes are flowing: a checkpoint beyond the one it started from.
    EXPECT_TRUE(wait_for_checkpoint(
        p, dir, id, [&](const std::string& c) { return starts_with(c, "cdc ") && c != before; },
        120s))
        << p.stderr_text();
    const uint64_t at = writer.steps();
    EXPECT_TRUE(wait_until([&] { return writer.steps() >= at + 20; }, 60s));
    p.signal(SIGKILL);
    EXPECT_EQ(p.wait(), 128 + SIGKILL);
    // With transactions the position committed in Kafka is authoritative: even without the
    // checkpoint store the pipeline resumes exactly after the last committed batch.
    if (transactions) std::filesystem::remove_all(dir / "state");
  }
  const uint64_t at = writer.steps();
  EXPECT_TRUE(wait_until([&] { return writer.steps() >= at + 20; }, 60s));
  writer.stop();
  EXPECT_FALSE(writer.failed());
  *rows = std::stoll(db.sql().scalar("SELECT count(*) FROM t"));
  Process p({"run", "p.yaml", "--idle-exit", "3"}, dir);
  EXPECT_EQ(p.wait_for(180s), 0) << p.stderr_text();
  if (transactions) {
    EXPECT_NE(p.stderr_text().find("position stored in the destination"), std::string::npos)
        << p.stderr_text();
  }

  auto msgs = test::consume_all(topic, size_t(*rows), 120s, /*read_committed=*/true);
  for (const auto& m : msgs) {
    auto k = test::key_id(m);
    EXPECT_TRUE(k.has_value()) << (m.key ? *m.key : "null key");
    if (k) ++seen[*k];
  }
  return seen;
}

TEST(KafkaDestinationFault, KillMinus9ThenRestartLosesNothing) {
  TestDb db("kd_kill_alo");
  ASSERT_TRUE(db.ok());
  int64_t rows = 0;
  auto seen = kill_and_resume(db, "kd_kill_alo", false, &rows);
  ASSERT_GT(rows, 0);
  int64_t missing = 0;
  for (int64_t i = 1; i <= rows; ++i) missing += seen.count(i) ? 0 : 1;
  EXPECT_EQ(missing, 0) << "of " << rows << " rows";
  EXPECT_EQ(int64_t(seen.size()), rows);
}

TEST(KafkaDestinationFault, KillMinus9WithTransactionsDeliversEveryChangeExactlyOnce) {
  TestDb db("kd_kill_eos");
  ASSERT_TRUE(db.ok());
  int64_t rows = 0;
  auto seen = kill_and_resume(db, "kd_kill_eos", true, &rows);
  ASSERT_GT(rows, 0);
  int64_t missing = 0, duplicated = 0;
  for (int64_t i = 1; i <= rows; ++i) {
    auto it = seen.find(i);
    if (it == seen.end()) ++missing;
    else if (it->second > 1) ++duplicated;
  }
  EXPECT_EQ(missing, 0) << "of " << rows << " rows";
  EXPECT_EQ(duplicated, 0) << "of " << rows << " rows";
  EXPECT_EQ(int64_t(seen.size()), rows);
}

TEST(KafkaDestinationFault, ADeliveryTheBrokerRefusesStopsThePipelineBeforeItsBatch) {
  TestDb db("kd_refused");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec(
      "CREATE TABLE t (id int PRIMARY KEY, s text);"
      "INSERT INTO t SELECT g, CASE WHEN g = 5 THEN (SELECT string_agg(md5(i::text), '') "
      "FROM generate_series(1, 160) i) ELSE 'ok' END "
      "FROM generate_series(1, 10) g"));
  const std::string topic = test::unique_topic("kd_refused");
  test::TopicsCleanup cleanup({topic});
  // The broker refuses records above 2,000 bytes; the producer's own limit (1 MB) lets it through.
  test::create_topic(topic, 1, {{"max.message.bytes", "2000"}});
  test::KafkaPipelineFile f;
  f.id = "kd_refused";
  f.pg_url = db.url();
  f.tables = {"public.t"};
  f.source_settings = {{"snapshot.mode", "initial_only"}};
  // With compression and its size check off, sluice does not refuse the record by the topic's
  // limit itself; 5,120 hex digits of md5 do not compress below 2,000 bytes.
  f.destination_settings = {
      {"topic", topic}, {"compression", "lz4"}, {"compression.size_check", "false"}};
  auto dir = e2e::make_temp_dir("kd-refused");
  e2e::write_file(dir / "p.yaml", f.yaml());
  Process p({"run", "p.yaml"}, dir);
  const int rc = p.wait_for(120s);
  EXPECT_NE(rc, 0) << p.stderr_text();
  EXPECT_NE(rc, -1) << "still running";
  const std::string err = p.stderr_text();
  std::vector<std::string> errors;
  for (const auto& l : lines_of(err))
    if (is_error_log_line(l)) errors.push_back(l);
  ASSERT_FALSE(errors.empty()) << err;
  EXPECT_NE(errors[0].find("delivery to '" + topic + "' failed"), std::string::npos) << errors[0];
  EXPECT_EQ(checkpoint_of(dir, "kd_refused"), "") << "the failed batch must not be checkpointed";
}

}  // namespace
}  // namespace sluice::pgtest
