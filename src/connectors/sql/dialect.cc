#include "connectors/sql/dialect.h"

#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "sluice/json.h"
#include "sluice/temporal.h"

namespace sluice::sql {

void Dialect::append_delimited(std::string& out, std::string_view name, char quote) {
  out += quote;
  for (char c : name) {
    if (c == quote) out += quote;
    out += c;
  }
  out += quote;
}

std::string Dialect::checkpoint_upsert(std::string_view table, std::string_view pipeline,
                                       std::string_view position) const {
  static constexpr ColumnRef kColumns[] = {
      {"pipeline", true}, {"position", false}, {"updated_at", false}};
  std::string sql;
  append_insert_head(sql, table, kColumns);
  sql += " VALUES (";
  sql += pipeline;
  sql += ", ";
  sql += position;
  sql += ", ";
  sql += current_timestamp();
  sql += ')';
  append_upsert_tail(sql, kColumns);
  return sql;
}

std::string Dialect::checkpoint_select(std::string_view table, std::string_view pipeline) const {
  std::string sql = "SELECT ";
  append_identifier(sql, "position");
  sql += " FROM ";
  sql += table;
  sql += " WHERE ";
  append_identifier(sql, "pipeline");
  sql += " = ";
  sql += pipeline;
  return sql;
}

std::string Dialect::checkpoint_delete(std::string_view table, std::string_view pipeline) const {
  std::string sql = "DELETE FROM ";
  sql += table;
  sql += " WHERE ";
  append_identifier(sql, "pipeline");
  sql += " = ";
  sql += pipeline;
  return sql;
}

void Dialect::append_column_definition(std::string& out, const ColumnDef& c) const {
  append_identifier(out, c.name);
  const std::string type = column_type(*c.sample, c.key);
  if (!type.empty()) {  // SQLite: a column without a declared type keeps values as bound
    out += ' ';
    out += type;
  }
  out += c.key ? key_constraint() : nullable_constraint();
}

void Dialect::append_column_list(std::string& out, std::span<const ColumnRef> columns,
                                 bool keys_only) const {
  bool first = true;
  for (const ColumnRef& c : columns) {
    if (keys_only && !c.key) continue;
    if (!first) out += ", ";
    first = false;
    append_identifier(out, c.name);
  }
}

std::string Dialect::create_table(std::string_view table,
                                  std::span<const ColumnDef> columns) const {
  std::string sql = "CREATE TABLE IF NOT EXISTS " + std::string(table) + " (";
  std::vector<ColumnRef> keys;
  for (const ColumnDef& c : columns) {
    append_column_definition(sql, c);
    sql += ", ";
    if (c.key) keys.push_back({c.name, true});
  }
  sql += "PRIMARY KEY (";
  append_column_list(sql, keys, true);
  sql += "))";
  sql += table_options();
  return sql;
}

std::string Dialect::add_column(std::string_view table, const ColumnDef& column) const {
  std::string sql = "ALTER TABLE " + std::string(table) + " ADD COLUMN ";
  sql += add_column_if_not_exists();
  append_column_definition(sql, column);
  return sql;
}

std::string Dialect::drop_column(std::string_view table, std::string_view column) const {
  std::string sql = "ALTER TABLE " + std::string(table) + " DROP COLUMN ";
  append_identifier(sql, column);
  return sql;
}

std::string Dialect::rename_column(std::string_view table, std::string_view from,
                                   std::string_view to) const {
  std::string sql = "ALTER TABLE " + std::string(table) + " RENAME COLUMN ";
  append_identifier(sql, from);
  sql += " TO ";
  append_identifier(sql, to);
  return sql;
}

std::string Dialect::set_all_rows(std::string_view table, std::string_view column,
                                  const Value& value) const {
  std::string sql = "UPDATE " + std::string(table) + " SET ";
  append_identifier(sql, column);
  sql += " = ";
  append_literal(sql, value);
  return sql;
}

std::string Dialect::merge_column(std::string_view table, std::string_view from,
                                  std::string_view to) const {
  std::string sql = "UPDATE " + std::string(table) + " SET ";
  append_identifier(sql, to);
  sql += " = COALESCE(";
  append_identifier(sql, from);
  sql += ", ";
  append_identifier(sql, to);
  sql += ')';
  return sql;
}

namespace {
void append_names(const Dialect& d, std::string& out, std::span<const std::string> names) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) out += ", ";
    out += d.quote_identifier(names[i]);
  }
}
}  // namespace

bool Dialect::literal_key(const Value& v) noexcept {
  switch (v.kind()) {
    case ValueKind::boolean:
    case ValueKind::int64:
    case ValueKind::uint64:
    case ValueKind::decimal:
    case ValueKind::string:
    case ValueKind::date:
    case ValueKind::time:
    case ValueKind::timestamp:
    case ValueKind::timestamptz:
    case ValueKind::uuid: return true;
    default: return false;
  }
}

std::string Dialect::move_row(std::string_view table, std::span<const Field> old_key,
                              std::span<const Field> new_key) const {
  auto condition = [&](std::string& out, std::string_view prefix, std::span<const Field> key) {
    for (size_t i = 0; i < key.size(); ++i) {
      if (i) out += " AND ";
      out += prefix;
      append_identifier(out, key[i].name);
      out += " = ";
      append_literal(out, key[i].value);
    }
  };
  std::string sql = "UPDATE " + std::string(table) + " SET ";
  for (size_t i = 0; i < new_key.size(); ++i) {
    if (i) sql += ", ";
    append_identifier(sql, new_key[i].name);
    sql += " = ";
    append_literal(sql, new_key[i].value);
  }
  sql += " WHERE ";
  condition(sql, "", old_key);
  sql += " AND NOT EXISTS (SELECT 1 FROM " + std::string(table) + " AS sluice_moved WHERE ";
  condition(sql, "sluice_moved.", new_key);
  sql += ')';
  return sql;
}

std::string Dialect::create_sweep_table(std::string_view side, std::string_view table,
                                        std::span<const std::string> keys) const {
  std::string sql = "CREATE TABLE " + std::string(side) + " AS SELECT ";
  append_names(*this, sql, keys);
  sql += " FROM " + std::string(table) + " WHERE 1 = 0";
  return sql;
}

std::string Dialect::create_sweep_index(std::string_view side, std::string_view side_name,
                                        std::span<const std::string> keys) const {
  std::string sql = "CREATE UNIQUE INDEX ";
  append_identifier(sql, std::string(side_name) + "_key");
  sql += " ON " + std::string(side) + " (";
  append_names(*this, sql, keys);
  sql += ')';
  return sql;
}

std::string Dialect::sweep_delete(std::string_view table, std::string_view side,
                                  std::span<const std::string> keys) const {
  std::string sql = "DELETE FROM " + std::string(table) + " WHERE NOT EXISTS (SELECT 1 FROM " +
                    std::string(side) + " WHERE ";
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i) sql += " AND ";
    const std::string k = quote_identifier(keys[i]);
    sql += std::string(side) + "." + k + " = " + std::string(table) + "." + k;
  }
  sql += ')';
  return sql;
}

void Dialect::append_string_literal(std::string& out, std::string_view text) const {
  out += '\'';
  for (char c : text) {
    if (c == '\'') out += '\'';
    out += c;
  }
  out += '\'';
}

void Dialect::append_literal(std::string& out, const Value& v) const {
  switch (v.kind()) {
    case ValueKind::absent:
    case ValueKind::null: out += "NULL"; return;
    case ValueKind::boolean: out += v.as_bool() ? "TRUE" : "FALSE"; return;
    case ValueKind::int64: out += std::to_string(v.as_int64()); return;
    case ValueKind::uint64: out += std::to_string(v.as_uint64()); return;
    case ValueKind::float64:
      if (std::isfinite(v.as_double())) {
        out += fmt::format("{}", v.as_double());
        return;
      }
      append_string_literal(out, fmt::format("{}", v.as_double()));
      return;
    case ValueKind::decimal:
    case ValueKind::string:
    case ValueKind::json: append_string_literal(out, v.as_text()); return;
    case ValueKind::date: append_string_literal(out, format_date(v.as_date())); return;
    case ValueKind::time: append_string_literal(out, format_time(v.as_micros())); return;
    case ValueKind::timetz:
      append_string_literal(out, format_timetz(v.as_micros(), v.tz_offset_seconds()));
      return;
    case ValueKind::timestamp: append_string_literal(out, format_timestamp(v.as_micros())); return;
    case ValueKind::timestamptz:
      append_string_literal(out, format_timestamptz(v.as_micros()));
      return;
    case ValueKind::interval: append_string_literal(out, format_interval(v.as_interval())); return;
    case ValueKind::uuid: append_string_literal(out, format_uuid(v.uuid_bytes())); return;
    case ValueKind::bytes:
    case ValueKind::array:
    case ValueKind::object: break;
  }
  // Bytes, arrays, objects (rare as defaults): their JSON text.
  std::string json;
  encode_value_json(v, json);
  append_string_literal(out, json);
}

void Dialect::append_insert_head(std::string& out, std::string_view table,
                                 std::span<const ColumnRef> columns) const {
  out += "INSERT INTO ";
  out += table;
  out += " (";
  append_column_list(out, columns, false);
  out += ')';
}

void Dialect::append_upsert_tail(std::string& out, std::span<const ColumnRef> columns) const {
  out += " ON CONFLICT (";
  append_column_list(out, columns, true);
  out += ") DO ";
  bool any = false;
  for (const ColumnRef& c : columns) {
    if (c.key) continue;
    out += any ? ", " : "UPDATE SET ";
    any = true;
    append_identifier(out, c.name);
    out += " = EXCLUDED.";
    append_identifier(out, c.name);
  }
  if (!any) out += "NOTHING";  // only key columns: the row existing is all there is to it
}

}  // namespace sluice::sql
