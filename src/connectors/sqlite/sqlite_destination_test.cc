#include "connectors/sqlite/sqlite_destination.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "sluice/registry.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;

// Reads the destination file back with plain sqlite3.
class Reader {
 public:
  explicit Reader(const fs::path& path) { EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK); }
  ~Reader() { sqlite3_close(db_); }
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  // Each row as "v1|v2|..." with NULL for nulls; blobs as x'hex'.
  std::vector<std::string> rows(const std::string& sql) {
    std::vector<std::string> out;
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr), SQLITE_OK)
        << sqlite3_errmsg(db_) << ": " << sql;
    if (!st) return out;
    while (sqlite3_step(st) == SQLITE_ROW) {
      std::string row;
      for (int i = 0; i < sqlite3_column_count(st); ++i) {
        if (i) row += '|';
        switch (sqlite3_column_type(st, i)) {
          case SQLITE_NULL: row += "NULL"; break;
          case SQLITE_BLOB: {
            row += "x'";
            auto* p = static_cast<const unsigned char*>(sqlite3_column_blob(st, i));
            for (int j = 0; j < sqlite3_column_bytes(st, i); ++j) {
              static const char* hex = "0123456789abcdef";
              row += hex[p[j] >> 4];
              row += hex[p[j] & 15];
            }
            row += "'";
            break;
          }
          default: row += reinterpret_cast<const char*>(sqlite3_column_text(st, i)); break;
        }
      }
      out.push_back(row);
    }
    sqlite3_finalize(st);
    return out;
  }
  std::string one(const std::string& sql) {
    auto r = rows(sql);
    return r.empty() ? "<no row>" : r[0];
  }
  // Every table's rows, ordered, as one comparable dump.
  std::vector<std::string> dump() {
    std::vector<std::string> out;
    for (const auto& t : rows("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")) {
      out.push_back("table " + t + ": " +
                    one("SELECT sql FROM sqlite_master WHERE name='" + t + "'"));
      std::string quoted = "\"";
      for (char c : t) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
      quoted += "\"";
      for (const auto& r : rows("SELECT * FROM " + quoted + " ORDER BY 1, 2")) out.push_back(r);
    }
    return out;
  }
  sqlite3* get() { return db_; }

 private:
  sqlite3* db_ = nullptr;
};

class SqliteDestinationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("sluice-sqlite-dest-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    path_ = dir_ / "sub" / "out.db";
  }
  void TearDown() override {
    if (dest_) dest_->close();
    fs::remove_all(dir_);
  }

  Destination& open(SqliteDestinationOptions o = {}) {
    if (o.path.empty()) o.path = path_.string();
    auto d = make_sqlite_destination(std::move(o));
    EXPECT_TRUE(d.ok()) << d.error().message();
    dest_ = std::move(d.value());
    Status s = dest_->open(ConnectorContext{"test", "sqlite", nullptr});
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
    EXPECT_EQ(calls, 1);  // completes synchronously, exactly once
    return result;
  }
  void write_ok(Batch& b) {
    Status s = write(b);
    ASSERT_TRUE(s.ok()) << s.error().message();
  }

  // A record with metadata {"table": table}.
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
  // employees-like row: id, name, salary.
  static Value person(Batch& b, int64_t id, std::string_view name, double salary) {
    return b.object(3)
        .add("id", Value::int64(id))
        .add("name", Value::string(b.copy(name)))
        .add("salary", Value::float64(salary))
        .build();
  }

  fs::path dir_;
  fs::path path_;
  std::unique_ptr<Destination> dest_;
};

TEST_F(SqliteDestinationTest, CreatesTableWithKeyAsPrimaryKeyAndParentDirectories) {
  open();
  Batch b;
  add(b, Operation::snapshot, "employees", id_key(b, 1), person(b, 1, "Ada", 1000.5));
  add(b, Operation::create, "employees", id_key(b, 2), person(b, 2, "Alan", 2000));
  write_ok(b);

  ASSERT_TRUE(fs::exists(path_));
  Reader db(path_);
  EXPECT_EQ(db.rows("SELECT name, type, pk FROM pragma_table_info('employees') ORDER BY cid"),
            (std::vector<std::string>{"id|INTEGER|1", "name|TEXT|0", "salary|REAL|0"}));
  EXPECT_EQ(db.rows("SELECT id, name, salary FROM employees ORDER BY id"),
            (std::vector<std::string>{"1|Ada|1000.5", "2|Alan|2000.0"}));
  EXPECT_EQ(db.one("PRAGMA journal_mode"), "wal");
}

TEST_F(SqliteDestinationTest, CheckpointInDestinationCommitsThePositionWithTheBatch) {
  SqliteDestinationOptions o;
  o.checkpoint_in_destination = true;
  Destination& d = open(o);
  ASSERT_TRUE(d.stores_positions());
  auto none = d.stored_position("test");
  ASSERT_TRUE(none.ok()) << none.error().message();
  EXPECT_FALSE(none.value().has_value());

  // Arbitrary bytes, NUL included.
  const std::string pos1("lsn\0\xff\x01-1", 8);
  Batch b1;
  add(b1, Operation::create, "employees", id_key(b1, 1), person(b1, 1, "Ada", 1));
  b1.set_position(pos1);
  write_ok(b1);
  auto got = d.stored_position("test");
  ASSERT_TRUE(got.ok()) << got.error().message();
  ASSERT_TRUE(got.value().has_value());
  EXPECT_EQ(*got.value(), pos1);
  EXPECT_FALSE(d.stored_position("other").value().has_value());

  // A failing batch (a keyless record after a good one) rolls back its rows and its position.
  Batch b2;
  add(b2, Operation::create, "employees", id_key(b2, 2), person(b2, 2, "Alan", 2));
  add(b2, Operation::create, "employees", Value(), person(b2, 3, "Grace", 3));
  b2.set_position("pos-2");
  Status s = write(b2);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(*d.stored_position("test").value(), pos1);

  // Replaying the first batch and writing a newer one moves the position forward.
  Batch b3;
  add(b3, Operation::create, "employees", id_key(b3, 2), person(b3, 2, "Alan", 2));
  b3.set_position("pos-3");
  write_ok(b3);
  {
    Reader db(path_);
    EXPECT_EQ(db.rows("SELECT id FROM employees ORDER BY id"),
              (std::vector<std::string>{"1", "2"}));
    EXPECT_EQ(
        db.one("SELECT pipeline, CAST(position AS TEXT), typeof(position) FROM sluice_checkpoints"),
        "test|pos-3|blob");
  }

  // Survives a reopen.
  dest_->close();
  Destination& again = open(o);
  EXPECT_EQ(*again.stored_position("test").value(), "pos-3");
}

TEST_F(SqliteDestinationTest, WithoutCheckpointInDestinationNoPositionTableIsCreated) {
  Destination& d = open();
  EXPECT_FALSE(d.stores_positions());
  Batch b;
  add(b, Operation::create, "employees", id_key(b, 1), person(b, 1, "Ada", 1));
  b.set_position("p");
  write_ok(b);
  Reader db(path_);
  EXPECT_EQ(db.one("SELECT count(*) FROM sqlite_master WHERE name = 'sluice_checkpoints'"), "0");
}

TEST_F(SqliteDestinationTest, UpsertUpdatesExistingRowWithinAndAcrossBatches) {
  open();
  Batch b1;
  add(b1, Operation::create, "employees", id_key(b1, 1), person(b1, 1, "Ada", 1));
  add(b1, Operation::update, "employees", id_key(b1, 1), person(b1, 1, "Ada L.", 2));
  write_ok(b1);
  Batch b2;
  add(b2, Operation::update, "employees", id_key(b2, 1), person(b2, 1, "Ada Lovelace", 3));
  add(b2, Operation::snapshot, "employees", id_key(b2, 2), person(b2, 2, "Alan", 4));
  write_ok(b2);

  Reader db(path_);
  EXPECT_EQ(db.rows("SELECT * FROM employees ORDER BY id"),
            (std::vector<std::string>{"1|Ada Lovelace|3.0", "2|Alan|4.0"}));
}

TEST_F(SqliteDestinationTest, DeleteRemovesByKey) {
  open();
  Batch b1;
  for (int i = 1; i <= 3; ++i)
    add(b1, Operation::create, "employees", id_key(b1, i), person(b1, i, "x", i));
  write_ok(b1);
  Batch b2;
  add(b2, Operation::remove, "employees", id_key(b2, 2));
  add(b2, Operation::remove, "employees", id_key(b2, 42));  // not there: nothing happens
  write_ok(b2);

  Reader db(path_);
  EXPECT_EQ(db.rows("SELECT id FROM employees ORDER BY id"), (std::vector<std::string>{"1", "3"}));
}

TEST_F(SqliteDestinationTest, TruncateRecordEmptiesTheTableAndLaterInsertsLand) {
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
  add(b2, Operation::remove, "other",
      Value());  // key-less delete without the marker is still an error
  EXPECT_FALSE(write(b2).ok());
  b2.records().pop_back();
  write_ok(b2);
  Reader db(path_);
  EXPECT_EQ(db.rows("SELECT id FROM employees ORDER BY id"), (std::vector<std::string>{"9"}));
}

TEST_F(SqliteDestinationTest, DeleteFromAnUnknownTableDoesNotCreateIt) {
  open();
  Batch b;
  add(b, Operation::remove, "ghosts", id_key(b, 1));
  write_ok(b);
  Reader db(path_);
  EXPECT_EQ(db.one("SELECT count(*) FROM sqlite_master WHERE name = 'ghosts'"), "0");
}

TEST_F(SqliteDestinationTest, ReplayingTheSameBatchLeavesIdenticalState) {
  open();
  auto fill = [](Batch& b) {
    add(b, Operation::create, "employees", id_key(b, 1), person(b, 1, "Ada", 1));
    add(b, Operation::create, "employees", id_key(b, 2), person(b, 2, "Alan", 2));
    add(b, Operation::update, "employees", id_key(b, 1), person(b, 1, "Ada L.", 10));
    add(b, Operation::remove, "employees", id_key(b, 2));
    add(b, Operation::create, "employees", id_key(b, 3), person(b, 3, "Grace", 3));
    add(b, Operation::create, "departments", id_key(b, 7),
        b.object(2).add("id", Value::int64(7)).add("title", Value::string("R&D")).build());
  };
  Batch b;
  fill(b);
  write_ok(b);
  std::vector<std::string> first = Reader(path_).dump();
  write_ok(b);  // at-least-once: the same batch again
  EXPECT_EQ(Reader(path_).dump(), first);

  // And after a restart of the destination (fresh caches).
  dest_->close();
  open();
  Batch again;
  fill(again);
  write_ok(again);
  EXPECT_EQ(Reader(path_).dump(), first);
  EXPECT_EQ(first.size(), 2u + 2u + 1u);  // two table lines, rows 1 and 3, row 7
}

TEST_F(SqliteDestinationTest, AbsentFieldKeepsStoredValueAndNullSetsNull) {
  open();
  Batch b1;
  add(b1, Operation::create, "t", id_key(b1, 1),
      b1.object(3)
          .add("id", Value::int64(1))
          .add("big", Value::string("toasted"))
          .add("n", Value::int64(5))
          .build());
  write_ok(b1);
  Batch b2;
  // `big` absent (unchanged TOAST), `n` explicitly null.
  add(b2, Operation::update, "t", id_key(b2, 1),
      b2.object(3).add("id", Value::int64(1)).add("big", Value()).add("n", Value::null()).build());
  write_ok(b2);

  Reader db(path_);
  EXPECT_EQ(db.one("SELECT id, big, n FROM t"), "1|toasted|NULL");
}

TEST_F(SqliteDestinationTest, NewFieldAddsAColumnAndOlderRowsGetNull) {
  open();
  Batch b1;
  add(b1, Operation::create, "t", id_key(b1, 1),
      b1.object(2).add("id", Value::int64(1)).add("a", Value::int64(1)).build());
  write_ok(b1);
  Batch b2;
  add(b2, Operation::create, "t", id_key(b2, 2),
      b2.object(3)
          .add("id", Value::int64(2))
          .add("a", Value::int64(2))
          .add("added", Value::string("new"))
          .build());
  add(b2, Operation::create, "t", id_key(b2, 3),
      b2.object(2)
          .add("id", Value::int64(3))
          .add("Added", Value::string("same column, other case"))
          .build());
  write_ok(b2);

  Reader db(path_);
  EXPECT_EQ(db.rows("SELECT name, type FROM pragma_table_info('t') ORDER BY cid"),
            (std::vector<std::string>{"id|INTEGER", "a|INTEGER", "added|TEXT"}));
  EXPECT_EQ(db.rows("SELECT * FROM t ORDER BY id"),
            (std::vector<std::string>{"1|1|NULL", "2|2|new", "3|NULL|same column, other case"}));
}

TEST_F(SqliteDestinationTest, CompositeKey) {
  open();
  auto key = [](Batch& b, int64_t order, std::string_view line) {
    return b.object(2)
        .add("order_id", Value::int64(order))
        .add("line", Value::string(b.copy(line)))
        .build();
  };
  auto row = [](Batch& b, int64_t order, std::string_view line, int64_t qty) {
    return b.object(3)
        .add("order_id", Value::int64(order))
        .add("line", Value::string(b.copy(line)))
        .add("qty", Value::int64(qty))
        .build();
  };
  Batch b;
  add(b, Operation::create, "lines", key(b, 1, "a"), row(b, 1, "a", 1));
  add(b, Operation::create, "lines", key(b, 1, "b"), row(b, 1, "b", 2));
  add(b, Operation::create, "lines", key(b, 2, "a"), row(b, 2, "a", 3));
  add(b, Operation::update, "lines", key(b, 1, "b"), row(b, 1, "b", 20));
  add(b, Operation::remove, "lines", key(b, 2, "a"));
  write_ok(b);

  Reader db(path_);
  EXPECT_EQ(db.rows("SELECT name FROM pragma_table_info('lines') WHERE pk > 0 ORDER BY pk"),
            (std::vector<std::string>{"order_id", "line"}));
  EXPECT_EQ(db.rows("SELECT * FROM lines ORDER BY 1, 2"),
            (std::vector<std::string>{"1|a|1", "1|b|20"}));
}

TEST_F(SqliteDestinationTest, KeyFieldsMissingFromAfterComeFromTheKey) {
  open();
  Batch b;
  add(b, Operation::create, "t", id_key(b, 9), b.object(1).add("v", Value::string("x")).build());
  add(b, Operation::update, "t", id_key(b, 9), b.object(1).add("v", Value::string("y")).build());
  write_ok(b);
  Reader db(path_);
  EXPECT_EQ(db.rows("SELECT name, pk FROM pragma_table_info('t') ORDER BY cid"),
            (std::vector<std::string>{"id|1", "v|0"}));
  EXPECT_EQ(db.rows("SELECT * FROM t"), (std::vector<std::string>{"9|y"}));
}

TEST_F(SqliteDestinationTest, ScalarKeyUsesAKeyColumnAndScalarPayloadAValueColumn) {
  open();
  Batch b;
  add(b, Operation::create, "kv", Value::string("k1"), Value::string("v1"));
  add(b, Operation::create, "kv", Value::string("k2"), Value::string("v2"));
  add(b, Operation::update, "kv", Value::string("k1"), Value::string("v1b"));
  add(b, Operation::remove, "kv", Value::string("k2"));
  write_ok(b);
  Reader db(path_);
  EXPECT_EQ(db.rows("SELECT name, pk FROM pragma_table_info('kv') ORDER BY cid"),
            (std::vector<std::string>{"key|1", "value|0"}));
  EXPECT_EQ(db.rows("SELECT * FROM kv"), (std::vector<std::string>{"k1|v1b"}));
}

TEST_F(SqliteDestinationTest, KeyOnlyRowsUpsertAsDoNothing) {
  open();
  Batch b;
  add(b, Operation::create, "tags", id_key(b, 1), id_key(b, 1));
  add(b, Operation::create, "tags", id_key(b, 1), id_key(b, 1));
  add(b, Operation::create, "tags", id_key(b, 2));  // no after at all
  write_ok(b);
  Reader db(path_);
  EXPECT_EQ(db.rows("SELECT * FROM tags ORDER BY id"), (std::vector<std::string>{"1", "2"}));
}

TEST_F(SqliteDestinationTest, IdentifiersAreQuoted) {
  open();
  const std::string table = "my \"odd\" table; DROP TABLE x";
  Batch b;
  Value key = b.object(1).add("the id", Value::int64(1)).build();
  Value after = b.object(3)
                    .add("the id", Value::int64(1))
                    .add("a\"b", Value::string("quote"))
                    .add("select", Value::string("keyword"))
                    .build();
  add(b, Operation::create, table, key, after);
  write_ok(b);
  Batch b2;
  add(b2, Operation::update, table, b2.object(1).add("the id", Value::int64(1)).build(),
      b2.object(2).add("the id", Value::int64(1)).add("select", Value::string("again")).build());
  write_ok(b2);
  Batch b3;
  add(b3, Operation::create, table, b3.object(1).add("the id", Value::int64(2)).build(),
      b3.object(2).add("the id", Value::int64(2)).add("new \"col\"", Value::int64(3)).build());
  write_ok(b3);

  Reader db(path_);
  EXPECT_EQ(db.rows("SELECT * FROM \"my \"\"odd\"\" table; DROP TABLE x\" ORDER BY 1"),
            (std::vector<std::string>{"1|quote|again|NULL", "2|NULL|NULL|3"}));
  EXPECT_EQ(
      db.rows("SELECT name FROM pragma_table_info('my \"odd\" table; DROP TABLE x') ORDER BY cid"),
      (std::vector<std::string>{"the id", "a\"b", "select", "new \"col\""}));
}

TEST_F(SqliteDestinationTest, EveryValueKindMapsAsDocumented) {
  open();
  Batch b;
  static const uint8_t uuid[16] = {0x12, 0x3e, 0x45, 0x67, 0xe8, 0x9b, 0x12, 0xd3,
                                   0xa4, 0x56, 0x42, 0x66, 0x14, 0x17, 0x40, 0x00};
  Interval* iv = b.arena().allocate_array<Interval>(1);
  *iv = Interval{14, 3, 4 * 3600'000'000LL + 5 * 60'000'000LL + 6'500'000LL};
  Value items[] = {Value::int64(1), Value::string("two")};
  Value* arr = b.arena().allocate_array<Value>(2);
  arr[0] = items[0];
  arr[1] = items[1];
  const int64_t ts = 1709214300123456;  // 2024-02-29T13:45:00.123456Z
  Value after =
      b.object(26)
          .add("id", Value::int64(1))
          .add("null", Value::null())
          .add("bool_t", Value::boolean(true))
          .add("bool_f", Value::boolean(false))
          .add("i64", Value::int64(-9000000000))
          .add("u64_small", Value::uint64(42))
          .add("u64_big", Value::uint64(std::numeric_limits<uint64_t>::max()))
          .add("f64", Value::float64(1.25))
          .add("inf", Value::float64(std::numeric_limits<double>::infinity()))
          .add("dec", Value::decimal("-12.340"))
          .add("str", Value::string("héllo"))
          .add("empty_str", Value::string(""))
          .add("bytes", Value::bytes(std::string_view("\x00\x01\xff", 3)))
          .add("empty_bytes", Value::bytes(""))
          .add("date", Value::date(19782))
          .add("time", Value::time(13 * 3600'000'000LL + 45 * 60'000'000LL))
          .add("timetz", Value::timetz(13 * 3600'000'000LL + 45 * 60'000'000LL, 7200))
          .add("ts", Value::timestamp(ts))
          .add("tstz", Value::timestamptz(ts))
          .add("interval", Value::interval(iv))
          .add("uuid", Value::uuid(uuid))
          .add("json", Value::json(R"({"a": [1, 2]})"))
          .add("array", Value::array(arr, 2))
          .add("object",
               b.object(2).add("x", Value::int64(1)).add("y", Value::boolean(true)).build())
          .build();
  add(b, Operation::create, "kinds", id_key(b, 1), after);
  write_ok(b);

  Reader db(path_);
  std::map<std::string, std::string> type, stored;
  for (const auto& r : db.rows("SELECT name, type FROM pragma_table_info('kinds')")) {
    auto bar = r.find('|');
    type[r.substr(0, bar)] = r.substr(bar + 1);
  }
  std::vector<std::string> expected_types = {
      "id=INTEGER", "null=",          "bool_t=INTEGER", "bool_f=INTEGER",   "i64=INTEGER",
      "u64_small=", "u64_big=",       "f64=REAL",       "inf=REAL",         "dec=TEXT",
      "str=TEXT",   "empty_str=TEXT", "bytes=BLOB",     "empty_bytes=BLOB", "date=TEXT",
      "time=TEXT",  "timetz=TEXT",    "ts=TEXT",        "tstz=TEXT",        "interval=TEXT",
      "uuid=TEXT",  "json=TEXT",      "array=TEXT",     "object=TEXT"};
  for (const auto& e : expected_types) {
    auto eq = e.find('=');
    EXPECT_EQ(type[e.substr(0, eq)], e.substr(eq + 1)) << e;
  }

  auto value = [&](const std::string& col) {
    return db.one("SELECT typeof(\"" + col + "\") || ':' || quote(\"" + col + "\") FROM kinds");
  };
  EXPECT_EQ(value("null"), "null:NULL");
  EXPECT_EQ(value("bool_t"), "integer:1");
  EXPECT_EQ(value("bool_f"), "integer:0");
  EXPECT_EQ(value("i64"), "integer:-9000000000");
  EXPECT_EQ(value("u64_small"), "integer:42");
  EXPECT_EQ(value("u64_big"), "text:'18446744073709551615'");  // exact, not a REAL
  EXPECT_EQ(value("f64"), "real:1.25");
  EXPECT_EQ(value("inf"), "real:Inf");        // SQLite's REAL keeps infinities (NaN: below)
  EXPECT_EQ(value("dec"), "text:'-12.340'");  // exact text, trailing zero kept
  EXPECT_EQ(value("str"), "text:'héllo'");
  EXPECT_EQ(value("empty_str"), "text:''");
  EXPECT_EQ(value("bytes"), "blob:X'0001FF'");
  EXPECT_EQ(value("empty_bytes"), "blob:X''");
  EXPECT_EQ(value("date"), "text:'2024-02-29'");
  EXPECT_EQ(value("time"), "text:'13:45:00'");
  EXPECT_EQ(value("timetz"), "text:'13:45:00+02:00'");
  EXPECT_EQ(value("ts"), "text:'2024-02-29T13:45:00.123456'");
  EXPECT_EQ(value("tstz"), "text:'2024-02-29T13:45:00.123456Z'");
  EXPECT_EQ(value("interval"), "text:'P1Y2M3DT4H5M6.5S'");
  EXPECT_EQ(value("uuid"), "text:'123e4567-e89b-12d3-a456-426614174000'");
  EXPECT_EQ(value("json"), "text:'{\"a\": [1, 2]}'");
  EXPECT_EQ(value("array"), "text:'[1,\"two\"]'");
  EXPECT_EQ(value("object"), "text:'{\"x\":1,\"y\":true}'");
  // SQLite's date functions read the stored forms.
  EXPECT_EQ(db.one("SELECT date(ts), strftime('%s', tstz) FROM kinds"), "2024-02-29|1709214300");
}

// SQLite's REAL has no NaN: bound as a double it reads back as NULL. Never silently: the record is
// rejected (a data error naming the field and the setting; with on_error: dlq, write_isolating
// sets it apart and writes the others), or with unrepresentable_values: null the column is NULL.
Value with_x(Batch& b, int64_t id, double x) {
  return b.object(2).add("id", Value::int64(id)).add("x", Value::float64(x)).build();
}

TEST_F(SqliteDestinationTest, NanIsRejectedNamingTheFieldAndTheSetting) {
  open();
  Batch b;
  add(b, Operation::create, "f", id_key(b, 1), with_x(b, 1, 1.5));
  add(b, Operation::create, "f", id_key(b, 2), with_x(b, 2, std::nan("")));
  add(b, Operation::create, "f", id_key(b, 3),
      with_x(b, 3, -std::numeric_limits<double>::infinity()));
  Status s = write(b);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), Errc::data);
  EXPECT_NE(s.error().message().find("field \"x\": SQLite cannot store NaN"), std::string::npos)
      << s.error().message();
  EXPECT_NE(s.error().message().find("unrepresentable_values: null"), std::string::npos);
  EXPECT_NE(s.error().message().find("on_error: dlq"), std::string::npos);

  ASSERT_TRUE(dest_->isolates_rejected_records());
  std::vector<RejectedRecord> rejected;
  Status iso = dest_->write_isolating(b, false, rejected);
  ASSERT_TRUE(iso.ok()) << iso.error().message();
  ASSERT_EQ(rejected.size(), 1u);
  EXPECT_EQ(rejected[0].index, 1u);
  Reader db(path_);
  EXPECT_EQ(db.rows("SELECT id, typeof(x), x FROM f ORDER BY id"),
            (std::vector<std::string>{"1|real|1.5", "3|real|-Inf"}));
}

TEST_F(SqliteDestinationTest, UnrepresentableValuesNullWritesNullForNan) {
  SqliteDestinationOptions o;
  o.unrepresentable_values = "null";
  open(std::move(o));
  Batch b;
  add(b, Operation::create, "f", id_key(b, 1), with_x(b, 1, std::nan("")));
  add(b, Operation::create, "f", id_key(b, 2),
      with_x(b, 2, std::numeric_limits<double>::infinity()));
  write_ok(b);
  Reader db(path_);
  EXPECT_EQ(db.rows("SELECT id, typeof(x), x FROM f ORDER BY id"),
            (std::vector<std::string>{"1|null|NULL", "2|real|Inf"}));
}

TEST_F(SqliteDestinationTest, TwoTablesInOneBatch) {
  open();
  Batch b;
  add(b, Operation::create, "a", id_key(b, 1), person(b, 1, "in a", 1));
  add(b, Operation::create, "b", id_key(b, 1),
      b.object(2).add("id", Value::int64(1)).add("other", Value::boolean(true)).build());
  add(b, Operation::create, "a", id_key(b, 2), person(b, 2, "in a too", 2));
  add(b, Operation::remove, "b", id_key(b, 1));
  add(b, Operation::create, "b", id_key(b, 3),
      b.object(2).add("id", Value::int64(3)).add("other", Value::boolean(false)).build());
  write_ok(b);

  Reader db(path_);
  EXPECT_EQ(db.rows("SELECT id, name FROM a ORDER BY id"),
            (std::vector<std::string>{"1|in a", "2|in a too"}));
  EXPECT_EQ(db.rows("SELECT * FROM b"), (std::vector<std::string>{"3|0"}));
}

TEST_F(SqliteDestinationTest, TableTemplateFromMetadata) {
  SqliteDestinationOptions o;
  o.table = "{{schema}}.{{table}}_copy";
  open(o);
  Batch b;
  Record& r = b.add();
  r.op = Operation::create;
  r.metadata = b.object(2)
                   .add("schema", Value::string("public"))
                   .add("table", Value::string("employees"))
                   .build();
  r.key = id_key(b, 1);
  r.after = person(b, 1, "Ada", 1);
  Record& bare = b.add();  // no metadata at all: {{table}} is "records", {{schema}} empty
  bare.key = id_key(b, 2);
  bare.after = person(b, 2, "Alan", 2);
  write_ok(b);

  Reader db(path_);
  EXPECT_EQ(db.rows("SELECT name FROM \"public.employees_copy\""),
            (std::vector<std::string>{"Ada"}));
  EXPECT_EQ(db.rows("SELECT name FROM \".records_copy\""), (std::vector<std::string>{"Alan"}));
}

TEST_F(SqliteDestinationTest, RecordWithoutTableMetadataGoesToRecords) {
  open();
  Batch b;
  add(b, Operation::create, "", id_key(b, 1), person(b, 1, "Ada", 1));
  write_ok(b);
  Reader db(path_);
  EXPECT_EQ(db.rows("SELECT name FROM records"), (std::vector<std::string>{"Ada"}));
}

TEST_F(SqliteDestinationTest, MalformedTemplateIsRejected) {
  SqliteDestinationOptions o;
  o.path = path_.string();
  o.table = "cdc_{{table";
  auto d = make_sqlite_destination(o);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().code(), Errc::invalid_argument);
  EXPECT_NE(d.error().message().find("cdc_{{table"), std::string::npos) << d.error().message();
}

TEST_F(SqliteDestinationTest, KeylessRecordFailsTheBatchClearlyAndRollsItBack) {
  open();
  Batch b;
  add(b, Operation::create, "employees", id_key(b, 1), person(b, 1, "Ada", 1));
  add(b, Operation::create, "employees", Value(), person(b, 2, "No Key", 2));
  Status s = write(b);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), Errc::data);
  EXPECT_FALSE(s.error().retriable());
  const std::string& m = s.error().message();
  EXPECT_NE(m.find("\"employees\""), std::string::npos) << m;
  EXPECT_NE(m.find("no key"), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;

  // The whole batch rolled back, including the CREATE TABLE.
  {
    Reader db(path_);
    EXPECT_EQ(db.one("SELECT count(*) FROM sqlite_master WHERE name = 'employees'"), "0");
  }
  // The destination recovers: its cache forgot the rolled-back table.
  Batch ok;
  add(ok, Operation::create, "employees", id_key(ok, 1), person(ok, 1, "Ada", 1));
  write_ok(ok);
  Reader db(path_);
  EXPECT_EQ(db.rows("SELECT id, name FROM employees"), (std::vector<std::string>{"1|Ada"}));
}

TEST_F(SqliteDestinationTest, NullKeyValueIsADataErrorNamingTheField) {
  open();
  Batch b;
  add(b, Operation::create, "t", b.object(1).add("id", Value::null()).build(),
      b.object(1).add("v", Value::int64(1)).build());
  Status s = write(b);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), Errc::data);
  EXPECT_NE(s.error().message().find("\"id\" is null"), std::string::npos) << s.error().message();
}

TEST_F(SqliteDestinationTest, ExistingTableWithAnotherPrimaryKeyIsAClearDataError) {
  {
    fs::create_directories(path_.parent_path());
    Reader db(path_);
    ASSERT_EQ(
        sqlite3_exec(db.get(), "CREATE TABLE users(email TEXT PRIMARY KEY, id INTEGER, name TEXT)",
                     nullptr, nullptr, nullptr),
        SQLITE_OK);
  }
  open();
  Batch b;
  add(b, Operation::create, "users", id_key(b, 1), person(b, 1, "Ada", 1));
  Status s = write(b);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), Errc::data);
  EXPECT_NE(s.error().message().find("PRIMARY KEY"), std::string::npos) << s.error().message();
  EXPECT_NE(s.error().message().find("\"users\""), std::string::npos) << s.error().message();
}

TEST_F(SqliteDestinationTest, ConstraintViolationIsADataErrorNamingTableAndKey) {
  {
    fs::create_directories(path_.parent_path());
    Reader db(path_);
    ASSERT_EQ(
        sqlite3_exec(db.get(), "CREATE TABLE users(id INTEGER PRIMARY KEY, email TEXT UNIQUE)",
                     nullptr, nullptr, nullptr),
        SQLITE_OK);
  }
  open();
  Batch b;
  add(b, Operation::create, "users", id_key(b, 1),
      b.object(2).add("id", Value::int64(1)).add("email", Value::string("a@x")).build());
  add(b, Operation::create, "users", id_key(b, 2),
      b.object(2).add("id", Value::int64(2)).add("email", Value::string("a@x")).build());
  Status s = write(b);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), Errc::data);
  const std::string& m = s.error().message();
  EXPECT_NE(m.find("UNIQUE"), std::string::npos) << m;
  EXPECT_NE(m.find("\"users\""), std::string::npos) << m;
  EXPECT_NE(m.find("\"id\":2"), std::string::npos) << m;
  Reader db(path_);
  EXPECT_EQ(db.one("SELECT count(*) FROM users"), "0");  // rolled back
}

TEST_F(SqliteDestinationTest, LockedDatabaseIsARetriableError) {
  SqliteDestinationOptions o;
  o.busy_timeout = std::chrono::milliseconds(20);
  open(o);
  Batch b;
  add(b, Operation::create, "t", id_key(b, 1), person(b, 1, "Ada", 1));
  {
    Reader other(path_);
    ASSERT_EQ(sqlite3_exec(other.get(), "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
    Status s = write(b);
    ASSERT_FALSE(s.ok());
    EXPECT_TRUE(s.error().retriable()) << s.error().message();
    EXPECT_EQ(s.error().code(), Errc::conflict);
    sqlite3_exec(other.get(), "ROLLBACK", nullptr, nullptr, nullptr);
  }
  write_ok(b);  // the retry succeeds once the lock is gone
  Reader db(path_);
  EXPECT_EQ(db.one("SELECT name FROM t"), "Ada");
}

TEST_F(SqliteDestinationTest, UpdateThatChangesTheKeyMovesTheRow) {
  open();
  Batch b1;
  add(b1, Operation::create, "t", id_key(b1, 1), person(b1, 1, "Ada", 1));
  add(b1, Operation::create, "t", id_key(b1, 5), person(b1, 5, "Grace", 5));
  write_ok(b1);
  Batch b2;
  // record.key carries the old key, `after` the new one.
  add(b2, Operation::update, "t", id_key(b2, 1), person(b2, 2, "Ada", 1));
  // record.key carries the new key, `before` the old one.
  Record& r = add(b2, Operation::update, "t", id_key(b2, 6), person(b2, 6, "Grace", 5));
  r.before = person(b2, 5, "Grace", 5);
  write_ok(b2);
  write_ok(b2);  // replay
  Reader db(path_);
  EXPECT_EQ(db.rows("SELECT id, name FROM t ORDER BY id"),
            (std::vector<std::string>{"2|Ada", "6|Grace"}));
}

TEST_F(SqliteDestinationTest, ManyFieldShapesOnOneTable) {
  open();
  // Every subset of four optional fields (as with TOAST-omitted columns), twice.
  for (int round = 0; round < 2; ++round) {
    Batch b;
    for (int mask = 0; mask < 16; ++mask) {
      auto o = b.object(5);
      o.add("id", Value::int64(mask));
      for (int f = 0; f < 4; ++f)
        o.add(b.copy("f" + std::to_string(f)),
              (mask >> f) & 1 ? Value::int64(round * 100 + f) : Value());
      add(b, Operation::update, "t", id_key(b, mask), o.build());
    }
    write_ok(b);
  }
  Reader db(path_);
  EXPECT_EQ(db.one("SELECT f0, f1, f2, f3 FROM t WHERE id = 15"), "100|101|102|103");
  EXPECT_EQ(db.one("SELECT f0, f1, f2, f3 FROM t WHERE id = 5"), "100|NULL|102|NULL");
  EXPECT_EQ(db.one("SELECT count(*) FROM t"), "16");
}

TEST_F(SqliteDestinationTest, EmptyBatchCompletes) {
  open();
  Batch b;
  write_ok(b);
}

TEST_F(SqliteDestinationTest, SynchronousSettingIsApplied) {
  SqliteDestinationOptions o;
  o.synchronous = "full";
  o.journal_mode = "delete";
  open(o);
  Batch b;
  add(b, Operation::create, "t", id_key(b, 1), person(b, 1, "Ada", 1));
  write_ok(b);
  Reader db(path_);
  EXPECT_EQ(db.one("PRAGMA journal_mode"), "delete");
}

// The options struct keeps initializers for code that builds it directly; they must be the
// settings table's defaults.
TEST(SqliteSettings, DefaultsMatchTheOptionsStruct) {
  Settings s;
  s.set("path", std::string("x.db"));
  auto bound = sqlite_destination_options(s);
  ASSERT_TRUE(bound.ok()) << bound.error().message();
  SqliteDestinationOptions direct;
  EXPECT_EQ(bound->table, direct.table);
  EXPECT_EQ(bound->synchronous, direct.synchronous);
  EXPECT_EQ(bound->journal_mode, direct.journal_mode);
  EXPECT_EQ(bound->busy_timeout, direct.busy_timeout);
  EXPECT_EQ(bound->checkpoint_in_destination, direct.checkpoint_in_destination);
  EXPECT_EQ(bound->unrepresentable_values, direct.unrepresentable_values);
}

TEST(SqliteConnectorTest, RegisteredWithItsSettingsTable) {
  const ConnectorSpec* spec = Registry::builtin().connector("sqlite");
  ASSERT_NE(spec, nullptr);
  ASSERT_NE(spec->make_destination, nullptr);
  EXPECT_EQ(spec->make_source, nullptr);
  for (const SettingSpec& s : spec->destination_settings) EXPECT_FALSE(s.doc.empty()) << s.name;

  Settings missing;
  EXPECT_TRUE(
      settings_from_text(spec->destination_settings, {}, &missing).has_value());  // path required
  Settings bad;
  EXPECT_TRUE(settings_from_text(spec->destination_settings,
                                 {{"path", "x.db"}, {"synchronous", "sometimes"}}, &bad)
                  .has_value());

  fs::path dir = fs::temp_directory_path() / ("sluice-sqlite-conn-" + std::to_string(::getpid()));
  Settings settings;
  auto err = settings_from_text(
      spec->destination_settings,
      {{"path", (dir / "x.db").string()}, {"table", "copy_{{table}}"}, {"synchronous", "off"}},
      &settings);
  ASSERT_FALSE(err.has_value()) << *err;
  auto options = sqlite_destination_options(settings);
  ASSERT_TRUE(options.ok());
  EXPECT_EQ(options->table, "copy_{{table}}");
  EXPECT_EQ(options->synchronous, "off");
  EXPECT_EQ(options->journal_mode, "wal");
  EXPECT_EQ(options->busy_timeout, std::chrono::milliseconds(5000));
  auto dest = spec->make_destination(settings);
  ASSERT_TRUE(dest.ok()) << dest.error().message();
  ASSERT_TRUE((*dest)->open(ConnectorContext{}).ok());
  Batch b;
  Record& r = b.add();
  r.metadata = b.object(1).add("table", Value::string("employees")).build();
  r.key = b.object(1).add("id", Value::int64(1)).build();
  r.after = r.key;
  bool done = false;
  (*dest)->write(b, [&](Status s) { done = s.ok(); });
  EXPECT_TRUE(done);
  (*dest)->close();
  {
    Reader db(dir / "x.db");
    EXPECT_EQ(db.one("SELECT id FROM copy_employees"), "1");
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sluice
