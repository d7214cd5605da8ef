// The mysql destination against the real MariaDB test server (scripts/services start mariadb):
// batches built by hand, written in-process, read back with libmariadb. Each test writes into its
// own database, created at start and dropped at the end.
#include <errmsg.h>
#include <gtest/gtest.h>
#include <mysql.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "connectors/mysql/mysql_destination.h"
#include "connectors/mysql/mysql_url.h"
#include "sluice/batch.h"
#include "sluice/registry.h"
#include "sluice/temporal.h"
#include "support/env.h"
#include "support/sql.h"

namespace sluice {
namespace {

std::string env_mysql_url() { return test::mysql_url(); }

// The shared MySQL client (tests/support) read as "v1|v2|..." rows (NULL for nulls), on UTC.
class Client {
 public:
  bool connect(const mysql::MysqlUrl& u, const std::string& db) {
    test::MyUrl url;
    url.user = u.user;
    url.password = u.password;
    url.host = u.host;
    url.port = int(u.port);
    if (!c_.connect(url.str(), db)) return false;
    exec("SET SESSION time_zone='+00:00'");
    return true;
  }
  void exec(const std::string& sql) { c_.exec(sql); }
  std::vector<std::string> rows(const std::string& sql) { return test::joined(c_.query(sql)); }
  std::string one(const std::string& sql) {
    auto r = rows(sql);
    return r.empty() ? "<no row>" : r[0];
  }

 private:
  test::MysqlClient c_;
};

using Rows = std::vector<std::string>;

class MysqlDestinationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_url_ = env_mysql_url();
    ASSERT_FALSE(base_url_.empty());
    auto u = mysql::parse_mysql_url(base_url_);
    ASSERT_TRUE(u.ok()) << u.error().message();
    url_ = u.value();
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    db_ = "sluice_t" + std::to_string(::getpid()) + "_" + name.substr(0, 40);
    ASSERT_TRUE(admin_.connect(url_, ""));
    admin_.exec("DROP DATABASE IF EXISTS `" + db_ + "`");
    admin_.exec("CREATE DATABASE `" + db_ + "` CHARACTER SET utf8mb4");
    ASSERT_TRUE(db.connect(url_, db_));
  }
  void TearDown() override {
    if (dest_) dest_->close();
    if (!db_.empty() && !HasFailure()) admin_.exec("DROP DATABASE IF EXISTS `" + db_ + "`");
  }

  std::string dest_url() const {
    return "mysql://" + url_.user + ":" + url_.password + "@" + url_.host + ":" +
           std::to_string(url_.port) + "/" + db_;
  }

  Destination& open(MysqlDestinationOptions o = {}) {
    if (o.url.empty()) o.url = dest_url();
    auto d = make_mysql_destination(std::move(o));
    EXPECT_TRUE(d.ok()) << d.error().message();
    dest_ = std::move(d.value());
    Status s = dest_->open(ConnectorContext{"test", "mysql", nullptr});
    EXPECT_TRUE(s.ok()) << s.error().message();
    return *dest_;
  }

  Status write(Batch& b) {
    int calls = 0;
    Status result = Error(Errc::internal, "done not called");
    dest_->write(b, [&](Status s) {
      ++calls;
      result = std::move(s);
    });
    EXPECT_EQ(calls, 1);
    return result;
  }
  void write_ok(Batch& b) {
    Status s = write(b);
    ASSERT_TRUE(s.ok()) << s.error().message();
  }

  static Record& add(Batch& b, Operation op, std::string_view table, Value key,
                     Value after = Value()) {
    Value meta =
        table.empty() ? Value() : b.object(1).add("table", Value::string(b.copy(table))).build();
    Record& r = b.add();
    r.op = op;
    r.metadata = meta;
    r.key = key;
    r.after = after;
    return r;
  }
  static Value id_key(Batch& b, int64_t id) {
    return b.object(1).add("id", Value::int64(id)).build();
  }
  static Value person(Batch& b, int64_t id, std::string_view name, double salary) {
    return b.object(3)
        .add("id", Value::int64(id))
        .add("name", Value::string(b.copy(name)))
        .add("salary", Value::float64(salary))
        .build();
  }
  Rows column_types(const std::string& table) {
    return db.rows(
        "SELECT COLUMN_NAME, COLUMN_TYPE, COLUMN_KEY FROM information_schema.COLUMNS WHERE TABLE_SCHEMA='" +
        db_ + "' AND TABLE_NAME='" + table + "' ORDER BY ORDINAL_POSITION");
  }

  std::string base_url_;
  mysql::MysqlUrl url_;
  std::string db_;
  Client admin_;
  Client db;
  std::unique_ptr<Destination> dest_;
};

TEST_F(MysqlDestinationTest, AutoCreatesTableWithKeyAsPrimaryKey) {
  open();
  Batch b;
  add(b, Operation::snapshot, "employees", id_key(b, 1), person(b, 1, "Ada", 1000.5));
  add(b, Operation::create, "employees", id_key(b, 2), person(b, 2, "Alan", 2000));
  write_ok(b);
  EXPECT_EQ(column_types("employees"),
            (Rows{"id|bigint(20)|PRI", "name|longtext|", "salary|double|"}));
  EXPECT_EQ(db.one("SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA='" + db_ +
                   "' AND TABLE_NAME='employees'"),
            "InnoDB");
  EXPECT_EQ(db.rows("SELECT id, name, salary FROM employees ORDER BY id"),
            (Rows{"1|Ada|1000.5", "2|Alan|2000"}));
}

TEST_F(MysqlDestinationTest, UpsertUpdatesWithinAndAcrossBatches) {
  open();
  Batch b1;
  add(b1, Operation::create, "employees", id_key(b1, 1), person(b1, 1, "Ada", 1));
  add(b1, Operation::update, "employees", id_key(b1, 1), person(b1, 1, "Ada L.", 2));
  write_ok(b1);
  Batch b2;
  add(b2, Operation::update, "employees", id_key(b2, 1), person(b2, 1, "Ada Lovelace", 3));
  add(b2, Operation::snapshot, "employees", id_key(b2, 2), person(b2, 2, "Alan", 4));
  write_ok(b2);
  EXPECT_EQ(db.rows("SELECT * FROM employees ORDER BY id"), (Rows{"1|Ada Lovelace|3", "2|Alan|4"}));
}

TEST_F(MysqlDestinationTest, DeleteRemovesByKey) {
  open();
  Batch b1;
  for (int i = 1; i <= 4; ++i)
    add(b1, Operation::create, "employees", id_key(b1, i), person(b1, i, "x", i));
  write_ok(b1);
  Batch b2;
  add(b2, Operation::remove, "employees", id_key(b2, 2));
  add(b2, Operation::remove, "employees", id_key(b2, 4));
  add(b2, Operation::remove, "employees", id_key(b2, 42));     // not there: nothing happens
  add(b2, Operation::remove, "never_created", id_key(b2, 1));  // no table: nothing happens
  write_ok(b2);
  EXPECT_EQ(db.rows("SELECT id FROM employees ORDER BY id"), (Rows{"1", "3"}));
  EXPECT_EQ(db.one("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA='" + db_ +
                   "' AND TABLE_NAME='never_created'"),
            "0");
}

TEST_F(MysqlDestinationTest, ReplayingIdenticalBatchesConverges) {
  open();
  auto fill = [&](Batch& b) {
    for (int i = 1; i <= 50; ++i)
      add(b, Operation::create, "employees", id_key(b, i), person(b, i, "n", i));
    add(b, Operation::update, "employees", id_key(b, 7), person(b, 7, "seven", 77));
    add(b, Operation::remove, "employees", id_key(b, 9));
  };
  Batch b1;
  fill(b1);
  write_ok(b1);
  Rows first = db.rows("SELECT * FROM employees ORDER BY id");
  Batch b2;
  fill(b2);
  write_ok(b2);
  write_ok(b2);
  EXPECT_EQ(db.rows("SELECT * FROM employees ORDER BY id"), first);
  EXPECT_EQ(first.size(), 49u);
  EXPECT_EQ(db.one("SELECT name, salary FROM employees WHERE id=7"), "seven|77");
}

TEST_F(MysqlDestinationTest, AbsentFieldKeepsStoredValueNullSetsNull) {
  open();
  Batch b1;
  add(b1, Operation::create, "t", id_key(b1, 1),
      b1.object(3)
          .add("id", Value::int64(1))
          .add("a", Value::string("a1"))
          .add("b", Value::string("b1"))
          .build());
  add(b1, Operation::create, "t", id_key(b1, 2),
      b1.object(3)
          .add("id", Value::int64(2))
          .add("a", Value::string("a2"))
          .add("b", Value::string("b2"))
          .build());
  write_ok(b1);
  Batch b2;
  // Row 1: b absent (unchanged TOAST) keeps "b1"; row 2: b null sets NULL.
  add(b2, Operation::update, "t", id_key(b2, 1),
      b2.object(3)
          .add("id", Value::int64(1))
          .add("a", Value::string("A1"))
          .add("b", Value())
          .build());
  add(b2, Operation::update, "t", id_key(b2, 2),
      b2.object(3)
          .add("id", Value::int64(2))
          .add("a", Value::string("A2"))
          .add("b", Value::null())
          .build());
  write_ok(b2);
  EXPECT_EQ(db.rows("SELECT id, a, b FROM t ORDER BY id"), (Rows{"1|A1|b1", "2|A2|NULL"}));
}

TEST_F(MysqlDestinationTest, NewFieldAddsColumn) {
  open();
  Batch b1;
  add(b1, Operation::create, "t", id_key(b1, 1),
      b1.object(2).add("id", Value::int64(1)).add("a", Value::int64(10)).build());
  write_ok(b1);
  Batch b2;
  add(b2, Operation::create, "t", id_key(b2, 2),
      b2.object(3)
          .add("id", Value::int64(2))
          .add("a", Value::int64(20))
          .add("added", Value::boolean(true))
          .build());
  write_ok(b2);
  EXPECT_EQ(column_types("t"), (Rows{"id|bigint(20)|PRI", "a|bigint(20)|", "added|tinyint(1)|"}));
  EXPECT_EQ(db.rows("SELECT id, a, added FROM t ORDER BY id"), (Rows{"1|10|NULL", "2|20|1"}));
}

TEST_F(MysqlDestinationTest, CompositeKeyUpsertsAndDeletes) {
  open();
  auto key = [](Batch& b, std::string_view region, int64_t n) {
    return b.object(2)
        .add("region", Value::string(b.copy(region)))
        .add("n", Value::int64(n))
        .build();
  };
  auto row = [](Batch& b, std::string_view region, int64_t n, std::string_view v) {
    return b.object(3)
        .add("region", Value::string(b.copy(region)))
        .add("n", Value::int64(n))
        .add("v", Value::string(b.copy(v)))
        .build();
  };
  Batch b1;
  add(b1, Operation::create, "orders", key(b1, "eu", 1), row(b1, "eu", 1, "a"));
  add(b1, Operation::create, "orders", key(b1, "eu", 2), row(b1, "eu", 2, "b"));
  add(b1, Operation::create, "orders", key(b1, "us", 1), row(b1, "us", 1, "c"));
  add(b1, Operation::create, "orders", key(b1, "EU", 1), row(b1, "EU", 1, "case matters"));
  write_ok(b1);
  Batch b2;
  add(b2, Operation::update, "orders", key(b2, "us", 1), row(b2, "us", 1, "C"));
  add(b2, Operation::remove, "orders", key(b2, "eu", 2));
  add(b2, Operation::remove, "orders", key(b2, "eu", 1));
  write_ok(b2);
  EXPECT_EQ(column_types("orders"),
            (Rows{"region|varchar(255)|PRI", "n|bigint(20)|PRI", "v|longtext|"}));
  EXPECT_EQ(db.rows("SELECT region, n, v FROM orders ORDER BY region COLLATE utf8mb4_bin, n"),
            (Rows{"EU|1|case matters", "us|1|C"}));
}

TEST_F(MysqlDestinationTest, QuotesIdentifiersWithBackticksAndSpaces) {
  open();
  Batch b;
  auto k = b.object(1).add("my `id`", Value::int64(1)).build();
  add(b, Operation::create, "odd `table` name", k,
      b.object(2)
          .add("my `id`", Value::int64(1))
          .add("a column; DROP TABLE x", Value::string("v"))
          .build());
  write_ok(b);
  EXPECT_EQ(db.rows("SELECT `my ``id```, `a column; DROP TABLE x` FROM `odd ``table`` name`"),
            (Rows{"1|v"}));
  Batch b2;
  add(b2, Operation::remove, "odd `table` name",
      b2.object(1).add("my `id`", Value::int64(1)).build());
  write_ok(b2);
  EXPECT_EQ(db.one("SELECT COUNT(*) FROM `odd ``table`` name`"), "0");
}

TEST_F(MysqlDestinationTest, EveryValueKindReadsBackExactly) {
  open();
  Batch b;
  static const uint8_t uuid[16] = {0x12, 0x3e, 0x45, 0x67, 0xe8, 0x9b, 0x12, 0xd3,
                                   0xa4, 0x56, 0x42, 0x66, 0x14, 0x17, 0x40, 0x00};
  Interval* iv = b.arena().allocate_array<Interval>(1);
  *iv = Interval{14, 3, 4 * 3600'000'000LL + 5 * 60'000'000LL + 6'500'000LL};
  int64_t day = days_from_civil(2024, 2, 29);
  int64_t tod = (13 * 3600LL + 45 * 60) * 1'000'000 + 123456;
  int64_t ts = day * 86400'000'000LL + tod;
  const std::string_view blob("\x00\x01\xff'\\\"", 6);
  const Value items[] = {Value::int64(1), Value::string("x")};
  const Value obj = b.object(1).add("k", Value::boolean(true)).build();
  Value after = b.object(24)
                    .add("id", Value::int64(1))
                    .add("b", Value::boolean(true))
                    .add("i_min", Value::int64(std::numeric_limits<int64_t>::min()))
                    .add("i_max", Value::int64(std::numeric_limits<int64_t>::max()))
                    .add("u_max", Value::uint64(std::numeric_limits<uint64_t>::max()))
                    .add("f", Value::float64(0.1))
                    .add("f_big", Value::float64(1.0000000000000002e300))
                    .add("dec", Value::decimal("-12345678901234567890.123456789012345678"))
                    .add("dec_huge", Value::decimal("1234567890123456789012345678901234567890.5"))
                    .add("dec_nan", Value::decimal("NaN"))
                    .add("s", Value::string("h\xc3\xa9llo \xf0\x9f\xa6\x80 'q' \\ \"d\" \n end"))
                    .add("by", Value::bytes(blob))
                    .add("empty_by", Value::bytes(""))
                    .add("d", Value::date(int32_t(day)))
                    .add("t", Value::time(tod))
                    .add("ts", Value::timestamp(ts))
                    .add("tstz", Value::timestamptz(ts))
                    .add("ttz", Value::timetz(tod, 2 * 3600))
                    .add("iv", Value::interval(iv))
                    .add("uu", Value::uuid(uuid))
                    .add("j", Value::json(R"({"a": [1, 2], "s": "\u00e9"})"))
                    .add("arr", Value::array(items, 2))
                    .add("obj", obj)
                    .add("n", Value::null())
                    .build();
  add(b, Operation::create, "kinds", id_key(b, 1), after);
  write_ok(b);

  Rows types = column_types("kinds");
  std::string json_type =
      types.size() > 20 && types[20].find("json") != std::string::npos ? "json" : "longtext";
  EXPECT_EQ(types, (Rows{"id|bigint(20)|PRI",
                         "b|tinyint(1)|",
                         "i_min|bigint(20)|",
                         "i_max|bigint(20)|",
                         "u_max|bigint(20) unsigned|",
                         "f|double|",
                         "f_big|double|",
                         "dec|decimal(65,30)|",
                         "dec_huge|longtext|",
                         "dec_nan|longtext|",
                         "s|longtext|",
                         "by|longblob|",
                         "empty_by|longblob|",
                         "d|date|",
                         "t|time(6)|",
                         "ts|datetime(6)|",
                         "tstz|datetime(6)|",
                         "ttz|varchar(32)|",
                         "iv|varchar(255)|",
                         "uu|char(36)|",
                         "j|" + json_type + "|",
                         "arr|" + json_type + "|",
                         "obj|" + json_type + "|",
                         "n|longtext|"}));
  EXPECT_EQ(db.one("SELECT b, i_min, i_max, u_max FROM kinds"),
            "1|-9223372036854775808|9223372036854775807|18446744073709551615");
  EXPECT_EQ(db.one("SELECT f = 0.1e0, f_big = 1.0000000000000002e300, f_big = 1e300 FROM kinds"),
            "1|1|0");
  EXPECT_EQ(
      db.one(
          "SELECT `dec`, `dec` = CAST('-12345678901234567890.123456789012345678' AS DECIMAL(65,30)) FROM kinds"),
      "-12345678901234567890.123456789012345678000000000000|1");
  EXPECT_EQ(db.one("SELECT dec_huge, dec_nan FROM kinds"),
            "1234567890123456789012345678901234567890.5|NaN");
  EXPECT_EQ(db.one("SELECT s, CHAR_LENGTH(s) FROM kinds"),
            "h\xc3\xa9llo \xf0\x9f\xa6\x80 'q' \\ \"d\" \n end|23");
  EXPECT_EQ(db.one("SELECT HEX(`by`), LENGTH(empty_by), empty_by IS NULL FROM kinds"),
            "0001FF275C22|0|0");
  EXPECT_EQ(db.one("SELECT d, t, ts, tstz FROM kinds"),
            "2024-02-29|13:45:00.123456|2024-02-29 13:45:00.123456|2024-02-29 13:45:00.123456");
  EXPECT_EQ(db.one("SELECT UNIX_TIMESTAMP(tstz) FROM kinds"),
            std::to_string(ts / 1'000'000) + ".123456");
  EXPECT_EQ(db.one("SELECT ttz, iv, uu FROM kinds"),
            "13:45:00.123456+02:00|P1Y2M3DT4H5M6.5S|123e4567-e89b-12d3-a456-426614174000");
  EXPECT_EQ(
      db.one(
          "SELECT JSON_VALID(j), JSON_EXTRACT(j, '$.a[1]'), JSON_UNQUOTE(JSON_EXTRACT(j, '$.s')) FROM kinds"),
      "1|2|\xc3\xa9");
  EXPECT_EQ(db.one("SELECT JSON_EXTRACT(arr, '$[1]'), JSON_EXTRACT(obj, '$.k'), n FROM kinds"),
            "\"x\"|true|NULL");
}

TEST_F(MysqlDestinationTest, TwoTablesInOneBatch) {
  open();
  Batch b;
  add(b, Operation::create, "a", id_key(b, 1), person(b, 1, "in a", 1));
  add(b, Operation::create, "b", id_key(b, 1),
      b.object(2).add("id", Value::int64(1)).add("x", Value::int64(5)).build());
  add(b, Operation::create, "a", id_key(b, 2), person(b, 2, "in a too", 2));
  add(b, Operation::remove, "b", id_key(b, 1));
  add(b, Operation::create, "b", id_key(b, 2),
      b.object(2).add("id", Value::int64(2)).add("x", Value::int64(6)).build());
  write_ok(b);
  EXPECT_EQ(db.rows("SELECT id, name FROM a ORDER BY id"), (Rows{"1|in a", "2|in a too"}));
  EXPECT_EQ(db.rows("SELECT id, x FROM b ORDER BY id"), (Rows{"2|6"}));
}

TEST_F(MysqlDestinationTest, TruncateRecordEmptiesTheTableAndLaterInsertsLand) {
  open();
  Batch b1;
  for (int i = 1; i <= 3; ++i)
    add(b1, Operation::create, "employees", id_key(b1, i), person(b1, i, "x", i));
  write_ok(b1);
  Batch b2;
  Record& t = b2.add();
  t.op = Operation::remove;
  t.metadata = b2.object(2)
                   .add("table", Value::string("employees"))
                   .add("truncate", Value::string("true"))
                   .build();
  add(b2, Operation::create, "employees", id_key(b2, 9), person(b2, 9, "after", 9));
  write_ok(b2);
  EXPECT_EQ(db.rows("SELECT id, name FROM employees ORDER BY id"), (Rows{"9|after"}));
}

TEST_F(MysqlDestinationTest, SameKeyTwiceInOneBatchLatestWins) {
  open();
  Batch b;
  for (int round = 0; round < 3; ++round)
    for (int i = 1; i <= 100; ++i)
      add(b, Operation::update, "t", id_key(b, i),
          person(b, i, "round" + std::to_string(round), round * 1000 + i));
  write_ok(b);
  EXPECT_EQ(db.one("SELECT COUNT(*), MIN(name), MAX(name), SUM(salary) FROM t"),
            "100|round2|round2|205050");
}

TEST_F(MysqlDestinationTest, DeleteAndInsertOfOneKeyApplyInRecordOrder) {
  open();
  Batch b1;
  add(b1, Operation::create, "t", id_key(b1, 1), person(b1, 1, "one", 1));
  add(b1, Operation::create, "t", id_key(b1, 2), person(b1, 2, "two", 2));
  write_ok(b1);
  Batch b2;
  add(b2, Operation::remove, "t", id_key(b2, 1));  // delete then insert: row 1 exists
  add(b2, Operation::create, "t", id_key(b2, 1), person(b2, 1, "one again", 11));
  add(b2, Operation::update, "t", id_key(b2, 2),
      person(b2, 2, "two b", 22));  // upsert then delete: gone
  add(b2, Operation::remove, "t", id_key(b2, 2));
  add(b2, Operation::create, "t", id_key(b2, 3),
      person(b2, 3, "three", 3));  // insert, delete, insert
  add(b2, Operation::remove, "t", id_key(b2, 3));
  add(b2, Operation::create, "t", id_key(b2, 3), person(b2, 3, "three again", 33));
  write_ok(b2);
  EXPECT_EQ(db.rows("SELECT id, name FROM t ORDER BY id"), (Rows{"1|one again", "3|three again"}));
}

TEST_F(MysqlDestinationTest, UpdateThatChangesTheKeyMovesTheRow) {
  open();
  Batch b1;
  add(b1, Operation::create, "t", id_key(b1, 1), person(b1, 1, "ada", 1));
  write_ok(b1);
  Batch b2;
  Record& r = add(b2, Operation::update, "t", id_key(b2, 5), person(b2, 5, "ada", 1));
  r.before = person(b2, 1, "ada", 1);
  write_ok(b2);
  EXPECT_EQ(db.rows("SELECT id, name FROM t ORDER BY id"), (Rows{"5|ada"}));
}

TEST_F(MysqlDestinationTest, SmallStatementSizeSplitsRunsIntoManyStatements) {
  MysqlDestinationOptions o;
  o.max_statement_size = 1024;
  open(o);
  Batch b;
  for (int i = 1; i <= 500; ++i)
    add(b, Operation::create, "t", id_key(b, i), person(b, i, std::string(40, 'x'), i));
  for (int i = 1; i <= 500; i += 2) add(b, Operation::remove, "t", id_key(b, i));
  write_ok(b);
  EXPECT_EQ(db.one("SELECT COUNT(*), MIN(id), SUM(salary) FROM t"), "250|2|62750");
}

TEST_F(MysqlDestinationTest, DataErrorNamesTheTableAndKeyAndIsNotRetriable) {
  open();
  Batch b1;
  add(b1, Operation::create, "accounts", id_key(b1, 1),
      b1.object(2).add("id", Value::int64(1)).add("n", Value::int64(5)).build());
  write_ok(b1);
  Batch b2;
  for (int i = 2; i <= 5; ++i)
    add(b2, Operation::create, "accounts", id_key(b2, i),
        b2.object(2).add("id", Value::int64(i)).add("n", Value::int64(i)).build());
  add(b2, Operation::create, "accounts", id_key(b2, 6),
      b2.object(2).add("id", Value::int64(6)).add("n", Value::string("not a number")).build());
  Status s = write(b2);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), Errc::data);
  EXPECT_FALSE(s.error().retriable());
  EXPECT_NE(s.error().message().find("accounts"), std::string::npos) << s.error().message();
  EXPECT_NE(s.error().message().find("\"id\":6"), std::string::npos) << s.error().message();
  EXPECT_EQ(s.error().message().find('\n'), std::string::npos);
  EXPECT_EQ(s.error().message().find(url_.password + "@"), std::string::npos);
  // The failed batch left nothing behind.
  EXPECT_EQ(db.rows("SELECT id FROM accounts ORDER BY id"), (Rows{"1"}));
}

// ── values MySQL cannot store ──

TEST_F(MysqlDestinationTest, ValuesMysqlCannotStoreRejectTheRecordNamingTheSetting) {
  open();
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<std::pair<std::string, Value>> cases = {
      {"NaN", Value::float64(std::nan(""))},
      {"Infinity", Value::float64(inf)},
      {"-Infinity", Value::float64(-inf)},
      // PostgreSQL's 'infinity' timestamp and date, and a year beyond DATETIME's.
      {"timestamp", Value::timestamp(std::numeric_limits<int64_t>::max())},
      {"date", Value::date(std::numeric_limits<int32_t>::max())},
      {"date +10000-01-01", Value::date(days_from_civil(10000, 1, 1))},
      {"time 839:00:00", Value::time(int64_t(839) * 3600 * 1000000)},
      {"time -839:00:00", Value::time(-int64_t(839) * 3600 * 1000000)}};
  for (const auto& [what, v] : cases) {
    Batch b;
    add(b, Operation::create, "vals", id_key(b, 1),
        b.object(2).add("id", Value::int64(1)).add("x", v).build());
    Status s = write(b);
    ASSERT_FALSE(s.ok()) << what;
    EXPECT_EQ(s.error().code(), Errc::data) << what;
    EXPECT_FALSE(s.error().retriable()) << what;
    const std::string& m = s.error().message();
    EXPECT_NE(m.find("field \"x\": MySQL cannot store " + what), std::string::npos) << m;
    EXPECT_NE(m.find("unrepresentable_values: null"), std::string::npos) << m;
    EXPECT_NE(m.find("\"id\":1"), std::string::npos) << m;
  }
  // Nothing was written, not even a NULL (the table was created before the transaction).
  EXPECT_EQ(db.rows("SELECT COUNT(*) FROM vals"), (Rows{"0"}));
}

TEST_F(MysqlDestinationTest, UnrepresentableValuesNullWritesNullOnlyForThoseValues) {
  MysqlDestinationOptions o;
  o.unrepresentable_values = "null";
  open(o);
  Batch b;
  add(b, Operation::create, "vals", id_key(b, 1),
      b.object(3)
          .add("id", Value::int64(1))
          .add("d", Value::float64(1.5))
          .add("t", Value::timestamp(0))
          .build());
  add(b, Operation::create, "vals", id_key(b, 2),
      b.object(3)
          .add("id", Value::int64(2))
          .add("d", Value::float64(std::nan("")))
          .add("t", Value::timestamp(std::numeric_limits<int64_t>::max()))
          .build());
  write_ok(b);
  EXPECT_EQ(db.rows("SELECT id, d, t FROM vals ORDER BY id"),
            (Rows{"1|1.5|1970-01-01 00:00:00.000000", "2|NULL|NULL"}));
}

TEST_F(MysqlDestinationTest, NegativeTimesKeepTheirSign) {
  open();
  Batch b;
  const int64_t s = 1000000;
  const std::vector<int64_t> times = {-s, -(838 * 3600 + 59 * 60 + 59) * s, -s / 2, 25 * 3600 * s};
  for (size_t i = 0; i < times.size(); ++i)
    add(b, Operation::create, "times", id_key(b, int64_t(i)),
        b.object(2).add("id", Value::int64(int64_t(i))).add("t", Value::time(times[i])).build());
  write_ok(b);
  EXPECT_EQ(db.rows("SELECT t FROM times ORDER BY id"),
            (Rows{"-00:00:01.000000", "-838:59:59.000000", "-00:00:00.500000", "25:00:00.000000"}));
}

// The dead-letter isolation in one pass (on_error: dlq): a savepoint per record.
TEST_F(MysqlDestinationTest, WriteIsolatingWritesTheAcceptedRecordsAndReportsTheRejectedOnes) {
  open();
  Batch b;
  for (int i = 1; i <= 10; ++i) {
    Value v = i % 3 == 0 ? Value::float64(std::nan(""))   // refused by the writer
              : i == 8   ? Value::string("not a number")  // refused by the server
                         : Value::float64(i);
    add(b, Operation::create, "iso", id_key(b, i),
        b.object(2).add("id", Value::int64(i)).add("v", v).build());
  }
  ASSERT_TRUE(dest_->isolates_rejected_records());
  std::vector<RejectedRecord> rejected;
  Status s = dest_->write_isolating(b, true, rejected);
  ASSERT_TRUE(s.ok()) << s.error().message();
  std::vector<size_t> indexes;
  for (const RejectedRecord& r : rejected) indexes.push_back(r.index);
  EXPECT_EQ(indexes, (std::vector<size_t>{2, 5, 7, 8}));
  EXPECT_NE(rejected[2].error.message().find("\"id\":8"), std::string::npos)
      << rejected[2].error.message();
  EXPECT_EQ(db.rows("SELECT id FROM iso ORDER BY id"), (Rows{"1", "2", "4", "5", "7", "10"}));
}

TEST_F(MysqlDestinationTest, LostConnectionIsRetriableAndTheNextWriteReconnects) {
  open();
  Batch b1;
  add(b1, Operation::create, "t", id_key(b1, 1), person(b1, 1, "a", 1));
  write_ok(b1);
  // Kill the destination's connection (the only one using this database besides the reader).
  std::string others =
      admin_.one("SELECT GROUP_CONCAT(ID) FROM information_schema.PROCESSLIST WHERE DB='" + db_ +
                 "' AND ID <> " + db.one("SELECT CONNECTION_ID()"));
  ASSERT_NE(others, "NULL");
  ASSERT_EQ(others.find(','), std::string::npos) << others;
  admin_.exec("KILL " + others);
  Batch b2;
  add(b2, Operation::create, "t", id_key(b2, 2), person(b2, 2, "b", 2));
  Status s = write(b2);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(s.error().retriable()) << s.error().message();
  EXPECT_EQ(s.error().code(), Errc::connection) << s.error().message();
  write_ok(b2);  // the runtime's retry
  EXPECT_EQ(db.rows("SELECT id FROM t ORDER BY id"), (Rows{"1", "2"}));
}

TEST_F(MysqlDestinationTest, TlsRequiredFailsAgainstAServerWithoutTls) {
  if (db.one("SELECT @@have_ssl") == "YES") GTEST_SUCCEED() << "server has TLS; nothing to refuse";
  else {
    MysqlDestinationOptions o;
    o.url = dest_url();
    o.tls_mode = "required";
    auto d = make_mysql_destination(o);
    ASSERT_TRUE(d.ok());
    Status s = d.value()->open(ConnectorContext{"test", "mysql", nullptr});
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().message().find(":" + url_.password + "@"), std::string::npos)
        << s.error().message();
  }
  MysqlDestinationOptions bad;
  bad.url = dest_url();
  bad.tls_mode = "verify_ca";
  auto d = make_mysql_destination(bad);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message().find("tls.ca"), std::string::npos);
}

TEST_F(MysqlDestinationTest, WrongPasswordFailsWithoutEchoingIt) {
  MysqlDestinationOptions o;
  o.url = "mysql://" + url_.user + ":wrong-pass-xyz@" + url_.host + ":" +
          std::to_string(url_.port) + "/" + db_;
  auto d = make_mysql_destination(o);
  ASSERT_TRUE(d.ok());
  Status s = d.value()->open(ConnectorContext{"test", "mysql", nullptr});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), Errc::auth);
  EXPECT_EQ(s.error().message().find("wrong-pass-xyz"), std::string::npos) << s.error().message();
}

TEST_F(MysqlDestinationTest, RegisteredAndCreatedFromSettings) {
  const ConnectorSpec* spec = Registry::builtin().connector("mysql");
  ASSERT_NE(spec, nullptr);
  ASSERT_NE(spec->make_destination, nullptr);
  Settings settings;
  ASSERT_EQ(settings_from_text(spec->destination_settings,
                               {{"url", dest_url()}, {"table", "pre_{{table}}"}}, &settings),
            std::nullopt);
  auto d = spec->make_destination(settings);
  ASSERT_TRUE(d.ok()) << d.error().message();
  dest_ = std::move(d.value());
  ASSERT_TRUE(dest_->open(ConnectorContext{"test", "mysql", nullptr}).ok());
  Batch b;
  add(b, Operation::create, "x", id_key(b, 1), person(b, 1, "p", 1));
  add(b, Operation::create, "", id_key(b, 2), person(b, 2, "q", 2));
  write_ok(b);
  EXPECT_EQ(db.rows("SELECT id FROM pre_x"), (Rows{"1"}));
  EXPECT_EQ(db.rows("SELECT id FROM pre_records"), (Rows{"2"}));
}

}  // namespace
}  // namespace sluice
