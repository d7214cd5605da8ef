// A change record (OpenCDC-compatible): operation, position, metadata, key, before, after.
// All views point into the owning Batch's arena (or static storage).
#pragma once

#include <string_view>

#include "sluice/value.h"

namespace sluice {

enum class Operation : uint8_t { snapshot, create, update, remove };

std::string_view operation_name(Operation op) noexcept;  // snapshot|create|update|delete
bool parse_operation(std::string_view name, Operation* op) noexcept;

struct Record {
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

// Common metadata keys.
namespace meta {
inline constexpr std::string_view kTable = "table";
inline constexpr std::string_view kSchema = "schema";
inline constexpr std::string_view kCollection = "opencdc.collection";
inline constexpr std::string_view kReadAt = "opencdc.readAt";
// "true" on a key-less delete that stands for a source-side TRUNCATE of the table.
inline constexpr std::string_view kTruncate = "truncate";
// Why a record went to the dead-letter queue (set by the runtime, or by a source that marked the
// record: Batch::add_source_reject).
inline constexpr std::string_view kError = "sluice.error";
}  // namespace meta

// A source-side TRUNCATE: keyed destinations empty the record's table.
inline bool is_truncate(const Record& r) noexcept {
  return r.op == Operation::remove && r.key.is_absent() && r.meta(meta::kTruncate) == "true";
}

}  // namespace sluice
