// `sluice doctor FILE` for the MySQL/MariaDB source, the Kafka source and destination, the SQL
// destinations and the disk (issue 17, item 4), against servers set up wrong on purpose: each
// check is seen failing with its fix, and passing once fixed; exit 1 while a check fails, 0 after.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include "e2e/harness.h"
#include "support/env.h"
#include "support/kafka.h"
#include "support/pipeline_file.h"
#include "support/sql.h"
#include "support/sqlite.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

int doctor(const TempDir& dir, std::string* out) {
  std::filesystem::remove(dir / "stdout.txt");
  const int rc = run_sluice({"doctor", "p.yaml"}, dir.path(), 120s);
  *out = read_file(dir / "stdout.txt");
  return rc;
}

bool has(const std::string& out, const std::string& text) {
  return out.find(text) != std::string::npos;
}

PipelineFile mysql_to_sqlite(const std::string& id, const std::string& url) {
  PipelineFile f;
  f.checkpoints_path = "cp.db";
  f.pipeline(id).source("mysql").set("url", url).set("tables", Yaml::strings({"t"}));
  f.pipeline(id).destination("sqlite").set("path", "out.db");
  return f;
}

TEST(DoctorMysql, BinaryLogOffFails) {
  MysqlDatabase my(unique_name("doc_nobin"), "SLUICE_TEST_MYSQL_NOBINLOG_URL", "mariadb-nobinlog");
  ASSERT_TRUE(my.ok());
  ASSERT_TRUE(my.sql().exec("CREATE TABLE t (id INT PRIMARY KEY)"));
  TempDir dir("doctor-my-nobin");
  mysql_to_sqlite("doc_nobin", my.url()).write(dir / "p.yaml");
  std::string out;
  EXPECT_EQ(doctor(dir, &out), 1) << out;
  EXPECT_TRUE(has(out, "[FAIL] log_bin is on — log_bin = OFF")) << out;
  EXPECT_TRUE(has(out, "fix: start the server with log_bin")) << out;
  EXPECT_TRUE(has(out, "[FAIL] binlog_format is ROW — binlog_format = STATEMENT")) << out;
  EXPECT_TRUE(has(out, "fix: SET GLOBAL binlog_format = 'ROW'")) << out;
  EXPECT_TRUE(has(out, "[ok  ] the tables exist and can be read")) << out;
}

TEST(DoctorMysql, PrivilegesServerIdAndCheckpointRetention) {
  MysqlDatabase my(unique_name("doc_my"));
  ASSERT_TRUE(my.ok());
  ASSERT_TRUE(my.sql().exec("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))"));
  TempDir dir("doctor-my");
  // A user that may read the table but not the binlog.
  const std::string plain = my.user_url("docplain", {"GRANT SELECT ON {db}.* TO {user}"});
  PipelineFile f = mysql_to_sqlite("doc_my", plain);
  f.write(dir / "p.yaml");
  std::string out;
  EXPECT_EQ(doctor(dir, &out), 1) << out;
  EXPECT_TRUE(has(out, "[ok  ] log_bin is on")) << out;
  EXPECT_TRUE(has(out, "[ok  ] binlog_format is ROW")) << out;
  EXPECT_TRUE(has(out, "[ok  ] binlog_row_image is FULL")) << out;
  EXPECT_TRUE(has(out, "[FAIL] the user may read the binlog position")) << out;
  EXPECT_TRUE(has(out, "[FAIL] the user may read the binlog — user '")) << out;
  EXPECT_TRUE(has(out, "fix: GRANT REPLICATION SLAVE ON *.* TO '")) << out;
  EXPECT_TRUE(has(out, "[ok  ] the checkpoint's binlog is still on the server — no checkpoint"))
      << out;
  EXPECT_FALSE(has(out, ":sluice@")) << "no password: " << out;

  // The server's own server_id clashes.
  f.pipeline("doc_my").source("mysql").set("url", my.url()).set("server_id", 1);
  f.write(dir / "p.yaml");
  EXPECT_EQ(doctor(dir, &out), 1) << out;
  EXPECT_TRUE(has(out, "[FAIL] server_id 1 is not used by another — it is the server's own"))
      << out;

  // Fixed: a user with the grants, the derived server_id.
  const std::string repl =
      my.user_url("docrepl", {"GRANT SELECT ON {db}.* TO {user}",
                              "GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO {user}"});
  f = mysql_to_sqlite("doc_my", repl);
  f.write(dir / "p.yaml");
  EXPECT_EQ(doctor(dir, &out), 0) << out;
  EXPECT_TRUE(has(out, "[ok  ] the user may read the binlog position")) << out;
  EXPECT_TRUE(has(out, "[ok  ] the user may read the binlog — REPLICATION SLAVE")) << out;
  EXPECT_TRUE(has(out, "is not used by another — derived from the pipeline id")) << out;
  EXPECT_TRUE(has(out, "0 failed")) << out;

  // A run leaves a checkpoint whose binlog file is on the server; one naming a purged file (a
  // position edited to an older file, as after PURGE BINARY LOGS) fails.
  ASSERT_TRUE(my.sql().exec("INSERT INTO t VALUES (1, 'a')"));
  ASSERT_EQ(run_sluice({"run", "p.yaml", "--idle-exit", "0.5"}, dir.path(), 90s), 0)
      << read_file(dir / "stderr.txt");
  EXPECT_EQ(doctor(dir, &out), 0) << out;
  EXPECT_TRUE(has(out, "[ok  ] the checkpoint's binlog is still on the server — ")) << out;
  EXPECT_TRUE(has(out, " is on the server")) << out;
  const std::string cp = stored_checkpoint(dir / "cp.db", "doc_my");
  ASSERT_TRUE(cp.starts_with("cdc ")) << cp;
  // "cdc <file> <pos> <gtid>...": the file, and the GTID (MariaDB resumes by it) made unknown.
  std::vector<std::string> parts;
  for (size_t at = 0; at <= cp.size();) {
    size_t sp = cp.find(' ', at);
    if (sp == std::string::npos) sp = cp.size();
    parts.push_back(cp.substr(at, sp - at));
    at = sp + 1;
  }
  ASSERT_GE(parts.size(), 3u) << cp;
  parts[1] = "purged-bin.000001";
  if (parts.size() > 3 && !parts[3].empty()) parts[3] = "0-1-999999999";
  std::string bad;
  for (const std::string& p : parts) bad += (bad.empty() ? "" : " ") + p;
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open_v2((dir / "cp.db").c_str(), &db, SQLITE_OPEN_READWRITE, nullptr),
              SQLITE_OK);
    const std::string sql =
        "UPDATE checkpoints SET position = " + sql_literal(bad) + " WHERE pipeline = 'doc_my'";
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  ASSERT_EQ(stored_checkpoint(dir / "cp.db", "doc_my"), bad);
  EXPECT_EQ(doctor(dir, &out), 1) << out;
  EXPECT_TRUE(has(out, "[FAIL] the checkpoint's binlog is still on the server")) << out;
  EXPECT_TRUE(has(out, "fix: the changes since the checkpoint are lost: run `sluice cleanup`"))
      << out;
}

TEST(DoctorKafka, TopicsPositionsTopicPolicyTransactionsAndGroup) {
  const std::string data = unique_topic("doc_data"), positions = unique_topic("doc_pos");
  TopicsCleanup cleanup({data, positions});
  create_topic(positions, 1, {{"cleanup.policy", "delete"}});
  TempDir dir("doctor-kafka");
  auto write = [&](const std::string& brokers, const std::string& source_topic) {
    PipelineFile f;
    f.checkpoints_path = "cp.db";
    f.pipeline("doc_kafka")
        .source("kafka")
        .set("brokers", brokers)
        .set("topics", Yaml::strings({source_topic}))
        .set("connect_timeout", "2s");  // the unreachable case waits no longer
    f.pipeline("doc_kafka")
        .destination("kafka")
        .set("brokers", brokers)
        .set("topic", data)
        .set("transactions", true)
        .set("positions.topic", positions);
    f.write(dir / "p.yaml");
  };
  const std::string missing = unique_topic("doc_missing");
  write(kafka_brokers(), missing);
  std::string out;
  EXPECT_EQ(doctor(dir, &out), 1) << out;
  EXPECT_TRUE(has(out, "[ok  ] the brokers answer")) << out;
  EXPECT_TRUE(has(out, "[FAIL] topic '" + missing + "' exists — no such topic")) << out;
  EXPECT_TRUE(has(out, "[ok  ] consumer group 'sluice-doc_kafka' is free")) << out;
  EXPECT_TRUE(has(out, "[ok  ] topic '" + data + "' exists or can be created")) << out;
  EXPECT_TRUE(
      has(out, "[FAIL] positions topic '" + positions + "' is compacted — cleanup.policy = delete"))
      << out;
  EXPECT_TRUE(has(out, "--add-config cleanup.policy=compact")) << out;
  EXPECT_TRUE(has(out, "[ok  ] the principal may use transactions")) << out;

  // Fixed: the source's topic exists, the positions topic is compacted.
  create_topic(data);
  cleanup.add(positions + "-unused");
  delete_topics({positions});
  ASSERT_TRUE(wait_until(
      [&] {
        rd_kafka_t* rk = detail::make_client(RD_KAFKA_PRODUCER, {});
        const rd_kafka_metadata_t* md = nullptr;
        bool gone = true;
        if (rd_kafka_metadata(rk, 1, nullptr, &md, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
          for (int i = 0; i < md->topic_cnt; ++i) gone &= positions != md->topics[i].topic;
          rd_kafka_metadata_destroy(md);
        }
        rd_kafka_destroy(rk);
        return gone;
      },
      60s, 200ms));
  create_topic(positions, 1, {{"cleanup.policy", "compact"}});
  write(kafka_brokers(), data);
  EXPECT_EQ(doctor(dir, &out), 0) << out;
  EXPECT_TRUE(has(out, "[ok  ] topic '" + data + "' exists — it exists")) << out;
  EXPECT_TRUE(has(
      out, "[ok  ] positions topic '" + positions + "' is compacted — cleanup.policy = compact"))
      << out;

  // No broker there.
  write("127.0.0.1:1", data);
  EXPECT_EQ(doctor(dir, &out), 1) << out;
  EXPECT_TRUE(has(out, "[FAIL] the brokers answer — cannot reach Kafka at 127.0.0.1:1")) << out;
}

TEST(DoctorDestinations, PostgresPrivilegesConflictingTablesAndDisk) {
  PgDatabase pg(unique_name("doc_dest"));
  ASSERT_TRUE(pg.ok());
  const std::string role = unique_name("doc_writer", 40);
  ASSERT_TRUE(pg.admin().exec("CREATE ROLE " + role + " LOGIN PASSWORD 'pw'"));
  ASSERT_TRUE(pg.sql().exec(
      "CREATE TABLE public.t (id int PRIMARY KEY, v text, n int); CREATE SCHEMA dst; "
      "CREATE TABLE dst.t (id int, v integer); REVOKE CREATE ON SCHEMA public FROM PUBLIC; "
      "CREATE SCHEMA dst2; GRANT USAGE ON SCHEMA dst, dst2 TO " +
      role + "; GRANT SELECT ON dst.t TO " + role));
  TempDir dir("doctor-dest");
  auto write = [&](const std::string& schema, uint64_t spool_max) {
    PipelineFile f;
    f.checkpoints_path = "cp.db";
    f.pipeline("doc_dest")
        .source("postgres")
        .set("url", pg.url())
        .set("tables", Yaml::strings({"public.t"}));
    f.pipeline("doc_dest")
        .destination("postgres")
        .set("url", pg_url_with_credentials(pg.url(), role, "pw"))
        .set("schema", schema);
    f.pipeline("doc_dest")
        .extra.set("spool",
                   Yaml::map({{"type", "disk"}, {"path", "spool"}, {"max_bytes", spool_max}}));
    f.write(dir / "p.yaml");
  };
  // dst.t exists with a column that cannot hold the source's, no key, no write grants; the disk
  // cannot hold the spool's bound.
  write("dst", uint64_t(1) << 60);
  std::string out;
  EXPECT_EQ(doctor(dir, &out), 1) << out;
  EXPECT_TRUE(has(out, "pipeline doc_dest: postgres destination")) << out;
  EXPECT_TRUE(has(out, "[ok  ] the server accepts the connection — postgres destination")) << out;
  EXPECT_TRUE(has(out, "[FAIL] table \"dst\".\"t\" can be written — role \"" + role +
                           "\" lacks INSERT, UPDATE, DELETE"))
      << out;
  EXPECT_TRUE(has(out,
                  "[FAIL] table \"dst\".\"t\" is keyed like public.t — its primary key is "
                  "(none), the source's key is (id)"))
      << out;
  EXPECT_TRUE(has(out,
                  "[FAIL] table \"dst\".\"t\" can hold the columns of public.t — column v: "
                  "text values (text) do not fit a integer column (integer)"))
      << out;
  EXPECT_TRUE(has(out, "[FAIL] the spool directory has at least 1024.0 PiB free")) << out;
  EXPECT_TRUE(has(out, "[ok  ] the checkpoint directory has at least 1.0 GiB free")) << out;
  EXPECT_FALSE(has(out, ":pw@")) << out;

  // A schema the role may not create in.
  write("dst2", 0);
  EXPECT_EQ(doctor(dir, &out), 1) << out;
  EXPECT_TRUE(has(out, "[FAIL] table \"dst2\".\"t\" can be created — role \"" + role +
                           "\" lacks CREATE on schema \"dst2\""))
      << out;
  EXPECT_TRUE(has(out, "fix: GRANT CREATE ON SCHEMA \"dst2\" TO \"" + role + "\"")) << out;
  EXPECT_TRUE(has(out, "[ok  ] the spool directory has at least 1.0 GiB free")) << out;

  // Fixed: CREATE granted; and dst.t keyed like the source, of types that hold its values.
  ASSERT_TRUE(pg.sql().exec("GRANT CREATE ON SCHEMA dst2 TO " + role +
                            "; DROP TABLE dst.t; CREATE TABLE dst.t (id bigint PRIMARY KEY, v "
                            "varchar(20), n numeric); ALTER TABLE dst.t OWNER TO " +
                            role));
  EXPECT_EQ(doctor(dir, &out), 0) << out;
  EXPECT_TRUE(has(out, "[ok  ] table \"dst2\".\"t\" can be created — not created yet")) << out;
  write("dst", 0);
  EXPECT_EQ(doctor(dir, &out), 0) << out;
  EXPECT_TRUE(has(out, "[ok  ] table \"dst\".\"t\" can be written")) << out;
  EXPECT_TRUE(has(out, "[ok  ] table \"dst\".\"t\" is keyed like public.t")) << out;
  EXPECT_TRUE(has(out, "[ok  ] table \"dst\".\"t\" can hold the columns of public.t")) << out;
  // Nothing was created: no table in dst2, no slot.
  EXPECT_EQ(pg.sql().scalar("SELECT count(*) FROM pg_tables WHERE schemaname = 'dst2'"), "0");
  EXPECT_EQ(pg.admin().scalar(
                "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'sluice_doc_dest'"),
            "0");
  pg.sql().exec("DROP SCHEMA dst CASCADE; DROP SCHEMA dst2 CASCADE", true);
  pg.admin().exec("DROP OWNED BY " + role + " CASCADE", true);
}

TEST(DoctorDestinations, MysqlUserWithoutCreate) {
  MysqlDatabase my(unique_name("doc_mydest"));
  ASSERT_TRUE(my.ok());
  ASSERT_TRUE(my.sql().exec("CREATE TABLE src (id INT PRIMARY KEY)"));
  TempDir dir("doctor-mydest");
  const std::string reader = my.user_url("docro", {"GRANT SELECT ON {db}.* TO {user}"});
  auto write = [&](const std::string& url) {
    PipelineFile f;
    f.checkpoints_path = "cp.db";
    f.pipeline("doc_mydest")
        .source("mysql")
        .set("url", my.url())
        .set("tables", Yaml::strings({"src"}));
    f.pipeline("doc_mydest").destination("mysql").set("url", url).set("table", "out");
    f.write(dir / "p.yaml");
  };
  write(reader);
  std::string out;
  EXPECT_EQ(doctor(dir, &out), 1) << out;
  EXPECT_TRUE(has(out, "[FAIL] table `out` can be created — user '")) << out;
  EXPECT_TRUE(has(out, "lacks CREATE, INSERT, UPDATE, DELETE on the database")) << out;
  EXPECT_TRUE(has(out, "fix: GRANT CREATE, INSERT, UPDATE, DELETE, ALTER ON `")) << out;
  write(my.user_url("docrw", {"GRANT ALL ON {db}.* TO {user}"}));
  EXPECT_EQ(doctor(dir, &out), 0) << out;
  EXPECT_TRUE(has(out, "[ok  ] table `out` can be created — not created yet")) << out;
  // An existing table keyed otherwise, with a column that cannot hold the source's.
  ASSERT_TRUE(my.sql().exec("CREATE TABLE `out` (k INT PRIMARY KEY, id DATE)"));
  EXPECT_EQ(doctor(dir, &out), 1) << out;
  EXPECT_TRUE(has(out, "[FAIL] table `out` is keyed like " + my.name() +
                           ".src — its primary key is (k), the source's key is (id)"))
      << out;
  EXPECT_TRUE(has(out, "column id: integer values (int(11)) do not fit a date/time column (date)"))
      << out;
}

TEST(DoctorDestinations, EachDestinationOfAFanOutAndItsDeadLetterQueue) {
  TempDir dir("doctor-fanout");
  write_file(dir / "p.yaml", R"(version: 1
checkpoints: {path: cp.db}
pipelines:
  - id: fan
    source: {connector: generator, settings: {count: 1}}
    destinations:
      - {name: a, connector: file, settings: {path: /nonexistent-doctor/out.jsonl}, on_error: dlq,
         dlq: {connector: file, settings: {path: dlq.jsonl}}}
      - {name: b, connector: sqlite, settings: {path: out.db}}
)");
  std::string out;
  EXPECT_EQ(doctor(dir, &out), 1) << out;
  EXPECT_TRUE(has(out,
                  "pipeline fan: file destination a\n  [FAIL] the file can be created — "
                  "/nonexistent-doctor: No such file or directory"))
      << out;
  EXPECT_TRUE(has(out,
                  "pipeline fan: file dead-letter destination of a\n  [ok  ] the file can be "
                  "created — not created yet"))
      << out;
  EXPECT_TRUE(has(out,
                  "pipeline fan: sqlite destination b\n  [ok  ] the database file can be "
                  "created"))
      << out;
  EXPECT_TRUE(has(out, "[--] this source has no doctor checks yet")) << out;
  EXPECT_FALSE(std::filesystem::exists(dir / "out.db")) << "doctor created the database";
  EXPECT_FALSE(std::filesystem::exists(dir / "dlq.jsonl")) << "doctor created the file";
}

}  // namespace
}  // namespace sluice::test
