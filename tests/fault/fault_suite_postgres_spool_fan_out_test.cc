// Fault suite, PostgreSQL → disk spool → {PostgreSQL, SQLite}: one source read feeding two
// destinations, each with its own spool reader and checkpoint, while a writer keeps changing the
// source and sluice is killed with -9 at seeded random moments (the snapshot, the stream, every
// third run with the PostgreSQL destination unreachable so the two readers are far apart). After
// the kills each destination equals the source row by row: nothing lost, nothing applied twice.
#include <iostream>

#include "fault/fault_suite.h"
#include "support/sql.h"

namespace sluice::test::fault {
namespace {

constexpr const char* kTable = "fault_rows";

class PostgresSpoolFanOut : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(src_.ok() && dst_.ok());
    writer_ = std::make_unique<SourceWriter>(SourceWriter::Db::postgres, src_.url(), kTable, seed_);
    ASSERT_TRUE(writer_->create(2000));
  }
  void write_pipeline(const std::string& dst_url) {
    PipelineFile f;
    PipelineYaml& p = f.pipeline(id_);
    p.source("postgres").set("url", src_.url()).set("tables", Yaml::strings({"public.fault_rows"}));
    p.extra.set("spool", Yaml::map({{"type", "disk"},
                                    {"path", (dir_ / "spool").string()},
                                    {"segment_size", "256KiB"}}));
    p.extra.set(
        "destinations",
        Yaml::list({Yaml::map({{"name", "pg"},
                               {"connector", "postgres"},
                               {"settings", Yaml::map({{"url", dst_url},
                                                       {"checkpoint_in_destination", true}})}}),
                    Yaml::map({{"name", "lite"},
                               {"connector", "sqlite"},
                               {"settings", Yaml::map({{"path", (dir_ / "out.db").string()}})}})}));
    p.max_records(500).linger_ms(20);
    f.write(dir_ / "p.yaml");
  }
  Checker pg_checker() {
    return images_checker([this] { return read_pg_image(src_.url(), kTable); },
                          [this] { return read_pg_image(dst_.url(), kTable); },
                          [this] { return pg_fingerprint(src_.url(), kTable); },
                          [this] { return pg_fingerprint(dst_.url(), kTable); });
  }
  Checker sqlite_checker() {
    return images_checker(
        [this] { return read_pg_image(src_.url(), kTable); },
        [this] { return read_sqlite_image(dir_ / "out.db", kTable, fault_columns()); },
        [this] {
          // sqlite_fingerprint has no rev sum (count/sum(id)/0): nor this one.
          const std::string f = pg_fingerprint(src_.url(), kTable);
          return f.empty() ? f : f.substr(0, f.rfind('/')) + "/0";
        },
        [this] { return sqlite_fingerprint(dir_ / "out.db", kTable); });
  }
  // Both destinations: the figures add up, the first problem is reported with its destination.
  Checker both() {
    return [pg = pg_checker(), lite = sqlite_checker()] {
      Check a = pg(), b = lite();
      Check c;
      c.verified = a.verified + b.verified;
      c.lost = a.lost + b.lost;
      c.duplicated = a.duplicated + b.duplicated;
      if (!a.problem.empty()) c.problem = "postgres destination: " + a.problem;
      else if (!b.problem.empty()) c.problem = "sqlite destination: " + b.problem;
      return c;
    };
  }
  int port_of(const std::string& url) {
    const std::string hp = PgUrl::parse(url).hostport;
    return std::stoi(hp.substr(hp.rfind(':') + 1));
  }

  uint64_t seed_ = case_seed();
  std::string id_ = unique_name("fsf", 40);
  PgDatabase src_{unique_name("fault_sf_src")}, dst_{unique_name("fault_sf_dst")};
  TempDir dir_{"fault-pg-spool-fan-out"};
  std::unique_ptr<SourceWriter> writer_;
};

TEST_F(PostgresSpoolFanOut, KillNineAtRandomMomentsUnderAWriterWithOneDestinationOftenDown) {
  FaultProxy to_dst("127.0.0.1", port_of(dst_.url()));
  write_pipeline(pg_url_with_port(dst_.url(), to_dst.port()));
  std::mt19937_64 rng(seed_);
  writer_->start();
  int kills = 0;
  // Rounds of kills: every third with the PostgreSQL destination unreachable (the SQLite one
  // reads on, the spool holds the difference; the next rounds resume both readers apart).
  for (int round = 0; kills < kill_count(); ++round) {
    to_dst.set_outage(round % 3 == 1);
    const int n = std::min(4, kill_count() - kills);
    const int done = kill_loop(dir_.path(), n, rng);
    kills += done;
    if (done != n) break;
  }
  to_dst.set_outage(false);
  writer_->stop();
  EXPECT_EQ(kills, kill_count());
  FaultResult r{"postgres->spool->{postgres,sqlite}", "kill -9", kills, kills, 0, 0, 0, 0, seed_};
  converge_and_record(dir_.path(), both(), r, 90s);
  EXPECT_GT(writer_->stats().transactions, 0);
}

}  // namespace
}  // namespace sluice::test::fault
