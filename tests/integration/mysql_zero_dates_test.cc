// Zero dates of the mysql source (issue 13, items 3 and 4): `0000-00-00`, `2024-00-15`,
// `2024-02-00`, a zero TIMESTAMP, stored under a permissive sql_mode, are no dates. They are never
// turned into NULL silently: with on_error: dlq the record goes to the dead-letter queue with the
// value as text, otherwise the pipeline stops naming the column and the ways out; `zero_dates:
// null` makes them NULL. Each case runs the snapshot and the binlog path against the real MariaDB.
#include "integration/mysql_source_harness.h"

namespace sluice::mytest {
namespace {

// Rows 1 and 3 hold dates; 2 (DATE), 4 (DATETIME) and 5 (TIMESTAMP) a zero date.
constexpr const char* kTable =
    "CREATE TABLE z (id INT PRIMARY KEY, d DATE NULL, dt DATETIME NULL, "
    "ts TIMESTAMP NULL DEFAULT NULL)";
constexpr const char* kSnapshotRows =
    "SET SESSION sql_mode = '';"
    "INSERT INTO z VALUES (1, '2024-01-01', '2024-01-01 10:00:00', '2024-01-01 10:00:00'),"
    " (2, '0000-00-00', NULL, NULL), (3, '2024-01-03', NULL, NULL),"
    " (4, NULL, '2024-02-00 10:00:00', NULL), (5, NULL, NULL, '0000-00-00 00:00:00')";
// Rows 11 (DATE), 13 (DATETIME), 14 (TIMESTAMP) and an update of row 1 (DATETIME) hold zero dates.
constexpr const char* kStreamRows =
    "SET SESSION sql_mode = '';"
    "INSERT INTO z VALUES (11, '2024-00-15', NULL, NULL), (12, '2024-01-12', NULL, NULL),"
    " (13, NULL, '0000-00-00 00:00:00', NULL), (14, NULL, NULL, '0000-00-00 00:00:00');"
    "UPDATE z SET dt = '2024-02-00 00:00:00' WHERE id = 1;"
    "INSERT INTO z VALUES (15, '2024-01-15', NULL, NULL)";

test::PipelineFile zero_dates_pipeline(const TestDb& db, const std::string& id) {
  test::PipelineFile f = pipeline_file(id, db.url(), {"z"}, 100);
  f.pipeline(id).destination("sqlite").set("path", "out.db");
  return f;
}

int64_t count(const std::filesystem::path& db, const std::string& where) {
  if (!std::filesystem::exists(db)) return -1;
  e2e::Db out(db);
  return out.scalar("SELECT count(*) FROM z WHERE " + where);
}

// The dead-letter line of row `id`; empty when there is none.
std::string dead_letter(const std::string& dead, int id) {
  const size_t at = dead.find("\"id\":" + std::to_string(id) + ",");
  if (at == std::string::npos) return {};
  const size_t begin = dead.rfind('\n', at) == std::string::npos ? 0 : dead.rfind('\n', at) + 1;
  return dead.substr(begin, dead.find('\n', at) - begin);
}

TEST(MysqlZeroDates, GoToTheDeadLetterQueueAsTextInTheSnapshotAndTheStream) {
  TestDb db("zero_dlq");
  ASSERT_TRUE(db.sql().exec(kTable));
  ASSERT_TRUE(db.sql().exec(kSnapshotRows));
  auto dir = e2e::make_temp_dir("mysql-zero-dlq");
  test::PipelineFile f = zero_dates_pipeline(db, "zero-dlq");
  f.pipeline("zero-dlq").on_error = "dlq";
  f.pipeline("zero-dlq").dlq("file").set("path", "dead.jsonl");
  e2e::write_file(dir / "p.yaml", f.yaml());
  e2e::Process p({"run", "p.yaml"}, dir);
  ASSERT_TRUE(pgtest::wait_until([&] { return count(dir / "out.db", "id = 3") == 1; }, 30s, 100ms))
      << p.stderr_text();
  ASSERT_TRUE(db.sql().exec(kStreamRows));
  ASSERT_TRUE(pgtest::wait_until([&] { return count(dir / "out.db", "id = 15") == 1; }, 30s, 100ms))
      << p.stderr_text();
  p.signal(SIGTERM);
  ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  EXPECT_EQ(count(dir / "out.db", "1"), 4);  // 1, 3, 12, 15
  EXPECT_EQ(count(dir / "out.db", "id = 1 AND dt LIKE '2024-01-01%10:00:00%'"), 1)
      << "the update with a zero date is not applied";
  const std::string dead = e2e::read_file(dir / "dead.jsonl");
  EXPECT_EQ(std::count(dead.begin(), dead.end(), '\n'), 7) << dead;  // 6 rows and the update
  const std::map<int, std::pair<std::string, std::string>> want = {
      {2, {"`z`.`d`", "\"0000-00-00\""}},
      {4, {"`z`.`dt`", "\"2024-02-00 10:00:00\""}},
      {5, {"`z`.`ts`", "\"0000-00-00 00:00:00\""}},
      {11, {"`z`.`d`", "\"2024-00-15\""}},
      {13, {"`z`.`dt`", "\"0000-00-00 00:00:00\""}},
      {14, {"`z`.`ts`", "\"0000-00-00 00:00:00\""}},
  };
  for (const auto& [id, col_text] : want) {
    const std::string rec = dead_letter(dead, id);
    ASSERT_FALSE(rec.empty()) << "row " << id << " not in " << dead;
    EXPECT_NE(rec.find(col_text.first), std::string::npos) << rec;   // why: the column
    EXPECT_NE(rec.find(col_text.second), std::string::npos) << rec;  // the value as text
    EXPECT_NE(rec.find("zero date"), std::string::npos) << rec;
  }
  EXPECT_NE(dead.find("\"2024-02-00 00:00:00\""), std::string::npos) << dead;  // the update of 1
  std::filesystem::remove_all(dir);
}

TEST(MysqlZeroDates, StopThePipelineNamingTheColumnAndTheWaysOut) {
  TestDb db("zero_stop");
  ASSERT_TRUE(db.sql().exec(kTable));
  ASSERT_TRUE(db.sql().exec(kSnapshotRows));
  auto dir = e2e::make_temp_dir("mysql-zero-stop");
  e2e::write_file(dir / "p.yaml", zero_dates_pipeline(db, "zero-stop").yaml());
  {  // the snapshot
    e2e::Process p({"run", "p.yaml"}, dir);
    EXPECT_NE(p.wait_for(60s), 0);
    const std::string err = p.stderr_text();
    EXPECT_NE(err.find("`z`.`d`: zero date '0000-00-00'"), std::string::npos) << err;
    EXPECT_NE(err.find("zero_dates: null"), std::string::npos) << err;
    EXPECT_NE(err.find("on_error: dlq"), std::string::npos) << err;
  }
  // the stream: a table whose snapshot holds no zero date
  ASSERT_TRUE(db.sql().exec("DELETE FROM z WHERE id IN (2, 4, 5)"));
  std::filesystem::remove_all(dir / "state");
  std::filesystem::remove_all(dir / "out.db");
  e2e::Process p({"run", "p.yaml"}, dir);
  ASSERT_TRUE(pgtest::wait_until([&] { return count(dir / "out.db", "id = 3") == 1; }, 30s, 100ms))
      << p.stderr_text();
  ASSERT_TRUE(db.sql().exec(kStreamRows));
  EXPECT_NE(p.wait_for(60s), 0);
  const std::string err = p.stderr_text();
  EXPECT_NE(err.find("`z`.`d`: zero date '2024-00-15'"), std::string::npos) << err;
  EXPECT_NE(err.find("zero_dates: null"), std::string::npos) << err;
  EXPECT_EQ(count(dir / "out.db", "id >= 11"), 0) << "nothing at or after the zero date is written";
  std::filesystem::remove_all(dir);
}

TEST(MysqlZeroDates, ZeroDatesNullMakesThemNullInTheSnapshotAndTheStream) {
  TestDb db("zero_null");
  ASSERT_TRUE(db.sql().exec(kTable));
  ASSERT_TRUE(db.sql().exec(kSnapshotRows));
  auto dir = e2e::make_temp_dir("mysql-zero-null");
  test::PipelineFile f = zero_dates_pipeline(db, "zero-null");
  f.pipeline("zero-null").source_.set("zero_dates", "null");
  e2e::write_file(dir / "p.yaml", f.yaml());
  e2e::Process p({"run", "p.yaml"}, dir);
  ASSERT_TRUE(pgtest::wait_until([&] { return count(dir / "out.db", "id = 3") == 1; }, 30s, 100ms))
      << p.stderr_text();
  ASSERT_TRUE(db.sql().exec(kStreamRows));
  ASSERT_TRUE(pgtest::wait_until([&] { return count(dir / "out.db", "id = 15") == 1; }, 30s, 100ms))
      << p.stderr_text();
  p.signal(SIGTERM);
  ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  EXPECT_EQ(count(dir / "out.db", "1"), 10);
  EXPECT_EQ(count(dir / "out.db", "id IN (2, 11) AND d IS NULL"), 2);
  EXPECT_EQ(count(dir / "out.db", "id IN (4, 13) AND dt IS NULL"), 2);
  EXPECT_EQ(count(dir / "out.db", "id IN (5, 14) AND ts IS NULL"), 2);
  EXPECT_EQ(count(dir / "out.db", "id = 1 AND dt IS NULL AND d IS NOT NULL"), 1);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sluice::mytest
