#include "connectors/sqlite/sqlite_value_mapping.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>

#include "sluice/json.h"

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

// Fast renderers of the commonest temporal values, byte-identical to format_date/_time/_timestamp
// of value.h (a test compares them over many values) but without fmt or a heap allocation: on a
// typical row they were a quarter of the destination's time. Each returns the end of what it wrote,
// or nullptr when the value is outside the plain range (year 0..9999, time within one day), where
// the caller falls back to format_*.
constexpr int64_t kMicrosPerDay = 86400LL * 1000000LL;

char* put2(char* p, unsigned v) {
  p[0] = char('0' + v / 10);
  p[1] = char('0' + v % 10);
  return p + 2;
}

char* put_date(char* p, int32_t days) {
  int64_t y;
  unsigned m, d;
  civil_from_days(days, &y, &m, &d);
  if (y < 0 || y > 9999) return nullptr;
  p = put2(p, unsigned(y / 100));
  p = put2(p, unsigned(y % 100));
  *p++ = '-';
  p = put2(p, m);
  *p++ = '-';
  return put2(p, d);
}

// HH:MM:SS, then .ffffff without trailing zeros when the fraction is not zero.
char* put_time(char* p, int64_t micros) {
  if (micros < 0 || micros >= kMicrosPerDay) return nullptr;
  int64_t s = micros / 1000000;
  unsigned frac = unsigned(micros % 1000000);
  p = put2(p, unsigned(s / 3600));
  *p++ = ':';
  p = put2(p, unsigned(s / 60 % 60));
  *p++ = ':';
  p = put2(p, unsigned(s % 60));
  if (frac) {
    *p++ = '.';
    char digits[6];
    for (int i = 5; i >= 0; --i, frac /= 10) digits[i] = char('0' + frac % 10);
    int n = 6;
    while (digits[n - 1] == '0') --n;
    for (int i = 0; i < n; ++i) *p++ = digits[i];
  }
  return p;
}

char* put_timestamp(char* p, int64_t micros) {
  int64_t days = micros / kMicrosPerDay;
  if (micros % kMicrosPerDay < 0) --days;  // floor
  if (days < INT32_MIN || days > INT32_MAX) return nullptr;
  p = put_date(p, int32_t(days));
  if (!p) return nullptr;
  *p++ = 'T';
  return put_time(p, micros - days * kMicrosPerDay);
}

// Binds the fast rendering if there is one, else the format_* text.
template <typename Put, typename Format>
int bind_rendered(sqlite3_stmt* stmt, int index, std::string& scratch, Put put, Format format) {
  char buf[40];
  if (char* end = put(buf)) {
    scratch.assign(buf, end);  // reuses the scratch capacity
    return bind_text(stmt, index, scratch);
  }
  return bind_scratch(stmt, index, scratch, format());
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
      return bind_rendered(
          stmt, index, scratch, [&](char* p) { return put_date(p, v.as_date()); },
          [&] { return format_date(v.as_date()); });
    case ValueKind::time:
      return bind_rendered(
          stmt, index, scratch, [&](char* p) { return put_time(p, v.as_micros()); },
          [&] { return format_time(v.as_micros()); });
    case ValueKind::timetz:
      return bind_scratch(stmt, index, scratch, format_timetz(v.as_micros(), v.tz_offset_seconds()));
    case ValueKind::timestamp:
      return bind_rendered(
          stmt, index, scratch, [&](char* p) { return put_timestamp(p, v.as_micros()); },
          [&] { return format_timestamp(v.as_micros()); });
    case ValueKind::timestamptz:
      return bind_rendered(
          stmt, index, scratch,
          [&](char* p) {
            char* end = put_timestamp(p, v.as_micros());
            if (end) *end++ = 'Z';
            return end;
          },
          [&] { return format_timestamptz(v.as_micros()); });
    case ValueKind::interval: return bind_scratch(stmt, index, scratch, format_interval(v.as_interval()));
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
