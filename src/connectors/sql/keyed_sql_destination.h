// The keyed SQL destination: one transaction per batch, rows upserted and deleted by the record
// key, tables created and widened as records arrive, the position optionally committed with the
// rows. This class owns what is the same for every SQL database; a subclass per database (its
// "writer": src/connectors/NAME/NAME_destination.cc) owns the connection and the fast path of
// one run, and its Dialect (NAME_dialect.h) owns the SQL text.
//
//   write(batch)
//     │ plan: record ─▶ table (catalogue, columns loaded once) ─▶ rows (BatchPlan)
//     │ [ddl_commits_implicitly: schema pass over the runs]             (MySQL)
//     ▼
//   BEGIN ──▶ for each run (consecutive rows: one table, one action, one column list)
//     │         upsert:  missing columns? CREATE TABLE / ADD COLUMN (Dialect)  ─┐
//     │         delete/truncate of a table that does not exist: skipped        │ writer.write_run
//     │         writer.write_run(run): COPY / multi-row VALUES / prepared rows ◀┘
//     ▼
//   [checkpoint_in_destination: writer.save_position(batch.position())]
//   COMMIT ──▶ done(ok)
//     any error: writer.abort() (ROLLBACK), catalogue dropped ──▶ done(error)
//     a data error with isolate_rejected_rows: the batch replayed one row per statement, so that
//     the error names the record the server rejects (and a batch that then passes is written)
//
//   write_isolating(batch) (on_error: dlq, after a data error): one transaction, a savepoint per
//   record — SAVEPOINT, its rows one per statement, RELEASE; a data error: ROLLBACK TO it, the
//   record reported as rejected — so a batch with many rejects costs one pass, not a halving
//   against the server.
//
//   As a dead-letter queue (ConnectorContext::is_dead_letter_queue), each record's reason
//   (metadata sluice.error) is written into a column `sluice_error`: tables keep no metadata.
//
// The connection probe (connectors/common/connection_probe.h, role "destination"): this layer
// reports, for writers with a server connection, every (re)connect attempt and every failure
// after which the writer dropped its connection. A connection is found lost only when a
// statement fails on it, so between batches the probe shows the state of the last write; the
// runtime's retries of the failed batch are the reconnect attempts, and the first that connects
// counts in sluice_destination_reconnects_total.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "connectors/common/connection_probe.h"
#include "connectors/record_template.h"
#include "connectors/sql/batch_plan.h"
#include "connectors/sql/dialect.h"
#include "connectors/sql/sql_table.h"
#include "sluice/connector.h"

namespace sluice::sql {

// snapshot.reconcile: what a keyed table does with the rows a re-snapshot of it did not see.
enum class Reconcile : uint8_t {
  sweep,     // keys written between snapshot_begin and snapshot_end go to a side table; at
             // snapshot_end the table's rows with another key are deleted
  truncate,  // the table is emptied at snapshot_begin
  none,      // markers are ignored
};
// "sweep" | "truncate" | "none"; false for anything else.
bool parse_reconcile(std::string_view text, Reconcile* out) noexcept;

struct KeyedSqlOptions {
  std::string destination;  // starts every error: `sqlite destination "x.db"`
  RecordTemplate table;
  std::optional<RecordTemplate> schema;  // databases with schemas (PostgreSQL)
  std::string default_schema;            // when the schema template renders empty
  bool checkpoint_in_destination = false;
  bool isolate_rejected_rows = false;
  bool keep_dropped_columns = false;  // schema.keep_dropped_columns
  Reconcile reconcile = Reconcile::sweep;
};

// Why a destination column of type `destination_type` cannot hold the values of a source column
// of type `source_type` (both as their servers name them: "integer", "varchar(20)", "jsonb"),
// judged by kind (integer, number, boolean, text, temporal, json, binary); nullopt when it can,
// or when either kind is unknown.
std::optional<std::string> column_type_conflict(std::string_view source_type,
                                                std::string_view destination_type);

// The side table of a sweep of `table`: "sluice_sweep_<table>", cut (with a hash) to fit the
// 63-character identifiers of PostgreSQL with its index's "_key".
std::string sweep_table_name(std::string_view table);

class KeyedSqlDestination : public Destination {
 public:
  KeyedSqlDestination(const Dialect& dialect, KeyedSqlOptions options);

  Status open(const ConnectorContext& ctx) override;
  void write(Batch& batch, WriteDone done) override;
  bool isolates_rejected_records() const noexcept override { return supports_savepoints(); }
  Status write_isolating(Batch& batch, bool commit_position,
                         std::vector<RejectedRecord>& rejected) override;
  bool stores_positions() const noexcept override { return options_.checkpoint_in_destination; }
  Result<std::optional<std::string>> stored_position(std::string_view pipeline_id) override;
  // Schema changes and snapshot markers are applied in order with the rows.
  bool accepts_control_records() const noexcept override { return true; }
  Status erase_stored_position(std::string_view pipeline_id) override;
  void close() noexcept override;
  Status check_routing(const std::vector<SourceTable>& tables) override;
  // `sluice doctor` (keyed_sql_doctor.cc): connects, then for each table the source's tables go
  // to: the writer's privilege checks, and an existing table's key and column types against the
  // source's. Nothing is created or written.
  Result<std::vector<DoctorCheck>> doctor(const ConnectorContext& ctx,
                                          const std::vector<SourceTable>& tables) override;

 protected:
  // ── the writer: what depends on the database's client library ──
  // Connects (open) or reconnects (a write after a lost connection).
  virtual Status connect() = 0;
  // Whether connect() reaches a server over a connection that can be lost: then the layer
  // publishes the connection probe (sluice_destination_connected, …).
  virtual bool has_server_connection() const noexcept { return true; }
  virtual bool connected() const noexcept = 0;
  virtual void disconnect() noexcept = 0;
  // Runs once connected in open(): e.g. creates the checkpoint table.
  virtual Status prepare_session() { return ok_status(); }
  virtual Status begin() = 0;
  virtual Status commit() = 0;
  // Rolls back the failed batch's transaction if one is open; drops a broken connection.
  virtual void abort() noexcept = 0;
  // A new table object (a subclass may carry its own per-table state) — columns not yet loaded.
  virtual std::unique_ptr<SqlTable> make_table() {
    return std::make_unique<SqlTable>(dialect_.folds_case());
  }
  // Reads the table's columns; `exists` false if there is no such table.
  virtual Status load_columns(SqlTable& t) = 0;
  // Before the first CREATE TABLE of `t` (PostgreSQL creates its schema).
  virtual Status before_create_table(SqlTable&, const Record&) { return ok_status(); }
  // Runs DDL for `t`, errors naming the record; `adding_column`: a concurrent writer may have
  // added it first, which is no error.
  virtual Status ddl(const std::string& sql, SqlTable& t, const Record& r, std::string_view what,
                     bool adding_column) = 0;
  // Writes the run plan().rows()[first, end): upserts, deletes (table exists) or one truncate.
  virtual Status write_run(size_t first, size_t end) = 0;
  // Inside the batch's transaction: the position commits (or rolls back) with the rows.
  virtual Status save_position(std::string_view position) = 0;
  virtual Result<std::optional<std::string>> load_position(std::string_view pipeline_id) = 0;
  // Deletes the stored position of `pipeline_id` (its own transaction).
  virtual Status erase_position(std::string_view /*pipeline_id*/) {
    return Error(Errc::unsupported, options_.destination +
                                        ": cannot erase the stored position; drop the "
                                        "sluice_checkpoints table by hand");
  }
  // Drops what the writer caches besides the catalogue (prepared statements, staging tables).
  virtual void forget() noexcept {}
  // Savepoints inside the batch's transaction (write_isolating): runs `sql` (SAVEPOINT x,
  // RELEASE SAVEPOINT x, ROLLBACK TO SAVEPOINT x: the same text in every supported database).
  virtual bool supports_savepoints() const noexcept { return false; }
  virtual Status savepoint(std::string_view /*sql*/) {
    return Error(Errc::unsupported, options_.destination + ": no savepoints");
  }
  // write_isolating's fast path, where the writer has one: the rows [first, end) of one record
  // (upserts or deletes of an existing table that needs no new column) in one round trip inside
  // SAVEPOINT sluice_record; on a data error rolled back to it, and the error returned.
  virtual bool writes_guarded_records() const noexcept { return false; }
  virtual Status write_guarded_record(size_t /*first*/, size_t /*end*/) {
    return Error(Errc::unsupported, options_.destination + ": no guarded records");
  }
  // `sluice doctor`, once connected: what the writer checks of one table the pipeline would
  // write (`t` loaded: exists, columns), e.g. the privileges to create or write it.
  virtual void doctor_table(SqlTable& /*t*/, std::vector<DoctorCheck>& /*out*/) {}
  // Each column of an existing table with its type as the database names it ("integer"), for
  // the conflict check; empty: not known (no check).
  virtual Result<std::vector<std::pair<std::string, std::string>>> column_types(SqlTable&) {
    return std::vector<std::pair<std::string, std::string>>{};
  }
  // `sluice doctor`, once per destination after connecting (e.g. the checkpoint table).
  virtual void doctor_session(std::vector<DoctorCheck>& /*out*/) {}
  // Drops what the writer caches for one table whose columns changed (after DDL).
  virtual void forget_table(SqlTable&) noexcept {}
  // The table's primary key columns in key order (empty: none); snapshot.reconcile: sweep.
  virtual Status load_key_columns(SqlTable&, std::vector<std::string>& out) {
    out.clear();
    return ok_status();
  }
  // Whether the (existing) table holds a row; snapshot.reconcile: sweep skips its side table for
  // a table empty at snapshot_begin. The default (true) always sweeps.
  virtual Result<bool> table_has_rows(SqlTable&) { return true; }

  const BatchPlan& plan() const noexcept { return plan_; }
  Status check_one_source_schema(SqlTable& t, const Record& r);
  Error routing_collision(std::string_view first_schema, std::string_view second_schema,
                          std::string_view table, std::string_view destination_table) const;
  Error record_error(const SqlTable& t, const Record& r, Errc code, std::string_view what,
                     bool retriable = false) const {
    return sql::record_error(options_.destination, t, r, code, what, retriable);
  }
  void forget_tables() noexcept;
  // The writer gave its connection up as dead (the server stayed silent beyond its timeout):
  // counted (sluice_destination_connection_timeouts_total) and shown down.
  void connection_timed_out() noexcept { probe_.timed_out(); }

  const Dialect& dialect_;
  KeyedSqlOptions options_;
  std::string pipeline_id_;
  bool dead_letter_queue_ = false;

 private:
  // connect() unless connected, its outcome reported to the probe.
  Status ensure_connected();
  // After a failed statement: if the writer dropped its connection, the probe shows it down.
  void note_failure() noexcept;
  Status write_batch(const Batch& batch, size_t max_rows);
  Status apply(const Batch& batch, size_t max_rows);
  Status apply_isolating(const Batch& batch, bool commit_position,
                         std::vector<RejectedRecord>& rejected);
  // Writes rows [first, end) one per statement (upserts evolve the table first unless the
  // dialect did that before the transaction).
  Status write_rows(size_t first, size_t end, bool ddl_done);
  // Whether one record's rows can take write_guarded_record.
  bool guarded_fast_path(size_t first, size_t end);
  // Dead-letter queue: copies each record's meta::kError into after.sluice_error.
  void add_reason_column(Batch& batch);
  Result<SqlTable*> table_for(const Record& r);
  Result<SqlTable*> find_table(std::string_view schema, std::string_view name);
  // Plans the sweep state of `t` around record `r` (snapshot.reconcile: sweep).
  Status plan_sweep(const Record& r, SqlTable& t);
  Result<SqlTable*> sweep_table_of(const SqlTable& t);
  // An update's key moved: the stored row goes to the new key (its unsent columns stay).
  Status move_row(const PlannedRow& row);
  // A control row: a schema change or a marker.
  Status apply_control(const PlannedRow& row);
  Status apply_schema_change(SqlTable& t, const Record& r);
  Status apply_marker(SqlTable& t, const Record& r);
  // DDL (or a statement around it) of a control record; a data error becomes Errc::unsupported
  // (a schema change is not a row: never dead-lettered).
  Status control_statement(const std::string& sql, SqlTable& t, const Record& r,
                           std::string_view what, bool adding_column = false);
  // Creates the table or adds the columns the run [first, end) needs.
  Status evolve(size_t first, size_t end);

  BatchPlan plan_;
  TableCatalogue catalogue_;
  std::string schema_buf_, table_buf_;
  std::vector<ColumnDef> missing_;
  ConnectionProbe probe_;
  std::vector<std::string> key_names_;
  // snapshot_begin markers of this batch whose table did not exist when planned: nothing to
  // sweep, so no side table and no key copies.
  std::vector<const Record*> sweepless_begins_;
  std::vector<const SqlTable*> written_in_batch_;  // tables a record of the batch wrote so far
  bool sweep_off_by_template_ = false;  // reconcile sweep turned off: see the constructor
};

}  // namespace sluice::sql
