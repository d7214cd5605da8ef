#include "connectors/sqlite/sqlite_dialect.h"

#include "connectors/sqlite/sqlite_value_mapping.h"
#include "support/sqlite_handles.h"

namespace sluice::sqlite {

void SqliteDialect::append_identifier(std::string& out, std::string_view name) const {
  append_quoted_identifier(out, name);
}

std::string SqliteDialect::column_type(const Value& sample, bool) const {
  return std::string(sqlite_destination::column_type_for(sample.kind()));
}

namespace {

// "name" TYPE (no type: BLOB affinity, values kept as bound).
void append_column_def(const SqliteDialect& d, std::string& sql, const sql::ColumnDef& c) {
  d.append_identifier(sql, c.name);
  std::string type = d.column_type(*c.sample, c.key);
  if (!type.empty()) {
    sql += ' ';
    sql += type;
  }
}

}  // namespace

std::string SqliteDialect::create_table(std::string_view table, std::span<const sql::ColumnDef> columns) const {
  std::string sql = "CREATE TABLE IF NOT EXISTS " + std::string(table) + " (";
  for (const sql::ColumnDef& c : columns) {
    append_column_def(*this, sql, c);
    sql += ", ";
  }
  sql += "PRIMARY KEY(";
  bool first = true;
  for (const sql::ColumnDef& c : columns) {
    if (!c.key) continue;
    if (!first) sql += ',';
    first = false;
    append_identifier(sql, c.name);
  }
  sql += "))";
  return sql;
}

std::string SqliteDialect::add_column(std::string_view table, const sql::ColumnDef& column) const {
  std::string sql = "ALTER TABLE " + std::string(table) + " ADD COLUMN ";
  append_column_def(*this, sql, column);
  return sql;
}

void SqliteDialect::append_upsert_tail(std::string& out, std::span<const sql::ColumnRef> columns) const {
  out += " ON CONFLICT(";
  bool first = true;
  for (const sql::ColumnRef& c : columns) {
    if (!c.key) continue;
    if (!first) out += ',';
    first = false;
    append_identifier(out, c.name);
  }
  out += ") DO ";
  bool any = false;
  for (const sql::ColumnRef& c : columns) {
    if (c.key) continue;
    out += any ? "," : "UPDATE SET ";
    any = true;
    append_identifier(out, c.name);
    out += "=excluded.";
    append_identifier(out, c.name);
  }
  if (!any) out += "NOTHING";  // only key columns: the row existing is all there is to it
}

std::string SqliteDialect::upsert(std::string_view table, std::span<const sql::ColumnRef> columns) const {
  std::string sql;
  append_insert_head(sql, table, columns);
  sql += " VALUES(";
  for (size_t i = 0; i < columns.size(); ++i) sql += i ? ",?" : "?";
  sql += ')';
  append_upsert_tail(sql, columns);
  return sql;
}

std::string SqliteDialect::delete_by_key(std::string_view table, std::span<const sql::ColumnRef> keys) const {
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

std::string SqliteDialect::checkpoint_upsert(std::string_view table) const {
  return "INSERT INTO " + std::string(table) +
         "(pipeline, position, updated_at) VALUES(?1, ?2, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) ON "
         "CONFLICT(pipeline) DO UPDATE SET position = excluded.position, updated_at = excluded.updated_at";
}

std::string SqliteDialect::checkpoint_select(std::string_view table) const {
  return "SELECT position FROM " + std::string(table) + " WHERE pipeline = ?1";
}

sql::ErrorClass SqliteDialect::classify(int rc) noexcept { return {errc_for(rc), retriable(rc), false}; }

}  // namespace sluice::sqlite
