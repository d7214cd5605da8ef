// The SQL destinations' connection probe on /metrics of the running binary
// (sluice_destination_connected / _reconnects_total / _down_seconds, keyed_sql_destination.h):
// PostgreSQL CDC streams into a postgres or mysql destination whose connection the test drops.
// The destination finds the loss at its next write, shows it down while it cannot reconnect, and
// counts the reconnect once it is back, while every change arrives.
#include <gtest/gtest.h>

#include <functional>
#include <optional>

#include "integration/pg_harness.h"
#include "support/metrics.h"
#include "support/pipeline_file.h"
#include "support/readers.h"
#include "support/sql.h"

namespace sluice::pgtest {
namespace {

using e2e::Process;
using test::metric_series;
using test::scrape_metrics;

// A running `sluice run` of PostgreSQL table public.t → `destination`, with /metrics.
struct RunningPipeline {
  RunningPipeline(TestDb& source, const std::string& id, const std::string& destination,
                  const std::string& url)
      : dir(e2e::make_temp_dir(id)) {
    test::PipelineFile f;
    f.http = test::YamlMap().set("listen", "127.0.0.1:0");
    test::PipelineYaml& pl = f.pipeline(id);
    pl.source("postgres").set("url", source.url()).set("tables", test::Yaml::strings({"public.t"}));
    pl.destination(destination).set("url", url).set("table", "t");
    pl.max_records(1000).linger_ms(20);
    f.write(dir / "p.yaml");
    p = std::make_unique<Process>(std::vector<std::string>{"run", "p.yaml"}, dir);
    port = test::metrics_port(*p);
    labels = test::connector_labels(id, destination);
    started = port > 0 && wait_for_checkpoint(*p, dir, id, [](const std::string& c) {
                return starts_with(c, "cdc ");
              });
  }
  double value(const std::string& name) {
    return metric_series(scrape_metrics(port), "sluice_destination_" + name + labels);
  }
  std::string scrape() { return scrape_metrics(port); }
  // Every change (200 rows) arrives while the pipeline keeps running; then a graceful stop.
  void converge_and_stop(const std::function<std::optional<test::Rows>()>& read_target) {
    EXPECT_TRUE(wait_until(
        [&] {
          auto rows = read_target();
          return rows && rows->size() == 200;
        },
        60s, 100ms))
        << p->stderr_text();
    EXPECT_TRUE(p->running()) << p->stderr_text();
    p->terminate();
    EXPECT_EQ(p->wait_for(60s), 0) << p->stderr_text();
    if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir);
  }

  std::filesystem::path dir;
  std::unique_ptr<Process> p;
  int port = 0;
  std::string labels;
  bool started = false;
};

void insert_rows(TestDb& source, int from, int to) {
  ASSERT_TRUE(source.sql().exec("INSERT INTO t SELECT g, g FROM generate_series(" +
                                std::to_string(from) + ", " + std::to_string(to) + ") g"));
}

// Terminates every session on database `db` except `keep` (the test's own), from `admin`
// (connected to another database); returns how many it terminated.
int terminate_sessions(test::PgClient& admin, const std::string& db, int keep) {
  const std::string n = admin.scalar(
      "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = " +
      quote_literal(db) + " AND pid <> pg_backend_pid() AND pid <> " + std::to_string(keep));
  return n.empty() ? 0 : std::stoi(n);
}

TEST(DestinationConnectionMetrics, PostgresShowsTheOutageThenCountsTheReconnect) {
  TestDb source("dconn_src");
  TestDb target("dconn_dst");
  ASSERT_TRUE(source.ok() && target.ok());
  ASSERT_TRUE(source.sql().exec("CREATE TABLE t (id int PRIMARY KEY, n int NOT NULL)"));
  insert_rows(source, 1, 100);
  RunningPipeline run(source, "dconn_pg", "postgres", target.url());
  ASSERT_TRUE(run.started) << run.p->stderr_text();
  std::string body = run.scrape();
  EXPECT_NE(body.find("# TYPE sluice_destination_connected gauge"), std::string::npos) << body;
  EXPECT_NE(body.find("# TYPE sluice_destination_reconnects_total counter"), std::string::npos)
      << body;
  EXPECT_NE(body.find("# TYPE sluice_destination_down_seconds gauge"), std::string::npos) << body;
  EXPECT_EQ(run.value("connected"), 1) << body;
  EXPECT_EQ(run.value("reconnects_total"), 0) << body;
  EXPECT_EQ(run.value("down_seconds"), 0) << body;

  // Cut the destination off: no new connections to its database, its session terminated. The
  // next batch fails on the dead connection and every reconnect is refused.
  const std::string db = target.sql().scalar("SELECT current_database()");
  ASSERT_TRUE(source.sql().exec("ALTER DATABASE " + db + " WITH ALLOW_CONNECTIONS false"));
  EXPECT_GE(terminate_sessions(source.sql(), db, target.sql().backend_pid()), 1);
  insert_rows(source, 101, 200);
  EXPECT_TRUE(wait_until(
      [&] { return run.value("connected") == 0 && run.value("down_seconds") > 0; }, 60s, 50ms))
      << run.scrape() << run.p->stderr_text();
  EXPECT_EQ(run.value("reconnects_total"), 0) << run.scrape();

  ASSERT_TRUE(source.sql().exec("ALTER DATABASE " + db + " WITH ALLOW_CONNECTIONS true"));
  EXPECT_TRUE(wait_until(
      [&] { return run.value("connected") == 1 && run.value("reconnects_total") == 1; }, 60s, 50ms))
      << run.scrape() << run.p->stderr_text();
  EXPECT_EQ(run.value("down_seconds"), 0) << run.scrape();
  run.converge_and_stop([&] { return test::read_pg_table(target.sql(), "public", "t", {"id"}); });
}

// MariaDB: the destination's session is killed (KILL), found lost at the next write, and the
// retried batch reconnects at once: the reconnect is counted and the probe is up again.
TEST(DestinationConnectionMetrics, MysqlCountsTheReconnectAfterItsSessionIsKilled) {
  TestDb source("dconn_my_src");
  test::MysqlDatabase target("sluice_t_dconn_my_dst");
  ASSERT_TRUE(source.ok() && target.ok());
  ASSERT_TRUE(source.sql().exec("CREATE TABLE t (id int PRIMARY KEY, n int NOT NULL)"));
  insert_rows(source, 1, 100);
  RunningPipeline run(source, "dconn_my", "mysql", target.url());
  ASSERT_TRUE(run.started) << run.p->stderr_text();
  EXPECT_EQ(run.value("connected"), 1) << run.scrape();
  EXPECT_EQ(run.value("reconnects_total"), 0) << run.scrape();

  const auto sessions = target.admin().query(
      "SELECT id FROM information_schema.processlist WHERE db = '" + target.name() +
      "' AND id <> CONNECTION_ID() AND id <> " + std::to_string(target.sql().thread_id()));
  ASSERT_FALSE(sessions.empty());
  for (const auto& row : sessions)
    ASSERT_TRUE(target.admin().exec("KILL " + row.at(0).value_or("0")));
  insert_rows(source, 101, 200);
  EXPECT_TRUE(wait_until(
      [&] { return run.value("reconnects_total") == 1 && run.value("connected") == 1; }, 60s, 50ms))
      << run.scrape() << run.p->stderr_text();
  EXPECT_EQ(run.value("down_seconds"), 0) << run.scrape();
  run.converge_and_stop([&] { return test::read_mysql_table(target.sql(), "t", {"id"}); });
}

}  // namespace
}  // namespace sluice::pgtest
