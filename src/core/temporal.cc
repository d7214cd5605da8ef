// The one temporal codec (see include/sluice/temporal.h).
#include "sluice/temporal.h"

#include <cstdint>
#include <iterator>

namespace sluice {

// Howard Hinnant's civil-calendar algorithms (public domain).
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

namespace temporal {
namespace {

// The years whose days since 1970 fit the int32 of a date value.
constexpr int64_t kMinYear = -5877640, kMaxYear = 5879609;
// Days whose microseconds since 1970 (plus a time of day and an offset) still fit an int64.
constexpr int64_t kMaxTimestampDays = INT64_MAX / kMicrosPerDay - 2;

// Decimal digits of `v`, at least `min_width` (zero-padded).
char* write_unsigned(char* p, uint64_t v, int min_width) noexcept {
  char digits[20];
  int n = 0;
  do {
    digits[n++] = char('0' + v % 10);
    v /= 10;
  } while (v);
  for (int i = n; i < min_width; ++i) *p++ = '0';
  while (n) *p++ = digits[--n];
  return p;
}

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

}  // namespace

char* write_wide_date(char* p, const CivilDate& c) noexcept {
  if (c.year < 0 || c.year > 9999) {
    *p++ = c.year < 0 ? '-' : '+';
    p = write_unsigned(p, uint64_t(c.year < 0 ? -c.year : c.year), 4);
  } else {
    p = write_2digits(p, unsigned(c.year / 100));
    p = write_2digits(p, unsigned(c.year % 100));
  }
  *p++ = '-';
  p = write_2digits(p, c.month);
  *p++ = '-';
  return write_2digits(p, c.day);
}

char* write_wide_time(char* p, int64_t micros) noexcept {
  // A negative duration (MySQL TIME '-00:00:01') is its magnitude after a minus sign.
  uint64_t a = uint64_t(micros);
  if (micros < 0) {
    *p++ = '-';
    a = uint64_t(0) - a;
  }
  const uint64_t s = a / uint64_t(kMicrosPerSecond);
  p = write_unsigned(p, s / 3600, 2);
  *p++ = ':';
  p = write_2digits(p, unsigned(s / 60 % 60));
  *p++ = ':';
  p = write_2digits(p, unsigned(s % 60));
  return write_fraction(p, uint32_t(a % uint64_t(kMicrosPerSecond)));
}

char* write_offset(char* p, int32_t offset_seconds) noexcept {
  const int64_t off = offset_seconds;
  const uint64_t a = uint64_t(off < 0 ? -off : off);
  *p++ = off < 0 ? '-' : '+';
  p = write_unsigned(p, a / 3600, 2);
  *p++ = ':';
  p = write_2digits(p, unsigned(a / 60 % 60));
  if (a % 60) {
    *p++ = ':';
    p = write_2digits(p, unsigned(a % 60));
  }
  return p;
}

void append_date(std::string& out, int32_t days) {
  char buf[kMaxDateChars];
  out.append(buf, write_date(buf, days));
}
void append_time(std::string& out, int64_t micros) {
  char buf[kMaxTimeChars];
  out.append(buf, write_time(buf, micros));
}
void append_offset(std::string& out, int32_t offset_seconds) {
  char buf[kMaxOffsetChars];
  out.append(buf, write_offset(buf, offset_seconds));
}
void append_timestamp(std::string& out, int64_t micros) {
  char buf[kMaxTimestampChars];
  out.append(buf, write_timestamp(buf, micros));
}
void append_timestamptz(std::string& out, int64_t micros) {
  char buf[kMaxTimestampChars + 1];
  char* end = write_timestamp(buf, micros);
  *end++ = 'Z';
  out.append(buf, end);
}

bool parse_date_prefix(std::string_view& s, int32_t* days) {
  bool neg = false;
  if (!s.empty() && (s.front() == '+' || s.front() == '-')) {
    neg = s.front() == '-';
    s.remove_prefix(1);
  }
  CivilDate c;
  if (!parse_civil_prefix(s, 18, &c)) return false;
  if (neg) c.year = -c.year;
  // Years whose day count does not fit the int32 of a date would wrap into another date.
  if (c.year < kMinYear || c.year > kMaxYear) return false;
  // 2024-02-31 is no date (days_from_civil would make it 2 March).
  if (c.day > days_in_month(c.year, c.month)) return false;
  *days = days_from_civil(c.year, c.month, c.day);
  return true;
}

namespace {

// ".f…" after the seconds (optional): µs, digits beyond the sixth cut.
bool fraction_prefix(std::string_view& s, int64_t* micros) {
  int64_t frac = 0;
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
  *micros = frac;
  return true;
}

}  // namespace

bool parse_time_prefix(std::string_view& s, int64_t* micros) {
  int64_t h, mi, se = 0, frac = 0;
  if (!digits(s, 2, &h) || !eat(s, ':') || !digits(s, 2, &mi)) return false;
  if (eat(s, ':')) {
    if (!digits(s, 2, &se) || !fraction_prefix(s, &frac)) return false;
  }
  if (h > 24 || mi > 59 || se > 60) return false;
  *micros = ((h * 60 + mi) * 60 + se) * 1000000 + frac;
  return true;
}

bool parse_duration_prefix(std::string_view& s, int64_t* micros) {
  const bool neg = eat(s, '-');
  size_t n = 0;
  while (n < s.size() && s[n] >= '0' && s[n] <= '9') ++n;
  if (n < 1 || n > 9) return false;
  int64_t h, mi, se, frac;
  if (!digits(s, int(n), &h) || !eat(s, ':') || !digits(s, 2, &mi) || !eat(s, ':') ||
      !digits(s, 2, &se) || !fraction_prefix(s, &frac))
    return false;
  if (mi > 59 || se > 59) return false;
  const int64_t v = ((h * 60 + mi) * 60 + se) * 1000000 + frac;
  *micros = neg ? -v : v;
  return true;
}

bool parse_offset_prefix(std::string_view& s, int32_t* off) {
  if (eat(s, 'Z') || eat(s, 'z')) {
    *off = 0;
    return true;
  }
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

}  // namespace temporal

using namespace temporal;

std::string format_date(int32_t days) {
  std::string o;
  append_date(o, days);
  return o;
}
std::string format_time(int64_t micros) {
  std::string o;
  append_time(o, micros);
  return o;
}
std::string format_timetz(int64_t micros, int32_t off) {
  std::string o;
  append_time(o, micros);
  append_offset(o, off);
  return o;
}
std::string format_timestamp(int64_t micros) {
  std::string o;
  append_timestamp(o, micros);
  return o;
}
std::string format_timestamptz(int64_t micros) {
  std::string o;
  append_timestamptz(o, micros);
  return o;
}

bool parse_date(std::string_view s, int32_t* days) {
  return parse_date_prefix(s, days) && s.empty();
}
bool parse_time(std::string_view s, int64_t* micros) {
  return parse_time_prefix(s, micros) && s.empty();
}
bool parse_timetz(std::string_view s, int64_t* micros, int32_t* off) {
  return parse_time_prefix(s, micros) && parse_offset_prefix(s, off) && s.empty();
}
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
  if (!parse_time_prefix(s, &t) || !parse_offset_prefix(s, &off) || !s.empty()) return false;
  *micros = int64_t(d) * kMicrosPerDay + t - int64_t(off) * 1000000;
  return true;
}

}  // namespace sluice
