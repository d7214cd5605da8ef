// The kafka source under kill -9: Kafka → PostgreSQL through the sluice binary, killed mid-stream
// twice (once while new messages keep arriving), then run to the end. Nothing is lost and the keyed
// destination's end state equals the input; the group ends committed at the end of every partition.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "integration/pg_harness.h"
#include "kafka_harness.h"

namespace sluice::pgtest {
namespace {

using e2e::Process;
using test::opencdc_json;
using test::ProduceMessage;

using test::KafkaScope;

// Creates, updates and deletes of `keys` keys; `want` tracks the end state (id → v).
std::vector<ProduceMessage> changes(std::mt19937_64& rng, int n, int64_t keys, int round,
                                    std::map<int64_t, std::string>& want) {
  std::vector<ProduceMessage> out;
  out.reserve(size_t(n));
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

TEST(KafkaSourceFault, KillNineMidStreamTwiceThenRestartLosesNothingAndEndsEqualToTheInput) {
  TestDb db("ks_kill");
  ASSERT_TRUE(db.ok());
  // The table exists up front, so a delete read before any create of its key has a table to miss.
  ASSERT_TRUE(db.sql().exec("CREATE TABLE items (id bigint PRIMARY KEY, v text)"));
  KafkaScope k;
  const std::string topic = test::unique_topic("ks_kill");
  k.topics.push_back(topic);
  k.groups.push_back("sluice-ks_kill");
  test::create_topic(topic, 3);
  std::mt19937_64 rng(2024);
  std::map<int64_t, std::string> want;
  auto first = changes(rng, 40000, 4000, 1, want);
  test::produce(topic, first);
  size_t produced = first.size();

  auto dir = e2e::make_temp_dir("ks-kill");
  test::KafkaSourcePipelineFile f;
  f.id = "ks_kill";
  f.topics = {topic};
  f.pg_url = db.url();
  f.source_settings = {{"start", "earliest"}};
  f.max_records = 200;
  e2e::write_file(dir / "p.yaml", f.yaml());

  {  // 1: killed at its first checkpoint.
    Process p({"run", "p.yaml"}, dir);
    ASSERT_TRUE(wait_for_checkpoint(p, dir, "ks_kill", [](const std::string& c) {
      return !c.empty();
    })) << p.stderr_text();
    p.signal(SIGKILL);
    EXPECT_EQ(p.wait(), 128 + SIGKILL);
  }
  {  // 2: new messages arrive while it runs; killed once its checkpoint moved on.
    Process p({"run", "p.yaml"}, dir);
    const std::string before = checkpoint_of(dir, "ks_kill");
    auto second = changes(rng, 40000, 4000, 2, want);
    test::produce(topic, second);
    produced += second.size();
    ASSERT_TRUE(wait_for_checkpoint(p, dir, "ks_kill", [&](const std::string& c) {
      return c != before;
    })) << p.stderr_text();
    p.signal(SIGKILL);
    EXPECT_EQ(p.wait(), 128 + SIGKILL);
  }
  // 3: to the end.
  ASSERT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "2"}, dir), 0)
      << e2e::read_file(dir / "stderr.txt");

  std::map<int64_t, std::string> got;
  for (const Row& r : db.sql().query("SELECT id, v FROM items ORDER BY id"))
    got[std::stoll(*r[0])] = r[1] ? *r[1] : "<null>";
  EXPECT_EQ(got.size(), want.size());
  EXPECT_TRUE(got == want) << "the destination differs from the input";
  auto committed = test::committed_offsets("sluice-ks_kill", topic, 3);
  EXPECT_EQ(committed[0] + committed[1] + committed[2], int64_t(produced));
}

}  // namespace
}  // namespace sluice::pgtest
