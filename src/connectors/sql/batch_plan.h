// A batch as keyed row operations, grouped into runs: the part of every SQL destination that
// does not depend on the database.
//
//   records ──add()──▶ rows (one per operation, in record order)        fields (one array)
//                      upsert  t1 [id,name]   ────────────────────────▶  id=1 name=a
//                      remove  t1 [id]        (moved key: old id)        id=7
//                      upsert  t1 [id,name]                              id=8 name=b
//                      truncate t2
//                      ...
//           run_end() ▶ runs: consecutive rows of one table, one action, one column list
//                      (a truncate is a run of its own) — each run is one statement shape, so
//                      the dialect's writer batches it (COPY, multi-row VALUES, one prepared
//                      statement stepped per row).
//
// An upsert row writes the present fields of `after` (absent ones, e.g. unchanged TOAST, keep
// the stored value; null sets NULL) and the key fields `after` lacks; a key field's value is
// taken from `after` when present there. An update that moves the row to another key (record.key
// or `before` differs from `after`) is preceded by a move of the stored row to the new key (when
// no row holds it yet) and the delete of the old key (a no-op once moved).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "connectors/sql/dialect.h"
#include "connectors/sql/sql_table.h"
#include "sluice/record.h"
#include "sluice/result.h"

namespace sluice::sql {

// `control`: a schema change or a marker (Operation::schema, Operation::marker), applied by
// KeyedSqlDestination between the runs around it; always a run of its own.
// `move`: an update changed the key: the stored row is moved to the new key first (keys(): the
// old key, columns(): the new one), so that the columns the source did not send (unchanged
// TOAST) keep their values; the delete of the old key and the upsert of the new row follow.
enum class RowAction : uint8_t { upsert, remove, truncate, control, move };

struct PlannedRow {
  RowAction action;
  SqlTable* table;
  const Record* record;
  // Ranges in BatchPlan::fields(): the key columns (values as written), then for upserts the
  // columns written (the key columns among them).
  uint32_t key_begin, key_end;
  uint32_t col_begin, col_end;
};

// Names the failing record in one line: "<destination>: table <table>, <op> key <key>: <what>".
Error record_error(std::string_view destination, const SqlTable& t, const Record& r, Errc code,
                   std::string_view what, bool retriable = false);
// The record's key as debug text, cut at 200 characters.
std::string record_key_text(const Record& r);

class BatchPlan {
 public:
  // `fold_case`: key fields match `after` fields case-insensitively (the server folds case).
  // `destination` starts the error messages ("sqlite destination \"x.db\"").
  BatchPlan(bool fold_case, std::string destination)
      : fold_case_(fold_case), destination_(std::move(destination)) {}

  void clear() noexcept {
    rows_.clear();
    fields_.clear();
    pending_keys_.clear();
  }
  // Adds the rows of `r` (to table `t`). Errors (Errc::data): a record without a key, a null key.
  // A control record is one `control` row (no key needed).
  Status add(const Record& r, SqlTable& t);

  // The key of the last row added (an upsert) is also upserted into `side` (its key columns
  // only), in one run with the other keys of `side`, before the next control row.
  void add_key_copy(SqlTable& side);
  // Ends the plan: the pending key copies become rows.
  void finish() { flush_key_copies(); }

  std::span<const PlannedRow> rows() const noexcept { return rows_; }
  const PlannedRow& row(size_t i) const noexcept { return rows_[i]; }
  std::span<const Field> keys(const PlannedRow& p) const noexcept {
    return {fields_.data() + p.key_begin, p.key_end - p.key_begin};
  }
  std::span<const Field> columns(const PlannedRow& p) const noexcept {
    return {fields_.data() + p.col_begin, p.col_end - p.col_begin};
  }
  bool is_key(const PlannedRow& p, std::string_view name) const noexcept;

  // The end of the run that starts at `first`: at most `max_rows` rows.
  size_t run_end(size_t first, size_t max_rows = SIZE_MAX) const noexcept;

  const std::string& destination() const noexcept { return destination_; }
  // Names compared as the server compares them.
  bool same_name(std::string_view a, std::string_view b) const noexcept;

 private:
  bool same_names(uint32_t a_begin, uint32_t a_end, uint32_t b_begin,
                  uint32_t b_end) const noexcept;
  bool same_run(const PlannedRow& a, const PlannedRow& b) const noexcept;
  void flush_key_copies();

  bool fold_case_;
  std::string destination_;
  std::vector<PlannedRow> rows_;
  std::vector<Field> fields_;
  std::vector<PlannedRow> pending_keys_;
};

// ── schema evolution ──

// The columns of the run [first, end) that table `t` lacks — all of them when `t` does not exist
// — with the value each one's type is chosen from, in the dialect's column order.
void missing_columns(const BatchPlan& plan, size_t first, size_t end, const SqlTable& t,
                     bool key_columns_first, bool sample_first_non_null,
                     std::vector<ColumnDef>& out);

}  // namespace sluice::sql
