// The mysql source's schema history and DDL handling against the real MariaDB test server, with
// the server default binlog_row_metadata (row events carry no column names): rows replayed from
// before a DDL decode with their own columns, each DDL kind becomes its schema records, what
// sluice cannot follow stops with one clear line, statement-based DML on a captured table stops,
// and a checkpoint whose binlog is gone is a gap.
#include "integration/mysql_source_harness.h"
#include "sluice/schema_change.h"

namespace sluice::mytest {
namespace {

// The checkpoint store's second entry, in memory: survives from one source to the next.
class MemoryHistory final : public SourceHistory {
 public:
  Result<std::optional<std::string>> load() override { return text; }
  Status save(std::string_view s) override {
    text = std::string(s);
    ++saves;
    return ok_status();
  }
  std::optional<std::string> text;
  int saves = 0;
};

std::unique_ptr<Source> open_with(TestDb& db, const std::string& pipeline, MemoryHistory* history,
                                  const std::optional<std::string>& checkpoint = std::nullopt,
                                  std::map<std::string, std::string> extra = {}) {
  extra.emplace("url", db.url());
  extra.emplace("tables", "*");
  extra.emplace("snapshot.mode", "never");
  auto src = make_source(extra);
  if (!src) return nullptr;
  ConnectorContext ctx = context(pipeline);
  ctx.history = history;
  Status st = src->open(ctx, checkpoint);
  if (!st.ok()) {
    ADD_FAILURE() << "open: " << st.error().message();
    return nullptr;
  }
  return src;
}

// Reads until the source fails; the error (one line), or "" when it did not fail in time.
std::string read_error(Source& src, std::chrono::milliseconds timeout = 20s) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  ReadRequest req;
  req.linger = 20ms;
  req.poll = 100ms;
  while (std::chrono::steady_clock::now() < until) {
    Batch b(64 * 1024);
    auto st = src.read(b, req, std::stop_token{});
    if (!st.ok()) {
      const std::string m = st.error().message();
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
      return m;
    }
  }
  return "";
}

std::vector<const Record*> data_records(const std::vector<const Record*>& all) {
  std::vector<const Record*> out;
  for (const Record* r : all)
    if (!is_control(r->op)) out.push_back(r);
  return out;
}

std::vector<SchemaChange> schema_records(const std::vector<const Record*>& all) {
  std::vector<SchemaChange> out;
  for (const Record* r : all)
    if (r->op == Operation::schema) {
      auto c = schema_change_of(*r);
      EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().message());
      if (c.ok()) out.push_back(c.value());
    }
  return out;
}

size_t count_data(const std::vector<const Record*>& r) { return data_records(r).size(); }

TEST(MysqlSchemaHistory, ReplayFromBeforeAnAlterDecodesRowsWithTheirOwnColumns) {
  TestDb db("hist");
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(5), n INT)"));
  MemoryHistory history;
  std::string start;
  {
    auto src = open_with(db, "hist", &history);
    ASSERT_TRUE(src);
    Reader reader(*src);
    ASSERT_TRUE(reader.drain());
    start = reader.positions().back().second;
    ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES (1, 'x', 10)"));
    ASSERT_TRUE(db.sql().exec("ALTER TABLE t ADD COLUMN b INT UNSIGNED AFTER id"));
    ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES (2, 4000000000, 'y', 20)"));
    ASSERT_TRUE(db.sql().exec("ALTER TABLE t DROP COLUMN a, RENAME COLUMN n TO m"));
    ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES (3, 7, 30)"));
    ASSERT_TRUE(reader.read_until([](const auto& r) { return count_data(r) >= 3; }));
    src->close();
  }
  ASSERT_TRUE(history.text);
  // A restart from before the first ALTER: the catalogue now says (id, b, m), but each row is
  // decoded with the columns it was written with, and the schema records come again in order.
  auto src = open_with(db, "hist", &history, start);
  ASSERT_TRUE(src);
  Reader reader(*src);
  ASSERT_TRUE(reader.read_until([](const auto& r) { return count_data(r) >= 3; }));
  const auto rows = data_records(reader.records());
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0]->after.size(), 3u);
  EXPECT_EQ(field(rows[0]->after, "a"), Value::string("x"));
  EXPECT_EQ(field(rows[0]->after, "n"), Value::int64(10));
  EXPECT_EQ(rows[1]->after.size(), 4u);
  EXPECT_EQ(field(rows[1]->after, "b"), Value::uint64(4000000000ULL));
  EXPECT_EQ(field(rows[1]->after, "a"), Value::string("y"));
  EXPECT_EQ(field(rows[1]->after, "n"), Value::int64(20));
  EXPECT_EQ(rows[2]->after.size(), 3u);
  EXPECT_EQ(field(rows[2]->after, "b"), Value::uint64(7));
  EXPECT_EQ(field(rows[2]->after, "m"), Value::int64(30));
  EXPECT_EQ(field(rows[2]->key, "id"), Value::int64(3));
  // Stream order: row 1, add b, row 2, drop a, rename n → m, row 3.
  std::vector<std::string> order;
  for (const Record* r : reader.records())
    order.push_back(r->op == Operation::schema
                        ? std::string(schema_change_kind_name(schema_change_of(*r).value().kind))
                        : std::string(operation_name(r->op)));
  EXPECT_EQ(order, (std::vector<std::string>{"create", "add_column", "create", "drop_column",
                                             "rename_column", "create"}));
  src->close();
}

TEST(MysqlSchemaHistory, WithoutAHistoryAReplayThatCannotBeDecodedStops) {
  TestDb db("nohist");
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(5))"));
  std::string start;
  {
    auto src = open_with(db, "nohist", nullptr);
    ASSERT_TRUE(src);
    Reader reader(*src);
    ASSERT_TRUE(reader.drain());
    start = reader.positions().back().second;
    src->close();
  }
  ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES (1, 'x')"));
  ASSERT_TRUE(db.sql().exec("ALTER TABLE t ADD COLUMN b INT AFTER id"));
  // No history (a checkpoint from before it existed): the catalogue at the restart has three
  // columns, the row event two — a stop, never values in the wrong columns.
  auto src = open_with(db, "nohist", nullptr, start);
  ASSERT_TRUE(src);
  const std::string e = read_error(*src);
  EXPECT_NE(e.find("do not match the table's columns"), std::string::npos) << e;
  EXPECT_NE(e.find("`t`"), std::string::npos) << e;
  EXPECT_NE(e.find("sluice cleanup"), std::string::npos) << e;
  src->close();
}

TEST(MysqlSchemaHistory, EachDdlKindBecomesItsSchemaRecords) {
  TestDb db("kinds");
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(10), n INT)"));
  MemoryHistory history;
  auto src = open_with(db, "kinds", &history);
  ASSERT_TRUE(src);
  Reader reader(*src);
  ASSERT_TRUE(reader.drain());
  ASSERT_TRUE(db.sql().exec("INSERT INTO t VALUES (1, 'one', 1)"));
  ASSERT_TRUE(db.sql().exec(
      "ALTER TABLE t ADD COLUMN c VARCHAR(8) NOT NULL DEFAULT 'dflt', ADD `d d` DECIMAL(6,2) "
      "DEFAULT -1.50 FIRST, ADD e DATE DEFAULT '2024-02-29', ADD f INT"));
  ASSERT_TRUE(db.sql().exec("ALTER TABLE t RENAME COLUMN a TO a2"));
  ASSERT_TRUE(db.sql().exec("ALTER TABLE t CHANGE a2 a3 VARCHAR(40), MODIFY COLUMN n BIGINT"));
  ASSERT_TRUE(db.sql().exec("ALTER TABLE t DROP COLUMN f"));
  ASSERT_TRUE(db.sql().exec("ALTER TABLE t ADD INDEX i (n), COMMENT 'no column change'"));
  ASSERT_TRUE(db.sql().exec("INSERT INTO t (id, a3, n) VALUES (2, 'two', 5000000000)"));
  ASSERT_TRUE(reader.read_until([](const auto& r) { return count_data(r) >= 2; }));
  const auto ch = schema_records(reader.records());
  ASSERT_EQ(ch.size(), 9u);
  EXPECT_EQ(ch[0].kind, SchemaChangeKind::add_column);
  EXPECT_EQ(ch[0].column, "c");
  EXPECT_EQ(ch[0].type, "varchar(8)");
  EXPECT_EQ(ch[0].default_value, Value::string("dflt"));
  EXPECT_EQ(ch[1].column, "d d");
  EXPECT_EQ(ch[1].default_value, Value::decimal("-1.50"));
  EXPECT_EQ(ch[2].column, "e");
  EXPECT_EQ(ch[2].default_value, Value::date(days_from_civil(2024, 2, 29)));
  EXPECT_EQ(ch[3].column, "f");
  EXPECT_TRUE(ch[3].default_value.is_absent() || ch[3].default_value.is_null());
  EXPECT_EQ(ch[4].kind, SchemaChangeKind::rename_column);
  EXPECT_EQ(ch[4].column, "a");
  EXPECT_EQ(ch[4].to, "a2");
  EXPECT_EQ(ch[5].kind, SchemaChangeKind::rename_column);
  EXPECT_EQ(ch[5].to, "a3");
  EXPECT_EQ(ch[6].kind, SchemaChangeKind::alter_column_type);
  EXPECT_EQ(ch[6].column, "a3");
  EXPECT_EQ(ch[6].type, "varchar(40)");
  EXPECT_EQ(ch[6].from, "varchar(10)");
  EXPECT_EQ(ch[7].kind, SchemaChangeKind::alter_column_type);
  EXPECT_EQ(ch[7].column, "n");
  EXPECT_EQ(ch[7].type, "bigint");
  EXPECT_EQ(ch[7].from, "int(11)");
  EXPECT_EQ(ch[8].kind, SchemaChangeKind::drop_column);
  EXPECT_EQ(ch[8].column, "f");
  const auto rows = data_records(reader.records());
  const Record* last = rows.back();
  EXPECT_EQ(field(last->after, "d d"), Value::decimal("-1.50"));
  EXPECT_EQ(field(last->after, "a3"), Value::string("two"));
  EXPECT_EQ(field(last->after, "c"), Value::string("dflt"));
  EXPECT_EQ(field(last->after, "n"), Value::int64(5000000000LL));
  EXPECT_TRUE(field(last->after, "f").is_absent());
  // Schema records carry the table's metadata like its rows.
  for (const Record* r : reader.records())
    if (r->op == Operation::schema) {
      EXPECT_EQ(r->meta("schema"), db.name());
      EXPECT_EQ(r->meta("table"), "t");
      EXPECT_FALSE(r->meta("binlog_pos").empty());
    }
  src->close();
}

TEST(MysqlSchemaHistory, ComputedDefaultsAndNarrowingStopWithAClearError) {
  TestDb db("stops");
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(10))"));
  ASSERT_TRUE(db.sql().exec("CREATE TABLE u (id INT PRIMARY KEY, n BIGINT)"));
  {
    MemoryHistory history;
    auto src = open_with(db, "stops", &history);
    ASSERT_TRUE(src);
    ASSERT_TRUE(db.sql().exec("ALTER TABLE t ADD COLUMN ts TIMESTAMP DEFAULT CURRENT_TIMESTAMP"));
    const std::string e = read_error(*src);
    EXPECT_NE(e.find("`t`"), std::string::npos) << e;
    EXPECT_NE(e.find("`ts`"), std::string::npos) << e;
    EXPECT_NE(e.find("server computes"), std::string::npos) << e;
    EXPECT_NE(e.find("sluice cleanup"), std::string::npos) << e;
    src->close();
  }
  {
    MemoryHistory history;
    auto src = open_with(db, "stops2", &history);
    ASSERT_TRUE(src);
    ASSERT_TRUE(db.sql().exec("ALTER TABLE u MODIFY n INT"));
    const std::string e = read_error(*src);
    EXPECT_NE(e.find("`u`"), std::string::npos) << e;
    EXPECT_NE(e.find("not a widening"), std::string::npos) << e;
    src->close();
  }
}

// RENAME TABLE / ALTER TABLE … RENAME TO of a captured table (or into a captured name): the rows
// after it would go to a new destination table while the old one goes stale — a clear stop
// naming both tables. A rename of tables sluice does not capture is nothing to it.
TEST(MysqlSchemaHistory, TableRenamesStopNamingBothTables) {
  TestDb db("renames");
  const std::string q = "`" + db.name() + "`.";
  struct Case {
    const char* sql;
    std::string from, to;
  };
  for (const Case& c : {Case{"RENAME TABLE t TO t2", "t", "t2"},
                        Case{"ALTER TABLE t RENAME TO t3, ADD COLUMN b INT", "t", "t3"}}) {
    ASSERT_TRUE(db.sql().exec("DROP TABLE IF EXISTS t, t2, t3, x, y"));
    ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id INT PRIMARY KEY, a INT)"));
    ASSERT_TRUE(db.sql().exec("CREATE TABLE x (id INT PRIMARY KEY)"));
    MemoryHistory history;
    auto src = open_with(db, "renames", &history, std::nullopt, {{"tables", "t"}});
    ASSERT_TRUE(src);
    Reader reader(*src);
    ASSERT_TRUE(reader.drain());
    ASSERT_TRUE(db.sql().exec("RENAME TABLE x TO y"));  // not captured: nothing
    ASSERT_TRUE(db.sql().exec(c.sql));
    const std::string e = read_error(*src);
    EXPECT_NE(e.find(q + "`" + c.from + "` was renamed to " + q + "`" + c.to + "`"),
              std::string::npos)
        << c.sql << ": " << e;
    EXPECT_NE(e.find("sluice cleanup"), std::string::npos) << e;
    src->close();
  }
}

TEST(MysqlSchemaHistory, StatementBasedDmlOnACapturedTableStops) {
  TestDb db("stmt");
  ASSERT_TRUE(db.sql().exec("CREATE TABLE t (id INT PRIMARY KEY, a INT)"));
  MemoryHistory history;
  auto src = open_with(db, "stmt", &history, std::nullopt, {{"tables", "t"}});
  ASSERT_TRUE(src);
  Reader reader(*src);
  ASSERT_TRUE(reader.drain());
  // The test user holds every privilege (scripts/services), SUPER included: it may change its
  // session's binlog format, as any privileged writer can on a ROW server.
  test::MysqlClient writer(db.url());
  ASSERT_TRUE(writer.exec("SET SESSION binlog_format = STATEMENT"));
  ASSERT_TRUE(writer.exec("CREATE TABLE other (id INT PRIMARY KEY)"));
  ASSERT_TRUE(writer.exec("INSERT INTO other VALUES (1)"));  // not captured: no stop
  ASSERT_TRUE(writer.exec("INSERT INTO t VALUES (1, 1)"));
  const std::string e = read_error(*src);
  EXPECT_NE(e.find("statement-based change of `" + db.name() + "`.`t`"), std::string::npos) << e;
  EXPECT_NE(e.find("binlog_format = ROW"), std::string::npos) << e;
  src->close();
}

TEST(MysqlSchemaHistory, CheckpointInAPurgedOrUnknownBinlogIsAGap) {
  TestDb db("gap");
  // A file the server does not have (purged): by coordinate.
  {
    auto src = make_source({{"url", db.url()}, {"tables", "*"}, {"snapshot.mode", "never"}});
    ASSERT_TRUE(src);
    Status st = src->open(context("gap"), std::string("cdc binlog.000000 4 -"));
    ASSERT_FALSE(st.ok());
    const std::string e = st.error().message();
    EXPECT_NE(e.find("binlog file binlog.000000 is no longer on"), std::string::npos) << e;
    EXPECT_NE(e.find("sluice cleanup"), std::string::npos) << e;
    src->close();
  }
  // A GTID beyond the server's state (a reset binlog, another server).
  {
    auto src = make_source({{"url", db.url()}, {"tables", "*"}, {"snapshot.mode", "never"}});
    ASSERT_TRUE(src);
    Status st = src->open(context("gap2"), std::string("cdc binlog.000001 4 0-1-999999999"));
    ASSERT_FALSE(st.ok());
    const std::string e = st.error().message();
    EXPECT_NE(e.find("GTID 0-1-999999999 is not in the binlog"), std::string::npos) << e;
    EXPECT_NE(e.find("sluice cleanup"), std::string::npos) << e;
    src->close();
  }
}

}  // namespace
}  // namespace sluice::mytest
