// Silently dead connections, without a proxy: the server-side process of a connection is stopped
// (SIGSTOP), so its kernel keeps ACKing and TCP stays open and silent — what a partition or a
// proxy holding the connection open looks like to sluice. Each test asserts that sluice notices
// within its timeout (a warning naming the timeout, a connection_timeouts_total count), and,
// once the process is continued, that it recovers by itself and the destination ends equal to
// the source.
//
//   postgres source:       the walsender (pg_replication_slots.active_pid), stream.timeout 2s;
//                          the snapshot's backend (its COPYs), query_timeout 2s
//   postgres destination:  the destination's backend (pg_stat_activity), query_timeout 2s
//   mysql destination:     the whole mysqld of a private MariaDB, query_timeout 2s
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/types.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <string>
#include <utility>

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

// A process's state letter and parent, from /proc/PID/stat ("PID (comm) S PPID …"); '?' and 0
// when it is gone.
std::pair<char, pid_t> proc_state(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');  // comm may hold spaces and parentheses
  char state = '?';
  long ppid = 0;
  if (close == std::string::npos ||
      std::sscanf(stat.c_str() + close + 1, " %c %ld", &state, &ppid) != 2)
    return {'?', 0};
  return {state, pid_t(ppid)};
}

// Stops a process for the scope of the object (continued however the test ends). A parent that
// stopped itself because its child stopped (runuser, su: the services script starts MariaDB under
// runuser when run as root) is continued too; it would otherwise stay stopped, never reaping the
// server once it exits.
class Stopped {
 public:
  explicit Stopped(pid_t pid) : pid_(pid) { ok_ = pid_ > 0 && ::kill(pid_, SIGSTOP) == 0; }
  ~Stopped() { resume(); }
  Stopped(const Stopped&) = delete;
  Stopped& operator=(const Stopped&) = delete;
  bool ok() const { return ok_; }
  void resume() {
    if (ok_) {
      ::kill(pid_, SIGCONT);
      const pid_t parent = proc_state(pid_).second;
      if (parent > 1 && proc_state(parent).first == 'T') ::kill(parent, SIGCONT);
    }
    ok_ = false;
  }

 private:
  pid_t pid_;
  bool ok_ = false;
};

// `sluice run` of PostgreSQL table public.t → a destination, with /metrics; started once a
// checkpoint begins with `phase` ("cdc ": streaming).
struct RunningPipeline {
  RunningPipeline(const std::string& id, const std::function<void(test::PipelineYaml&)>& configure,
                  const std::string& phase = "cdc ", int max_records = 1000)
      : dir(e2e::make_temp_dir(id)) {
    test::PipelineFile f;
    f.http = test::YamlMap().set("listen", "127.0.0.1:0");
    test::PipelineYaml& pl = f.pipeline(id);
    configure(pl);
    pl.max_records(max_records).linger_ms(20);
    f.write(dir / "p.yaml");
    p = std::make_unique<Process>(std::vector<std::string>{"run", "p.yaml"}, dir);
    port = test::metrics_port(*p);
    // A PostgreSQL snapshot position may carry its version first ("v3 snapshot …").
    started = port > 0 && wait_for_checkpoint(*p, dir, id, [&](const std::string& c) {
                return starts_with(c, phase) || starts_with(c, "v3 " + phase);
              });
  }
  double metric(const std::string& series) { return metric_series(scrape_metrics(port), series); }
  void stop() {
    EXPECT_TRUE(p->running()) << p->stderr_text();
    p->terminate();
    EXPECT_EQ(p->wait_for(60s), 0) << p->stderr_text();
    if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir);
  }
  std::filesystem::path dir;
  std::unique_ptr<Process> p;
  int port = 0;
  bool started = false;
};

void insert_rows(TestDb& source, int from, int to) {
  ASSERT_TRUE(source.sql().exec("INSERT INTO t SELECT g, g FROM generate_series(" +
                                std::to_string(from) + ", " + std::to_string(to) + ") g"));
}

bool has_rows(const std::optional<test::Rows>& rows, size_t n) { return rows && rows->size() == n; }

TEST(DeadConnection, AStoppedWalsenderIsTakenForDeadAfterStreamTimeoutAndTheSourceRecovers) {
  TestDb db("dead_walsender");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id int PRIMARY KEY, n int NOT NULL)"));
  insert_rows(db, 1, 100);
  RunningPipeline run("dead_walsender", [&](test::PipelineYaml& pl) {
    pl.source("postgres")
        .set("url", db.url())
        .set("tables", test::Yaml::strings({"public.t"}))
        .set("stream.timeout", "2s")
        .set("reconnect.max_backoff", "1s");
    pl.destination("sqlite").set("path", "out.db");
  });
  ASSERT_TRUE(run.started) << run.p->stderr_text();
  const std::string labels = test::connector_labels("dead_walsender", "postgres");
  const std::string timeouts = "sluice_source_connection_timeouts_total" + labels;
  const std::string pid = test::wait_for_walsender(db.sql(), "sluice_dead_walsender", 30s);
  ASSERT_FALSE(pid.empty()) << run.p->stderr_text();
  EXPECT_EQ(run.metric(timeouts), 0);

  {
    Stopped walsender(pid_t(std::stoi(pid)));
    ASSERT_TRUE(walsender.ok());
    insert_rows(db, 101, 200);  // committed, but the stopped walsender never sends it
    EXPECT_TRUE(wait_until([&] { return run.metric(timeouts) >= 1; }, 15s, 100ms))
        << run.p->stderr_text();
    EXPECT_NE(run.p->stderr_text().find("beyond stream.timeout (2000 ms)"), std::string::npos)
        << run.p->stderr_text();
    EXPECT_FALSE(has_rows(test::read_sqlite_table(run.dir / "out.db", "t", {"id"}), 200));
    // The old walsender still holds the slot: continue it and release it.
    walsender.resume();
    test::terminate_pg_backend(db.sql(), pid);
  }
  EXPECT_TRUE(wait_until(
      [&] {
        return run.metric("sluice_source_connected" + labels) == 1 &&
               run.metric("sluice_source_reconnects_total" + labels) >= 1;
      },
      30s, 100ms))
      << run.p->stderr_text();
  insert_rows(db, 201, 300);
  EXPECT_TRUE(wait_until(
      [&] { return has_rows(test::read_sqlite_table(run.dir / "out.db", "t", {"id"}), 300); }, 30s,
      100ms))
      << run.p->stderr_text();
  EXPECT_EQ(compare_tables(db.sql(), "SELECT id::text, n::text FROM t", run.dir / "out.db",
                           "SELECT id, n FROM t"),
            0);
  run.stop();
}

// The snapshot's connection (its backend runs the COPYs) stopped mid-snapshot: after the
// source's query_timeout the connection is given up (warned, counted), a new one imports the
// slot's exported snapshot and the snapshot goes on from the last chunk read, while the old
// backend is still stopped; the destination ends with every row once.
TEST(DeadConnection, AStoppedSnapshotBackendIsTakenForDeadAfterQueryTimeoutAndTheSnapshotGoesOn) {
  TestDb db("dead_snapshot");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id int PRIMARY KEY, n int NOT NULL)"));
  insert_rows(db, 1, 200000);
  RunningPipeline run(
      "dead_snapshot",
      [&](test::PipelineYaml& pl) {
        pl.source("postgres")
            .set("url", db.url())
            .set("tables", test::Yaml::strings({"public.t"}))
            .set("query_timeout", "2s")
            .set("reconnect.max_backoff", "1s");
        pl.destination("sqlite").set("path", "out.db");
      },
      "snapshot ", 200);
  ASSERT_TRUE(run.started) << run.p->stderr_text();
  const std::string labels = test::connector_labels("dead_snapshot", "postgres");
  const std::string timeouts = "sluice_source_connection_timeouts_total" + labels;
  const std::string name = db.sql().scalar("SELECT current_database()");
  const std::string pid =
      db.sql().scalar("SELECT pid FROM pg_stat_activity WHERE datname = " + quote_literal(name) +
                      " AND application_name = 'sluice' AND query LIKE 'COPY (SELECT%'");
  ASSERT_FALSE(pid.empty()) << run.p->stderr_text();
  {
    Stopped backend(pid_t(std::stoi(pid)));
    ASSERT_TRUE(backend.ok());
    EXPECT_TRUE(wait_until([&] { return run.metric(timeouts) >= 1; }, 15s, 100ms))
        << run.p->stderr_text();
    EXPECT_NE(run.p->stderr_text().find("within query_timeout (2000 ms)"), std::string::npos)
        << run.p->stderr_text();
    // Goes on while the old backend is still stopped.
    EXPECT_TRUE(wait_until(
        [&] { return starts_with(checkpoint_of(run.dir, "dead_snapshot"), "cdc "); }, 30s, 100ms))
        << run.p->stderr_text();
    EXPECT_EQ(run.p->stderr_text().find("goes on in a newer one"), std::string::npos)
        << run.p->stderr_text();
    backend.resume();
    test::terminate_pg_backend(db.sql(), pid);
  }
  EXPECT_TRUE(wait_until(
      [&] { return has_rows(test::read_sqlite_table(run.dir / "out.db", "t", {"id"}), 200000); },
      30s, 100ms))
      << run.p->stderr_text();
  EXPECT_EQ(compare_tables(db.sql(), "SELECT id::text, n::text FROM t", run.dir / "out.db",
                           "SELECT id, n FROM t"),
            0);
  EXPECT_EQ(run.metric("sluice_source_connected" + labels), 1);
  EXPECT_GE(run.metric("sluice_source_reconnects_total" + labels), 1);
  run.stop();
}

TEST(DeadConnection, AStoppedPostgresDestinationBackendIsTakenForDeadAfterQueryTimeout) {
  TestDb source("dead_pgdst_src");
  TestDb target("dead_pgdst_dst");
  ASSERT_TRUE(source.ok() && target.ok());
  ASSERT_TRUE(source.sql().exec("CREATE TABLE t (id int PRIMARY KEY, n int NOT NULL)"));
  insert_rows(source, 1, 100);
  RunningPipeline run("dead_pgdst", [&](test::PipelineYaml& pl) {
    pl.source("postgres").set("url", source.url()).set("tables", test::Yaml::strings({"public.t"}));
    pl.destination("postgres")
        .set("url", target.url())
        .set("table", "t")
        .set("query_timeout", "2s");
  });
  ASSERT_TRUE(run.started) << run.p->stderr_text();
  const std::string labels = test::connector_labels("dead_pgdst", "postgres");
  const std::string timeouts = "sluice_destination_connection_timeouts_total" + labels;
  EXPECT_EQ(run.metric(timeouts), 0);
  const std::string db = target.sql().scalar("SELECT current_database()");
  const std::string pid =
      target.sql().scalar("SELECT pid FROM pg_stat_activity WHERE datname = " + quote_literal(db) +
                          " AND pid <> pg_backend_pid() AND application_name = 'sluice'");
  ASSERT_FALSE(pid.empty());
  {
    Stopped backend(pid_t(std::stoi(pid)));
    ASSERT_TRUE(backend.ok());
    insert_rows(source, 101, 200);
    EXPECT_TRUE(wait_until([&] { return run.metric(timeouts) >= 1; }, 15s, 100ms))
        << run.p->stderr_text();
    EXPECT_NE(run.p->stderr_text().find("within query_timeout (2000 ms)"), std::string::npos)
        << run.p->stderr_text();
    backend.resume();
    test::terminate_pg_backend(target.sql(), pid);
  }
  EXPECT_TRUE(wait_until(
      [&] { return has_rows(test::read_pg_table(target.sql(), "public", "t", {"id"}), 200); }, 30s,
      100ms))
      << run.p->stderr_text();
  EXPECT_EQ(test::read_pg_table(target.sql(), "public", "t", {"id", "n"}),
            test::read_pg_table(source.sql(), "public", "t", {"id", "n"}));
  EXPECT_EQ(run.metric("sluice_destination_connected" + labels), 1);
  run.stop();
}

// A private MariaDB (scripts/services with its own directory and port): its whole mysqld is
// stopped, which the shared server must never be.
class DeadMysqlConnection : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::filesystem::path(e2e::make_temp_dir("mysql-dead-conn"));
    port_ = 25306 + int(getpid() % 2000);
    const std::string out = services("start");
    const auto at = out.find("SLUICE_TEST_MYSQL_URL=");
    if (at != std::string::npos)
      ::setenv("SLUICE_TEST_MYSQL_DEAD_CONN_URL",
               out.substr(at + 22, out.find('\n', at) - at - 22).c_str(), 1);
  }
  static void TearDownTestSuite() {
    services("stop");
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  static std::string services(const std::string& verb) {
    const std::string cmd = "SLUICE_SERVICES_DIR=" + dir_->string() +
                            " SLUICE_MYSQL_PORT=" + std::to_string(port_) + " " +
                            SLUICE_SOURCE_DIR + "/scripts/services " + verb + " mariadb 2>&1";
    std::string out;
    if (FILE* f = popen(cmd.c_str(), "r")) {
      char buf[512];
      while (fgets(buf, sizeof buf, f)) out += buf;
      pclose(f);
    }
    return out;
  }
  static std::filesystem::path* dir_;
  static int port_;
};
std::filesystem::path* DeadMysqlConnection::dir_ = nullptr;
int DeadMysqlConnection::port_ = 0;

TEST_F(DeadMysqlConnection, AStoppedMysqldIsTakenForDeadAfterQueryTimeoutAndTheWriterRecovers) {
  ASSERT_NE(std::getenv("SLUICE_TEST_MYSQL_DEAD_CONN_URL"), nullptr)
      << "private MariaDB did not start";
  TestDb source("dead_mydst_src");
  test::MysqlDatabase target("sluice_t_dead_mydst", "SLUICE_TEST_MYSQL_DEAD_CONN_URL");
  ASSERT_TRUE(source.ok() && target.ok());
  ASSERT_TRUE(source.sql().exec("CREATE TABLE t (id int PRIMARY KEY, n int NOT NULL)"));
  insert_rows(source, 1, 100);
  RunningPipeline run("dead_mydst", [&](test::PipelineYaml& pl) {
    pl.source("postgres").set("url", source.url()).set("tables", test::Yaml::strings({"public.t"}));
    pl.destination("mysql")
        .set("url", target.url())
        .set("table", "t")
        .set("query_timeout", "2s")
        .set("connect_timeout", "2s");
  });
  ASSERT_TRUE(run.started) << run.p->stderr_text();
  const std::string labels = test::connector_labels("dead_mydst", "mysql");
  const std::string timeouts = "sluice_destination_connection_timeouts_total" + labels;
  EXPECT_EQ(run.metric(timeouts), 0);
  const test::Rows pid_file = target.admin().query("SELECT @@pid_file");
  ASSERT_EQ(pid_file.size(), 1u);
  std::ifstream in(pid_file[0][0].value_or(""));
  pid_t pid = 0;
  in >> pid;
  ASSERT_GT(pid, 0);
  {
    Stopped mysqld(pid);
    ASSERT_TRUE(mysqld.ok());
    insert_rows(source, 101, 200);
    EXPECT_TRUE(wait_until([&] { return run.metric(timeouts) >= 1; }, 15s, 100ms))
        << run.p->stderr_text();
    EXPECT_NE(run.p->stderr_text().find("within query_timeout (2000 ms)"), std::string::npos)
        << run.p->stderr_text();
  }
  EXPECT_TRUE(wait_until(
      [&] { return has_rows(test::read_mysql_table(target.sql(), "t", {"id"}), 200); }, 30s, 100ms))
      << run.p->stderr_text();
  EXPECT_EQ(run.metric("sluice_destination_connected" + labels), 1);
  run.stop();
}

}  // namespace
}  // namespace sluice::pgtest
