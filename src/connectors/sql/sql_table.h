// One destination table as the SQL layer knows it, and the catalogue that caches them.
//
// The catalogue maps a rendered (schema, table) to what the destination last read of it: whether
// it exists and its columns. It is dropped whenever a batch fails (a rollback may undo DDL the
// cache learnt from), and re-read table by table on the next use.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "connectors/folded_identifiers.h"
#include "sluice/result.h"

namespace sluice::sql {

// Identifier hashing and equality, case-folded or exact as the database compares names.
struct IdentifierHash {
  using is_transparent = void;
  bool fold = false;
  size_t operator()(std::string_view s) const noexcept {
    return fold ? FoldedHash{}(s) : std::hash<std::string_view>{}(s);
  }
};
struct IdentifierEqual {
  using is_transparent = void;
  bool fold = false;
  bool operator()(std::string_view a, std::string_view b) const noexcept {
    return fold ? iequals(a, b) : a == b;
  }
};

// Column name -> a tag the dialect's writer gives it (e.g. PostgreSQL: json, array or scalar).
using ColumnMap = std::unordered_map<std::string, uint8_t, IdentifierHash, IdentifierEqual>;

struct SqlTable {
  explicit SqlTable(bool fold) : columns(0, IdentifierHash{fold}, IdentifierEqual{fold}) {}
  virtual ~SqlTable() = default;

  std::string schema;  // empty where the database has no schemas in play
  std::string name;    // as rendered
  std::string quoted;  // as statements (and errors) name it
  bool exists = false;
  ColumnMap columns;
  // The source schema (record metadata `schema`) of the first record written here, while the name
  // comes from {{table}} alone: records of a same-named table of another schema must not merge
  // into it (KeyedSqlDestination::table_for refuses them).
  std::optional<std::string> source_schema;

  bool has_column(std::string_view c) const { return columns.find(c) != columns.end(); }

  // snapshot.reconcile: sweep (KeyedSqlDestination): while a re-snapshot of this table runs, the
  // side table its written keys go to (as planned; nullptr otherwise), and whether that state
  // was read from the database yet (the side table exists while a sweep runs).
  SqlTable* sweep = nullptr;
  bool sweep_known = false;
};

class TableCatalogue {
 public:
  // `fold`: table names compare case-insensitively.
  explicit TableCatalogue(bool fold) : tables_(0, IdentifierHash{fold}, IdentifierEqual{fold}) {}

  // The table named (schema, name), made by `create(schema, name)` -> Result<unique_ptr<SqlTable>>
  // (which loads its columns, and sets its schema and name) on first use. Consecutive records of
  // one table hit `last_`.
  template <class Create>
  Result<SqlTable*> find(std::string_view schema, std::string_view name, Create&& create) {
    if (last_ && last_->name == name && last_->schema == schema) return last_;
    key_.assign(schema);
    key_ += '\0';
    key_ += name;
    auto it = tables_.find(key_);
    if (it == tables_.end()) {
      Result<std::unique_ptr<SqlTable>> made = create(schema, name);
      if (!made) return std::move(made).error();
      it = tables_.emplace(key_, std::move(made).value()).first;
    }
    last_ = it->second.get();
    return last_;
  }
  void clear() noexcept {
    tables_.clear();
    last_ = nullptr;
  }
  size_t size() const noexcept { return tables_.size(); }

 private:
  std::unordered_map<std::string, std::unique_ptr<SqlTable>, IdentifierHash, IdentifierEqual>
      tables_;
  std::string key_;
  SqlTable* last_ = nullptr;
};

}  // namespace sluice::sql
