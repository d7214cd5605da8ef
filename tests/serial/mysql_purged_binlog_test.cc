// A checkpoint whose binlog has been purged (PURGE BINARY LOGS) is a gap: the mysql source stops
// at start with one line naming what was lost and the way out, by binlog coordinate and by
// MariaDB GTID. Purges the shared MariaDB test server's older binlog files: a serial test.
#include "integration/mysql_source_harness.h"

namespace sluice::mytest {
namespace {

std::string open_error(const std::string& url, const std::string& checkpoint) {
  auto src = make_source({{"url", url}, {"tables", "*"}, {"snapshot.mode", "never"}});
  if (!src) return "no source";
  Status st = src->open(context("purged"), checkpoint);
  src->close();
  if (st.ok()) return "";
  EXPECT_EQ(st.error().message().find('\n'), std::string::npos) << st.error().message();
  return st.error().message();
}

TEST(MysqlPurgedBinlog, CheckpointInAPurgedFileOrBeforeThePurgedGtidsStops) {
  TestDb db("purge");
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id INT PRIMARY KEY)"));
  // The position a pipeline checkpointed: its file and coordinate, and its GTID state.
  auto status = db.admin().query("SHOW MASTER STATUS");
  ASSERT_FALSE(status.empty());
  const std::string old_file = status[0][0].value_or("");
  const std::string old_pos = status[0][1].value_or("");
  const std::string gtid = db.admin().scalar("SELECT @@global.gtid_binlog_pos");
  ASSERT_FALSE(gtid.empty());
  // Changes after it, then the files holding them purged.
  ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES (1)"));
  ASSERT_TRUE(db.admin().exec("FLUSH BINARY LOGS"));
  const std::string new_file = db.admin().query("SHOW MASTER STATUS")[0][0].value_or("");
  ASSERT_NE(new_file, old_file);
  // A file a binlog dump thread still reads (one a closed reader left, until the server notices)
  // is kept by PURGE: retry until it is gone.
  ASSERT_TRUE(pgtest::wait_until(
      [&] {
        db.admin().exec("PURGE BINARY LOGS TO '" + new_file + "'");
        for (const auto& r : db.admin().query("SHOW BINARY LOGS"))
          if (r[0] == old_file) return false;
        return true;
      },
      30s, 500ms));

  const std::string by_file = open_error(db.url(), "cdc " + old_file + " " + old_pos + " -");
  EXPECT_NE(by_file.find("the checkpoint's binlog file " + old_file + " is no longer on"),
            std::string::npos)
      << "[" << by_file << "]";
  EXPECT_NE(by_file.find("sluice cleanup"), std::string::npos) << by_file;

  const std::string by_gtid = open_error(db.url(), "cdc " + old_file + " " + old_pos + " " + gtid);
  EXPECT_NE(by_gtid.find("the binlog after the checkpoint's GTID " + gtid + " is no longer on"),
            std::string::npos)
      << "[" << by_gtid << "]";
  EXPECT_NE(by_gtid.find("sluice cleanup"), std::string::npos) << by_gtid;

  // The current position is fine.
  const std::string now_gtid = db.admin().scalar("SELECT @@global.gtid_binlog_pos");
  auto now = db.admin().query("SHOW MASTER STATUS");
  EXPECT_EQ(open_error(db.url(), "cdc " + now[0][0].value_or("") + " " + now[0][1].value_or("") +
                                     " " + now_gtid),
            "");
}

}  // namespace
}  // namespace sluice::mytest
