// The PostgreSQL dialect of the keyed SQL destination: "double-quoted" identifiers compared
// exactly, "schema"."table" names, column types from the first non-null value of a run, and the
// COPY fast path's statement shapes: a temp staging table per run shape, one INSERT .. SELECT
// DISTINCT ON (key) .. ON CONFLICT per run (latest row of a key wins), DELETE .. USING for
// deletes, TRUNCATE. SQLSTATEs say what is retriable and what is about the data.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "connectors/sql/dialect.h"

namespace sluice::pg {

class PostgresDialect final : public sql::Dialect {
 public:
  bool folds_case() const noexcept override { return false; }
  void append_identifier(std::string& out, std::string_view name) const override;
  std::string column_type(const Value& sample, bool key) const override;
  bool key_columns_first() const noexcept override { return true; }
  bool sample_first_non_null() const noexcept override { return true; }
  std::string truncate(std::string_view table) const override {
    return "TRUNCATE " + std::string(table);
  }
  std::string checkpoint_table_ddl(std::string_view table) const override;
  // ALTER TABLE t ALTER COLUMN c TYPE type USING c::type
  std::string alter_column_type(std::string_view table, std::string_view column,
                                std::string_view type) const override;

  std::string create_schema(std::string_view schema) const;

  // ── the COPY path: `columns` are the run's, key columns first ──
  // A session-lived staging table shaped like `table`'s columns plus a sequence column; ON COMMIT
  // DELETE ROWS empties it at every commit.
  std::string create_stage(std::string_view stage, std::string_view table,
                           std::span<const sql::ColumnRef> columns) const;
  std::string copy_into_stage(std::string_view stage,
                              std::span<const sql::ColumnRef> columns) const;
  // The rows staged from sequence number `first_seq` on, the latest of each key.
  std::string upsert_from_stage(std::string_view table, std::string_view stage,
                                std::span<const sql::ColumnRef> columns, int64_t first_seq) const;
  std::string delete_using_stage(std::string_view table, std::string_view stage,
                                 std::span<const sql::ColumnRef> keys, int64_t first_seq) const;

  // A server error by SQLSTATE: deadlocks, serialization failures, lock timeouts, shutdowns and
  // connection states (class 08) are retriable; classes 22/23 and key/column mismatches are
  // Errc::data; anything else is left to the message (pg::classify_error).
  static bool is_retriable_state(std::string_view state) noexcept;
  static bool is_data_state(std::string_view state) noexcept;
  static sql::ErrorClass classify(std::string_view state, bool connection_ok) noexcept;

 protected:
  std::string_view current_timestamp() const noexcept override { return "now()"; }
  std::string_view add_column_if_not_exists() const noexcept override { return "IF NOT EXISTS "; }
};

}  // namespace sluice::pg
