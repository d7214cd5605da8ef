// The one temporal codec: civil-calendar arithmetic, the canonical ISO-8601 text forms of sluice's
// date/time values, and their parsers. Connectors that speak a database's own dialect (PostgreSQL's
// "BC" years, MySQL's zero dates) build on the pieces here — the calendar, the allocation-free
// writers and the prefix parsers — instead of carrying their own copies.
//
//   Value kind     representation                          canonical text
//   date           int32 days since 1970-01-01              2024-02-29        (year ∉ 0..9999:
//   ±YYYYY) time           int64 µs since midnight                  13:45:00.123456   (fraction
//   only when ≠ 0) timetz         µs since midnight + offset seconds       13:45:00+02:00 timestamp
//   int64 µs since 1970-01-01T00:00:00       2024-02-29T13:45:00.5 timestamptz    int64 µs since
//   the epoch, UTC            2024-02-29T13:45:00.5Z
//
// The writers never allocate: each writes into a caller's buffer of at least the stated size and
// returns the end of what it wrote. The std::string forms (format_*, append_*) use them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sluice {

// Canonical text forms shared by codecs and SQL destinations.
std::string format_date(int32_t days);                              // 2024-02-29
std::string format_time(int64_t micros);                            // 13:45:00.123456
std::string format_timetz(int64_t micros, int32_t offset_seconds);  // 13:45:00+02:00
std::string format_timestamp(int64_t micros);                       // 2024-02-29T13:45:00.123456
std::string format_timestamptz(int64_t micros);                     // 2024-02-29T13:45:00.123456Z
bool parse_date(std::string_view s, int32_t* days);
bool parse_time(std::string_view s, int64_t* micros);
bool parse_timetz(std::string_view s, int64_t* micros, int32_t* offset_seconds);
bool parse_timestamp(std::string_view s, int64_t* micros);    // accepts 'T' or ' ' separator
bool parse_timestamptz(std::string_view s, int64_t* micros);  // Z or ±hh[:mm] suffix
// days since epoch <-> civil date (proleptic Gregorian; year 0 = 1 BC). Howard Hinnant's
// algorithms (public domain); days_from_civil is inline: decoders call it once per date value.
constexpr int32_t days_from_civil(int64_t y, unsigned m, unsigned d) noexcept {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return static_cast<int32_t>(era * 146097 + static_cast<int64_t>(doe) - 719468);
}
void civil_from_days(int64_t z, int64_t* y, unsigned* m, unsigned* d) noexcept;

namespace temporal {

inline constexpr int64_t kMicrosPerSecond = 1000000;
inline constexpr int64_t kMicrosPerDay = 86400 * kMicrosPerSecond;
// PostgreSQL's epoch (2000-01-01) in µs and days since 1970-01-01.
inline constexpr int64_t kPostgresEpochMicros = 946684800 * kMicrosPerSecond;
inline constexpr int32_t kPostgresEpochDays = 10957;

// Buffer sizes that every writer below fits in.
inline constexpr size_t kMaxDateChars = 16;    // sign + 9-digit year + "-MM-DD"
inline constexpr size_t kMaxTimeChars = 40;    // hours of an arbitrary int64 + ".ffffff"
inline constexpr size_t kMaxOffsetChars = 16;  // +HH:MM:SS (hours of an int32)
inline constexpr size_t kMaxTimestampChars = kMaxDateChars + 1 + kMaxTimeChars + 1;

constexpr int64_t floor_div(int64_t a, int64_t b) noexcept {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
}
constexpr bool is_leap_year(int64_t y) noexcept {
  return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
}
constexpr unsigned days_in_month(int64_t y, unsigned m) noexcept {
  constexpr unsigned kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && is_leap_year(y) ? 29 : kDays[(m - 1) % 12];
}

struct CivilDate {
  int64_t year;  // proleptic Gregorian, year 0 = 1 BC
  unsigned month, day;
};
inline CivilDate civil_date(int32_t days) noexcept {
  CivilDate c;
  civil_from_days(days, &c.year, &c.month, &c.day);
  return c;
}

// A timestamp's day (floor) and the µs into it (always 0 ≤ µs < one day).
struct DayAndTime {
  int64_t days;
  int64_t micros;
};
constexpr DayAndTime split_timestamp(int64_t micros) noexcept {
  const int64_t days = floor_div(micros, kMicrosPerDay);
  return {days, micros - days * kMicrosPerDay};
}

// days + µs into the day − offset seconds, as µs since the epoch; false when that overflows an
// int64 (a value outside the range a timestamp can hold).
constexpr bool combine_checked(int32_t days, int64_t time_micros, int64_t offset_seconds,
                               int64_t* out) noexcept {
  int64_t v;
  if (__builtin_mul_overflow(int64_t(days), kMicrosPerDay, &v)) return false;
  if (__builtin_add_overflow(v, time_micros, &v)) return false;
  int64_t offset_micros;
  if (__builtin_mul_overflow(offset_seconds, kMicrosPerSecond, &offset_micros)) return false;
  if (__builtin_sub_overflow(v, offset_micros, &v)) return false;
  *out = v;
  return true;
}

// Milliseconds (as Kafka, Kafka Connect and BSON count them) as µs; false when that overflows an
// int64 (a value a producer may set, outside the range a timestamp can hold).
constexpr bool micros_from_millis_checked(int64_t millis, int64_t* micros) noexcept {
  return !__builtin_mul_overflow(millis, int64_t(1000), micros);
}

// Allocation-free writers of the canonical forms; each returns the end of what it wrote.
// The common cases (years 0..9999, times within 100 hours) are inline: destinations render a
// timestamp per row. Each returns the end of what it wrote.
inline char* write_date(char* out, int32_t days) noexcept;         // kMaxDateChars
inline char* write_time(char* out, int64_t micros) noexcept;       // kMaxTimeChars
char* write_offset(char* out, int32_t offset_seconds) noexcept;    // kMaxOffsetChars
inline char* write_timestamp(char* out, int64_t micros) noexcept;  // kMaxTimestampChars
// Two- and four-digit zero-padded fields, for connectors' dialect forms.
inline char* write_2digits(char* p, unsigned v) noexcept {
  p[0] = char('0' + v / 10 % 10);
  p[1] = char('0' + v % 10);
  return p + 2;
}
// ".ffffff" with trailing zeros removed, or nothing when `fraction_micros` is 0.
inline char* write_fraction(char* p, uint32_t frac) noexcept {
  if (!frac) return p;
  *p++ = '.';
  char d[6];
  for (int i = 5; i >= 0; --i, frac /= 10) d[i] = char('0' + frac % 10);
  int n = 6;
  while (d[n - 1] == '0') --n;
  for (int i = 0; i < n; ++i) *p++ = d[i];
  return p;
}

// The uncommon cases, out of line: a year outside 0..9999 (±YYYY…), a time outside 0..100 h.
char* write_wide_date(char* out, const CivilDate& c) noexcept;
char* write_wide_time(char* out, int64_t micros) noexcept;

inline char* write_date(char* p, int32_t days) noexcept {
  const CivilDate c = civil_date(days);
  if (c.year < 0 || c.year > 9999) return write_wide_date(p, c);
  p = write_2digits(p, unsigned(c.year / 100));
  p = write_2digits(p, unsigned(c.year % 100));
  *p++ = '-';
  p = write_2digits(p, c.month);
  *p++ = '-';
  return write_2digits(p, c.day);
}

inline char* write_time(char* p, int64_t micros) noexcept {
  if (micros < 0 || micros >= 100 * 3600 * kMicrosPerSecond) return write_wide_time(p, micros);
  const unsigned s = unsigned(micros / kMicrosPerSecond);
  p = write_2digits(p, s / 3600);
  *p++ = ':';
  p = write_2digits(p, s / 60 % 60);
  *p++ = ':';
  p = write_2digits(p, s % 60);
  return write_fraction(p, uint32_t(micros % kMicrosPerSecond));
}

inline char* write_timestamp(char* p, int64_t micros) noexcept {
  const DayAndTime t = split_timestamp(micros);
  p = write_date(p, int32_t(t.days));
  *p++ = 'T';
  return write_time(p, t.micros);
}

void append_date(std::string& out, int32_t days);
void append_time(std::string& out, int64_t micros);
void append_offset(std::string& out, int32_t offset_seconds);
void append_timestamp(std::string& out, int64_t micros);    // no zone
void append_timestamptz(std::string& out, int64_t micros);  // with "Z"

// Prefix parsers: each consumes what it recognised from the front of `s` (on failure `s` is left
// partly consumed). Dates: [±]YYYY[Y…]-MM-DD; times: HH:MM[:SS[.f…]] (fraction beyond µs is cut);
// offsets: Z | ±HH[[:]MM[:SS]].
bool parse_date_prefix(std::string_view& s, int32_t* days);
bool parse_time_prefix(std::string_view& s, int64_t* micros);
// The pieces the dialects build on. An unsigned year of 4 to `max_year_digits` digits, then
// "-MM-DD" (month 1..12, day 1..31: the caller checks the day against its calendar, e.g. after
// mapping PostgreSQL's BC years).
// Inline: it is the per-value path of every source's dates.
inline bool parse_civil_prefix(std::string_view& s, size_t max_year_digits, CivilDate* out) {
  const char* p = s.data();
  const size_t size = s.size();
  size_t n = 0;
  uint64_t y = 0;  // unsigned: a longer run of digits wraps harmlessly, then fails below
  while (n < size && unsigned(p[n] - '0') <= 9) y = y * 10 + unsigned(p[n++] - '0');
  if (n < 4 || n > max_year_digits || n > 18) return false;  // 18 digits always fit an int64
  auto digit = [p](size_t i) { return unsigned(p[i] - '0') <= 9; };
  if (size - n < 6 || p[n] != '-' || !digit(n + 1) || !digit(n + 2) || p[n + 3] != '-' ||
      !digit(n + 4) || !digit(n + 5))
    return false;
  const unsigned m = unsigned(p[n + 1] - '0') * 10 + unsigned(p[n + 2] - '0');
  const unsigned d = unsigned(p[n + 4] - '0') * 10 + unsigned(p[n + 5] - '0');
  if (m < 1 || m > 12 || d < 1 || d > 31) return false;
  s.remove_prefix(n + 6);
  *out = {int64_t(y), m, d};
  return true;
}
// A signed duration written as a time: [-]H…H:MM:SS[.f…] with any number of hours (up to 9
// digits), as MySQL writes TIME (-838:59:59 … 838:59:59).
bool parse_duration_prefix(std::string_view& s, int64_t* micros);
bool parse_offset_prefix(std::string_view& s, int32_t* offset_seconds);

}  // namespace temporal
}  // namespace sluice
