// A schema change of one table, carried by a record with op == Operation::schema.
//
// Sources emit one schema record per changed column, in the stream at the point where the change
// took effect (after the rows written before it, before the rows written after it). The record's
// metadata names the table as a data record's would (kSchema, kTable and whatever the source adds);
// its key, before and position are as for any record; `after` is the change:
//
//   {"change": "add_column"        , "column": NAME, "type": SOURCE_TYPE [, "default": VALUE]}
//   {"change": "drop_column"       , "column": NAME}
//   {"change": "rename_column"     , "column": OLD_NAME, "to": NEW_NAME}
//   {"change": "alter_column_type" , "column": NAME, "type": NEW_SOURCE_TYPE, "from":
//   OLD_SOURCE_TYPE}
//
// add_column: `default` is the value every row that existed before the change reads at the source
// (a non-volatile DEFAULT); absent means they read NULL. A change whose old rows read values only
// the source knows (a volatile default, a table rewrite) is never sent as a default: the source
// re-reads the table (an incremental snapshot) or stops with an error.
// alter_column_type: sent only for changes every old value survives (widening); a source stops
// with an error on a narrowing or incompatible change rather than emit it.
//
// A keyed destination applies the change to the destination table idempotently (a replayed change
// is recognised as done: rename when `column` exists and `to` does not; add when missing, then
// backfill; drop when present), in the same order as the rows around it.
#pragma once

#include <string_view>

#include "sluice/batch.h"
#include "sluice/record.h"
#include "sluice/result.h"
#include "sluice/value.h"

namespace sluice {

enum class SchemaChangeKind : uint8_t { add_column, drop_column, rename_column, alter_column_type };

std::string_view schema_change_kind_name(SchemaChangeKind kind) noexcept;

struct SchemaChange {
  SchemaChangeKind kind = SchemaChangeKind::add_column;
  std::string_view column;  // the column as named before the change (add: its name)
  std::string_view to;      // rename_column: the new name
  std::string_view type;    // add_column, alter_column_type: the source's type, as it spells it
  std::string_view from;    // alter_column_type: the source's type before the change
  Value default_value;      // add_column: what old rows read; absent = NULL
};

// Fills `r` (already added to `batch`) as a schema record: op, and `after` built in the batch's
// arena. The caller sets metadata, key, position as for a data record of the same table.
void set_schema_change(Batch& batch, Record& r, const SchemaChange& change);

// The change a schema record carries; a data error naming what is wrong otherwise (a schema
// record read back from a file or a topic may be malformed).
Result<SchemaChange> schema_change_of(const Record& r);

}  // namespace sluice
