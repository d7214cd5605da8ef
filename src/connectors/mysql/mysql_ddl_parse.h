// A parser of the DDL (and DML) statements the binlog carries as QUERY events, as far as the
// source needs them: which table a statement touches and, for ALTER / CREATE TABLE, the column
// definitions — enough to keep the schema history (mysql_schema_history.cc) without asking the
// server, whose catalogue is already at a later state when older events are replayed.
//
// It is not a SQL parser: it tokenizes (backquoted names, strings, comments) and recognises the
// statement forms users write; anything else that names a captured table is reported as not
// understood, so the caller stops rather than guess.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::mysql::ddl {

struct QualifiedName {
  std::string db, table;
  bool operator==(const QualifiedName&) const = default;
};

struct ColumnDef {
  std::string name;
  std::string type;  // lowercased as written, without attributes: "varchar(20)", "int unsigned"
  std::string data_type;  // the base type as information_schema spells DATA_TYPE: "varchar", "int"
  std::vector<std::string> args;    // "(10,2)" → {"10", "2"}
  std::vector<std::string> labels;  // enum / set members
  bool is_unsigned = false;
  bool json = false;
  std::string charset;  // explicit CHARACTER SET (or "binary" for binary types); empty: the table's
  enum class Default : uint8_t { none, null, literal, expression } default_kind = Default::none;
  std::string default_text;  // literal: the value as text (strings unquoted)
  bool not_null = false;
  bool auto_increment = false;
  bool generated = false;  // GENERATED ALWAYS AS / AS (expr)
  bool primary_key = false;
};

enum class Place : uint8_t { last, first, after };

struct AlterClause {
  enum class Kind : uint8_t {
    add_column,
    drop_column,
    rename_column,
    change_column,  // CHANGE old new type (rename and/or retype)
    modify_column,
    add_primary_key,
    drop_primary_key,
    rename_table,
    convert_charset,   // CONVERT TO CHARACTER SET x: every text column
    default_charset,   // [DEFAULT] CHARACTER SET x: columns added later
    no_column_change,  // indexes, constraints, defaults, options
  } kind = Kind::no_column_change;
  ColumnDef def;       // add, change, modify
  std::string column;  // drop, rename, change, modify: the column as named before
  std::string to;      // rename: the new name
  Place place = Place::last;
  std::string after;             // place == after
  std::vector<std::string> key;  // add_primary_key
  QualifiedName new_table;       // rename_table
  std::string charset;           // convert_charset, default_charset
};

struct Statement {
  enum class Kind : uint8_t {
    other,  // not about a table's rows or columns (or a table-less statement)
    alter_table,
    create_table,
    drop_table,
    rename_table,
    truncate,
    dml,  // INSERT / UPDATE / DELETE / REPLACE / LOAD DATA: a statement-based change
  } kind = Kind::other;
  // alter/create/truncate/dml: the table ([0]; dml: every table it may write); drop: each table;
  // rename: pairs from, to, from, to...
  std::vector<QualifiedName> tables;
  std::vector<AlterClause> clauses;  // alter_table
  std::vector<ColumnDef> columns;    // create_table (empty with `error` for LIKE / AS SELECT)
  std::vector<std::string> key;      // create_table: the primary key
  std::string charset;               // create_table: DEFAULT CHARSET
  bool temporary = false;            // CREATE / DROP TEMPORARY TABLE
  std::string error;  // non-empty: a statement of `kind` whose columns were not understood
};

Statement parse_statement(std::string_view sql, std::string_view default_db);

// The base type and its arguments of a column type as information_schema's COLUMN_TYPE spells it
// ("int(11) unsigned", "varchar(20)", "enum('a','b')"), for comparing an old and a new type.
ColumnDef parse_column_type(std::string_view column_type);

// Whether every value of column type `from` survives as `to` (a widening or the same type);
// `why` receives what is lost otherwise.
bool is_widening(const ColumnDef& from, const ColumnDef& to, std::string* why);
// Same type after normalisation (integer display widths and spelling variants ignored).
bool same_type(const ColumnDef& a, const ColumnDef& b);

}  // namespace sluice::mysql::ddl
