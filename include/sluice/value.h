// Typed values of the record model. A Value is 16 bytes and trivially copyable; strings, arrays and
// objects point into memory owned elsewhere (the batch arena, or static storage), never into the
// heap per field. "Absent" (the default) is distinct from null: a field missing from an object is
// absent; `before` of an insert is absent.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "sluice/temporal.h"

namespace sluice {

enum class ValueKind : uint8_t {
  absent = 0,
  null,
  boolean,
  int64,
  uint64,
  float64,
  decimal,      // exact decimal as text: "-12.340", "NaN"
  string,       // UTF-8 text
  bytes,        // raw bytes
  date,         // days since 1970-01-01
  time,         // microseconds since midnight
  timetz,       // microseconds since midnight + UTC offset in seconds (east positive)
  timestamp,    // microseconds since 1970-01-01 00:00:00, no zone
  timestamptz,  // microseconds since the epoch, UTC
  interval,     // months, days, microseconds
  uuid,         // 16 bytes
  json,         // JSON document as text
  array,        // sequence of values
  object,       // ordered fields (name, value)
};

std::string_view value_kind_name(ValueKind kind) noexcept;
// Parses a name produced by value_kind_name; returns absent on failure.
ValueKind value_kind_from_name(std::string_view name) noexcept;

struct Interval {
  int32_t months = 0;
  int32_t days = 0;
  int64_t micros = 0;
  bool operator==(const Interval&) const = default;
};

struct Field;

class Value {
 public:
  constexpr Value() noexcept : kind_(ValueKind::absent), aux_(0), u_{} {}

  static constexpr Value null() noexcept { return Value(ValueKind::null, 0); }
  static constexpr Value boolean(bool v) noexcept {
    Value x(ValueKind::boolean, 0);
    x.u_.i = v ? 1 : 0;
    return x;
  }
  static constexpr Value int64(int64_t v) noexcept {
    Value x(ValueKind::int64, 0);
    x.u_.i = v;
    return x;
  }
  static constexpr Value uint64(uint64_t v) noexcept {
    Value x(ValueKind::uint64, 0);
    x.u_.u = v;
    return x;
  }
  static constexpr Value float64(double v) noexcept {
    Value x(ValueKind::float64, 0);
    x.u_.d = v;
    return x;
  }
  // Text-carrying kinds: the view must outlive the value (arena or static storage).
  static Value string(std::string_view s) noexcept { return text(ValueKind::string, s); }
  static Value decimal(std::string_view s) noexcept { return text(ValueKind::decimal, s); }
  static Value json(std::string_view s) noexcept { return text(ValueKind::json, s); }
  static Value bytes(std::string_view s) noexcept { return text(ValueKind::bytes, s); }
  static constexpr Value date(int32_t days) noexcept {
    Value x(ValueKind::date, 0);
    x.u_.i = days;
    return x;
  }
  static constexpr Value time(int64_t micros) noexcept {
    Value x(ValueKind::time, 0);
    x.u_.i = micros;
    return x;
  }
  static constexpr Value timetz(int64_t micros, int32_t offset_seconds) noexcept {
    Value x(ValueKind::timetz, static_cast<uint32_t>(offset_seconds));
    x.u_.i = micros;
    return x;
  }
  static constexpr Value timestamp(int64_t micros) noexcept {
    Value x(ValueKind::timestamp, 0);
    x.u_.i = micros;
    return x;
  }
  static constexpr Value timestamptz(int64_t micros) noexcept {
    Value x(ValueKind::timestamptz, 0);
    x.u_.i = micros;
    return x;
  }
  // `iv` must outlive the value (allocate it in the arena).
  static Value interval(const Interval* iv) noexcept {
    Value x(ValueKind::interval, 0);
    x.u_.iv = iv;
    return x;
  }
  // 16 bytes that must outlive the value.
  static Value uuid(const uint8_t* bytes16) noexcept {
    Value x(ValueKind::uuid, 16);
    x.u_.p = reinterpret_cast<const char*>(bytes16);
    return x;
  }
  static Value array(const Value* items, uint32_t n) noexcept {
    Value x(ValueKind::array, n);
    x.u_.arr = items;
    return x;
  }
  static Value object(const Field* fields, uint32_t n) noexcept {
    Value x(ValueKind::object, n);
    x.u_.obj = fields;
    return x;
  }

  ValueKind kind() const noexcept { return kind_; }
  bool is_absent() const noexcept { return kind_ == ValueKind::absent; }
  bool is_null() const noexcept { return kind_ == ValueKind::null; }
  bool is_object() const noexcept { return kind_ == ValueKind::object; }

  bool as_bool() const noexcept { return u_.i != 0; }
  int64_t as_int64() const noexcept { return u_.i; }
  uint64_t as_uint64() const noexcept { return u_.u; }
  double as_double() const noexcept { return u_.d; }
  // string, decimal, json, bytes, uuid (16 raw bytes)
  std::string_view as_text() const noexcept { return {u_.p, aux_}; }
  int32_t as_date() const noexcept { return static_cast<int32_t>(u_.i); }
  int64_t as_micros() const noexcept { return u_.i; }  // time, timetz, timestamp, timestamptz
  int32_t tz_offset_seconds() const noexcept { return static_cast<int32_t>(aux_); }
  const Interval& as_interval() const noexcept { return *u_.iv; }
  const uint8_t* uuid_bytes() const noexcept { return reinterpret_cast<const uint8_t*>(u_.p); }
  std::span<const Value> items() const noexcept { return {u_.arr, aux_}; }
  inline std::span<const Field> fields() const noexcept;  // object
  uint32_t size() const noexcept { return aux_; }

  // Field lookup by name in an object (linear; objects are small). nullptr if absent.
  const Value* find(std::string_view name) const noexcept;

  // Deep, exact equality (kind and value; NaN equals NaN bitwise; field order matters).
  friend bool operator==(const Value& a, const Value& b) noexcept;

 private:
  constexpr Value(ValueKind k, uint32_t aux) noexcept : kind_(k), aux_(aux), u_{} {}
  static Value text(ValueKind k, std::string_view s) noexcept {
    Value x(k, static_cast<uint32_t>(s.size()));
    x.u_.p = s.data();
    return x;
  }

  ValueKind kind_;
  uint32_t aux_;  // length, item count or tz offset
  union U {
    int64_t i;
    uint64_t u;
    double d;
    const char* p;
    const Value* arr;
    const Field* obj;
    const Interval* iv;
  } u_;
};

static_assert(sizeof(Value) == 16, "Value must stay 16 bytes");

struct Field {
  std::string_view name;
  Value value;
  friend bool operator==(const Field& a, const Field& b) noexcept {
    return a.name == b.name && a.value == b.value;
  }
};

inline std::span<const Field> Value::fields() const noexcept { return {u_.obj, aux_}; }

// Human/debug rendering (also used in error messages and the DLQ): JSON-like text.
std::string to_debug_string(const Value& v);

// Canonical text forms shared by codecs and SQL destinations (dates and times: sluice/temporal.h).
std::string format_interval(const Interval& iv);        // ISO 8601 duration P1Y2M3DT4H5M6.5S
std::string format_uuid(const uint8_t* bytes16);        // 8-4-4-4-12 lowercase hex
bool parse_interval(std::string_view s, Interval* iv);  // the ISO form above
bool parse_uuid(std::string_view s, uint8_t* out16);

// A single-precision value as the double its shortest decimal text reads as (1.1f → 1.1, not
// 1.100000023841858), which is what a server's text output of a float4 / FLOAT column gives. Exact
// values (integers, and fractions whose exact decimal is already the shortest) skip the text.
double float_as_shortest_double(float f) noexcept;

}  // namespace sluice
