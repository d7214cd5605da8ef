#include "connectors/sql/keyed_sql_destination.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

namespace sluice::sql {

namespace {
// The column a dead-letter table keeps the rejection's reason in.
constexpr std::string_view kReasonColumn = "sluice_error";
}  // namespace

KeyedSqlDestination::KeyedSqlDestination(const Dialect& dialect, KeyedSqlOptions options)
    : dialect_(dialect),
      options_(std::move(options)),
      plan_(dialect.folds_case(), options_.destination),
      catalogue_(dialect.folds_case()) {}

Status KeyedSqlDestination::open(const ConnectorContext& ctx) {
  pipeline_id_ = ctx.pipeline_id;
  dead_letter_queue_ = ctx.is_dead_letter_queue;
  if (has_server_connection()) probe_.register_into(ctx, "destination", /*with_phase=*/false);
  SLUICE_TRY(ensure_connected());
  Status s = prepare_session();
  if (!s) note_failure();
  return s;
}

void KeyedSqlDestination::close() noexcept {
  forget_tables();
  disconnect();
  probe_.unregister();
}

Status KeyedSqlDestination::ensure_connected() {
  if (connected()) return ok_status();
  Status s = connect();
  if (s) probe_.connected();
  else probe_.lost();
  return s;
}

void KeyedSqlDestination::note_failure() noexcept {
  if (!connected()) probe_.lost();
}

void KeyedSqlDestination::forget_tables() noexcept {
  forget();
  catalogue_.clear();
}

Result<std::optional<std::string>> KeyedSqlDestination::stored_position(
    std::string_view pipeline_id) {
  if (!options_.checkpoint_in_destination) return std::optional<std::string>();
  SLUICE_TRY(ensure_connected());
  auto position = load_position(pipeline_id);
  if (!position) note_failure();
  return position;
}

void KeyedSqlDestination::write(Batch& batch, WriteDone done) {
  if (dead_letter_queue_) add_reason_column(batch);
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
  SLUICE_TRY(ensure_connected());
  Status s = apply(batch, max_rows);
  if (!s) {
    abort();
    note_failure();
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

void KeyedSqlDestination::add_reason_column(Batch& batch) {
  for (Record& r : batch.records()) {
    const Value* reason = r.metadata.is_object() ? r.metadata.find(meta::kError) : nullptr;
    if (!reason || !r.after.is_object() || r.after.find(kReasonColumn)) continue;
    ObjectBuilder b = batch.object(r.after.size() + 1);
    for (const Field& f : r.after.fields()) b.add(f.name, f.value);
    b.add(kReasonColumn, *reason);
    r.after = b.build();
  }
}

Status KeyedSqlDestination::write_isolating(Batch& batch, bool commit_position,
                                            std::vector<RejectedRecord>& rejected) {
  rejected.clear();
  SLUICE_TRY(ensure_connected());
  Status s = apply_isolating(batch, commit_position, rejected);
  if (!s) {
    abort();
    note_failure();
    forget_tables();
    rejected.clear();
  }
  return s;
}

Status KeyedSqlDestination::apply_isolating(const Batch& batch, bool commit_position,
                                            std::vector<RejectedRecord>& rejected) {
  const Record* const base = batch.records().data();
  std::vector<bool> refused(batch.size(), false);
  auto refuse = [&](const Record* r, const Error& e) {
    const size_t i = size_t(r - base);
    if (!refused[i]) rejected.push_back({i, e});
    refused[i] = true;
  };
  // A data error that concerns one record (never a lost connection) rejects that record.
  auto record_level = [](const Status& st) {
    return st.error().code() == Errc::data && !st.error().retriable();
  };
  const bool ddl_first = dialect_.ddl_commits_implicitly();
  if (!ddl_first) SLUICE_TRY(begin());
  plan_.clear();
  for (const Record& r : batch.records()) {
    Result<SqlTable*> t = table_for(r);
    Status st = t ? plan_.add(r, *t.value()) : Status(t.error());
    if (st.ok()) continue;
    if (!record_level(st)) return st;
    refuse(&r, st.error());
  }
  const size_t n = plan_.rows().size();
  if (ddl_first) {
    for (size_t i = 0; i < n; ++i) {
      const PlannedRow& row = plan_.row(i);
      if (refused[size_t(row.record - base)] || row.action != RowAction::upsert) continue;
      if (Status st = evolve(i, i + 1); !st.ok()) {
        if (!record_level(st) || !connected()) return st;
        refuse(row.record, st.error());
      }
    }
    SLUICE_TRY(begin());
  }
  for (size_t i = 0; i < n;) {
    const Record* r = plan_.row(i).record;
    size_t j = i + 1;
    while (j < n && plan_.row(j).record == r) ++j;  // a moved key: delete + upsert, one record
    if (refused[size_t(r - base)]) {
      i = j;
      continue;
    }
    if (guarded_fast_path(i, j)) {
      Status st = write_guarded_record(i, j);
      if (!st.ok()) {
        if (!record_level(st) || !connected()) return st;
        refuse(r, st.error());
      }
      i = j;
      continue;
    }
    SqlTable& t = *plan_.row(i).table;
    const bool existed = t.exists;
    const size_t columns = t.columns.size();
    SLUICE_TRY(savepoint("SAVEPOINT sluice_record"));
    Status st = write_rows(i, j, ddl_first);
    if (st.ok()) {
      SLUICE_TRY(savepoint("RELEASE SAVEPOINT sluice_record"));
    } else {
      if (!record_level(st) || !connected()) return st;
      SLUICE_TRY(savepoint("ROLLBACK TO SAVEPOINT sluice_record"));
      // DDL inside the savepoint was undone with it: re-read what the catalogue learnt.
      if (t.exists != existed || t.columns.size() != columns) SLUICE_TRY(load_columns(t));
      refuse(r, st.error());
    }
    i = j;
  }
  if (commit_position && options_.checkpoint_in_destination && batch.has_position())
    SLUICE_TRY(save_position(batch.position()));
  SLUICE_TRY(commit());
  std::sort(rejected.begin(), rejected.end(),
            [](const RejectedRecord& a, const RejectedRecord& b) { return a.index < b.index; });
  return ok_status();
}

bool KeyedSqlDestination::guarded_fast_path(size_t first, size_t end) {
  if (!writes_guarded_records()) return false;
  for (size_t k = first; k < end; ++k) {
    const PlannedRow& row = plan_.row(k);
    if (row.action == RowAction::truncate || !row.table->exists) return false;
    if (row.action == RowAction::upsert) {
      missing_columns(plan_, k, k + 1, *row.table, dialect_.key_columns_first(),
                      dialect_.sample_first_non_null(), missing_);
      if (!missing_.empty()) return false;
    }
  }
  return true;
}

Status KeyedSqlDestination::write_rows(size_t first, size_t end, bool ddl_done) {
  for (size_t k = first; k < end; ++k) {
    const PlannedRow& row = plan_.row(k);
    if (row.action == RowAction::upsert) {
      if (!ddl_done) SLUICE_TRY(evolve(k, k + 1));
    } else if (!row.table->exists) {
      SLUICE_TRY(load_columns(*row.table));
      if (!row.table->exists) continue;  // nothing to delete from a table never created
    }
    SLUICE_TRY(write_run(k, k + 1));
  }
  return ok_status();
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
