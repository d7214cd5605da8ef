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
  std::string create_table(std::string_view table, std::span<const sql::ColumnDef> columns) const override;
  std::string add_column(std::string_view table, const sql::ColumnDef& column) const override;
  void append_upsert_tail(std::string& out, std::span<const sql::ColumnRef> columns) const override;
  std::string truncate(std::string_view table) const override { return "DELETE FROM " + std::string(table); }
  std::string checkpoint_table_ddl(std::string_view table) const override;

  // "DELETE FROM t WHERE `k` IN (" or "DELETE FROM t WHERE (`k1`,`k2`) IN (": the writer appends
  // the key tuples and ")".
  void append_delete_head(std::string& out, std::string_view table, std::span<const sql::ColumnRef> keys) const;
  // `pipeline` a quoted literal, `position_hex` the position as hex digits.
  std::string checkpoint_upsert(std::string_view table, std::string_view pipeline, std::string_view position_hex) const;
  std::string checkpoint_select(std::string_view table, std::string_view pipeline) const;

  static sql::ErrorClass classify(unsigned errno_value) noexcept;
};

// True when the exact decimal text fits DECIMAL(65,30): ≤ 35 integer and ≤ 30 fraction digits.
bool decimal_fits(std::string_view s) noexcept;

}  // namespace sluice::mysql
