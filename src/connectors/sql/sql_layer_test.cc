// The shared keyed-SQL layer without a server: row planning (moved keys, absent vs null, runs),
// schema-evolution decisions, error naming, the catalogue, and each dialect's statement shapes
// with identifiers that try to break out of their quotes.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>
#include <vector>

#include "connectors/mysql/mysql_dialect.h"
#include "connectors/postgres/postgres_dialect.h"
#include "connectors/sql/batch_plan.h"
#include "connectors/sql/sql_table.h"
#include "connectors/sqlite/sqlite_dialect.h"
#include "sluice/batch.h"

namespace sluice::sql {
namespace {

Record& add(Batch& b, Operation op, Value key, Value after = Value(), Value before = Value()) {
  Record& r = b.add();
  r.op = op;
  r.key = key;
  r.after = after;
  r.before = before;
  return r;
}
Value id(Batch& b, int64_t v, std::string_view name = "id") {
  return b.object(1).add(b.copy(name), Value::int64(v)).build();
}
Value row(Batch& b, int64_t v, std::string_view name) {
  return b.object(2).add("id", Value::int64(v)).add("name", Value::string(b.copy(name))).build();
}

std::vector<std::string> names(std::span<const Field> fs) {
  std::vector<std::string> out;
  for (const Field& f : fs) out.emplace_back(f.name);
  return out;
}

std::string describe(const BatchPlan& p) {
  std::string out;
  for (const PlannedRow& r : p.rows()) {
    out += r.action == RowAction::upsert    ? "U"
           : r.action == RowAction::remove  ? "D"
           : r.action == RowAction::move    ? "M"
           : r.action == RowAction::control ? "C"
                                            : "T";
    out += '(';
    for (const Field& k : p.keys(r))
      out += std::string(k.name) + "=" + to_debug_string(k.value) + " ";
    out += "|";
    for (const Field& c : p.columns(r)) out += " " + std::string(c.name);
    out += ')';
  }
  return out;
}

struct Fixture {
  SqlTable t1{true}, t2{true};
  Fixture() {
    t1.name = "t1";
    t1.quoted = "\"t1\"";
    t2.name = "t2";
    t2.quoted = "\"t2\"";
  }
};

TEST(BatchPlanTest, ConsecutiveRowsOfOneTableActionAndColumnListFormOneRun) {
  Fixture f;
  Batch b;
  BatchPlan p(true, "test destination");
  ASSERT_TRUE(p.add(add(b, Operation::create, id(b, 1), row(b, 1, "a")), f.t1).ok());
  ASSERT_TRUE(p.add(add(b, Operation::create, id(b, 2), row(b, 2, "b")), f.t1).ok());
  ASSERT_TRUE(p.add(add(b, Operation::remove, id(b, 3)), f.t1).ok());
  ASSERT_TRUE(p.add(add(b, Operation::remove, id(b, 4)), f.t1).ok());
  ASSERT_TRUE(p.add(add(b, Operation::create, id(b, 5), row(b, 5, "c")), f.t2).ok());
  ASSERT_TRUE(
      p.add(add(b, Operation::create, id(b, 6), b.object(1).add("id", Value::int64(6)).build()),
            f.t2)
          .ok());
  ASSERT_EQ(p.rows().size(), 6u);
  EXPECT_EQ(p.run_end(0), 2u);     // upserts of t1
  EXPECT_EQ(p.run_end(2), 4u);     // deletes of t1
  EXPECT_EQ(p.run_end(4), 5u);     // t2 with [id,name] ...
  EXPECT_EQ(p.run_end(5), 6u);     // ... and t2 with [id] only: another column list
  EXPECT_EQ(p.run_end(0, 1), 1u);  // one row per statement (isolating a rejected row)
}

TEST(BatchPlanTest, TruncateIsARunOfItsOwn) {
  Fixture f;
  Batch b;
  BatchPlan p(true, "test destination");
  for (int i = 0; i < 2; ++i) {
    Record& r = b.add();
    r.op = Operation::remove;
    r.metadata = b.object(1).add(meta::kTruncate, Value::string("true")).build();
    ASSERT_TRUE(p.add(r, f.t1).ok());
  }
  ASSERT_EQ(p.rows().size(), 2u);
  EXPECT_EQ(p.row(0).action, RowAction::truncate);
  EXPECT_EQ(p.run_end(0), 1u);
}

TEST(BatchPlanTest, AbsentFieldsAreNotWrittenNullOnesAre) {
  Fixture f;
  Batch b;
  BatchPlan p(true, "test destination");
  Value after =
      b.object(3).add("id", Value::int64(1)).add("gone", Value()).add("nil", Value::null()).build();
  ASSERT_TRUE(p.add(add(b, Operation::update, id(b, 1), after), f.t1).ok());
  ASSERT_EQ(p.rows().size(), 1u);
  EXPECT_EQ(names(p.columns(p.row(0))), (std::vector<std::string>{"id", "nil"}));
}

TEST(BatchPlanTest, KeyFieldsAfterLacksAreWrittenAfterTheFields) {
  Fixture f;
  Batch b;
  BatchPlan p(true, "test destination");
  Value key = b.object(2).add("tenant", Value::int64(7)).add("id", Value::int64(1)).build();
  ASSERT_TRUE(
      p.add(add(b, Operation::create, key, b.object(1).add("v", Value::int64(3)).build()), f.t1)
          .ok());
  EXPECT_EQ(names(p.columns(p.row(0))), (std::vector<std::string>{"v", "tenant", "id"}));
  EXPECT_TRUE(p.is_key(p.row(0), "tenant"));
  EXPECT_FALSE(p.is_key(p.row(0), "v"));
}

TEST(BatchPlanTest, UpdateThatMovesTheKeyMovesTheRowThenDeletesTheOldKey) {
  Fixture f;
  Batch b;
  BatchPlan p(true, "test destination");
  // From `before` ...
  ASSERT_TRUE(
      p.add(add(b, Operation::update, id(b, 2), row(b, 2, "x"), row(b, 1, "x")), f.t1).ok());
  // ... and from record.key differing from `after` (no `before`).
  ASSERT_TRUE(p.add(add(b, Operation::update, id(b, 3), row(b, 4, "y")), f.t1).ok());
  // Not moved: same key in `before`.
  ASSERT_TRUE(
      p.add(add(b, Operation::update, id(b, 5), row(b, 5, "z"), row(b, 5, "old")), f.t1).ok());
  EXPECT_EQ(describe(p),
            "M(id=1 | id)D(id=1 |)U(id=2 | id name)"
            "M(id=3 | id)D(id=3 |)U(id=4 | id name)"
            "U(id=5 | id name)");
  EXPECT_EQ(p.run_end(0), 1u);  // a move is a run of its own
}

TEST(BatchPlanTest, ControlRecordsAreRunsOfTheirOwnAndKeyCopiesPrecedeThem) {
  Fixture f;
  Batch b;
  BatchPlan p(true, "test destination");
  ASSERT_TRUE(p.add(add(b, Operation::create, id(b, 1), row(b, 1, "a")), f.t1).ok());
  p.add_key_copy(f.t2);
  ASSERT_TRUE(p.add(add(b, Operation::create, id(b, 2), row(b, 2, "b")), f.t1).ok());
  p.add_key_copy(f.t2);
  Record& schema = b.add();
  schema.op = Operation::schema;  // no key needed
  ASSERT_TRUE(p.add(schema, f.t1).ok());
  ASSERT_TRUE(p.add(add(b, Operation::create, id(b, 3), row(b, 3, "c")), f.t1).ok());
  p.add_key_copy(f.t2);
  ASSERT_TRUE(p.add(add(b, Operation::remove, id(b, 4)), f.t1).ok());
  p.add_key_copy(f.t2);  // not after a delete
  p.finish();
  EXPECT_EQ(describe(p),
            "U(id=1 | id name)U(id=2 | id name)U(id=1 | id)U(id=2 | id)C(|)"
            "U(id=3 | id name)D(id=4 |)U(id=3 | id)");
  EXPECT_EQ(p.run_end(0), 2u);
  EXPECT_EQ(p.row(2).table, &f.t2);
  EXPECT_EQ(p.run_end(2), 4u);  // the key copies of t2: one run
  EXPECT_EQ(p.run_end(4), 5u);  // the schema change
}

TEST(BatchPlanTest, KeyCaseFoldingFollowsTheServer) {
  Fixture f;
  Batch b;
  Value after = b.object(2).add("ID", Value::int64(9)).add("name", Value::string("n")).build();
  BatchPlan folded(true, "test destination");
  ASSERT_TRUE(folded.add(add(b, Operation::create, id(b, 9), after), f.t1).ok());
  EXPECT_EQ(names(folded.columns(folded.row(0))), (std::vector<std::string>{"ID", "name"}));
  BatchPlan exact(false, "test destination");
  ASSERT_TRUE(exact.add(add(b, Operation::create, id(b, 9), after), f.t1).ok());
  EXPECT_EQ(names(exact.columns(exact.row(0))), (std::vector<std::string>{"ID", "name", "id"}));
}

TEST(BatchPlanTest, MissingOrNullKeyIsADataErrorNamingTableAndRecord) {
  Fixture f;
  Batch b;
  BatchPlan p(true, "test destination \"x\"");
  Status none = p.add(add(b, Operation::create, Value(), row(b, 1, "a")), f.t1);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code(), Errc::data);
  EXPECT_NE(none.error().message().find("test destination \"x\": table \"t1\", "),
            std::string::npos)
      << none.error().message();
  EXPECT_NE(none.error().message().find("no key"), std::string::npos);
  Value null_id = b.object(1).add("id", Value::null()).build();
  Status null = p.add(add(b, Operation::remove, null_id), f.t1);
  ASSERT_FALSE(null.ok());
  EXPECT_NE(null.error().message().find("\"id\" is null"), std::string::npos)
      << null.error().message();
  // A key null in `after` is as bad as one null in record.key.
  Value after = b.object(1).add("id", Value::null()).build();
  EXPECT_FALSE(p.add(add(b, Operation::create, id(b, 1), after), f.t1).ok());
}

TEST(RecordErrorTest, IsOneLine) {
  Fixture f;
  Batch b;
  Record& r = add(b, Operation::create, id(b, 6));
  Error e = record_error("x destination", f.t1, r, Errc::data, "first\nsecond", true);
  EXPECT_EQ(e.message().find('\n'), std::string::npos);
  EXPECT_NE(e.message().find("\"id\":6"), std::string::npos) << e.message();
  EXPECT_TRUE(e.retriable());
}

TEST(SchemaEvolutionTest, NewTableGetsEveryColumnExistingOneOnlyTheMissing) {
  Fixture f;
  Batch b;
  BatchPlan p(true, "test destination");
  Value key = b.object(1).add("id", Value::int64(1)).build();
  Value a1 = b.object(2).add("name", Value::null()).add("id", Value::int64(1)).build();
  Value a2 = b.object(2).add("name", Value::string("later")).add("id", Value::int64(2)).build();
  ASSERT_TRUE(p.add(add(b, Operation::create, key, a1), f.t1).ok());
  ASSERT_TRUE(p.add(add(b, Operation::create, key, a2), f.t1).ok());
  std::vector<ColumnDef> out;
  missing_columns(p, 0, 2, f.t1, /*key_columns_first=*/true, /*sample_first_non_null=*/true, out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].name, "id");
  EXPECT_TRUE(out[0].key);
  EXPECT_EQ(out[1].name, "name");
  EXPECT_EQ(out[1].sample->kind(), ValueKind::string);  // the first non-null of the run
  missing_columns(p, 0, 2, f.t1, /*key_columns_first=*/false, /*sample_first_non_null=*/false, out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].name, "name");                     // the record's order
  EXPECT_EQ(out[0].sample->kind(), ValueKind::null);  // the first record's value
  f.t1.exists = true;
  f.t1.columns.emplace("ID", 0);  // the server folds case: "ID" is "id"
  missing_columns(p, 0, 2, f.t1, true, true, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].name, "name");
  f.t1.columns.emplace("Name", 0);
  missing_columns(p, 0, 2, f.t1, true, true, out);
  EXPECT_TRUE(out.empty());
}

TEST(TableCatalogueTest, LoadsATableOnceAndForgetsOnClear) {
  TableCatalogue c(true);
  int loads = 0;
  auto create = [&](std::string_view s, std::string_view n) -> Result<std::unique_ptr<SqlTable>> {
    ++loads;
    auto t = std::make_unique<SqlTable>(true);
    t->schema = std::string(s);
    t->name = std::string(n);
    return t;
  };
  auto a = c.find("", "Users", create);
  auto b = c.find("", "users", create);  // folded: the same table
  auto other = c.find("", "orders", create);
  auto again = c.find("", "Users", create);
  ASSERT_TRUE(a.ok() && b.ok() && other.ok() && again.ok());
  EXPECT_EQ(a.value(), b.value());
  EXPECT_EQ(a.value(), again.value());
  EXPECT_NE(a.value(), other.value());
  EXPECT_EQ(loads, 2);
  c.clear();
  ASSERT_TRUE(c.find("", "users", create).ok());
  EXPECT_EQ(loads, 3);
  TableCatalogue exact(false);
  ASSERT_TRUE(exact.find("s", "t", create).ok());
  ASSERT_TRUE(exact.find("S", "t", create).ok());
  ASSERT_TRUE(exact.find("", "s\0t", create).ok());  // the separator keeps ("s","t") apart
  EXPECT_EQ(exact.size(), 3u);
}

// ── dialects ──

constexpr std::string_view kQuote = "a\"b";
constexpr std::string_view kInjection = "\"; DROP TABLE x; --";

TEST(SqliteDialectTest, QuotesEveryIdentifier) {
  sqlite::SqliteDialect d;
  EXPECT_EQ(d.quote_identifier(kQuote), "\"a\"\"b\"");
  EXPECT_EQ(d.quote_identifier(kInjection), "\"\"\"; DROP TABLE x; --\"");
  EXPECT_EQ(d.qualified_table("", "t"), "\"t\"");
  EXPECT_TRUE(d.folds_case());
}

TEST(SqliteDialectTest, StatementShapes) {
  sqlite::SqliteDialect d;
  const std::string t = d.quote_identifier(kInjection);
  const Value i = Value::int64(1), s = Value::string("x"), n = Value::null();
  const ColumnDef cols[] = {{kQuote, &i, true}, {"v", &s, false}, {"n", &n, false}};
  EXPECT_EQ(
      d.create_table(t, cols),
      "CREATE TABLE IF NOT EXISTS \"\"\"; DROP TABLE x; --\" (\"a\"\"b\" INTEGER, \"v\" TEXT, \"n\", "
      "PRIMARY KEY (\"a\"\"b\"))");
  EXPECT_EQ(d.add_column("\"t\"", cols[1]), "ALTER TABLE \"t\" ADD COLUMN \"v\" TEXT");
  EXPECT_EQ(d.drop_column("\"t\"", kQuote), "ALTER TABLE \"t\" DROP COLUMN \"a\"\"b\"");
  EXPECT_EQ(d.rename_column("\"t\"", "v", kQuote),
            "ALTER TABLE \"t\" RENAME COLUMN \"v\" TO \"a\"\"b\"");
  const ColumnRef refs[] = {{"v", false}, {kQuote, true}};
  EXPECT_EQ(
      d.upsert("\"t\"", refs),
      "INSERT INTO \"t\" (\"v\", \"a\"\"b\") VALUES(?,?) ON CONFLICT (\"a\"\"b\") DO UPDATE SET "
      "\"v\" = EXCLUDED.\"v\"");
  const ColumnRef keys_only[] = {{"k", true}};
  EXPECT_EQ(d.upsert("\"t\"", keys_only),
            "INSERT INTO \"t\" (\"k\") VALUES(?) ON CONFLICT (\"k\") DO NOTHING");
  const ColumnRef keys[] = {{"k", true}, {kQuote, true}};
  EXPECT_EQ(d.delete_by_key("\"t\"", keys), "DELETE FROM \"t\" WHERE \"k\"=? AND \"a\"\"b\"=?");
  EXPECT_EQ(d.truncate("\"t\""), "DELETE FROM \"t\"");
  EXPECT_NE(d.checkpoint_table_ddl("\"sluice_checkpoints\"").find("pipeline TEXT PRIMARY KEY"),
            std::string::npos);
  EXPECT_EQ(sqlite::SqliteDialect::classify(SQLITE_BUSY).retriable, true);
  EXPECT_EQ(sqlite::SqliteDialect::classify(SQLITE_CONSTRAINT).retriable, false);
}

TEST(PostgresDialectTest, QuotesEveryIdentifierAndComparesThemExactly) {
  pg::PostgresDialect d;
  EXPECT_FALSE(d.folds_case());
  EXPECT_EQ(d.quote_identifier(kQuote), "\"a\"\"b\"");
  EXPECT_EQ(d.qualified_table(kInjection, kQuote), "\"\"\"; DROP TABLE x; --\".\"a\"\"b\"");
  EXPECT_EQ(d.create_schema(kInjection), "CREATE SCHEMA IF NOT EXISTS \"\"\"; DROP TABLE x; --\"");
}

TEST(PostgresDialectTest, StatementShapes) {
  pg::PostgresDialect d;
  const Value i = Value::int64(1), s = Value::string("x"), n = Value::null();
  const Value int_items[] = {Value::int64(1), Value::int64(2)};
  const Value mixed_items[] = {Value::int64(1), Value::string("a")};
  const Value ints = Value::array(int_items, 2), mixed = Value::array(mixed_items, 2);
  EXPECT_EQ(d.column_type(ints, false), "bigint[]");
  EXPECT_EQ(d.column_type(mixed, false), "jsonb");
  EXPECT_EQ(d.column_type(n, false), "text");
  const ColumnDef cols[] = {{kQuote, &i, true}, {"v", &s, false}};
  EXPECT_EQ(
      d.create_table("\"s\".\"t\"", cols),
      "CREATE TABLE IF NOT EXISTS \"s\".\"t\" (\"a\"\"b\" bigint NOT NULL, \"v\" text, PRIMARY KEY (\"a\"\"b\"))");
  EXPECT_EQ(d.add_column("\"s\".\"t\"", cols[1]),
            "ALTER TABLE \"s\".\"t\" ADD COLUMN IF NOT EXISTS \"v\" text");
  const ColumnRef refs[] = {{kQuote, true}, {kInjection, false}};
  EXPECT_EQ(
      d.upsert_from_stage("\"t\"", "\"stage\"", refs, 7),
      "INSERT INTO \"t\" (\"a\"\"b\", \"\"\"; DROP TABLE x; --\") SELECT DISTINCT ON (\"a\"\"b\") \"a\"\"b\", "
      "\"\"\"; DROP TABLE x; --\" FROM \"stage\" WHERE \"__sluice_seq\" >= 7 ORDER BY \"a\"\"b\", "
      "\"__sluice_seq\" DESC ON CONFLICT (\"a\"\"b\") DO UPDATE SET \"\"\"; DROP TABLE x; --\" = "
      "EXCLUDED.\"\"\"; DROP TABLE x; --\"");
  const ColumnRef keys[] = {{"k", true}, {kQuote, true}};
  EXPECT_NE(d.upsert_from_stage("\"t\"", "\"st\"", keys, 0)
                .find("ON CONFLICT (\"k\", \"a\"\"b\") DO NOTHING"),
            std::string::npos);
  EXPECT_EQ(
      d.delete_using_stage("\"t\"", "\"st\"", keys, 3),
      "DELETE FROM \"t\" AS t USING \"st\" AS s WHERE s.\"__sluice_seq\" >= 3 AND t.\"k\" = s.\"k\" AND "
      "t.\"a\"\"b\" = s.\"a\"\"b\"");
  EXPECT_EQ(
      d.create_stage("\"st\"", "\"t\"", keys),
      "CREATE TEMP TABLE \"st\" ON COMMIT DELETE ROWS AS SELECT 0::bigint AS \"__sluice_seq\", \"k\", "
      "\"a\"\"b\" FROM \"t\" WITH NO DATA");
  EXPECT_EQ(d.copy_into_stage("\"st\"", keys),
            "COPY \"st\" (\"__sluice_seq\", \"k\", \"a\"\"b\") FROM STDIN");
  EXPECT_EQ(d.truncate("\"t\""), "TRUNCATE \"t\"");
}

TEST(PostgresDialectTest, ErrorClassesBySqlstate) {
  using D = pg::PostgresDialect;
  EXPECT_EQ(D::classify("40P01", true).code, Errc::conflict);  // deadlock
  EXPECT_TRUE(D::classify("40P01", true).retriable);
  EXPECT_EQ(D::classify("08006", true).code, Errc::connection);
  EXPECT_TRUE(D::classify("08006", true).retriable);
  EXPECT_EQ(D::classify("23505", true).code, Errc::data);  // unique violation
  EXPECT_FALSE(D::classify("23505", true).retriable);
  EXPECT_EQ(D::classify("42P10", true).code, Errc::data);  // ON CONFLICT without a matching key
  EXPECT_EQ(D::classify("42601", true).code, Errc::internal);
  EXPECT_TRUE(D::classify("", false).connection_lost);
}

TEST(MysqlDialectTest, QuotesEveryIdentifierWithBackticks) {
  mysql::MysqlDialect d;
  EXPECT_TRUE(d.folds_case());
  EXPECT_TRUE(d.ddl_commits_implicitly());
  EXPECT_EQ(d.quote_identifier("a`b"), "`a``b`");
  EXPECT_EQ(d.quote_identifier(kInjection), "`\"; DROP TABLE x; --`");
  EXPECT_EQ(d.quote_identifier("`; DROP TABLE x; --"), "```; DROP TABLE x; --`");
}

TEST(MysqlDialectTest, StatementShapes) {
  mysql::MysqlDialect d;
  const std::string digits = "1" + std::string(40, '0');  // more than DECIMAL(65,30) holds
  const Value i = Value::int64(1), s = Value::string("x"), big = Value::decimal(digits);
  const ColumnDef cols[] = {{"v", &s, false}, {"a`b", &s, true}, {"n", &big, false}};
  EXPECT_EQ(
      d.create_table("`t`", cols),
      "CREATE TABLE IF NOT EXISTS `t` (`v` LONGTEXT CHARACTER SET utf8mb4 NULL, `a``b` VARCHAR(255) CHARACTER "
      "SET utf8mb4 COLLATE utf8mb4_bin NOT NULL, `n` LONGTEXT CHARACTER SET utf8mb4 NULL, PRIMARY KEY "
      "(`a``b`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4");
  const ColumnDef id{"id", &i, false};
  EXPECT_EQ(d.add_column("`t`", id), "ALTER TABLE `t` ADD COLUMN `id` BIGINT NULL");
  EXPECT_EQ(d.rename_column("`t`", "a`b", "c"), "ALTER TABLE `t` RENAME COLUMN `a``b` TO `c`");
  const ColumnRef refs[] = {{"v", false}, {"a`b", true}};
  std::string up;
  d.append_insert_head(up, "`t`", refs);
  up += " VALUES ('x','k')";
  d.append_upsert_tail(up, refs);
  EXPECT_EQ(
      up, "INSERT INTO `t` (`v`, `a``b`) VALUES ('x','k') ON DUPLICATE KEY UPDATE `v`=VALUES(`v`)");
  const ColumnRef key[] = {{"k", true}};
  std::string keys_only;
  d.append_upsert_tail(keys_only, key);
  EXPECT_EQ(keys_only, " ON DUPLICATE KEY UPDATE `k`=`k`");
  std::string del;
  d.append_delete_head(del, "`t`", key);
  EXPECT_EQ(del, "DELETE FROM `t` WHERE `k` IN (");
  del.clear();
  d.append_delete_head(del, "`t`", refs);
  EXPECT_EQ(del, "DELETE FROM `t` WHERE (`v`, `a``b`) IN (");
  EXPECT_EQ(d.truncate("`t`"), "DELETE FROM `t`");
  EXPECT_EQ(d.checkpoint_select("`sluice_checkpoints`", "'p'"),
            "SELECT `position` FROM `sluice_checkpoints` WHERE `pipeline` = 'p'");
  EXPECT_TRUE(mysql::decimal_fits("-12345.678"));
  EXPECT_FALSE(mysql::decimal_fits("NaN"));
}

TEST(SchemaChangeStatementsTest, BackfillLiteralsCannotBreakOutOfTheirQuotes) {
  sqlite::SqliteDialect lite;
  pg::PostgresDialect pg;
  mysql::MysqlDialect my;
  const Value hostile = Value::string("x'); DROP TABLE t; --\\");
  EXPECT_EQ(lite.set_all_rows("\"t\"", kQuote, hostile),
            "UPDATE \"t\" SET \"a\"\"b\" = 'x''); DROP TABLE t; --\\'");
  EXPECT_EQ(my.set_all_rows("`t`", "a`b", hostile),
            "UPDATE `t` SET `a``b` = 'x''); DROP TABLE t; --\\\\'");
  EXPECT_EQ(pg.set_all_rows("\"t\"", "n", Value::null()), "UPDATE \"t\" SET \"n\" = NULL");
  std::string lit;
  pg.append_literal(lit, Value::int64(-3));
  lit += ' ';
  pg.append_literal(lit, Value::boolean(true));
  lit += ' ';
  pg.append_literal(lit, Value::decimal("1.50"));
  lit += ' ';
  pg.append_literal(lit, Value::date(0));
  EXPECT_EQ(lit, "-3 TRUE '1.50' '1970-01-01'");
  EXPECT_EQ(pg.merge_column("\"t\"", "v", "name"),
            "UPDATE \"t\" SET \"name\" = COALESCE(\"v\", \"name\")");
  EXPECT_EQ(pg.alter_column_type("\"t\"", kQuote, "numeric"),
            "ALTER TABLE \"t\" ALTER COLUMN \"a\"\"b\" TYPE numeric USING \"a\"\"b\"::numeric");
  EXPECT_EQ(my.alter_column_type("`t`", "n", "DECIMAL(65,30)"),
            "ALTER TABLE `t` MODIFY COLUMN `n` DECIMAL(65,30) NULL");
  EXPECT_EQ(lite.alter_column_type("\"t\"", "n", "REAL"), "");
}

TEST(SchemaChangeStatementsTest, MoveRowAndSweep) {
  sqlite::SqliteDialect lite;
  mysql::MysqlDialect my;
  const Field old_key[] = {{kQuote, Value::int64(1)}, {"k", Value::string("a'")}};
  const Field new_key[] = {{kQuote, Value::int64(2)}, {"k", Value::string("a'")}};
  EXPECT_EQ(
      lite.move_row("\"t\"", old_key, new_key),
      "UPDATE \"t\" SET \"a\"\"b\" = 2, \"k\" = 'a''' WHERE \"a\"\"b\" = 1 AND \"k\" = 'a''' AND "
      "NOT EXISTS (SELECT 1 FROM \"t\" AS sluice_moved WHERE sluice_moved.\"a\"\"b\" = 2 AND "
      "sluice_moved.\"k\" = 'a''')");
  EXPECT_EQ(my.move_row("`t`", old_key, new_key),
            "UPDATE IGNORE `t` SET `a\"b` = 2, `k` = 'a''' WHERE `a\"b` = 1 AND `k` = 'a'''");
  const std::string keys[] = {std::string(kQuote), "k"};
  EXPECT_EQ(lite.create_sweep_table("\"s\"", "\"t\"", keys),
            "CREATE TABLE \"s\" AS SELECT \"a\"\"b\", \"k\" FROM \"t\" WHERE 1 = 0");
  EXPECT_EQ(lite.create_sweep_index("\"s\"", "s", keys),
            "CREATE UNIQUE INDEX \"s_key\" ON \"s\" (\"a\"\"b\", \"k\")");
  EXPECT_EQ(lite.sweep_delete("\"t\"", "\"s\"", keys),
            "DELETE FROM \"t\" WHERE NOT EXISTS (SELECT 1 FROM \"s\" WHERE \"s\".\"a\"\"b\" = "
            "\"t\".\"a\"\"b\" AND \"s\".\"k\" = \"t\".\"k\")");
  EXPECT_TRUE(Dialect::literal_key(Value::string("x")));
  EXPECT_FALSE(Dialect::literal_key(Value::float64(1.5)));
  EXPECT_FALSE(Dialect::literal_key(Value::bytes("x")));
}

TEST(CheckpointStatementsTest, EachDialectUpsertsThePipelinesRow) {
  sqlite::SqliteDialect lite;
  pg::PostgresDialect postgres;
  mysql::MysqlDialect my;
  EXPECT_EQ(
      lite.checkpoint_upsert("\"sluice_checkpoints\"", "?1", "?2"),
      "INSERT INTO \"sluice_checkpoints\" (\"pipeline\", \"position\", \"updated_at\") VALUES (?1, ?2, "
      "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) ON CONFLICT (\"pipeline\") DO UPDATE SET \"position\" = "
      "EXCLUDED.\"position\", \"updated_at\" = EXCLUDED.\"updated_at\"");
  EXPECT_EQ(postgres.checkpoint_select("\"s\".\"sluice_checkpoints\"", "$1"),
            "SELECT \"position\" FROM \"s\".\"sluice_checkpoints\" WHERE \"pipeline\" = $1");
  EXPECT_NE(postgres.checkpoint_upsert("t", "$1", "$2")
                .find("VALUES ($1, $2, now()) ON CONFLICT (\"pipeline\")"),
            std::string::npos);
  EXPECT_EQ(
      my.checkpoint_upsert("`sluice_checkpoints`", "'p'", "X'00ff'"),
      "INSERT INTO `sluice_checkpoints` (`pipeline`, `position`, `updated_at`) VALUES ('p', X'00ff', "
      "UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE `position`=VALUES(`position`),`updated_at`=VALUES(`updated_at`)");
  for (const Dialect* d :
       {static_cast<const Dialect*>(&lite), static_cast<const Dialect*>(&postgres),
        static_cast<const Dialect*>(&my)})
    EXPECT_NE(d->checkpoint_table_ddl("t").find("updated_at"), std::string::npos);
}

}  // namespace
}  // namespace sluice::sql
