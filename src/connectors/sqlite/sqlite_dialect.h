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
  std::string truncate(std::string_view table) const override {
    return "DELETE FROM " + std::string(table);
  }
  std::string checkpoint_table_ddl(std::string_view table) const override;
  // Nothing to do: a declared type is an affinity, every value is stored as bound.
  std::string alter_column_type(std::string_view, std::string_view,
                                std::string_view) const override {
    return {};
  }

  // INSERT INTO t (c1,..) VALUES(?,..) ON CONFLICT(keys) DO ...: parameter i is column i.
  std::string upsert(std::string_view table, std::span<const sql::ColumnRef> columns) const;
  // DELETE FROM t WHERE k1=? AND k2=?
  std::string delete_by_key(std::string_view table, std::span<const sql::ColumnRef> keys) const;

  // A result code: Errc, retriable (busy, locked), and whether the handle is unusable (never:
  // an embedded database has no connection to lose).
  static sql::ErrorClass classify(int rc) noexcept;

 protected:
  std::string_view current_timestamp() const noexcept override {
    return "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')";
  }
  // Keys keep SQLite's own rules (no NOT NULL added): key values are checked before binding.
  std::string_view key_constraint() const noexcept override { return ""; }
};

}  // namespace sluice::sqlite
