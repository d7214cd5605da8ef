// A destination that makes no progress is reported, never a silent hang: the PostgreSQL
// destination's table is locked by another session (LOCK TABLE … ACCESS EXCLUSIVE) while changes
// wait for it. After stall_timeout the stall is logged once with what is pending, /healthz says
// the pipeline is degraded (503, naming the side), sluice_pipeline_stalls_total{side} counts it;
// once the lock goes, the rows land, recovery logs once and /healthz is ok again.
#include <gtest/gtest.h>
#include <httplib.h>

#include <string>

#include "integration/pg_harness.h"
#include "support/metrics.h"
#include "support/pipeline_file.h"

namespace sluice::pgtest {
namespace {

using e2e::Process;

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(PostgresDestinationStall, LockedTableIsReportedAsAStallAndRecovers) {
  TestDb src("stall_src"), dst("stall_dst");
  ASSERT_TRUE(src.ok());
  ASSERT_TRUE(dst.ok());
  ASSERT_TRUE(src.sql().exec("CREATE TABLE t (id int PRIMARY KEY, v text)"));
  ASSERT_TRUE(dst.sql().exec("CREATE TABLE t (id int PRIMARY KEY, v text)"));
  auto dir = e2e::make_temp_dir("pg-stall");
  test::PipelineFile f;
  test::PipelineYaml& pl = f.pipeline("stall");
  pl.source("postgres").set("url", src.url()).set("tables", test::Yaml::strings({"public.t"}));
  pl.destination("postgres").set("url", dst.url());
  pl.max_records(100).linger_ms(10);
  pl.extra.set("stall_timeout", "1s");
  f.http = test::YamlMap().set("listen", "127.0.0.1:0");
  e2e::write_file(dir / "p.yaml", f.yaml());
  Process p({"run", "p.yaml"}, dir);
  const int port = test::metrics_port(p);
  ASSERT_GT(port, 0) << p.stderr_text();
  httplib::Client http("127.0.0.1", port);
  auto stalls = [&] {
    return test::metric_series(
        test::scrape_metrics(port),
        "sluice_pipeline_stalls_total{pipeline=\"stall\",side=\"destination\"}");
  };
  ASSERT_TRUE(wait_for_checkpoint(p, dir, "stall", [](const std::string& c) {
    return starts_with(c, "cdc ");
  })) << p.stderr_text();
  ASSERT_TRUE(src.sql().exec("INSERT INTO t VALUES (1, 'before')"));
  ASSERT_TRUE(wait_until([&] { return dst.sql().scalar("SELECT count(*) FROM t") == "1"; }, 60s))
      << p.stderr_text();
  EXPECT_EQ(stalls(), 0);

  Conn locker(dst.url());
  ASSERT_TRUE(locker.exec("BEGIN; LOCK TABLE t IN ACCESS EXCLUSIVE MODE"));
  ASSERT_TRUE(src.sql().exec("INSERT INTO t SELECT g, 'during' FROM generate_series(2, 10) g"));
  ASSERT_TRUE(wait_until(
      [&] { return p.stderr_text().find("destination stalled") != std::string::npos; }, 60s))
      << p.stderr_text();
  auto health = http.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503) << health->body;
  EXPECT_NE(health->body.find("stall degraded: postgres destination stalled for"),
            std::string::npos)
      << health->body;
  EXPECT_NE(health->body.find("9 records"), std::string::npos) << health->body;
  EXPECT_EQ(stalls(), 1);
  EXPECT_EQ(test::metric_series(test::scrape_metrics(port),
                                "sluice_pipeline_stalled{pipeline=\"stall\",side=\"destination\"}"),
            1);

  ASSERT_TRUE(locker.exec("COMMIT"));
  ASSERT_TRUE(wait_until([&] { return dst.sql().scalar("SELECT count(*) FROM t") == "10"; }, 60s))
      << p.stderr_text();
  ASSERT_TRUE(wait_until(
      [&] { return p.stderr_text().find("progressing again") != std::string::npos; }, 30s))
      << p.stderr_text();
  health = http.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200) << health->body;
  EXPECT_NE(health->body.find("stall ok"), std::string::npos) << health->body;
  EXPECT_EQ(stalls(), 1);
  const std::string log = p.stderr_text();
  EXPECT_EQ(count_of(log, "destination stalled"), 1u) << log;
  EXPECT_EQ(count_of(log, "progressing again"), 1u) << log;
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait_for(60s), 0) << p.stderr_text();
}

}  // namespace
}  // namespace sluice::pgtest
