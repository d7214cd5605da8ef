// TLS to PostgreSQL, MariaDB and Kafka against the TLS test servers of scripts/services
// (postgres-tls: TCP only over TLS; mariadb-tls: a user sluice_tls REQUIRE SSL; kafka-tls: an SSL
// listener that requires client certificates), with the CA and certificates the harness generated:
// the server confirms TLS (pg_stat_ssl, Ssl_cipher), a pipeline over TLS delivers its rows, a wrong
// CA and plain text to a TLS-only server are one-line errors naming the setting to fix.
#include <gtest/gtest.h>

#include <cstdlib>

#include "connectors/mysql/mysql_connection.h"
#include "connectors/postgres/pg_connection.h"
#include "integration/pg_harness.h"
#include "support/kafka.h"
#include "support/sql.h"

namespace sluice::pgtest {
namespace {

using e2e::Process;

std::string tls_env(const char* var, const char* service) {
  return test::required_env(var, service);
}
std::string ca() { return tls_env("SLUICE_TEST_TLS_CA", "postgres-tls"); }
std::string other_ca() { return tls_env("SLUICE_TEST_TLS_OTHER_CA", "postgres-tls"); }
std::string client_cert() { return tls_env("SLUICE_TEST_TLS_CERT", "postgres-tls"); }
std::string client_key() { return tls_env("SLUICE_TEST_TLS_KEY", "postgres-tls"); }

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The first error line of a run's stderr that mentions `what` ("" when none does).
std::string error_line_with(const std::string& err, const std::string& what) {
  std::istringstream in(err);
  std::string line;
  while (std::getline(in, line))
    if (has(line, what) && (test::is_error_log_line(line) || line.rfind("sluice:", 0) == 0))
      return line;
  return "";
}

// Runs p.yaml in `dir` until it exits; returns the exit code (stderr in stderr.txt).
int run(const std::filesystem::path& dir, const test::PipelineFile& f, int idle_exit = 2) {
  f.write(dir / "p.yaml");
  return e2e::run_sluice({"run", "p.yaml", "--idle-exit", std::to_string(idle_exit)}, dir,
                         std::chrono::seconds(90));
}

// ── PostgreSQL ──────────────────────────────────────────────────────────────

TEST(PostgresTls, TheServerSeesTlsAndTheClientCertificate) {
  std::string url = tls_env("SLUICE_TEST_PG_TLS_URL", "postgres-tls");
  ASSERT_TRUE(pg::apply_tls(url, {"verify_identity", ca(), client_cert(), client_key(), ""}));
  auto c = pg::PgConn::connect(url, false);
  ASSERT_TRUE(c.ok()) << c.error().message();
  auto r = c->exec("SELECT ssl::text, client_dn FROM pg_stat_ssl WHERE pid = pg_backend_pid()");
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(PQntuples(r->get()), 1);
  EXPECT_STREQ(PQgetvalue(r->get(), 0, 0), "true");
  EXPECT_STREQ(PQgetvalue(r->get(), 0, 1), "/CN=sluice client");
}

TEST(PostgresTls, APipelineOverTlsDeliversItsRows) {
  TestDb src("tls_src", "SLUICE_TEST_PG_TLS_URL", "postgres-tls");
  TestDb dst("tls_dst", "SLUICE_TEST_PG_TLS_URL", "postgres-tls");
  ASSERT_TRUE(src.ok() && dst.ok());
  ASSERT_TRUE(
      src.sql().exec("CREATE TABLE t (id int PRIMARY KEY, name text);"
                     "INSERT INTO t SELECT g, 'n' || g FROM generate_series(1, 50) g"));
  auto dir = e2e::make_temp_dir("tls-pg");
  test::PipelineFile f;
  f.pipeline("tls_pg")
      .source("postgres")
      .set("url", src.url())
      .set("tables", test::Yaml::strings({"public.t"}))
      .set("tls.mode", "verify_identity")
      .set("tls.ca", ca())
      .set("tls.cert", client_cert())
      .set("tls.key", client_key());
  f.pipeline("tls_pg")
      .destination("postgres")
      .set("url", dst.url())
      .set("tls.mode", "verify_ca")
      .set("tls.ca", ca());
  f.write(dir / "p.yaml");
  Process p({"run", "p.yaml", "--idle-exit", "3"}, dir);
  ASSERT_TRUE(wait_for_checkpoint(p, dir, "tls_pg", [](const std::string& c) {
    return starts_with(c, "cdc ");
  })) << p.stderr_text();
  ASSERT_TRUE(src.sql().exec("INSERT INTO t VALUES (51, 'after the snapshot')"));
  // While it streams: every sluice backend of the source database is on TLS, and the
  // replication connection presented the client certificate.
  const std::string q =
      "SELECT count(*) FILTER (WHERE s.ssl), count(*) FILTER (WHERE NOT s.ssl), "
      "count(*) FILTER (WHERE s.client_dn = '/CN=sluice client') "
      "FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) "
      "WHERE a.application_name = 'sluice' AND a.datname = " +
      quote_literal(src.name());
  auto counts = src.admin().query(q);
  ASSERT_EQ(counts.size(), 1u);
  EXPECT_NE(*counts[0][0], "0") << "no sluice connection on TLS";
  EXPECT_EQ(*counts[0][1], "0") << "a sluice connection without TLS";
  EXPECT_NE(*counts[0][2], "0") << "the client certificate was not presented";
  ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  EXPECT_EQ(dst.sql().scalar("SELECT count(*) FROM t"), "51");
  EXPECT_EQ(dst.sql().scalar("SELECT name FROM t WHERE id = 51"), "after the snapshot");
}

TEST(PostgresTls, AWrongCaIsAOneLineErrorNamingTlsCa) {
  TestDb src("tls_wrong_ca", "SLUICE_TEST_PG_TLS_URL", "postgres-tls");
  ASSERT_TRUE(src.ok());
  ASSERT_TRUE(src.sql().exec("CREATE TABLE t (id int PRIMARY KEY)"));
  auto dir = e2e::make_temp_dir("tls-pg-wrong-ca");
  test::PipelineFile f;
  f.pipeline("tls_pg_wrong")
      .source("postgres")
      .set("url", src.url())
      .set("tables", test::Yaml::strings({"public.t"}))
      .set("tls.mode", "verify_ca")
      .set("tls.ca", other_ca());
  f.pipeline("tls_pg_wrong").destination("discard");
  EXPECT_NE(run(dir, f), 0);
  const std::string err = e2e::read_file(dir / "stderr.txt");
  const std::string line = error_line_with(err, "certificate verify failed");
  EXPECT_TRUE(has(line, "check tls.ca")) << err;
}

TEST(PostgresTls, PlainTextToATlsOnlyServerNamesTlsMode) {
  TestDb src("tls_plain", "SLUICE_TEST_PG_TLS_URL", "postgres-tls");
  ASSERT_TRUE(src.ok());
  ASSERT_TRUE(src.sql().exec("CREATE TABLE t (id int PRIMARY KEY)"));
  auto dir = e2e::make_temp_dir("tls-pg-plain");
  test::PipelineFile f;
  f.pipeline("tls_pg_plain")
      .source("postgres")
      .set("url", src.url())
      .set("tables", test::Yaml::strings({"public.t"}))
      .set("tls.mode", "disabled");
  f.pipeline("tls_pg_plain").destination("discard");
  EXPECT_NE(run(dir, f), 0);
  const std::string err = e2e::read_file(dir / "stderr.txt");
  const std::string line = error_line_with(err, "no encryption");
  EXPECT_TRUE(has(line, "tls.mode")) << err;
}

// ── MariaDB ─────────────────────────────────────────────────────────────────

std::string mysql_tls_url() { return tls_env("SLUICE_TEST_MYSQL_TLS_URL", "mariadb-tls"); }

TEST(MysqlTls, TheServerReportsACipher) {
  auto url = mysql::parse_mysql_url(mysql_tls_url(), {});
  ASSERT_TRUE(url.ok()) << url.error().message();
  mysql::ConnectOptions o;
  o.url = url.value();
  o.tls_mode = "verify_identity";
  o.tls_ca = ca();
  o.tls_cert = client_cert();
  o.tls_key = client_key();
  auto c = mysql::MysqlConn::connect(o);
  ASSERT_TRUE(c.ok()) << c.error().message();
  auto rows = c->query("SHOW STATUS LIKE 'Ssl_cipher'", "reading Ssl_cipher");
  ASSERT_TRUE(rows.ok()) << rows.error().message();
  ASSERT_EQ(rows->size(), 1u);
  ASSERT_TRUE((*rows)[0][1].has_value());
  EXPECT_FALSE((*rows)[0][1]->empty()) << "Ssl_cipher is empty: the session is not on TLS";
}

TEST(MysqlTls, APipelineOverTlsDeliversItsRows) {
  test::MysqlDatabase src("tls_my_src", "SLUICE_TEST_MYSQL_TLS_ADMIN_URL", "mariadb-tls");
  test::MysqlDatabase dst("tls_my_dst", "SLUICE_TEST_MYSQL_TLS_ADMIN_URL", "mariadb-tls");
  ASSERT_TRUE(src.ok() && dst.ok());
  ASSERT_TRUE(
      src.sql().exec("CREATE TABLE t (id int PRIMARY KEY, name mediumtext);"
                     "INSERT INTO t VALUES (1, 'one'), (2, 'two'), (3, 'three')"));
  // The REQUIRE SSL user for both ends: plain text would be refused.
  auto with_db = [](const std::string& db) {
    test::MyUrl u = test::MyUrl::parse(mysql_tls_url());
    u.db = db;
    return u.str();
  };
  auto dir = e2e::make_temp_dir("tls-my");
  test::PipelineFile f;
  f.pipeline("tls_my")
      .source("mysql")
      .set("url", with_db(src.name()))
      .set("tables", test::Yaml::strings({src.name() + ".t"}))
      .set("tls.mode", "verify_identity")
      .set("tls.ca", ca())
      .set("tls.cert", client_cert())
      .set("tls.key", client_key());
  f.pipeline("tls_my")
      .destination("mysql")
      .set("url", with_db(dst.name()))
      .set("tls.mode", "verify_ca")
      .set("tls.ca", ca());
  EXPECT_EQ(run(dir, f), 0) << e2e::read_file(dir / "stderr.txt");
  EXPECT_EQ(dst.sql().scalar("SELECT count(*) FROM t"), "3");
  EXPECT_EQ(dst.sql().scalar("SELECT name FROM t WHERE id = 3"), "three");
  // The changes since come from the binlog over TLS: the second run streams them from the first
  // run's position (an event of 100 kB among them, larger than libmariadb's 16 KiB read-ahead).
  ASSERT_TRUE(src.sql().exec(
      "INSERT INTO t VALUES (4, 'four'), (5, 'five'); UPDATE t SET name = 'Two' WHERE id = 2;"
      "DELETE FROM t WHERE id = 1;"
      "INSERT INTO t VALUES (6, repeat('x', 100000))"));
  EXPECT_EQ(run(dir, f), 0) << e2e::read_file(dir / "stderr.txt");
  EXPECT_EQ(dst.sql().scalar("SELECT count(*) FROM t"), "5");
  EXPECT_EQ(dst.sql().scalar("SELECT group_concat(id ORDER BY id) FROM t"), "2,3,4,5,6");
  EXPECT_EQ(dst.sql().scalar("SELECT name FROM t WHERE id = 2"), "Two");
  EXPECT_EQ(dst.sql().scalar("SELECT length(name) FROM t WHERE id = 6"), "100000");
}

TEST(MysqlTls, AWrongCaIsAOneLineErrorNamingTlsCa) {
  test::MysqlDatabase src("tls_my_wrong", "SLUICE_TEST_MYSQL_TLS_ADMIN_URL", "mariadb-tls");
  ASSERT_TRUE(src.ok());
  ASSERT_TRUE(src.sql().exec("CREATE TABLE t (id int PRIMARY KEY)"));
  auto dir = e2e::make_temp_dir("tls-my-wrong-ca");
  test::PipelineFile f;
  f.pipeline("tls_my_wrong")
      .source("mysql")
      .set("url", src.url())
      .set("tables", test::Yaml::strings({src.name() + ".t"}))
      .set("tls.mode", "verify_ca")
      .set("tls.ca", other_ca());
  f.pipeline("tls_my_wrong").destination("discard");
  EXPECT_NE(run(dir, f), 0);
  const std::string err = e2e::read_file(dir / "stderr.txt");
  EXPECT_TRUE(has(error_line_with(err, "cannot connect"), "check tls.ca")) << err;
}

TEST(MysqlTls, PlainTextForARequireSslUserNamesTlsMode) {
  test::MysqlDatabase src("tls_my_plain", "SLUICE_TEST_MYSQL_TLS_ADMIN_URL", "mariadb-tls");
  ASSERT_TRUE(src.ok());
  ASSERT_TRUE(src.sql().exec("CREATE TABLE t (id int PRIMARY KEY)"));
  test::MyUrl u = test::MyUrl::parse(mysql_tls_url());
  u.db = src.name();
  auto dir = e2e::make_temp_dir("tls-my-plain");
  test::PipelineFile f;
  f.pipeline("tls_my_plain")
      .source("mysql")
      .set("url", u.str())
      .set("tables", test::Yaml::strings({src.name() + ".t"}))
      .set("tls.mode", "disabled");
  f.pipeline("tls_my_plain").destination("discard");
  EXPECT_NE(run(dir, f), 0);
  const std::string err = e2e::read_file(dir / "stderr.txt");
  const std::string line = error_line_with(err, "Access denied");
  EXPECT_TRUE(has(line, "REQUIRE SSL")) << err;
  EXPECT_TRUE(has(line, "set tls.mode")) << err;
}

// ── Kafka ───────────────────────────────────────────────────────────────────

// The test helpers (support/kafka.h) read SLUICE_TEST_KAFKA_BROKERS: point them at kafka-tls's
// plain-text listener, for set-up and for reading what arrived.
class KafkaTls : public ::testing::Test {
 protected:
  void SetUp() override {
    brokers_ = tls_env("SLUICE_TEST_KAFKA_TLS_BROKERS", "kafka-tls");
    const std::string plain = tls_env("SLUICE_TEST_KAFKA_TLS_PLAIN_BROKERS", "kafka-tls");
    ASSERT_FALSE(brokers_.empty() || plain.empty());
    setenv("SLUICE_TEST_KAFKA_BROKERS", plain.c_str(), 1);
  }
  std::string brokers_;
};

TEST_F(KafkaTls, APipelineReadsAndWritesOverTls) {
  const std::string in = test::unique_topic("tls_in"), out = test::unique_topic("tls_out");
  test::create_topic(in);
  test::produce(in, {{"k1", "v1"}, {"k2", "v2"}, {"k3", "v3"}});
  auto dir = e2e::make_temp_dir("tls-kafka");
  test::PipelineFile f;
  f.pipeline("tls_kafka")
      .source("kafka")
      .set("brokers", brokers_)
      .set("topics", test::Yaml::strings({in}))
      .set("start", "earliest")
      .set("format", "raw")
      .set("tls.mode", "verify_identity")
      .set("tls.ca", ca())
      .set("tls.cert", client_cert())
      .set("tls.key", client_key());
  f.pipeline("tls_kafka")
      .destination("kafka")
      .set("brokers", brokers_)
      .set("topic", out)
      .set("tls.mode", "verify_ca")
      .set("tls.ca", ca())
      .set("tls.cert", client_cert())
      .set("tls.key", client_key());
  EXPECT_EQ(run(dir, f, 3), 0) << e2e::read_file(dir / "stderr.txt");
  auto msgs = test::consume_all(out, 3, std::chrono::seconds(20));
  ASSERT_EQ(msgs.size(), 3u);
  EXPECT_TRUE(has(*msgs[2].value, "v3")) << *msgs[2].value;
  test::delete_topics({in, out});
}

TEST_F(KafkaTls, AWrongCaIsAOneLineErrorNamingTlsCa) {
  auto dir = e2e::make_temp_dir("tls-kafka-wrong-ca");
  test::PipelineFile f;
  f.pipeline("tls_kafka_wrong")
      .source("kafka")
      .set("brokers", brokers_)
      .set("topics", test::Yaml::strings({"t"}))
      .set("connect_timeout", "3s")
      .set("tls.mode", "verify_ca")
      .set("tls.ca", other_ca())
      .set("tls.cert", client_cert())
      .set("tls.key", client_key());
  f.pipeline("tls_kafka_wrong").destination("discard");
  EXPECT_NE(run(dir, f), 0);
  const std::string err = e2e::read_file(dir / "stderr.txt");
  EXPECT_TRUE(has(error_line_with(err, "cannot reach Kafka"), "check tls.ca")) << err;
}

TEST_F(KafkaTls, PlainTextToTheTlsListenerIsRefused) {
  auto dir = e2e::make_temp_dir("tls-kafka-plain");
  test::PipelineFile f;
  f.pipeline("tls_kafka_plain")
      .source("kafka")
      .set("brokers", brokers_)
      .set("topics", test::Yaml::strings({"t"}))
      .set("connect_timeout", "3s");
  f.pipeline("tls_kafka_plain").destination("discard");
  EXPECT_NE(run(dir, f), 0);
  const std::string err = e2e::read_file(dir / "stderr.txt");
  EXPECT_FALSE(error_line_with(err, "cannot reach Kafka").empty()) << err;
}

}  // namespace
}  // namespace sluice::pgtest
