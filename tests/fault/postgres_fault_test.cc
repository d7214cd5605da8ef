// Faults of the postgres source, through the sluice binary against the real PostgreSQL 15 test
// servers: configuration and connection failures (each one error line naming the fix), a slot in
// use, wal_level not logical (the postgres-replica service), a replication connection dropped
// mid-stream, and `sluice cleanup`.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "integration/pg_harness.h"
#include "support/readers.h"

namespace sluice::pgtest {
namespace {

using e2e::Process;

// What `sluice run` prints when a pipeline cannot start: one error log line (the cause and its
// fix) and the final summary line; nothing else, no warnings.
void expect_single_error(const std::string& err, const std::string& pipeline,
                         const std::vector<std::string>& words) {
  std::vector<std::string> errors, summaries, others;
  for (const std::string& l : lines_of(err)) {
    if (l.empty()) continue;
    if (is_error_log_line(l)) errors.push_back(l);
    else if (starts_with(l, "sluice: pipeline " + pipeline + " FAILED: ")) summaries.push_back(l);
    else others.push_back(l);
  }
  ASSERT_EQ(errors.size(), 1u) << err;
  EXPECT_EQ(summaries.size(), 1u) << err;
  EXPECT_TRUE(others.empty()) << "unexpected lines:\n" << err;
  EXPECT_NE(errors[0].find("pipeline " + pipeline + ": postgres source: "), std::string::npos)
      << errors[0];
  for (const std::string& w : words)
    EXPECT_NE(errors[0].find(w), std::string::npos) << "no '" << w << "' in: " << errors[0];
}

int run_expect_failure(const std::filesystem::path& dir, std::string* err) {
  Process p({"run", "p.yaml"}, dir);
  const int rc = p.wait_for(60s);
  *err = p.stderr_text();
  return rc;
}

int closed_port() {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  if (bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    close(s);
    return 1;
  }
  close(s);  // bound, never listened, now closed: connections are refused
  return ntohs(a.sin_port);
}

std::string slot_count(Conn& c, const std::string& slot) {
  return c.scalar("SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + slot + "'");
}

TEST(PostgresFaults, UnreachableServerFailsWithOneLineNamingHostAndPort) {
  const std::string base = env_url();
  ASSERT_FALSE(base.empty());
  const int port = closed_port();
  auto dir = e2e::make_temp_dir("pg-unreachable");
  PipelineFile f;
  f.id = "unreachable";
  f.url = url_with_port(base, port);
  f.tables = {"public.anything"};
  e2e::write_file(dir / "p.yaml", f.yaml());
  std::string err;
  EXPECT_EQ(run_expect_failure(dir, &err), 1) << err;
  expect_single_error(err, "unreachable",
                      {"cannot connect to 127.0.0.1:" + std::to_string(port), "Connection refused",
                       "check host and port in `url`"});
  std::filesystem::remove_all(dir);
}

TEST(PostgresFaults, WrongPasswordFailsWithOneLineNamingTheCredentials) {
  TestDb db("wrong_password");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id int PRIMARY KEY)"));
  auto dir = e2e::make_temp_dir("pg-wrongpw");
  PipelineFile f;
  f.id = "wrong_password";
  f.url = url_with_credentials(db.url(), "postgres", "not-the-password");
  f.tables = {"public.t"};
  e2e::write_file(dir / "p.yaml", f.yaml());
  std::string err;
  EXPECT_EQ(run_expect_failure(dir, &err), 1) << err;
  expect_single_error(err, "wrong_password",
                      {"password authentication failed", "check the user and password"});
  EXPECT_EQ(err.find("not-the-password"), std::string::npos) << "the password is echoed: " << err;
  EXPECT_EQ(slot_count(db.admin(), "sluice_wrong_password"), "0");
  std::filesystem::remove_all(dir);
}

TEST(PostgresFaults, RoleWithoutReplicationFailsWithTheGrantToRun) {
  TestDb db("norepl");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.admin().exec(
      "DROP ROLE IF EXISTS sluice_t_norepl; CREATE ROLE sluice_t_norepl LOGIN PASSWORD 'pw1'"));
  ASSERT_TRUE(
      db.sql().exec("CREATE TABLE t (id int PRIMARY KEY); GRANT SELECT ON t TO sluice_t_norepl"));
  auto dir = e2e::make_temp_dir("pg-norepl");
  PipelineFile f;
  f.id = "norepl";
  f.url = url_with_credentials(db.url(), "sluice_t_norepl", "pw1");
  f.tables = {"public.t"};
  e2e::write_file(dir / "p.yaml", f.yaml());
  std::string err;
  EXPECT_EQ(run_expect_failure(dir, &err), 1) << err;
  expect_single_error(err, "norepl",
                      {"sluice_t_norepl", "lacks the REPLICATION attribute",
                       "ALTER ROLE \"sluice_t_norepl\" WITH REPLICATION"});
  EXPECT_EQ(slot_count(db.admin(), "sluice_norepl"), "0");
  db.sql().exec("DROP TABLE t");
  EXPECT_TRUE(db.admin().exec("DROP ROLE sluice_t_norepl"));
  std::filesystem::remove_all(dir);
}

TEST(PostgresFaults, MissingTableFailsWithOneLineNamingTheTableAndSetting) {
  TestDb db("missing_table");
  ASSERT_TRUE(db.ok());
  auto dir = e2e::make_temp_dir("pg-notable");
  PipelineFile f;
  f.id = "missing_table";
  f.url = db.url();
  f.tables = {"public.nosuch"};
  e2e::write_file(dir / "p.yaml", f.yaml());
  std::string err;
  EXPECT_EQ(run_expect_failure(dir, &err), 1) << err;
  expect_single_error(err, "missing_table",
                      {"\"public\".\"nosuch\" does not exist", "check `tables`"});
  EXPECT_EQ(slot_count(db.admin(), "sluice_missing_table"), "0");
  EXPECT_EQ(db.sql().scalar("SELECT count(*) FROM pg_publication"), "0");
  std::filesystem::remove_all(dir);
}

TEST(PostgresFaults, WalLevelNotLogicalFailsWithTheSettingToChange) {
  TestDb db("nological", "SLUICE_TEST_PG_NOLOGICAL_URL", "postgres-replica");
  ASSERT_TRUE(db.ok());
  ASSERT_EQ(db.sql().scalar("SHOW wal_level"), "replica");
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id int PRIMARY KEY)"));
  auto dir = e2e::make_temp_dir("pg-nological");
  PipelineFile f;
  f.id = "nological";
  f.url = db.url();
  f.tables = {"public.t"};
  e2e::write_file(dir / "p.yaml", f.yaml());
  std::string err;
  EXPECT_EQ(run_expect_failure(dir, &err), 1) << err;
  expect_single_error(err, "nological",
                      {"wal_level is 'replica'", "set wal_level = logical in postgresql.conf",
                       "restart PostgreSQL"});
  std::filesystem::remove_all(dir);
}

// A second pipeline on the same slot fails with the 'in use' message; the first keeps streaming.
TEST(PostgresFaults, SlotInUseByAnotherProcessFailsTheSecondPipelineOnly) {
  TestDb db("slot_in_use");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1);"));
  auto dir1 = e2e::make_temp_dir("pg-inuse1"), dir2 = e2e::make_temp_dir("pg-inuse2");
  PipelineFile f;
  f.id = "slot_in_use";
  f.url = db.url();
  f.tables = {"public.t"};
  e2e::write_file(dir1 / "p.yaml", f.yaml());
  e2e::write_file(dir2 / "p.yaml", f.yaml());
  Process first({"run", "p.yaml"}, dir1);
  ASSERT_TRUE(wait_for_checkpoint(first, dir1, "slot_in_use", [](const std::string& c) {
    return starts_with(c, "cdc ");
  })) << first.stderr_text();
  ASSERT_TRUE(wait_until(
      [&] {
        return db.sql().scalar(
                   "SELECT active FROM pg_replication_slots WHERE slot_name = 'sluice_slot_in_use'") ==
               "t";
      },
      10s));
  std::string err;
  EXPECT_EQ(run_expect_failure(dir2, &err), 1) << err;
  expect_single_error(err, "slot_in_use",
                      {"replication slot sluice_slot_in_use is in use", "set a different `slot`"});
  // The first one is unaffected: still running, still streaming.
  EXPECT_EQ(first.wait_for(0ms), -1) << first.stderr_text();
  ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES (2)"));
  EXPECT_TRUE(wait_until(
      [&] { return e2e::Db(dir1 / "out.db").scalar("SELECT count(*) FROM t") == 2; }, 30s))
      << first.stderr_text();
  first.signal(SIGTERM);
  EXPECT_EQ(first.wait_for(60s), 0) << first.stderr_text();
  std::filesystem::remove_all(dir1);
  std::filesystem::remove_all(dir2);
}

// The walsender is terminated several times while a writer commits transactions: each time the
// source reconnects and resumes from what it had read, and every row arrives.
TEST(PostgresFaults, DroppedReplicationConnectionIsRetriedWithoutLoss) {
  TestDb db("dropped");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(
      db.sql().exec("CREATE TABLE t (id bigserial PRIMARY KEY, n int NOT NULL, s text NOT NULL)"));
  auto dir = e2e::make_temp_dir("pg-dropped");
  PipelineFile f;
  f.id = "dropped";
  f.url = db.url();
  f.tables = {"public.t"};
  f.max_records = 300;
  e2e::write_file(dir / "p.yaml", f.yaml());
  Process p({"run", "p.yaml", "--idle-exit", "2"}, dir);
  ASSERT_TRUE(wait_for_checkpoint(p, dir, "dropped", [](const std::string& c) {
    return starts_with(c, "cdc ");
  })) << p.stderr_text();
  Writer writer(
      db.url(),
      [](Conn& c, uint64_t i) {
        return c.exec(
            "BEGIN; INSERT INTO t (n, s) SELECT g, md5(g::text) FROM generate_series(1, 200) g;"
            "UPDATE t SET n = n + 1 WHERE id = " +
            std::to_string(i * 7 + 1) + "; COMMIT;");
      },
      5ms);
  int terminated = 0;
  std::string last_pid;
  for (int round = 0; round < 4; ++round) {
    // Wait until the source streams again (a new walsender holds the slot), then cut it off.
    const std::string pid = test::wait_for_walsender(db.sql(), "sluice_dropped", 30s, last_pid);
    ASSERT_FALSE(pid.empty()) << p.stderr_text();
    last_pid = pid;
    const uint64_t at = writer.steps();
    ASSERT_TRUE(wait_until([&] { return writer.steps() >= at + 5; }, 30s));
    if (test::terminate_pg_backend(db.sql(), pid)) ++terminated;
  }
  const uint64_t at = writer.steps();
  ASSERT_TRUE(wait_until([&] { return writer.steps() >= at + 5; }, 30s));
  writer.stop();
  EXPECT_FALSE(writer.failed());
  ASSERT_EQ(p.wait_for(120s), 0) << p.stderr_text();
  EXPECT_EQ(terminated, 4);
  const std::string err = p.stderr_text();
  size_t reconnects = 0;
  for (const auto& l : lines_of(err)) reconnects += l.find("(reconnecting)") != std::string::npos;
  EXPECT_GE(reconnects, 1u) << err;
  EXPECT_EQ(compare_tables(db.sql(), "SELECT id::text, n::text, s FROM t ORDER BY t.id",
                           dir / "out.db", "SELECT id, n, s FROM t ORDER BY id"),
            0);
  std::filesystem::remove_all(dir);
}

// The server ends a terminated walsender asynchronously: a reconnect can find the slot still
// "active for PID" of the connection just dropped. Here the test takes the slot the moment the
// terminated walsender lets go and holds it while sluice reconnects: sluice must keep retrying
// (not drop the pipeline as if another process owned the slot) and resume once it is free.
TEST(PostgresFaults, ReconnectWaitsWhileTheDroppedConnectionStillHoldsTheSlot) {
  TestDb db("busy_slot");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id int PRIMARY KEY, n int)"));
  ASSERT_TRUE(db.sql().exec("INSERT INTO t SELECT g, g FROM generate_series(1, 100) g"));
  auto dir = e2e::make_temp_dir("pg-busy-slot");
  PipelineFile f;
  f.id = "busy_slot";
  f.url = db.url();
  f.tables = {"public.t"};
  e2e::write_file(dir / "p.yaml", f.yaml());
  Process p({"run", "p.yaml"}, dir);
  ASSERT_TRUE(wait_for_checkpoint(p, dir, "busy_slot", [](const std::string& c) {
    return starts_with(c, "cdc ");
  })) << p.stderr_text();
  int held = 0;
  for (int round = 0; round < 5 && held == 0; ++round) {
    const std::string pid = test::wait_for_walsender(db.sql(), "sluice_busy_slot", 30s);
    ASSERT_FALSE(pid.empty()) << p.stderr_text();
    PGconn* holder = PQconnectdb((db.url() + "?replication=database").c_str());
    ASSERT_EQ(PQstatus(holder), CONNECTION_OK) << PQerrorMessage(holder);
    ASSERT_TRUE(test::terminate_pg_backend(db.sql(), pid));
    bool got = false;
    for (const auto until = std::chrono::steady_clock::now() + 5s;
         !got && std::chrono::steady_clock::now() < until;) {
      PGresult* r = PQexec(holder,
                           "START_REPLICATION SLOT sluice_busy_slot LOGICAL 0/0 "
                           "(proto_version '1', publication_names 'sluice_busy_slot')");
      got = PQresultStatus(r) == PGRES_COPY_BOTH;
      PQclear(r);
      if (!got) std::this_thread::sleep_for(1ms);
    }
    if (got) {
      ++held;
      std::this_thread::sleep_for(1500ms);  // sluice's reconnects meanwhile find the slot in use
    }
    PQfinish(holder);
  }
  ASSERT_GE(held, 1) << "sluice always took the slot back first; the case was not exercised";
  ASSERT_TRUE(db.sql().exec("INSERT INTO t SELECT g, g FROM generate_series(101, 200) g"));
  EXPECT_TRUE(wait_until(
      [&] {
        auto rows = test::read_sqlite_table(dir / "out.db", "t", {"id"});
        return rows && rows->size() == 200;
      },
      60s, 100ms))
      << p.stderr_text();
  EXPECT_TRUE(p.running()) << p.stderr_text();
  p.terminate();
  EXPECT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir);
}

TEST(PostgresFaults, CleanupDropsTheSlotThePublicationAndTheCheckpoint) {
  TestDb db("cleanup");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1);"));
  auto dir = e2e::make_temp_dir("pg-cleanup");
  PipelineFile f;
  f.id = "cleanup";
  f.url = db.url();
  f.tables = {"public.t"};
  e2e::write_file(dir / "p.yaml", f.yaml());
  {
    Process p({"run", "p.yaml"}, dir);
    ASSERT_TRUE(wait_for_checkpoint(p, dir, "cleanup", [](const std::string& c) {
      return starts_with(c, "cdc ");
    })) << p.stderr_text();
    EXPECT_EQ(slot_count(db.admin(), "sluice_cleanup"), "1");
    EXPECT_EQ(
        db.sql().scalar("SELECT count(*) FROM pg_publication WHERE pubname = 'sluice_cleanup'"),
        "1");
    // While the pipeline runs, cleanup refuses: the running process holds the checkpoint store.
    Process c({"cleanup", "p.yaml"}, dir);
    EXPECT_EQ(c.wait_for(60s), 2);
    EXPECT_NE(c.stderr_text().find("in use by another sluice process"), std::string::npos)
        << c.stderr_text();
    EXPECT_NE(c.stderr_text().find("stop that process first"), std::string::npos)
        << c.stderr_text();
    EXPECT_EQ(slot_count(db.admin(), "sluice_cleanup"), "1");
    p.signal(SIGTERM);
    ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  }
  ASSERT_FALSE(checkpoint_of(dir, "cleanup").empty());
  ASSERT_TRUE(wait_until(
      [&] {
        return db.sql().scalar(
                   "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'sluice_cleanup' AND active") ==
               "0";
      },
      10s));
  Process c({"cleanup", "p.yaml"}, dir);
  EXPECT_EQ(c.wait_for(60s), 0) << c.stderr_text();
  EXPECT_NE(e2e::read_file(dir / "stdout.txt").find("pipeline cleanup: cleaned up"),
            std::string::npos);
  EXPECT_EQ(slot_count(db.admin(), "sluice_cleanup"), "0");
  EXPECT_EQ(db.sql().scalar("SELECT count(*) FROM pg_publication WHERE pubname = 'sluice_cleanup'"),
            "0");
  EXPECT_EQ(checkpoint_of(dir, "cleanup"), "");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sluice::pgtest
