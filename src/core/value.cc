#include "sluice/value.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "sluice/record.h"
#include "sluice/json.h"

namespace sluice {

namespace {
constexpr std::string_view kKindNames[] = {
    "absent", "null", "bool", "int64", "uint64", "float64", "decimal", "string", "bytes",
    "date", "time", "timetz", "timestamp", "timestamptz", "interval", "uuid", "json", "array", "object"};
constexpr int64_t kMicrosPerDay = 86400LL * 1000000LL;
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
  }
  return "unknown";
}

bool parse_operation(std::string_view name, Operation* op) noexcept {
  if (name == "snapshot") *op = Operation::snapshot;
  else if (name == "create") *op = Operation::create;
  else if (name == "update") *op = Operation::update;
  else if (name == "delete") *op = Operation::remove;
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
    case ValueKind::float64: return std::memcmp(&a.u_.d, &b.u_.d, sizeof(double)) == 0 || a.u_.d == b.u_.d;
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

// Howard Hinnant's civil-calendar algorithms (public domain).
int32_t days_from_civil(int64_t y, unsigned m, unsigned d) noexcept {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return static_cast<int32_t>(era * 146097 + static_cast<int64_t>(doe) - 719468);
}

void civil_from_days(int64_t z, int64_t* y, unsigned* m, unsigned* d) noexcept {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t yy = static_cast<int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = yy + (*m <= 2);
}

namespace {

void append_date(std::string& out, int32_t days) {
  int64_t y; unsigned m, d;
  civil_from_days(days, &y, &m, &d);
  if (y >= 0 && y <= 9999) fmt::format_to(std::back_inserter(out), "{:04}-{:02}-{:02}", y, m, d);
  else fmt::format_to(std::back_inserter(out), "{:+05}-{:02}-{:02}", y, m, d);
}

void append_time(std::string& out, int64_t micros) {
  int64_t s = micros / 1000000, frac = micros % 1000000;
  fmt::format_to(std::back_inserter(out), "{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
  if (frac) {
    std::string f = fmt::format("{:06}", frac);
    while (!f.empty() && f.back() == '0') f.pop_back();
    out += '.';
    out += f;
  }
}

void append_offset(std::string& out, int32_t off) {
  char sign = off < 0 ? '-' : '+';
  int32_t a = off < 0 ? -off : off;
  fmt::format_to(std::back_inserter(out), "{}{:02}:{:02}", sign, a / 3600, (a / 60) % 60);
  if (a % 60) fmt::format_to(std::back_inserter(out), ":{:02}", a % 60);
}

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// Parses exactly `n` digits.
bool digits(std::string_view& s, int n, int64_t* out) {
  if (s.size() < size_t(n)) return false;
  int64_t v = 0;
  for (int i = 0; i < n; ++i) {
    char c = s[i];
    if (c < '0' || c > '9') return false;
    if (v > (INT64_MAX - 9) / 10) return false;  // more digits than int64 holds: not a date/time
    v = v * 10 + (c - '0');
  }
  s.remove_prefix(n);
  *out = v;
  return true;
}

bool eat(std::string_view& s, char c) {
  if (s.empty() || s.front() != c) return false;
  s.remove_prefix(1);
  return true;
}

bool parse_date_prefix(std::string_view& s, int32_t* days) {
  bool neg = false;
  if (!s.empty() && (s.front() == '+' || s.front() == '-')) { neg = s.front() == '-'; s.remove_prefix(1); }
  int64_t y = 0;
  size_t n = 0;
  while (n < s.size() && s[n] >= '0' && s[n] <= '9') ++n;
  if (n < 4) return false;
  if (!digits(s, int(n), &y)) return false;
  if (neg) y = -y;
  // Years whose days since 1970 do not fit the int32 of a date value (they used to wrap around
  // to an unrelated date).
  if (y < -5877640 || y > 5879609) return false;
  int64_t m, d;
  if (!eat(s, '-') || !digits(s, 2, &m) || !eat(s, '-') || !digits(s, 2, &d)) return false;
  if (m < 1 || m > 12 || d < 1 || d > 31) return false;
  *days = days_from_civil(y, unsigned(m), unsigned(d));
  return true;
}

bool parse_time_prefix(std::string_view& s, int64_t* micros) {
  int64_t h, mi, se = 0, frac = 0;
  if (!digits(s, 2, &h) || !eat(s, ':') || !digits(s, 2, &mi)) return false;
  if (eat(s, ':')) {
    if (!digits(s, 2, &se)) return false;
    if (eat(s, '.')) {
      int n = 0;
      while (!s.empty() && s.front() >= '0' && s.front() <= '9') {
        if (n < 6) frac = frac * 10 + (s.front() - '0');
        ++n;
        s.remove_prefix(1);
      }
      if (n == 0) return false;
      for (int i = n; i < 6; ++i) frac *= 10;
    }
  }
  if (h > 24 || mi > 59 || se > 60) return false;
  *micros = ((h * 60 + mi) * 60 + se) * 1000000 + frac;
  return true;
}

bool parse_offset(std::string_view& s, int32_t* off) {
  if (eat(s, 'Z') || eat(s, 'z')) { *off = 0; return true; }
  if (s.empty() || (s.front() != '+' && s.front() != '-')) return false;
  int sign = s.front() == '-' ? -1 : 1;
  s.remove_prefix(1);
  int64_t h, m = 0, sec = 0;
  if (!digits(s, 2, &h)) return false;
  if (eat(s, ':')) {
    if (!digits(s, 2, &m)) return false;
    if (eat(s, ':') && !digits(s, 2, &sec)) return false;
  } else if (s.size() >= 2) {
    if (!digits(s, 2, &m)) return false;
  }
  *off = int32_t(sign * (h * 3600 + m * 60 + sec));
  return true;
}

}  // namespace

std::string format_date(int32_t days) { std::string o; append_date(o, days); return o; }
std::string format_time(int64_t micros) { std::string o; append_time(o, micros); return o; }
std::string format_timetz(int64_t micros, int32_t off) {
  std::string o; append_time(o, micros); append_offset(o, off); return o;
}
std::string format_timestamp(int64_t micros) {
  int64_t days = floor_div(micros, kMicrosPerDay);
  std::string o;
  append_date(o, int32_t(days));
  o += 'T';
  append_time(o, micros - days * kMicrosPerDay);
  return o;
}
std::string format_timestamptz(int64_t micros) { return format_timestamp(micros) + "Z"; }

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
    uint64_t h = a / 3600000000ULL, m = (a / 60000000ULL) % 60, s = (a / 1000000ULL) % 60, f = a % 1000000ULL;
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
    if (eat(s, 'T')) { in_time = true; continue; }
    bool neg = eat(s, '-');
    int64_t whole = 0;
    size_t n = 0;
    while (!s.empty() && s.front() >= '0' && s.front() <= '9') { whole = whole * 10 + (s.front() - '0'); s.remove_prefix(1); ++n; }
    int64_t frac = 0;
    if (eat(s, '.')) {
      int k = 0;
      while (!s.empty() && s.front() >= '0' && s.front() <= '9') { if (k < 6) frac = frac * 10 + (s.front() - '0'); ++k; s.remove_prefix(1); }
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

bool parse_date(std::string_view s, int32_t* days) { return parse_date_prefix(s, days) && s.empty(); }
bool parse_time(std::string_view s, int64_t* micros) { return parse_time_prefix(s, micros) && s.empty(); }
bool parse_timetz(std::string_view s, int64_t* micros, int32_t* off) {
  return parse_time_prefix(s, micros) && parse_offset(s, off) && s.empty();
}
// Days whose microseconds since 1970 (plus a time of day and an offset) still fit an int64.
constexpr int64_t kMaxTimestampDays = INT64_MAX / kMicrosPerDay - 2;

bool parse_timestamp(std::string_view s, int64_t* micros) {
  int32_t d;
  int64_t t;
  if (!parse_date_prefix(s, &d) || d > kMaxTimestampDays || d < -kMaxTimestampDays) return false;
  if (!eat(s, 'T') && !eat(s, ' ')) return false;
  if (!parse_time_prefix(s, &t) || !s.empty()) return false;
  *micros = int64_t(d) * kMicrosPerDay + t;
  return true;
}
bool parse_timestamptz(std::string_view s, int64_t* micros) {
  int32_t d, off;
  int64_t t;
  if (!parse_date_prefix(s, &d) || d > kMaxTimestampDays || d < -kMaxTimestampDays) return false;
  if (!eat(s, 'T') && !eat(s, ' ')) return false;
  if (!parse_time_prefix(s, &t) || !parse_offset(s, &off) || !s.empty()) return false;
  *micros = int64_t(d) * kMicrosPerDay + t - int64_t(off) * 1000000;
  return true;
}

}  // namespace sluice
