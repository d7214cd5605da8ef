// Fault suite, MariaDB → PostgreSQL: a writer keeps changing the source table (decimal, datetime,
// varbinary, JSON, utf8mb4 text, multi-hundred-row transactions) while sluice is killed with -9 at
// seeded random moments across the snapshot and the binlog stream, and while the fault proxy
// between sluice and MariaDB adds latency, resets, refuses (a restart as seen from sluice) and
// blackholes. After each: the PostgreSQL table equals the source row by row (canonical
// checksums: MariaDB's renderings against PostgreSQL's), nothing lost or duplicated.
#include <iostream>

#include "fault/fault_suite.h"
#include "support/sql.h"

namespace sluice::test::fault {
namespace {

constexpr const char* kTable = "fault_rows";

class MysqlToPostgres : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(src_.ok() && dst_.ok());
    writer_ = std::make_unique<SourceWriter>(SourceWriter::Db::mysql, src_.url(), kTable, seed_);
    ASSERT_TRUE(writer_->create(2000));
  }
  void write_pipeline(const std::string& src_url) {
    PipelineFile f;
    PipelineYaml& p = f.pipeline(id_);
    p.source("mysql")
        .set("url", src_url)
        .set("tables", Yaml::strings({src_.name() + ".fault_rows"}))
        .set("snapshot.chunk_size", 2000);
    p.destination("postgres").set("url", dst_.url()).set("table", "fault_rows");
    p.max_records(500).linger_ms(20);
    f.write(dir_ / "p.yaml");
  }
  Checker checker() {
    return images_checker([this] { return read_mysql_image(src_.url(), kTable); },
                          [this] { return read_pg_image(dst_.url(), kTable); },
                          [this] { return mysql_fingerprint(src_.url(), kTable); },
                          [this] { return pg_fingerprint(dst_.url(), kTable); });
  }

  uint64_t seed_ = case_seed();
  std::string id_ = unique_name("fmp", 40);
  MysqlDatabase src_{unique_name("fault_mp_src")};
  PgDatabase dst_{unique_name("fault_mp_dst")};
  TempDir dir_{"fault-my-pg"};
  std::unique_ptr<SourceWriter> writer_;
};

TEST_F(MysqlToPostgres, KillNineAtRandomMomentsUnderAWriter) {
  write_pipeline(src_.url());
  std::mt19937_64 rng(seed_);
  writer_->start();
  const int kills = kill_loop(dir_.path(), kill_count(), rng);
  writer_->stop();
  EXPECT_EQ(kills, kill_count());
  FaultResult r{"mysql->postgres", "kill -9", kills, kills, 0, 0, 0, 0, seed_};
  converge_and_record(dir_.path(), checker(), r);
  EXPECT_GT(writer_->stats().transactions, 0);
}

TEST_F(MysqlToPostgres, ProxyFaultsOnTheSource) {
  MyUrl u = MyUrl::parse(src_.url());
  FaultProxy to_src("127.0.0.1", u.port);
  u.port = to_src.port();
  write_pipeline(u.str());
  Process p({"run", "p.yaml"}, dir_.path());
  const Checker check = checker();
  FaultResult r{"mysql->postgres", "proxy faults", 0, 0, 0, 0, 0, 0, seed_};
  double seconds = 0;
  Check c = wait_exact(check, 60s, &seconds);  // the snapshot
  ASSERT_EQ(c.problem, "") << p.stderr_text();
  struct Step {
    const char* name;
    std::function<void()> on, off;
    std::chrono::milliseconds hold;
  };
  const std::chrono::milliseconds outage = fault_soak() ? 40000ms : 1500ms;
  const std::vector<Step> steps = {
      {"latency 50ms", [&] { to_src.set_latency(50); }, [&] { to_src.set_normal(); }, 1500ms},
      {"reset source", [&] { to_src.reset(); }, [] {}, 300ms},
      {"source restart", [&] { to_src.set_outage(true); }, [&] { to_src.set_outage(false); },
       outage},
      {"blackhole source 3s", [&] { to_src.set_blackhole(true); },
       [&] { to_src.set_blackhole(false); }, 3000ms},
  };
  for (const Step& s : steps) {
    writer_->start();
    std::this_thread::sleep_for(300ms);
    s.on();
    std::this_thread::sleep_for(s.hold);
    s.off();
    writer_->stop();
    c = wait_exact(check, 90s, &seconds);
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

}  // namespace
}  // namespace sluice::test::fault
