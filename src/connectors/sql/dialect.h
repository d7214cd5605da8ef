// What one SQL database says differently: identifiers, column types, DDL, statement shapes, the
// checkpoint table, and which of its errors are worth a retry. A Dialect is pure text and rules —
// it holds no connection — so every shape is unit-tested without a server. The database's writer
// (the KeyedSqlDestination subclass in src/connectors/NAME/) executes what it builds.
//
// docs/development/sql-destinations.md describes the layer and how to add a dialect.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "connectors/folded_identifiers.h"
#include "sluice/result.h"
#include "sluice/value.h"

namespace sluice::sql {

// A column the destination creates: its name, the value its type is chosen from, and whether it
// belongs to the primary key.
inline constexpr std::string_view kCheckpointTable = "sluice_checkpoints";

struct ColumnDef {
  std::string_view name;
  const Value* sample = nullptr;
  bool key = false;
};

// A column of a DML statement, in statement order.
struct ColumnRef {
  std::string_view name;
  bool key = false;
};

// What the caller does about a failed statement.
struct ErrorClass {
  Errc code = Errc::data;
  bool retriable = false;
  bool connection_lost = false;  // the connection is unusable: reconnect before the next write
};

class Dialect {
 public:
  virtual ~Dialect() = default;

  // ── identifiers ──
  // True when the server compares column names case-insensitively ("Id" and "id" are one column).
  virtual bool folds_case() const noexcept = 0;
  // `name` quoted so that any text (quotes, semicolons, spaces) is one identifier.
  virtual void append_identifier(std::string& out, std::string_view name) const = 0;
  std::string quote_identifier(std::string_view name) const {
    std::string out;
    append_identifier(out, name);
    return out;
  }
  // The table as statements name it; `schema` is empty where the database has none in play.
  virtual std::string qualified_table(std::string_view schema, std::string_view table) const {
    if (schema.empty()) return quote_identifier(table);
    return quote_identifier(schema) + "." + quote_identifier(table);
  }
  bool same_identifier(std::string_view a, std::string_view b) const noexcept {
    return folds_case() ? iequals(a, b) : a == b;
  }

  // ── types and DDL ──
  // The type of a column created from `sample` (a null or absent sample is allowed).
  virtual std::string column_type(const Value& sample, bool key) const = 0;
  // Created tables (and added columns) list the key columns first when true, else in the order
  // of the record's fields.
  virtual bool key_columns_first() const noexcept = 0;
  // A new column's type comes from the first non-null value of its run (true) or from the run's
  // first record (false).
  virtual bool sample_first_non_null() const noexcept { return false; }
  // DDL commits the open transaction (MySQL): the schema pass runs before the batch's BEGIN.
  virtual bool ddl_commits_implicitly() const noexcept { return false; }
  // "CREATE TABLE IF NOT EXISTS t (<column definitions>, PRIMARY KEY (<key
  // columns>))<table_options>"
  std::string create_table(std::string_view table, std::span<const ColumnDef> columns) const;
  // "ALTER TABLE t ADD COLUMN [IF NOT EXISTS] <column definition>"
  std::string add_column(std::string_view table, const ColumnDef& column) const;
  std::string drop_column(std::string_view table, std::string_view column) const;
  std::string rename_column(std::string_view table, std::string_view from,
                            std::string_view to) const;
  // Widens a column to `type` (alter_column_type whose value kind changed); "" where the database
  // needs nothing (SQLite: a column's declared type is an affinity, any value fits).
  virtual std::string alter_column_type(std::string_view table, std::string_view column,
                                        std::string_view type) const = 0;
  // "UPDATE t SET c = <literal>": every existing row reads `value` (a backfill).
  std::string set_all_rows(std::string_view table, std::string_view column,
                           const Value& value) const;
  // "UPDATE t SET to = COALESCE(from, to)": a replayed rename met the renamed column.
  std::string merge_column(std::string_view table, std::string_view from,
                           std::string_view to) const;
  // Moves the row of key `old_key` to `new_key` (same names, in order) unless a row holds the new
  // key already: "UPDATE t SET k = new WHERE k = old AND NOT EXISTS (row with k = new)".
  virtual std::string move_row(std::string_view table, std::span<const Field> old_key,
                               std::span<const Field> new_key) const;
  // A key value a literal can name exactly (not bytes, arrays, objects, json, floats).
  static bool literal_key(const Value& v) noexcept;

  // ── snapshot.reconcile: sweep ──
  std::string drop_table(std::string_view table) const {
    return "DROP TABLE IF EXISTS " + std::string(table);
  }
  // An empty table of `keys` typed as in `table`, and its unique index (upserts conflict on it).
  std::string create_sweep_table(std::string_view side, std::string_view table,
                                 std::span<const std::string> keys) const;
  std::string create_sweep_index(std::string_view side, std::string_view side_name,
                                 std::span<const std::string> keys) const;
  // Deletes the rows of `table` whose key is not in `side`.
  std::string sweep_delete(std::string_view table, std::string_view side,
                           std::span<const std::string> keys) const;
  // `v` as an SQL literal: NULL, TRUE/FALSE, numbers, everything else a quoted string in the
  // canonical text form of value.h (the form the writers bind), cast by the server.
  void append_literal(std::string& out, const Value& v) const;
  // "name TYPE<constraint>": a key column gets key_constraint(), any other nullable_constraint().
  void append_column_definition(std::string& out, const ColumnDef& c) const;

  // ── statement shapes shared by every dialect's fast path ──
  // "INSERT INTO table (c1,c2,...)": the dialect's writer appends the rows and append_upsert_tail.
  void append_insert_head(std::string& out, std::string_view table,
                          std::span<const ColumnRef> columns) const;
  // What follows the rows of an upsert: on a key conflict, the non-key columns are overwritten
  // (a statement of key columns only leaves the existing row as it is). By default
  // " ON CONFLICT (keys) DO UPDATE SET c = EXCLUDED.c, ..." (or DO NOTHING).
  virtual void append_upsert_tail(std::string& out, std::span<const ColumnRef> columns) const;
  // The names of `columns` (only the key columns when `keys_only`), comma-separated.
  void append_column_list(std::string& out, std::span<const ColumnRef> columns,
                          bool keys_only) const;
  // Empties a table (a source-side TRUNCATE).
  virtual std::string truncate(std::string_view table) const = 0;

 protected:
  // `name` between `quote`s, embedded quotes doubled: any text stays one identifier.
  static void append_delimited(std::string& out, std::string_view name, char quote);
  // The server's current UTC time, for updated_at.
  virtual std::string_view current_timestamp() const noexcept = 0;
  virtual std::string_view key_constraint() const noexcept { return " NOT NULL"; }
  virtual std::string_view nullable_constraint() const noexcept { return ""; }
  virtual std::string_view table_options() const noexcept { return ""; }
  // 'text' with quotes doubled (MySQL: backslashes doubled too).
  virtual void append_string_literal(std::string& out, std::string_view text) const;
  // A concurrent writer may add the same column first: "IF NOT EXISTS " where the server has it.
  virtual std::string_view add_column_if_not_exists() const noexcept { return ""; }

 public:
  // ── checkpoint_in_destination ──
  // The table holding (pipeline, position, updated_at), one row per pipeline.
  virtual std::string checkpoint_table_ddl(std::string_view table) const = 0;
  // Upserts the pipeline's row; `pipeline` and `position` are placeholders or literals.
  std::string checkpoint_upsert(std::string_view table, std::string_view pipeline,
                                std::string_view position) const;
  std::string checkpoint_select(std::string_view table, std::string_view pipeline) const;
  std::string checkpoint_delete(std::string_view table, std::string_view pipeline) const;
};

}  // namespace sluice::sql
