// A change record (OpenCDC-compatible): operation, position, metadata, key, before, after.
// All views point into the owning Batch's arena (or static storage).
#pragma once

#include <string_view>

#include "sluice/value.h"

namespace sluice {

// Data operations (snapshot, create, update, remove) carry a row. Control operations carry no row:
//   schema  one table's columns changed (a column added, dropped, renamed or retyped) at this
//           point of the stream; the change is in `after` (include/sluice/schema_change.h).
//   marker  a point of the stream with a meaning for keyed destinations, named by metadata
//           `marker`: "snapshot_begin" / "snapshot_end" of the record's table (a re-snapshot's
//           bounds, so a destination can remove rows the snapshot did not see).
// Control records keep their place among the rows. The runtime delivers them only to destinations
// that ask for them (Destination::accepts_control_records) and counts them in no record counter.
enum class Operation : uint8_t { snapshot, create, update, remove, schema, marker };

// snapshot|create|update|delete|schema|marker
std::string_view operation_name(Operation op) noexcept;
bool parse_operation(std::string_view name, Operation* op) noexcept;

struct Record {
  Record() = default;
  // Every part at once: a source's hot path constructs its records in place (Batch::add).
  Record(Operation op_, std::string_view position_, Value metadata_, Value key_, Value before_,
         Value after_) noexcept
      : op(op_),
        position(position_),
        metadata(metadata_),
        key(key_),
        before(before_),
        after(after_) {}

  Operation op = Operation::create;
  std::string_view position;  // opaque bytes meaningful to the source
  Value metadata;             // object of string values (table, schema, lsn, ...); absent if none
  Value key;                  // usually an object of the key columns
  Value before;               // absent when the source sent no before image
  Value after;                // absent for deletes

  // Metadata lookup; empty view if missing.
  std::string_view meta(std::string_view name) const noexcept {
    const Value* v = metadata.find(name);
    return v ? v->as_text() : std::string_view{};
  }
};

inline constexpr bool is_control(Operation op) noexcept {
  return op == Operation::schema || op == Operation::marker;
}

// Common metadata keys.
namespace meta {
inline constexpr std::string_view kTable = "table";
inline constexpr std::string_view kSchema = "schema";
inline constexpr std::string_view kCollection = "opencdc.collection";
inline constexpr std::string_view kReadAt = "opencdc.readAt";
// "true" on a key-less delete that stands for a source-side TRUNCATE of the table.
inline constexpr std::string_view kTruncate = "truncate";
// On a marker record: what the marker means (kSnapshotBegin, kSnapshotEnd).
inline constexpr std::string_view kMarker = "marker";
inline constexpr std::string_view kSnapshotBegin = "snapshot_begin";
inline constexpr std::string_view kSnapshotEnd = "snapshot_end";
// Why a record went to the dead-letter queue (set by the runtime, or by a source that marked the
// record: Batch::add_source_reject).
inline constexpr std::string_view kError = "sluice.error";
}  // namespace meta

// A source-side TRUNCATE: keyed destinations empty the record's table.
inline bool is_truncate(const Record& r) noexcept {
  return r.op == Operation::remove && r.key.is_absent() && r.meta(meta::kTruncate) == "true";
}

}  // namespace sluice
