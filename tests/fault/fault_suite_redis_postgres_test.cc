// Fault suite, Redis stream → PostgreSQL (the redis source's consumer group, format opencdc): a
// writer keeps XADDing keyed records — creates of new keys, updates of earlier ones, deletes, and
// MULTI/EXEC runs of 200–400 of them — while sluice is killed with -9 at seeded random moments,
// and while the fault proxy between sluice and Redis adds latency, resets, refuses (a restart as
// seen from sluice) and blackholes. After each: the PostgreSQL table equals the keyed state the
// writer committed, row by row (nothing lost, no deleted key left, no stale revision), and once
// sluice stopped the group has nothing pending (every entry acknowledged).
#include <iostream>

#include "fault/fault_suite.h"
#include "support/fault_redis.h"
#include "support/redis.h"
#include "support/sql.h"

namespace sluice::test::fault {
namespace {

constexpr const char* kTable = "fault_stream";

std::string redis_url_with_port(const std::string& url, int port) {
  const size_t at = url.rfind('@');
  const size_t host = at == std::string::npos ? url.find("//") + 2 : at + 1;
  const size_t colon = url.find(':', host);
  const size_t slash = url.find('/', host);
  return url.substr(0, colon) + ":" + std::to_string(port) +
         (slash == std::string::npos ? "" : url.substr(slash));
}
int redis_port_of(const std::string& url) {
  const size_t at = url.rfind('@');
  const size_t host = at == std::string::npos ? url.find("//") + 2 : at + 1;
  return std::atoi(url.c_str() + url.find(':', host) + 1);
}

// "count/sum(id)/sum(rev)" of an image of stream_columns() (as pg_fingerprint gives it).
std::string fingerprint_of(const TableImage& img) {
  int64_t ids = 0, revs = 0;
  for (const auto& [id, row] : img.rows) {
    ids += id;
    revs += std::stoll(row[1]);
  }
  return std::to_string(img.rows.size()) + "/" + std::to_string(ids) + "/" + std::to_string(revs);
}

class RedisToPostgres : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dst_.ok());
    // The table exists up front, so a delete read before any create of its key has a table.
    ASSERT_TRUE(dst_.sql().exec("CREATE TABLE " + pg_ident(kTable) +
                                " (id bigint PRIMARY KEY, rev int NOT NULL, note text, flag "
                                "boolean)"));
    writer_ = std::make_unique<StreamWriter>(redis_, stream_, kTable, seed_);
    ASSERT_TRUE(writer_->create(2000));
  }
  void TearDown() override { redis_delete_prefix(redis_, stream_); }
  void write_pipeline(const std::string& url) {
    PipelineFile f;
    PipelineYaml& p = f.pipeline(id_);
    p.source("redis")
        .set("url", url)
        .set("streams", Yaml::strings({stream_}))
        .set("format", "opencdc")
        .set("connect_timeout", "1s");
    p.destination("postgres").set("url", dst_.url());
    p.max_records(500).linger_ms(20);
    f.write(dir_ / "p.yaml");
  }
  Checker checker() {
    return images_checker([this] { return writer_->expected(); },
                          [this] { return read_pg_image(dst_.url(), kTable, stream_columns()); },
                          [this] { return fingerprint_of(writer_->expected()); },
                          [this] { return pg_fingerprint(dst_.url(), kTable); });
  }
  // Every entry acknowledged once sluice stopped.
  void expect_nothing_pending() {
    EXPECT_EQ(redis_pending(redis_, stream_, "sluice-" + id_), 0)
        << "entries left pending in group sluice-" << id_;
  }

  uint64_t seed_ = case_seed();
  std::string id_ = unique_name("frp", 40);
  std::string stream_ = unique_name("fault_rp_stream", 60);
  std::string redis_ = redis_url();
  PgDatabase dst_{unique_name("fault_rp_dst")};
  TempDir dir_{"fault-redis-pg"};
  std::unique_ptr<StreamWriter> writer_;
};

TEST_F(RedisToPostgres, KillNineAtRandomMomentsUnderAWriter) {
  write_pipeline(redis_);
  std::mt19937_64 rng(seed_);
  writer_->start();
  const int kills = kill_loop(dir_.path(), kill_count(), rng);
  writer_->stop();
  EXPECT_EQ(kills, kill_count());
  FaultResult r{"redis->postgres", "kill -9", kills, kills, 0, 0, 0, 0, seed_};
  converge_and_record(dir_.path(), checker(), r);
  expect_nothing_pending();
  EXPECT_GT(writer_->stats().transactions, 0);
  EXPECT_GT(writer_->stats().deletes, 0);
  EXPECT_EQ(writer_->stats().failed, 0);
}

TEST_F(RedisToPostgres, ProxyFaultsOnTheSource) {
  FaultProxy to_src("127.0.0.1", redis_port_of(redis_));
  write_pipeline(redis_url_with_port(redis_, to_src.port()));
  Process p({"run", "p.yaml"}, dir_.path());
  const Checker check = checker();
  FaultResult r{"redis->postgres", "proxy faults, source", 0, 0, 0, 0, 0, 0, seed_};
  double seconds = 0;
  Check c = wait_exact(check, 60s, &seconds);  // the stream's backlog
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
  expect_nothing_pending();
}

}  // namespace
}  // namespace sluice::test::fault
