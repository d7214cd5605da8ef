// The keyed-destination contract: what every destination that upserts by record key must do,
// checked end to end through the sluice binary (file source of OpenCDC JSON lines → the
// destination on its real server) and read back with the destination's reader (tests/support).
//
// A destination gets the whole suite with a KeyedDestination (where its pipeline writes, how to
// read a table back) and one INSTANTIATE_TEST_SUITE_P line at the end of this file; see
// docs/development/testing.md.
#include <gtest/gtest.h>
#include <signal.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/env.h"
#include "support/mongodb.h"
#include "support/pipeline_file.h"
#include "support/process.h"
#include "support/readers.h"
#include "support/sql.h"
#include "support/sqlite.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

// ── the destination under test ──────────────────────────────────────────────

class KeyedDestination {
 public:
  virtual ~KeyedDestination() = default;
  // The server is reachable and this test's database exists.
  virtual bool ready() const = 0;
  // The destination block of a pipeline writing into this test's database (or file in `dir`).
  virtual ConnectorYaml destination(const std::filesystem::path& dir) = 0;
  // `columns` of `table`, sorted; nullopt when the table does not exist.
  virtual std::optional<Rows> read(const std::filesystem::path& dir, const std::string& table,
                                   const std::vector<std::string>& columns) = 0;
  // The position stored with checkpoint_in_destination for `pipeline` ("" if none).
  virtual std::string stored_position(const std::filesystem::path& dir,
                                      const std::string& pipeline) = 0;
  // Sets text column `column` of the row with integer key id = `id` of `table` behind sluice's
  // back.
  virtual bool set_text(const std::filesystem::path& dir, const std::string& table,
                        const std::string& column, int id, const std::string& value) = 0;
  // The column names of `table`, sorted, comma-separated ("" when there is no such table).
  virtual std::string column_names(const std::filesystem::path& dir, const std::string& table) = 0;
  // A record after image the destination rejects once `table` has the columns id (integer key),
  // v (text) and n (integer) — JSON text of `after`, and of the record's key.
  virtual std::pair<std::string, std::string> rejected(int id) const = 0;
  // The parts of the contract a destination is not held to, with the reason ("" when it is).
  // Schema changes (add/rename/drop/retype a column): a destination without a schema.
  virtual std::string no_schema_changes() const { return ""; }
  // Re-snapshot reconciliation (the sweep, snapshot.reconcile): a destination that has none yet.
  virtual std::string no_resnapshot_reconcile() const { return ""; }
  // An update's after image that lacks a field (the file source cannot mark it absent) keeps the
  // stored value: not for a destination that replaces the whole document.
  virtual std::string no_kept_missing_fields() const { return ""; }
  // The table name of CompositeAndQuotedKeys: identifiers a destination must quote.
  virtual std::string quoted_table() const { return "odd \"t\" `x`"; }
  // The first key field's name there.
  virtual std::string quoted_field() const { return "a\"b"; }
};

// Skips the test when the destination is not held to this part (the reason printed).
#define SKIP_UNLESS_HELD(part)                           \
  do {                                                   \
    const std::string why = dest_->part();               \
    if (!why.empty()) GTEST_SKIP() << #part ": " << why; \
  } while (0)

struct KeyedDestinationKind {
  std::string name;
  std::function<std::unique_ptr<KeyedDestination>()> make;
};

class PostgresKeyed final : public KeyedDestination {
 public:
  PostgresKeyed() : db_(unique_name("kd_" + current_test_slug())) {}
  bool ready() const override { return db_.ok(); }
  ConnectorYaml destination(const std::filesystem::path&) override {
    return ConnectorYaml{"postgres", {}}.set("url", db_.url());
  }
  std::optional<Rows> read(const std::filesystem::path&, const std::string& table,
                           const std::vector<std::string>& columns) override {
    return read_pg_table(db_.sql(), "public", table, columns);
  }
  std::string stored_position(const std::filesystem::path&, const std::string& pipeline) override {
    if (db_.sql().scalar("SELECT to_regclass('public.sluice_checkpoints') IS NOT NULL") != "t")
      return "";
    return db_.sql().scalar(
        "SELECT encode(position, 'escape') FROM public.sluice_checkpoints WHERE pipeline = " +
        sql_literal(pipeline));
  }
  bool set_text(const std::filesystem::path&, const std::string& table, const std::string& column,
                int id, const std::string& value) override {
    return db_.sql().exec("UPDATE " + pg_ident(table) + " SET " + pg_ident(column) + " = " +
                          sql_literal(value) + " WHERE id = " + std::to_string(id));
  }
  std::string column_names(const std::filesystem::path&, const std::string& table) override {
    return db_.sql().scalar(
        "SELECT coalesce(string_agg(column_name::text, ',' ORDER BY column_name::text), '') FROM "
        "information_schema.columns WHERE table_schema = 'public' AND table_name = " +
        sql_literal(table));
  }
  // A string into the bigint column n.
  std::pair<std::string, std::string> rejected(int id) const override {
    return {"{\"id\":" + std::to_string(id) + ",\"v\":\"bad\",\"n\":\"not a number\"}",
            "{\"id\":" + std::to_string(id) + "}"};
  }

 private:
  PgDatabase db_;
};

class MysqlKeyed final : public KeyedDestination {
 public:
  MysqlKeyed() : db_(unique_name("kd_" + current_test_slug(), 64)) {}
  bool ready() const override { return db_.ok(); }
  ConnectorYaml destination(const std::filesystem::path&) override {
    return ConnectorYaml{"mysql", {}}.set("url", db_.url());
  }
  std::optional<Rows> read(const std::filesystem::path&, const std::string& table,
                           const std::vector<std::string>& columns) override {
    return read_mysql_table(db_.sql(), table, columns);
  }
  std::string stored_position(const std::filesystem::path&, const std::string& pipeline) override {
    auto rows = db_.sql().query(
        "SELECT position FROM sluice_checkpoints WHERE pipeline = " + sql_literal(pipeline), true);
    return rows.empty() || !rows[0][0] ? "" : *rows[0][0];
  }
  bool set_text(const std::filesystem::path&, const std::string& table, const std::string& column,
                int id, const std::string& value) override {
    return db_.sql().exec("UPDATE " + my_ident(table) + " SET " + my_ident(column) + " = " +
                          sql_literal(value) + " WHERE id = " + std::to_string(id));
  }
  std::string column_names(const std::filesystem::path&, const std::string& table) override {
    return db_.sql().scalar(
        "SELECT coalesce(GROUP_CONCAT(column_name ORDER BY column_name SEPARATOR ','), '') FROM "
        "information_schema.columns WHERE table_schema = DATABASE() AND table_name = " +
        sql_literal(table));
  }
  // A string into the BIGINT column n (strict mode).
  std::pair<std::string, std::string> rejected(int id) const override {
    return {"{\"id\":" + std::to_string(id) + ",\"v\":\"bad\",\"n\":\"not a number\"}",
            "{\"id\":" + std::to_string(id) + "}"};
  }

 private:
  MysqlDatabase db_;
};

class SqliteKeyed final : public KeyedDestination {
 public:
  bool ready() const override { return true; }
  ConnectorYaml destination(const std::filesystem::path& dir) override {
    return ConnectorYaml{"sqlite", {}}.set("path", (dir / "out.db").string());
  }
  std::optional<Rows> read(const std::filesystem::path& dir, const std::string& table,
                           const std::vector<std::string>& columns) override {
    return read_sqlite_table(dir / "out.db", table, columns);
  }
  std::string stored_position(const std::filesystem::path& dir,
                              const std::string& pipeline) override {
    try {
      SqliteFile db(dir / "out.db");
      return db.text("SELECT CAST(position AS TEXT) FROM sluice_checkpoints WHERE pipeline = " +
                     sql_literal(pipeline));
    } catch (const std::exception&) {
      return "";
    }
  }
  bool set_text(const std::filesystem::path& dir, const std::string& table,
                const std::string& column, int id, const std::string& value) override {
    sqlite3* db = nullptr;
    if (sqlite3_open((dir / "out.db").c_str(), &db) != SQLITE_OK) return false;
    sqlite3_busy_timeout(db, 5000);
    const std::string sql = "UPDATE " + pg_ident(table) + " SET " + pg_ident(column) + " = " +
                            sql_literal(value) + " WHERE id = " + std::to_string(id);
    char* err = nullptr;
    const bool ok = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) == SQLITE_OK;
    if (!ok) ADD_FAILURE() << "SQLite: " << (err ? err : "?") << " in " << sql;
    sqlite3_free(err);
    sqlite3_close(db);
    return ok;
  }
  std::string column_names(const std::filesystem::path& dir, const std::string& table) override {
    SqliteFile db(dir / "out.db");
    return db.text(
        "SELECT coalesce(group_concat(name, ','), '') FROM (SELECT name FROM pragma_table_info(" +
        sql_literal(table) + ") ORDER BY name)");
  }
  // SQLite takes any value into any column: the value it rejects is a null key.
  std::pair<std::string, std::string> rejected(int id) const override {
    return {"{\"id\":null,\"v\":\"bad\",\"n\":" + std::to_string(id) + "}", "{\"id\":null}"};
  }
};

// MongoDB (FerretDB, scripts/services start mongodb): documents keyed by _id, read back by field.
// FerretDB has no Decimal128; the contract's values are integers and strings only.
class MongodbKeyed final : public KeyedDestination {
 public:
  MongodbKeyed() : db_("kd_" + current_test_slug()) {}
  bool ready() const override { return db_.ok(); }
  ConnectorYaml destination(const std::filesystem::path&) override {
    return ConnectorYaml{"mongodb", {}}.set("url", db_.url());
  }
  std::optional<Rows> read(const std::filesystem::path&, const std::string& table,
                           const std::vector<std::string>& columns) override {
    auto rows = db_.fields(table, columns);
    if (!rows) return std::nullopt;
    return Rows(rows->begin(), rows->end());
  }
  std::string stored_position(const std::filesystem::path&, const std::string& pipeline) override {
    return db_.stored_position(pipeline);
  }
  bool set_text(const std::filesystem::path&, const std::string& table, const std::string& column,
                int id, const std::string& value) override {
    return db_.set_string(table, id, column, value);
  }
  std::string column_names(const std::filesystem::path&, const std::string& table) override {
    return db_.field_names(table);
  }
  // A field name starting with '$': the server refuses the document (a write error of one
  // operation, isolated to its record).
  std::pair<std::string, std::string> rejected(int id) const override {
    return {"{\"id\":" + std::to_string(id) + ",\"v\":\"bad\",\"$n\":1}",
            "{\"id\":" + std::to_string(id) + "}"};
  }
  std::string no_schema_changes() const override {
    return "documents have no schema: each takes the fields its record has, and the mongodb "
           "destination ignores schema records (a renamed or dropped column stays in the "
           "documents written before)";
  }
  std::string no_resnapshot_reconcile() const override {
    return "the mongodb destination has no re-snapshot sweep or snapshot.reconcile yet";
  }
  std::string no_kept_missing_fields() const override {
    return "an update replaces the document with its after image (replaceOne); only fields the "
           "record marks absent (PostgreSQL's unchanged TOAST values) keep their stored value";
  }
  // FerretDB's SQLite backend cannot create a collection whose name holds a double quote (SQL
  // syntax error; MongoDB can): the other characters stay.
  std::string quoted_table() const override { return "odd 't' `x`"; }
  // Nor store a field whose name holds one ("malformed JSON": it does not escape it).
  std::string quoted_field() const override { return "a'b"; }

 private:
  MongoTestDb db_;
};

// ── records and pipelines ───────────────────────────────────────────────────

std::string json_str(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// One OpenCDC JSON line. `key`, `before`, `after`: JSON objects ("" leaves the member out).
std::string record(const std::string& op, const std::string& table, const std::string& key,
                   const std::string& after, const std::string& before = "",
                   const std::string& more_metadata = "") {
  std::string s = "{\"operation\":\"" + op + "\",\"metadata\":{\"table\":" + json_str(table) +
                  more_metadata + "}";
  if (!key.empty()) s += ",\"key\":" + key;
  s += ",\"payload\":{";
  if (!before.empty()) s += "\"before\":" + before;
  if (!after.empty()) s += std::string(before.empty() ? "" : ",") + "\"after\":" + after;
  return s + "}}\n";
}

std::string id_key(int id) { return "{\"id\":" + std::to_string(id) + "}"; }
std::string item(int id, const std::string& v, std::optional<int> n) {
  return "{\"id\":" + std::to_string(id) + ",\"v\":" + json_str(v) +
         (n ? ",\"n\":" + std::to_string(*n) : "") + "}";
}
std::string create(int id, const std::string& v, std::optional<int> n = std::nullopt) {
  return record("create", "items", id_key(id), item(id, v, n));
}
std::string update(int id, const std::string& after) {
  return record("update", "items", id_key(id), after);
}
std::string remove(int id) { return record("delete", "items", id_key(id), ""); }

Row row(std::vector<std::optional<std::string>> v) { return Row(std::move(v)); }

class KeyedDestinationContract : public ::testing::TestWithParam<KeyedDestinationKind> {
 protected:
  void SetUp() override {
    dest_ = GetParam().make();
    ASSERT_TRUE(dest_->ready());
  }

  PipelineFile pipeline(size_t max_records = 3, bool follow = false,
                        bool checkpoint_in_destination = false) {
    PipelineFile f;
    PipelineYaml& p = f.pipeline(kId);
    p.source("file").set("path", "in.jsonl");
    if (follow) p.source_.set("follow", true);
    p.destination_ = dest_->destination(dir_.path());
    if (checkpoint_in_destination) p.destination_.set("checkpoint_in_destination", true);
    p.max_records(max_records).linger_ms(5);
    return f;
  }

  // Writes `lines` and the pipeline, runs sluice to the end of the file; exit code 0 expected.
  void run(const std::string& lines, PipelineFile f) {
    write_file(dir_ / "in.jsonl", lines);
    f.write(dir_ / "p.yaml");
    Process p({"run", "p.yaml"}, dir_.path());
    const int rc = p.wait_for(60s);
    ASSERT_EQ(rc, 0) << p.stderr_text();
  }
  void run(const std::string& lines) { run(lines, pipeline()); }

  Rows items(const std::vector<std::string>& columns = {"id", "v", "n"}) {
    auto rows = dest_->read(dir_.path(), "items", columns);
    EXPECT_TRUE(rows.has_value()) << "table items does not exist";
    return rows.value_or(Rows{});
  }

  static constexpr const char* kId = "kd";
  TempDir dir_{"conformance-kd"};
  std::unique_ptr<KeyedDestination> dest_;
};

// ── the contract ────────────────────────────────────────────────────────────

TEST_P(KeyedDestinationContract, UpsertInsertsThenReplacesByKey) {
  run(create(1, "a", 1) + create(2, "b", 2) + update(1, item(1, "a2", 10)) +
      record("snapshot", "items", id_key(3), item(3, "c", 3)) +
      create(2, "b2", 20));  // a create of an existing key replaces it
  EXPECT_EQ(items(), (Rows{row({"1", "a2", "10"}), row({"2", "b2", "20"}), row({"3", "c", "3"})}));
}

TEST_P(KeyedDestinationContract, DeleteRemovesTheRowAndAMissingKeyIsNoError) {
  run(create(1, "a", 1) + create(2, "b", 2) + create(3, "c", 3) + remove(2) + remove(99) +
      create(4, "d", 4) + remove(4));
  EXPECT_EQ(items(), (Rows{row({"1", "a", "1"}), row({"3", "c", "3"})}));
}

TEST_P(KeyedDestinationContract, UpdateThatMovesTheKeyRemovesTheOldRow) {
  run(create(1, "a", 1) + create(2, "b", 2) + create(3, "c", 3) +
      // record key = the old key, after = the new one
      record("update", "items", id_key(1), item(10, "moved", 1)) +
      // before carries the old key
      record("update", "items", id_key(20), item(20, "moved too", 2), item(2, "b", 2)));
  EXPECT_EQ(items(),
            (Rows{row({"10", "moved", "1"}), row({"20", "moved too", "2"}), row({"3", "c", "3"})}));
}

TEST_P(KeyedDestinationContract, AbsentFieldKeepsTheStoredValueAndNullClearsIt) {
  SKIP_UNLESS_HELD(no_kept_missing_fields);
  run(create(1, "a", 1) + create(2, "b", 2) + create(3, "c", 3) +
      update(1, "{\"id\":1,\"v\":\"a2\"}") +             // n absent: kept
      update(2, "{\"id\":2,\"v\":\"b2\",\"n\":null}") +  // n null: cleared
      update(3, "{\"id\":3,\"n\":30}"));                 // v absent
  EXPECT_EQ(items(),
            (Rows{row({"1", "a2", "1"}), row({"2", "b2", std::nullopt}), row({"3", "c", "30"})}));
}

TEST_P(KeyedDestinationContract, TruncateEmptiesTheTable) {
  run(create(1, "a", 1) + create(2, "b", 2) + create(3, "c", 3) + create(4, "d", 4) +
      record("delete", "items", "", "", "", ",\"truncate\":\"true\"") + create(5, "e", 5));
  EXPECT_EQ(items(), (Rows{row({"5", "e", "5"})}));
}

TEST_P(KeyedDestinationContract, ReplayingTheSameChangesIsIdempotent) {
  const std::string changes = create(1, "a", 1) + create(2, "b", 2) + update(1, item(1, "a2", 11)) +
                              remove(2) + create(3, "c", 3) +
                              record("update", "items", id_key(3), item(30, "c2", 3)) +
                              create(2, "b3", 22);
  run(changes);
  const Rows once = items();
  EXPECT_EQ(once, (Rows{row({"1", "a2", "11"}), row({"2", "b3", "22"}), row({"30", "c2", "3"})}));
  // No checkpoint: the same file is applied again from its start, then once more in one batch.
  std::filesystem::remove_all(dir_ / "state");
  run(changes);
  EXPECT_EQ(items(), once);
  std::filesystem::remove_all(dir_ / "state");
  run(changes + changes, pipeline(100));
  EXPECT_EQ(items(), once);
}

TEST_P(KeyedDestinationContract, NewFieldAddsAColumn) {
  run(create(1, "a") + create(2, "b") + create(3, "c", 3) +  // n arrives in a later batch
      record("create", "items", id_key(4),
             "{\"id\":4,\"v\":\"d\",\"n\":4,\"extra\":\"x\"}") +  // extra mid-batch
      create(5, "e", 5));
  EXPECT_EQ(items({"id", "v", "n", "extra"}),
            (Rows{row({"1", "a", std::nullopt, std::nullopt}),
                  row({"2", "b", std::nullopt, std::nullopt}), row({"3", "c", "3", std::nullopt}),
                  row({"4", "d", "4", "x"}), row({"5", "e", "5", std::nullopt})}));
}

TEST_P(KeyedDestinationContract, CompositeAndQuotedKeys) {
  // Identifiers a destination must quote: a double quote, a space, a backtick, a keyword.
  const std::string table = dest_->quoted_table();
  const std::string first = dest_->quoted_field();  // a"b
  auto key = [&](int a, const std::string& b) {
    return "{" + json_str(first) + ":" + std::to_string(a) + ",\"k 2\":" + json_str(b) + "}";
  };
  auto after = [&](int a, const std::string& b, const std::string& v) {
    return "{" + json_str(first) + ":" + std::to_string(a) + ",\"k 2\":" + json_str(b) +
           ",\"select\":" + json_str(v) + "}";
  };
  run(record("create", table, key(1, "x"), after(1, "x", "1x")) +
      record("create", table, key(1, "y"), after(1, "y", "1y")) +
      record("create", table, key(2, "x"), after(2, "x", "2x")) +
      record("update", table, key(1, "y"),
             after(1, "y", "1y'")) +  // same first part, other row untouched
      record("delete", table, key(2, "x"), "") +
      record("update", table, key(1, "x"), after(3, "x", "moved")));  // one part of the key moves
  auto rows = dest_->read(dir_.path(), table, {first, "k 2", "select"});
  ASSERT_TRUE(rows.has_value());
  EXPECT_EQ(*rows, (Rows{row({"1", "y", "1y'"}), row({"3", "x", "moved"})}));
}

TEST_P(KeyedDestinationContract, CheckpointInDestinationSurvivesKill9WithTheExactEndState) {
  // Records arrive while sluice runs (the file is followed); it is killed mid-stream, the
  // pipeline's own checkpoint store is removed, more records arrive, and a restart must resume at
  // the position the destination committed with its rows: a row it had applied and that is changed
  // behind its back stays changed (nothing before the position is replayed), and everything after
  // it lands exactly.
  std::vector<std::string> lines;
  for (int i = 1; i <= 300; ++i) lines.push_back(create(i, "v" + std::to_string(i), i));
  for (int i = 1; i <= 300; i += 7)
    lines.push_back(update(i, item(i, "u" + std::to_string(i), -i)));
  for (int i = 2; i <= 300; i += 11) lines.push_back(remove(i));
  for (int i = 301; i <= 330; ++i) lines.push_back(create(i, "late" + std::to_string(i), i));
  std::vector<size_t> end_offset;  // byte offset just past each line
  size_t off = 0;
  for (const auto& l : lines) end_offset.push_back(off += l.size());

  write_file(dir_ / "in.jsonl", "");
  pipeline(10, /*follow=*/true, /*checkpoint_in_destination=*/true).write(dir_ / "p.yaml");
  const size_t kill_after = 200;  // lines appended before the kill
  {
    Process p({"run", "p.yaml"}, dir_.path());
    for (size_t i = 0; i < kill_after; i += 20) {
      std::string chunk;
      for (size_t j = i; j < std::min(i + 20, kill_after); ++j) chunk += lines[j];
      append_file(dir_ / "in.jsonl", chunk);
      std::this_thread::sleep_for(15ms);
    }
    // Row 3 has one change only, its create (line 3): wait until the destination committed it.
    ASSERT_TRUE(wait_until(
        [&] {
          const std::string pos = dest_->stored_position(dir_.path(), kId);
          return !pos.empty() && std::stoull(pos) >= end_offset[2];
        },
        30s))
        << p.stderr_text();
    p.kill9();
  }
  const std::string stored = dest_->stored_position(dir_.path(), kId);
  ASSERT_FALSE(stored.empty());
  const size_t position = std::stoull(stored);
  ASSERT_LE(position, end_offset[kill_after - 1]);
  ASSERT_TRUE(dest_->set_text(dir_.path(), "items", "v", 3, "changed behind sluice's back"));
  std::filesystem::remove_all(dir_ / "state");
  std::string rest;
  for (size_t j = kill_after; j < lines.size(); ++j) rest += lines[j];
  append_file(dir_ / "in.jsonl", rest);

  Process again({"run", "p.yaml", "--idle-exit", "1"}, dir_.path());
  ASSERT_EQ(again.wait_for(60s), 0) << again.stderr_text();
  std::map<int, Row> want;
  for (int i = 1; i <= 300; ++i)
    want[i] = row({std::to_string(i), "v" + std::to_string(i), std::to_string(i)});
  for (int i = 1; i <= 300; i += 7)
    want[i] = row({std::to_string(i), "u" + std::to_string(i), std::to_string(-i)});
  for (int i = 2; i <= 300; i += 11) want.erase(i);
  for (int i = 301; i <= 330; ++i)
    want[i] = row({std::to_string(i), "late" + std::to_string(i), std::to_string(i)});
  want[3][1] = "changed behind sluice's back";  // its create lies before the stored position
  Rows expected;
  for (auto& [id, r] : want) expected.push_back(r);
  EXPECT_EQ(items(), sorted(expected)) << "stored position " << position;
  EXPECT_EQ(dest_->stored_position(dir_.path(), kId), std::to_string(end_offset.back()));
}

TEST_P(KeyedDestinationContract, RejectedValueGoesToTheDeadLetterQueueAndTheRestLands) {
  const auto [bad_after, bad_key] = dest_->rejected(4);
  const std::string bad = record("create", "items", bad_key, bad_after);
  PipelineFile f = pipeline(4);
  f.pipeline(kId).on_error = "dlq";
  f.pipeline(kId).dlq("file").set("path", "dead.jsonl");
  run(create(1, "a", 1) + create(2, "b", 2) + create(3, "c", 3) + bad + create(5, "e", 5) +
          create(6, "f", 6),
      f);
  EXPECT_EQ(items(), (Rows{row({"1", "a", "1"}), row({"2", "b", "2"}), row({"3", "c", "3"}),
                           row({"5", "e", "5"}), row({"6", "f", "6"})}));
  const Rows dead = read_jsonl_file(dir_ / "dead.jsonl");
  ASSERT_EQ(dead.size(), 1u) << show(dead);
  const std::string& line = *dead[0][0];
  EXPECT_NE(line.find("\"sluice.error\""), std::string::npos) << line;
  EXPECT_NE(line.find("\"sluice.pipeline\":\"kd\""), std::string::npos) << line;
  EXPECT_NE(line.find("\"v\":\"bad\""), std::string::npos) << line;
}

// ── schema changes, moved keys and re-snapshots (issue 12) ──────────────────

// A schema record of table items (include/sluice/schema_change.h): `change` is the JSON object.
std::string schema(const std::string& change) {
  return "{\"operation\":\"schema\",\"metadata\":{\"table\":\"items\"},\"payload\":{\"after\":" +
         change + "}}\n";
}
std::string marker(const std::string& what, const std::string& table = "items") {
  return "{\"operation\":\"marker\",\"metadata\":{\"table\":" + json_str(table) + ",\"marker\":\"" +
         what + "\"},\"payload\":{}}\n";
}

TEST_P(KeyedDestinationContract, SchemaChangesApplyInOrderWithTheRowsAndReplayTheSame) {
  SKIP_UNLESS_HELD(no_schema_changes);
  const std::string changes =
      create(1, "a", 1) + create(2, "b", 2) +
      // old rows read the default; a row written after the change carries its own value
      schema(R"({"change":"add_column","column":"d","type":"text","default":"x'y\\z"})") +
      record("create", "items", id_key(3), R"({"id":3,"v":"c","n":3,"d":"own"})") +
      // the column keeps its values under its new name
      schema(R"({"change":"rename_column","column":"v","to":"name"})") +
      record("update", "items", id_key(1), R"({"id":1,"name":"a2","n":1,"d":"x'y\\z"})") +
      schema(R"({"change":"drop_column","column":"n"})") +
      schema(R"({"change":"alter_column_type","column":"id","type":"bigint","from":"integer"})") +
      // added without a default: old rows read NULL
      schema(R"({"change":"add_column","column":"e","type":"integer"})") +
      record("create", "items", id_key(4), R"({"id":4,"name":"d","d":"own4","e":44})");
  const Rows want{row({"1", "a2", "x'y\\z", std::nullopt}), row({"2", "b", "x'y\\z", std::nullopt}),
                  row({"3", "c", "own", std::nullopt}), row({"4", "d", "own4", "44"})};
  for (size_t batch : {3, 1, 100}) {
    SCOPED_TRACE("max_records " + std::to_string(batch));
    std::filesystem::remove_all(dir_ / "state");  // a replay from the start, as after a crash
    run(changes, pipeline(batch));
    EXPECT_EQ(items({"id", "name", "d", "e"}), want);
    EXPECT_EQ(dest_->column_names(dir_.path(), "items"), "d,e,id,name");
  }
}

TEST_P(KeyedDestinationContract, KeptDroppedColumnReAddedNeverShowsItsOldValues) {
  SKIP_UNLESS_HELD(no_schema_changes);
  const std::string changes = create(1, "a", 1) + create(2, "b", 2) +
                              schema(R"({"change":"drop_column","column":"n"})") +
                              record("create", "items", id_key(3), R"({"id":3,"v":"c"})");
  PipelineFile keep = pipeline();
  keep.pipeline(kId).destination_.set("schema.keep_dropped_columns", true);
  run(changes, keep);
  // Kept, with its values; the row written after the drop reads NULL.
  EXPECT_EQ(items(),
            (Rows{row({"1", "a", "1"}), row({"2", "b", "2"}), row({"3", "c", std::nullopt})}));
  // Re-added under the same name: a new column, old rows read its default (or NULL).
  std::filesystem::remove_all(dir_ / "state");
  run(changes + schema(R"({"change":"add_column","column":"n","type":"integer","default":0})") +
          create(4, "d", 4),
      keep);
  EXPECT_EQ(items(), (Rows{row({"1", "a", "0"}), row({"2", "b", "0"}), row({"3", "c", "0"}),
                           row({"4", "d", "4"})}));
  std::filesystem::remove_all(dir_ / "state");
  run(changes + schema(R"({"change":"add_column","column":"n","type":"integer"})"), keep);
  EXPECT_EQ(items(), (Rows{row({"1", "a", std::nullopt}), row({"2", "b", std::nullopt}),
                           row({"3", "c", std::nullopt}), row({"4", "d", std::nullopt})}));
}

TEST_P(KeyedDestinationContract, MalformedSchemaChangeStopsWithAnErrorNamingTheTable) {
  SKIP_UNLESS_HELD(no_schema_changes);
  write_file(dir_ / "in.jsonl", create(1, "a", 1) + schema(R"({"change":"add_column"})"));
  pipeline().write(dir_ / "p.yaml");
  Process p({"run", "p.yaml"}, dir_.path());
  EXPECT_NE(p.wait_for(60s), 0);
  EXPECT_NE(p.stderr_text().find("items"), std::string::npos) << p.stderr_text();
  EXPECT_NE(p.stderr_text().find("missing \"column\""), std::string::npos) << p.stderr_text();
}

TEST_P(KeyedDestinationContract, UpdateThatMovesTheKeyKeepsTheColumnsTheSourceDidNotSend) {
  SKIP_UNLESS_HELD(no_kept_missing_fields);
  // After images without v (an unchanged TOAST value the source did not send).
  const std::string changes =
      create(1, "a", 1) + create(2, "b", 2) +
      record("update", "items", id_key(1), R"({"id":101,"n":5})") +
      record("update", "items", id_key(102), R"({"id":102,"n":6})", R"({"id":2,"n":2})") +
      // the old row is not there: the new one is written as sent
      record("update", "items", id_key(7), R"({"id":107,"v":"z"})");
  const Rows want{row({"101", "a", "5"}), row({"102", "b", "6"}), row({"107", "z", std::nullopt})};
  run(changes);
  EXPECT_EQ(items(), want);
  std::filesystem::remove_all(dir_ / "state");
  run(changes + changes, pipeline(100));  // replayed: the moves are done already
  EXPECT_EQ(items(), want);
}

TEST_P(KeyedDestinationContract, ResnapshotSweepRemovesTheRowsTheSnapshotDidNotSee) {
  SKIP_UNLESS_HELD(no_resnapshot_reconcile);
  auto snap = [](int id, const std::string& v) {
    return record("snapshot", "items", id_key(id), item(id, v, id));
  };
  const std::string before = create(1, "a", 1) + create(2, "b", 2) + create(3, "c", 3) +
                             create(4, "d", 4) + create(5, "e", 5);
  // Rows 2 and 4 were deleted at the source during a gap; the stream flows during the snapshot.
  const std::string resnapshot = marker("snapshot_begin") + snap(1, "a") + snap(3, "c") +
                                 create(6, "f", 6) + snap(5, "e2") + remove(3) +
                                 marker("snapshot_end") + create(7, "g", 7);
  const Rows want{row({"1", "a", "1"}), row({"5", "e2", "5"}), row({"6", "f", "6"}),
                  row({"7", "g", "7"})};
  // Into a table that does not exist yet: the rows create it, nothing is removed.
  run(marker("snapshot_begin") + snap(8, "h") + snap(9, "i") + marker("snapshot_end"));
  EXPECT_EQ(items(), (Rows{row({"8", "h", "8"}), row({"9", "i", "9"})}));
  EXPECT_EQ(dest_->column_names(dir_.path(), "sluice_sweep_items"), "");
  // A first snapshot still running (no end yet) keeps no side table: it costs no key copies.
  std::filesystem::remove_all(dir_ / "state");
  run(marker("snapshot_begin", "fresh") + record("snapshot", "fresh", id_key(8), item(8, "h", 8)));
  EXPECT_EQ(dest_->column_names(dir_.path(), "sluice_sweep_fresh"), "");
  // Rows before the marker create the table in the same batch: nothing to sweep, none removed.
  std::filesystem::remove_all(dir_ / "state");
  run(record("create", "fresh2", id_key(1), item(1, "a", 1)) + marker("snapshot_begin", "fresh2") +
          record("snapshot", "fresh2", id_key(2), item(2, "b", 2)) +
          marker("snapshot_end", "fresh2"),
      pipeline(100));
  auto fresh2 = dest_->read(dir_.path(), "fresh2", {"id", "v", "n"});
  ASSERT_TRUE(fresh2.has_value());
  EXPECT_EQ(*fresh2, (Rows{row({"1", "a", "1"}), row({"2", "b", "2"})}));
  std::filesystem::remove_all(dir_ / "state");
  run(before + resnapshot);
  EXPECT_EQ(items(), want);
  EXPECT_EQ(dest_->column_names(dir_.path(), "sluice_sweep_items"), "");
  std::filesystem::remove_all(dir_ / "state");
  run(before + resnapshot, pipeline(100));  // replayed, in one batch
  EXPECT_EQ(items(), want);
  // An empty re-snapshot: nothing is left.
  std::filesystem::remove_all(dir_ / "state");
  run(marker("snapshot_begin") + marker("snapshot_end"));
  EXPECT_EQ(items(), Rows{});
}

TEST_P(KeyedDestinationContract, ResnapshotSweepIsOffWhenSourceTablesShareADestinationTable) {
  SKIP_UNLESS_HELD(no_resnapshot_reconcile);
  // `table: merged` gathers the source tables a and b into one table: a re-snapshot of b must not
  // remove a's rows (a sweep needs one source table per destination table).
  PipelineFile f = pipeline();
  f.pipeline(kId).destination_.set("table", "merged");
  auto rec = [](const std::string& op, const std::string& table, int id) {
    return record(op, table, id_key(id), item(id, table, id));
  };
  run(rec("create", "a", 1) + rec("create", "b", 2), f);
  std::filesystem::remove_all(dir_ / "state");
  run(marker("snapshot_begin", "b") + rec("snapshot", "b", 2) + marker("snapshot_end", "b"), f);
  auto rows = dest_->read(dir_.path(), "merged", {"id", "v", "n"});
  ASSERT_TRUE(rows.has_value());
  EXPECT_EQ(*rows, (Rows{row({"1", "a", "1"}), row({"2", "b", "2"})}));
}

TEST_P(KeyedDestinationContract, ResnapshotTruncateAndNone) {
  SKIP_UNLESS_HELD(no_resnapshot_reconcile);
  const std::string lines = create(1, "a", 1) + create(2, "b", 2) + marker("snapshot_begin") +
                            record("snapshot", "items", id_key(2), item(2, "b2", 2)) +
                            marker("snapshot_end");
  PipelineFile none = pipeline();
  none.pipeline(kId).destination_.set("snapshot.reconcile", "none");
  run(lines, none);
  EXPECT_EQ(items(), (Rows{row({"1", "a", "1"}), row({"2", "b2", "2"})}));
  std::filesystem::remove_all(dir_ / "state");
  PipelineFile truncate = pipeline();
  truncate.pipeline(kId).destination_.set("snapshot.reconcile", "truncate");
  run(lines, truncate);
  EXPECT_EQ(items(), (Rows{row({"2", "b2", "2"})}));
}

TEST_P(KeyedDestinationContract, SchemaChangesWithCheckpointInDestinationConverge) {
  SKIP_UNLESS_HELD(no_schema_changes);
  // MySQL commits DDL implicitly: a batch holding a schema change commits in several
  // transactions and its position with the last. A crash in between replays the batch from the
  // previous position over a table that has the change already: the replay must end the same.
  const std::string changes =
      create(1, "a", 1) + schema(R"({"change":"rename_column","column":"v","to":"name"})") +
      record("create", "items", id_key(2), R"({"id":2,"name":"b","n":2})") +
      schema(R"({"change":"add_column","column":"d","type":"text","default":"x"})") +
      record("update", "items", id_key(1), R"({"id":1,"name":"a2","d":"y"})");
  const Rows want{row({"1", "a2", "1", "y"}), row({"2", "b", "2", "x"})};
  run(changes, pipeline(100, false, /*checkpoint_in_destination=*/true));
  EXPECT_EQ(items({"id", "name", "n", "d"}), want);
  EXPECT_FALSE(dest_->stored_position(dir_.path(), kId).empty());
  // The position lost (the last transaction did not commit): everything is applied again.
  std::filesystem::remove_all(dir_ / "state");
  run(changes, pipeline(100));
  EXPECT_EQ(items({"id", "name", "n", "d"}), want);
  EXPECT_EQ(dest_->column_names(dir_.path(), "items"), "d,id,n,name");
}

std::string kind_name(const ::testing::TestParamInfo<KeyedDestinationKind>& info) {
  return info.param.name;
}

// ── one line per destination ────────────────────────────────────────────────

INSTANTIATE_TEST_SUITE_P(Postgres, KeyedDestinationContract,
                         ::testing::Values(KeyedDestinationKind{
                             "postgres", [] { return std::make_unique<PostgresKeyed>(); }}),
                         kind_name);
INSTANTIATE_TEST_SUITE_P(Mysql, KeyedDestinationContract,
                         ::testing::Values(KeyedDestinationKind{
                             "mysql", [] { return std::make_unique<MysqlKeyed>(); }}),
                         kind_name);
INSTANTIATE_TEST_SUITE_P(Sqlite, KeyedDestinationContract,
                         ::testing::Values(KeyedDestinationKind{
                             "sqlite", [] { return std::make_unique<SqliteKeyed>(); }}),
                         kind_name);
INSTANTIATE_TEST_SUITE_P(Mongodb, KeyedDestinationContract,
                         ::testing::Values(KeyedDestinationKind{
                             "mongodb", [] { return std::make_unique<MongodbKeyed>(); }}),
                         kind_name);

}  // namespace
}  // namespace sluice::test
