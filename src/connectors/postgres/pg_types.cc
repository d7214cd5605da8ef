#include "connectors/postgres/pg_types.h"

#include "connectors/postgres/pg_text.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>

#include "sluice/temporal.h"

namespace sluice::pg {

// The text parsers, shared with pg_array_text.cc (pg_text.h).
namespace text {

using Kind = TypeInfo::Kind;

// Built-in array types (pg_type.dat, checked against PostgreSQL 15): array oid, element oid,
// delimiter. int2vector (1006) and oidvector (1013) are not here: their text form is
// space-separated, not an array literal, so they stay strings.
struct BuiltinArray {
  uint32_t array_oid;
  uint32_t element_oid;
  char delimiter;
};
constexpr BuiltinArray kBuiltinArrays[] = {
    {1000, oid::kBool, ','},
    {1001, oid::kBytea, ','},
    {1002, oid::kChar, ','},
    {1003, oid::kName, ','},
    {1005, oid::kInt2, ','},
    {1007, oid::kInt4, ','},
    {1009, oid::kText, ','},
    {1016, oid::kInt8, ','},
    {1028, oid::kOid, ','},
    {143, oid::kXml, ','},
    {199, oid::kJson, ','},
    {1021, oid::kFloat4, ','},
    {1022, oid::kFloat8, ','},
    {791, oid::kMoney, ','},
    {1014, oid::kBpchar, ','},
    {1015, oid::kVarchar, ','},
    {1182, oid::kDate, ','},
    {1183, oid::kTime, ','},
    {1115, oid::kTimestamp, ','},
    {1185, oid::kTimestamptz, ','},
    {1187, oid::kInterval, ','},
    {1270, oid::kTimetz, ','},
    {1561, oid::kBit, ','},
    {1563, oid::kVarbit, ','},
    {1231, oid::kNumeric, ','},
    {2951, oid::kUuid, ','},
    {3807, oid::kJsonb, ','},
    {1041, oid::kInet, ','},
    {651, oid::kCidr, ','},
    {1040, oid::kMacaddr, ','},
    // Other built-ins whose elements convert to strings.
    {1008, 24, ','},    // _regproc
    {1010, 27, ','},    // _tid
    {1011, 28, ','},    // _xid
    {1012, 29, ','},    // _cid
    {271, 5069, ','},   // _xid8
    {1017, 600, ','},   // _point
    {1018, 601, ','},   // _lseg
    {1019, 602, ','},   // _path
    {1020, 603, ';'},   // _box: the one built-in with a ';' delimiter
    {1027, 604, ','},   // _polygon
    {629, 628, ','},    // _line
    {719, 718, ','},    // _circle
    {775, 774, ','},    // _macaddr8
    {1034, 1033, ','},  // _aclitem
    {1263, 2275, ','},  // _cstring
    {2201, 1790, ','},  // _refcursor
    {2207, 2202, ','},  // _regprocedure
    {2208, 2203, ','},  // _regoper
    {2209, 2204, ','},  // _regoperator
    {2210, 2205, ','},  // _regclass
    {2211, 2206, ','},  // _regtype
    {4090, 4089, ','},  // _regnamespace
    {4097, 4096, ','},  // _regrole
    {4192, 4191, ','},  // _regcollation
    {3735, 3734, ','},  // _regconfig
    {3770, 3769, ','},  // _regdictionary
    {2949, 2970, ','},  // _txid_snapshot
    {5039, 5038, ','},  // _pg_snapshot
    {3221, 3220, ','},  // _pg_lsn
    {3643, 3614, ','},  // _tsvector
    {3645, 3615, ','},  // _tsquery
    {4073, 4072, ','},  // _jsonpath
    {3905, 3904, ','},  // _int4range
    {3907, 3906, ','},  // _numrange
    {3909, 3908, ','},  // _tsrange
    {3911, 3910, ','},  // _tstzrange
    {3913, 3912, ','},  // _daterange
    {3927, 3926, ','},  // _int8range
    {6150, 4451, ','},  // _int4multirange
    {6151, 4532, ','},  // _nummultirange
    {6152, 4533, ','},  // _tsmultirange
    {6153, 4534, ','},  // _tstzmultirange
    {6155, 4535, ','},  // _datemultirange
    {6157, 4536, ','},  // _int8multirange
};

constexpr int64_t kMaxYear = 5874898;  // PostgreSQL's date range ends in 5874897 AD

std::string_view builtin_name(uint32_t type_oid) {
  switch (type_oid) {
    case oid::kBool: return "bool";
    case oid::kBytea: return "bytea";
    case oid::kChar: return "char";
    case oid::kName: return "name";
    case oid::kInt8: return "int8";
    case oid::kInt2: return "int2";
    case oid::kInt4: return "int4";
    case oid::kText: return "text";
    case oid::kOid: return "oid";
    case oid::kJson: return "json";
    case oid::kXml: return "xml";
    case oid::kFloat4: return "float4";
    case oid::kFloat8: return "float8";
    case oid::kMoney: return "money";
    case oid::kBpchar: return "bpchar";
    case oid::kVarchar: return "varchar";
    case oid::kDate: return "date";
    case oid::kTime: return "time";
    case oid::kTimestamp: return "timestamp";
    case oid::kTimestamptz: return "timestamptz";
    case oid::kInterval: return "interval";
    case oid::kTimetz: return "timetz";
    case oid::kBit: return "bit";
    case oid::kVarbit: return "varbit";
    case oid::kNumeric: return "numeric";
    case oid::kUuid: return "uuid";
    case oid::kJsonb: return "jsonb";
    case oid::kInet: return "inet";
    case oid::kCidr: return "cidr";
    case oid::kMacaddr: return "macaddr";
    default: return {};
  }
}

std::string type_label(uint32_t type_oid) {
  std::string_view n = builtin_name(type_oid);
  if (!n.empty()) return std::string(n);
  return "type " + std::to_string(type_oid);
}

Error invalid(uint32_t type_oid, std::string_view text, std::string_view why) {
  constexpr size_t kMaxShown = 48;
  std::string msg = "pg: invalid " + type_label(type_oid) + " value '";
  if (text.size() > kMaxShown) {
    msg.append(text.substr(0, kMaxShown));
    msg += "...";
  } else {
    msg.append(text);
  }
  msg += '\'';
  if (!why.empty()) {
    msg += ": ";
    msg.append(why);
  }
  return Error(Errc::data, std::move(msg));
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool eat(std::string_view& s, char c) {
  if (s.empty() || s.front() != c) return false;
  s.remove_prefix(1);
  return true;
}

bool parse_int(std::string_view s, int64_t lo, int64_t hi, int64_t* out) {
  if (s.empty()) return false;
  int64_t v;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool parse_float(std::string_view s, double* out) {
  if (s == "NaN") {
    *out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  if (s == "Infinity") {
    *out = std::numeric_limits<double>::infinity();
    return true;
  }
  if (s == "-Infinity") {
    *out = -std::numeric_limits<double>::infinity();
    return true;
  }
  if (s.empty()) return false;
  // from_chars is locale-independent and exact (round-trips the extra_float_digits=3 text).
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out, std::chars_format::general);
  return ec == std::errc() && p == s.data() + s.size() && std::isfinite(*out);
}

// numeric_out's forms: [-]digits[.digits], NaN, Infinity, -Infinity.
bool valid_numeric(std::string_view s) {
  if (s == "NaN" || s == "Infinity" || s == "-Infinity") return true;
  eat(s, '-');
  size_t n = 0;
  while (n < s.size() && is_digit(s[n])) ++n;
  if (n == 0) return false;
  s.remove_prefix(n);
  if (s.empty()) return true;
  if (!eat(s, '.') || s.empty()) return false;
  for (char c : s)
    if (!is_digit(c)) return false;
  return true;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool is_octal(char c) { return c >= '0' && c <= '7'; }

// bytea output: hex format "\x0a0b" (default) or the legacy escape format.
bool parse_bytea(std::string_view s, Arena& arena, std::string_view* out) {
  if (s.size() >= 2 && s[0] == '\\' && s[1] == 'x') {
    s.remove_prefix(2);
    char* buf = static_cast<char*>(arena.allocate(s.size() / 2 + 1, 1));
    size_t n = 0;
    for (size_t i = 0; i < s.size();) {
      char c = s[i];
      if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
        ++i;
        continue;
      }
      if (i + 1 >= s.size()) return false;
      int hi = hex_value(c), lo = hex_value(s[i + 1]);
      if (hi < 0 || lo < 0) return false;
      buf[n++] = static_cast<char>(hi * 16 + lo);
      i += 2;
    }
    *out = std::string_view(buf, n);
    return true;
  }
  char* buf = static_cast<char*>(arena.allocate(s.size() + 1, 1));
  size_t n = 0;
  for (size_t i = 0; i < s.size();) {
    char c = s[i];
    if (c != '\\') {
      buf[n++] = c;
      ++i;
      continue;
    }
    if (i + 1 < s.size() && s[i + 1] == '\\') {
      buf[n++] = '\\';
      i += 2;
      continue;
    }
    if (s.size() - i >= 4 && s[i + 1] >= '0' && s[i + 1] <= '3' && is_octal(s[i + 2]) &&
        is_octal(s[i + 3])) {
      buf[n++] =
          static_cast<char>(((s[i + 1] - '0') << 6) | ((s[i + 2] - '0') << 3) | (s[i + 3] - '0'));
      i += 4;
      continue;
    }
    return false;
  }
  *out = std::string_view(buf, n);
  return true;
}

// Removes a trailing " BC" (PostgreSQL's ISO output for years before 1 AD).
bool strip_bc(std::string_view& s) {
  if (s.size() >= 3 && s.substr(s.size() - 3) == " BC") {
    s.remove_suffix(3);
    return true;
  }
  return false;
}

// "YYYY-MM-DD" (4+ digit year, no sign) at the start of `s`; `bc` maps year y BC to 1 - y
// (1 BC is year 0 of the proleptic Gregorian calendar).
bool parse_ymd(std::string_view& s, bool bc, int32_t* days) {
  // PostgreSQL writes 4 to 9 year digits (its dates end in 5874897 AD) and no year 0.
  temporal::CivilDate c;
  if (!temporal::parse_civil_prefix(s, 9, &c)) return false;
  if (c.year == 0 || c.year > kMaxYear) return false;
  if (bc) c.year = 1 - c.year;
  if (c.day > temporal::days_in_month(c.year, c.month)) return false;
  *days = days_from_civil(c.year, c.month, c.day);
  return true;
}

bool parse_pg_date(std::string_view s, int32_t* days) {
  if (s == "infinity") {
    *days = std::numeric_limits<int32_t>::max();
    return true;
  }
  if (s == "-infinity") {
    *days = std::numeric_limits<int32_t>::min();
    return true;
  }
  bool bc = strip_bc(s);
  return parse_ymd(s, bc, days) && s.empty();
}

enum class Parse { ok, malformed, out_of_range };

// "YYYY-MM-DD HH:MM:SS[.ffffff][ BC]"; with_zone: an offset follows the time ("+00", "+05:30").
// PostgreSQL's range reaches 294276 AD; microseconds since 1970 in an int64 end in 294247 AD.
Parse parse_pg_timestamp(std::string_view s, bool with_zone, int64_t* micros) {
  if (s == "infinity") {
    *micros = std::numeric_limits<int64_t>::max();
    return Parse::ok;
  }
  if (s == "-infinity") {
    *micros = std::numeric_limits<int64_t>::min();
    return Parse::ok;
  }
  bool bc = strip_bc(s);
  int32_t days;
  if (!parse_ymd(s, bc, &days)) return Parse::malformed;
  if (!eat(s, ' ') && !eat(s, 'T')) return Parse::malformed;
  int64_t t;
  int32_t off = 0;
  if (with_zone ? !parse_timetz(s, &t, &off) : !parse_time(s, &t)) return Parse::malformed;
  return temporal::combine_checked(days, t, off, micros) ? Parse::ok : Parse::out_of_range;
}

// IntervalStyle=iso_8601 output: "P1Y2M3DT4H5M6.5S", "P-1Y-2M3DT-4H-5M-6.5S", "PT0S". Each
// component carries its own sign; only seconds have a fraction.
bool parse_pg_interval(std::string_view s, Interval* iv) {
  if (!eat(s, 'P') || s.empty()) return false;
  int64_t months = 0, days = 0, micros = 0;
  bool in_time = false;
  while (!s.empty()) {
    if (s.front() == 'T') {
      if (in_time) return false;
      in_time = true;
      s.remove_prefix(1);
      if (s.empty()) return false;
      continue;
    }
    bool neg = eat(s, '-');
    if (!neg) eat(s, '+');
    int64_t whole = 0;
    size_t n = 0;
    while (!s.empty() && is_digit(s.front())) {
      if (__builtin_mul_overflow(whole, 10, &whole) ||
          __builtin_add_overflow(whole, s.front() - '0', &whole))
        return false;
      s.remove_prefix(1);
      ++n;
    }
    int64_t frac = 0;
    bool has_frac = false;
    if (eat(s, '.')) {
      has_frac = true;
      int k = 0;
      while (!s.empty() && is_digit(s.front())) {
        if (k < 6) frac = frac * 10 + (s.front() - '0');
        ++k;
        s.remove_prefix(1);
      }
      if (k == 0) return false;
      for (; k < 6; ++k) frac *= 10;
    }
    if (n == 0 || s.empty()) return false;
    char unit = s.front();
    s.remove_prefix(1);
    if (neg) {
      whole = -whole;
      frac = -frac;
    }
    int64_t mult;
    int64_t* acc;
    if (!in_time) {
      if (has_frac) return false;
      switch (unit) {
        case 'Y':
          mult = 12;
          acc = &months;
          break;
        case 'M':
          mult = 1;
          acc = &months;
          break;
        case 'W':
          mult = 7;
          acc = &days;
          break;
        case 'D':
          mult = 1;
          acc = &days;
          break;
        default: return false;
      }
    } else {
      switch (unit) {
        case 'H':
          mult = 3600000000LL;
          acc = &micros;
          break;
        case 'M':
          mult = 60000000LL;
          acc = &micros;
          break;
        case 'S':
          mult = 1000000LL;
          acc = &micros;
          break;
        default: return false;
      }
      if (has_frac && unit != 'S') return false;
    }
    int64_t v;
    if (__builtin_mul_overflow(whole, mult, &v) || __builtin_add_overflow(v, frac, &v) ||
        __builtin_add_overflow(*acc, v, acc))
      return false;
  }
  if (months < INT32_MIN || months > INT32_MAX || days < INT32_MIN || days > INT32_MAX)
    return false;
  iv->months = int32_t(months);
  iv->days = int32_t(days);
  iv->micros = micros;
  return true;
}

void skip_ws(std::string_view& s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n' ||
                        s.front() == '\r' || s.front() == '\v' || s.front() == '\f'))
    s.remove_prefix(1);
}

bool is_ws(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

Result<Value> convert(const TypeRegistry& types, uint32_t type_oid, std::string_view text,
                      Arena& arena, bool in_arena, int depth) {
  auto own = [&](std::string_view s) { return in_arena ? s : arena.copy(s); };
  switch (type_oid) {
    case oid::kBool:
      if (text == "t" || text == "true") return Value::boolean(true);
      if (text == "f" || text == "false") return Value::boolean(false);
      return invalid(type_oid, text);
    case oid::kInt2: {
      int64_t v;
      if (!parse_int(text, INT16_MIN, INT16_MAX, &v)) return invalid(type_oid, text);
      return Value::int64(v);
    }
    case oid::kInt4: {
      int64_t v;
      if (!parse_int(text, INT32_MIN, INT32_MAX, &v)) return invalid(type_oid, text);
      return Value::int64(v);
    }
    case oid::kInt8: {
      int64_t v;
      if (!parse_int(text, INT64_MIN, INT64_MAX, &v)) return invalid(type_oid, text);
      return Value::int64(v);
    }
    case oid::kOid: {
      int64_t v;
      if (!parse_int(text, 0, UINT32_MAX, &v)) return invalid(type_oid, text);
      return Value::int64(v);
    }
    case oid::kFloat4:
    case oid::kFloat8: {
      double d;
      if (!parse_float(text, &d)) return invalid(type_oid, text);
      return Value::float64(d);
    }
    case oid::kNumeric:
      if (!valid_numeric(text)) return invalid(type_oid, text);
      return Value::decimal(own(text));
    case oid::kBytea: {
      std::string_view b;
      if (!parse_bytea(text, arena, &b)) return invalid(type_oid, text);
      return Value::bytes(b);
    }
    case oid::kDate: {
      int32_t d;
      if (!parse_pg_date(text, &d)) return invalid(type_oid, text);
      return Value::date(d);
    }
    case oid::kTime: {
      int64_t t;
      if (!parse_time(text, &t)) return invalid(type_oid, text);
      return Value::time(t);
    }
    case oid::kTimetz: {
      int64_t t;
      int32_t off;
      if (!parse_timetz(text, &t, &off)) return invalid(type_oid, text);
      return Value::timetz(t, off);
    }
    case oid::kTimestamp:
    case oid::kTimestamptz: {
      int64_t t;
      Parse p = parse_pg_timestamp(text, type_oid == oid::kTimestamptz, &t);
      if (p == Parse::out_of_range)
        return invalid(type_oid, text, "beyond the range sluice can represent (294247 AD)");
      if (p != Parse::ok) return invalid(type_oid, text);
      return type_oid == oid::kTimestamp ? Value::timestamp(t) : Value::timestamptz(t);
    }
    case oid::kInterval: {
      Interval iv;
      if (!parse_pg_interval(text, &iv)) return invalid(type_oid, text);
      auto* p = new (arena.allocate(sizeof(Interval), alignof(Interval))) Interval(iv);
      return Value::interval(p);
    }
    case oid::kUuid: {
      auto* b = static_cast<uint8_t*>(arena.allocate(16, 1));
      if (!parse_uuid(text, b)) return invalid(type_oid, text);
      return Value::uuid(b);
    }
    case oid::kJson:
    case oid::kJsonb: return Value::json(own(text));
    case oid::kText:
    case oid::kVarchar:
    case oid::kBpchar:
    case oid::kName:
    case oid::kChar:
    case oid::kXml:
    case oid::kMoney:
    case oid::kBit:
    case oid::kVarbit:
    case oid::kInet:
    case oid::kCidr:
    case oid::kMacaddr: return Value::string(own(text));
    default: break;
  }
  const TypeInfo* info = types.find(type_oid);
  if (info != nullptr) {
    switch (info->kind) {
      case Kind::array:
        if (depth > kMaxDepth) return invalid(type_oid, text, "type nesting too deep");
        return parse_array_text(types, type_oid, info->element_oid, info->delimiter, arena, depth,
                                text);
      case Kind::domain: {
        if (depth > kMaxDepth) return invalid(type_oid, text, "domain chain too deep");
        Result<Value> v = convert(types, info->element_oid, text, arena, in_arena, depth + 1);
        if (!v)
          return Error(v.error().code(),
                       v.error().message() + " (domain " + std::to_string(type_oid) + ")");
        return v;
      }
      case Kind::base:
      case Kind::enumeration:
      case Kind::composite:
      case Kind::other: break;
    }
  }
  return Value::string(own(text));
}

}  // namespace text

using namespace text;  // NOLINT: this file's own parsers

TypeRegistry::TypeRegistry() {
  constexpr uint32_t kBase[] = {oid::kBool,     oid::kBytea,   oid::kChar,        oid::kName,
                                oid::kInt8,     oid::kInt2,    oid::kInt4,        oid::kText,
                                oid::kOid,      oid::kJson,    oid::kXml,         oid::kFloat4,
                                oid::kFloat8,   oid::kMoney,   oid::kBpchar,      oid::kVarchar,
                                oid::kDate,     oid::kTime,    oid::kTimestamp,   oid::kTimestamptz,
                                oid::kInterval, oid::kTimetz,  oid::kBit,         oid::kVarbit,
                                oid::kNumeric,  oid::kUuid,    oid::kJsonb,       oid::kInet,
                                oid::kCidr,     oid::kMacaddr, 22 /*int2vector*/, 30 /*oidvector*/};
  types_.reserve(std::size(kBase) + std::size(kBuiltinArrays) * 2);
  for (uint32_t t : kBase) types_[t] = TypeInfo{Kind::base, 0, ','};
  for (const BuiltinArray& a : kBuiltinArrays) {
    types_[a.array_oid] = TypeInfo{Kind::array, a.element_oid, a.delimiter};
    types_.try_emplace(a.element_oid, TypeInfo{Kind::base, 0, a.delimiter});
  }
}

Result<Value> text_to_value(const TypeRegistry& types, uint32_t type_oid, std::string_view text,
                            Arena& arena) {
  return convert(types, type_oid, text, arena, false, 0);
}

void copy_unescape(std::string_view field, std::string* out) {
  out->clear();
  out->reserve(field.size());
  for (size_t i = 0; i < field.size(); ++i) {
    char c = field[i];
    if (c != '\\' || i + 1 >= field.size()) {
      out->push_back(c);
      continue;
    }
    char e = field[++i];
    switch (e) {
      case 'b': out->push_back('\b'); break;
      case 'f': out->push_back('\f'); break;
      case 'n': out->push_back('\n'); break;
      case 'r': out->push_back('\r'); break;
      case 't': out->push_back('\t'); break;
      case 'v': out->push_back('\v'); break;
      case 'x': {
        int v = 0, k = 0;
        while (k < 2 && i + 1 < field.size() && hex_value(field[i + 1]) >= 0) {
          v = v * 16 + hex_value(field[++i]);
          ++k;
        }
        if (k == 0) out->push_back('x');  // "\x" without digits: PostgreSQL takes the 'x' literally
        else out->push_back(static_cast<char>(v));
        break;
      }
      default:
        if (is_octal(e)) {
          int v = e - '0', k = 1;
          while (k < 3 && i + 1 < field.size() && is_octal(field[i + 1])) {
            v = v * 8 + (field[++i] - '0');
            ++k;
          }
          out->push_back(static_cast<char>(v & 0xFF));
        } else {
          out->push_back(e);  // "\\" and any other escaped character stand for themselves
        }
    }
  }
}

}  // namespace sluice::pg
