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
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "connectors/record_template.h"
#include "connectors/sql/batch_plan.h"
#include "connectors/sql/dialect.h"
#include "connectors/sql/sql_table.h"
#include "sluice/connector.h"

namespace sluice::sql {

struct KeyedSqlOptions {
  std::string destination;  // starts every error: `sqlite destination "x.db"`
  RecordTemplate table;
  std::optional<RecordTemplate> schema;  // databases with schemas (PostgreSQL)
  std::string default_schema;            // when the schema template renders empty
  bool checkpoint_in_destination = false;
  bool isolate_rejected_rows = false;
};

class KeyedSqlDestination : public Destination {
 public:
  KeyedSqlDestination(const Dialect& dialect, KeyedSqlOptions options);

  Status open(const ConnectorContext& ctx) override;
  void write(Batch& batch, WriteDone done) override;
  bool stores_positions() const noexcept override { return options_.checkpoint_in_destination; }
  Result<std::optional<std::string>> stored_position(std::string_view pipeline_id) override;
  Status erase_stored_position(std::string_view pipeline_id) override;
  void close() noexcept override;

 protected:
  // ── the writer: what depends on the database's client library ──
  // Connects (open) or reconnects (a write after a lost connection).
  virtual Status connect() = 0;
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

  const BatchPlan& plan() const noexcept { return plan_; }
  Error record_error(const SqlTable& t, const Record& r, Errc code, std::string_view what,
                     bool retriable = false) const {
    return sql::record_error(options_.destination, t, r, code, what, retriable);
  }
  void forget_tables() noexcept;

  const Dialect& dialect_;
  KeyedSqlOptions options_;
  std::string pipeline_id_;

 private:
  Status write_batch(const Batch& batch, size_t max_rows);
  Status apply(const Batch& batch, size_t max_rows);
  Result<SqlTable*> table_for(const Record& r);
  // Creates the table or adds the columns the run [first, end) needs.
  Status evolve(size_t first, size_t end);

  BatchPlan plan_;
  TableCatalogue catalogue_;
  std::string schema_buf_, table_buf_;
  std::vector<ColumnDef> missing_;
};

}  // namespace sluice::sql
