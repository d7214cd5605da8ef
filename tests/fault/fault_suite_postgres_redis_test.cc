// Fault suite, PostgreSQL → Redis (hash mode, checkpoint_in_destination): a writer keeps changing
// the source table (varied types, multi-hundred-row transactions) while sluice is killed with -9
// at seeded random moments across the snapshot and the stream, while the fault proxy between
// sluice and Redis adds latency, resets, refuses (a restart as seen from sluice) and blackholes
// longer than the destination's timeouts, and while a Redis server of the test's own is really
// stopped and started. After each: every key equals its source row (canonical checksums of the
// hash fields against PostgreSQL's renderings), nothing lost, no key of a deleted row left, and
// sluice recovered by itself.
#include <iostream>

#include "fault/fault_suite.h"
#include "support/fault_redis.h"
#include "support/redis.h"
#include "support/sql.h"

namespace sluice::test::fault {
namespace {

constexpr const char* kTable = "fault_rows";

// `url` (redis://[user:password@]host:port[/db]) with another port.
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

std::chrono::milliseconds outage_length() { return fault_soak() ? 40000ms : 1500ms; }

class PostgresToRedis : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(src_.ok());
    writer_ = std::make_unique<SourceWriter>(SourceWriter::Db::postgres, src_.url(), kTable, seed_);
    ASSERT_TRUE(writer_->create(2000));
  }
  void TearDown() override {
    if (!redis_.empty()) redis_delete_prefix(redis_, prefix_);
  }
  // The pipeline into the Redis at `url` (its keys under prefix_, read back from redis_).
  void write_pipeline(const std::string& url) {
    PipelineFile f;
    PipelineYaml& p = f.pipeline(id_);
    p.source("postgres").set("url", src_.url()).set("tables", Yaml::strings({"public.fault_rows"}));
    p.destination("redis")
        .set("url", url)
        .set("prefix", prefix_)
        .set("format", "hash")
        .set("checkpoint_in_destination", true)
        .set("connect_timeout", "1s")
        .set("command_timeout", "1s");  // the 3 s blackhole is longer
    p.max_records(500).linger_ms(20);
    f.write(dir_ / "p.yaml");
  }
  Checker checker() {
    const std::string keys = prefix_ + "public.fault_rows:";
    return images_checker([this] { return read_pg_image(src_.url(), kTable); },
                          [this, keys] { return read_redis_image(redis_, keys); },
                          [this] { return pg_fingerprint(src_.url(), kTable); },
                          [this, keys] { return redis_fingerprint(redis_, keys); });
  }
  struct Step {
    const char* name;
    std::function<void()> on, off;
    std::chrono::milliseconds hold;
  };
  // Runs `steps` one after the other under the writer with one sluice running through `url`;
  // after each, waits for the exact end state (the figures: recovery time is the slowest wait).
  void run_steps(const std::string& name, const std::string& url, const std::vector<Step>& steps);

  uint64_t seed_ = case_seed();
  std::string id_ = unique_name("fpr", 40);
  std::string prefix_ = id_ + ":";
  std::string redis_;  // where the keys are read back
  PgDatabase src_{unique_name("fault_pr_src")};
  TempDir dir_{"fault-pg-redis"};
  std::unique_ptr<SourceWriter> writer_;
};

TEST_F(PostgresToRedis, KillNineAtRandomMomentsUnderAWriter) {
  redis_ = redis_url();
  write_pipeline(redis_);
  std::mt19937_64 rng(seed_);
  writer_->start();
  const int kills = kill_loop(dir_.path(), kill_count(), rng);
  writer_->stop();
  EXPECT_EQ(kills, kill_count());
  FaultResult r{"postgres->redis", "kill -9", kills, kills, 0, 0, 0, 0, seed_};
  converge_and_record(dir_.path(), checker(), r);
  EXPECT_GT(writer_->stats().transactions, 0);
  EXPECT_GT(writer_->stats().deletes, 0);
}

void PostgresToRedis::run_steps(const std::string& name, const std::string& url,
                                const std::vector<Step>& steps) {
  write_pipeline(url);
  Process p({"run", "p.yaml"}, dir_.path());
  const Checker check = checker();
  FaultResult r{"postgres->redis", name, 0, 0, 0, 0, 0, 0, seed_};
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

TEST_F(PostgresToRedis, ProxyFaultsOnTheDestination) {
  redis_ = redis_url();
  FaultProxy to_dst("127.0.0.1", redis_port_of(redis_));
  run_steps(
      "proxy faults, destination", redis_url_with_port(redis_, to_dst.port()),
      {{"latency 50ms", [&] { to_dst.set_latency(50); }, [&] { to_dst.set_normal(); }, 1500ms},
       {"reset destination", [&] { to_dst.reset(); }, [] {}, 300ms},
       {"destination restart", [&] { to_dst.set_outage(true); }, [&] { to_dst.set_outage(false); },
        outage_length()},
       {"blackhole destination 3s", [&] { to_dst.set_blackhole(true); },
        [&] { to_dst.set_blackhole(false); }, 3000ms}});
}

// A real restart of the Redis server (a private one: stopped cleanly, its AOF kept, started
// again), twice, under the writer; sluice keeps retrying on new connections and catches up.
TEST_F(PostgresToRedis, RedisServerRestartMidStream) {
  PrivateRedis server;
  ASSERT_TRUE(server.ok());
  redis_ = server.url();
  run_steps("redis server restart", redis_,
            {{"redis restart", [&] { EXPECT_TRUE(server.stop()); },
              [&] { EXPECT_TRUE(server.start()); }, outage_length()},
             {"redis restart again", [&] { EXPECT_TRUE(server.stop()); },
              [&] { EXPECT_TRUE(server.start()); }, 300ms}});
  redis_.clear();  // the server is gone with its keys
}

}  // namespace
}  // namespace sluice::test::fault
