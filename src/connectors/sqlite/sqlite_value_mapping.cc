#include "connectors/sqlite/sqlite_value_mapping.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>

#include "sluice/json.h"
#include "sluice/temporal.h"

namespace sluice::sqlite_destination {

namespace {

int bind_text(sqlite3_stmt* stmt, int index, std::string_view s) {
  // A null pointer would bind NULL; an empty string must stay an empty TEXT.
  return sqlite3_bind_text64(stmt, index, s.empty() ? "" : s.data(), s.size(), SQLITE_STATIC,
                             SQLITE_UTF8);
}

int bind_scratch(sqlite3_stmt* stmt, int index, std::string& scratch, std::string&& rendered) {
  scratch = std::move(rendered);
  return bind_text(stmt, index, scratch);
}

// Binds a temporal value's canonical text (temporal.h's allocation-free writers, byte-identical to
// format_*) through the reusable scratch buffer: without fmt or a heap allocation once warm, since
// on a typical row formatting was a quarter of the destination's time.
template <typename Write>
int bind_written(sqlite3_stmt* stmt, int index, std::string& scratch, Write write) {
  char buf[temporal::kMaxTimestampChars + 1];  // + 1: the "Z" of timestamptz
  scratch.assign(buf, write(buf));             // reuses the scratch capacity
  return bind_text(stmt, index, scratch);
}

}  // namespace

std::string_view column_type_for(ValueKind kind) noexcept {
  switch (kind) {
    case ValueKind::boolean:
    case ValueKind::int64: return "INTEGER";
    case ValueKind::float64: return "REAL";
    case ValueKind::bytes: return "BLOB";
    case ValueKind::absent:
    case ValueKind::null:
    case ValueKind::uint64: return "";
    case ValueKind::decimal:
    case ValueKind::string:
    case ValueKind::date:
    case ValueKind::time:
    case ValueKind::timetz:
    case ValueKind::timestamp:
    case ValueKind::timestamptz:
    case ValueKind::interval:
    case ValueKind::uuid:
    case ValueKind::json:
    case ValueKind::array:
    case ValueKind::object: return "TEXT";
  }
  return "";
}

int bind_value(sqlite3_stmt* stmt, int index, const Value& v, std::string& scratch) {
  switch (v.kind()) {
    case ValueKind::absent:
    case ValueKind::null: return sqlite3_bind_null(stmt, index);
    case ValueKind::boolean: return sqlite3_bind_int(stmt, index, v.as_bool() ? 1 : 0);
    case ValueKind::int64: return sqlite3_bind_int64(stmt, index, v.as_int64());
    case ValueKind::uint64: {
      uint64_t u = v.as_uint64();
      if (u <= uint64_t(std::numeric_limits<int64_t>::max()))
        return sqlite3_bind_int64(stmt, index, static_cast<int64_t>(u));
      char buf[24];
      auto res = std::to_chars(buf, buf + sizeof buf, u);
      scratch.assign(buf, res.ptr);
      return bind_text(stmt, index, scratch);
    }
    case ValueKind::float64: {
      double d = v.as_double();
      if (std::isnan(d)) return bind_text(stmt, index, "NaN");
      return sqlite3_bind_double(stmt, index, d);
    }
    case ValueKind::decimal:
    case ValueKind::string:
    case ValueKind::json: return bind_text(stmt, index, v.as_text());
    case ValueKind::bytes: {
      std::string_view b = v.as_text();
      if (b.empty()) return sqlite3_bind_zeroblob(stmt, index, 0);
      return sqlite3_bind_blob64(stmt, index, b.data(), b.size(), SQLITE_STATIC);
    }
    case ValueKind::date:
      return bind_written(stmt, index, scratch,
                          [&](char* p) { return temporal::write_date(p, v.as_date()); });
    case ValueKind::time:
      return bind_written(stmt, index, scratch,
                          [&](char* p) { return temporal::write_time(p, v.as_micros()); });
    case ValueKind::timetz:
      return bind_scratch(stmt, index, scratch,
                          format_timetz(v.as_micros(), v.tz_offset_seconds()));
    case ValueKind::timestamp:
      return bind_written(stmt, index, scratch,
                          [&](char* p) { return temporal::write_timestamp(p, v.as_micros()); });
    case ValueKind::timestamptz:
      return bind_written(stmt, index, scratch, [&](char* p) {
        char* end = temporal::write_timestamp(p, v.as_micros());
        *end++ = 'Z';
        return end;
      });
    case ValueKind::interval:
      return bind_scratch(stmt, index, scratch, format_interval(v.as_interval()));
    case ValueKind::uuid: return bind_scratch(stmt, index, scratch, format_uuid(v.uuid_bytes()));
    case ValueKind::array:
    case ValueKind::object:
      scratch.clear();  // reuses the buffer's capacity: no allocation once warm
      encode_value_json(v, scratch);
      return bind_text(stmt, index, scratch);
  }
  return sqlite3_bind_null(stmt, index);
}

}  // namespace sluice::sqlite_destination
