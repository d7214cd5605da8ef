// Every type the postgres source decodes, through the binary into the mysql (MariaDB) and sqlite
// destinations, snapshot then CDC (inserts, updates, deletes, nulls), each value compared with the
// exact text form the destination's documented mapping gives (mysql_destination.h,
// sqlite_value_mapping.h). And on_error against real servers: a row the destination rejects goes
// to the dead-letter queue with its error while the rest lands (dlq), or stops the pipeline with
// nothing of the failing batch written (stop).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <string>
#include <vector>

#include "integration/pg_harness.h"
#include "sluice/json.h"
#include "support/pipeline_file.h"
#include "support/sql.h"

namespace sluice::pgtest {
namespace {

using e2e::Process;

// ── MariaDB: a database of its own per test ────────────────────────────────

// On UTC, so DATETIME/TIMESTAMP values read back as the UTC wall time.
class MyTestDb : public test::MysqlDatabase {
 public:
  explicit MyTestDb(const std::string& name) : MysqlDatabase("sluice_t_" + name) {
    ok_ = MysqlDatabase::ok() && sql().exec("SET SESSION time_zone='+00:00'");
  }
  bool ok() const { return ok_; }

 private:
  bool ok_ = false;
};

// ── the types table ─────────────────────────────────────────────────────────

// A column of the source table and its values in three value sets A, B and C: the PostgreSQL
// literal, and the exact text read back at MariaDB and SQLite (see the readers below).
struct Val {
  std::string pg;
  std::optional<std::string> maria, sqlite;
};
struct Col {
  std::string name, pg_type;
  Val a, b, c;
};

using S = std::optional<std::string>;
const S NUL = std::nullopt;

// SQLite values read as "<storage class>:<value>": int:42, real:<shortest round-trip>, text:...,
// blob:<HEX>; NULL as NULL. MariaDB values as the server's text (bytea through HEX()).
const std::vector<Col>& columns() {
  static const std::vector<Col> cols = {
      {"i2",
       "smallint",
       {"-32768", "-32768", "int:-32768"},
       {"32767", "32767", "int:32767"},
       {"0", "0", "int:0"}},
      {"i4",
       "integer",
       {"-2147483648", "-2147483648", "int:-2147483648"},
       {"2147483647", "2147483647", "int:2147483647"},
       {"0", "0", "int:0"}},
      {"i8",
       "bigint",
       {"-9223372036854775808", "-9223372036854775808", "int:-9223372036854775808"},
       {"9223372036854775807", "9223372036854775807", "int:9223372036854775807"},
       {"0", "0", "int:0"}},
      // Fits DECIMAL(65,30) (first value): MariaDB pads the fraction to 30 digits; SQLite keeps
      // TEXT.
      {"num",
       "numeric(30,10)",
       {"'-12345678901234567890.1234567890'",
        "-12345678901234567890.123456789000000000000000000000",
        "text:-12345678901234567890.1234567890"},
       {"'0.5'", "0.500000000000000000000000000000", "text:0.5000000000"},
       {"'99999999999999999999.9999999999'", "99999999999999999999.999999999900000000000000000000",
        "text:99999999999999999999.9999999999"}},
      // Does not fit DECIMAL(65,30) (first value): LONGTEXT holding the exact text, NaN included.
      {"numbig",
       "numeric",
       {"'-123456789012345678901234567890123456789012345678901234567890.000000000000000000000000000001'",
        "-123456789012345678901234567890123456789012345678901234567890.000000000000000000000000000001",
        "text:-123456789012345678901234567890123456789012345678901234567890.000000000000000000000000000001"},
       {"'NaN'", "NaN", "text:NaN"},
       {"'-0.000000000000000000000000000000000000000000000000001'",
        "-0.000000000000000000000000000000000000000000000000001",
        "text:-0.000000000000000000000000000000000000000000000000001"}},
      // float64: MariaDB cannot store NaN/±Infinity, SQLite NaN: NULL here because the test's
      // destinations ask for it (unrepresentable_values: null; by default the record is
      // rejected); SQLite stores ±Inf as REAL.
      {"f4",
       "real",
       {"1.5", "1.5", "real:1.5"},
       {"'-Infinity'", NUL, "real:-inf"},
       {"-0.25", "-0.25", "real:-0.25"}},
      {"f8",
       "double precision",
       {"0.1", "0.1", "real:0.1"},
       {"'NaN'", NUL, NUL},
       {"'Infinity'", NUL, "real:inf"}},
      {"t",
       "text",
       {"E'tab\\there\\nnew line \\\\ back''quote \"dq\" \xf0\x9f\xa6\x80'",
        "tab\there\nnew line \\ back'quote \"dq\" \xf0\x9f\xa6\x80",
        "text:tab\there\nnew line \\ back'quote \"dq\" \xf0\x9f\xa6\x80"},
       {"''", "", "text:"},
       {"'plain'", "plain", "text:plain"}},
      {"vc",
       "varchar(20)",
       {"'h\xc3\xa9llo w\xc3\xb6rld'", "h\xc3\xa9llo w\xc3\xb6rld",
        "text:h\xc3\xa9llo w\xc3\xb6rld"},
       {"''", "", "text:"},
       {"'x'", "x", "text:x"}},
      // char(n) arrives blank-padded.
      {"ch",
       "char(5)",
       {"'ab'", "ab   ", "text:ab   "},
       {"''", "     ", "text:     "},
       {"'abcde'", "abcde", "text:abcde"}},
      {"by",
       "bytea",
       {"'\\x00ff0a5c'", "00FF0A5C", "blob:00FF0A5C"},
       {"'\\x'", "", "blob:"},
       {"'\\xdeadbeef'", "DEADBEEF", "blob:DEADBEEF"}},
      {"b", "boolean", {"false", "0", "int:0"}, {"true", "1", "int:1"}, {"true", "1", "int:1"}},
      {"d",
       "date",
       {"'2024-02-29'", "2024-02-29", "text:2024-02-29"},
       {"'1970-01-01'", "1970-01-01", "text:1970-01-01"},
       {"'9999-12-31'", "9999-12-31", "text:9999-12-31"}},
      // TIME(6) at MariaDB; canonical text (fraction only when non-zero) at SQLite.
      {"tm",
       "time",
       {"'23:59:59.999999'", "23:59:59.999999", "text:23:59:59.999999"},
       {"'00:00:00'", "00:00:00.000000", "text:00:00:00"},
       {"'12:00:00.5'", "12:00:00.500000", "text:12:00:00.5"}},
      {"ttz",
       "timetz",
       {"'13:45:00.5+05:30'", "13:45:00.5+05:30", "text:13:45:00.5+05:30"},
       {"'00:00:00-08'", "00:00:00-08:00", "text:00:00:00-08:00"},
       {"'12:00:00+00'", "12:00:00+00:00", "text:12:00:00+00:00"}},
      {"ts",
       "timestamp",
       {"'2024-02-29 13:45:00.123456'", "2024-02-29 13:45:00.123456",
        "text:2024-02-29T13:45:00.123456"},
       {"'1970-01-01 00:00:00'", "1970-01-01 00:00:00.000000", "text:1970-01-01T00:00:00"},
       {"'1999-12-31 23:59:59.5'", "1999-12-31 23:59:59.500000", "text:1999-12-31T23:59:59.5"}},
      // timestamptz: the UTC wall time.
      {"tstz",
       "timestamptz",
       {"'2024-02-29 13:45:00.123456+02'", "2024-02-29 11:45:00.123456",
        "text:2024-02-29T11:45:00.123456Z"},
       {"'1970-01-01 00:00:00+00'", "1970-01-01 00:00:00.000000", "text:1970-01-01T00:00:00Z"},
       {"'2038-01-19 03:14:08.000001+00'", "2038-01-19 03:14:08.000001",
        "text:2038-01-19T03:14:08.000001Z"}},
      {"iv",
       "interval",
       {"'-1 years -2 mons +3 days -04:05:06.5'", "P-1Y-2M3DT-4H-5M-6.5S",
        "text:P-1Y-2M3DT-4H-5M-6.5S"},
       {"'0'", "PT0S", "text:PT0S"},
       {"'1 year 2 mons 3 days 04:05:06.000001'", "P1Y2M3DT4H5M6.000001S",
        "text:P1Y2M3DT4H5M6.000001S"}},
      {"u",
       "uuid",
       {"'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
        "text:a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
       {"'00000000-0000-0000-0000-000000000000'", "00000000-0000-0000-0000-000000000000",
        "text:00000000-0000-0000-0000-000000000000"},
       {"'ffffffff-ffff-ffff-ffff-ffffffffffff'", "ffffffff-ffff-ffff-ffff-ffffffffffff",
        "text:ffffffff-ffff-ffff-ffff-ffffffffffff"}},
      // json: the document as received; jsonb: as PostgreSQL normalizes it.
      {"j",
       "json",
       {"'{\"a\": [1, 2.5, null], \"b\": \"x\\\"y\"}'",
        "{\"a\": [1, 2.5, null], \"b\": \"x\\\"y\"}",
        "text:{\"a\": [1, 2.5, null], \"b\": \"x\\\"y\"}"},
       {"'[]'", "[]", "text:[]"},
       {"'null'", "null", "text:null"}},
      {"jb",
       "jsonb",
       {"'{\"b\": 1, \"a\": [true, null]}'", "{\"a\": [true, null], \"b\": 1}",
        "text:{\"a\": [true, null], \"b\": 1}"},
       {"'{}'", "{}", "text:{}"},
       {"'[1,\"two\",{\"three\":3.0}]'", "[1, \"two\", {\"three\": 3.0}]",
        "text:[1, \"two\", {\"three\": 3.0}]"}},
      // Arrays: JSON.
      {"ai",
       "int[]",
       {"'{1,NULL,-3}'", "[1,null,-3]", "text:[1,null,-3]"},
       {"'{}'", "[]", "text:[]"},
       {"'{{1,2},{3,4}}'", "[[1,2],[3,4]]", "text:[[1,2],[3,4]]"}},
      {"at",
       "text[]",
       {"ARRAY['a\"b', NULL, 'x,y', 'back\\slash', '']",
        "[\"a\\\"b\",null,\"x,y\",\"back\\\\slash\",\"\"]",
        "text:[\"a\\\"b\",null,\"x,y\",\"back\\\\slash\",\"\"]"},
       {"'{}'", "[]", "text:[]"},
       {"ARRAY['NULL', ' sp ']", "[\"NULL\",\" sp \"]", "text:[\"NULL\",\" sp \"]"}},
      // An enum arrives as its label (string), a domain as its base type.
      {"m",
       "mood",
       {"'happy'", "happy", "text:happy"},
       {"'sad'", "sad", "text:sad"},
       {"'ok'", "ok", "text:ok"}},
      {"dom",
       "posint",
       {"42", "42", "int:42"},
       {"1", "1", "int:1"},
       {"2147483647", "2147483647", "int:2147483647"}},
  };
  return cols;
}

constexpr const char* kTypeDdl =
    "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy'); "
    "CREATE DOMAIN posint AS integer CHECK (VALUE > 0); ";

std::string create_table_sql() {
  std::string s = std::string(kTypeDdl) + "CREATE TABLE types (id int PRIMARY KEY";
  for (const Col& c : columns()) s += ", " + c.name + " " + c.pg_type;
  return s + ")";
}

enum class Set { a, b, c, null };

const Val* val_of(const Col& c, Set s) {
  switch (s) {
    case Set::a: return &c.a;
    case Set::b: return &c.b;
    case Set::c: return &c.c;
    case Set::null: return nullptr;
  }
  return nullptr;
}

std::string insert_sql(int id, Set s) {
  std::string names = "id", values = std::to_string(id);
  for (const Col& c : columns()) {
    names += ", " + c.name;
    const Val* v = val_of(c, s);
    values += ", " + (v ? v->pg : std::string("NULL"));
  }
  return "INSERT INTO types (" + names + ") VALUES (" + values + ")";
}

std::string update_sql(int id, Set s) {
  std::string set;
  for (const Col& c : columns()) {
    const Val* v = val_of(c, s);
    set += (set.empty() ? "" : ", ") + c.name + " = " + (v ? v->pg : std::string("NULL"));
  }
  return "UPDATE types SET " + set + " WHERE id = " + std::to_string(id);
}

Row expected_row(int id, Set s, bool maria) {
  Row r{maria ? S(std::to_string(id)) : S("int:" + std::to_string(id))};
  for (const Col& c : columns()) {
    const Val* v = val_of(c, s);
    r.push_back(v ? (maria ? v->maria : v->sqlite) : NUL);
  }
  return r;
}

// Snapshot: 1 = A (the first record: it decides the destination's column types), 2 = B,
// 3 = all NULL, 6 = C. After the snapshot: insert 4 = B, insert 5 = A then set all NULL, update
// 1 to C and 2 to A, delete 6.
constexpr const char* kFinalIds = "1 = C, 2 = A, 3 = NULL, 4 = B, 5 = NULL";

std::vector<Row> expected_rows(bool maria) {
  return {expected_row(1, Set::c, maria), expected_row(2, Set::a, maria),
          expected_row(3, Set::null, maria), expected_row(4, Set::b, maria),
          expected_row(5, Set::null, maria)};
}

bool load_snapshot(Conn& pg) {
  return pg.exec(create_table_sql()) && pg.exec(insert_sql(1, Set::a)) &&
         pg.exec(insert_sql(2, Set::b)) && pg.exec(insert_sql(3, Set::null)) &&
         pg.exec(insert_sql(6, Set::c));
}

bool apply_changes(Conn& pg) {
  return pg.exec(insert_sql(4, Set::b)) && pg.exec(insert_sql(5, Set::a)) &&
         pg.exec(update_sql(5, Set::null)) && pg.exec(update_sql(1, Set::c)) &&
         pg.exec(update_sql(2, Set::a)) && pg.exec("DELETE FROM types WHERE id = 6");
}

std::string pipeline_yaml(const std::string& id, const std::string& pg_url,
                          const test::ConnectorYaml& destination) {
  test::PipelineFile f;
  test::PipelineYaml& p = f.pipeline(id);
  p.source("postgres").set("url", pg_url).set("tables", test::Yaml::strings({"public.types"}));
  p.destination_ = destination;
  p.max_records(100).linger_ms(20);
  return f.yaml();
}

std::string show(const std::optional<std::string>& v) {
  return v ? "'" + *v + "'" : std::string("NULL");
}

// Reports every differing value (column by column) of `got` against `want`.
void expect_rows(const std::vector<Row>& got, const std::vector<Row>& want,
                 const std::string& where) {
  EXPECT_EQ(got.size(), want.size()) << where << ": rows (want ids " << kFinalIds << ")";
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    if (got[i].size() != want[i].size()) {
      ADD_FAILURE() << where << ": row " << i << " has " << got[i].size() << " columns, want "
                    << want[i].size();
      continue;
    }
    for (size_t j = 0; j < want[i].size(); ++j) {
      const std::string name = j == 0 ? "id" : columns()[j - 1].name;
      EXPECT_EQ(got[i][j], want[i][j])
          << where << ": id " << show(want[i][0]) << " column " << name << ": got "
          << show(got[i][j]) << ", want " << show(want[i][j]);
    }
  }
}

// Runs the pipeline: snapshot, then (once in CDC) the changes, until `read()` equals `want`.
void run_round_trip(TestDb& src, const std::string& pipeline_id,
                    const test::ConnectorYaml& destination_yaml,
                    const std::function<std::vector<Row>()>& read, const std::vector<Row>& want,
                    const std::string& where) {
  ASSERT_TRUE(load_snapshot(src.sql()));
  auto dir = e2e::make_temp_dir(pipeline_id);
  e2e::write_file(dir / "p.yaml", pipeline_yaml(pipeline_id, src.url(), destination_yaml));
  Process p({"run", "p.yaml"}, dir);
  ASSERT_TRUE(wait_for_checkpoint(p, dir, pipeline_id, [](const std::string& c) {
    return starts_with(c, "cdc ");
  })) << p.stderr_text();
  ASSERT_TRUE(apply_changes(src.sql()));
  const bool equal = wait_until([&] { return read() == want; }, 60s, 200ms);
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  EXPECT_TRUE(equal) << where << " did not converge; stderr:\n" << p.stderr_text();
  expect_rows(read(), want, where);
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir);
}

std::string select_list(const std::string& q, bool maria) {
  std::string s = q + "id" + q;
  for (const Col& c : columns())
    s += ", " + (maria && c.name == "by" ? "HEX(`by`)" : q + c.name + q);
  return s;
}

TEST(PostgresToMariadb, EveryTypeRoundTrips) {
  TestDb src("rt_maria_src");
  MyTestDb dst("rt_maria_dst");
  ASSERT_TRUE(src.ok());
  ASSERT_TRUE(dst.ok());
  const std::string sql = "SELECT " + select_list("`", true) + " FROM types ORDER BY id";
  run_round_trip(
      src, "rt_maria",
      test::ConnectorYaml{"mysql", {}}.set("url", dst.url()).set("unrepresentable_values", "null"),
      [&] { return dst.sql().query(sql, true); }, expected_rows(true), "MariaDB");
  // The column types the documented mapping chooses from the first values.
  auto types = dst.sql().query(
      "SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND "
      "TABLE_NAME = 'types' ORDER BY ORDINAL_POSITION");
  std::map<std::string, std::string> type_of;
  for (const Row& r : types) type_of[*r[0]] = *r[1];
  EXPECT_EQ(type_of["i2"], "bigint(20)");
  EXPECT_EQ(type_of["num"], "decimal(65,30)");
  EXPECT_EQ(type_of["numbig"], "longtext");
  EXPECT_EQ(type_of["f8"], "double");
  EXPECT_EQ(type_of["by"], "longblob");
  EXPECT_EQ(type_of["b"], "tinyint(1)");
  EXPECT_EQ(type_of["tm"], "time(6)");
  EXPECT_EQ(type_of["ts"], "datetime(6)");
  EXPECT_EQ(type_of["tstz"], "datetime(6)");
  EXPECT_EQ(type_of["ttz"], "varchar(32)");
  EXPECT_EQ(type_of["iv"], "varchar(255)");
  EXPECT_EQ(type_of["u"], "char(36)");
  EXPECT_EQ(type_of["m"], "longtext");
  EXPECT_EQ(type_of["dom"], "bigint(20)");
}

// SQLite values as "<storage class>:<value>" (see columns()).
std::vector<Row> read_sqlite(const std::filesystem::path& path, const std::string& sql) {
  std::vector<Row> out;
  if (!std::filesystem::exists(path)) return out;
  try {
    e2e::Db db(path);
    db.query(sql, [&](sqlite3_stmt* st) {
      Row r;
      for (int i = 0; i < sqlite3_column_count(st); ++i) {
        switch (sqlite3_column_type(st, i)) {
          case SQLITE_NULL: r.push_back(NUL); break;
          case SQLITE_INTEGER:
            r.push_back("int:" + std::to_string(sqlite3_column_int64(st, i)));
            break;
          case SQLITE_FLOAT: {
            char buf[64];
            auto res = std::to_chars(buf, buf + sizeof buf, sqlite3_column_double(st, i));
            r.push_back("real:" + std::string(buf, res.ptr));
            break;
          }
          case SQLITE_TEXT: r.push_back("text:" + e2e::column_text(st, i)); break;
          default: {
            const auto* p = static_cast<const unsigned char*>(sqlite3_column_blob(st, i));
            const int n = sqlite3_column_bytes(st, i);
            std::string hex = "blob:";
            static const char* digits = "0123456789ABCDEF";
            for (int k = 0; k < n; ++k) {
              hex += digits[p[k] >> 4];
              hex += digits[p[k] & 15];
            }
            r.push_back(hex);
          }
        }
      }
      out.push_back(std::move(r));
    });
  } catch (const std::exception&) {
    out.clear();
  }
  return out;
}

TEST(PostgresToSqlite, EveryTypeRoundTrips) {
  TestDb src("rt_sqlite_src");
  ASSERT_TRUE(src.ok());
  auto out_dir = e2e::make_temp_dir("rt-sqlite-out");
  const auto path = out_dir / "out.db";
  const std::string sql = "SELECT " + select_list("\"", false) + " FROM types ORDER BY id";
  run_round_trip(
      src, "rt_sqlite",
      test::ConnectorYaml{"sqlite", {}}
          .set("path", path.string())
          .set("unrepresentable_values", "null"),
      [&] { return read_sqlite(path, sql); }, expected_rows(false), "SQLite");
  std::filesystem::remove_all(out_dir);
}

// ── on_error against real servers ───────────────────────────────────────────

// 20 create records for table items: {id, v}; v = `bad` for the ids in `bad_ids`, else id.
std::string items_lines(const std::vector<int>& bad_ids, int bad) {
  std::string out;
  for (int i = 1; i <= 20; ++i) {
    const bool is_bad = std::find(bad_ids.begin(), bad_ids.end(), i) != bad_ids.end();
    out += "{\"operation\":\"create\",\"metadata\":{\"table\":\"items\"},\"key\":{\"id\":" +
           std::to_string(i) + "},\"payload\":{\"after\":{\"id\":" + std::to_string(i) +
           ",\"v\":" + std::to_string(is_bad ? bad : i) + "}}}\n";
  }
  return out;
}

std::string file_pipeline(const test::ConnectorYaml& destination, const std::string& on_error) {
  test::PipelineFile f;
  f.checkpoints_path = "cp.db";
  test::PipelineYaml& p = f.pipeline("dl");
  p.source("file").set("path", "in.jsonl");
  p.destination_ = destination;
  p.max_records(8);
  p.on_error = on_error;
  if (on_error == "dlq") p.dlq("file").set("path", "dead.jsonl");
  return f.yaml();
}

// Runs 20 records (5 and 13 rejected) with on_error: dlq; checks the dead-letter file.
void expect_dead_letters(const test::ConnectorYaml& destination, int bad,
                         const std::vector<std::string>& error_mentions,
                         const std::function<std::vector<Row>()>& ids_landed) {
  auto dir = e2e::make_temp_dir("rt-dlq");
  e2e::write_file(dir / "in.jsonl", items_lines({5, 13}, bad));
  e2e::write_file(dir / "p.yaml", file_pipeline(destination, "dlq"));
  ASSERT_EQ(e2e::run_sluice({"run", "p.yaml"}, dir), 0) << e2e::read_file(dir / "stderr.txt");
  std::vector<Row> want;
  for (int i = 1; i <= 20; ++i)
    if (i != 5 && i != 13) want.push_back({std::to_string(i), std::to_string(i)});
  EXPECT_EQ(ids_landed(), want);
  const std::string dead = e2e::read_file(dir / "dead.jsonl");
  EXPECT_EQ(std::count(dead.begin(), dead.end(), '\n'), 2) << dead;
  std::vector<int64_t> dead_ids;
  size_t start = 0;
  while (start < dead.size()) {
    size_t nl = dead.find('\n', start);
    if (nl == std::string::npos) nl = dead.size();
    Batch b;
    auto st = decode_record_json(dead.substr(start, nl - start), b);
    start = nl + 1;
    ASSERT_TRUE(st.ok()) << dead;
    const Record& r = b.records().front();
    dead_ids.push_back(r.after.find("id")->as_int64());
    EXPECT_EQ(r.after.find("v")->as_int64(), bad);
    const std::string err(r.meta("sluice.error"));
    for (const std::string& m : error_mentions)
      EXPECT_NE(err.find(m), std::string::npos) << m << " not in: " << err;
    EXPECT_EQ(r.meta("sluice.pipeline"), "dl");
  }
  EXPECT_EQ(dead_ids, (std::vector<int64_t>{5, 13}));
  EXPECT_NE(e2e::read_file(dir / "stderr.txt").find("2 to the dead-letter queue"),
            std::string::npos)
      << e2e::read_file(dir / "stderr.txt");
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir);
}

// Record 5 rejected with on_error: stop: exit 1, the error on stderr, nothing of the first batch
// (records 1..8) written, no checkpoint.
void expect_stop(const test::ConnectorYaml& destination, int bad, const std::string& error_mention,
                 const std::function<std::vector<Row>()>& ids_landed) {
  auto dir = e2e::make_temp_dir("rt-stop");
  e2e::write_file(dir / "in.jsonl", items_lines({5}, bad));
  e2e::write_file(dir / "p.yaml", file_pipeline(destination, "stop"));
  EXPECT_EQ(e2e::run_sluice({"run", "p.yaml"}, dir), 1);
  const std::string err = e2e::read_file(dir / "stderr.txt");
  EXPECT_NE(err.find(error_mention), std::string::npos) << err;
  for (const Row& r : ids_landed())
    EXPECT_GT(std::stoi(*r[0]), 8) << "a record of the failing batch landed";
  e2e::Db cp(dir / "cp.db");
  EXPECT_EQ(cp.scalar("SELECT count(*) FROM checkpoints"), 0);
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir);
}

test::ConnectorYaml pg_destination(const std::string& url) {
  return test::ConnectorYaml{"postgres", {}}.set("url", url);
}
test::ConnectorYaml my_destination(const std::string& url) {
  return test::ConnectorYaml{"mysql", {}}.set("url", url);
}

TEST(PostgresDestination, RejectedRowGoesToTheDeadLetterQueue) {
  TestDb db("rt_pg_dlq");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE items (id int PRIMARY KEY, v int CHECK (v >= 0))"));
  expect_dead_letters(pg_destination(db.url()), -1, {"items", "items_v_check", "23514"}, [&] {
    return db.sql().query("SELECT id::text, v::text FROM items ORDER BY items.id");
  });
}

TEST(PostgresDestination, RejectedRowWithOnErrorStopExitsOneAndLandsNothingOfItsBatch) {
  TestDb db("rt_pg_stop");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE items (id int PRIMARY KEY, v int CHECK (v >= 0))"));
  expect_stop(pg_destination(db.url()), -1, "items_v_check", [&] {
    return db.sql().query("SELECT id::text, v::text FROM items ORDER BY items.id");
  });
}

TEST(MysqlDestination, RejectedRowGoesToTheDeadLetterQueue) {
  MyTestDb db("rt_my_dlq");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE items (id BIGINT PRIMARY KEY, v TINYINT) ENGINE=InnoDB"));
  expect_dead_letters(my_destination(db.url()), 1000, {"items", "Out of range", "(1264)"},
                      [&] { return db.sql().query("SELECT id, v FROM items ORDER BY id"); });
}

TEST(MysqlDestination, RejectedRowWithOnErrorStopExitsOneAndLandsNothingOfItsBatch) {
  MyTestDb db("rt_my_stop");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec("CREATE TABLE items (id BIGINT PRIMARY KEY, v TINYINT) ENGINE=InnoDB"));
  expect_stop(my_destination(db.url()), 1000, "Out of range",
              [&] { return db.sql().query("SELECT id, v FROM items ORDER BY id"); });
}

}  // namespace
}  // namespace sluice::pgtest
