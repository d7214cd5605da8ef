// Dead-letter isolation of the kafka destination in one pass (issue 13, item 16): records too
// large for the topic go to the dead-letter queue — refused before producing, or identified by
// their own message's delivery report when the broker refuses them, never by halving the batch —
// the others land, and each batch logs one summary line. With `transactions: true` a
// refused message aborts the whole transaction: the batch is written again without the refused
// records, so read_committed consumers see every other record exactly once.
#include <gtest/gtest.h>

#include <set>

#include "e2e/harness.h"
#include "support/env.h"
#include "support/kafka.h"
#include "support/pipeline_file.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

// Where the limit is enforced: by sluice before producing, against the producer's own
// rdkafka.message.max.bytes (client) or against the topic's max.message.bytes read from the
// broker at the topic's first use (topic; the fast paths: 1,000 refusals in 3,000 records), or
// against that limit after compressing the message on its own with the topic's codec (compressed:
// lz4, values that do not compress, and large ones that do, which must land), or by the broker
// itself (broker: the same with compression.size_check off; each refusal costs librdkafka's
// idempotent producer an epoch bump, and a transaction its abort, so fewer records).
enum class Where { client, topic, compressed, broker };
struct Case {
  int records;
  int every;  // every n-th record is too large (2,500 bytes)
  Where where;
  bool transactions;
  bool dlq = true;  // false: on_error stays stop
};

// 2,500 bytes lz4 cannot shrink below the topic's 2,048: pseudo-random hex digits.
std::string incompressible(int id) {
  std::string v(2500, '0');
  uint64_t x = 0x9e3779b97f4a7c15ull * uint64_t(id + 1);
  for (char& c : v) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = "0123456789abcdef"[x & 15];
  }
  return v;
}

constexpr size_t kMaxRecords = 1000;  // per batch

void write_input(const std::filesystem::path& path, const Case& c) {
  std::string lines;
  for (int id = 1; id <= c.records; ++id) {
    const bool lz4 = c.where == Where::broker || c.where == Where::compressed;
    std::string v = id % c.every != 0 ? std::string(lz4 && id % c.every == 1 ? 2500 : 20, 'v')
                    : lz4             ? incompressible(id)
                                      : std::string(2500, 'v');
    lines += opencdc_json("create", "t", id, v) + "\n";
  }
  write_file(path, lines);
}

struct Outcome {
  std::string stderr_text;
  std::vector<std::string> dead;  // dead-letter lines
};

Outcome run_pipeline(const Case& c, const std::string& topic, const std::string& positions_topic) {
  TempDir dir(c.transactions ? "kafka-dlq-txn" : "kafka-dlq");
  write_input(dir / "in.jsonl", c);
  PipelineFile f;
  f.checkpoints_path = "cp.db";
  PipelineYaml& p = f.pipeline("kdl");
  p.source("file").set("path", "in.jsonl");
  auto& d = p.destination("kafka").set("brokers", kafka_brokers()).set("topic", topic);
  // The broker checks max.message.bytes per record batch: with the limit known (topic) sluice
  // lowers batch.size itself, otherwise batches are kept below it here.
  if (c.where != Where::topic) d.set("batch.size", "1500B");
  if (c.where == Where::client) d.set("rdkafka.message.max.bytes", "2048");
  if (c.where == Where::broker || c.where == Where::compressed) d.set("compression", "lz4");
  else d.set("compression", "none");  // the limits checked on the uncompressed size
  if (c.where == Where::broker) d.set("compression.size_check", false);
  // Its own transactional.id: cases running at the same time (ctest -j) must not fence each other.
  if (c.transactions)
    d.set("transactions", true)
        .set("positions.topic", positions_topic)
        .set("transactional.id", unique_topic("kdl-txn"));
  p.max_records(kMaxRecords);
  if (c.dlq) {
    p.on_error = "dlq";
    p.dlq("file").set("path", "dead.jsonl");
  }
  f.write(dir / "p.yaml");
  e2e::Process proc({"run", "p.yaml", "--idle-exit", "1"}, dir.path());
  const int rc = proc.wait_for(60s);
  if (c.dlq) EXPECT_EQ(rc, 0) << proc.stderr_text();
  else EXPECT_NE(rc, 0) << proc.stderr_text();
  Outcome out{proc.stderr_text(), {}};
  if (std::filesystem::exists(dir / "dead.jsonl"))
    out.dead = lines_of(read_file(dir / "dead.jsonl"));
  return out;
}

void run_case(const Case& c) {
  const std::string topic = unique_topic("kdl"), positions = unique_topic("kdl-positions");
  TopicsCleanup cleanup({topic, positions});
  create_topic(topic, 1, {{"max.message.bytes", "2048"}});
  const Outcome out = run_pipeline(c, topic, c.transactions ? positions : "");
  std::set<int64_t> want_landed, want_dead;
  for (int id = 1; id <= c.records; ++id) (id % c.every ? want_landed : want_dead).insert(id);
  const std::vector<KafkaMessage> msgs = consume_all(topic, want_landed.size());
  std::set<int64_t> landed;
  for (const KafkaMessage& m : msgs) landed.insert(key_id(m).value_or(-1));
  EXPECT_EQ(landed, want_landed);
  // Transactions: read_committed sees each record once (the refused transaction was aborted).
  // Without: a batch's accepted messages may land twice (before and in the isolation).
  if (c.transactions) {
    EXPECT_EQ(msgs.size(), want_landed.size());
  }
  std::set<int64_t> dead;
  for (const std::string& line : out.dead) {
    const size_t at = line.find("\"key\":{\"id\":");
    ASSERT_NE(at, std::string::npos) << line.substr(0, 300);
    dead.insert(std::stoll(line.substr(at + 12)));
    const char* why = c.where == Where::broker       ? "MSG_SIZE_TOO_LARGE"
                      : c.where == Where::compressed ? "after lz4 compression, above the topic's"
                      : c.where == Where::topic      ? "above the topic's max.message.bytes"
                                                     : "above message.max.bytes";
    EXPECT_NE(line.find(why), std::string::npos) << line.substr(0, 300);
  }
  EXPECT_EQ(out.dead.size(), want_dead.size());
  EXPECT_EQ(dead, want_dead);
  // One summary line per batch with refusals, never one per record.
  size_t summaries = 0;
  for (const std::string& line : lines_of(out.stderr_text))
    if (line.find("sent to the dead-letter queue by the kafka destination") != std::string::npos)
      ++summaries;
  EXPECT_GE(summaries, 1u) << out.stderr_text;
  EXPECT_LE(summaries, size_t(c.records) / kMaxRecords + 1) << out.stderr_text;
}

TEST(KafkaDeadLetters, RecordsAboveMessageMaxBytesAreIsolatedInOnePass) {
  run_case({3000, 3, Where::client, false});
}

TEST(KafkaDeadLetters, RecordsAboveMessageMaxBytesWithTransactionsLandExactlyOnce) {
  run_case({3000, 3, Where::client, true});
}

TEST(KafkaDeadLetters, RecordsAboveTheTopicsLimitAreRefusedBeforeProducing) {
  run_case({3000, 3, Where::topic, false});
}

TEST(KafkaDeadLetters, RecordsAboveTheTopicsLimitWithTransactionsLandExactlyOnce) {
  run_case({3000, 3, Where::topic, true});
}

// With compression the broker checks the compressed batch: a message too large even compressed
// on its own is refused before producing; a large one that compresses below the limit lands.
TEST(KafkaDeadLetters, RecordsTooLargeEvenCompressedAreRefusedBeforeProducing) {
  run_case({3000, 3, Where::compressed, false});
}

TEST(KafkaDeadLetters, RecordsTooLargeEvenCompressedWithTransactionsLandExactlyOnce) {
  run_case({3000, 3, Where::compressed, true});
}

TEST(KafkaDeadLetters, RecordsTheBrokerRefusesAreIsolatedByTheirOwnDeliveryReports) {
  run_case({60, 10, Where::broker, false});
}

// Without a dead-letter queue the first refused record stops the pipeline at once (no retry
// without end), with one error line naming the topic and the setting; the refused transaction
// was aborted, so read_committed consumers see nothing of its batch.
void run_stop_case(const Case& c, const char* why) {
  const std::string topic = unique_topic("kdl"), positions = unique_topic("kdl-positions");
  TopicsCleanup cleanup({topic, positions});
  create_topic(topic, 1, {{"max.message.bytes", "2048"}});
  const auto started = std::chrono::steady_clock::now();
  const Outcome out = run_pipeline(c, topic, c.transactions ? positions : "");
  EXPECT_LT(std::chrono::steady_clock::now() - started, 30s);
  size_t naming = 0;
  for (const std::string& line : lines_of(out.stderr_text))
    if (line.find("error") != std::string::npos && line.find(topic) != std::string::npos &&
        line.find(why) != std::string::npos && line.find("max.message.bytes") != std::string::npos)
      ++naming;
  EXPECT_GE(naming, 1u) << out.stderr_text;
  EXPECT_TRUE(out.dead.empty());
  EXPECT_TRUE(consume_all(topic, 1, 3s).empty());  // one batch, aborted
}

TEST(KafkaDeadLetters, WithoutADeadLetterQueueARecordAboveTheTopicsLimitStopsThePipeline) {
  run_stop_case({60, 10, Where::topic, true, false}, "above the topic's max.message.bytes");
}

TEST(KafkaDeadLetters, WithoutADeadLetterQueueARecordTheBrokerRefusesStopsThePipeline) {
  run_stop_case({60, 10, Where::broker, true, false}, "MSG_SIZE_TOO_LARGE");
}

// A compacted topic refuses messages without a key: sluice knows it from the topic's
// cleanup.policy and sends such records to the dead-letter queue before producing; the keyed
// ones land once (transactions).
TEST(KafkaDeadLetters, RecordsWithoutAKeyIntoACompactedTopicGoToTheDeadLetterQueue) {
  const std::string topic = unique_topic("kdl"), positions = unique_topic("kdl-positions");
  TopicsCleanup cleanup({topic, positions});
  create_topic(topic, 1, {{"cleanup.policy", "compact"}});
  TempDir dir("kafka-dlq-compact");
  std::string lines;
  for (int id = 1; id <= 20; ++id) {
    std::string line = opencdc_json("create", "t", id, "v");
    if (id % 4 == 0) {  // no key
      const std::string key = ",\"key\":{\"id\":" + std::to_string(id) + "}";
      line.erase(line.find(key), key.size());
    }
    lines += line + "\n";
  }
  write_file(dir / "in.jsonl", lines);
  PipelineFile f;
  f.checkpoints_path = "cp.db";
  PipelineYaml& p = f.pipeline("kdl");
  p.source("file").set("path", "in.jsonl");
  p.destination("kafka")
      .set("brokers", kafka_brokers())
      .set("topic", topic)
      .set("transactions", true)
      .set("positions.topic", positions)
      .set("transactional.id", unique_topic("kdl-txn"));
  p.on_error = "dlq";
  p.dlq("file").set("path", "dead.jsonl");
  f.write(dir / "p.yaml");
  e2e::Process proc({"run", "p.yaml", "--idle-exit", "1"}, dir.path());
  ASSERT_EQ(proc.wait_for(60s), 0) << proc.stderr_text();
  const std::vector<std::string> dead = lines_of(read_file(dir / "dead.jsonl"));
  EXPECT_EQ(dead.size(), 5u);
  for (const std::string& line : dead)
    EXPECT_NE(line.find("is compacted"), std::string::npos) << line.substr(0, 300);
  std::set<int64_t> landed;
  const std::vector<KafkaMessage> msgs = consume_all(topic, 15);
  for (const KafkaMessage& m : msgs) landed.insert(key_id(m).value_or(-1));
  EXPECT_EQ(msgs.size(), 15u);
  EXPECT_EQ(landed.size(), 15u);
  EXPECT_EQ(landed.count(4), 0u);
}

// Each refusal aborts the transaction (librdkafka bumps the producer's epoch); the batch is
// written again without the refused records, until a transaction commits.
TEST(KafkaDeadLetters, RecordsTheBrokerRefusesWithTransactionsLandExactlyOnce) {
  run_case({60, 10, Where::broker, true});
}

}  // namespace
}  // namespace sluice::test
