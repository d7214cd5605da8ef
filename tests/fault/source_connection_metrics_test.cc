// The log-source skeleton's connection probe on /metrics of the running binary: the postgres
// source's walsender is terminated, and /metrics shows the source down or reconnected
// (sluice_source_reconnects_total ≥ 1, connected again), while the pipeline converges.
#include <gtest/gtest.h>

#include "integration/pg_harness.h"
#include "support/metrics.h"
#include "support/pipeline_file.h"
#include "support/readers.h"

namespace sluice::pgtest {
namespace {

using e2e::Process;

using test::metric_series;
using test::metrics_port;
using test::scrape_metrics;

TEST(SourceConnectionMetrics, ATerminatedWalsenderIsCountedAsAReconnectAndThePipelineConverges) {
  TestDb db("conn_metrics");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id int PRIMARY KEY, n int NOT NULL)"));
  ASSERT_TRUE(db.sql().exec("INSERT INTO t SELECT g, g FROM generate_series(1, 100) g"));
  auto dir = e2e::make_temp_dir("pg-conn-metrics");
  test::PipelineFile f;
  f.http = test::YamlMap().set("listen", "127.0.0.1:0");
  test::PipelineYaml& pl = f.pipeline("conn_metrics");
  pl.source("postgres").set("url", db.url()).set("tables", test::Yaml::strings({"public.t"}));
  pl.destination("sqlite").set("path", "out.db");
  pl.max_records(1000).linger_ms(20);
  f.write(dir / "p.yaml");
  Process p({"run", "p.yaml"}, dir);
  const int port = metrics_port(p);
  ASSERT_GT(port, 0) << p.stderr_text();
  ASSERT_TRUE(wait_for_checkpoint(p, dir, "conn_metrics", [](const std::string& c) {
    return starts_with(c, "cdc ");
  })) << p.stderr_text();

  const std::string labels = "{pipeline=\"conn_metrics\",connector=\"postgres\"}";
  const std::string connected = "sluice_source_connected" + labels;
  const std::string reconnects = "sluice_source_reconnects_total" + labels;
  std::string body = scrape_metrics(port);
  EXPECT_NE(body.find("# HELP sluice_source_connected "), std::string::npos) << body;
  EXPECT_NE(body.find("# TYPE sluice_source_connected gauge"), std::string::npos) << body;
  EXPECT_NE(body.find("# TYPE sluice_source_reconnects_total counter"), std::string::npos) << body;
  EXPECT_NE(body.find("# TYPE sluice_source_down_seconds gauge"), std::string::npos) << body;
  EXPECT_EQ(
      metric_series(
          body,
          "sluice_source_phase{pipeline=\"conn_metrics\",connector=\"postgres\",phase=\"stream\"}"),
      1)
      << body;
  EXPECT_EQ(
      metric_series(
          body,
          "sluice_source_phase{pipeline=\"conn_metrics\",connector=\"postgres\",phase=\"snapshot\"}"),
      0)
      << body;
  EXPECT_EQ(metric_series(body, reconnects), 0) << body;
  // The stream opens on the first read after the snapshot; wait until the walsender is there.
  const std::string pid = test::wait_for_walsender(db.sql(), "sluice_conn_metrics", 30s);
  ASSERT_FALSE(pid.empty()) << p.stderr_text();
  EXPECT_TRUE(wait_until([&] { return metric_series(scrape_metrics(port), connected) == 1; }, 10s))
      << scrape_metrics(port);

  ASSERT_TRUE(test::terminate_pg_backend(db.sql(), pid));
  ASSERT_TRUE(db.sql().exec("INSERT INTO t SELECT g, g FROM generate_series(101, 200) g"));
  EXPECT_TRUE(wait_until(
      [&] {
        body = scrape_metrics(port);
        return metric_series(body, reconnects) >= 1 && metric_series(body, connected) == 1;
      },
      60s, 100ms))
      << body << p.stderr_text();
  EXPECT_EQ(metric_series(body, "sluice_source_down_seconds" + labels), 0) << body;
  EXPECT_TRUE(wait_until(
      [&] {
        auto rows = test::read_sqlite_table(dir / "out.db", "t", {"id"});
        return rows && rows->size() == 200;
      },
      60s, 100ms))
      << p.stderr_text();
  // The existing series are still there, unchanged in name and labels.
  body = scrape_metrics(port);
  EXPECT_GE(
      metric_series(body,
                    "sluice_records_written_total{pipeline=\"conn_metrics\",connector=\"sqlite\"}"),
      200)
      << body;
  // SQLite is an embedded file: no destination connection series for it.
  EXPECT_EQ(body.find("sluice_destination_connected{pipeline=\"conn_metrics\""), std::string::npos)
      << body;
  EXPECT_TRUE(p.running()) << p.stderr_text();
  p.terminate();
  EXPECT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sluice::pgtest
