// The kafka destination through the sluice binary, PostgreSQL → Kafka against the real test
// servers: Debezium envelopes (snapshot, insert, update, delete + tombstone, truncate), OpenCDC
// values with every compression codec, a topic template creating one topic per table, a 1 MB
// message, an oversized record routed to the dead-letter queue, and wrong brokers; each message's
// timestamp is its batch's CreateTime, within the run. Every test
// consumes what actually arrived in the topic.
#include <gtest/gtest.h>

#include <set>

#include "integration/pg_harness.h"
#include "kafka_harness.h"
#include "sluice/json.h"

namespace sluice::pgtest {
namespace {

using e2e::Process;
using test::KafkaMessage;
using test::KafkaPipelineFile;

std::string run_ok(const std::filesystem::path& dir, std::chrono::seconds timeout = 120s) {
  Process p({"run", "p.yaml", "--idle-exit", "2"}, dir);
  const int rc = p.wait_for(timeout);
  EXPECT_EQ(rc, 0) << p.stderr_text();
  return p.stderr_text();
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(KafkaDestination, DebeziumEnvelopesFromSnapshotAndChanges) {
  TestDb db("kd_debezium");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec(
      "CREATE TABLE items (id int PRIMARY KEY, name text, price numeric(8,2), day date, at timestamptz);"
      "INSERT INTO items VALUES (1, 'one', 1.50, '2024-01-02', '2024-01-02 03:04:05+00'), (2, 'two', 2.00, NULL, NULL)"));
  const std::string prefix = test::unique_topic("kd_dbz");
  const std::string topic = prefix + ".public.items";
  test::TopicsCleanup cleanup({topic});
  KafkaPipelineFile f;
  f.id = "kd_debezium";
  f.pg_url = db.url();
  f.tables = {"public.items"};
  f.destination_settings = {{"format", "debezium"}, {"topic.prefix", prefix}, {"headers", "true"}};
  auto dir = e2e::make_temp_dir("kd-debezium");
  e2e::write_file(dir / "p.yaml", f.yaml());

  Process p({"run", "p.yaml", "--idle-exit", "3"}, dir);
  ASSERT_TRUE(wait_for_checkpoint(p, dir, "kd_debezium", [](const std::string& c) {
    return starts_with(c, "cdc ");
  })) << p.stderr_text();
  ASSERT_TRUE(db.sql().exec("INSERT INTO items VALUES (3, 'three', 3.25, '1970-01-04', NULL)"));
  ASSERT_TRUE(db.sql().exec("UPDATE items SET name = 'uno' WHERE id = 1"));
  ASSERT_TRUE(db.sql().exec("DELETE FROM items WHERE id = 2"));
  ASSERT_TRUE(db.sql().exec("TRUNCATE items"));
  ASSERT_EQ(p.wait_for(120s), 0) << p.stderr_text();

  // 2 snapshot rows, insert, update, delete + tombstone, truncate.
  auto msgs = test::consume_all(topic, 7);
  ASSERT_EQ(msgs.size(), 7u);
  auto op_of = [](const KafkaMessage& m) -> std::string {
    if (!m.value) return "tombstone";
    size_t at = m.value->rfind("\"op\":\"");
    return at == std::string::npos ? "?" : m.value->substr(at + 6, 1);
  };
  std::vector<std::string> ops;
  for (const auto& m : msgs) ops.push_back(op_of(m));
  EXPECT_EQ(ops, (std::vector<std::string>{"r", "r", "c", "u", "d", "tombstone", "t"}));
  EXPECT_EQ(*msgs[0].key, "{\"id\":1}");
  EXPECT_EQ(*msgs[1].key, "{\"id\":2}");
  EXPECT_EQ(*msgs[2].key, "{\"id\":3}");
  EXPECT_EQ(*msgs[4].key, "{\"id\":2}");
  EXPECT_EQ(*msgs[5].key, "{\"id\":2}");  // the tombstone keeps the key
  EXPECT_FALSE(msgs[6].key.has_value());  // truncate: null key
  const std::string& r1 = *msgs[0].value;
  EXPECT_TRUE(
      has(r1,
          "{\"before\":null,\"after\":{\"id\":1,\"name\":\"one\",\"price\":\"1.50\",\"day\":19724,"
          "\"at\":\"2024-01-02T03:04:05Z\"}"))
      << r1;
  EXPECT_TRUE(has(r1, "\"snapshot\":\"true\"")) << r1;
  EXPECT_TRUE(has(r1, "\"name\":\"" + prefix + "\"")) << r1;
  EXPECT_TRUE(has(r1, "\"schema\":\"public\",\"table\":\"items\"")) << r1;
  EXPECT_TRUE(
      has(*msgs[2].value,
          "\"after\":{\"id\":3,\"name\":\"three\",\"price\":\"3.25\",\"day\":3,\"at\":null}"))
      << *msgs[2].value;
  EXPECT_TRUE(has(*msgs[2].value, "\"snapshot\":\"false\"")) << *msgs[2].value;
  EXPECT_TRUE(has(*msgs[2].value, "\"txId\":")) << *msgs[2].value;
  EXPECT_FALSE(has(*msgs[2].value, "\"txId\":null")) << *msgs[2].value;
  EXPECT_FALSE(has(*msgs[2].value, "\"lsn\":null")) << *msgs[2].value;
  EXPECT_TRUE(has(*msgs[3].value, "\"after\":{\"id\":1,\"name\":\"uno\"")) << *msgs[3].value;
  EXPECT_TRUE(has(*msgs[4].value, "\"before\":{\"id\":2},\"after\":null")) << *msgs[4].value;
  EXPECT_TRUE(has(*msgs[6].value, "\"before\":null,\"after\":null")) << *msgs[6].value;
  // Metadata as headers.
  EXPECT_EQ(msgs[2].header("table"), "items");
  EXPECT_EQ(msgs[2].header("schema"), "public");
  EXPECT_FALSE(msgs[2].header("commit_lsn").empty());
}

class KafkaCompression : public ::testing::TestWithParam<std::string> {};

TEST_P(KafkaCompression, OpenCdcRecordsArriveWithEveryCodec) {
  const std::string codec = GetParam();
  TestDb db("kd_codec_" + codec);
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec(
      "CREATE TABLE t (id int PRIMARY KEY, s text);"
      "INSERT INTO t SELECT g, repeat('x', g % 300) FROM generate_series(1, 3000) g"));
  const std::string topic = test::unique_topic("kd_codec_" + codec);
  test::TopicsCleanup cleanup({topic});
  KafkaPipelineFile f;
  f.id = "kd_codec_" + codec;
  f.pg_url = db.url();
  f.tables = {"public.t"};
  f.source_settings = {{"snapshot.mode", "initial_only"}};
  f.destination_settings = {{"topic", topic}, {"compression", codec}, {"headers", "false"}};
  auto dir = e2e::make_temp_dir("kd-codec");
  e2e::write_file(dir / "p.yaml", f.yaml());
  const auto wall_ms = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  const int64_t started = wall_ms();
  run_ok(dir);
  const int64_t ended = wall_ms();

  auto msgs = test::consume_all(topic, 3000);
  ASSERT_EQ(msgs.size(), 3000u);
  std::set<int64_t> ids;
  for (const auto& m : msgs) {
    auto id = test::key_id(m);
    ASSERT_TRUE(id.has_value()) << (m.key ? *m.key : "null key");
    ids.insert(*id);
    EXPECT_TRUE(m.headers.empty());
    // The producer's time of the message's batch (CreateTime), within the run.
    EXPECT_TRUE(m.create_time);
    EXPECT_GE(m.timestamp_ms, started);
    EXPECT_LE(m.timestamp_ms, ended);
    // The value is the OpenCDC record line: it decodes back to the row.
    Batch b;
    ASSERT_TRUE(decode_record_json(*m.value, b).ok()) << *m.value;
    ASSERT_EQ(b.size(), 1u);
    EXPECT_EQ(b.records()[0].op, Operation::snapshot);
    const Value* s = b.records()[0].after.find("s");
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->as_text().size(), size_t(*id % 300));
  }
  EXPECT_EQ(ids.size(), 3000u);
  EXPECT_EQ(*ids.begin(), 1);
  EXPECT_EQ(*ids.rbegin(), 3000);
}

INSTANTIATE_TEST_SUITE_P(Codecs, KafkaCompression,
                         ::testing::Values("none", "lz4", "zstd", "snappy", "gzip"));

TEST(KafkaDestination, TopicTemplateCreatesOneTopicPerTable) {
  TestDb db("kd_template");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec(
      "CREATE TABLE a (id int PRIMARY KEY); CREATE TABLE b (id int PRIMARY KEY);"
      "INSERT INTO a SELECT generate_series(1, 10); INSERT INTO b SELECT generate_series(1, 20)"));
  const std::string base = test::unique_topic("kd_tpl");
  test::TopicsCleanup cleanup({base + "-public-a", base + "-public-b"});
  KafkaPipelineFile f;
  f.id = "kd_template";
  f.pg_url = db.url();
  f.tables = {"public.a", "public.b"};
  f.source_settings = {{"snapshot.mode", "initial_only"}};
  f.destination_settings = {{"topic", "\"" + base + "-{{schema}}-{{table}}\""}};
  auto dir = e2e::make_temp_dir("kd-template");
  e2e::write_file(dir / "p.yaml", f.yaml());
  run_ok(dir);
  EXPECT_EQ(test::consume_all(base + "-public-a", 10).size(), 10u);
  EXPECT_EQ(test::consume_all(base + "-public-b", 20).size(), 20u);
}

TEST(KafkaDestination, AOneMegabyteMessage) {
  TestDb db("kd_big");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(
      db.sql().exec("CREATE TABLE t (id int PRIMARY KEY, s text);"
                    "INSERT INTO t VALUES (1, repeat('a', 1048576)), (2, 'small')"));
  const std::string topic = test::unique_topic("kd_big");
  test::TopicsCleanup cleanup({topic});
  test::create_topic(topic, 1, {{"max.message.bytes", "4194304"}});
  KafkaPipelineFile f;
  f.id = "kd_big";
  f.pg_url = db.url();
  f.tables = {"public.t"};
  f.source_settings = {{"snapshot.mode", "initial_only"}};
  f.destination_settings = {
      {"topic", topic}, {"compression", "lz4"}, {"rdkafka.message.max.bytes", "4194304"}};
  auto dir = e2e::make_temp_dir("kd-big");
  e2e::write_file(dir / "p.yaml", f.yaml());
  run_ok(dir);
  auto msgs = test::consume_all(topic, 2);
  ASSERT_EQ(msgs.size(), 2u);
  EXPECT_GT(msgs[0].value->size(), 1048576u);
  EXPECT_TRUE(has(*msgs[0].value, std::string(1048576, 'a')));
  EXPECT_TRUE(has(*msgs[1].value, "small"));
}

TEST(KafkaDestination, AnOversizedRecordGoesToTheDeadLetterQueueAndTheRestLands) {
  TestDb db("kd_dlq");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec(
      "CREATE TABLE t (id int PRIMARY KEY, s text);"
      "INSERT INTO t SELECT g, CASE WHEN g = 37 THEN repeat('z', 1500000) ELSE 'ok' END "
      "FROM generate_series(1, 100) g"));
  const std::string topic = test::unique_topic("kd_dlq");
  test::TopicsCleanup cleanup({topic});
  KafkaPipelineFile f;
  f.id = "kd_dlq";
  f.pg_url = db.url();
  f.tables = {"public.t"};
  f.source_settings = {{"snapshot.mode", "initial_only"}};
  f.destination_settings = {{"topic", topic}, {"format", "debezium"}};
  f.pipeline_extra = {{"on_error", "dlq"},
                      {"dlq", "{connector: file, settings: {path: dlq.jsonl}}"}};
  auto dir = e2e::make_temp_dir("kd-dlq");
  e2e::write_file(dir / "p.yaml", f.yaml());
  run_ok(dir);
  auto msgs = test::consume_all(topic, 99);
  ASSERT_EQ(msgs.size(), 99u);
  std::set<int64_t> ids;
  for (const auto& m : msgs) ids.insert(test::key_id(m).value_or(-1));
  EXPECT_EQ(ids.size(), 99u);
  EXPECT_EQ(ids.count(37), 0u);
  // format debezium writes no headers unless asked, as Debezium does.
  for (const auto& m : msgs) EXPECT_TRUE(m.headers.empty()) << m.headers.size();
  const auto dlq = lines_of(e2e::read_file(dir / "dlq.jsonl"));
  ASSERT_EQ(dlq.size(), 1u);
  EXPECT_TRUE(has(dlq[0], "\"id\":37")) << dlq[0].substr(0, 300);
  EXPECT_TRUE(has(dlq[0], "message.max.bytes")) << dlq[0].substr(0, 300);
}

TEST(KafkaDestination, WrongBrokersFailWithOneLineNamingTheFix) {
  TestDb db("kd_wrong");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id int PRIMARY KEY)"));
  auto dir = e2e::make_temp_dir("kd-wrong");
  test::PipelineFile f;
  f.pipeline("kd_wrong")
      .source("postgres")
      .set("url", db.url())
      .set("tables", test::Yaml::strings({"public.t"}));
  f.pipeline("kd_wrong").destination("kafka").set("brokers", "127.0.0.1:1");
  std::string yaml = f.yaml();
  e2e::write_file(dir / "p.yaml", yaml);
  Process p({"run", "p.yaml"}, dir);
  const int rc = p.wait_for(60s);
  EXPECT_NE(rc, 0);
  EXPECT_NE(rc, -1) << "still running";
  const std::string err = p.stderr_text();
  std::vector<std::string> errors;
  for (const auto& l : lines_of(err))
    if (is_error_log_line(l)) errors.push_back(l);
  ASSERT_EQ(errors.size(), 1u) << err;
  EXPECT_TRUE(has(errors[0], "kafka destination: cannot reach Kafka at 127.0.0.1:1")) << errors[0];
  EXPECT_TRUE(has(errors[0], "check `brokers`")) << errors[0];
}

}  // namespace
}  // namespace sluice::pgtest
