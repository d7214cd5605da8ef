// Fault suite, PostgreSQL → PostgreSQL: a writer keeps changing the source table (varied types,
// multi-hundred-row transactions) while sluice is killed with -9 at seeded random moments across
// the snapshot and the stream, and while the fault proxy between sluice and each server adds
// latency, caps the bandwidth, resets, refuses (a restart as seen from sluice) and blackholes.
// After each: the destination equals the source row by row (canonical checksums), nothing lost,
// nothing duplicated, and sluice recovered by itself.
#include <iostream>
#include "fault/fault_suite.h"

#include "support/sql.h"

namespace sluice::test::fault {
namespace {

constexpr const char* kTable = "fault_rows";

class PostgresToPostgres : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(src_.ok() && dst_.ok());
    writer_ = std::make_unique<SourceWriter>(SourceWriter::Db::postgres, src_.url(), kTable, seed_);
    ASSERT_TRUE(writer_->create(2000));
  }
  void write_pipeline(const std::string& src_url, const std::string& dst_url,
                      bool streaming = false) {
    PipelineFile f;
    PipelineYaml& p = f.pipeline(id_);
    auto& src = p.source("postgres")
                    .set("url", src_url)
                    .set("tables", Yaml::strings({"public.fault_rows"}));
    if (streaming) src.set("stream.in_progress_memory", "64KiB");
    p.destination("postgres").set("url", dst_url);
    p.max_records(500).linger_ms(20);
    f.write(dir_ / "p.yaml");
  }
  Checker checker() {
    return images_checker([this] { return read_pg_image(src_.url(), kTable); },
                          [this] { return read_pg_image(dst_.url(), kTable); },
                          [this] { return pg_fingerprint(src_.url(), kTable); },
                          [this] { return pg_fingerprint(dst_.url(), kTable); });
  }
  struct Step {
    const char* name;
    std::function<void()> on, off;
    std::chrono::milliseconds hold;
  };
  void run_steps(const std::string& name, FaultProxy& to_src, FaultProxy& to_dst,
                 const std::vector<Step>& steps);
  int port_of(const std::string& url) {
    const std::string hp = PgUrl::parse(url).hostport;
    return std::stoi(hp.substr(hp.rfind(':') + 1));
  }

  uint64_t seed_ = case_seed();
  std::string id_ = unique_name("fpp", 40);
  PgDatabase src_{unique_name("fault_pp_src")}, dst_{unique_name("fault_pp_dst")};
  TempDir dir_{"fault-pg-pg"};
  std::unique_ptr<SourceWriter> writer_;
};

TEST_F(PostgresToPostgres, KillNineAtRandomMomentsUnderAWriter) {
  write_pipeline(src_.url(), dst_.url());
  std::mt19937_64 rng(seed_);
  writer_->start();
  const int kills = kill_loop(dir_.path(), kill_count(), rng);
  writer_->stop();
  EXPECT_EQ(kills, kill_count());
  FaultResult r{"postgres->postgres", "kill -9", kills, kills, 0, 0, 0, 0, seed_};
  converge_and_record(dir_.path(), checker(), r);
  EXPECT_GT(writer_->stats().transactions, 0);
}

// Transactions of 400–1,200 rows, which the server streams while they are in progress (its
// logical_decoding_work_mem at 64 kB), held by sluice past 64 KiB in a spill file: kill -9 while
// they are held, forwarded or written leaves the destination exact.
TEST_F(PostgresToPostgres, KillNineWhileLargeTransactionsStreamInProgress) {
  const std::string src_url = src_.url() + (src_.url().find('?') == std::string::npos ? "?" : "&") +
                              "options=-c%20logical_decoding_work_mem%3D64kB";
  write_pipeline(src_url, dst_.url(), /*streaming=*/true);
  std::mt19937_64 rng(seed_);
  writer_->set_transaction_rows(400, 1200);
  writer_->start();
  const int kills = kill_loop(dir_.path(), kill_count(), rng);
  writer_->stop();
  EXPECT_EQ(kills, kill_count());
  FaultResult r{
      "postgres->postgres", "kill -9, streamed transactions", kills, kills, 0, 0, 0, 0, seed_};
  converge_and_record(dir_.path(), checker(), r);
  EXPECT_GT(writer_->stats().transactions, 0);
  const std::string streamed = src_.admin().scalar(
      "SELECT stream_txns FROM pg_stat_replication_slots WHERE slot_name = 'sluice_" + id_ + "'");
  EXPECT_GT(streamed.empty() ? 0 : std::stoll(streamed), 0) << "the server streamed nothing";
}

// Runs `steps` one after the other under the writer; after each, waits for the exact end state
// (the figures: recovery time is the slowest wait).
void PostgresToPostgres::run_steps(const std::string& name, FaultProxy& to_src, FaultProxy& to_dst,
                                   const std::vector<Step>& steps) {
  write_pipeline(pg_url_with_port(src_.url(), to_src.port()),
                 pg_url_with_port(dst_.url(), to_dst.port()));
  Process p({"run", "p.yaml"}, dir_.path());
  const Checker check = checker();
  FaultResult r{"postgres->postgres", name, 0, 0, 0, 0, 0, 0, seed_};
  double seconds = 0;
  Check c = wait_exact(check, 60s, &seconds);  // the snapshot
  ASSERT_EQ(c.problem, "") << p.stderr_text();
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

std::chrono::milliseconds outage_length() { return fault_soak() ? 40000ms : 1500ms; }

TEST_F(PostgresToPostgres, ProxyFaultsOnTheSource) {
  FaultProxy to_src("127.0.0.1", port_of(src_.url())), to_dst("127.0.0.1", port_of(dst_.url()));
  run_steps(
      "proxy faults, source", to_src, to_dst,
      {{"latency 50ms", [&] { to_src.set_latency(50); }, [&] { to_src.set_normal(); }, 1500ms},
       {"bandwidth 64KiB/s", [&] { to_src.set_bandwidth(64 * 1024); }, [&] { to_src.set_normal(); },
        1500ms},
       {"reset source", [&] { to_src.reset(); }, [] {}, 300ms},
       {"source restart", [&] { to_src.set_outage(true); }, [&] { to_src.set_outage(false); },
        outage_length()},
       {"blackhole source 3s", [&] { to_src.set_blackhole(true); },
        [&] { to_src.set_blackhole(false); }, 3000ms}});
}

TEST_F(PostgresToPostgres, ProxyFaultsOnTheDestination) {
  FaultProxy to_src("127.0.0.1", port_of(src_.url())), to_dst("127.0.0.1", port_of(dst_.url()));
  run_steps(
      "proxy faults, destination", to_src, to_dst,
      {{"latency 50ms", [&] { to_dst.set_latency(50); }, [&] { to_dst.set_normal(); }, 1500ms},
       {"reset destination", [&] { to_dst.reset(); }, [] {}, 300ms},
       {"destination restart", [&] { to_dst.set_outage(true); }, [&] { to_dst.set_outage(false); },
        outage_length()},
       {"blackhole destination 3s", [&] { to_dst.set_blackhole(true); },
        [&] { to_dst.set_blackhole(false); }, 3000ms}});
}

}  // namespace
}  // namespace sluice::test::fault
