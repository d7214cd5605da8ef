// Exactly once in the snapshot, not only in the stream: PostgreSQL → Kafka and MySQL → Kafka with
// `transactions: true`, crashed inside the snapshot twice (by the fail point mid_snapshot_chunk and
// by kill -9), then inside a CDC transaction (fail point mid_transaction), and run to the end. A
// read_committed consumer must see every snapshot row once and every change once: each batch's
// position names exactly the last row it holds (a position naming where a chunk began re-sent
// the chunk's rows, up to 32 MiB of them, after each crash).
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <functional>
#include <map>
#include <string>
#include <utility>

#include "integration/mysql_source_harness.h"
#include "integration/pg_harness.h"
#include "kafka_harness.h"
#include "support/failpoints.h"

namespace sluice {
namespace {

using namespace std::chrono_literals;
using e2e::Process;
using test::ArmedFailPoints;

constexpr int64_t kRows = 12000;  // about 60 snapshot batches of 200

// What a source offers the scenario: SQL on it, and the pipeline file to its Kafka topic.
struct SourceUnderTest {
  std::function<bool(const std::string&)> exec;
  std::function<std::string(const std::string& topic)> yaml;
  std::string big_transaction;  // updates 1..1000 (each row changes: MySQL logs no no-op update),
                                // deletes 1001..1050, inserts kRows+1..kRows+100
};

std::map<std::string, std::string> kafka_settings(const std::string& topic) {
  return {{"topic", topic},
          {"format", "debezium"},
          {"debezium.tombstones", "false"},
          {"transactions", "true"},
          {"positions.topic", topic + "_positions"},
          {"transactional.id", topic + "_txn"}};
}

// The Debezium op of a message ('r' snapshot, 'c', 'u', 'd'), 0 when there is none.
char op_of(const test::KafkaMessage& m) {
  if (!m.value) return 0;
  const size_t at = m.value->find("\"op\":\"");
  return at == std::string::npos ? 0 : (*m.value)[at + 6];
}

void crash_mid_snapshot_then_resume(const std::string& id, const SourceUnderTest& src) {
  const std::string topic = test::unique_topic(id);
  test::TopicsCleanup cleanup({topic, topic + "_positions"});
  auto dir = e2e::make_temp_dir(id);
  e2e::write_file(dir / "p.yaml", src.yaml(topic));
  const auto snapshot_checkpoint = [](const std::string& c) {
    return c.starts_with("snapshot ") || c.starts_with("v3 snapshot ");
  };

  // 1. The fail point: the seventh snapshot batch read, some before it committed.
  {
    ArmedFailPoints armed("mid_snapshot_chunk=crash@7");
    Process p({"run", "p.yaml"}, dir);
    EXPECT_EQ(p.wait_for(60s), 128 + SIGKILL) << p.stderr_text();
    EXPECT_NE(p.stderr_text().find("fail point mid_snapshot_chunk fired"), std::string::npos)
        << p.stderr_text();
  }
  // 2. kill -9 once more batches are committed, still inside the snapshot. Each snapshot batch
  //    waits 25 ms, so the ~50 left take over a second: unpaced, the rest of the snapshot could
  //    commit between two polls and the kill would land in CDC.
  {
    const std::string before = pgtest::checkpoint_of(dir, id);
    ArmedFailPoints paced("mid_snapshot_chunk=delay:25");
    Process p({"run", "p.yaml"}, dir);
    ASSERT_TRUE(pgtest::wait_for_checkpoint(
        p, dir, id, [&](const std::string& c) { return snapshot_checkpoint(c) && c != before; },
        60s, 5ms))
        << p.stderr_text();
    p.signal(SIGKILL);
    EXPECT_EQ(p.wait(), 128 + SIGKILL);
    const std::string at_kill = pgtest::checkpoint_of(dir, id);
    ASSERT_TRUE(snapshot_checkpoint(at_kill))
        << "killed too late for a snapshot resume: " << at_kill;
  }
  // 3. The rest of the snapshot, then a crash inside a CDC transaction of 1,150 changes.
  {
    ArmedFailPoints armed("mid_transaction=crash@2");
    Process p({"run", "p.yaml"}, dir);
    ASSERT_TRUE(pgtest::wait_for_checkpoint(
        p, dir, id, [](const std::string& c) { return c.starts_with("cdc "); }, 60s))
        << p.stderr_text();
    ASSERT_TRUE(src.exec(src.big_transaction));
    EXPECT_EQ(p.wait_for(60s), 128 + SIGKILL) << p.stderr_text();
    EXPECT_NE(p.stderr_text().find("fail point mid_transaction fired"), std::string::npos)
        << p.stderr_text();
  }
  // 4. To the end.
  {
    Process p({"run", "p.yaml", "--idle-exit", "2"}, dir);
    ASSERT_EQ(p.wait_for(90s), 0) << p.stderr_text();
    EXPECT_NE(p.stderr_text().find("position stored in the destination"), std::string::npos)
        << p.stderr_text();
  }

  const size_t expected = size_t(kRows) + 1000 + 50 + 100;
  auto msgs = test::consume_all(topic, expected, 60s, /*read_committed=*/true);
  std::map<std::pair<int64_t, char>, int> seen;
  int64_t unexpected = 0;
  for (const auto& m : msgs) {
    auto k = test::key_id(m);
    if (!k || !op_of(m)) {
      ++unexpected;
      continue;
    }
    ++seen[{*k, op_of(m)}];
  }
  EXPECT_EQ(unexpected, 0);
  int64_t missing = 0, duplicated = 0;
  const auto expect_once = [&](int64_t from, int64_t to, char op) {
    for (int64_t i = from; i <= to; ++i) {
      auto it = seen.find({i, op});
      if (it == seen.end() && ++missing <= 5) ADD_FAILURE() << "missing: id " << i << " op " << op;
      else if (it != seen.end() && it->second > 1) duplicated += it->second - 1;
    }
  };
  expect_once(1, kRows, 'r');
  expect_once(1, 1000, 'u');
  expect_once(1001, 1050, 'd');
  expect_once(kRows + 1, kRows + 100, 'c');
  EXPECT_EQ(missing, 0) << "of " << expected << " messages";
  EXPECT_EQ(duplicated, 0) << "of " << expected << " messages";
  EXPECT_EQ(msgs.size(), expected);
  std::filesystem::remove_all(dir);
}

TEST(SnapshotExactlyOnce, PostgresToKafkaCrashesInTheSnapshotAndATransactionDeliverEachRowOnce) {
  pgtest::TestDb db("snap_eos_pg");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(
      db.sql().exec("CREATE TABLE t (id int PRIMARY KEY, n int, s text);"
                    "INSERT INTO t SELECT g, g % 97, repeat('x', 40) FROM generate_series(1, " +
                    std::to_string(kRows) + ") g"));
  SourceUnderTest src;
  src.exec = [&](const std::string& sql) { return db.sql().exec(sql); };
  src.yaml = [&](const std::string& topic) {
    test::KafkaPipelineFile f;
    f.id = "snap_eos_pg";
    f.pg_url = db.url();
    f.tables = {"public.t"};
    f.max_records = 200;
    f.destination_settings = kafka_settings(topic);
    return f.yaml();
  };
  src.big_transaction =
      "BEGIN; UPDATE t SET n = n + 1000 WHERE id <= 1000;"
      "DELETE FROM t WHERE id BETWEEN 1001 AND 1050;"
      "INSERT INTO t SELECT g, 0, 'new' FROM generate_series(12001, 12100) g; COMMIT";
  crash_mid_snapshot_then_resume("snap_eos_pg", src);
}

TEST(SnapshotExactlyOnce, MysqlToKafkaCrashesInTheSnapshotAndATransactionDeliverEachRowOnce) {
  mytest::TestDb db("snap_eos_my");
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id INT PRIMARY KEY, n INT, s VARCHAR(50))"));
  ASSERT_TRUE(db.sql().exec("INSERT INTO t SELECT seq, seq % 97, REPEAT('x', 40) FROM seq_1_to_" +
                            std::to_string(kRows)));
  SourceUnderTest src;
  src.exec = [&](const std::string& sql) { return db.sql().exec(sql); };
  src.yaml = [&](const std::string& topic) {
    test::PipelineFile f = mytest::pipeline_file("snap_eos_my", db.url(), {"*"}, 200);
    test::ConnectorYaml& d = f.pipeline("snap_eos_my").destination("kafka");
    d.set("brokers", test::kafka_brokers());
    for (const auto& [k, v] : kafka_settings(topic)) d.set(k, test::Yaml::raw(v));
    return f.yaml();
  };
  src.big_transaction =
      "BEGIN; UPDATE t SET n = n + 1000 WHERE id <= 1000;"
      "DELETE FROM t WHERE id BETWEEN 1001 AND 1050;"
      "INSERT INTO t SELECT seq, 0, 'new' FROM seq_12001_to_12100; COMMIT";
  crash_mid_snapshot_then_resume("snap_eos_my", src);
}

}  // namespace
}  // namespace sluice
