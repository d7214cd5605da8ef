// Fault suite, PostgreSQL → MongoDB (FerretDB, scripts/services start mongodb): a writer keeps
// changing the source table (varied types, transactions of 20–40 rows) while sluice is killed
// with -9 at seeded random moments across the snapshot and the stream, and while the fault proxy
// between sluice and FerretDB adds latency, resets, refuses (a restart as seen from sluice) and
// blackholes longer than the destination's socket timeout (socketTimeoutMS 4 s). After each: every
// document equals its source row field by field (canonical values of the BSON types,
// fault_workload.h), nothing lost, nothing extra, and sluice recovered by itself.
#include <iostream>

#include "fault/fault_suite.h"
#include "support/mongodb.h"
#include "support/sql.h"

namespace sluice::test::fault {
namespace {

constexpr const char* kTable = "fault_rows";
// FerretDB 1.24 (SQLite) finds a document by a numeric _id with a scan of the collection (it
// pushes down only string and ObjectId _ids): each upsert or delete costs O(documents), some
// 70 us per document here. A small table and a slow writer keep the backlog within the suite's
// time budget; the kill and fault counts stay the suite's.
constexpr int64_t kRows = 200;
constexpr auto kWriterPause = std::chrono::milliseconds(600);

class PostgresToMongodb : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(src_.ok() && dst_.ok());
    writer_ = std::make_unique<SourceWriter>(SourceWriter::Db::postgres, src_.url(), kTable, seed_);
    // Transactions of 20–40 rows: at FerretDB's cost per upsert (a scan of the collection), one
    // of 400 rows took ~20 s to apply, longer than a fault window under load.
    writer_->set_transaction_rows(20, 40);
    ASSERT_TRUE(writer_->create(kRows));
  }
  // `dst_url`: the destination database's URL, perhaps through the proxy.
  void write_pipeline(const std::string& dst_url) {
    PipelineFile f;
    PipelineYaml& p = f.pipeline(id_);
    p.source("postgres").set("url", src_.url()).set("tables", Yaml::strings({"public.fault_rows"}));
    // FerretDB has no Decimal128: decimals as their exact text (docs/mongodb.md).
    p.destination("mongodb").set("url", dst_url).set("decimals", "string");
    p.max_records(500).linger_ms(20);
    f.write(dir_ / "p.yaml");
  }
  Checker checker() {
    return images_checker([this] { return read_pg_image(src_.url(), kTable); },
                          [this] { return read_mongodb_image(dst_.url(), kTable); },
                          [this] { return pg_fingerprint(src_.url(), kTable); },
                          [this] { return mongodb_fingerprint(dst_.url(), kTable); });
  }
  // The destination's URL through `proxy`, with extra URI options ("" or "?a=b").
  std::string via(const FaultProxy& proxy, const std::string& options = "") const {
    return "mongodb://127.0.0.1:" + std::to_string(proxy.port()) + "/" + dst_.name() + options;
  }
  int mongodb_port() const {
    const std::string u = dst_.url();
    const size_t host = u.find("://") + 3;
    const size_t colon = u.find(':', host), slash = u.find('/', host);
    return std::stoi(u.substr(colon + 1, slash - colon - 1));
  }

  uint64_t seed_ = case_seed();
  std::string id_ = unique_name("fpm", 40);
  PgDatabase src_{unique_name("fault_pm_src")};
  MongoTestDb dst_{"fault_pm_dst"};
  TempDir dir_{"fault-pg-mongo"};
  std::unique_ptr<SourceWriter> writer_;
};

TEST_F(PostgresToMongodb, KillNineAtRandomMomentsUnderAWriter) {
  write_pipeline(dst_.url());
  std::mt19937_64 rng(seed_);
  writer_->start(kWriterPause);
  const int kills = kill_loop(dir_.path(), kill_count(), rng);
  writer_->stop();
  EXPECT_EQ(kills, kill_count());
  FaultResult r{"postgres->mongodb", "kill -9", kills, kills, 0, 0, 0, 0, seed_};
  converge_and_record(dir_.path(), checker(), r, 75s);
  EXPECT_GT(writer_->stats().transactions, 0);
}

std::chrono::milliseconds outage_length() { return fault_soak() ? 40000ms : 1500ms; }

TEST_F(PostgresToMongodb, ProxyFaultsOnTheDestination) {
  FaultProxy to_dst("127.0.0.1", mongodb_port());
  // A socket timeout of 4 s (a libmongoc URI option the destination passes through), so the
  // 6 s blackhole outlasts it: the write in flight fails and is retried on a new connection.
  write_pipeline(via(to_dst, "?socketTimeoutMS=4000"));
  Process p({"run", "p.yaml"}, dir_.path());
  const Checker check = checker();
  FaultResult r{"postgres->mongodb", "proxy faults, destination", 0, 0, 0, 0, 0, 0, seed_};
  double seconds = 0;
  Check c = wait_exact(check, 60s, &seconds);  // the snapshot
  ASSERT_EQ(c.problem, "") << p.stderr_text();
  struct Step {
    const char* name;
    std::function<void()> on, off;
    std::chrono::milliseconds hold;
  };
  const std::vector<Step> steps = {
      {"latency 50ms", [&] { to_dst.set_latency(50); }, [&] { to_dst.set_normal(); }, 1500ms},
      {"reset destination", [&] { to_dst.reset(); }, [] {}, 300ms},
      {"destination restart", [&] { to_dst.set_outage(true); }, [&] { to_dst.set_outage(false); },
       outage_length()},
      {"blackhole destination 6s", [&] { to_dst.set_blackhole(true); },
       [&] { to_dst.set_blackhole(false); }, 6000ms}};
  for (const Step& s : steps) {
    const int64_t forwarded = to_dst.bytes_forwarded();
    writer_->start(kWriterPause);
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
    EXPECT_GT(to_dst.bytes_forwarded(), forwarded) << "no traffic through the proxy";
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
