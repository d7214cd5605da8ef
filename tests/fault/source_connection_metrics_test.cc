// The log-source skeleton's connection probe on /metrics of the running binary: the postgres
// source's walsender is terminated, and /metrics shows the source down or reconnected
// (sluice_source_reconnects_total ≥ 1, connected again), while the pipeline converges.
#include <gtest/gtest.h>
#include <httplib.h>

#include <regex>

#include "integration/pg_harness.h"
#include "support/pipeline_file.h"
#include "support/readers.h"

namespace sluice::pgtest {
namespace {

using e2e::Process;

// The port the HTTP server logged (0 when it did not within ~5 s).
int metrics_port(Process& p) {
  std::smatch m;
  for (int i = 0; i < 500; ++i) {
    const std::string err = p.stderr_text();
    if (std::regex_search(err, m, std::regex("127\\.0\\.0\\.1:([0-9]+)/metrics")))
      return std::stoi(m[1]);
    std::this_thread::sleep_for(10ms);
  }
  return 0;
}

std::string scrape(int port) {
  httplib::Client client("127.0.0.1", port);
  auto res = client.Get("/metrics");
  return res && res->status == 200 ? res->body : std::string();
}

// The value of the series `name{labels}` in a scrape, or -1 when absent.
double series(const std::string& body, const std::string& name_and_labels) {
  const std::string head = name_and_labels + " ";
  for (const std::string& l : lines_of(body))
    if (starts_with(l, head)) return std::stod(l.substr(head.size()));
  return -1;
}

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
  std::string body = scrape(port);
  EXPECT_NE(body.find("# HELP sluice_source_connected "), std::string::npos) << body;
  EXPECT_NE(body.find("# TYPE sluice_source_connected gauge"), std::string::npos) << body;
  EXPECT_NE(body.find("# TYPE sluice_source_reconnects_total counter"), std::string::npos) << body;
  EXPECT_NE(body.find("# TYPE sluice_source_down_seconds gauge"), std::string::npos) << body;
  EXPECT_EQ(
      series(
          body,
          "sluice_source_phase{pipeline=\"conn_metrics\",connector=\"postgres\",phase=\"stream\"}"),
      1)
      << body;
  EXPECT_EQ(
      series(
          body,
          "sluice_source_phase{pipeline=\"conn_metrics\",connector=\"postgres\",phase=\"snapshot\"}"),
      0)
      << body;
  EXPECT_EQ(series(body, reconnects), 0) << body;
  // The stream opens on the first read after the snapshot; wait until the walsender is there.
  std::string pid;
  ASSERT_TRUE(wait_until(
      [&] {
        pid = db.sql().scalar(
            "SELECT active_pid FROM pg_replication_slots WHERE slot_name = 'sluice_conn_metrics' AND active");
        return !pid.empty();
      },
      30s))
      << p.stderr_text();
  EXPECT_TRUE(wait_until([&] { return series(scrape(port), connected) == 1; }, 10s))
      << scrape(port);

  ASSERT_EQ(db.sql().scalar("SELECT pg_terminate_backend(" + pid + ")"), "t");
  ASSERT_TRUE(db.sql().exec("INSERT INTO t SELECT g, g FROM generate_series(101, 200) g"));
  EXPECT_TRUE(wait_until(
      [&] {
        body = scrape(port);
        return series(body, reconnects) >= 1 && series(body, connected) == 1;
      },
      60s, 100ms))
      << body << p.stderr_text();
  EXPECT_EQ(series(body, "sluice_source_down_seconds" + labels), 0) << body;
  EXPECT_TRUE(wait_until(
      [&] {
        auto rows = test::read_sqlite_table(dir / "out.db", "t", {"id"});
        return rows && rows->size() == 200;
      },
      60s, 100ms))
      << p.stderr_text();
  // The existing series are still there, unchanged in name and labels.
  body = scrape(port);
  EXPECT_GE(
      series(body, "sluice_records_written_total{pipeline=\"conn_metrics\",connector=\"sqlite\"}"),
      200)
      << body;
  EXPECT_TRUE(p.running()) << p.stderr_text();
  p.terminate();
  EXPECT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sluice::pgtest
