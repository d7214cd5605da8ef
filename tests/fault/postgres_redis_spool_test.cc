// PostgreSQL → Redis spool (`spool: {type: redis}`) → PostgreSQL against the real servers: the
// source is acknowledged once a batch is in the stream, so a destination that is down never
// holds the slot's WAL; then it catches up, equal row by row, and the stream is trimmed behind
// it. Also: kill -9 at random moments, the Redis link reset and refused (a Redis restart as
// sluice sees it), a server that does not fsync refused with the fix, `sluice cleanup`.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "fault/fault_suite.h"
#include "integration/pg_harness.h"
#include "support/fault_proxy.h"
#include "support/redis.h"

namespace sluice::pgtest {
namespace {

using e2e::Process;

int port_of(const std::string& url) {
  const std::string hostport = PgUrl::parse(url).hostport;
  return std::stoi(hostport.substr(hostport.rfind(':') + 1));
}

// SLUICE_TEST_REDIS_URL with another port (the fault proxy's).
std::string redis_url_with_port(int port) {
  std::string u = test::redis_url();
  const size_t slash = u.find('/', 8);
  if (slash != std::string::npos) u.resize(slash);
  return u.substr(0, u.rfind(':') + 1) + std::to_string(port);
}

int redis_port() {
  auto u = redis::parse_redis_url(test::redis_url());
  return u.ok() ? u.value().port : 0;
}

class RedisSpoolToPostgres : public ::testing::Test {
 protected:
  void make(const std::string& id, bool fsync = false) {
    id_ = id + "_" + std::to_string(::getpid());
    key_ = "sluice:test:spool:" + id_;
    src_ = std::make_unique<TestDb>(id + "_src");
    dst_ = std::make_unique<TestDb>(id + "_dst");
    ASSERT_TRUE(src_->ok() && dst_->ok());
    ASSERT_TRUE(src_->sql().exec(
        "CREATE TABLE t (id int PRIMARY KEY, rev int NOT NULL, s text);"
        "INSERT INTO t SELECT g, 0, md5(g::text) FROM generate_series(1, 2000) g"));
    to_dst_ = std::make_unique<test::FaultProxy>("127.0.0.1", port_of(dst_->url()));
    to_redis_ = std::make_unique<test::FaultProxy>("127.0.0.1", redis_port());
    auto conn = test::redis_connect();
    (void)conn.command({"DEL", key_});
    dir_ = e2e::make_temp_dir(id);
    test::PipelineFile f;
    test::PipelineYaml& pl = f.pipeline(id_);
    pl.source("postgres")
        .set("url", src_->url())
        .set("tables", test::Yaml::strings({"public.t"}))
        .set("heartbeat.interval", "1h");  // only acknowledgements move the slot
    pl.destination("postgres")
        .set("url", url_with_port(dst_->url(), to_dst_->port()))
        .set("checkpoint_in_destination", true);
    pl.max_records(200).linger_ms(20);
    pl.extra.set("spool", test::Yaml::map({{"type", "redis"},
                                           {"url", redis_url_with_port(to_redis_->port())},
                                           {"key", key_},
                                           {"fsync", fsync ? "true" : "false"}}));
    e2e::write_file(dir_ / "p.yaml", f.yaml());
  }
  void TearDown() override {
    if (!key_.empty()) {
      auto conn = test::redis_connect();
      (void)conn.command({"DEL", key_});
    }
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
  bool confirmed_past(const std::string& lsn) {
    return src_->sql().scalar("SELECT coalesce((SELECT confirmed_flush_lsn > '" + lsn +
                              "'::pg_lsn FROM pg_replication_slots WHERE slot_name = 'sluice_" +
                              id_ + "'), false)") == "t";
  }
  bool same() {
    const std::string q = "SELECT id, rev, s FROM t ORDER BY id";
    return src_->sql().query(q, true) == dst_->sql().query(q, true);
  }
  long long stream_length() {
    auto conn = test::redis_connect();
    auto r = conn.command({"XLEN", key_});
    return r.ok() ? r.value()->integer : -1;
  }

  std::string id_, key_;
  std::unique_ptr<TestDb> src_, dst_;
  std::unique_ptr<test::FaultProxy> to_dst_, to_redis_;
  std::filesystem::path dir_;
};

// Issue 15 item 5 with the Redis spool: the destination is down from the start; the snapshot and
// every change go to the stream and are acknowledged (the slot passes each round's commit), then
// the destination comes back, catches up, and the stream is trimmed down to its last entry.
TEST_F(RedisSpoolToPostgres, TheSlotKeepsConfirmingWhileTheDestinationIsDownThenItCatchesUp) {
  make("rspool_proof");
  to_dst_->set_outage(true);
  Process p({"run", "p.yaml"}, dir_);
  ASSERT_TRUE(wait_for_checkpoint(p, dir_, id_, [](const std::string& c) {
    return starts_with(c, "cdc ");
  })) << p.stderr_text();
  int advanced = 0;
  for (int round = 0; round < 4; ++round) {
    // Read before the round: the round's commit ends past it, and nothing else in this private
    // database does. (Read after the commit, it may include WAL other tests' databases wrote on the
    // shared server, which this slot never confirms while heartbeats are off.)
    const std::string lsn = src_->sql().scalar("SELECT pg_current_wal_lsn()::text");
    write_round(round);
    if (wait_until([&] { return confirmed_past(lsn); }, 30s, 50ms)) ++advanced;
  }
  EXPECT_EQ(advanced, 4) << p.stderr_text();
  EXPECT_GT(stream_length(), 10) << "the batches are not in the stream";
  EXPECT_EQ(dst_->sql().scalar("SELECT count(*) FROM pg_tables WHERE tablename = 't'"), "0")
      << "the destination was reachable during the outage";
  EXPECT_TRUE(p.running()) << "the pipeline failed at open:\n" << p.stderr_text();
  to_dst_->set_outage(false);
  EXPECT_TRUE(wait_until([&] { return same(); }, 60s, 100ms)) << p.stderr_text();
  // Everything is released: the stream keeps only its last entry (trimmed about once a second).
  write_round(9);
  EXPECT_TRUE(wait_until([&] { return same() && stream_length() <= 2; }, 30s, 100ms))
      << "stream length " << stream_length() << "\n"
      << p.stderr_text();
  p.terminate();
  EXPECT_EQ(p.wait_for(30s), 0) << p.stderr_text();
  // cleanup removes the stream with the checkpoints and the slot.
  Process c({"cleanup", "p.yaml"}, dir_);
  EXPECT_EQ(c.wait_for(60s), 0) << c.stderr_text();
  EXPECT_EQ(stream_length(), 0);
}

// kill -9 at seeded random moments, every third run with the destination down; the end equals
// the source (nothing lost, nothing applied twice).
TEST_F(RedisSpoolToPostgres, KillNineAnywhereEndsEqualToTheSource) {
  make("rspool_kill");
  std::mt19937_64 rng(test::fault::case_seed());
  std::uniform_int_distribution<int> delay_ms(100, 1200);
  for (int i = 0; i < 8; ++i) {
    to_dst_->set_outage(i % 3 == 1);
    Process p({"run", "p.yaml"}, dir_);
    write_round(i);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
    ASSERT_TRUE(p.running()) << p.stderr_text();
    p.kill9();
  }
  to_dst_->set_outage(false);
  write_round(20);
  Process p({"run", "p.yaml"}, dir_);
  const bool equal = wait_until([&] { return same(); }, 60s, 100ms);
  p.terminate();
  EXPECT_EQ(p.wait_for(30s), 0) << p.stderr_text();
  EXPECT_TRUE(equal) << p.stderr_text();
}

// The Redis link is reset, then refused for a while (a restart as sluice sees it), under
// changes: both sides wait and retry, nothing is lost, sluice keeps running.
TEST_F(RedisSpoolToPostgres, RedisResetAndOutageAreRidden) {
  make("rspool_link");
  Process p({"run", "p.yaml"}, dir_);
  ASSERT_TRUE(wait_until([&] { return same(); }, 60s, 100ms)) << p.stderr_text();
  write_round(0);
  to_redis_->reset();
  write_round(1);
  to_redis_->set_outage(true);
  write_round(2);
  std::this_thread::sleep_for(3s);
  to_redis_->set_outage(false);
  write_round(3);
  EXPECT_TRUE(wait_until([&] { return same(); }, 60s, 100ms)) << p.stderr_text();
  EXPECT_TRUE(p.running()) << p.stderr_text();
  p.terminate();
  EXPECT_EQ(p.wait_for(30s), 0) << p.stderr_text();
}

// With fsync: true (the default) a server that may lose acknowledged writes is refused at start,
// in one line that names the fix.
TEST_F(RedisSpoolToPostgres, AServerThatDoesNotFsyncEachWriteIsRefused) {
  make("rspool_fsync", /*fsync=*/true);
  auto conn = test::redis_connect();
  auto r = conn.command({"CONFIG", "GET", "appendfsync"});
  ASSERT_TRUE(r.ok());
  if (std::string(r.value()->element[1]->str) == "always")
    GTEST_SKIP() << "the test server fsyncs every write";
  Process p({"run", "p.yaml"}, dir_);
  const int rc = p.wait_for(60s);
  EXPECT_NE(rc, 0);
  EXPECT_NE(rc, -1) << "still running";
  const std::string err = p.stderr_text();
  EXPECT_NE(err.find("CONFIG SET appendfsync always"), std::string::npos) << err;
  EXPECT_NE(err.find("spool.fsync: false"), std::string::npos) << err;
  EXPECT_EQ(err.find("redis-test-pw"), std::string::npos) << "the password leaked: " << err;
}

}  // namespace
}  // namespace sluice::pgtest
