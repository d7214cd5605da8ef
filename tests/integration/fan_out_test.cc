// One source feeding several destinations (`destinations:`), against the real servers:
// PostgreSQL → {PostgreSQL with checkpoint_in_destination, SQLite, Kafka with transactions} at
// once, killed -9 mid-stream and resumed; end states verified row by row at the keyed ones and
// message by message (read_committed) at Kafka. And a destination that rejects records sends
// them to its own dead-letter queue while the others write them.
#include <gtest/gtest.h>
#include <signal.h>

#include <map>
#include <string>
#include <utility>

#include "integration/pg_harness.h"
#include "support/kafka.h"

namespace sluice {
namespace {

using namespace std::chrono_literals;
using e2e::Process;

constexpr int kRows = 2000;  // snapshot rows; the stream adds, updates and deletes

std::string fan_out_yaml(const std::string& id, const std::string& src_url,
                         const std::string& dst_url, const std::string& topic) {
  return "version: 1\n"
         "pipelines:\n"
         "  - id: " +
         id +
         "\n"
         "    source:\n"
         "      connector: postgres\n"
         "      settings: {url: '" +
         src_url +
         "', tables: [public.t]}\n"
         "    destinations:\n"
         "      - name: pg\n"
         "        connector: postgres\n"
         "        settings: {url: '" +
         dst_url +
         "', checkpoint_in_destination: true}\n"
         "      - connector: sqlite\n"
         "        settings: {path: out.db}\n"
         "      - name: kafka\n"
         "        connector: kafka\n"
         "        settings:\n"
         "          brokers: '" +
         test::kafka_brokers() +
         "'\n"
         "          topic: " +
         topic +
         "\n"
         "          format: debezium\n"
         "          debezium.tombstones: false\n"
         "          transactions: true\n"
         "          positions.topic: " +
         topic +
         "_positions\n"
         "          transactional.id: " +
         topic +
         "_txn\n"
         "    batch: {max_records: 100, linger_ms: 20}\n"
         "checkpoints: {path: state/checkpoints.db}\n"
         "http: {enabled: false}\n";
}

char op_of(const test::KafkaMessage& m) {
  if (!m.value) return 0;
  const size_t at = m.value->find("\"op\":\"");
  return at == std::string::npos ? 0 : (*m.value)[at + 6];
}

TEST(FanOut, PostgresToPostgresSqliteAndKafkaAtOnceSurvivesKill9) {
  const std::string id = "fan_out_kill";
  pgtest::TestDb src("fanout_src"), dst("fanout_dst");
  ASSERT_TRUE(src.ok());
  ASSERT_TRUE(dst.ok());
  ASSERT_TRUE(
      src.sql().exec("CREATE TABLE t (id int PRIMARY KEY, n int, s text);"
                     "INSERT INTO t SELECT g, g % 97, 'row ' || g FROM generate_series(1, " +
                     std::to_string(kRows) + ") g"));
  const std::string topic = test::unique_topic(id);
  test::TopicsCleanup cleanup({topic, topic + "_positions"});
  auto dir = e2e::make_temp_dir(id);
  e2e::write_file(dir / "p.yaml", fan_out_yaml(id, src.url(), dst.url(), topic));

  // Each stream transaction i (1..60): inserts 20 new rows, updates 10 snapshot rows once each
  // (ids 10i-9 .. 10i), deletes one snapshot row (1000 + i). Every (id, op) happens once.
  auto txn = [](int i) {
    const int first_new = 10000 + 20 * i;
    return "BEGIN; INSERT INTO t SELECT g, 0, 'new' FROM generate_series(" +
           std::to_string(first_new) + ", " + std::to_string(first_new + 19) +
           ") g; UPDATE t SET n = n + 1000, s = 'updated' WHERE id BETWEEN " +
           std::to_string(10 * i - 9) + " AND " + std::to_string(10 * i) +
           "; DELETE FROM t WHERE id = " + std::to_string(1000 + i) + "; COMMIT";
  };
  constexpr int kTxns = 60;
  {
    Process p({"run", "p.yaml"}, dir);
    ASSERT_TRUE(pgtest::wait_for_checkpoint(
        p, dir, id, [](const std::string& c) { return c.starts_with("cdc "); }, 60s))
        << p.stderr_text();
    for (int i = 1; i <= kTxns / 2; ++i) ASSERT_TRUE(src.sql().exec(txn(i)));
    // Mid-stream: some of these transactions are written, at some destinations only.
    std::this_thread::sleep_for(150ms);
    p.kill9();
  }
  for (int i = kTxns / 2 + 1; i <= kTxns; ++i) ASSERT_TRUE(src.sql().exec(txn(i)));
  {
    Process p({"run", "p.yaml", "--idle-exit", "2"}, dir);
    ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
    // Resumed from the anchor's (kafka's, the last that stores positions) position.
    EXPECT_NE(p.stderr_text().find("position stored in the destination"), std::string::npos)
        << p.stderr_text();
  }

  // The keyed destinations equal the source row by row.
  const std::string cols = "SELECT id::text, n::text, s FROM t ORDER BY t.id";
  const auto want = src.sql().query(cols);
  EXPECT_EQ(want.size(), size_t(kRows + 20 * kTxns - kTxns));
  EXPECT_EQ(dst.sql().query("SELECT id::text, n::text, s FROM public.t ORDER BY t.id"), want);
  EXPECT_EQ(
      pgtest::compare_tables(src.sql(), cols, dir / "out.db", "SELECT id, n, s FROM t ORDER BY id"),
      0);
  // Kafka (read_committed): every change once, none twice.
  const size_t expected = size_t(kRows) + size_t(kTxns) * (20 + 10 + 1);
  auto msgs = test::consume_all(topic, expected, 60s, /*read_committed=*/true);
  std::map<std::pair<int64_t, char>, int> seen;
  for (const auto& m : msgs)
    if (auto k = test::key_id(m); k && op_of(m)) ++seen[{*k, op_of(m)}];
  int missing = 0, twice = 0;
  auto expect_once = [&](int64_t key, char op) {
    auto it = seen.find({key, op});
    if (it == seen.end()) {
      if (++missing <= 5) ADD_FAILURE() << "kafka: missing id " << key << " op " << op;
    } else if (it->second > 1) {
      twice += it->second - 1;
    }
  };
  for (int64_t i = 1; i <= kRows; ++i) expect_once(i, 'r');
  for (int i = 1; i <= kTxns; ++i) {
    for (int64_t k = 10000 + 20 * i; k < 10000 + 20 * i + 20; ++k) expect_once(k, 'c');
    for (int64_t k = 10 * i - 9; k <= 10 * i; ++k) expect_once(k, 'u');
    expect_once(1000 + i, 'd');
  }
  EXPECT_EQ(missing, 0);
  EXPECT_EQ(twice, 0);
  EXPECT_EQ(msgs.size(), expected);
  std::filesystem::remove_all(dir);
}

TEST(FanOut, ADestinationThatRejectsRecordsDeadLettersThemAtThatDestinationOnly) {
  const std::string id = "fan_out_dlq";
  pgtest::TestDb src("fanout_dlq_src"), dst("fanout_dlq_dst");
  ASSERT_TRUE(src.ok());
  ASSERT_TRUE(dst.ok());
  ASSERT_TRUE(
      src.sql().exec("CREATE TABLE t (id int PRIMARY KEY, n int);"
                     "INSERT INTO t SELECT g, g FROM generate_series(1, 500) g"));
  // The PostgreSQL destination's table refuses n > 490 (a CHECK the source does not have).
  ASSERT_TRUE(dst.sql().exec("CREATE TABLE t (id int PRIMARY KEY, n int CHECK (n <= 490))"));
  auto dir = e2e::make_temp_dir(id);
  e2e::write_file(dir / "p.yaml",
                  "version: 1\n"
                  "pipelines:\n"
                  "  - id: " +
                      id +
                      "\n"
                      "    source:\n"
                      "      connector: postgres\n"
                      "      settings: {url: '" +
                      src.url() +
                      "', tables: [public.t]}\n"
                      "    destinations:\n"
                      "      - connector: postgres\n"
                      "        settings: {url: '" +
                      dst.url() +
                      "'}\n"
                      "        on_error: dlq\n"
                      "        dlq: {connector: file, settings: {path: rejected.jsonl}}\n"
                      "      - connector: sqlite\n"
                      "        settings: {path: out.db}\n"
                      "    batch: {max_records: 100}\n"
                      "checkpoints: {path: state/checkpoints.db}\n"
                      "http: {enabled: false}\n");
  {
    Process p({"run", "p.yaml", "--idle-exit", "1"}, dir);
    ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
    EXPECT_NE(p.stderr_text().find("destination postgres-0 (postgres): "), std::string::npos)
        << p.stderr_text();
  }
  EXPECT_EQ(dst.sql().query("SELECT count(*)::text, max(n)::text FROM t"),
            (std::vector<pgtest::Row>{{"490", "490"}}));
  // SQLite, without a rule of its own, has every row.
  EXPECT_EQ(pgtest::compare_tables(src.sql(), "SELECT id::text, n::text FROM t ORDER BY t.id",
                                   dir / "out.db", "SELECT id, n FROM t ORDER BY id"),
            0);
  const auto rejected = test::lines_of(e2e::read_file(dir / "rejected.jsonl"));
  ASSERT_EQ(rejected.size(), 10u);
  EXPECT_NE(rejected[0].find("\"sluice.destination_name\":\"postgres-0\""), std::string::npos)
      << rejected[0];
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sluice
