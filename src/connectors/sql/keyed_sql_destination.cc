#include "connectors/sql/keyed_sql_destination.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string_view>
#include <utility>

#include "sluice/batch.h"
#include "sluice/schema_change.h"

namespace sluice::sql {

namespace {
// The column a dead-letter table keeps the rejection's reason in.
constexpr std::string_view kReasonColumn = "sluice_error";

// The value kind a source column type holds (PostgreSQL and MySQL spellings), so that a column
// added without a default gets the type its values will get; absent when unknown (the dialect's
// type for a null: text).
ValueKind kind_of_source_type(std::string_view type) {
  std::string t;  // lower case, without "(n)" groups: "timestamp(3) with time zone"
  int depth = 0;
  for (char c : type) {
    if (c == '[') break;
    if (c == '(') ++depth;
    if (depth == 0) t += char(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    if (c == ')' && depth > 0) --depth;
  }
  for (size_t p; (p = t.find("  ")) != std::string::npos;) t.erase(p, 1);
  while (!t.empty() && t.back() == ' ') t.pop_back();
  if (type.find('[') != std::string_view::npos || (!t.empty() && t[0] == '_'))
    return ValueKind::absent;  // arrays: typed from their values
  const bool is_unsigned = iequals(type.substr(type.size() > 8 ? type.size() - 8 : 0), "unsigned");
  auto starts = [&](std::string_view p) { return t.compare(0, p.size(), p) == 0; };
  if (t == "bool" || t == "boolean") return ValueKind::boolean;
  if (starts("bigint") && is_unsigned) return ValueKind::uint64;
  if (t == "smallint" || t == "integer" || t == "int" || t == "bigint" || t == "int2" ||
      t == "int4" || t == "int8" || t == "tinyint" || t == "mediumint" || t == "serial" ||
      t == "bigserial" || t == "smallserial" || starts("int ") || starts("bigint ") ||
      starts("smallint ") || starts("tinyint ") || starts("mediumint "))
    return ValueKind::int64;
  if (t == "numeric" || t == "decimal" || starts("numeric ") || starts("decimal "))
    return ValueKind::decimal;
  if (t == "real" || t == "float" || t == "float4" || t == "float8" || t == "double" ||
      t == "double precision" || starts("double ") || starts("float "))
    return ValueKind::float64;
  if (t == "text" || t == "varchar" || t == "character varying" || t == "char" ||
      t == "character" || t == "bpchar" || t == "citext" || t == "name" || t == "tinytext" ||
      t == "mediumtext" || t == "longtext" || starts("enum") || starts("varchar ") ||
      starts("char "))
    return ValueKind::string;
  if (t == "bytea" || t == "blob" || t == "tinyblob" || t == "mediumblob" || t == "longblob" ||
      t == "binary" || t == "varbinary")
    return ValueKind::bytes;
  if (t == "date") return ValueKind::date;
  if (t == "time" || t == "time without time zone") return ValueKind::time;
  if (t == "timetz" || t == "time with time zone") return ValueKind::timetz;
  if (t == "timestamp" || t == "timestamp without time zone" || t == "datetime")
    return ValueKind::timestamp;
  if (t == "timestamptz" || t == "timestamp with time zone") return ValueKind::timestamptz;
  if (t == "interval") return ValueKind::interval;
  if (t == "uuid") return ValueKind::uuid;
  if (t == "json" || t == "jsonb") return ValueKind::json;
  return ValueKind::absent;
}

// A value of `kind` for Dialect::column_type (which looks at the kind only).
Value sample_of(ValueKind kind) {
  static const uint8_t kZeroUuid[16] = {};
  static const Interval kZeroInterval{};
  switch (kind) {
    case ValueKind::boolean: return Value::boolean(false);
    case ValueKind::int64: return Value::int64(0);
    case ValueKind::uint64: return Value::uint64(0);
    case ValueKind::float64: return Value::float64(0);
    case ValueKind::decimal: return Value::decimal("0");
    case ValueKind::string: return Value::string("");
    case ValueKind::bytes: return Value::bytes("");
    case ValueKind::date: return Value::date(0);
    case ValueKind::time: return Value::time(0);
    case ValueKind::timetz: return Value::timetz(0, 0);
    case ValueKind::timestamp: return Value::timestamp(0);
    case ValueKind::timestamptz: return Value::timestamptz(0);
    case ValueKind::interval: return Value::interval(&kZeroInterval);
    case ValueKind::uuid: return Value::uuid(kZeroUuid);
    case ValueKind::json: return Value::json("null");
    default: return Value::null();
  }
}

}  // namespace

bool parse_reconcile(std::string_view text, Reconcile* out) noexcept {
  if (text == "sweep") *out = Reconcile::sweep;
  else if (text == "truncate") *out = Reconcile::truncate;
  else if (text == "none") *out = Reconcile::none;
  else return false;
  return true;
}

std::string sweep_table_name(std::string_view table) {
  std::string name = "sluice_sweep_" + std::string(table);
  if (name.size() <= 58) return name;  // room for its index's "_key" in 63 (64 in MySQL)
  return fmt::format("{}_{:016x}", name.substr(0, 41), std::hash<std::string_view>{}(table));
}

KeyedSqlDestination::KeyedSqlDestination(const Dialect& dialect, KeyedSqlOptions options)
    : dialect_(dialect),
      options_(std::move(options)),
      plan_(dialect.folds_case(), options_.destination),
      catalogue_(dialect.folds_case()) {
  // A sweep removes every row of the destination table that one source table's snapshot did not
  // see: only right when the table holds one source table's rows. A `table` template without
  // {{table}} (a fixed name, {{schema}} alone) gathers several source tables into one, and a
  // sweep after one of them would delete the others' rows.
  if (options_.reconcile == Reconcile::sweep) {
    const auto names = options_.table.placeholders();
    if (std::find(names.begin(), names.end(), "table") == names.end()) {
      options_.reconcile = Reconcile::none;
      sweep_off_by_template_ = true;
    }
  }
}

Status KeyedSqlDestination::open(const ConnectorContext& ctx) {
  pipeline_id_ = ctx.pipeline_id;
  if (sweep_off_by_template_)
    spdlog::info(
        "pipeline {}: {}: snapshot.reconcile sweep is off: the `table` template has no "
        "{{{{table}}}}, so one destination table may hold several source tables' rows (set "
        "snapshot.reconcile: truncate to reload on a re-snapshot)",
        pipeline_id_, options_.destination);
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

Status KeyedSqlDestination::erase_stored_position(std::string_view pipeline_id) {
  if (!options_.checkpoint_in_destination) return ok_status();
  if (!connected()) SLUICE_TRY(connect());
  return erase_position(pipeline_id);
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
  sweepless_begins_.clear();
  written_in_batch_.clear();
  for (const Record& r : batch.records()) {
    SLUICE_TRY_ASSIGN(SqlTable * t, table_for(r));
    SLUICE_TRY(plan_.add(r, *t));
    if (options_.reconcile == Reconcile::sweep) SLUICE_TRY(plan_sweep(r, *t));
  }
  plan_.finish();
  const size_t n = plan_.rows().size();
  // Segments of rows between control rows. Where DDL commits implicitly (MySQL), each segment
  // is a transaction of its own with its schema pass before it, and a control row runs between
  // two (its statements commit by themselves); the position commits with the last segment.
  for (size_t i = 0;;) {
    size_t seg_end = i;
    while (seg_end < n && plan_.row(seg_end).action != RowAction::control) ++seg_end;
    if (ddl_first) {
      // DDL would commit the transaction half-way: the segment's schema pass comes first.
      for (size_t j = i; j < seg_end;) {
        const size_t end = plan_.run_end(j, max_rows);
        if (plan_.row(j).action == RowAction::upsert) SLUICE_TRY(evolve(j, end));
        j = end;
      }
      SLUICE_TRY(begin());
    }
    while (i < seg_end) {
      const size_t end = std::min(plan_.run_end(i, max_rows), seg_end);
      const PlannedRow& head = plan_.row(i);
      bool skip = false;
      if (head.action == RowAction::upsert) {
        if (!ddl_first) SLUICE_TRY(evolve(i, end));
      } else if (head.action == RowAction::move) {
        SLUICE_TRY(move_row(head));
        i = end;
        continue;
      } else if (!head.table->exists) {
        // Nothing to delete from a table that was never created (re-checked: another writer may
        // have created it since).
        SLUICE_TRY(load_columns(*head.table));
        skip = !head.table->exists;
      }
      if (!skip) SLUICE_TRY(write_run(i, end));
      i = end;
    }
    if (seg_end == n) break;
    if (ddl_first) SLUICE_TRY(commit());
    SLUICE_TRY(apply_control(plan_.row(seg_end)));
    i = seg_end + 1;
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
  sweepless_begins_.clear();
  written_in_batch_.clear();
  for (const Record& r : batch.records()) {
    Result<SqlTable*> t = table_for(r);
    Status st = t ? plan_.add(r, *t.value()) : Status(t.error());
    if (st.ok() && options_.reconcile == Reconcile::sweep) st = plan_sweep(r, *t.value());
    if (st.ok()) continue;
    if (!record_level(st) || is_control(r.op)) return st;
    refuse(&r, st.error());
  }
  plan_.finish();
  const size_t n = plan_.rows().size();
  // Segments between control rows, as in apply(): a control row is not a record that can be
  // refused — its failure fails the write.
  for (size_t i = 0;;) {
    size_t seg_end = i;
    while (seg_end < n && plan_.row(seg_end).action != RowAction::control) ++seg_end;
    if (ddl_first) {
      for (size_t k = i; k < seg_end; ++k) {
        const PlannedRow& row = plan_.row(k);
        if (refused[size_t(row.record - base)] || row.action != RowAction::upsert) continue;
        if (Status st = evolve(k, k + 1); !st.ok()) {
          if (!record_level(st) || !connected()) return st;
          refuse(row.record, st.error());
        }
      }
      SLUICE_TRY(begin());
    }
    while (i < seg_end) {
      const Record* r = plan_.row(i).record;
      size_t j = i + 1;
      // A moved key: its rows, one record.
      while (j < seg_end && plan_.row(j).record == r) ++j;
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
    if (seg_end == n) break;
    if (ddl_first) SLUICE_TRY(commit());
    SLUICE_TRY(apply_control(plan_.row(seg_end)));
    i = seg_end + 1;
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
    if (row.action == RowAction::truncate || row.action == RowAction::move || !row.table->exists)
      return false;
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
    if (row.action == RowAction::move) {
      SLUICE_TRY(move_row(row));
      continue;
    }
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
  SLUICE_TRY_ASSIGN(SqlTable * table, find_table(schema, name));
  if (options_.table.table_only()) SLUICE_TRY(check_one_source_schema(*table, r));
  return table;
}

Result<SqlTable*> KeyedSqlDestination::find_table(std::string_view schema, std::string_view name) {
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

Status KeyedSqlDestination::check_routing(const std::vector<SourceTable>& tables) {
  if (!options_.table.table_only()) return ok_status();  // a template of the user's own choosing
  // Rendered (schema, table) -> the first source schema routed there.
  std::map<std::pair<std::string, std::string>, std::string, std::less<>> owner;
  std::string schema_buf;
  for (const SourceTable& t : tables) {
    Batch scratch;
    Record r;
    r.metadata = scratch.object(2)
                     .add(meta::kSchema, Value::string(t.schema))
                     .add(meta::kTable, Value::string(t.table))
                     .build();
    schema_buf.clear();
    if (options_.schema) options_.schema->render(r, schema_buf, options_.default_schema);
    std::string name = t.table;
    if (dialect_.folds_case())
      for (char& c : name) c = (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c;
    auto [it, fresh] = owner.try_emplace({schema_buf, std::move(name)}, t.schema);
    if (!fresh && it->second != t.schema)
      return routing_collision(it->second, t.schema, t.table,
                               dialect_.qualified_table(schema_buf, t.table));
  }
  return ok_status();
}

Error KeyedSqlDestination::routing_collision(std::string_view first_schema,
                                             std::string_view second_schema, std::string_view table,
                                             std::string_view destination_table) const {
  const std::string separate =
      options_.schema ? "set `schema: \"{{schema}}\"` (one destination schema per source schema) "
                        "or `table: \"{{schema}}_{{table}}\"`"
                      : "set `table: \"{{schema}}_{{table}}\"`";
  return Error(
      Errc::config,
      fmt::format("{}: source tables {}.{} and {}.{} would both be written to table {} "
                  "(table: {{{{table}}}}), where rows sharing a key merge; {} to keep "
                  "them apart, or name one table explicitly (table: NAME) to merge them "
                  "on purpose",
                  options_.destination, first_schema.empty() ? "?" : first_schema, table,
                  second_schema.empty() ? "?" : second_schema, table, destination_table, separate));
}

// With `table: {{table}}`, s1.t and s2.t of the source both render to t: rows sharing a key would
// silently merge. The first source schema seen for a destination table owns it; another stops the
// pipeline naming the setting that keeps them apart.
Status KeyedSqlDestination::check_one_source_schema(SqlTable& t, const Record& r) {
  const std::string_view schema = metadata_text(r, meta::kSchema);
  if (!t.source_schema) {
    t.source_schema = std::string(schema);
    return ok_status();
  }
  if (*t.source_schema == schema) return ok_status();
  return routing_collision(*t.source_schema, schema, t.name, t.quoted);
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

namespace sluice::sql {

Result<SqlTable*> KeyedSqlDestination::sweep_table_of(const SqlTable& t) {
  const std::string schema = t.schema, name = sweep_table_name(t.name);
  return find_table(schema, name);
}

Status KeyedSqlDestination::plan_sweep(const Record& r, SqlTable& t) {
  if (!t.sweep_known) {
    // A sweep that runs since an earlier batch (or run) left its side table.
    SLUICE_TRY_ASSIGN(SqlTable * side, sweep_table_of(t));
    t.sweep = side->exists ? side : nullptr;
    t.sweep_known = true;
  }
  if (r.op == Operation::marker) {
    const Value* m = r.metadata.find(meta::kMarker);
    const std::string_view marker = m && m->kind() == ValueKind::string ? m->as_text() : "";
    if (marker == meta::kSnapshotBegin) {
      // A table that does not exist yet, or exists but is empty (and no earlier record of this
      // batch wrote it), holds no row to sweep: no side table, no key copies (the common first
      // snapshot pays nothing for reconcile).
      if (!t.exists) SLUICE_TRY(load_columns(t));
      bool rows = t.exists;
      if (rows && std::find(written_in_batch_.begin(), written_in_batch_.end(), &t) ==
                      written_in_batch_.end()) {
        SLUICE_TRY_ASSIGN(rows, table_has_rows(t));
      }
      if (rows) {
        SLUICE_TRY_ASSIGN(t.sweep, sweep_table_of(t));
      } else {
        t.sweep = nullptr;
        sweepless_begins_.push_back(&r);  // apply_marker creates no side table for it
      }
    } else if (marker == meta::kSnapshotEnd) {
      t.sweep = nullptr;
    }
    return ok_status();
  }
  if (!is_control(r.op) &&
      std::find(written_in_batch_.begin(), written_in_batch_.end(), &t) == written_in_batch_.end())
    written_in_batch_.push_back(&t);
  if (t.sweep != nullptr && !is_control(r.op)) plan_.add_key_copy(*t.sweep);
  return ok_status();
}

Status KeyedSqlDestination::control_statement(const std::string& sql, SqlTable& t, const Record& r,
                                              std::string_view what, bool adding_column) {
  if (sql.empty()) return ok_status();
  Status s = ddl(sql, t, r, what, adding_column);
  if (!s && s.error().code() == Errc::data)
    return Error(Errc::unsupported, s.error().message(), false);
  return s;
}

Status KeyedSqlDestination::move_row(const PlannedRow& row) {
  SqlTable& t = *row.table;
  if (!t.exists) SLUICE_TRY(load_columns(t));
  if (!t.exists) return ok_status();
  auto old_key = plan_.keys(row), new_key = plan_.columns(row);
  for (const Field& f : old_key)
    if (!Dialect::literal_key(f.value)) return ok_status();  // delete + upsert, as before
  for (const Field& f : new_key)
    if (!Dialect::literal_key(f.value) || !t.has_column(f.name)) return ok_status();
  return ddl(dialect_.move_row(t.quoted, old_key, new_key), t, *row.record,
             "move the row to its new key", false);
}

Status KeyedSqlDestination::apply_control(const PlannedRow& row) {
  SqlTable& t = *row.table;
  const Record& r = *row.record;
  return r.op == Operation::schema ? apply_schema_change(t, r) : apply_marker(t, r);
}

Status KeyedSqlDestination::apply_schema_change(SqlTable& t, const Record& r) {
  auto change = schema_change_of(r);
  if (!change) return record_error(t, r, Errc::unsupported, change.error().message());
  const SchemaChange& c = change.value();
  // Exact: the table as it is now, not as the cache last read it.
  SLUICE_TRY(load_columns(t));
  if (!t.exists) return ok_status();  // the rows after the change create the table as they need
  const std::string col = dialect_.quote_identifier(c.column);
  const std::string what =
      fmt::format("apply {} of column {}", schema_change_kind_name(c.kind), col);
  switch (c.kind) {
    case SchemaChangeKind::add_column: {
      const bool has_default = !c.default_value.is_absent() && !c.default_value.is_null();
      if (t.has_column(c.column)) {
        // Kept after a drop (schema.keep_dropped_columns), or a replay: the column is made anew,
        // with the re-added column's type, so that no row reads the values of the older one (a
        // replay writes the rows after the change again).
        SLUICE_TRY(load_key_columns(t, key_names_));
        for (const std::string& k : key_names_)
          if (dialect_.same_identifier(k, c.column)) return load_columns(t);  // never a key
        SLUICE_TRY(control_statement(dialect_.drop_column(t.quoted, c.column), t, r, what));
      }
      const Value sample = has_default ? c.default_value : sample_of(kind_of_source_type(c.type));
      SLUICE_TRY(control_statement(
          dialect_.add_column(t.quoted, ColumnDef{c.column, &sample, false}), t, r, what, true));
      // Rows that existed before the change read the default (absent: NULL, as added).
      if (has_default)
        SLUICE_TRY(control_statement(dialect_.set_all_rows(t.quoted, c.column, c.default_value), t,
                                     r, what));
      break;
    }
    case SchemaChangeKind::drop_column:
      if (!options_.keep_dropped_columns && t.has_column(c.column))
        SLUICE_TRY(control_statement(dialect_.drop_column(t.quoted, c.column), t, r, what));
      break;
    case SchemaChangeKind::rename_column: {
      const bool has_from = t.has_column(c.column), has_to = t.has_column(c.to);
      if (has_from && !has_to) {
        SLUICE_TRY(control_statement(dialect_.rename_column(t.quoted, c.column, c.to), t, r, what));
      } else if (has_from && has_to && !dialect_.same_identifier(c.column, c.to)) {
        // A replay: rows written again before the rename re-created the old column. Their values
        // are the ones as of the rename; the rows after it are replayed too.
        SLUICE_TRY(control_statement(dialect_.merge_column(t.quoted, c.column, c.to), t, r, what));
        SLUICE_TRY(control_statement(dialect_.drop_column(t.quoted, c.column), t, r, what));
      }
      // Only the new name: done already. Neither: the rows after it add the column.
      break;
    }
    case SchemaChangeKind::alter_column_type: {
      if (!t.has_column(c.column)) break;
      // Destination types come from value kinds: a widening within one kind (int -> bigint,
      // varchar(n) -> text) needs nothing; a change of kind (int -> numeric) retypes the column.
      const ValueKind from = kind_of_source_type(c.from), to = kind_of_source_type(c.type);
      if (from == ValueKind::absent || to == ValueKind::absent || from == to) break;
      const Value sample = sample_of(to);
      SLUICE_TRY(control_statement(
          dialect_.alter_column_type(t.quoted, c.column, dialect_.column_type(sample, false)), t, r,
          what));
      break;
    }
  }
  forget_table(t);
  return load_columns(t);
}

Status KeyedSqlDestination::apply_marker(SqlTable& t, const Record& r) {
  const Value* m = r.metadata.find(meta::kMarker);
  const std::string_view marker = m && m->kind() == ValueKind::string ? m->as_text() : "";
  const bool begin = marker == meta::kSnapshotBegin, end = marker == meta::kSnapshotEnd;
  if (options_.reconcile == Reconcile::none || (!begin && !end)) return ok_status();
  SLUICE_TRY(load_columns(t));
  if (options_.reconcile == Reconcile::truncate) {
    if (begin && t.exists)
      SLUICE_TRY(control_statement(dialect_.truncate(t.quoted), t, r,
                                   "empty the table before the snapshot"));
    return ok_status();
  }
  SLUICE_TRY_ASSIGN(SqlTable * side, sweep_table_of(t));
  SLUICE_TRY(load_columns(*side));
  if (begin) {
    // A new sweep: keys of an earlier, unfinished one do not count.
    if (side->exists)
      SLUICE_TRY(
          control_statement(dialect_.drop_table(side->quoted), t, r, "drop the sweep table"));
    const bool planned = std::find(sweepless_begins_.begin(), sweepless_begins_.end(), &r) ==
                         sweepless_begins_.end();
    if (t.exists && planned) {
      SLUICE_TRY(load_key_columns(t, key_names_));
      if (key_names_.empty())
        return record_error(
            t, r, Errc::unsupported,
            "the table has no primary key, so snapshot.reconcile: sweep cannot tell "
            "its rows apart; set snapshot.reconcile: truncate (or none)");
      SLUICE_TRY(control_statement(dialect_.create_sweep_table(side->quoted, t.quoted, key_names_),
                                   t, r, "create the sweep table"));
      SLUICE_TRY(
          control_statement(dialect_.create_sweep_index(side->quoted, side->name, key_names_), t, r,
                            "create the sweep table's key"));
    }
  } else if (side->exists) {
    if (t.exists) {
      // The side table holds the key columns only.
      key_names_.clear();
      for (const auto& [name, tag] : side->columns) key_names_.push_back(name);
      SLUICE_TRY(control_statement(dialect_.sweep_delete(t.quoted, side->quoted, key_names_), t, r,
                                   "delete the rows the snapshot did not see"));
    }
    SLUICE_TRY(control_statement(dialect_.drop_table(side->quoted), t, r, "drop the sweep table"));
  }
  forget_table(*side);
  return load_columns(*side);
}

}  // namespace sluice::sql
