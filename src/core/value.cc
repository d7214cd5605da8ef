#include "sluice/value.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstring>

#include "sluice/json.h"
#include "sluice/record.h"

namespace sluice {

namespace {
constexpr std::string_view kKindNames[] = {
    "absent",   "null",  "bool", "int64", "uint64", "float64",   "decimal",
    "string",   "bytes", "date", "time",  "timetz", "timestamp", "timestamptz",
    "interval", "uuid",  "json", "array", "object"};
}  // namespace

std::string_view value_kind_name(ValueKind kind) noexcept {
  auto i = static_cast<size_t>(kind);
  return i < std::size(kKindNames) ? kKindNames[i] : "unknown";
}

ValueKind value_kind_from_name(std::string_view name) noexcept {
  for (size_t i = 0; i < std::size(kKindNames); ++i)
    if (kKindNames[i] == name) return static_cast<ValueKind>(i);
  return ValueKind::absent;
}

std::string_view operation_name(Operation op) noexcept {
  switch (op) {
    case Operation::snapshot: return "snapshot";
    case Operation::create: return "create";
    case Operation::update: return "update";
    case Operation::remove: return "delete";
    case Operation::schema: return "schema";
    case Operation::marker: return "marker";
  }
  return "unknown";
}

bool parse_operation(std::string_view name, Operation* op) noexcept {
  if (name == "snapshot") *op = Operation::snapshot;
  else if (name == "create") *op = Operation::create;
  else if (name == "update") *op = Operation::update;
  else if (name == "delete") *op = Operation::remove;
  else if (name == "schema") *op = Operation::schema;
  else if (name == "marker") *op = Operation::marker;
  else return false;
  return true;
}

const Value* Value::find(std::string_view name) const noexcept {
  if (kind_ != ValueKind::object) return nullptr;
  for (const Field& f : fields())
    if (f.name == name) return &f.value;
  return nullptr;
}

bool operator==(const Value& a, const Value& b) noexcept {
  if (a.kind_ != b.kind_) return false;
  switch (a.kind_) {
    case ValueKind::absent:
    case ValueKind::null: return true;
    case ValueKind::boolean: return a.as_bool() == b.as_bool();
    case ValueKind::int64:
    case ValueKind::date:
    case ValueKind::time:
    case ValueKind::timestamp:
    case ValueKind::timestamptz: return a.u_.i == b.u_.i;
    case ValueKind::timetz: return a.u_.i == b.u_.i && a.aux_ == b.aux_;
    case ValueKind::uint64: return a.u_.u == b.u_.u;
    case ValueKind::float64:
      return std::memcmp(&a.u_.d, &b.u_.d, sizeof(double)) == 0 || a.u_.d == b.u_.d;
    case ValueKind::decimal:
    case ValueKind::string:
    case ValueKind::bytes:
    case ValueKind::json:
    case ValueKind::uuid: return a.as_text() == b.as_text();
    case ValueKind::interval: return a.as_interval() == b.as_interval();
    case ValueKind::array: {
      if (a.aux_ != b.aux_) return false;
      for (uint32_t i = 0; i < a.aux_; ++i)
        if (!(a.u_.arr[i] == b.u_.arr[i])) return false;
      return true;
    }
    case ValueKind::object: {
      if (a.aux_ != b.aux_) return false;
      for (uint32_t i = 0; i < a.aux_; ++i)
        if (!(a.u_.obj[i] == b.u_.obj[i])) return false;
      return true;
    }
  }
  return false;
}

std::string to_debug_string(const Value& v) {
  if (v.is_absent()) return "<absent>";
  std::string out;
  encode_value_json(v, out);
  return out;
}

namespace {

bool eat(std::string_view& s, char c) {
  if (s.empty() || s.front() != c) return false;
  s.remove_prefix(1);
  return true;
}

}  // namespace

std::string format_interval(const Interval& iv) {
  std::string o = "P";
  int32_t years = iv.months / 12, months = iv.months % 12;
  if (years) fmt::format_to(std::back_inserter(o), "{}Y", years);
  if (months) fmt::format_to(std::back_inserter(o), "{}M", months);
  if (iv.days) fmt::format_to(std::back_inserter(o), "{}D", iv.days);
  if (iv.micros) {
    o += 'T';
    int64_t us = iv.micros;
    bool neg = us < 0;
    uint64_t a = neg ? uint64_t(-(us + 1)) + 1 : uint64_t(us);
    uint64_t h = a / 3600000000ULL, m = (a / 60000000ULL) % 60, s = (a / 1000000ULL) % 60,
             f = a % 1000000ULL;
    const char* sg = neg ? "-" : "";
    if (h) fmt::format_to(std::back_inserter(o), "{}{}H", sg, h);
    if (m) fmt::format_to(std::back_inserter(o), "{}{}M", sg, m);
    if (s || f) {
      fmt::format_to(std::back_inserter(o), "{}{}", sg, s);
      if (f) {
        std::string fs = fmt::format("{:06}", f);
        while (fs.back() == '0') fs.pop_back();
        o += '.';
        o += fs;
      }
      o += 'S';
    }
  }
  if (o == "P") o = "PT0S";
  return o;
}

bool parse_interval(std::string_view s, Interval* iv) {
  Interval r;
  if (!eat(s, 'P')) return false;
  bool in_time = false;
  while (!s.empty()) {
    if (eat(s, 'T')) {
      in_time = true;
      continue;
    }
    bool neg = eat(s, '-');
    int64_t whole = 0;
    size_t n = 0;
    while (!s.empty() && s.front() >= '0' && s.front() <= '9') {
      whole = whole * 10 + (s.front() - '0');
      s.remove_prefix(1);
      ++n;
    }
    int64_t frac = 0;
    if (eat(s, '.')) {
      int k = 0;
      while (!s.empty() && s.front() >= '0' && s.front() <= '9') {
        if (k < 6) frac = frac * 10 + (s.front() - '0');
        ++k;
        s.remove_prefix(1);
      }
      for (; k < 6; ++k) frac *= 10;
    }
    if (n == 0 || s.empty()) return false;
    char unit = s.front();
    s.remove_prefix(1);
    int64_t sign = neg ? -1 : 1;
    if (!in_time) {
      if (unit == 'Y') r.months += int32_t(sign * whole * 12);
      else if (unit == 'M') r.months += int32_t(sign * whole);
      else if (unit == 'W') r.days += int32_t(sign * whole * 7);
      else if (unit == 'D') r.days += int32_t(sign * whole);
      else return false;
    } else {
      if (unit == 'H') r.micros += sign * whole * 3600000000LL;
      else if (unit == 'M') r.micros += sign * whole * 60000000LL;
      else if (unit == 'S') r.micros += sign * (whole * 1000000LL + frac);
      else return false;
    }
  }
  *iv = r;
  return true;
}

std::string format_uuid(const uint8_t* b) {
  static const char* hex = "0123456789abcdef";
  std::string o;
  o.reserve(36);
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) o += '-';
    o += hex[b[i] >> 4];
    o += hex[b[i] & 15];
  }
  return o;
}

bool parse_uuid(std::string_view s, uint8_t* out) {
  int n = 0;
  int hi = -1;
  for (char c : s) {
    if (c == '-') continue;
    int v;
    if (c >= '0' && c <= '9') v = c - '0';
    else if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') v = c - 'A' + 10;
    else return false;
    if (hi < 0) hi = v;
    else {
      if (n >= 16) return false;
      out[n++] = uint8_t(hi * 16 + v);
      hi = -1;
    }
  }
  return n == 16 && hi < 0;
}

double float_as_shortest_double(float f) noexcept {
  const double d = f;
  if (!std::isfinite(f) || f == 0) return d;
  // The shortest text is f's exact decimal, unless a decimal with fewer digits rounds to f too.
  // The widest half-gap around f is half the gap to the next float away from zero.
  const double a = std::fabs(d);
  const double gap = double(std::nextafter(std::fabs(f), INFINITY)) - a;
  if (a == std::trunc(a)) {
    // Any other decimal no longer than f's digits is another integer, at least 1 away.
    if (gap <= 1) return d;
  } else {
    // f = m / 2^k with m odd: its exact decimal has k fractional digits, the last a 5, so every
    // decimal with fewer is at least 5·10^-k away; the half-gap must stay below that.
    static constexpr double kTenToOneMinusK[] = {1e0,   1e-1,  1e-2,  1e-3, 1e-4,  1e-5,
                                                 1e-6,  1e-7,  1e-8,  1e-9, 1e-10, 1e-11,
                                                 1e-12, 1e-13, 1e-14, 1e-15};  // k = 1 … 16
    double t = a;
    int k = 0;
    while (t != std::trunc(t) && k < 16) {
      t *= 2;  // exact
      ++k;
    }
    if (t == std::trunc(t) && gap < kTenToOneMinusK[k - 1]) return d;
  }
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, f);
  double r = d;
  if (ec == std::errc()) std::from_chars(buf, end, r);
  return r;
}

}  // namespace sluice
