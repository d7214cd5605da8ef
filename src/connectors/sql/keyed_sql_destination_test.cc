// The shared transaction flow of KeyedSqlDestination, against a scripted writer: the order of
// BEGIN / DDL / runs / checkpoint / COMMIT, the schema pass of a dialect whose DDL commits,
// skipped deletes of missing tables, rollback and the dropped catalogue, one-row isolation, the
// connection probe (sluice_destination_connected, …).
#include "connectors/sql/keyed_sql_destination.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "connectors/common/incremental_snapshot.h"
#include "connectors/mysql/mysql_dialect.h"
#include "connectors/sqlite/sqlite_dialect.h"
#include "sluice/batch.h"
#include "sluice/schema_change.h"

namespace sluice::sql {
namespace {

class ScriptedWriter final : public KeyedSqlDestination {
 public:
  ScriptedWriter(const Dialect& d, bool isolate, Reconcile reconcile = Reconcile::none)
      : KeyedSqlDestination(d, options(isolate, reconcile)) {}

  std::vector<std::string> log;
  std::vector<std::string> existing;  // tables that exist with column "id"
  std::vector<std::string> created;   // tables created by the destination ("id", "v")
  size_t fail_runs_longer_than = SIZE_MAX;
  bool fail_every_run = false;
  bool drop_connection_on_abort = false;  // the failure was a lost connection
  int refuse_connects = 0;                // the next n connect() calls fail
  bool server = true;                     // has_server_connection()
  bool rows = true;                       // table_has_rows() of an existing table

 private:
  static KeyedSqlOptions options(bool isolate, Reconcile reconcile) {
    KeyedSqlOptions o;
    o.destination = "scripted destination";
    o.table = RecordTemplate::parse("{{table}}").value();
    o.checkpoint_in_destination = true;
    o.isolate_rejected_rows = isolate;
    o.reconcile = reconcile;  // none: no sweep-table look-ups in the logs below
    return o;
  }
  Status connect() override {
    log.push_back("connect");
    if (refuse_connects > 0) {
      --refuse_connects;
      return Error(Errc::connection, "scripted destination: connection refused", true);
    }
    connected_ = true;
    return ok_status();
  }
  bool has_server_connection() const noexcept override { return server; }
  bool connected() const noexcept override { return connected_; }
  void disconnect() noexcept override { connected_ = false; }
  Status begin() override {
    log.push_back("begin");
    return ok_status();
  }
  Status commit() override {
    log.push_back("commit");
    return ok_status();
  }
  void abort() noexcept override {
    log.push_back("abort");
    if (drop_connection_on_abort) connected_ = false;
  }
  Status load_columns(SqlTable& t) override {
    log.push_back("load " + t.name);
    t.columns.clear();
    t.exists = false;
    for (const auto& e : existing)
      if (e == t.name) {
        t.exists = true;
        t.columns.emplace("id", 0);
      }
    for (const auto& e : created)
      if (e == t.name) {
        t.exists = true;
        t.columns.emplace("id", 0);
        t.columns.emplace("v", 0);
      }
    return ok_status();
  }
  Status load_key_columns(SqlTable&, std::vector<std::string>& out) override {
    out = {"id"};
    return ok_status();
  }
  Result<bool> table_has_rows(SqlTable& t) override {
    log.push_back("has rows " + t.name);
    return rows;
  }
  Status ddl(const std::string& sql, SqlTable& t, const Record&, std::string_view, bool) override {
    log.push_back(sql.substr(0, sql.find(" (")));
    if (sql.rfind("CREATE", 0) == 0) created.push_back(t.name);
    return ok_status();
  }
  Status write_run(size_t first, size_t end) override {
    const PlannedRow& head = plan().row(first);
    const char* what = head.action == RowAction::upsert   ? "upsert"
                       : head.action == RowAction::remove ? "delete"
                                                          : "truncate";
    log.push_back(std::string(what) + " " + head.table->name + " x" + std::to_string(end - first));
    if (fail_every_run || end - first > fail_runs_longer_than)
      return record_error(*head.table, *plan().row(end - 1).record, Errc::data, "rejected");
    return ok_status();
  }
  Status save_position(std::string_view position) override {
    log.push_back("position " + std::string(position));
    return ok_status();
  }
  Result<std::optional<std::string>> load_position(std::string_view) override {
    return std::optional<std::string>();
  }

  bool connected_ = false;
};

void add(Batch& b, Operation op, std::string_view table, int64_t id, std::string_view schema = {}) {
  Record& r = b.add();
  r.op = op;
  ObjectBuilder m = b.object(2);
  m.add("table", Value::string(b.copy(table)));
  if (!schema.empty()) m.add("schema", Value::string(b.copy(schema)));
  r.metadata = m.build();
  r.key = b.object(1).add("id", Value::int64(id)).build();
  if (op != Operation::remove)
    r.after = b.object(2).add("id", Value::int64(id)).add("v", Value::int64(id * 10)).build();
}

Status write(Destination& d, Batch& b) {
  Status out = ok_status();
  d.write(b, [&](Status s) { out = std::move(s); });
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : " | ") + s;
  return out;
}

TEST(KeyedSqlDestinationTest, BatchIsOneTransactionWithDdlRunsAndPosition) {
  sqlite::SqliteDialect dialect;
  ScriptedWriter w(dialect, false);
  ASSERT_TRUE(w.open(ConnectorContext{}).ok());
  Batch b;
  add(b, Operation::create, "t", 1);
  add(b, Operation::create, "t", 2);
  add(b, Operation::remove, "gone", 3);  // a table that does not exist: nothing to delete
  add(b, Operation::remove, "t", 1);
  b.set_position("p1");
  ASSERT_TRUE(write(w, b).ok());
  EXPECT_EQ(
      joined(w.log),
      "connect | begin | load t | load gone | load t | CREATE TABLE IF NOT EXISTS \"t\" | load t | upsert t x2 | "
      "load gone | delete t x1 | position p1 | commit");
}

// snapshot.reconcile: sweep into a table that exists but is empty at snapshot_begin: nothing to
// sweep, so no side table and no key copies; with rows, the side table is made and swept.
TEST(KeyedSqlDestinationTest, SweepSkipsTheSideTableOfATableEmptyAtSnapshotBegin) {
  sqlite::SqliteDialect dialect;
  for (const bool rows : {false, true}) {
    ScriptedWriter w(dialect, false, Reconcile::sweep);
    w.existing = {"t"};
    w.rows = rows;
    ASSERT_TRUE(w.open(ConnectorContext{}).ok());
    Batch b;
    add_snapshot_marker(b, "public", "t", true);
    add(b, Operation::snapshot, "t", 1, "public");
    add(b, Operation::snapshot, "t", 2, "public");
    add_snapshot_marker(b, "public", "t", false);
    b.set_position("p1");
    ASSERT_TRUE(write(w, b).ok()) << rows;
    const std::string log = joined(w.log);
    EXPECT_NE(log.find("has rows t"), std::string::npos) << log;
    EXPECT_EQ(log.find("\"sluice_sweep_t\"") != std::string::npos, rows) << log;
  }
  // An earlier record of the same batch wrote the table: it is not empty, whatever the server
  // says before the batch is written.
  ScriptedWriter w(dialect, false, Reconcile::sweep);
  w.existing = {"t"};
  w.rows = false;
  ASSERT_TRUE(w.open(ConnectorContext{}).ok());
  Batch b;
  add(b, Operation::create, "t", 9, "public");
  add_snapshot_marker(b, "public", "t", true);
  add(b, Operation::snapshot, "t", 1, "public");
  add_snapshot_marker(b, "public", "t", false);
  b.set_position("p1");
  ASSERT_TRUE(write(w, b).ok());
  const std::string log = joined(w.log);
  EXPECT_EQ(log.find("has rows t"), std::string::npos) << log;
  EXPECT_NE(log.find("\"sluice_sweep_t\""), std::string::npos) << log;
}

TEST(KeyedSqlDestinationTest, DdlThatCommitsRunsBeforeTheTransaction) {
  mysql::MysqlDialect dialect;
  ScriptedWriter w(dialect, false);
  ASSERT_TRUE(w.open(ConnectorContext{}).ok());
  w.existing = {"t"};
  Batch b;
  add(b, Operation::create, "t", 1);
  add(b, Operation::create, "u", 2);
  ASSERT_TRUE(write(w, b).ok());
  EXPECT_EQ(
      joined(w.log),
      "connect | load t | load u | ALTER TABLE `t` ADD COLUMN `v` BIGINT NULL | load t | load u | CREATE TABLE "
      "IF NOT EXISTS `u` | load u | begin | upsert t x1 | upsert u x1 | commit");
}

TEST(KeyedSqlDestinationTest, SchemaChangeWhereDdlCommitsSplitsTheBatchAndThePositionCommitsLast) {
  // MySQL: the rows before the change commit, the change runs (committing by itself), then the
  // rows after it commit with the batch's position. A crash in between replays the whole batch
  // from the previous position; every step is idempotent (docs/schema-changes.md).
  mysql::MysqlDialect dialect;
  ScriptedWriter w(dialect, false);
  ASSERT_TRUE(w.open(ConnectorContext{}).ok());
  w.existing = {"t"};
  Batch b;
  add(b, Operation::create, "t", 1);
  Record& r = b.add();
  SchemaChange c;
  c.kind = SchemaChangeKind::add_column;
  c.column = "n";
  c.type = "int";
  c.default_value = Value::int64(7);
  set_schema_change(b, r, c);
  r.metadata = b.object(1).add("table", Value::string("t")).build();
  add(b, Operation::create, "t", 2);
  b.set_position("p2");
  ASSERT_TRUE(write(w, b).ok());
  EXPECT_EQ(
      joined(w.log),
      "connect | load t | ALTER TABLE `t` ADD COLUMN `v` BIGINT NULL | load t | begin | "
      "upsert t x1 | commit | load t | ALTER TABLE `t` ADD COLUMN `n` BIGINT NULL | "
      "UPDATE `t` SET `n` = 7 | load t | ALTER TABLE `t` ADD COLUMN `v` BIGINT NULL | load t | "
      "begin | upsert t x1 | position p2 | commit");
}

TEST(KeyedSqlDestinationTest, FailureRollsBackAndDropsTheCatalogue) {
  sqlite::SqliteDialect dialect;
  ScriptedWriter w(dialect, false);
  ASSERT_TRUE(w.open(ConnectorContext{}).ok());
  w.existing = {"t"};
  w.fail_every_run = true;
  Batch b;
  add(b, Operation::remove, "t", 1);
  Status s = write(w, b);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), Errc::data);
  EXPECT_NE(s.error().message().find(
                "scripted destination: table \"t\", delete key {\"id\":1}: rejected"),
            std::string::npos)
      << s.error().message();
  w.fail_every_run = false;
  w.log.clear();
  ASSERT_TRUE(write(w, b).ok());
  EXPECT_EQ(joined(w.log), "begin | load t | delete t x1 | commit");  // "t" read again
}

TEST(KeyedSqlDestinationTest, RejectedMultiRowStatementIsReplayedOneRowPerStatement) {
  sqlite::SqliteDialect dialect;
  ScriptedWriter w(dialect, /*isolate=*/true);
  ASSERT_TRUE(w.open(ConnectorContext{}).ok());
  w.existing = {"t"};
  w.fail_runs_longer_than = 1;  // as a server whose multi-row statement cannot name the row
  Batch b;
  add(b, Operation::remove, "t", 1);
  add(b, Operation::remove, "t", 2);
  add(b, Operation::remove, "t", 3);
  ASSERT_TRUE(write(w, b).ok());
  EXPECT_EQ(
      joined(w.log),
      "connect | begin | load t | delete t x3 | abort | begin | load t | delete t x1 | delete t x1 | delete t "
      "x1 | commit");
  ScriptedWriter plain(dialect, /*isolate=*/false);
  ASSERT_TRUE(plain.open(ConnectorContext{}).ok());
  plain.existing = {"t"};
  plain.fail_runs_longer_than = 1;
  EXPECT_FALSE(write(plain, b).ok());
}

ConnectorContext probe_context(MetricsRegistry& metrics) {
  ConnectorContext ctx;
  ctx.pipeline_id = "p";
  ctx.connector = "scripted";
  ctx.metrics = &metrics;
  return ctx;
}

double probe_value(const MetricsRegistry& m, const std::string& name) {
  return m.sum("sluice_destination_" + name, {{"pipeline", "p"}, {"connector", "scripted"}});
}

TEST(KeyedSqlDestinationTest, TheConnectionProbeShowsALossUntilAReconnectSucceeds) {
  sqlite::SqliteDialect dialect;
  ScriptedWriter w(dialect, false);
  MetricsRegistry metrics;
  ASSERT_TRUE(w.open(probe_context(metrics)).ok());
  EXPECT_EQ(probe_value(metrics, "connected"), 1);
  EXPECT_EQ(probe_value(metrics, "reconnects_total"), 0);
  EXPECT_EQ(probe_value(metrics, "down_seconds"), 0);

  // A data error on a live connection is no loss.
  Batch b;
  add(b, Operation::create, "t", 1);
  w.fail_every_run = true;
  EXPECT_FALSE(write(w, b).ok());
  EXPECT_EQ(probe_value(metrics, "connected"), 1);
  // A failure after which the writer dropped its connection is, and so is a refused reconnect.
  w.drop_connection_on_abort = true;
  EXPECT_FALSE(write(w, b).ok());
  EXPECT_EQ(probe_value(metrics, "connected"), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the outage has a length
  EXPECT_GT(probe_value(metrics, "down_seconds"), 0);
  w.fail_every_run = false;
  w.refuse_connects = 1;
  EXPECT_FALSE(write(w, b).ok());
  EXPECT_EQ(probe_value(metrics, "connected"), 0);
  EXPECT_EQ(probe_value(metrics, "reconnects_total"), 0);
  // The retry connects: up again, one reconnect.
  EXPECT_TRUE(write(w, b).ok());
  EXPECT_EQ(probe_value(metrics, "connected"), 1);
  EXPECT_EQ(probe_value(metrics, "reconnects_total"), 1);
  EXPECT_EQ(probe_value(metrics, "down_seconds"), 0);
  w.close();
  EXPECT_TRUE(metrics.values("sluice_destination_connected").empty());
}

TEST(KeyedSqlDestinationTest, AWriterWithoutAServerConnectionPublishesNoProbe) {
  sqlite::SqliteDialect dialect;
  ScriptedWriter w(dialect, false);
  w.server = false;
  MetricsRegistry metrics;
  ASSERT_TRUE(w.open(probe_context(metrics)).ok());
  EXPECT_TRUE(metrics.values("sluice_destination_connected").empty());
  EXPECT_TRUE(metrics.values("sluice_destination_reconnects_total").empty());
}

}  // namespace
}  // namespace sluice::sql
