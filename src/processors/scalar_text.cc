#include "processors/scalar_text.h"

#include <charconv>
#include <cmath>
#include <limits>

namespace sluice {

namespace {

bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

// The three spellings YAML 1.2 core accepts for a word: lower, Capitalised, UPPER.
bool yaml_word(std::string_view s, std::string_view lower) noexcept {
  if (s.size() != lower.size() || s.empty()) return false;
  if (s == lower) return true;
  bool upper = true, capital = s[0] == static_cast<char>(lower[0] - 'a' + 'A');
  for (size_t i = 0; i < s.size(); ++i) {
    char u = static_cast<char>(lower[i] - 'a' + 'A');
    if (s[i] != u) upper = false;
    if (i > 0 && s[i] != lower[i]) capital = false;
  }
  return upper || capital;
}

// [-+]?(.d+|d+(.d*)?)([eE][-+]?d+)?
bool is_float_syntax(std::string_view s) noexcept {
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  size_t int_digits = 0, frac_digits = 0;
  while (i < s.size() && is_digit(s[i])) ++i, ++int_digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && is_digit(s[i])) ++i, ++frac_digits;
  }
  if (int_digits == 0 && frac_digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    size_t exp_digits = 0;
    while (i < s.size() && is_digit(s[i])) ++i, ++exp_digits;
    if (exp_digits == 0) return false;
  }
  return i == s.size();
}

}  // namespace

bool parse_yaml_null(std::string_view s) noexcept { return s == "~" || yaml_word(s, "null"); }

bool parse_yaml_bool(std::string_view s, bool* out) noexcept {
  if (yaml_word(s, "true")) *out = true;
  else if (yaml_word(s, "false")) *out = false;
  else return false;
  return true;
}

bool parse_int64_text(std::string_view s, int64_t* out) noexcept {
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'o')) {
    base = s[1] == 'x' ? 16 : 8;
    s.remove_prefix(2);
  }
  if (s.empty() || s[0] == '+' || s[0] == '-') return false;
  uint64_t magnitude = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), magnitude, base);
  if (ec != std::errc() || end != s.data() + s.size()) return false;
  constexpr uint64_t kMaxPositive = uint64_t(std::numeric_limits<int64_t>::max());
  if (magnitude > kMaxPositive + (negative ? 1 : 0)) return false;
  // Negate in unsigned arithmetic so that INT64_MIN does not overflow.
  *out = negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
  return true;
}

bool parse_uint64_text(std::string_view s, uint64_t* out) noexcept {
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  if (s.empty() || !is_digit(s[0])) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

bool parse_float_text(std::string_view s, double* out, bool yaml_only) noexcept {
  std::string_view body = s;
  bool negative = false;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    negative = body[0] == '-';
    body.remove_prefix(1);
  }
  const double sign = negative ? -1.0 : 1.0;
  if (body == ".inf" || body == ".Inf" || body == ".INF" ||
      (!yaml_only && (iequals(body, "inf") || iequals(body, "infinity")))) {
    *out = sign * std::numeric_limits<double>::infinity();
    return true;
  }
  if (body == ".nan" || body == ".NaN" || body == ".NAN" || (!yaml_only && iequals(body, "nan"))) {
    if (s.size() != body.size()) return false;  // a signed NaN is not a literal anyone means
    *out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  if (!is_float_syntax(s)) return false;
  // from_chars takes no leading '+'; out-of-range values are errors (no silent infinities).
  auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), *out);
  if (ec != std::errc() || end != body.data() + body.size()) return false;
  *out *= sign;
  return true;
}

bool is_decimal_text(std::string_view s) noexcept {
  if (s == "NaN" || s == "Infinity" || s == "+Infinity" || s == "-Infinity") return true;
  return is_float_syntax(s);
}

Value parse_scalar_value(std::string_view text) noexcept {
  if (parse_yaml_null(text)) return Value::null();
  bool b;
  if (parse_yaml_bool(text, &b)) return Value::boolean(b);
  int64_t i;
  if (parse_int64_text(text, &i)) return Value::int64(i);
  uint64_t u;
  if (parse_uint64_text(text, &u)) return Value::uint64(u);
  PlainDecimal d;
  const bool integral = parse_plain_decimal(text, &d) && text.find('.') == std::string_view::npos;
  if (integral) return Value::decimal(text);  // an integer too large for 64 bits stays exact
  double f;
  if (parse_float_text(text, &f, /*yaml_only=*/true)) return Value::float64(f);
  return Value::string(text);
}

bool parse_plain_decimal(std::string_view s, PlainDecimal* out) noexcept {
  PlainDecimal d;
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) d.negative = s[i++] == '-';
  size_t int_begin = i;
  while (i < s.size() && is_digit(s[i])) ++i;
  std::string_view integer = s.substr(int_begin, i - int_begin);
  std::string_view fraction;
  if (i < s.size() && s[i] == '.') {
    size_t frac_begin = ++i;
    while (i < s.size() && is_digit(s[i])) ++i;
    fraction = s.substr(frac_begin, i - frac_begin);
  }
  if (i != s.size() || (integer.empty() && fraction.empty())) return false;
  while (!integer.empty() && integer.front() == '0') integer.remove_prefix(1);
  while (!fraction.empty() && fraction.back() == '0') fraction.remove_suffix(1);
  d.integer = integer;
  d.fraction = fraction;
  if (integer.empty() && fraction.empty()) d.negative = false;  // -0 == 0
  *out = d;
  return true;
}

int compare_plain_decimal(const PlainDecimal& a, const PlainDecimal& b) noexcept {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  int magnitude;
  if (a.integer.size() != b.integer.size())
    magnitude = a.integer.size() < b.integer.size() ? -1 : 1;
  else if (int c = a.integer.compare(b.integer); c != 0) magnitude = c;
  else magnitude = a.fraction.compare(b.fraction);  // no trailing zeros: lexicographic is numeric
  magnitude = (magnitude > 0) - (magnitude < 0);
  return a.negative ? -magnitude : magnitude;
}

}  // namespace sluice
