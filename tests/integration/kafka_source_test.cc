// The kafka source through the sluice binary, Kafka → PostgreSQL, against the real broker
// (SLUICE_TEST_KAFKA_BROKERS) and PostgreSQL (SLUICE_TEST_PG_URL): the three formats, several
// topics and a regex, start earliest/latest/committed and the checkpoint winning over them, offsets
// committed to the group only after the destination acknowledged, a 1 MB message, a malformed
// message, wrong brokers and an unknown topic.
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
using test::KafkaSourcePipelineFile;
using test::opencdc_json;
using test::ProduceMessage;

// Topics and groups of one test, removed when it ends.
using test::KafkaScope;

KafkaSourcePipelineFile pipeline(const std::string& id, std::vector<std::string> topics,
                                 const std::string& url) {
  KafkaSourcePipelineFile f;
  f.id = id;
  f.topics = std::move(topics);
  f.pg_url = url;
  return f;
}

std::string key_of(int64_t id) { return "{\"id\":" + std::to_string(id) + "}"; }

// id → v of table `table` in PostgreSQL.
std::map<int64_t, std::string> rows_of(Conn& c, const std::string& table,
                                       const std::string& col = "v") {
  std::map<int64_t, std::string> out;
  for (const Row& r : c.query("SELECT id, " + col + " FROM " + table + " ORDER BY id"))
    out[std::stoll(*r[0])] = r[1] ? *r[1] : "<null>";
  return out;
}

bool table_exists(Conn& c, const std::string& table) {
  return c.scalar("SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename = " +
                  quote_literal(table)) == "1";
}

// The one error line of a run's stderr ("" and a failure if there are several or none).
std::string error_line(const std::string& text) {
  std::vector<std::string> errors;
  for (const std::string& l : lines_of(text))
    if (l.find(" error ") != std::string::npos) errors.push_back(l);
  EXPECT_EQ(errors.size(), 1u) << text;
  return errors.size() == 1 ? errors[0] : std::string();
}

// ── opencdc, keyed upserts and deletes over 3 partitions ───────────────────

TEST(KafkaSource, OpenCdcChangesOverThreePartitionsEndEqualToTheInputAndTheGroupIsCommitted) {
  TestDb db("ks_opencdc");
  ASSERT_TRUE(db.ok());
  KafkaScope k;
  const std::string topic = k.topic("ks_opencdc", 3);
  // Keyed messages: one key always lands in one partition, so its changes stay in order.
  std::mt19937_64 rng(7);
  std::map<int64_t, std::string> want;
  std::vector<ProduceMessage> msgs;
  for (int64_t id = 1; id <= 300; ++id) {
    msgs.push_back({key_of(id), opencdc_json("create", "items", id, "v" + std::to_string(id))});
    want[id] = "v" + std::to_string(id);
  }
  for (int i = 0; i < 600; ++i) {
    const int64_t id = int64_t(rng() % 300) + 1;
    if (rng() % 5 == 0) {
      msgs.push_back({key_of(id), opencdc_json("delete", "items", id)});
      want.erase(id);
    } else {
      const std::string v = "u" + std::to_string(i);
      msgs.push_back(
          {key_of(id), opencdc_json(want.count(id) ? "update" : "create", "items", id, v)});
      want[id] = v;
    }
  }
  test::produce(topic, msgs);

  auto dir = e2e::make_temp_dir("ks-opencdc");
  KafkaSourcePipelineFile f = pipeline("ks_opencdc", {topic}, db.url());
  f.source_settings = {{"start", "earliest"}};
  f.max_records = 100;
  k.groups.push_back("sluice-ks_opencdc");
  e2e::write_file(dir / "p.yaml", f.yaml());
  ASSERT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "2"}, dir), 0)
      << e2e::read_file(dir / "stderr.txt");
  EXPECT_EQ(rows_of(db.sql(), "items"), want);

  // The checkpoint is the next offset of each partition; the group holds the same offsets.
  const std::string cp = checkpoint_of(dir, "ks_opencdc");
  auto committed = test::committed_offsets("sluice-ks_opencdc", topic, 3);
  int64_t total = 0;
  for (int p = 0; p < 3; ++p) {
    EXPECT_NE(cp.find(std::to_string(p) + "=" + std::to_string(committed[size_t(p)])),
              std::string::npos)
        << cp << " partition " << p << " committed " << committed[size_t(p)];
    total += committed[size_t(p)];
  }
  EXPECT_EQ(total, int64_t(msgs.size()));
  EXPECT_TRUE(starts_with(cp, topic + ":")) << cp;

  // `sluice cleanup` deletes the group sluice named, with the checkpoint.
  ASSERT_EQ(e2e::run_sluice({"cleanup", "p.yaml"}, dir), 0) << e2e::read_file(dir / "stderr.txt");
  EXPECT_EQ(checkpoint_of(dir, "ks_opencdc"), "");
  for (int64_t c : test::committed_offsets("sluice-ks_opencdc", topic, 3)) EXPECT_LT(c, 0);
}

// ── debezium: two named topics, with and without the schema wrapper ────────

std::string dbz_value(const std::string& op, const std::string& table, int64_t id,
                      const std::string& name, bool with_schema) {
  const std::string row = "{\"id\":" + std::to_string(id) + ",\"name\":\"" + name +
                          "\",\"born\":" + std::to_string(19000 + id) + "}";
  std::string payload =
      "{\"before\":" + std::string(op == "c" || op == "r" ? "null" : row) +
      ",\"after\":" + (op == "d" ? "null" : row) +
      ",\"source\":{\"version\":\"2.5.0.Final\",\"connector\":\"postgresql\",\"name\":\"srv\","
      "\"db\":\"inventory\",\"schema\":\"public\",\"table\":\"" +
      table + "\"},\"op\":\"" + op + "\",\"ts_ms\":1700000000000}";
  if (!with_schema) return payload;
  const std::string value_schema =
      "{\"type\":\"struct\",\"optional\":true,\"fields\":[{\"type\":\"int32\",\"optional\":false,\"field\":\"id\"},"
      "{\"type\":\"string\",\"optional\":true,\"field\":\"name\"},{\"type\":\"int32\",\"optional\":true,"
      "\"name\":\"io.debezium.time.Date\",\"version\":1,\"field\":\"born\"}],\"name\":\"srv.public." +
      table + ".Value\"";
  const std::string schema =
      "{\"type\":\"struct\",\"optional\":false,\"name\":\"srv.public." + table +
      ".Envelope\",\"fields\":[" + value_schema + ",\"field\":\"before\"}," + value_schema +
      ",\"field\":\"after\"},{\"type\":\"struct\",\"optional\":false,\"field\":\"source\","
      "\"fields\":[]},{\"type\":\"string\",\"optional\":false,\"field\":\"op\"}]}";
  return "{\"schema\":" + schema + ",\"payload\":" + payload + "}";
}

TEST(KafkaSource, DebeziumEventsOfTwoTopicsLandInTheirTablesWithTypesRestored) {
  TestDb db("ks_dbz");
  ASSERT_TRUE(db.ok());
  KafkaScope k;
  const std::string ta = k.topic("ks_dbz_a"), tb = k.topic("ks_dbz_b");
  const std::string key_schema =
      "{\"schema\":{\"type\":\"struct\",\"optional\":false,\"fields\":[{\"type\":\"int32\",\"optional\":false,"
      "\"field\":\"id\"}]},\"payload\":{\"id\":";
  std::vector<ProduceMessage> a, b;
  for (int64_t id = 1; id <= 50; ++id) {
    a.push_back({key_schema + std::to_string(id) + "}}",
                 dbz_value("r", "people", id, "p" + std::to_string(id), true)});
    b.push_back({key_of(id), dbz_value("c", "pets", id, "pet" + std::to_string(id), false)});
  }
  a.push_back({key_schema + "7}}", dbz_value("u", "people", 7, "seven", true)});
  a.push_back({key_schema + "8}}", dbz_value("d", "people", 8, "p8", true)});
  a.push_back({key_schema + "8}}", std::nullopt});  // tombstone after the delete
  b.push_back({key_of(9), dbz_value("d", "pets", 9, "pet9", false)});
  b.push_back({key_of(9), std::nullopt});
  b.push_back({key_of(10), dbz_value("u", "pets", 10, "ten", false)});
  test::produce(ta, a);
  test::produce(tb, b);

  auto dir = e2e::make_temp_dir("ks-dbz");
  KafkaSourcePipelineFile f = pipeline("ks_dbz", {ta, tb}, db.url());
  f.source_settings = {{"format", "debezium"}, {"start", "earliest"}, {"group", "ks_dbz_group"}};
  k.groups.push_back("ks_dbz_group");
  e2e::write_file(dir / "p.yaml", f.yaml());
  ASSERT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "2"}, dir), 0)
      << e2e::read_file(dir / "stderr.txt");

  auto people = rows_of(db.sql(), "people", "name");
  EXPECT_EQ(people.size(), 49u);
  EXPECT_EQ(people[7], "seven");
  EXPECT_EQ(people.count(8), 0u);
  auto pets = rows_of(db.sql(), "pets", "name");
  EXPECT_EQ(pets.size(), 49u);
  EXPECT_EQ(pets[10], "ten");
  EXPECT_EQ(pets.count(9), 0u);
  // With the schema, born is a date; without, a plain integer.
  EXPECT_EQ(
      db.sql().scalar(
          "SELECT data_type FROM information_schema.columns WHERE table_name = 'people' AND column_name = 'born'"),
      "date");
  EXPECT_EQ(db.sql().scalar("SELECT born::text FROM people WHERE id = 1"), "2022-01-09");
  EXPECT_EQ(
      db.sql().scalar(
          "SELECT data_type FROM information_schema.columns WHERE table_name = 'pets' AND column_name = 'born'"),
      "bigint");
  // Tombstones are skipped but their offsets are covered: both topics are committed to their end.
  EXPECT_EQ(test::committed_offsets("ks_dbz_group", ta)[0], int64_t(a.size()));
  EXPECT_EQ(test::committed_offsets("ks_dbz_group", tb)[0], int64_t(b.size()));
}

// ── raw, a regex subscription over several topics ──────────────────────────

TEST(KafkaSource, RawMessagesOfEveryTopicMatchingARegexLandInTablesNamedAfterTheTopics) {
  TestDb db("ks_raw");
  ASSERT_TRUE(db.ok());
  KafkaScope k;
  const std::string base = test::unique_topic("ks_raw");
  std::vector<std::string> topics;
  for (const char* suffix : {"_x", "_y", "_z"}) {
    topics.push_back(base + suffix);
    k.topics.push_back(topics.back());
    test::create_topic(topics.back(), 2);
  }
  const std::string other = k.topic(base.substr(0, base.size() - 1) + "other");  // does not match
  for (size_t t = 0; t < topics.size(); ++t) {
    std::vector<ProduceMessage> msgs;
    for (int i = 0; i < 40; ++i)
      msgs.push_back({"k" + std::to_string(i), "value " + std::to_string(i) + " of " + topics[t]});
    msgs.push_back({"k3", std::nullopt});  // keyed tombstone: deletes k3
    test::produce(topics[t], msgs);
  }
  test::produce(other, {{"k", "not matched"}});

  auto dir = e2e::make_temp_dir("ks-raw");
  KafkaSourcePipelineFile f = pipeline("ks_raw", {"^" + base + "_.*"}, db.url());
  f.source_settings = {{"format", "raw"}, {"start", "earliest"}};
  k.groups.push_back("sluice-ks_raw");
  e2e::write_file(dir / "p.yaml", f.yaml());
  ASSERT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "3"}, dir), 0)
      << e2e::read_file(dir / "stderr.txt");
  for (const auto& t : topics) {
    ASSERT_TRUE(table_exists(db.sql(), t)) << t;
    EXPECT_EQ(db.sql().scalar("SELECT count(*) FROM \"" + t + "\""), "39") << t;
    EXPECT_EQ(db.sql().scalar("SELECT value FROM \"" + t + "\" WHERE key = 'k5'"),
              "value 5 of " + t);
    EXPECT_EQ(db.sql().scalar("SELECT count(*) FROM \"" + t + "\" WHERE key = 'k3'"), "0");
  }
  EXPECT_FALSE(table_exists(db.sql(), other));
}

// ── start: latest / committed / earliest, and the checkpoint winning ───────

TEST(KafkaSource, StartLatestReadsOnlyNewMessagesAndAfterwardsTheCheckpointWinsOverStart) {
  TestDb db("ks_latest");
  ASSERT_TRUE(db.ok());
  KafkaScope k;
  const std::string topic = k.topic("ks_latest", 2);
  std::vector<ProduceMessage> old;
  for (int64_t id = 1; id <= 20; ++id)
    old.push_back({key_of(id), opencdc_json("create", "items", id, "old")});
  test::produce(topic, old);

  auto dir = e2e::make_temp_dir("ks-latest");
  KafkaSourcePipelineFile f = pipeline("ks_latest", {topic}, db.url());
  f.source_settings = {{"start", "latest"}};
  k.groups.push_back("sluice-ks_latest");
  e2e::write_file(dir / "p.yaml", f.yaml());
  {
    Process p({"run", "p.yaml"}, dir);
    // Partitions are assigned (their end resolved) before the log line.
    ASSERT_TRUE(wait_until(
        [&] { return p.stderr_text().find("assigned 2 partition(s)") != std::string::npos; }, 60s))
        << p.stderr_text();
    std::vector<ProduceMessage> fresh;
    for (int64_t id = 101; id <= 110; ++id)
      fresh.push_back({key_of(id), opencdc_json("create", "items", id, "new")});
    test::produce(topic, fresh);
    ASSERT_TRUE(wait_until(
        [&] {
          return table_exists(db.sql(), "items") &&
                 db.sql().scalar("SELECT count(*) FROM items") == "10";
        },
        60s))
        << p.stderr_text();
    // Stopping drains, checkpoints and commits.
    ASSERT_TRUE(wait_until([&] { return !checkpoint_of(dir, "ks_latest").empty(); }, 30s));
    p.signal(SIGTERM);
    ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  }
  EXPECT_EQ(db.sql().scalar("SELECT count(*) FROM items WHERE v = 'old'"), "0");
  auto c = test::committed_offsets("sluice-ks_latest", topic, 2);
  EXPECT_EQ(c[0] + c[1], 30);

  // Same pipeline, now start: earliest — its checkpoint wins: only what is new arrives.
  std::vector<ProduceMessage> more;
  for (int64_t id = 201; id <= 205; ++id)
    more.push_back({key_of(id), opencdc_json("create", "items", id, "more")});
  test::produce(topic, more);
  f.source_settings = {{"start", "earliest"}};
  e2e::write_file(dir / "p.yaml", f.yaml());
  ASSERT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "2"}, dir), 0)
      << e2e::read_file(dir / "stderr.txt");
  EXPECT_EQ(db.sql().scalar("SELECT count(*) FROM items"), "15");
  EXPECT_EQ(db.sql().scalar("SELECT count(*) FROM items WHERE v = 'old'"), "0");
}

TEST(KafkaSource, StartCommittedBeginsAtTheGroupsCommittedOffsetAndEarliestAtTheBeginning) {
  TestDb db("ks_committed");
  ASSERT_TRUE(db.ok());
  KafkaScope k;
  const std::string topic = k.topic("ks_committed");
  std::vector<ProduceMessage> msgs;
  for (int64_t id = 0; id < 10; ++id)
    msgs.push_back({key_of(id), opencdc_json("create", "items", id, "x")});
  test::produce(topic, msgs);
  const std::string group = test::unique_topic("ks_committed_group");
  k.groups.push_back(group);
  test::commit_offset(group, topic, 0, 4);

  auto dir = e2e::make_temp_dir("ks-committed");
  KafkaSourcePipelineFile f = pipeline("ks_committed", {topic}, db.url());
  f.source_settings = {{"group", group}};  // start: committed is the default
  e2e::write_file(dir / "p.yaml", f.yaml());
  ASSERT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "2"}, dir), 0)
      << e2e::read_file(dir / "stderr.txt");
  EXPECT_EQ(db.sql().scalar("SELECT min(id) || ' ' || max(id) || ' ' || count(*) FROM items"),
            "4 9 6");
  EXPECT_EQ(test::committed_offsets(group, topic)[0], 10);

  // Another pipeline (no checkpoint), same group, start earliest: everything, into another table.
  auto dir2 = e2e::make_temp_dir("ks-earliest");
  KafkaSourcePipelineFile g = pipeline("ks_earliest", {topic}, db.url());
  g.source_settings = {{"group", group}, {"start", "earliest"}};
  g.destination_settings = {{"table", "items_all"}};
  e2e::write_file(dir2 / "p.yaml", g.yaml());
  ASSERT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "2"}, dir2), 0)
      << e2e::read_file(dir2 / "stderr.txt");
  EXPECT_EQ(db.sql().scalar("SELECT count(*) FROM items_all"), "10");
}

// ── offsets committed only after the destination acknowledged ─────────────

TEST(KafkaSource, AFailingDestinationLeavesTheGroupsCommittedOffsetBeforeTheRejectedMessage) {
  TestDb db("ks_failing");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(
      db.sql().exec("CREATE TABLE items (id bigint PRIMARY KEY, v text CHECK (v <> 'poison'))"));
  KafkaScope k;
  const std::string topic = k.topic("ks_failing");
  std::vector<ProduceMessage> good;
  for (int64_t id = 1; id <= 20; ++id)
    good.push_back({key_of(id), opencdc_json("create", "items", id, "ok")});
  test::produce(topic, good);

  auto dir = e2e::make_temp_dir("ks-failing");
  KafkaSourcePipelineFile f = pipeline("ks_failing", {topic}, db.url());
  k.groups.push_back("sluice-ks_failing");
  e2e::write_file(dir / "p.yaml", f.yaml());
  ASSERT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "2"}, dir), 0)
      << e2e::read_file(dir / "stderr.txt");
  ASSERT_EQ(test::committed_offsets("sluice-ks_failing", topic)[0], 20);

  // The destination rejects offset 20: the run fails and neither the group nor the checkpoint
  // moves.
  std::vector<ProduceMessage> bad = {{key_of(21), opencdc_json("create", "items", 21, "poison")}};
  for (int64_t id = 22; id <= 30; ++id)
    bad.push_back({key_of(id), opencdc_json("create", "items", id, "ok")});
  test::produce(topic, bad);
  const std::string cp = checkpoint_of(dir, "ks_failing");
  EXPECT_NE(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "2"}, dir), 0);
  EXPECT_EQ(test::committed_offsets("sluice-ks_failing", topic)[0], 20);
  EXPECT_EQ(checkpoint_of(dir, "ks_failing"), cp);
  EXPECT_EQ(db.sql().scalar("SELECT count(*) FROM items"), "20");

  // Fixed: the rejected messages are read again and land.
  ASSERT_TRUE(db.sql().exec("ALTER TABLE items DROP CONSTRAINT items_v_check"));
  ASSERT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "2"}, dir), 0)
      << e2e::read_file(dir / "stderr.txt");
  EXPECT_EQ(db.sql().scalar("SELECT count(*) FROM items"), "30");
  EXPECT_EQ(test::committed_offsets("sluice-ks_failing", topic)[0], 30);
}

// ── a 1 MB message, metadata and headers ───────────────────────────────────

TEST(KafkaSource, AOneMegabyteMessageAndTheKafkaMetadataArrive) {
  TestDb db("ks_big");
  ASSERT_TRUE(db.ok());
  KafkaScope k;
  const std::string topic = k.topic("ks_big");
  const std::string big(1000000 - 200, 'b');
  test::produce(topic,
                {{key_of(1), opencdc_json("create", "items", 1, big), {{"trace", "t-1"}}},
                 {key_of(2), opencdc_json("create", "items", 2, "small"), {{"trace", "t-2"}}}});
  auto dir = e2e::make_temp_dir("ks-big");
  KafkaSourcePipelineFile f = pipeline("ks_big", {topic}, db.url());
  k.groups.push_back("sluice-ks_big");
  // The file destination shows the metadata each record carries.
  test::PipelineFile file_run;
  file_run.pipeline("ks_big")
      .source("kafka")
      .set("brokers", f.brokers)
      .set("topics", test::Yaml::strings({topic}));
  file_run.pipeline("ks_big").destination("file").set("path", "out.jsonl");
  const std::string yaml = file_run.yaml();
  e2e::write_file(dir / "f.yaml", yaml);
  ASSERT_EQ(e2e::run_sluice({"run", "f.yaml", "--idle-exit", "2"}, dir), 0)
      << e2e::read_file(dir / "stderr.txt");
  const auto lines = lines_of(e2e::read_file(dir / "out.jsonl"));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find(big), std::string::npos);
  for (const char* m : {"\"kafka.topic\":\"", "\"kafka.partition\":\"0\"", "\"kafka.offset\":\"1\"",
                        "\"kafka.timestamp\":\"", "\"trace\":\"t-2\"", "\"table\":\"items\""})
    EXPECT_NE(lines[1].find(m), std::string::npos) << m << " in " << lines[1];

  f.source_settings = {{"start", "earliest"}};  // (the group committed the file run's offsets)
  e2e::write_file(dir / "p.yaml", f.yaml());
  std::filesystem::remove_all(dir / "state");
  ASSERT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "2"}, dir), 0)
      << e2e::read_file(dir / "stderr.txt");
  EXPECT_EQ(db.sql().scalar("SELECT length(v) FROM items WHERE id = 1"),
            std::to_string(big.size()));
}

// ── errors ─────────────────────────────────────────────────────────────────

TEST(KafkaSource, AMalformedMessageStopsThePipelineWithAOneLineErrorNamingIt) {
  TestDb db("ks_malformed");
  ASSERT_TRUE(db.ok());
  KafkaScope k;
  const std::string topic = k.topic("ks_malformed");
  test::produce(topic, {{key_of(1), opencdc_json("create", "items", 1, "ok")},
                        {key_of(2), std::string("{\"operation\": oops")}});
  auto dir = e2e::make_temp_dir("ks-malformed");
  KafkaSourcePipelineFile f = pipeline("ks_malformed", {topic}, db.url());
  k.groups.push_back("sluice-ks_malformed");
  e2e::write_file(dir / "p.yaml", f.yaml());
  EXPECT_NE(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "2"}, dir), 0);
  const std::string err = e2e::read_file(dir / "stderr.txt");
  EXPECT_NE(err.find("topic '" + topic + "' partition 0 offset 1"), std::string::npos) << err;
  EXPECT_NE(err.find("as opencdc"), std::string::npos) << err;
  // The group did not move past the malformed message.
  EXPECT_LE(test::committed_offsets("sluice-ks_malformed", topic)[0], 1);
}

TEST(KafkaSource, WrongBrokersFailAtOpenWithAOneLineError) {
  TestDb db("ks_wrong");
  ASSERT_TRUE(db.ok());
  auto dir = e2e::make_temp_dir("ks-wrong");
  KafkaSourcePipelineFile f = pipeline("ks_wrong", {"t"}, db.url());
  f.brokers = "127.0.0.1:1";
  f.source_settings = {{"connect_timeout", "2s"}};
  e2e::write_file(dir / "p.yaml", f.yaml());
  EXPECT_NE(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "2"}, dir, std::chrono::seconds(60)),
            0);
  const std::string err = e2e::read_file(dir / "stderr.txt");
  EXPECT_NE(error_line(err).find("cannot reach Kafka at 127.0.0.1:1"), std::string::npos) << err;
  EXPECT_NE(error_line(err).find("check `brokers`"), std::string::npos) << err;
}

TEST(KafkaSource, AnUnknownTopicFailsAtOpenNamingIt) {
  TestDb db("ks_unknown");
  ASSERT_TRUE(db.ok());
  auto dir = e2e::make_temp_dir("ks-unknown");
  const std::string topic = test::unique_topic("ks_missing");
  KafkaSourcePipelineFile f = pipeline("ks_unknown", {topic}, db.url());
  e2e::write_file(dir / "p.yaml", f.yaml());
  EXPECT_NE(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "2"}, dir, std::chrono::seconds(60)),
            0);
  const std::string err = e2e::read_file(dir / "stderr.txt");
  EXPECT_NE(error_line(err).find("topic '" + topic + "' does not exist"), std::string::npos) << err;

  auto dir2 = e2e::make_temp_dir("ks-badregex");
  KafkaSourcePipelineFile g = pipeline("ks_badregex", {"^ks_missing_(", "^ks_other"}, db.url());
  e2e::write_file(dir2 / "p.yaml", g.yaml());
  // Refused before the pipeline starts (as `sluice validate` refuses it): one line, exit 2.
  EXPECT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "2"}, dir2, std::chrono::seconds(60)),
            2);
  const std::string err2 = e2e::read_file(dir2 / "stderr.txt");
  EXPECT_EQ(lines_of(err2).size(), 1u) << err2;
  EXPECT_NE(err2.find("sluice: pipeline ks_badregex: kafka source: setting 'topics': "
                      "'^ks_missing_(' is not a valid regular expression"),
            std::string::npos)
      << err2;
}

}  // namespace
}  // namespace sluice::pgtest
