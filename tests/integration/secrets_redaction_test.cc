// Passwords never leave the process (issue 13, item 8): a password holding each character that
// URLs give a meaning to ('/', '@', '%', ':', '?', '#', quotes, a backslash, a space) works through
// the `user`/`password`/`password_file` settings and raw inside a `url`, and appears nowhere: not
// in stdout, stderr (at trace level, text and JSON), /metrics, /healthz, nor any file sluice
// writes. A wrong password is not shown either.
#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdlib>
#include <regex>
#include <thread>

#include "e2e/harness.h"
#include "support/env.h"
#include "support/pipeline_file.h"
#include "support/sql.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

const std::string kPassword = R"(Sx/y@z%2F%:w?d#q"b\k'z e)";

// Every file under `dir` (recursively) that contains `secret`, but the pipeline files the test
// wrote itself.
std::vector<std::string> files_containing(const std::filesystem::path& dir,
                                          const std::string& secret) {
  std::vector<std::string> found;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() != ".yaml" &&
        read_file(e.path()).find(secret) != std::string::npos)
      found.push_back(e.path().string());
  return found;
}

// MySQL string literal: backslash and quote escaped.
std::string my_literal(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\\' || c == '\'') out += '\\';
    out += c;
  }
  return out + "'";
}

int announced_port(const e2e::Process& p) {
  int port = 0;
  wait_until(
      [&] {
        std::smatch m;
        const std::string err = p.stderr_text();
        if (std::regex_search(err, m, std::regex("127\\.0\\.0\\.1:([0-9]+)/metrics")))
          port = std::stoi(m[1]);
        return port != 0;
      },
      10s, 10ms);
  return port;
}

class SecretRedaction : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(pg_.ok());
    role_ = unique_name("secret_role", 40);
    ASSERT_TRUE(pg_.admin().exec("CREATE ROLE " + role_ + " LOGIN REPLICATION PASSWORD " +
                                 sql_literal(kPassword)));
    ASSERT_TRUE(pg_.sql().exec(
        "CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t "
        "VALUES (1, 'one'), (2, 'two'); ALTER TABLE t OWNER TO " +
        role_ + "; GRANT CREATE ON DATABASE " + pg_ident(pg_.name()) + " TO " + role_));
  }
  void TearDown() override {
    // The role owns the publication and slot: drop them first (PgDatabase drops the database).
    drop_pg_slots(pg_.admin(), pg_.name());
    pg_.sql().exec("DROP OWNED BY " + role_, true);
    pg_.admin().exec("DROP ROLE IF EXISTS " + role_, true);
  }
  // The test database's URL with no user info: host, port and database only.
  std::string bare_pg_url() const {
    PgUrl u = PgUrl::parse(pg_.url());
    u.userinfo.clear();
    return u.str();
  }

  PgDatabase pg_{unique_name("secret")};
  std::string role_;
};

TEST_F(SecretRedaction, PasswordSettingsAndFileNeverShowThePassword) {
  MysqlDatabase my(unique_name("secret", 60));
  ASSERT_TRUE(my.ok());
  MyUrl mu = MyUrl::parse(my.user_url("secret", {"GRANT ALL ON {db}.* TO {user}"}));
  ASSERT_TRUE(
      my.admin().exec("ALTER USER '" + mu.user + "'@'%' IDENTIFIED BY " + my_literal(kPassword)));
  mu.password.clear();

  TempDir dir("secret-settings"), secrets("secret-file");
  write_file(secrets / "mysql.pw", kPassword + "\n");
  ::setenv("SLUICE_TEST_SECRET_PG_PASSWORD", kPassword.c_str(), 1);
  PipelineFile f;
  f.checkpoints_path = "cp.db";
  f.http = YamlMap().set("listen", "127.0.0.1:0");
  f.pipeline("s")
      .source("postgres")
      .set("url", bare_pg_url())
      .set("user", role_)
      .set("password", "${SLUICE_TEST_SECRET_PG_PASSWORD}")
      .set("tables", Yaml::strings({"public.t"}));
  f.pipeline("s")
      .destination("mysql")
      .set("url", mu.str())
      .set("password_file", (secrets / "mysql.pw").string());
  f.write(dir / "p.yaml");

  e2e::Process p({"run", "p.yaml", "--idle-exit", "1", "--log-level", "trace"}, dir.path());
  const int port = announced_port(p);
  ASSERT_GT(port, 0) << p.stderr_text();
  ASSERT_TRUE(wait_until(
      [&] {
        Rows r = my.sql().query("SELECT COUNT(*) FROM t", /*quiet=*/true);
        return r.size() == 1 && r[0][0] == "2";
      },
      30s, 100ms))
      << p.stderr_text();
  httplib::Client http("127.0.0.1", port);
  auto metrics = http.Get("/metrics");
  auto health = http.Get("/healthz");
  ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  ASSERT_TRUE(metrics && health);
  EXPECT_NE(metrics->body.find("sluice_records_written_total"), std::string::npos);
  EXPECT_EQ(metrics->body.find(kPassword), std::string::npos);
  EXPECT_EQ(health->body.find(kPassword), std::string::npos);
  EXPECT_NE(p.stderr_text().find(" debug "), std::string::npos) << "no verbose lines were logged";
  EXPECT_EQ(files_containing(dir.path(), kPassword), std::vector<std::string>{});
}

TEST_F(SecretRedaction, RawPasswordInsideThePostgresUrlWorksAndIsNeverShown) {
  TempDir dir("secret-url");
  // As a user would paste it: no percent-encoding ("%2F" in it is literally those 3 characters,
  // the URL form of it would be %252F; this case writes it raw, so it reads as '/').
  const std::string raw = R"(Sx/y@z:w?d#q"b\k'z e)";
  ASSERT_TRUE(pg_.admin().exec("ALTER ROLE " + role_ + " PASSWORD " + sql_literal(raw)));
  PgUrl u = PgUrl::parse(pg_.url());
  u.userinfo = role_ + ":" + raw;
  PipelineFile f;
  f.checkpoints_path = "cp.db";
  f.pipeline("u").source("postgres").set("url", u.str()).set("tables", Yaml::strings({"public.t"}));
  f.pipeline("u").destination("sqlite").set("path", "out.db");
  f.write(dir / "p.yaml");
  const int rc = run_sluice(
      {"run", "p.yaml", "--idle-exit", "0.5", "--log-level", "trace", "--log-format", "json"},
      dir.path(), 60s);
  EXPECT_EQ(rc, 0) << read_file(dir / "stderr.txt");
  EXPECT_EQ(files_containing(dir.path(), raw), std::vector<std::string>{});
  // Nor a fragment libpq could take for a host, port or database.
  EXPECT_EQ(files_containing(dir.path(), "Sx/y"), std::vector<std::string>{});
}

TEST_F(SecretRedaction, AWrongPasswordIsRefusedWithoutShowingIt) {
  TempDir dir("secret-wrong");
  const std::string wrong = kPassword + "-wrong";
  for (const std::string& form : {std::string("setting"), std::string("url")}) {
    PipelineFile f;
    f.checkpoints_path = "cp-" + form + ".db";
    auto& src = f.pipeline("w").source("postgres").set("tables", Yaml::strings({"public.t"}));
    if (form == "setting") {
      src.set("url", bare_pg_url()).set("user", role_).set("password", wrong);
    } else {
      PgUrl u = PgUrl::parse(pg_.url());
      u.userinfo = role_ + ":" + wrong;
      src.set("url", u.str());
    }
    f.pipeline("w").destination("sqlite").set("path", "out.db");
    f.write(dir / ("p-" + form + ".yaml"));
    EXPECT_NE(run_sluice({"run", "p-" + form + ".yaml", "--log-level", "trace"}, dir.path(), 60s),
              0);
  }
  const std::string err = read_file(dir / "stderr.txt");
  EXPECT_NE(err.find("password authentication failed"), std::string::npos) << err;
  EXPECT_NE(err.find("`password`"), std::string::npos) << err;
  EXPECT_EQ(files_containing(dir.path(), wrong), std::vector<std::string>{});
  EXPECT_EQ(files_containing(dir.path(), "Sx/y"), std::vector<std::string>{});
}

// The mysql source: `user` with `password` (through ${ENV}), and `password_file`, each with the
// password holding '/', '@' and '%' (and the other URL characters): the snapshot and a streamed
// change arrive, and the password is nowhere — stdout, stderr at trace level, /metrics, files. A
// wrong password is refused without showing it.
TEST(MysqlSourceSecretRedaction, UserPasswordAndPasswordFileWorkAndNeverShowThePassword) {
  MysqlDatabase my(unique_name("secret_src", 60));
  ASSERT_TRUE(my.ok());
  ASSERT_TRUE(my.sql().exec("CREATE TABLE t (id INT PRIMARY KEY, v TEXT)"));
  ASSERT_TRUE(my.sql().exec("INSERT INTO t VALUES (1, 'one'), (2, 'two')"));
  MyUrl mu = MyUrl::parse(
      my.user_url("secsrc", {"GRANT SELECT ON {db}.* TO {user}",
                             "GRANT BINLOG MONITOR, REPLICATION SLAVE ON *.* TO {user}"}));
  ASSERT_TRUE(
      my.admin().exec("ALTER USER '" + mu.user + "'@'%' IDENTIFIED BY " + my_literal(kPassword)));
  const std::string user = mu.user;
  mu.user.clear();
  mu.password.clear();
  TempDir dir("secret-mysql-source"), secrets("secret-mysql-file");
  write_file(secrets / "mysql.pw", kPassword + "\n");
  ::setenv("SLUICE_TEST_SECRET_MYSQL_PASSWORD", kPassword.c_str(), 1);
  for (const std::string form : {"password", "password_file", "wrong"}) {
    SCOPED_TRACE(form);
    PipelineFile f;
    f.checkpoints_path = "cp-" + form + ".db";
    f.http = YamlMap().set("listen", "127.0.0.1:0");
    auto& src = f.pipeline("m")
                    .source("mysql")
                    .set("url", mu.str())
                    .set("user", user)
                    .set("tables", Yaml::strings({"t"}));
    if (form == "password") src.set("password", "${SLUICE_TEST_SECRET_MYSQL_PASSWORD}");
    else if (form == "password_file") src.set("password_file", (secrets / "mysql.pw").string());
    else src.set("password", kPassword + "-wrong");
    f.pipeline("m").destination("sqlite").set("path", "out-" + form + ".db");
    // A folder per run: announced_port() reads the run's own stderr.
    const std::filesystem::path run_dir = dir / form;
    std::filesystem::create_directories(run_dir);
    f.write(run_dir / ("p-" + form + ".yaml"));
    e2e::Process p({"run", "p-" + form + ".yaml", "--log-level", "trace"}, run_dir);
    if (form == "wrong") {
      EXPECT_NE(p.wait_for(60s), 0);
      EXPECT_NE(p.stderr_text().find("Access denied"), std::string::npos) << p.stderr_text();
      EXPECT_EQ(p.stderr_text().find(kPassword), std::string::npos) << p.stderr_text();
      continue;
    }
    const int port = announced_port(p);
    ASSERT_GT(port, 0) << p.stderr_text();
    auto rows = [&](int want) {
      return wait_until(
          [&] {
            const std::filesystem::path out = run_dir / ("out-" + form + ".db");
            if (!std::filesystem::exists(out)) return false;
            e2e::Db db(out);
            return db.scalar("SELECT count(*) FROM t") == want;
          },
          30s, 100ms);
    };
    ASSERT_TRUE(rows(2)) << p.stderr_text();
    const int id = form == "password" ? 3 : 4;
    ASSERT_TRUE(my.sql().exec("INSERT INTO t VALUES (" + std::to_string(id) + ", 'cdc')"));
    ASSERT_TRUE(rows(3)) << p.stderr_text();
    httplib::Client http("127.0.0.1", port);
    auto metrics = http.Get("/metrics");
    ASSERT_TRUE(metrics);
    EXPECT_NE(metrics->body.find("sluice_records_written_total"), std::string::npos);
    EXPECT_EQ(metrics->body.find(kPassword), std::string::npos);
    p.signal(SIGTERM);
    ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
    // The URL it connects to is logged, with the password masked.
    EXPECT_NE(p.stderr_text().find(":***@127.0.0.1"), std::string::npos) << p.stderr_text();
    EXPECT_EQ(p.stderr_text().find(kPassword), std::string::npos);
    EXPECT_EQ(p.stdout_text().find(kPassword), std::string::npos);
    ASSERT_TRUE(my.sql().exec("DELETE FROM t WHERE id = " + std::to_string(id)));
  }
  EXPECT_EQ(files_containing(dir.path(), kPassword), std::vector<std::string>{});
  for (const char* fragment : {"Sx/y", "y@z", "%2F%"})
    EXPECT_EQ(files_containing(dir.path(), fragment), std::vector<std::string>{}) << fragment;
}

}  // namespace
}  // namespace sluice::test
