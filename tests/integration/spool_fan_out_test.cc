// PostgreSQL → disk spool → {PostgreSQL, Kafka, SQLite} against the real servers: one source read
// (one slot) feeds the three destinations, each with its own spool reader and checkpoint. The
// PostgreSQL destination (behind a fault proxy) goes down mid-stream: the Kafka and SQLite ones
// keep up with the source row by row (Kafka: each key's last message) and the slot's
// confirmed_flush_lsn keeps advancing; it comes back and converges. And a destination added to the
// file later starts from the spool's history.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <map>
#include <string>

#include "integration/pg_harness.h"
#include "support/fault_proxy.h"
#include "support/kafka.h"
#include "support/sqlite.h"

namespace sluice::pgtest {
namespace {

using e2e::Process;

int port_of(const std::string& url) {
  const std::string hostport = PgUrl::parse(url).hostport;
  return std::stoi(hostport.substr(hostport.rfind(':') + 1));
}

class SpoolFanOut : public ::testing::Test {
 protected:
  void make(const std::string& id) {
    id_ = id;
    src_ = std::make_unique<TestDb>(id + "_src");
    dst_ = std::make_unique<TestDb>(id + "_dst");
    ASSERT_TRUE(src_->ok() && dst_->ok());
    ASSERT_TRUE(src_->sql().exec(
        "CREATE TABLE t (id int PRIMARY KEY, rev int NOT NULL, s text);"
        "INSERT INTO t SELECT g, 0, md5(g::text) FROM generate_series(1, 2000) g"));
    proxy_ = std::make_unique<test::FaultProxy>("127.0.0.1", port_of(dst_->url()));
    dir_ = e2e::make_temp_dir(id);
    topic_ = kafka_.topic(id);
  }
  // The pipeline file with the destinations `which` ("pg", "kafka", "lite"), in that order.
  void write_file(const std::vector<std::string>& which) {
    test::PipelineFile f;
    test::PipelineYaml& pl = f.pipeline(id_);
    pl.source("postgres")
        .set("url", src_->url())
        .set("tables", test::Yaml::strings({"public.t"}))
        .set("heartbeat.interval", "1h");  // only acknowledgements move the slot
    std::vector<test::Yaml> dests;
    for (const std::string& w : which) {
      if (w == "pg")
        dests.push_back(test::Yaml::map(
            {{"name", "pg"},
             {"connector", "postgres"},
             {"settings", test::Yaml::map({{"url", url_with_port(dst_->url(), proxy_->port())},
                                           {"checkpoint_in_destination", true}})}}));
      else if (w == "kafka")
        dests.push_back(test::Yaml::map(
            {{"name", "kafka"},
             {"connector", "kafka"},
             {"settings",
              test::Yaml::map({{"brokers", test::kafka_brokers()}, {"topic", topic_}})}}));
      else
        dests.push_back(test::Yaml::map(
            {{"name", "lite"},
             {"connector", "sqlite"},
             {"settings", test::Yaml::map({{"path", (dir_ / "out.db").string()}})}}));
    }
    pl.extra.set("spool", test::Yaml::map({{"type", "disk"}, {"path", (dir_ / "spool").string()}}));
    pl.extra.set("destinations", test::Yaml::list(dests));
    pl.max_records(200).linger_ms(20);
    e2e::write_file(dir_ / "p.yaml", f.yaml());
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  void write_round(int round) {
    const int base = 100000 + round * 100;
    ASSERT_TRUE(src_->sql().exec(
        "BEGIN; UPDATE t SET rev = rev + 1 WHERE id % 7 = " + std::to_string(round % 7) +
        "; INSERT INTO t SELECT g, 0, 'r' || g FROM generate_series(" + std::to_string(base) +
        ", " + std::to_string(base + 49) +
        ") g; DELETE FROM t WHERE id = " + std::to_string(10 + round) + "; COMMIT"));
  }
  // Whether the slot confirmed past `lsn` (taken before a round: other databases of the shared
  // server write WAL too, so the end of WAL after the round may lie beyond what it can confirm).
  bool confirmed_past(const std::string& lsn) {
    return src_->sql().scalar("SELECT coalesce((SELECT confirmed_flush_lsn > '" + lsn +
                              "'::pg_lsn FROM pg_replication_slots WHERE slot_name = 'sluice_" +
                              id_ + "'), false)") == "t";
  }
  test::Rows source_rows() {
    return src_->sql().query("SELECT id::text, rev::text, s FROM t ORDER BY t.id", true);
  }
  bool pg_same() {
    return source_rows() ==
           dst_->sql().query("SELECT id::text, rev::text, s FROM t ORDER BY t.id", true);
  }
  bool sqlite_same() {
    if (!std::filesystem::exists(dir_ / "out.db")) return false;
    try {
      test::SqliteFile f(dir_ / "out.db");
      auto rows = f.rows("SELECT CAST(id AS TEXT), CAST(rev AS TEXT), s FROM t ORDER BY id");
      if (!rows) return false;
      const test::Rows want = source_rows();
      if (*rows == want) return true;
      last_sqlite_diff_ =
          std::to_string(rows->size()) + " rows, source " + std::to_string(want.size());
      for (size_t i = 0; i < std::min(rows->size(), want.size()); ++i)
        if ((*rows)[i] != want[i]) {
          auto show = [](const test::Row& r) {
            std::string t;
            for (const auto& v : r) t += (t.empty() ? "" : "|") + v.value_or("NULL");
            return t;
          };
          last_sqlite_diff_ += "; first difference: " + show((*rows)[i]) + " vs " + show(want[i]);
          break;
        }
      return false;
    } catch (const std::exception& e) {
      last_sqlite_diff_ = e.what();
      return false;
    }
  }

  // Each key's last message in the topic (OpenCDC: a delete removes the key) against the source.
  bool kafka_same() {
    const test::Rows want = source_rows();
    std::map<int64_t, test::Row> state;
    simdjson::dom::parser parser;
    for (const test::KafkaMessage& m : test::consume_all(topic_, want.size(), 5s)) {
      const std::optional<int64_t> id = test::key_id(m);
      if (!id || !m.value) return false;
      simdjson::dom::element doc;
      if (parser.parse(*m.value).get(doc)) return false;
      std::string_view op;
      if (doc["operation"].get(op)) return false;
      if (op == "delete") {
        state.erase(*id);
        continue;
      }
      simdjson::dom::element after;
      int64_t rev = 0;
      std::string_view text;
      if (doc["payload"]["after"].get(after) || after["rev"].get(rev) || after["s"].get(text))
        return false;
      state[*id] = {std::to_string(*id), std::to_string(rev), std::string(text)};
    }
    test::Rows got;
    for (auto& [id, row] : state) got.push_back(std::move(row));
    if (got == want) return true;
    last_kafka_diff_ = std::to_string(got.size()) + " keys, source " + std::to_string(want.size());
    return false;
  }

  test::KafkaScope kafka_;
  std::string topic_;
  std::string last_kafka_diff_;   // why kafka_same() last said no
  std::string last_sqlite_diff_;  // why sqlite_same() last said no
  std::string id_;
  std::unique_ptr<TestDb> src_, dst_;
  std::unique_ptr<test::FaultProxy> proxy_;
  std::filesystem::path dir_;
};

TEST_F(SpoolFanOut, ADestinationDownMidStreamHoldsBackNeitherTheOtherNorTheSlotThenConverges) {
  make("spool_fan_down");
  write_file({"pg", "kafka", "lite"});
  Process p({"run", "p.yaml"}, dir_);
  // All three have the snapshot and a first round.
  write_round(0);
  ASSERT_TRUE(wait_until([&] { return pg_same() && sqlite_same() && kafka_same(); }, 60s, 100ms))
      << last_kafka_diff_ << "\n"
      << p.stderr_text();
  // The PostgreSQL destination goes away mid-stream.
  proxy_->set_outage(true);
  proxy_->reset();
  int advanced = 0, kept_up = 0;
  for (int round = 1; round <= 4; ++round) {
    const std::string lsn = src_->sql().scalar("SELECT pg_current_wal_lsn()::text");
    write_round(round);
    if (wait_until([&] { return confirmed_past(lsn); }, 20s, 50ms)) ++advanced;
    // The SQLite and Kafka destinations have every round while the other one is down.
    if (wait_until([&] { return sqlite_same() && kafka_same(); }, 20s, 50ms)) ++kept_up;
  }
  EXPECT_EQ(advanced, 4) << "the slot stopped confirming while a destination was down\n"
                         << p.stderr_text();
  EXPECT_EQ(kept_up, 4) << "the SQLite or Kafka destination waited for the PostgreSQL one ("
                        << last_kafka_diff_ << ")\n"
                        << p.stderr_text();
  EXPECT_FALSE(pg_same()) << "the PostgreSQL destination was reachable during the outage";
  EXPECT_TRUE(p.running()) << p.stderr_text();
  // It comes back: everything spooled for it lands, row by row.
  proxy_->set_outage(false);
  const bool pg_equal = wait_until([&] { return pg_same(); }, 60s, 100ms);
  EXPECT_TRUE(pg_equal) << p.stderr_text();
  EXPECT_TRUE(sqlite_same());
  EXPECT_TRUE(kafka_same()) << last_kafka_diff_;
  p.terminate();
  EXPECT_EQ(p.wait_for(30s), 0) << p.stderr_text();
  EXPECT_EQ(dst_->sql().scalar("SELECT count(DISTINCT id) FROM t"),
            src_->sql().scalar("SELECT count(*) FROM t"));
}

TEST_F(SpoolFanOut, ADestinationAddedToTheFileLaterStartsFromTheSpoolsHistory) {
  make("spool_fan_late");
  write_file({"lite"});
  {
    Process p({"run", "p.yaml"}, dir_);
    write_round(0);
    ASSERT_TRUE(wait_until([&] { return sqlite_same(); }, 60s, 100ms)) << last_sqlite_diff_ << "\n"
                                                                       << p.stderr_text();
    p.terminate();
    ASSERT_EQ(p.wait_for(30s), 0) << p.stderr_text();
  }
  write_round(1);  // while sluice is not running
  // The file gains the PostgreSQL destination: it gets the snapshot and every change from the
  // spool (the slot is not read again from its start: there is one slot, and it moved on).
  write_file({"lite", "pg"});
  Process p({"run", "p.yaml"}, dir_);
  write_round(2);
  const bool equal = wait_until([&] { return pg_same() && sqlite_same(); }, 60s, 100ms);
  EXPECT_TRUE(equal) << p.stderr_text();
  EXPECT_NE(p.stderr_text().find("destination pg is new: it starts from the spool's first batch"),
            std::string::npos)
      << p.stderr_text();
  p.terminate();
  EXPECT_EQ(p.wait_for(30s), 0) << p.stderr_text();
}

}  // namespace
}  // namespace sluice::pgtest
