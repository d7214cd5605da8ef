// The DDL parser and the schema history's pure parts: statement forms → column lists and schema
// changes, widening rules, the TABLE_MAP type check, the stored form's round trip.
#include <gtest/gtest.h>

#include "connectors/mysql/mysql_ddl_parse.h"
#include "connectors/mysql/mysql_schema_history.h"
#include "connectors/mysql/mysql_source_driver.h"

namespace sluice::mysql {
namespace {

using ddl::parse_statement;
using ddl::Statement;

TableSchema table_abc() {
  TableSchema t;
  t.db = "d";
  t.table = "t";
  t.charset = "utf8mb4";
  for (auto [n, dt, ct] : {std::tuple{"id", "int", "int(11)"},
                           {"a", "varchar", "varchar(10)"},
                           {"b", "int", "int(11)"}}) {
    t.cols.push_back(column_info(n, dt, ct, dt == std::string("varchar") ? "utf8mb4" : "", ""));
    t.data_types.push_back(dt);
    t.column_types.push_back(ct);
  }
  t.key = {0};
  return t;
}

std::vector<std::string> names(const TableSchema& t) {
  std::vector<std::string> out;
  for (const auto& c : t.cols) out.push_back(c.name);
  return out;
}

Result<std::shared_ptr<TableSchema>> alter(const TableSchema& t, std::string_view sql,
                                           std::vector<ColumnChange>* changes) {
  Statement st = parse_statement(sql, "d");
  EXPECT_EQ(st.kind, Statement::Kind::alter_table) << sql;
  EXPECT_EQ(st.error, "") << sql;
  return apply_alter(t, st, changes);
}

TEST(MysqlDdlParse, RecognisesStatementKindsAndTables) {
  auto s = parse_statement("ALTER TABLE `o``dd`.t2 ADD COLUMN x INT", "d");
  EXPECT_EQ(s.kind, Statement::Kind::alter_table);
  EXPECT_EQ(s.tables.at(0), (ddl::QualifiedName{"o`dd", "t2"}));
  s = parse_statement("/* hi */ drop table if exists a, `b`.c", "d");
  EXPECT_EQ(s.kind, Statement::Kind::drop_table);
  ASSERT_EQ(s.tables.size(), 2u);
  EXPECT_EQ(s.tables[1], (ddl::QualifiedName{"b", "c"}));
  s = parse_statement("RENAME TABLE a TO b, x.c TO x.d", "d");
  EXPECT_EQ(s.kind, Statement::Kind::rename_table);
  ASSERT_EQ(s.tables.size(), 4u);
  EXPECT_EQ(s.tables[3], (ddl::QualifiedName{"x", "d"}));
  EXPECT_EQ(parse_statement("TRUNCATE TABLE t", "d").kind, Statement::Kind::truncate);
  EXPECT_EQ(parse_statement("CREATE USER 'u'@'%' IDENTIFIED BY 'p'", "d").kind,
            Statement::Kind::other);
  EXPECT_EQ(parse_statement("ALTER USER u IDENTIFIED BY 'p'", "d").kind, Statement::Kind::other);
  EXPECT_EQ(parse_statement("CREATE INDEX i ON t (a)", "d").kind, Statement::Kind::other);
  EXPECT_TRUE(parse_statement("CREATE TEMPORARY TABLE tmp (a INT)", "d").temporary);
}

TEST(MysqlDdlParse, FindsTheTablesOfStatementBasedDml) {
  auto one = [](std::string_view sql) {
    auto s = parse_statement(sql, "d");
    EXPECT_EQ(s.kind, Statement::Kind::dml) << sql;
    return s.tables.empty() ? ddl::QualifiedName{} : s.tables[0];
  };
  EXPECT_EQ(one("INSERT INTO t VALUES (1)"), (ddl::QualifiedName{"d", "t"}));
  EXPECT_EQ(one("insert ignore `x`.`t` (a) values (1)"), (ddl::QualifiedName{"x", "t"}));
  EXPECT_EQ(one("REPLACE INTO t SET a = 1"), (ddl::QualifiedName{"d", "t"}));
  EXPECT_EQ(one("UPDATE LOW_PRIORITY t SET a = 1"), (ddl::QualifiedName{"d", "t"}));
  EXPECT_EQ(one("DELETE FROM e.t WHERE a = 1"), (ddl::QualifiedName{"e", "t"}));
  EXPECT_EQ(one("LOAD DATA LOCAL INFILE '/x' REPLACE INTO TABLE t"),
            (ddl::QualifiedName{"d", "t"}));
  auto multi = parse_statement("UPDATE a x JOIN b ON x.id = b.id SET x.v = 1", "d");
  ASSERT_EQ(multi.tables.size(), 2u);
  EXPECT_EQ(multi.tables[1], (ddl::QualifiedName{"d", "b"}));
  auto del = parse_statement("DELETE a, b FROM a JOIN b ON a.id = b.id", "d");
  ASSERT_EQ(del.tables.size(), 2u);
}

TEST(MysqlDdlParse, AlterClausesGiveTheNewColumnsAndTheSchemaChanges) {
  const TableSchema t = table_abc();
  std::vector<ColumnChange> ch;
  auto n = alter(t,
                 "ALTER TABLE t ADD COLUMN c VARCHAR(20) DEFAULT 'it''s' AFTER id, ADD d "
                 "BIGINT UNSIGNED NOT NULL FIRST, DROP COLUMN b, RENAME COLUMN a TO `a 2`",
                 &ch);
  ASSERT_TRUE(n.ok()) << n.error().message();
  EXPECT_EQ(names(*n.value()), (std::vector<std::string>{"d", "id", "c", "a 2"}));
  EXPECT_EQ(n.value()->key, std::vector<uint32_t>{1});
  ASSERT_EQ(ch.size(), 4u);
  EXPECT_EQ(ch[0].kind, SchemaChangeKind::add_column);
  EXPECT_EQ(ch[0].column, "c");
  EXPECT_EQ(ch[0].type, "varchar(20)");
  EXPECT_TRUE(ch[0].has_default);
  EXPECT_EQ(ch[0].default_text, "it's");
  EXPECT_EQ(ch[1].column, "d");
  EXPECT_EQ(ch[1].type, "bigint unsigned");
  EXPECT_TRUE(ch[1].has_default);  // NOT NULL without DEFAULT: old rows read 0
  EXPECT_EQ(ch[1].default_text, "0");
  EXPECT_EQ(ch[1].data_type, "bigint");
  EXPECT_TRUE(n.value()->cols[0].is_unsigned);
  EXPECT_EQ(ch[2].kind, SchemaChangeKind::drop_column);
  EXPECT_EQ(ch[2].column, "b");
  EXPECT_EQ(ch[3].kind, SchemaChangeKind::rename_column);
  EXPECT_EQ(ch[3].to, "a 2");

  ch.clear();
  n = alter(t, "ALTER TABLE t CHANGE COLUMN a aa VARCHAR(40) NOT NULL, MODIFY b BIGINT", &ch);
  ASSERT_TRUE(n.ok()) << n.error().message();
  EXPECT_EQ(names(*n.value()), (std::vector<std::string>{"id", "aa", "b"}));
  ASSERT_EQ(ch.size(), 3u);
  EXPECT_EQ(ch[0].kind, SchemaChangeKind::rename_column);
  EXPECT_EQ(ch[1].kind, SchemaChangeKind::alter_column_type);
  EXPECT_EQ(ch[1].column, "aa");
  EXPECT_EQ(ch[1].type, "varchar(40)");
  EXPECT_EQ(ch[1].from, "varchar(10)");
  EXPECT_EQ(ch[2].type, "bigint");
  EXPECT_EQ(ch[2].from, "int(11)");

  ch.clear();  // options, indexes and defaults change no column; MODIFY to the same type neither
  n = alter(t,
            "ALTER TABLE t ENGINE=InnoDB, ADD INDEX ia (a), ALTER COLUMN b SET DEFAULT 3, "
            "MODIFY b INT(11) NOT NULL, ALGORITHM=INPLACE, LOCK=NONE",
            &ch);
  ASSERT_TRUE(n.ok()) << n.error().message();
  EXPECT_TRUE(ch.empty());
  EXPECT_EQ(names(*n.value()), names(t));

  ch.clear();
  n = alter(t, "ALTER TABLE t RENAME TO t3", &ch);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n.value()->table, "t3");
}

// ADD (a, b) lists, a named PRIMARY KEY constraint, MODIFY/CHANGE that move a column, and
// several clauses of those kinds in one statement.
TEST(MysqlDdlParse, ParenthesisedAddsNamedKeysAndMovedColumns) {
  const TableSchema t = table_abc();
  std::vector<ColumnChange> ch;
  auto n =
      alter(t, "ALTER TABLE t ADD COLUMN (c INT, `d e` VARCHAR(5) DEFAULT 'x', INDEX (c))", &ch);
  ASSERT_TRUE(n.ok()) << n.error().message();
  EXPECT_EQ(names(*n.value()), (std::vector<std::string>{"id", "a", "b", "c", "d e"}));
  ASSERT_EQ(ch.size(), 2u);
  EXPECT_EQ(ch[0].kind, SchemaChangeKind::add_column);
  EXPECT_EQ(ch[0].column, "c");
  EXPECT_EQ(ch[1].column, "d e");
  EXPECT_EQ(ch[1].default_text, "x");

  ch.clear();
  n = alter(t, "ALTER TABLE t ADD (c INT), ADD z INT FIRST", &ch);
  ASSERT_TRUE(n.ok()) << n.error().message();
  EXPECT_EQ(names(*n.value()), (std::vector<std::string>{"z", "id", "a", "b", "c"}));

  ch.clear();
  n = alter(t, "ALTER TABLE t DROP PRIMARY KEY, ADD CONSTRAINT `pk` PRIMARY KEY (a, b)", &ch);
  ASSERT_TRUE(n.ok()) << n.error().message();
  EXPECT_EQ(n.value()->key, (std::vector<uint32_t>{1, 2}));
  EXPECT_TRUE(ch.empty());
  n = alter(t, "ALTER TABLE t DROP PRIMARY KEY, ADD CONSTRAINT PRIMARY KEY USING BTREE (b)", &ch);
  ASSERT_TRUE(n.ok()) << n.error().message();
  EXPECT_EQ(n.value()->key, (std::vector<uint32_t>{2}));
  // Other named constraints change no column.
  n = alter(t, "ALTER TABLE t ADD CONSTRAINT u UNIQUE (a), ADD CONSTRAINT c CHECK (b > 0)", &ch);
  ASSERT_TRUE(n.ok()) << n.error().message();
  EXPECT_EQ(names(*n.value()), names(t));
  EXPECT_EQ(n.value()->key, std::vector<uint32_t>{0});

  ch.clear();
  n = alter(t, "ALTER TABLE t MODIFY COLUMN b BIGINT FIRST, CHANGE a aa VARCHAR(10) AFTER b", &ch);
  ASSERT_TRUE(n.ok()) << n.error().message();
  EXPECT_EQ(names(*n.value()), (std::vector<std::string>{"b", "aa", "id"}));
  EXPECT_EQ(n.value()->key, std::vector<uint32_t>{2});
  ASSERT_EQ(ch.size(), 2u);
  EXPECT_EQ(ch[0].kind, SchemaChangeKind::alter_column_type);
  EXPECT_EQ(ch[1].kind, SchemaChangeKind::rename_column);

  for (const char* bad : {"ALTER TABLE t ADD (c INT", "ALTER TABLE t ADD ()",
                          "ALTER TABLE t ADD (c INT,", "ALTER TABLE t ADD (PRIMARY KEY (a)"})
    EXPECT_NE(parse_statement(bad, "d").error, "") << bad;
}

TEST(MysqlDdlParse, ComputedDefaultsAskForAReReadAndNarrowingIsRefused) {
  const TableSchema t = table_abc();
  std::vector<ColumnChange> ch;
  // The column is added (no default to send); the change says why only a re-read tells the old
  // rows' values.
  for (const char* sql : {"ALTER TABLE t ADD COLUMN ts TIMESTAMP DEFAULT CURRENT_TIMESTAMP",
                          "ALTER TABLE t ADD COLUMN u CHAR(36) DEFAULT (uuid())",
                          "ALTER TABLE t ADD COLUMN g INT AS (b + 1) STORED",
                          "ALTER TABLE t ADD COLUMN n INT NOT NULL AUTO_INCREMENT"}) {
    ch.clear();
    auto n = alter(t, sql, &ch);
    ASSERT_TRUE(n.ok()) << sql << ": " << n.error().message();
    ASSERT_EQ(ch.size(), 1u) << sql;
    EXPECT_NE(ch[0].reread, "") << sql;
    EXPECT_FALSE(ch[0].has_default) << sql;
    EXPECT_EQ(n.value()->cols.size(), t.cols.size() + 1) << sql;
  }
  ch.clear();
  ASSERT_TRUE(alter(t, "ALTER TABLE t ADD COLUMN d INT DEFAULT 7", &ch).ok());
  ASSERT_EQ(ch.size(), 1u);
  EXPECT_EQ(ch[0].reread, "");
  for (const char* sql : {"ALTER TABLE t MODIFY b SMALLINT", "ALTER TABLE t MODIFY a VARCHAR(5)",
                          "ALTER TABLE t MODIFY b INT UNSIGNED", "ALTER TABLE t MODIFY a INT"}) {
    auto n = alter(t, sql, &ch);
    EXPECT_FALSE(n.ok()) << sql;
  }
  EXPECT_NE(parse_statement("ALTER TABLE t FROBNICATE x", "d").error, "");
}

TEST(MysqlDdlParse, WideningRules) {
  auto w = [](const char* a, const char* b) {
    std::string why;
    return ddl::is_widening(ddl::parse_column_type(a), ddl::parse_column_type(b), &why);
  };
  EXPECT_TRUE(w("tinyint(4)", "smallint"));
  EXPECT_TRUE(w("int(11)", "bigint(20)"));
  EXPECT_TRUE(w("int unsigned", "bigint"));
  EXPECT_FALSE(w("int unsigned", "int"));
  EXPECT_FALSE(w("bigint", "int"));
  EXPECT_TRUE(w("varchar(10)", "varchar(10)"));
  EXPECT_TRUE(w("varchar(10)", "text"));
  EXPECT_FALSE(w("text", "varchar(10)"));
  EXPECT_TRUE(w("float", "double"));
  EXPECT_FALSE(w("double", "float"));
  EXPECT_TRUE(w("decimal(10,2)", "decimal(12,4)"));
  EXPECT_FALSE(w("decimal(10,2)", "decimal(10,4)"));
  EXPECT_TRUE(w("int", "decimal(12,0)"));
  EXPECT_TRUE(w("enum('a','b')", "enum('a','b','c')"));
  EXPECT_FALSE(w("enum('a','b')", "enum('b','a')"));
  EXPECT_TRUE(w("datetime", "datetime(6)"));
  EXPECT_FALSE(w("varbinary(4)", "varchar(4)"));
}

TEST(MysqlDdlParse, CreateTableColumnsKeyAndCharset) {
  auto s = parse_statement(
      "CREATE TABLE IF NOT EXISTS `n` (id INT NOT NULL AUTO_INCREMENT, `v` VARCHAR(5) CHARACTER "
      "SET latin1, e ENUM('x','y') DEFAULT 'x', b BLOB, PRIMARY KEY (`id`), KEY k (v), CONSTRAINT "
      "c CHECK (id > 0)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
      "d");
  ASSERT_EQ(s.kind, Statement::Kind::create_table);
  ASSERT_EQ(s.error, "");
  auto t = schema_from_create(s);
  EXPECT_EQ(names(*t), (std::vector<std::string>{"id", "v", "e", "b"}));
  EXPECT_EQ(t->key, std::vector<uint32_t>{0});
  EXPECT_EQ(t->cols[1].text, bl::ColumnInfo::Text::latin1);
  EXPECT_EQ(t->cols[2].labels, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(t->cols[3].text, bl::ColumnInfo::Text::binary);
  EXPECT_NE(parse_statement("CREATE TABLE a LIKE b", "d").error, "");
}

TEST(MysqlSchemaHistory, EntriesAnswerByPositionAndRoundTrip) {
  SchemaHistory h;
  auto t1 = std::make_shared<TableSchema>(table_abc());
  std::vector<ColumnChange> ch;
  auto t2 = alter(*t1, "ALTER TABLE t ADD COLUMN e ENUM('p','q') DEFAULT 'q'", &ch).value();
  h.record("d.t", BinlogCoord{"binlog.000002", 400}, t1);
  h.record("d.t", BinlogCoord{"binlog.000003", 100}, t2);
  h.record("d.t", BinlogCoord{"binlog.000010", 4}, nullptr);
  EXPECT_FALSE(h.at("d.t", BinlogCoord{"binlog.000002", 399}));
  EXPECT_EQ(h.at("d.t", BinlogCoord{"binlog.000002", 400})->get(), t1.get());
  EXPECT_EQ(h.at("d.t", BinlogCoord{"binlog.000003", 99})->get(), t1.get());
  EXPECT_EQ(h.at("d.t", BinlogCoord{"binlog.000003", 100})->get(), t2.get());
  EXPECT_EQ(h.at("d.t", BinlogCoord{"binlog.000010", 4}).value(), nullptr);
  EXPECT_EQ(h.at("d.t", BinlogCoord{"binlog.1000000", 4}).value(), nullptr);  // a later file

  auto back = SchemaHistory::decode(h.encode());
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back.value().encode(), h.encode());
  auto s = back.value().at("d.t", BinlogCoord{"binlog.000004", 1});
  ASSERT_TRUE(s && *s);
  EXPECT_EQ(names(**s), (std::vector<std::string>{"id", "a", "b", "e"}));
  EXPECT_EQ((*s)->cols[3].labels, (std::vector<std::string>{"p", "q"}));
  EXPECT_EQ((*s)->key, std::vector<uint32_t>{0});
  EXPECT_FALSE(SchemaHistory::decode("mysql-schema-history 1\n3:d.t9:x").ok());
  // Pruned at a checkpoint: what a read from there on needs stays.
  SchemaHistory p = back.value();
  EXPECT_FALSE(p.prune_before(BinlogCoord{"binlog.000002", 500}));
  EXPECT_TRUE(p.prune_before(BinlogCoord{"binlog.000003", 150}));
  EXPECT_FALSE(p.at("d.t", BinlogCoord{"binlog.000002", 450}));
  ASSERT_TRUE(p.at("d.t", BinlogCoord{"binlog.000003", 150}));
  EXPECT_EQ(names(**p.at("d.t", BinlogCoord{"binlog.000003", 150})).size(), 4u);
  EXPECT_EQ(p.at("d.t", BinlogCoord{"binlog.000011", 1}).value(), nullptr);
  EXPECT_FALSE(SchemaHistory::decode("garbage").ok());
}

TEST(MysqlSchemaHistory, EntriesAheadOfAPositionAreForgottenPerTable) {
  SchemaHistory h;
  auto t1 = std::make_shared<TableSchema>(table_abc());
  h.record("d.t", BinlogCoord{"binlog.000002", 400}, t1);
  h.record("d.t", BinlogCoord{"binlog.000003", 100}, t1);
  h.record("d.u", BinlogCoord{"binlog.000003", 100}, t1);
  EXPECT_FALSE(h.forget_after("d.t", BinlogCoord{"binlog.000003", 100}));  // at: kept
  EXPECT_FALSE(h.forget_after("d.x", BinlogCoord{"binlog.000001", 4}));    // no such table
  EXPECT_TRUE(h.forget_after("d.t", BinlogCoord{"binlog.000003", 99}));
  EXPECT_EQ(h.at("d.t", BinlogCoord{"binlog.000009", 4})->get(), t1.get());  // the one before
  EXPECT_TRUE(h.at("d.u", BinlogCoord{"binlog.000003", 100}));               // another table's
  EXPECT_TRUE(h.forget_after("d.t", BinlogCoord{"binlog.000002", 399}));
  EXPECT_FALSE(h.at("d.t", BinlogCoord{"binlog.000009", 4}));
  EXPECT_EQ(h.tables(), std::vector<std::string>{"d.u"});  // a table left with none is gone
}

TEST(MysqlSchemaHistory, TablesWhoseCopyIsPendingAreSavedWithTheHistory) {
  SchemaHistory h;
  auto t1 = std::make_shared<TableSchema>(table_abc());
  h.record("d.t", BinlogCoord{"binlog.000002", 400}, t1);
  const std::string v1 = h.encode();
  EXPECT_TRUE(v1.starts_with("mysql-schema-history 1\n"));  // none pending: as before
  EXPECT_TRUE(h.set_copy_pending("d.t", true));
  EXPECT_FALSE(h.set_copy_pending("d.t", true));
  EXPECT_TRUE(h.set_copy_pending("d.u", true));
  const std::string v2 = h.encode();
  EXPECT_TRUE(v2.starts_with("mysql-schema-history 2\n"));
  auto back = SchemaHistory::decode(v2);
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_TRUE(back.value().copy_pending("d.t"));
  EXPECT_TRUE(back.value().copy_pending("d.u"));
  EXPECT_FALSE(back.value().copy_pending("d.x"));
  EXPECT_EQ(back.value().at("d.t", BinlogCoord{"binlog.000003", 1})->get()->cols.size(),
            t1->cols.size());
  EXPECT_EQ(back.value().encode(), v2);
  EXPECT_TRUE(h.set_copy_pending("d.t", false));
  EXPECT_TRUE(h.set_copy_pending("d.u", false));
  EXPECT_FALSE(h.set_copy_pending("d.u", false));
  EXPECT_EQ(h.encode(), v1);
  auto old = SchemaHistory::decode(v1);  // a history saved before pending copies were kept
  ASSERT_TRUE(old.ok());
  EXPECT_FALSE(old.value().copy_pending("d.t"));
  EXPECT_FALSE(SchemaHistory::decode("mysql-schema-history 2\n").ok());          // no list
  EXPECT_FALSE(SchemaHistory::decode("mysql-schema-history 2\n1:2\n").ok());     // short list
  EXPECT_FALSE(SchemaHistory::decode("mysql-schema-history 2\n1:03:d.t").ok());  // no newline
  h.set_copy_pending("d.t", true);
  h.clear();
  EXPECT_FALSE(h.copy_pending("d.t"));
}

TEST(MysqlSchemaHistory, TableMapTypesMustFitTheColumns) {
  EXPECT_TRUE(map_type_fits(bl::kTypeLong, "int"));
  EXPECT_FALSE(map_type_fits(bl::kTypeLong, "varchar"));
  EXPECT_TRUE(map_type_fits(bl::kTypeVarchar, "varchar"));
  EXPECT_FALSE(map_type_fits(bl::kTypeVarchar, "int"));
  EXPECT_TRUE(map_type_fits(bl::kTypeBlob, "text"));
  EXPECT_TRUE(map_type_fits(bl::kTypeString, "enum"));
  EXPECT_TRUE(map_type_fits(bl::kTypeLong, ""));
}

// Snapshot values are read by DATA_TYPE: every type the text protocol has a reading for gets it,
// and the rest stay text (string, bytes or JSON by the column's facts).
TEST(MysqlSnapshotText, EachDataTypeIsReadAsTheStreamWouldDecodeIt) {
  struct Case {
    const char* type;
    const char* text;
    Value want;
    bool is_unsigned = false;
  };
  const Case cases[] = {
      {"tinyint", "-7", Value::int64(-7)},
      {"smallint", "300", Value::int64(300)},
      {"mediumint", "-8388608", Value::int64(-8388608)},
      {"int", "42", Value::int64(42)},
      {"bigint", "18446744073709551615", Value::uint64(18446744073709551615ull), true},
      {"year", "2024", Value::int64(2024)},
      {"decimal", "12.50", Value::decimal("12.50")},
      {"float", "0.123457", Value::float64(double(0.123457f))},
      {"double", "2.5e-300", Value::float64(2.5e-300)},
      {"bit", "\x01\x02", Value::uint64(0x0102)},
      {"date", "2024-02-29", Value::date(19782)},
      {"datetime", "2000-01-01 00:00:01", Value::timestamp(946684801000000)},
      {"timestamp", "2000-01-01 00:00:01.5", Value::timestamptz(946684801500000)},
      {"time", "-838:59:59", Value::time(-((838LL * 60 + 59) * 60 + 59) * 1000000)},
      {"varchar", "tinyint", Value::string("tinyint")},
      {"mediumtext", "12", Value::string("12")},
      {"text", "2024-02-29", Value::string("2024-02-29")},
      {"datetime2", "x", Value::string("x")},  // not a DATA_TYPE: text, not a guess
      {"enum", "b", Value::string("b")},
  };
  for (const Case& c : cases) {
    TableSchema t;
    t.db = "d";
    t.table = "t";
    bl::ColumnInfo ci;
    ci.name = "c";
    ci.is_unsigned = c.is_unsigned;
    t.cols.push_back(ci);
    t.data_types.push_back(c.type);
    Arena arena;
    auto v = text_to_value(t, 0, c.text, arena, false);
    ASSERT_TRUE(v.ok()) << c.type << ": " << v.error().message();
    EXPECT_EQ(v.value(), c.want) << c.type << " '" << c.text << "'";
  }
  TableSchema t;
  t.db = "d";
  t.table = "t";
  t.cols.push_back(bl::ColumnInfo{});
  t.data_types.push_back("int");
  Arena arena;
  EXPECT_FALSE(text_to_value(t, 0, "12x", arena, false).ok());
  t.data_types[0] = "date";
  EXPECT_FALSE(text_to_value(t, 0, "0000-00-00", arena, false).ok());
  EXPECT_EQ(text_to_value(t, 0, "0000-00-00", arena, true).value(), Value::null());
}

}  // namespace
}  // namespace sluice::mysql
