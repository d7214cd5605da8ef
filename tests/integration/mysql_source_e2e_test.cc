// The mysql source through the sluice binary: MySQL → SQLite while a writer keeps writing during
// the snapshot (end state verified), and MySQL → PostgreSQL.
#include "integration/mysql_source_harness.h"

namespace sluice::mytest {
namespace {

TEST(MysqlSourceE2e, SnapshotWhileAWriterKeepsWritingConvergesInSqlite) {
  TestDb db("e2e_sqlite");
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id INT PRIMARY KEY, v INT, note VARCHAR(20))"));
  ASSERT_TRUE(db.sql().exec("INSERT INTO t SELECT seq, seq % 97, 'seed' FROM seq_0_to_59999"));
  auto dir = e2e::make_temp_dir("mysql-sqlite");
  {
    test::PipelineFile f = pipeline_file("my-sqlite", db.url(), {"*"}, 500);
    f.pipeline("my-sqlite").source_.set("snapshot.chunk_size", 500);
    f.pipeline("my-sqlite").destination("sqlite").set("path", "out.db");
    e2e::write_file(dir / "p.yaml", f.yaml());
  }
  Writer writer(db.url(), "t", 60000);
  ASSERT_TRUE(pgtest::wait_until([&] { return writer.steps() > 0; }, 10s));
  e2e::Process p({"run", "p.yaml"}, dir);
  ASSERT_TRUE(pgtest::wait_until([&] { return writer.steps() > 300 || writer.failed(); }, 60s));
  writer.stop();
  ASSERT_FALSE(writer.failed());
  const bool same = pgtest::wait_until(
      [&] {
        return diff_mysql_sqlite(db.sql(), "SELECT id, v, note FROM t ORDER BY id", dir / "out.db",
                                 "SELECT id, v, note FROM t ORDER BY id", false) == 0;
      },
      120s, 200ms);
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(), 0) << p.stderr_text();
  EXPECT_TRUE(same) << p.stderr_text();
  EXPECT_EQ(diff_mysql_sqlite(db.sql(), "SELECT id, v, note FROM t ORDER BY id", dir / "out.db",
                              "SELECT id, v, note FROM t ORDER BY id"),
            0);
  std::filesystem::remove_all(dir);
}

TEST(MysqlSourceE2e, MysqlToPostgres) {
  TestDb db("e2e_pg");
  pgtest::TestDb pg("my_source_e2e");
  ASSERT_TRUE(pg.ok());
  ASSERT_TRUE(db.sql().exec(
      "CREATE TABLE items (id BIGINT UNSIGNED PRIMARY KEY, name VARCHAR(50), price DECIMAL(12,3), "
      "at DATETIME(6), j JSON, data VARBINARY(8))"));
  ASSERT_TRUE(db.sql().exec(
      "INSERT INTO items VALUES (1, 'h\xc3\xa9', 12.345, '2024-01-02 03:04:05.123456', '{\"a\": 1}', 0x0102), "
      "(2, NULL, -0.001, NULL, NULL, NULL)"));
  auto dir = e2e::make_temp_dir("mysql-pg");
  {
    test::PipelineFile f = pipeline_file("my-pg", db.url(), {"*"});
    f.pipeline("my-pg").destination("postgres").set("url", pg.url());
    e2e::write_file(dir / "p.yaml", f.yaml());
  }
  e2e::Process p({"run", "p.yaml"}, dir);
  auto count = [&](const std::string& sql) { return pg.sql().scalar(sql); };
  ASSERT_TRUE(pgtest::wait_until(
      [&] {
        return count("SELECT count(*) FROM pg_tables WHERE tablename = 'items'") == "1" &&
               count("SELECT count(*) FROM items") == "2";
      },
      60s, 200ms))
      << p.stderr_text();
  ASSERT_TRUE(db.sql().exec(
      "INSERT INTO items VALUES (3, 'three', 3, '2030-12-31 23:59:59', '[1, 2]', 0xff)"));
  ASSERT_TRUE(db.sql().exec("UPDATE items SET name = 'one' WHERE id = 1"));
  ASSERT_TRUE(db.sql().exec("DELETE FROM items WHERE id = 2"));
  // Account statements in the binlog carry passwords: never in the log.
  const std::string user = unique_name("pwtest").substr(0, 30);
  ASSERT_TRUE(db.admin().exec("CREATE USER '" + user + "'@'%' IDENTIFIED BY 'S3cret-Pw-xyz'"));
  ASSERT_TRUE(db.admin().exec("ALTER TABLE `" + db.name() + "`.items COMMENT 'x'"));
  ASSERT_TRUE(db.admin().exec("DROP USER '" + user + "'@'%'"));
  ASSERT_TRUE(pgtest::wait_until(
      [&] {
        return count(
                   "SELECT string_agg(id::text || ':' || coalesce(name, '-'), ',' ORDER BY id) FROM items") ==
               "1:one,3:three";
      },
      60s, 200ms))
      << p.stderr_text();
  EXPECT_EQ(count("SELECT price::text FROM items WHERE id = 1"), "12.345");
  EXPECT_EQ(count("SELECT to_char(at, 'YYYY-MM-DD HH24:MI:SS.US') FROM items WHERE id = 1"),
            "2024-01-02 03:04:05.123456");
  EXPECT_EQ(count("SELECT j::text FROM items WHERE id = 3"), "[1, 2]");
  EXPECT_EQ(count("SELECT encode(data, 'hex') FROM items WHERE id = 1"), "0102");
  // The ALTER after the account statements is logged: both were read.
  EXPECT_TRUE(pgtest::wait_until(
      [&] { return p.stderr_text().find("COMMENT") != std::string::npos; }, 60s, 100ms));
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(), 0) << p.stderr_text();
  EXPECT_EQ(p.stderr_text().find("S3cret-Pw-xyz"), std::string::npos) << p.stderr_text();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sluice::mytest
