// kill -9 of the sluice binary reading the mysql source, during the snapshot and during CDC
// (inside a large transaction too): after a restart the SQLite copy converges to MySQL, nothing
// lost, nothing duplicated (keyed upserts).
#include "integration/mysql_source_harness.h"

namespace sluice::mytest {
namespace {

const char* kCompareMy = "SELECT id, v, note FROM t ORDER BY id";
const char* kCompareLite = "SELECT id, v, note FROM t ORDER BY id";

std::string checkpoint(const std::filesystem::path& dir, const std::string& id) {
  return pgtest::checkpoint_of(dir, id);
}

TEST(MysqlSourceFault, KillDuringSnapshotThenResumeConverges) {
  TestDb db("fault_snap");
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id INT PRIMARY KEY, v INT, note VARCHAR(20))"));
  ASSERT_TRUE(db.sql().exec("INSERT INTO t SELECT seq, seq % 13, 'seed' FROM seq_0_to_59999"));
  auto dir = e2e::make_temp_dir("mysql-fault-snap");
  {
    test::PipelineFile f = pipeline_file("snap", db.url(), {"*"}, 300);
    f.pipeline("snap").source_.set("snapshot.chunk_size", 300);
    f.pipeline("snap").destination("sqlite").set("path", "out.db");
    e2e::write_file(dir / "p.yaml", f.yaml());
  }
  {
    e2e::Process p({"run", "p.yaml"}, dir);
    // Mid-snapshot: a keyset checkpoint past the first chunks.
    ASSERT_TRUE(pgtest::wait_for_checkpoint(p, dir, "snap", [](const std::string& c) {
      return c.starts_with("snapshot ") && c.find(" k") != std::string::npos;
    })) << p.stderr_text();
    p.signal(SIGKILL);
    p.wait();
  }
  const std::string cp = checkpoint(dir, "snap");
  ASSERT_TRUE(cp.starts_with("snapshot ")) << cp;
  // Changes while it is down: they must arrive through the stream.
  ASSERT_TRUE(db.sql().exec("UPDATE t SET v = -1, note = 'changed' WHERE id % 1000 = 0"));
  ASSERT_TRUE(db.sql().exec("DELETE FROM t WHERE id % 1000 = 1"));
  ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES (100000, 1, 'new')"));
  e2e::Process p({"run", "p.yaml"}, dir);
  const bool same = pgtest::wait_until(
      [&] {
        return diff_mysql_sqlite(db.sql(), kCompareMy, dir / "out.db", kCompareLite, false) == 0;
      },
      180s, 250ms);
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(), 0) << p.stderr_text();
  EXPECT_TRUE(same);
  EXPECT_EQ(diff_mysql_sqlite(db.sql(), kCompareMy, dir / "out.db", kCompareLite), 0);
  EXPECT_NE(p.stderr_text().find("resuming from checkpoint"), std::string::npos) << p.stderr_text();
  std::filesystem::remove_all(dir);
}

TEST(MysqlSourceFault, KillDuringCdcAndInsideATransactionThenResumeConverges) {
  TestDb db("fault_cdc");
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id INT PRIMARY KEY, v INT, note VARCHAR(20))"));
  ASSERT_TRUE(db.sql().exec("INSERT INTO t SELECT seq, 0, 'seed' FROM seq_0_to_999"));
  auto dir = e2e::make_temp_dir("mysql-fault-cdc");
  {
    test::PipelineFile f = pipeline_file("cdc", db.url(), {"*"}, 100);
    f.pipeline("cdc").destination("sqlite").set("path", "out.db");
    e2e::write_file(dir / "p.yaml", f.yaml());
  }
  {
    e2e::Process p({"run", "p.yaml"}, dir);
    ASSERT_TRUE(pgtest::wait_for_checkpoint(p, dir, "cdc", [](const std::string& c) {
      return c.starts_with("cdc ");
    })) << p.stderr_text();
    // One large transaction: batches of 100 checkpoint "n changes into it" positions.
    ASSERT_TRUE(db.sql().exec(
        "BEGIN; INSERT INTO t SELECT seq, 7, 'big' FROM seq_10000_to_39999; UPDATE t SET v = 9 WHERE id < 500; COMMIT"));
    ASSERT_TRUE(pgtest::wait_for_checkpoint(p, dir, "cdc", [](const std::string& c) {
      return c.starts_with("cdc ") &&
             std::count(c.begin(), c.end(), ' ') == 6;  // inside the transaction
    })) << p.stderr_text();
    p.signal(SIGKILL);
    p.wait();
  }
  const std::string mid = checkpoint(dir, "cdc");
  EXPECT_EQ(std::count(mid.begin(), mid.end(), ' '), 6) << mid;
  {
    Writer writer(db.url(), "t", 50000, 200);
    e2e::Process p({"run", "p.yaml"}, dir);
    ASSERT_TRUE(pgtest::wait_until([&] { return writer.steps() >= 100 || writer.failed(); }, 60s));
    p.signal(SIGKILL);  // and once more while the writer runs
    p.wait();
    writer.stop();
    ASSERT_FALSE(writer.failed());
  }
  e2e::Process p({"run", "p.yaml"}, dir);
  const bool same = pgtest::wait_until(
      [&] {
        return diff_mysql_sqlite(db.sql(), kCompareMy, dir / "out.db", kCompareLite, false) == 0;
      },
      180s, 250ms);
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(), 0) << p.stderr_text();
  EXPECT_TRUE(same);
  EXPECT_EQ(diff_mysql_sqlite(db.sql(), kCompareMy, dir / "out.db", kCompareLite), 0);
  std::filesystem::remove_all(dir);
}

// A private MariaDB (scripts/services with its own directory and port), so that its server can be
// restarted and reconfigured without disturbing the shared one.
class PrivateMariadb : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::filesystem::path(e2e::make_temp_dir("mysql-private"));
    port_ = 23306 + int(getpid() % 2000);
    url_ = new std::string();
    const std::string out = services("start");
    const auto at = out.find("SLUICE_TEST_MYSQL_URL=");
    if (at != std::string::npos) *url_ = out.substr(at + 22, out.find('\n', at) - at - 22);
  }
  static void TearDownTestSuite() {
    services("stop");
    std::filesystem::remove_all(*dir_);
    delete dir_;
    delete url_;
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
  static std::string* url_;
  static int port_;
};
std::filesystem::path* PrivateMariadb::dir_ = nullptr;
std::string* PrivateMariadb::url_ = nullptr;
int PrivateMariadb::port_ = 0;

// The server restarts mid-stream: the source retries with backoff and resumes without loss or
// duplicates.
TEST_F(PrivateMariadb, ServerRestartMidStreamIsRetriedAndResumesExactly) {
  ASSERT_FALSE(url_->empty()) << "private MariaDB did not start";
  MyConn admin(*url_);
  ASSERT_TRUE(admin.exec("CREATE DATABASE restart_db"));
  MyUrl u = MyUrl::parse(*url_);
  u.db = "restart_db";
  MyConn sql(u.str());
  ASSERT_TRUE(sql.exec("CREATE TABLE t (id INT PRIMARY KEY)"));
  auto src = make_source({{"url", u.str()},
                          {"tables", "*"},
                          {"snapshot.mode", "never"},
                          {"heartbeat.interval", "1s"}});
  ASSERT_TRUE(src);
  ASSERT_TRUE(src->open(context("restart"), std::nullopt).ok());
  Reader reader(*src);
  ASSERT_TRUE(sql.exec("INSERT INTO t VALUES (1), (2)"));
  ASSERT_TRUE(reader.read_count(2));
  const std::string stop = services("stop");
  EXPECT_NE(stop.find("stopped"), std::string::npos) << stop;
  // Reads while the server is down keep retrying, without failing.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(reader.read_once());
  const std::string start = services("start");
  ASSERT_NE(start.find("SLUICE_TEST_MYSQL_URL="), std::string::npos) << start;
  MyConn again(u.str());
  ASSERT_TRUE(again.exec("INSERT INTO t VALUES (3)"));
  ASSERT_TRUE(again.exec("BEGIN; INSERT INTO t VALUES (4), (5); COMMIT"));
  ASSERT_TRUE(reader.read_count(5, 120s));
  ASSERT_TRUE(reader.drain());
  ASSERT_EQ(reader.records().size(), 5u);
  for (size_t i = 0; i < 5; ++i)
    EXPECT_EQ(field(reader.records()[i]->after, "id"), Value::int64(int64_t(i) + 1));
  src->close();
  again.exec("DROP DATABASE restart_db");
}

// binlog_format not ROW (set globally on the private server): refused with the fix.
TEST_F(PrivateMariadb, BinlogFormatStatementIsRefused) {
  ASSERT_FALSE(url_->empty()) << "private MariaDB did not start";
  MyConn admin(*url_);
  ASSERT_TRUE(admin.exec("SET GLOBAL binlog_format = STATEMENT"));
  auto src = make_source({{"url", *url_}, {"tables", "*"}});
  ASSERT_TRUE(src);
  Status st = src->open(context("stmt"), std::nullopt);
  src->close();
  admin.exec("SET GLOBAL binlog_format = ROW");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("binlog_format is STATEMENT"), std::string::npos)
      << st.error().message();
  EXPECT_NE(st.error().message().find("binlog_format=ROW"), std::string::npos)
      << st.error().message();
}

}  // namespace
}  // namespace sluice::mytest
