// The SQLite dialect of the keyed SQL destination: "double-quoted" identifiers compared
// case-insensitively, column types from sqlite_value_mapping.h, ON CONFLICT upserts through one
// prepared statement per shape (stepped once per row: SQLite's fastest path), DELETE FROM as
// truncate, and result codes classified by support/sqlite_handles.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "connectors/sql/dialect.h"

namespace sluice::sqlite {

class SqliteDialect final : public sql::Dialect {
 public:
  bool folds_case() const noexcept override { return true; }
  void append_identifier(std::string& out, std::string_view name) const override;
  std::string column_type(const Value& sample, bool key) const override;
  bool key_columns_first() const noexcept override { return true; }
  std::string create_table(std::string_view table, std::span<const sql::ColumnDef> columns) const override;
  std::string add_column(std::string_view table, const sql::ColumnDef& column) const override;
  void append_upsert_tail(std::string& out, std::span<const sql::ColumnRef> columns) const override;
  std::string truncate(std::string_view table) const override { return "DELETE FROM " + std::string(table); }
  std::string checkpoint_table_ddl(std::string_view table) const override;

  // INSERT INTO t (c1,..) VALUES(?,..) ON CONFLICT(keys) DO ...: parameter i is column i.
  std::string upsert(std::string_view table, std::span<const sql::ColumnRef> columns) const;
  // DELETE FROM t WHERE k1=? AND k2=?
  std::string delete_by_key(std::string_view table, std::span<const sql::ColumnRef> keys) const;
  // ?1 pipeline, ?2 position; and the SELECT of ?1's position.
  std::string checkpoint_upsert(std::string_view table) const;
  std::string checkpoint_select(std::string_view table) const;

  // A result code: Errc, retriable (busy, locked), and whether the handle is unusable (never:
  // an embedded database has no connection to lose).
  static sql::ErrorClass classify(int rc) noexcept;
};

}  // namespace sluice::sqlite
