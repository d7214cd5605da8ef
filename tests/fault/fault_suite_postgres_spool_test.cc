// Fault suite, PostgreSQL → disk spool → PostgreSQL: the suite's writer keeps changing the source
// table while sluice is killed with -9 at seeded random moments — across the snapshot and the
// stream, with the destination up and, every third run, down (so kills also land while batches
// pile up in the spool) — then the destination link gets the proxy's faults, then the spool's
// file system fills up. After each: the destination equals the source row by row, nothing lost,
// nothing applied twice, and sluice recovered by itself.
#include <iostream>

#include "fault/fault_suite.h"
#include "support/sql.h"

namespace sluice::test::fault {
namespace {

constexpr const char* kTable = "fault_rows";

class PostgresSpoolPostgres : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(src_.ok() && dst_.ok());
    writer_ = std::make_unique<SourceWriter>(SourceWriter::Db::postgres, src_.url(), kTable, seed_);
    ASSERT_TRUE(writer_->create(2000));
    const std::string hp = PgUrl::parse(dst_.url()).hostport;
    to_dst_ = std::make_unique<FaultProxy>("127.0.0.1", std::stoi(hp.substr(hp.rfind(':') + 1)));
  }
  // The destination always goes through the proxy; the spool lives in `spool` (default: in the
  // test's directory).
  void write_pipeline(const std::filesystem::path& spool = {}) {
    PipelineFile f;
    PipelineYaml& p = f.pipeline(id_);
    p.source("postgres").set("url", src_.url()).set("tables", Yaml::strings({"public.fault_rows"}));
    p.destination("postgres").set("url", pg_url_with_port(dst_.url(), to_dst_->port()));
    p.max_records(500).linger_ms(20);
    p.extra.set("spool", Yaml::map({{"type", "disk"},
                                    {"path", (spool.empty() ? dir_ / "spool" : spool).string()},
                                    {"segment_size", "256KiB"}}));
    f.write(dir_ / "p.yaml");
  }
  Checker checker() {
    return images_checker([this] { return read_pg_image(src_.url(), kTable); },
                          [this] { return read_pg_image(dst_.url(), kTable); },
                          [this] { return pg_fingerprint(src_.url(), kTable); },
                          [this] { return pg_fingerprint(dst_.url(), kTable); });
  }

  uint64_t seed_ = case_seed();
  std::string id_ = unique_name("fps", 40);
  PgDatabase src_{unique_name("fault_ps_src")}, dst_{unique_name("fault_ps_dst")};
  TempDir dir_{"fault-pg-spool"};
  std::unique_ptr<SourceWriter> writer_;
  std::unique_ptr<FaultProxy> to_dst_;
};

TEST_F(PostgresSpoolPostgres, KillNineAtRandomMomentsUnderAWriter) {
  write_pipeline();
  std::mt19937_64 rng(seed_);
  writer_->start();
  int kills = 0;
  // In rounds of three: two with the destination reachable, one with it down (the spool grows).
  for (int round = 0; kills < kill_count(); ++round) {
    to_dst_->set_outage(round % 3 == 2);
    const int n = kill_loop(dir_.path(), 1, rng);
    if (n == 0) break;
    kills += n;
  }
  to_dst_->set_outage(false);
  writer_->stop();
  EXPECT_EQ(kills, kill_count());
  FaultResult r{"postgres->spool->postgres", "kill -9", kills, kills, 0, 0, 0, 0, seed_};
  converge_and_record(dir_.path(), checker(), r);
  EXPECT_GT(writer_->stats().transactions, 0);
}

TEST_F(PostgresSpoolPostgres, ProxyFaultsOnTheDestination) {
  write_pipeline();
  Process p({"run", "p.yaml"}, dir_.path());
  const Checker check = checker();
  FaultResult r{"postgres->spool->postgres", "proxy faults, destination", 0, 0, 0, 0, 0, 0, seed_};
  double seconds = 0;
  Check c = wait_exact(check, 60s, &seconds);  // the snapshot
  ASSERT_EQ(c.problem, "") << p.stderr_text();
  struct Step {
    const char* name;
    std::function<void()> on, off;
    std::chrono::milliseconds hold;
  };
  FaultProxy& to_dst = *to_dst_;
  const std::vector<Step> steps = {
      {"latency 50ms", [&] { to_dst.set_latency(50); }, [&] { to_dst.set_normal(); }, 1500ms},
      {"reset destination", [&] { to_dst.reset(); }, [] {}, 300ms},
      {"destination restart", [&] { to_dst.set_outage(true); }, [&] { to_dst.set_outage(false); },
       fault_soak() ? 40000ms : 3000ms},
      {"blackhole destination 3s", [&] { to_dst.set_blackhole(true); },
       [&] { to_dst.set_blackhole(false); }, 3000ms},
  };
  for (const Step& s : steps) {
    writer_->start();
    std::this_thread::sleep_for(300ms);
    s.on();
    std::this_thread::sleep_for(s.hold);
    s.off();
    writer_->stop();
    c = wait_exact(check, 60s, &seconds);
    r.iterations++;
    r.faults++;
    r.recovery_seconds = std::max(r.recovery_seconds, seconds);
    std::cout << "fault " << s.name << ": recovered in " << seconds << " s\n";
    EXPECT_EQ(c.problem, "") << "after " << s.name << " (seed " << seed_ << "):\n"
                             << p.stderr_text();
    EXPECT_EQ(p.wait_for(0ms), -1) << "sluice exited after " << s.name << ":\n" << p.stderr_text();
    if (!c.problem.empty() || !p.running()) break;
    r.rows_verified += c.verified;
  }
  r.lost += c.lost;
  r.duplicated += c.duplicated;
  record_fault_result(r);
  p.terminate();
  EXPECT_EQ(p.wait_for(60s), 0) << p.stderr_text();
}

// The spool's file system fills up while the destination is down and the writer keeps going: the
// source side waits (the spool's when_full: block), nothing is lost; the destination comes back,
// the spool drains and frees its segments, and the end equals the source.
TEST_F(PostgresSpoolPostgres, TheSpoolsDiskFullUnderAWriter) {
  SmallTmpfs fs(dir_ / "small", "3m");
  if (!fs.mounted()) GTEST_SKIP() << "needs root to mount a small tmpfs (CI runs as root)";
  write_pipeline(dir_ / "small" / "spool");
  to_dst_->set_outage(true);
  Process p({"run", "p.yaml"}, dir_.path());
  writer_->start(std::chrono::milliseconds(1));
  const bool full = wait_until(
      [&] { return p.stderr_text().find("No space left on device") != std::string::npos; }, 60s,
      50ms);
  writer_->stop();
  EXPECT_TRUE(full) << p.stderr_text();
  EXPECT_TRUE(p.running()) << p.stderr_text();
  to_dst_->set_outage(false);
  double seconds = 0;
  const Check c = wait_exact(checker(), 90s, &seconds);
  EXPECT_EQ(c.problem, "") << "after the spool's disk was full (seed " << seed_ << "):\n"
                           << p.stderr_text();
  FaultResult r{"postgres->spool->postgres",
                "spool disk full",
                1,
                1,
                c.verified,
                c.lost,
                c.duplicated,
                seconds,
                seed_};
  record_fault_result(r);
  p.terminate();
  EXPECT_EQ(p.wait_for(60s), 0) << p.stderr_text();
}

}  // namespace
}  // namespace sluice::test::fault
