#include "connectors/sqlite/sqlite_dialect.h"

#include "connectors/sqlite/sqlite_value_mapping.h"
#include "support/sqlite_handles.h"

namespace sluice::sqlite {

void SqliteDialect::append_identifier(std::string& out, std::string_view name) const {
  append_delimited(out, name, '"');
}

std::string SqliteDialect::column_type(const Value& sample, bool) const {
  return std::string(sqlite_destination::column_type_for(sample.kind()));
}

std::string SqliteDialect::upsert(std::string_view table,
                                  std::span<const sql::ColumnRef> columns) const {
  std::string sql;
  append_insert_head(sql, table, columns);
  sql += " VALUES(";
  for (size_t i = 0; i < columns.size(); ++i) sql += i ? ",?" : "?";
  sql += ')';
  append_upsert_tail(sql, columns);
  return sql;
}

std::string SqliteDialect::delete_by_key(std::string_view table,
                                         std::span<const sql::ColumnRef> keys) const {
  std::string sql = "DELETE FROM " + std::string(table) + " WHERE ";
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i) sql += " AND ";
    append_identifier(sql, keys[i].name);
    sql += "=?";
  }
  return sql;
}

std::string SqliteDialect::checkpoint_table_ddl(std::string_view table) const {
  return "CREATE TABLE IF NOT EXISTS " + std::string(table) +
         " (pipeline TEXT PRIMARY KEY NOT NULL, position BLOB NOT NULL, updated_at TEXT NOT NULL)";
}

sql::ErrorClass SqliteDialect::classify(int rc) noexcept {
  return {errc_for(rc), retriable(rc), false};
}

}  // namespace sluice::sqlite
