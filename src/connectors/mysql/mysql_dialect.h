// The MySQL/MariaDB dialect of the keyed SQL destination: `backtick` identifiers compared
// case-insensitively, the column types in mysql_destination.h's table (chosen from a run's first
// record), DDL before the batch's transaction (it commits implicitly), multi-row
// INSERT .. VALUES .. ON DUPLICATE KEY UPDATE upserts, DELETE .. WHERE (key) IN (..) deletes,
// DELETE FROM as truncate, errors classified by errno (mysql_connection.h).
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "connectors/sql/dialect.h"

namespace sluice::mysql {

class MysqlDialect final : public sql::Dialect {
 public:
  bool folds_case() const noexcept override { return true; }
  void append_identifier(std::string& out, std::string_view name) const override;
  std::string column_type(const Value& sample, bool key) const override;
  bool key_columns_first() const noexcept override { return false; }
  bool ddl_commits_implicitly() const noexcept override { return true; }
  void append_upsert_tail(std::string& out, std::span<const sql::ColumnRef> columns) const override;
  std::string truncate(std::string_view table) const override {
    return "DELETE FROM " + std::string(table);
  }
  std::string checkpoint_table_ddl(std::string_view table) const override;
  // UPDATE IGNORE t SET k = new WHERE k = old: MySQL cannot read the updated table in a subquery;
  // IGNORE leaves the row where the new key is taken (the delete of the old key follows).
  std::string move_row(std::string_view table, std::span<const Field> old_key,
                       std::span<const Field> new_key) const override;
  // ALTER TABLE t MODIFY COLUMN c type NULL
  std::string alter_column_type(std::string_view table, std::string_view column,
                                std::string_view type) const override;

  // "DELETE FROM t WHERE `k` IN (" or "DELETE FROM t WHERE (`k1`,`k2`) IN (": the writer appends
  // the key tuples and ")".
  void append_delete_head(std::string& out, std::string_view table,
                          std::span<const sql::ColumnRef> keys) const;

  static sql::ErrorClass classify(unsigned errno_value) noexcept;

 protected:
  std::string_view current_timestamp() const noexcept override { return "UTC_TIMESTAMP(6)"; }
  std::string_view nullable_constraint() const noexcept override { return " NULL"; }
  // Backslashes escape in MySQL string literals (unless NO_BACKSLASH_ESCAPES): doubled too.
  void append_string_literal(std::string& out, std::string_view text) const override;
  std::string_view table_options() const noexcept override {
    return " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4";
  }
};

// True when the exact decimal text fits DECIMAL(65,30): ≤ 35 integer and ≤ 30 fraction digits.
bool decimal_fits(std::string_view s) noexcept;

}  // namespace sluice::mysql
