// PostgreSQL → disk spool → PostgreSQL against the real server: the source is acknowledged once
// a batch is spooled, so a destination that is down never holds the slot's WAL (the proof: the
// slot's confirmed_flush_lsn keeps advancing during the outage); then the destination catches up
// and equals the source row by row. Also: kill -9 at random moments and at the spool's own fail
// point, a torn segment tail, and a full disk under the spool.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <fstream>
#include <random>
#include <string>

#include "fault/fault_suite.h"
#include "integration/pg_harness.h"
#include "support/fault_proxy.h"

namespace sluice::pgtest {
namespace {

using e2e::Process;

class ArmedFailPoints {
 public:
  explicit ArmedFailPoints(const std::string& spec) {
    setenv("SLUICE_FAILPOINTS", spec.c_str(), 1);
  }
  ~ArmedFailPoints() { unsetenv("SLUICE_FAILPOINTS"); }
  ArmedFailPoints(const ArmedFailPoints&) = delete;
  ArmedFailPoints& operator=(const ArmedFailPoints&) = delete;
};

int port_of(const std::string& url) {
  const std::string hostport = PgUrl::parse(url).hostport;
  return std::stoi(hostport.substr(hostport.rfind(':') + 1));
}

// A source and a destination database of their own, the destination behind a fault proxy, and a
// pipeline file with a disk spool.
class SpoolToPostgres : public ::testing::Test {
 protected:
  void make(const std::string& id, bool checkpoint_in_destination,
            std::optional<std::filesystem::path> spool_dir = std::nullopt) {
    id_ = id;
    src_ = std::make_unique<TestDb>(id + "_src");
    dst_ = std::make_unique<TestDb>(id + "_dst");
    ASSERT_TRUE(src_->ok() && dst_->ok());
    ASSERT_TRUE(src_->sql().exec(
        "CREATE TABLE t (id int PRIMARY KEY, rev int NOT NULL, s text);"
        "INSERT INTO t SELECT g, 0, md5(g::text) FROM generate_series(1, 2000) g"));
    proxy_ = std::make_unique<test::FaultProxy>("127.0.0.1", port_of(dst_->url()));
    dir_ = e2e::make_temp_dir(id);
    spool_ = spool_dir.value_or(dir_ / "spool");
    test::PipelineFile f;
    test::PipelineYaml& pl = f.pipeline(id);
    pl.source("postgres")
        .set("url", src_->url())
        .set("tables", test::Yaml::strings({"public.t"}))
        .set("heartbeat.interval", "1h");  // only acknowledgements move the slot, no heartbeat
    pl.destination("postgres")
        .set("url", url_with_port(dst_->url(), proxy_->port()))
        .set("checkpoint_in_destination", checkpoint_in_destination);
    pl.max_records(200).linger_ms(20);
    pl.extra.set(
        "spool",
        test::Yaml::map({{"type", "disk"}, {"path", spool_.string()}, {"segment_size", "64KiB"}}));
    e2e::write_file(dir_ / "p.yaml", f.yaml());
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // A few hundred changes in one transaction: updates (rev + 1), inserts, deletes. Returns the
  // WAL insert position read inside the transaction, after its changes: the commit's end LSN (what
  // sluice confirms) is beyond it, and no other transaction of this private database is. (A
  // pg_current_wal_lsn() read after the commit may already include WAL that other tests' databases
  // wrote on the shared server, which this slot never confirms while heartbeats are off.)
  std::string write_round(int round) {
    const int base = 100000 + round * 100;
    test::PgClient& c = src_->sql();
    EXPECT_TRUE(
        c.exec("BEGIN; UPDATE t SET rev = rev + 1 WHERE id % 7 = " + std::to_string(round % 7) +
               "; INSERT INTO t SELECT g, 0, 'r' || g FROM generate_series(" +
               std::to_string(base) + ", " + std::to_string(base + 49) +
               ") g; DELETE FROM t WHERE id = " + std::to_string(10 + round)));
    std::string lsn = c.scalar("SELECT pg_current_wal_insert_lsn()::text");
    EXPECT_TRUE(c.exec("COMMIT"));
    return lsn;
  }
  std::string confirmed_flush() {
    return src_->sql().scalar(
        "SELECT coalesce(confirmed_flush_lsn::text, '') FROM pg_replication_slots WHERE "
        "slot_name = 'sluice_" +
        id_ + "'");
  }
  // Whether the slot has confirmed at least `lsn`.
  bool confirmed_at_least(const std::string& lsn) {
    return src_->sql().scalar("SELECT coalesce((SELECT confirmed_flush_lsn >= '" + lsn +
                              "'::pg_lsn FROM pg_replication_slots WHERE slot_name = 'sluice_" +
                              id_ + "'), false)") == "t";
  }
  bool same() {
    const std::string q = "SELECT id, rev, s FROM t ORDER BY id";
    return src_->sql().query(q, true) == dst_->sql().query(q, true);
  }
  // Runs until the destination equals the source, then stops gracefully; row-by-row check.
  void finish() {
    Process p({"run", "p.yaml"}, dir_);
    const bool equal = wait_until([&] { return same(); }, 30s, 100ms);
    p.terminate();
    EXPECT_EQ(p.wait_for(30s), 0) << p.stderr_text();
    ASSERT_TRUE(equal) << p.stderr_text();
    EXPECT_EQ(dst_->sql().scalar("SELECT count(*) FROM t"),
              src_->sql().scalar("SELECT count(*) FROM t"));
  }

  std::string id_;
  std::unique_ptr<TestDb> src_, dst_;
  std::unique_ptr<test::FaultProxy> proxy_;
  std::filesystem::path dir_, spool_;
};

// The proof of issue 15 item 5: the destination is down from the start; the snapshot and every
// change are spooled and acknowledged — the slot's confirmed_flush_lsn passes each round's
// commit while nothing reaches the destination — then it comes back and catches up.
TEST_F(SpoolToPostgres, TheSlotKeepsConfirmingWhileTheDestinationIsDownThenItCatchesUp) {
  make("spool_proof", /*checkpoint_in_destination=*/true);
  proxy_->set_outage(true);
  Process p({"run", "p.yaml"}, dir_);
  ASSERT_TRUE(wait_for_checkpoint(p, dir_, id_, [](const std::string& c) {
    return starts_with(c, "cdc ");
  })) << p.stderr_text();
  std::string before = confirmed_flush();
  int advanced = 0;
  for (int round = 0; round < 4; ++round) {
    const std::string lsn = write_round(round);
    // Acknowledged although the destination has nothing: the slot passes the commit.
    if (wait_until([&] { return confirmed_at_least(lsn); }, 30s, 50ms)) ++advanced;
  }
  EXPECT_EQ(advanced, 4) << "confirmed_flush_lsn stayed at " << confirmed_flush() << " (was "
                         << before << ")\n"
                         << p.stderr_text();
  EXPECT_NE(confirmed_flush(), before);
  EXPECT_EQ(dst_->sql().scalar("SELECT count(*) FROM pg_tables WHERE tablename = 't'"), "0")
      << "the destination was reachable during the outage";
  EXPECT_NE(p.stderr_text().find("the source keeps spooling"), std::string::npos)
      << p.stderr_text();
  EXPECT_TRUE(p.running()) << "the pipeline failed at open:\n" << p.stderr_text();
  // The destination comes back: everything spooled lands, row by row.
  proxy_->set_outage(false);
  const bool equal = wait_until([&] { return same(); }, 30s, 100ms);
  p.terminate();
  EXPECT_EQ(p.wait_for(30s), 0) << p.stderr_text();
  EXPECT_TRUE(equal) << p.stderr_text();
  EXPECT_EQ(dst_->sql().scalar("SELECT count(DISTINCT id) FROM t"),
            src_->sql().scalar("SELECT count(*) FROM t"));
}

// kill -9 at seeded random moments (snapshot, stream, while the destination is down and after)
// and at the spool's fail point; each restart resumes both sides; the end equals the source.
TEST_F(SpoolToPostgres, KillNineAnywhereEndsEqualToTheSource) {
  make("spool_kill", /*checkpoint_in_destination=*/true);
  std::mt19937_64 rng(test::fault::case_seed());
  std::uniform_int_distribution<int> delay_ms(100, 900);
  int round = 0;
  for (int i = 0; i < 6; ++i) {
    proxy_->set_outage(i % 3 == 1);  // every third run with the destination down
    Process p({"run", "p.yaml"}, dir_);
    write_round(round++);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
    p.kill9();
  }
  proxy_->set_outage(false);
  {
    ArmedFailPoints armed("spool_after_write=crash@3");
    Process p({"run", "p.yaml"}, dir_);
    for (int k = 0; k < 4 && p.running(); ++k) {
      write_round(round++);
      std::this_thread::sleep_for(200ms);
    }
    EXPECT_EQ(p.wait_for(20s), 128 + SIGKILL) << p.stderr_text();
  }
  write_round(round++);
  finish();
}

// A crash inside a frame's write (the fail point fires after the write, before its sync and
// acknowledgement; the test then tears the frame as a crash mid-write would): at open the torn
// tail is truncated with a warning, and the source, never acknowledged for it, sends it again.
TEST_F(SpoolToPostgres, ATornSegmentTailIsTruncatedAndTheSourceSendsItAgain) {
  make("spool_torn", /*checkpoint_in_destination=*/false);
  proxy_->set_outage(true);  // everything stays in the spool
  {
    ArmedFailPoints armed("spool_after_write=crash@6");  // inside the snapshot (2,000 rows)
    Process p({"run", "p.yaml"}, dir_);
    EXPECT_EQ(p.wait_for(20s), 128 + SIGKILL) << p.stderr_text();
  }
  std::filesystem::path last;
  for (const auto& e : std::filesystem::directory_iterator(spool_))
    if (e.path().extension() == ".seg" && e.path() > last) last = e.path();
  ASSERT_FALSE(last.empty());
  const auto size = std::filesystem::file_size(last);
  ASSERT_GT(size, 100u);
  std::filesystem::resize_file(last, size - 9);
  std::ofstream(last, std::ios::app | std::ios::binary) << std::string(40, '\x7f');
  proxy_->set_outage(false);
  Process p({"run", "p.yaml"}, dir_);
  ASSERT_TRUE(wait_for_checkpoint(p, dir_, id_, [](const std::string& c) {
    return starts_with(c, "cdc ");
  })) << p.stderr_text();
  write_round(1);
  const bool equal = wait_until([&] { return same(); }, 30s, 100ms);
  p.terminate();
  EXPECT_EQ(p.wait_for(30s), 0) << p.stderr_text();
  EXPECT_TRUE(equal) << p.stderr_text();
  EXPECT_NE(p.stderr_text().find("torn tail"), std::string::npos) << p.stderr_text();
}

// The spool's disk fills up while the destination is down: the source side waits (retrying the
// append with backoff, logged), nothing is lost; once the destination is back the spool drains,
// frees segments, and the end equals the source.
TEST_F(SpoolToPostgres, AFullDiskUnderTheSpoolHoldsTheSourceBackAndLosesNothing) {
  const auto dir = e2e::make_temp_dir("spool_full_fs");
  auto fs = std::make_unique<test::fault::SmallTmpfs>(dir / "spool", "2m");
  if (!fs->mounted())
    GTEST_SKIP() << "needs root to mount a small tmpfs for the spool (CI runs as root)";
  make("spool_full", /*checkpoint_in_destination=*/true, dir / "spool");
  ASSERT_TRUE(src_->sql().exec(
      "INSERT INTO t SELECT g, 0, repeat(md5(g::text), 20) FROM generate_series(2001, 6000) g"));
  proxy_->set_outage(true);
  Process p({"run", "p.yaml"}, dir_);
  const bool full = wait_until(
      [&] { return p.stderr_text().find("No space left on device") != std::string::npos; }, 15s);
  EXPECT_TRUE(full) << p.stderr_text();
  EXPECT_TRUE(p.running()) << p.stderr_text();
  proxy_->set_outage(false);
  write_round(0);
  const bool equal = wait_until([&] { return same(); }, 30s, 100ms);
  p.terminate();
  EXPECT_EQ(p.wait_for(30s), 0) << p.stderr_text();
  EXPECT_TRUE(equal) << p.stderr_text();
  fs.reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sluice::pgtest
