#include "connectors/sql/dialect.h"

namespace sluice::sql {

std::string Dialect::drop_column(std::string_view table, std::string_view column) const {
  std::string sql = "ALTER TABLE ";
  sql += table;
  sql += " DROP COLUMN ";
  append_identifier(sql, column);
  return sql;
}

std::string Dialect::rename_column(std::string_view table, std::string_view from, std::string_view to) const {
  std::string sql = "ALTER TABLE ";
  sql += table;
  sql += " RENAME COLUMN ";
  append_identifier(sql, from);
  sql += " TO ";
  append_identifier(sql, to);
  return sql;
}

void Dialect::append_insert_head(std::string& out, std::string_view table, std::span<const ColumnRef> columns) const {
  out += "INSERT INTO ";
  out += table;
  out += " (";
  for (size_t i = 0; i < columns.size(); ++i) {
    if (i) out += ',';
    append_identifier(out, columns[i].name);
  }
  out += ')';
}

}  // namespace sluice::sql
