// The mysql source's initial snapshot bounds each table's rows with snapshot_begin /
// snapshot_end markers (so a keyed destination can reconcile a re-snapshot), and a resume in the
// middle of a table does not begin it again. Against the real MariaDB test server.
#include <gtest/gtest.h>

#include "integration/mysql_source_harness.h"

namespace sluice::mytest {
namespace {

std::unique_ptr<Source> open_source(TestDb& db, const std::optional<std::string>& checkpoint) {
  auto src = make_source({{"url", db.url()}, {"tables", "*"}, {"snapshot.chunk_size", "30"}});
  if (!src) return nullptr;
  if (Status st = src->open(context("markers"), checkpoint); !st.ok()) {
    ADD_FAILURE() << "open: " << st.error().message();
    return nullptr;
  }
  return src;
}

std::string_view meta_of(const Record* r, std::string_view name) {
  const Value* v = r->metadata.find(name);
  return v ? v->as_text() : std::string_view();
}

TEST(MysqlSnapshotMarkers, EachTableIsBoundedAndAResumeMidTableDoesNotBeginAgain) {
  TestDb db("markers");
  ASSERT_TRUE(db.sql().exec("CREATE TABLE a (id INT PRIMARY KEY, v INT)"));
  ASSERT_TRUE(db.sql().exec("CREATE TABLE b (id INT PRIMARY KEY)"));
  std::string values;
  for (int i = 1; i <= 100; ++i) values += (i > 1 ? "," : "") + ("(" + std::to_string(i) + ", 1)");
  ASSERT_TRUE(db.sql().exec("INSERT INTO a VALUES " + values));
  ASSERT_TRUE(db.sql().exec("INSERT INTO b VALUES (1), (2)"));
  std::string checkpoint;
  {
    auto src = open_source(db, std::nullopt);
    ASSERT_TRUE(src);
    Reader reader(*src);
    reader.keep_control_records();
    reader.request().max_records = 30;
    ASSERT_TRUE(reader.read_count(1 + 60));  // the marker and two chunks of a
    const auto& rs = reader.records();
    ASSERT_EQ(rs[0]->op, Operation::marker);
    EXPECT_EQ(meta_of(rs[0], meta::kMarker), meta::kSnapshotBegin);
    EXPECT_EQ(meta_of(rs[0], meta::kTable), "a");
    checkpoint = reader.positions().back().second;
    ASSERT_TRUE(checkpoint.starts_with("snapshot ")) << checkpoint;
    src->close();
  }
  auto src = open_source(db, checkpoint);
  ASSERT_TRUE(src);
  Reader reader(*src);
  reader.keep_control_records();
  ASSERT_TRUE(reader.read_until([](const auto& rs) {
    for (const Record* r : rs)
      if (r->op == Operation::marker && meta_of(r, meta::kTable) == "b" &&
          meta_of(r, meta::kMarker) == meta::kSnapshotEnd)
        return true;
    return false;
  }));
  // Resumed inside a: its rows go on, then its end; b is bounded on both sides.
  std::vector<std::string> seen;
  for (const Record* r : reader.records())
    if (r->op == Operation::marker)
      seen.push_back(std::string(meta_of(r, meta::kTable)) + " " +
                     std::string(meta_of(r, meta::kMarker)));
  EXPECT_EQ(seen,
            (std::vector<std::string>{"a snapshot_end", "b snapshot_begin", "b snapshot_end"}));
  src->close();
}

}  // namespace
}  // namespace sluice::mytest
