#include "connectors/sql/keyed_sql_destination.h"

#include <fmt/format.h>

#include <cstdint>

namespace sluice::sql {

KeyedSqlDestination::KeyedSqlDestination(const Dialect& dialect, KeyedSqlOptions options)
    : dialect_(dialect),
      options_(std::move(options)),
      plan_(dialect.folds_case(), options_.destination),
      catalogue_(dialect.folds_case()) {}

Status KeyedSqlDestination::open(const ConnectorContext& ctx) {
  pipeline_id_ = ctx.pipeline_id;
  SLUICE_TRY(connect());
  return prepare_session();
}

void KeyedSqlDestination::close() noexcept {
  forget_tables();
  disconnect();
}

void KeyedSqlDestination::forget_tables() noexcept {
  forget();
  catalogue_.clear();
}

Result<std::optional<std::string>> KeyedSqlDestination::stored_position(
    std::string_view pipeline_id) {
  if (!options_.checkpoint_in_destination) return std::optional<std::string>();
  if (!connected()) SLUICE_TRY(connect());
  return load_position(pipeline_id);
}

Status KeyedSqlDestination::erase_stored_position(std::string_view pipeline_id) {
  if (!options_.checkpoint_in_destination) return ok_status();
  if (!connected()) SLUICE_TRY(connect());
  return erase_position(pipeline_id);
}

void KeyedSqlDestination::write(Batch& batch, WriteDone done) {
  Status s = write_batch(batch, SIZE_MAX);
  if (!s && options_.isolate_rejected_rows && s.error().code() == Errc::data &&
      !s.error().retriable() && connected()) {
    // A multi-row statement failed (and was rolled back): replay the batch one row per statement
    // to name the record the server rejects. Should that succeed (the multi-row statement itself
    // was the problem), the batch is written.
    s = write_batch(batch, 1);
  }
  done(std::move(s));
}

Status KeyedSqlDestination::write_batch(const Batch& batch, size_t max_rows) {
  // An empty batch still commits its position where positions are stored here (the runtime
  // contract, sluice/connector.h): processors may have emptied it.
  if (batch.empty() && !(options_.checkpoint_in_destination && batch.has_position()))
    return ok_status();
  if (!connected()) SLUICE_TRY(connect());
  Status s = apply(batch, max_rows);
  if (!s) {
    abort();
    // DDL of the failed batch may be undone too: forget what the cache learnt from it.
    forget_tables();
  }
  return s;
}

Status KeyedSqlDestination::apply(const Batch& batch, size_t max_rows) {
  const bool ddl_first = dialect_.ddl_commits_implicitly();
  if (!ddl_first) SLUICE_TRY(begin());
  plan_.clear();
  for (const Record& r : batch.records()) {
    SLUICE_TRY_ASSIGN(SqlTable * t, table_for(r));
    SLUICE_TRY(plan_.add(r, *t));
  }
  const size_t n = plan_.rows().size();
  if (ddl_first) {
    // DDL would commit the batch's transaction half-way: the schema pass comes first.
    for (size_t i = 0; i < n;) {
      const size_t end = plan_.run_end(i, max_rows);
      if (plan_.row(i).action == RowAction::upsert) SLUICE_TRY(evolve(i, end));
      i = end;
    }
    SLUICE_TRY(begin());
  }
  for (size_t i = 0; i < n;) {
    const size_t end = plan_.run_end(i, max_rows);
    const PlannedRow& head = plan_.row(i);
    bool skip = false;
    if (head.action == RowAction::upsert) {
      if (!ddl_first) SLUICE_TRY(evolve(i, end));
    } else if (!head.table->exists) {
      // Nothing to delete from a table that was never created (re-checked: another writer may
      // have created it since).
      SLUICE_TRY(load_columns(*head.table));
      skip = !head.table->exists;
    }
    if (!skip) SLUICE_TRY(write_run(i, end));
    i = end;
  }
  if (options_.checkpoint_in_destination && batch.has_position())
    SLUICE_TRY(save_position(batch.position()));
  return commit();
}

Result<SqlTable*> KeyedSqlDestination::table_for(const Record& r) {
  std::string_view schema;
  if (options_.schema) {
    options_.schema->render(r, schema_buf_, options_.default_schema);
    schema = schema_buf_;
  }
  std::string_view name;
  if (options_.schema) {
    options_.table.render(r, table_buf_, kDefaultTableName);
    name = table_buf_;
  } else {
    name = options_.table.render(r);
  }
  return catalogue_.find(
      schema, name,
      [&](std::string_view s, std::string_view t) -> Result<std::unique_ptr<SqlTable>> {
        std::unique_ptr<SqlTable> table = make_table();
        table->schema = std::string(s);
        table->name = std::string(t);
        table->quoted = dialect_.qualified_table(table->schema, table->name);
        SLUICE_TRY(load_columns(*table));
        return table;
      });
}

Status KeyedSqlDestination::evolve(size_t first, size_t end) {
  const PlannedRow& head = plan_.row(first);
  SqlTable& t = *head.table;
  const Record& r = *head.record;
  if (!t.exists) SLUICE_TRY(load_columns(t));  // re-checked: another writer may have created it
  missing_columns(plan_, first, end, t, dialect_.key_columns_first(),
                  dialect_.sample_first_non_null(), missing_);
  if (missing_.empty()) return ok_status();
  if (!t.exists) {
    SLUICE_TRY(before_create_table(t, r));
    SLUICE_TRY(ddl(dialect_.create_table(t.quoted, missing_), t, r, "create the table", false));
    // Re-read rather than assume: another writer may have created it first (IF NOT EXISTS).
    SLUICE_TRY(load_columns(t));
    if (!t.exists)
      return record_error(t, r, Errc::internal, "the table is missing right after CREATE TABLE");
    missing_columns(plan_, first, end, t, dialect_.key_columns_first(),
                    dialect_.sample_first_non_null(), missing_);
    if (missing_.empty()) return ok_status();
  }
  for (const ColumnDef& c : missing_)
    SLUICE_TRY(ddl(dialect_.add_column(t.quoted, c), t, r,
                   fmt::format("add column {}", dialect_.quote_identifier(c.name)), true));
  return load_columns(t);
}

}  // namespace sluice::sql
