#include "connectors/postgres/postgres_dialect.h"

#include <fmt/format.h>

namespace sluice::pg {

namespace {

std::string_view scalar_type_for(ValueKind k) {
  switch (k) {
    case ValueKind::boolean: return "boolean";
    case ValueKind::int64: return "bigint";
    case ValueKind::uint64: return "numeric(20,0)";
    case ValueKind::float64: return "double precision";
    case ValueKind::decimal: return "numeric";
    case ValueKind::string: return "text";
    case ValueKind::bytes: return "bytea";
    case ValueKind::date: return "date";
    case ValueKind::time: return "time";
    case ValueKind::timetz: return "timetz";
    case ValueKind::timestamp: return "timestamp";
    case ValueKind::timestamptz: return "timestamptz";
    case ValueKind::interval: return "interval";
    case ValueKind::uuid: return "uuid";
    case ValueKind::json: return "jsonb";
    case ValueKind::object: return "jsonb";
    default: return "";
  }
}

constexpr std::string_view kSeq = "\"__sluice_seq\"";

}  // namespace

void PostgresDialect::append_identifier(std::string& out, std::string_view name) const {
  append_delimited(out, name, '"');
}

// Null/absent: text; homogeneous arrays the element type's array, other arrays jsonb.
std::string PostgresDialect::column_type(const Value& v, bool) const {
  if (v.kind() == ValueKind::array) {
    ValueKind elem = ValueKind::absent;
    for (const Value& item : v.items()) {
      if (item.is_null() || item.is_absent()) continue;
      if (item.kind() == ValueKind::array || item.kind() == ValueKind::object) return "jsonb";
      if (elem != ValueKind::absent && elem != item.kind()) return "jsonb";
      elem = item.kind();
    }
    if (elem == ValueKind::absent) return "jsonb";
    return std::string(scalar_type_for(elem)) + "[]";
  }
  std::string_view t = scalar_type_for(v.kind());
  return t.empty() ? "text" : std::string(t);
}

std::string PostgresDialect::checkpoint_table_ddl(std::string_view table) const {
  return "CREATE TABLE IF NOT EXISTS " + std::string(table) +
         " (pipeline text PRIMARY KEY, position bytea NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())";
}

std::string PostgresDialect::alter_column_type(std::string_view table, std::string_view column,
                                               std::string_view type) const {
  const std::string c = quote_identifier(column);
  return "ALTER TABLE " + std::string(table) + " ALTER COLUMN " + c + " TYPE " + std::string(type) +
         " USING " + c + "::" + std::string(type);
}

std::string PostgresDialect::create_schema(std::string_view schema) const {
  return "CREATE SCHEMA IF NOT EXISTS " + quote_identifier(schema);
}

std::string PostgresDialect::create_stage(std::string_view stage, std::string_view table,
                                          std::span<const sql::ColumnRef> columns) const {
  std::string sql =
      "CREATE TEMP TABLE " + std::string(stage) + " ON COMMIT DELETE ROWS AS SELECT 0::bigint AS ";
  sql += kSeq;
  for (const sql::ColumnRef& c : columns) {
    sql += ", ";
    append_identifier(sql, c.name);
  }
  sql += " FROM ";
  sql += table;
  sql += " WITH NO DATA";
  return sql;
}

std::string PostgresDialect::copy_into_stage(std::string_view stage,
                                             std::span<const sql::ColumnRef> columns) const {
  std::string sql = "COPY " + std::string(stage) + " (" + std::string(kSeq) + ", ";
  append_column_list(sql, columns, false);
  return sql + ") FROM STDIN";
}

std::string PostgresDialect::upsert_from_stage(std::string_view table, std::string_view stage,
                                               std::span<const sql::ColumnRef> columns,
                                               int64_t first_seq) const {
  std::string cols, keys;
  append_column_list(cols, columns, false);
  append_column_list(keys, columns, true);
  std::string sql = "INSERT INTO " + std::string(table) + " (" + cols + ") SELECT DISTINCT ON (" +
                    keys + ") " + cols + " FROM " + std::string(stage) + " WHERE " +
                    std::string(kSeq) + " >= " + std::to_string(first_seq) + " ORDER BY " + keys +
                    ", " + std::string(kSeq) + " DESC";
  append_upsert_tail(sql, columns);
  return sql;
}

std::string PostgresDialect::delete_using_stage(std::string_view table, std::string_view stage,
                                                std::span<const sql::ColumnRef> keys,
                                                int64_t first_seq) const {
  std::string sql = "DELETE FROM " + std::string(table) + " AS t USING " + std::string(stage) +
                    " AS s WHERE s." + std::string(kSeq) + " >= " + std::to_string(first_seq);
  for (const sql::ColumnRef& k : keys) {
    std::string q = quote_identifier(k.name);
    sql += " AND t." + q + " = s." + q;
  }
  return sql;
}

bool PostgresDialect::is_retriable_state(std::string_view s) noexcept {
  return s == "40P01" || s == "40001" || s == "57P01" || s == "57P02" || s == "57P03" ||
         s == "53300" || s == "55P03" || s == "53400" || (s.size() == 5 && s.substr(0, 2) == "08");
}

bool PostgresDialect::is_data_state(std::string_view s) noexcept {
  return s.size() == 5 && (s.substr(0, 2) == "22" || s.substr(0, 2) == "23" || s == "42P10" ||
                           s == "42804" || s == "42703" || s == "42P16");
}

sql::ErrorClass PostgresDialect::classify(std::string_view state, bool connection_ok) noexcept {
  if (!connection_ok) return {Errc::connection, true, true};
  if (is_retriable_state(state))
    return {state.substr(0, 2) == "40" || state == "55P03" ? Errc::conflict : Errc::connection,
            true, state.substr(0, 2) == "08"};
  if (is_data_state(state)) return {Errc::data, false, false};
  return {Errc::internal, false, false};
}

}  // namespace sluice::pg
