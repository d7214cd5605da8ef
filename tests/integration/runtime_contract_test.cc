// The runtime contract (include/sluice/connector.h) against real destinations, through the binary:
// - a destination that stores positions (sqlite with checkpoint_in_destination) ends at the same
//   position as the checkpoint store when processors emptied the last batches, and when the
//   last records of a batch went to the dead-letter queue — so a restart does not rewind;
// - a record the Kafka broker refuses in an asynchronous delivery report goes to the dead-letter
//   queue with `on_error: dlq` like one refused synchronously (before, it stopped the pipeline).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <set>

#include "integration/pg_harness.h"
#include "kafka_harness.h"

namespace sluice::pgtest {
namespace {

using e2e::Db;
using e2e::make_temp_dir;
using e2e::read_file;
using e2e::run_sluice;
using e2e::write_file;

// `n` create records of table items, ids 1..n; the ids in `keyless` have no key (the sqlite
// destination rejects them: it upserts by key).
std::string input_lines(int n, std::set<int> keyless = {}) {
  std::string out;
  for (int i = 1; i <= n; ++i) {
    std::string key = keyless.count(i) ? "" : "\"key\":{\"id\":" + std::to_string(i) + "},";
    out += "{\"operation\":\"create\",\"metadata\":{\"table\":\"items\"}," + key +
           "\"payload\":{\"after\":{\"id\":" + std::to_string(i) + ",\"v\":\"x" +
           std::to_string(i) + "\"}}}\n";
  }
  return out;
}

std::string pipeline_file(const std::string& extra, size_t max_records) {
  return "version: 1\npipelines:\n  - id: rc\n    source: {connector: file, settings: {path: in.jsonl}}\n"
         "    destination: {connector: sqlite, settings: {path: out.db, checkpoint_in_destination: true}}\n"
         "    batch: {max_records: " +
         std::to_string(max_records) + "}\n" + extra +
         "checkpoints: {path: state/checkpoints.db}\nhttp: {enabled: false}\n";
}

std::string stored_in_destination(const std::filesystem::path& dir) {
  Db db(dir / "out.db");
  return db.text("SELECT CAST(position AS TEXT) FROM sluice_checkpoints WHERE pipeline = 'rc'");
}

// Runs the pipeline twice: the second run must find the destination's position equal to the
// checkpoint store's (no rewind) and write nothing.
void expect_positions_agree_across_a_restart(const std::filesystem::path& dir) {
  const std::string checkpoint = checkpoint_of(dir, "rc");
  ASSERT_FALSE(checkpoint.empty());
  EXPECT_EQ(stored_in_destination(dir), checkpoint)
      << "the destination's stored position fell behind";
  ASSERT_EQ(run_sluice({"run", "p.yaml"}, dir), 0) << read_file(dir / "stderr.txt");
  const std::string err = read_file(dir / "stderr.txt");
  EXPECT_EQ(err.find("differs from the checkpoint store"), std::string::npos) << err;
  EXPECT_NE(err.find("0 read, 0 written"), std::string::npos) << err;
  EXPECT_EQ(checkpoint_of(dir, "rc"), checkpoint);
}

TEST(RuntimeContract, BatchesEmptiedByProcessorsAdvanceTheDestinationsStoredPosition) {
  auto dir = make_temp_dir("rc-filtered");
  write_file(dir / "in.jsonl", input_lines(20));
  // Batches of 5: ids 11..20 are dropped, so the last two batches reach the destination empty.
  write_file(
      dir / "p.yaml",
      pipeline_file("    processors:\n"
                    "      - {type: filter, settings: {field: after.id, op: le, value: \"10\"}}\n",
                    5));
  ASSERT_EQ(run_sluice({"run", "p.yaml"}, dir), 0) << read_file(dir / "stderr.txt");
  EXPECT_EQ(Db(dir / "out.db").scalar("SELECT count(*) FROM items"), 10);
  expect_positions_agree_across_a_restart(dir);
}

TEST(RuntimeContract, DeadLetteringTheLastRecordsOfABatchStillCommitsItsPosition) {
  for (const std::set<int>& keyless :
       {std::set<int>{18}, std::set<int>{20}, std::set<int>{19, 20}}) {
    SCOPED_TRACE(::testing::PrintToString(keyless));
    auto dir = make_temp_dir("rc-dlq");
    write_file(dir / "in.jsonl", input_lines(20, keyless));
    write_file(
        dir / "p.yaml",
        pipeline_file(
            "    on_error: dlq\n    dlq: {connector: file, settings: {path: dead.jsonl}}\n", 8));
    ASSERT_EQ(run_sluice({"run", "p.yaml"}, dir), 0) << read_file(dir / "stderr.txt");
    EXPECT_EQ(Db(dir / "out.db").scalar("SELECT count(*) FROM items"),
              int64_t(20 - keyless.size()));
    size_t dead = 0;
    for (char c : read_file(dir / "dead.jsonl")) dead += c == '\n';
    EXPECT_EQ(dead, keyless.size());
    expect_positions_agree_across_a_restart(dir);
  }
}

// Many rejects in one batch (issue 13): 2,000 records, 1,333 of which PostgreSQL refuses (text
// into a bigint column). The destination isolates them in one pass (a savepoint per record), the
// dead-letter queue — a PostgreSQL table — gets them in one write with the reason in a column,
// and the log has one summary line for the batch. (Speed is measured, not asserted: the elapsed
// time is printed.)
TEST(RuntimeContract, ManyRejectedRecordsGoToASqlDeadLetterTableInOnePassWithTheirReason) {
  TestDb db("rc_many_rejects");
  ASSERT_TRUE(db.ok());
  auto dir = make_temp_dir("rc-many-rejects");
  std::string in;
  int accepted = 0;
  for (int i = 1; i <= 2000; ++i) {
    const bool ok = i % 3 == 1;
    accepted += ok;
    in += "{\"operation\":\"create\",\"metadata\":{\"table\":\"items\"},\"key\":{\"id\":" +
          std::to_string(i) + "},\"payload\":{\"after\":{\"id\":" + std::to_string(i) +
          ",\"v\":" + (ok ? std::to_string(i) : "\"not a number\"") + "}}}\n";
  }
  write_file(dir / "in.jsonl", in);
  test::PipelineFile f;
  test::PipelineYaml& p = f.pipeline("rc");
  p.source("file").set("path", "in.jsonl");
  p.destination("postgres").set("url", db.url());
  p.max_records(2000);
  p.on_error = "dlq";
  p.dlq("postgres").set("url", db.url()).set("table", "dead_letters");
  write_file(dir / "p.yaml", f.yaml());
  // The table exists with v bigint, so that every text value is refused.
  ASSERT_TRUE(db.sql().exec("CREATE TABLE items (id bigint PRIMARY KEY, v bigint)"));
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(run_sluice({"run", "p.yaml"}, dir), 0) << read_file(dir / "stderr.txt");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "2000 records, " << 2000 - accepted << " rejected: " << seconds << " s\n";
  EXPECT_EQ(db.sql().scalar("SELECT count(*) FROM items"), std::to_string(accepted));
  EXPECT_EQ(db.sql().scalar("SELECT count(*) FROM items WHERE id % 3 <> 1"), "0");
  EXPECT_EQ(db.sql().scalar("SELECT count(*) FROM dead_letters"), std::to_string(2000 - accepted));
  // The reason, in a column of the dead-letter table.
  EXPECT_EQ(db.sql().scalar("SELECT count(*) FROM dead_letters WHERE sluice_error LIKE "
                            "'%invalid input syntax for type bigint%' AND v = 'not a number'"),
            std::to_string(2000 - accepted));
  const std::string err = read_file(dir / "stderr.txt");
  size_t lines = 0;
  for (size_t at = err.find("sent to the dead-letter queue"); at != std::string::npos;
       at = err.find("sent to the dead-letter queue", at + 1))
    ++lines;
  EXPECT_EQ(lines, 1u) << err;
  EXPECT_NE(err.find("1333 of 2000 records sent to the dead-letter queue"), std::string::npos)
      << err;
  std::filesystem::remove_all(dir);
}

// The destinations' side of the contract: an empty batch with a position commits the position.
void expect_empty_batch_commits_its_position(const std::string& connector,
                                             std::map<std::string, std::string> settings) {
  const std::string pipeline = "rc_empty_" + std::to_string(::getpid());
  auto open = [&]() -> std::unique_ptr<Destination> {
    const ConnectorSpec* spec = Registry::builtin().connector(connector);
    Settings s(spec->destination_settings);
    auto err = settings_from_text(spec->destination_settings, settings, &s);
    EXPECT_FALSE(err.has_value()) << *err;
    auto d = spec->make_destination(s);
    EXPECT_TRUE(d.ok()) << d.error().message();
    if (!d.ok()) return nullptr;
    Status st = d.value()->open(ConnectorContext{pipeline, connector, nullptr});
    EXPECT_TRUE(st.ok()) << st.error().message();
    return st.ok() ? std::move(d.value()) : nullptr;
  };
  auto d = open();
  ASSERT_TRUE(d);
  ASSERT_TRUE(d->stores_positions());
  for (const std::string position : {"pos-1", "pos-2"}) {
    Batch empty;
    empty.set_position(position);
    Status result = Error(Errc::internal, "done not called");
    d->write(empty, [&](Status st) { result = std::move(st); });
    ASSERT_TRUE(result.ok()) << result.error().message();
  }
  d->close();
  auto again = open();
  ASSERT_TRUE(again);
  auto stored = again->stored_position(pipeline);
  ASSERT_TRUE(stored.ok()) << stored.error().message();
  EXPECT_EQ(stored.value(), std::optional<std::string>("pos-2"));
  again->close();
}

TEST(RuntimeContract, AnEmptyBatchCommitsItsPositionInSqlite) {
  auto dir = make_temp_dir("rc-empty-sqlite");
  expect_empty_batch_commits_its_position(
      "sqlite", {{"path", (dir / "out.db").string()}, {"checkpoint_in_destination", "true"}});
}

TEST(RuntimeContract, AnEmptyBatchCommitsItsPositionInPostgres) {
  TestDb db("rc_empty_" + std::to_string(::getpid()));
  ASSERT_TRUE(db.ok());
  expect_empty_batch_commits_its_position(
      "postgres", {{"url", db.url()}, {"checkpoint_in_destination", "true"}});
}

TEST(RuntimeContract, AnEmptyBatchCommitsItsPositionInMysql) {
  const char* url = std::getenv("SLUICE_TEST_MYSQL_URL");
  ASSERT_TRUE(url && *url) << "SLUICE_TEST_MYSQL_URL is not set";
  expect_empty_batch_commits_its_position("mysql",
                                          {{"url", url}, {"checkpoint_in_destination", "true"}});
}

TEST(RuntimeContract, AnEmptyBatchCommitsItsPositionInKafkaWithTransactions) {
  const std::string positions = test::unique_topic("rc_empty_positions");
  test::TopicsCleanup cleanup({positions});
  expect_empty_batch_commits_its_position("kafka", {{"brokers", test::kafka_brokers()},
                                                    {"transactions", "true"},
                                                    {"positions.topic", positions}});
}

TEST(RuntimeContract, ARecordTheKafkaBrokerRefusesAsynchronouslyGoesToTheDeadLetterQueue) {
  TestDb db("rc_kafka_dlq");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec(
      "CREATE TABLE t (id int PRIMARY KEY, s text);"
      "INSERT INTO t SELECT g, CASE WHEN g = 5 THEN (SELECT string_agg(md5(i::text), '') "
      "FROM generate_series(1, 160) i) ELSE 'ok' END "
      "FROM generate_series(1, 10) g"));
  const std::string topic = test::unique_topic("rc_kafka_dlq");
  test::TopicsCleanup cleanup({topic});
  // The broker refuses records above 2,000 bytes; the producer's own limit (1 MB) lets it
  // through, so the refusal arrives in a delivery report, after write() returned.
  test::create_topic(topic, 1, {{"max.message.bytes", "2000"}});
  test::KafkaPipelineFile f;
  f.id = "rc_kafka_dlq";
  f.pg_url = db.url();
  f.tables = {"public.t"};
  f.source_settings = {{"snapshot.mode", "initial_only"}};
  // With compression and its size check off, sluice does not refuse the record by the topic's
  // limit itself; 5,120 hex digits of md5 do not compress below 2,000 bytes.
  f.destination_settings = {
      {"topic", topic}, {"compression", "lz4"}, {"compression.size_check", "false"}};
  f.pipeline_extra = {{"on_error", "dlq"},
                      {"dlq", "{connector: file, settings: {path: dead.jsonl}}"}};
  auto dir = make_temp_dir("rc-kafka-dlq");
  write_file(dir / "p.yaml", f.yaml());
  e2e::Process p({"run", "p.yaml"}, dir);
  const int rc = p.wait_for(120s);
  ASSERT_EQ(rc, 0) << p.stderr_text();
  const std::string dead = read_file(dir / "dead.jsonl");
  EXPECT_NE(dead.find("\"id\":5"), std::string::npos) << dead;
  EXPECT_NE(dead.find("delivery to '" + topic + "' failed"), std::string::npos) << dead;
  size_t lines = 0;
  for (char c : dead) lines += c == '\n';
  EXPECT_EQ(lines, 1u) << dead;
  std::set<int64_t> ids;
  for (const auto& m : test::consume_all(topic, 9, 30s))
    if (auto id = test::key_id(m)) ids.insert(*id);
  EXPECT_EQ(ids, (std::set<int64_t>{1, 2, 3, 4, 6, 7, 8, 9, 10}));
  EXPECT_FALSE(checkpoint_of(dir, "rc_kafka_dlq").empty())
      << "the batch with the refused record was acknowledged";
}

}  // namespace
}  // namespace sluice::pgtest
