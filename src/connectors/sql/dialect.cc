#include "connectors/sql/dialect.h"

#include <vector>

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
