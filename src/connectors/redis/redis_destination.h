// The `redis` destination: each row as a hash (a field per column) or one JSON string under
// `<prefix><table>:<key>`, one pipelined MULTI/EXEC per batch, the batch position in the same EXEC
// with checkpoint_in_destination. docs/redis.md describes the key layout, the value rendering and
// the guarantees.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "sluice/connector.h"
#include "sluice/registry.h"
#include "sluice/settings.h"
#include "sluice/value.h"

namespace sluice::redis {

std::span<const SettingSpec> redis_destination_settings() noexcept;
Result<std::unique_ptr<Destination>> make_redis_destination(const Settings& settings);

// A column value as the text of a hash field (the canonical rendering, docs/redis.md): integers
// in decimal, decimals exactly as given, strings, bytes and json as they are, dates and times in
// ISO 8601 with their precision, uuid 8-4-4-4-12, intervals as ISO 8601 durations, doubles in the
// shortest text that reads back the same, arrays and objects as JSON. Null and absent values have
// no text (the caller deletes or keeps the field).
void render_field_value(const Value& v, std::string& out);

// The key part of a record's Redis key: the key columns' values rendered like fields, joined by
// ':' in key order, with '\' and ':' inside a value escaped as "\\" and "\:". False when the
// record has no key or a key column is null.
bool render_key(const Value& key, std::string& out);

}  // namespace sluice::redis
