// `sluice doctor FILE` against the real PostgreSQL servers (issue 17, item 4): every check is seen
// failing on a server set up wrong on purpose, with its fix, and passing once fixed; the exit code
// is 1 while a check fails and 0 after; nothing is created on the server. The other connectors:
// doctor_connectors_test.cc.
#include <gtest/gtest.h>

#include "e2e/harness.h"
#include "support/env.h"
#include "support/pipeline_file.h"
#include "support/sql.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

// `id` names the pipeline, so its slot (sluice_<id>): slots are the server's, not a database's,
// and the tests run in parallel.
void write_pipeline(const TempDir& dir, const std::string& id, const std::string& url,
                    const std::string& table) {
  PipelineFile f;
  f.checkpoints_path = "cp.db";
  f.pipeline(id).source("postgres").set("url", url).set("tables", Yaml::strings({table}));
  f.pipeline(id).destination("sqlite").set("path", "out.db");
  f.write(dir / "p.yaml");
}

// Runs `sluice doctor p.yaml`; its stdout into *out (run_sluice appends to stdout.txt).
int doctor(const TempDir& dir, std::string* out) {
  std::filesystem::remove(dir / "stdout.txt");
  const int rc = run_sluice({"doctor", "p.yaml"}, dir.path(), 60s);
  *out = read_file(dir / "stdout.txt");
  return rc;
}

bool has(const std::string& out, const std::string& text) {
  return out.find(text) != std::string::npos;
}

TEST(Doctor, EachFailureNamesItsFixAndPassesOnceFixed) {
  PgDatabase pg(unique_name("doctor"));
  ASSERT_TRUE(pg.ok());
  const std::string role = unique_name("doctor_role", 40);
  ASSERT_TRUE(pg.admin().exec("CREATE ROLE " + role + " LOGIN PASSWORD 'pw'"));
  ASSERT_TRUE(pg.sql().exec("CREATE TABLE t (id int, v text); INSERT INTO t VALUES (1, 'a')"));
  TempDir dir("doctor");
  write_pipeline(dir, "doctor_fix", pg_url_with_credentials(pg.url(), role, "pw"), "public.t");

  std::string out;
  EXPECT_EQ(doctor(dir, &out), 1) << out;
  EXPECT_TRUE(has(out, "[ok  ] wal_level is logical")) << out;
  EXPECT_TRUE(has(out, "[FAIL] the user may replicate")) << out;
  EXPECT_TRUE(has(out, "fix: ALTER ROLE \"" + role + "\" REPLICATION")) << out;
  EXPECT_TRUE(has(out, "[FAIL] table \"public\".\"t\" can be read")) << out;
  EXPECT_TRUE(has(out, "GRANT SELECT ON \"public\".\"t\"")) << out;
  EXPECT_TRUE(has(out, "[FAIL] table \"public\".\"t\" has a replica identity")) << out;
  EXPECT_TRUE(has(out, "REPLICA IDENTITY FULL")) << out;
  EXPECT_TRUE(has(out, "[FAIL] table \"public\".\"t\" can be published")) << out;
  EXPECT_TRUE(has(out, "[ok  ] the database file can be created — not created yet")) << out;
  EXPECT_FALSE(has(out, "pw@")) << "the password must not be shown: " << out;

  // Fixed: replication, read access, a key, and the publication made by the owner.
  ASSERT_TRUE(pg.admin().exec("ALTER ROLE " + role + " REPLICATION"));
  ASSERT_TRUE(pg.sql().exec("ALTER TABLE t ADD PRIMARY KEY (id); GRANT SELECT ON t TO " + role +
                            "; CREATE PUBLICATION sluice_doctor_fix FOR TABLE t"));
  EXPECT_EQ(doctor(dir, &out), 0) << out;
  EXPECT_TRUE(has(out, "[ok  ] the user may replicate")) << out;
  EXPECT_TRUE(has(out, "[ok  ] publication \"sluice_doctor_fix\" publishes every operation"))
      << out;
  EXPECT_TRUE(has(out, "[ok  ] the tables can be read, published and replicated")) << out;
  EXPECT_TRUE(has(out, "[ok  ] replication slot \"sluice_doctor_fix\" can be created")) << out;
  EXPECT_TRUE(has(out, "0 failed")) << out;
  // Nothing was created: no slot.
  EXPECT_EQ(pg.admin().scalar(
                "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'sluice_doctor_fix'"),
            "0");
  pg.sql().exec("DROP PUBLICATION IF EXISTS sluice_doctor_fix", true);
  pg.sql().exec("DROP TABLE t", true);
  pg.admin().exec("DROP OWNED BY " + role, true);
  pg.admin().exec("DROP ROLE IF EXISTS " + role, true);
}

TEST(Doctor, SlotStateAndRetainedWalAfterARun) {
  PgDatabase pg(unique_name("doctor_slot"));
  ASSERT_TRUE(pg.ok());
  ASSERT_TRUE(pg.sql().exec("CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1)"));
  TempDir dir("doctor-slot");
  write_pipeline(dir, "doctor_slot", pg.url(), "public.t");
  ASSERT_EQ(run_sluice({"run", "p.yaml", "--idle-exit", "0.5"}, dir.path(), 60s), 0)
      << read_file(dir / "stderr.txt");
  std::string out;
  EXPECT_EQ(doctor(dir, &out), 0) << out;
  EXPECT_TRUE(
      has(out, "[ok  ] replication slot \"sluice_doctor_slot\" still has its WAL — wal_status = "))
      << out;
  EXPECT_TRUE(has(out, "retains ")) << out;
  EXPECT_EQ(run_sluice({"cleanup", "p.yaml"}, dir.path(), 60s), 0);
}

TEST(Doctor, WalLevelReplicaFails) {
  PgDatabase pg(unique_name("doctor_wal"), "SLUICE_TEST_PG_NOLOGICAL_URL");
  ASSERT_TRUE(pg.ok());
  ASSERT_TRUE(pg.sql().exec("CREATE TABLE t (id int PRIMARY KEY)"));
  TempDir dir("doctor-wal");
  write_pipeline(dir, "doctor_wal", pg.url(), "public.t");
  std::string out;
  EXPECT_EQ(doctor(dir, &out), 1) << out;
  EXPECT_TRUE(has(out, "[FAIL] wal_level is logical — wal_level = replica")) << out;
  EXPECT_TRUE(has(out, "fix: ALTER SYSTEM SET wal_level = logical")) << out;
}

TEST(Doctor, MissingTableAndUnreachableServer) {
  PgDatabase pg(unique_name("doctor_missing"));
  ASSERT_TRUE(pg.ok());
  TempDir dir("doctor-missing");
  write_pipeline(dir, "doctor_missing", pg.url(), "public.nope");
  std::string out;
  EXPECT_EQ(doctor(dir, &out), 1) << out;
  EXPECT_TRUE(has(out, "[FAIL] the tables exist")) << out;
  EXPECT_TRUE(has(out, "does not exist")) << out;

  write_pipeline(dir, "doctor_missing", "postgresql://postgres:secret-doctor@127.0.0.1:1/postgres",
                 "public.t");
  EXPECT_EQ(doctor(dir, &out), 1) << out;
  EXPECT_TRUE(has(out, "[FAIL] the server accepts the connection")) << out;
  EXPECT_FALSE(has(out, "secret-doctor")) << out;
}

}  // namespace
}  // namespace sluice::test
