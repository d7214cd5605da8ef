// The key columns of a record for keyed destinations: an object key's fields, or a scalar key as
// one column named "key". Empty when the record has no key.
#pragma once

#include <span>

#include "sluice/record.h"

namespace sluice {

// `scalar_slot` holds the one field of a scalar key; it must outlive the returned span.
inline std::span<const Field> record_key_fields(const Record& r, Field& scalar_slot) noexcept {
  if (r.key.is_object()) return r.key.fields();
  if (r.key.is_absent() || r.key.is_null()) return {};
  scalar_slot = Field{"key", r.key};
  return {&scalar_slot, 1};
}

}  // namespace sluice
