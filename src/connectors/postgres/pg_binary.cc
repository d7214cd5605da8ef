// PostgreSQL binary representations (each type's send function: COPY (FORMAT binary), pgoutput
// `binary`) → the same Values text_to_value gives for the text forms. Network byte order; epochs
// of 2000-01-01; ±infinity at the int32/int64 limits (the values sluice already uses for them).
//
// A type is decoded here only when its binary form is fixed and version-independent and maps onto
// the text path's value exactly. Left to the text path: "char" (its output escapes high bytes since
// PostgreSQL 15), money (its text follows lc_monetary), xml (its send form may add an encoding
// declaration), the network types (their text abbreviates), composite, range and other types.
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>

#include "connectors/postgres/pg_text.h"
#include "connectors/postgres/pg_wire.h"

namespace sluice::pg {

namespace {

using Kind = TypeInfo::Kind;
using text::invalid;
using text::kMaxDepth;

constexpr int64_t kPgEpochDays = 10957;                      // 1970-01-01 → 2000-01-01
constexpr int64_t kPgEpochMicros = 946684800LL * 1000000LL;  // the same in µs

using wire::be16;
using wire::be32;
using wire::be64;

// The error names the type and shows the bytes in hex (they are not text).
Error bad(uint32_t type_oid, std::string_view bytes, std::string_view why) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string shown = "\\x";
  for (size_t i = 0; i < bytes.size() && i < 24; ++i) {
    shown += kHex[uint8_t(bytes[i]) >> 4];
    shown += kHex[uint8_t(bytes[i]) & 15];
  }
  Error e = invalid(type_oid, shown, why);
  return bytes.size() > 24 ? Error(e.code(), e.message() + " (binary, truncated)")
                           : Error(e.code(), e.message() + " (binary)");
}

// numeric_send: ndigits, weight, sign, dscale (int16 each), then ndigits base-10000 digits, the
// first of weight `weight`. Rendered as numeric_out does (get_str_from_var): the integer part
// without leading zeros ("0" when weight < 0), then exactly dscale fraction digits.
Result<Value> numeric(uint32_t type_oid, std::string_view b, Arena& arena) {
  if (b.size() < 8) return bad(type_oid, b, "shorter than its header");
  const int ndigits = int16_t(be16(b.data()));
  const int weight = int16_t(be16(b.data() + 2));
  const uint16_t sign = be16(b.data() + 4);
  const int dscale = be16(b.data() + 6);
  if (ndigits < 0 || b.size() != 8 + 2 * size_t(ndigits))
    return bad(type_oid, b, "its length does not match its digit count");
  switch (sign) {
    case 0xC000: return Value::decimal("NaN");
    case 0xD000: return Value::decimal("Infinity");
    case 0xF000: return Value::decimal("-Infinity");
    case 0x0000:
    case 0x4000: break;
    default: return bad(type_oid, b, "unknown sign");
  }
  if (dscale > 0x3FFF) return bad(type_oid, b, "display scale out of range");
  auto digit = [&](int d) -> int {
    return d >= 0 && d < ndigits ? int16_t(be16(b.data() + 8 + 2 * d)) : 0;
  };
  for (int d = 0; d < ndigits; ++d)
    if (digit(d) < 0 || digit(d) > 9999) return bad(type_oid, b, "a digit beyond 9999");
  // Sign, integer digits (4 per base-10000 digit), point, dscale digits (+4 of rounding slack).
  const size_t cap = 1 + size_t(std::max(weight + 1, 1)) * 4 + 1 + size_t(dscale) + 4;
  char* out = static_cast<char*>(arena.allocate(cap, 1));
  char* p = out;
  if (sign == 0x4000) *p++ = '-';
  int d;
  if (weight < 0) {
    d = weight + 1;
    *p++ = '0';
  } else {
    for (d = 0; d <= weight; ++d) {
      const int dig = digit(d);
      if (d == 0) {
        p = std::to_chars(p, out + cap, dig).ptr;  // no leading zeros
      } else {
        p[0] = char('0' + dig / 1000);
        p[1] = char('0' + dig / 100 % 10);
        p[2] = char('0' + dig / 10 % 10);
        p[3] = char('0' + dig % 10);
        p += 4;
      }
    }
  }
  if (dscale > 0) {
    *p++ = '.';
    char* end = p + dscale;
    for (int i = 0; i < dscale; i += 4, ++d) {
      const int dig = digit(d);
      p[0] = char('0' + dig / 1000);
      p[1] = char('0' + dig / 100 % 10);
      p[2] = char('0' + dig / 10 % 10);
      p[3] = char('0' + dig % 10);
      p += 4;
    }
    p = end;
  }
  return Value::decimal(std::string_view(out, size_t(p - out)));
}

// bit and varbit: bit length (int32), then the bits, most significant first → "0101…".
Result<Value> bits(uint32_t type_oid, std::string_view b, Arena& arena) {
  if (b.size() < 4) return bad(type_oid, b, "shorter than its length");
  const int32_t n = int32_t(be32(b.data()));
  if (n < 0 || b.size() != 4 + (size_t(n) + 7) / 8)
    return bad(type_oid, b, "its length does not match its bit count");
  char* out = static_cast<char*>(arena.allocate(size_t(n) + 1, 1));
  for (int32_t i = 0; i < n; ++i) out[i] = (uint8_t(b[4 + i / 8]) >> (7 - i % 8)) & 1 ? '1' : '0';
  return Value::string(std::string_view(out, size_t(n)));
}

Result<Value> convert(const TypeRegistry& types, uint32_t type_oid, std::string_view b,
                      Arena& arena, int depth);

// array_send: ndim, flags (has nulls), element type (int32 each), then per dimension its length
// and lower bound (int32 each), then the elements in row-major order, each an int32 length (-1:
// NULL) and its bytes. Nested the way the text path nests "{{1,2},{3,4}}".
class BinaryArray {
 public:
  BinaryArray(const TypeRegistry& types, uint32_t array_oid, uint32_t elem_oid, Arena& arena,
              int depth)
      : types_(types), array_oid_(array_oid), elem_oid_(elem_oid), arena_(arena), depth_(depth) {}

  Result<Value> decode(std::string_view b) {
    all_ = b;
    if (b.size() < 12) return bad(array_oid_, all_, "shorter than its header");
    const int32_t ndim = int32_t(be32(b.data()));
    if (ndim < 0 || ndim > 6) return bad(array_oid_, all_, "dimension count out of range");
    if (ndim == 0) return Value::array(nullptr, 0);
    if (b.size() < 12 + 8 * size_t(ndim)) return bad(array_oid_, all_, "truncated dimensions");
    for (int32_t i = 0; i < ndim; ++i) {
      const int32_t len = int32_t(be32(b.data() + 12 + 8 * i));
      const int32_t lower = int32_t(be32(b.data() + 16 + 8 * i));
      if (len < 0) return bad(array_oid_, all_, "negative dimension");
      if (lower != 1)
        return bad(array_oid_, all_,
                   "an array whose subscripts do not start at 1 cannot be represented (array "
                   "values have no lower bound)");
      dims_[i] = uint32_t(len);
    }
    ndim_ = ndim;
    rest_ = b.substr(12 + 8 * size_t(ndim));
    Result<Value> v = level(0);
    if (!v) return v;
    if (!rest_.empty()) return bad(array_oid_, all_, "junk after its elements");
    return v;
  }

 private:
  Result<Value> level(int dim) {
    const uint32_t n = dims_[dim];
    if (n > rest_.size()) return bad(array_oid_, all_, "truncated elements");  // ≥ 1 byte each
    Value* items = arena_.allocate_array<Value>(n);
    for (uint32_t i = 0; i < n; ++i) {
      Result<Value> v = dim + 1 < ndim_ ? level(dim + 1) : element();
      if (!v) return v;
      new (&items[i]) Value(v.value());
    }
    return Value::array(items, n);
  }

  Result<Value> element() {
    if (rest_.size() < 4) return bad(array_oid_, all_, "truncated element");
    const int32_t len = int32_t(be32(rest_.data()));
    rest_.remove_prefix(4);
    if (len == -1) return Value::null();
    if (len < 0 || size_t(len) > rest_.size()) return bad(array_oid_, all_, "truncated element");
    const std::string_view e = rest_.substr(0, size_t(len));
    rest_.remove_prefix(size_t(len));
    return convert(types_, elem_oid_, e, arena_, depth_ + 1);
  }

  const TypeRegistry& types_;
  uint32_t array_oid_, elem_oid_;
  Arena& arena_;
  int depth_;
  std::string_view all_, rest_;
  uint32_t dims_[6] = {};
  int ndim_ = 0;
};

// A fixed-size value of another size (out of line: every value of such a type checks its size,
// and the check must stay a compare and a branch).
[[gnu::cold, gnu::noinline]] Error wrong_size(uint32_t type_oid, std::string_view b, size_t size) {
  return bad(type_oid, b, "expected " + std::to_string(size) + " bytes");
}

Result<Value> convert(const TypeRegistry& types, uint32_t type_oid, std::string_view b,
                      Arena& arena, int depth) {
  const char* p = b.data();
  switch (type_oid) {
    case oid::kBool:
      if (b.size() != 1) return wrong_size(type_oid, b, 1);
      if (uint8_t(p[0]) > 1) return bad(type_oid, b, "neither 0 nor 1");
      return Value::boolean(p[0] != 0);
    case oid::kInt2:
      if (b.size() != 2) return wrong_size(type_oid, b, 2);
      return Value::int64(int16_t(be16(p)));
    case oid::kInt4:
      if (b.size() != 4) return wrong_size(type_oid, b, 4);
      return Value::int64(int32_t(be32(p)));
    case oid::kOid:
      if (b.size() != 4) return wrong_size(type_oid, b, 4);
      return Value::int64(int64_t(be32(p)));
    case oid::kInt8:
      if (b.size() != 8) return wrong_size(type_oid, b, 8);
      return Value::int64(int64_t(be64(p)));
    case oid::kFloat4: {
      if (b.size() != 4) return wrong_size(type_oid, b, 4);
      const float f = std::bit_cast<float>(be32(p));
      if (!std::isfinite(f)) return Value::float64(double(f));  // NaN, ±Infinity
      // The text path reads float4's shortest decimal form as a double (1.1, not 1.100000023…).
      return Value::float64(float_as_shortest_double(f));
    }
    case oid::kFloat8:
      if (b.size() != 8) return wrong_size(type_oid, b, 8);
      return Value::float64(std::bit_cast<double>(be64(p)));
    case oid::kNumeric: return numeric(type_oid, b, arena);
    case oid::kBytea: return Value::bytes(arena.copy(b));
    case oid::kDate: {
      if (b.size() != 4) return wrong_size(type_oid, b, 4);
      const int32_t d = int32_t(be32(p));
      if (d == std::numeric_limits<int32_t>::max() || d == std::numeric_limits<int32_t>::min())
        return Value::date(d);  // ±infinity
      const int64_t days = int64_t(d) + kPgEpochDays;
      if (days >= std::numeric_limits<int32_t>::max()) return bad(type_oid, b, "out of range");
      return Value::date(int32_t(days));
    }
    case oid::kTime:
      if (b.size() != 8) return wrong_size(type_oid, b, 8);
      return Value::time(int64_t(be64(p)));
    case oid::kTimetz: {
      // The zone is in seconds west of UTC; sluice's offset is east.
      if (b.size() != 12) return wrong_size(type_oid, b, 12);
      const int32_t zone = int32_t(be32(p + 8));
      // PostgreSQL's own bound (timetz_recv refuses the rest): a zone beyond it is malformed, and
      // INT32_MIN would have no negation.
      constexpr int32_t kZoneLimit = 16 * 3600;
      if (zone <= -kZoneLimit || zone >= kZoneLimit)
        return bad(type_oid, b, "time zone displacement out of range");
      return Value::timetz(int64_t(be64(p)), -zone);
    }
    case oid::kTimestamp:
    case oid::kTimestamptz: {
      if (b.size() != 8) return wrong_size(type_oid, b, 8);
      int64_t t = int64_t(be64(p));
      if (t != std::numeric_limits<int64_t>::max() && t != std::numeric_limits<int64_t>::min() &&
          __builtin_add_overflow(t, kPgEpochMicros, &t))
        return bad(type_oid, b, "beyond the range sluice can represent (294247 AD)");
      return type_oid == oid::kTimestamp ? Value::timestamp(t) : Value::timestamptz(t);
    }
    case oid::kInterval: {
      if (b.size() != 16) return wrong_size(type_oid, b, 16);
      Interval iv{int32_t(be32(p + 12)), int32_t(be32(p + 8)), int64_t(be64(p))};
      // PostgreSQL 17's infinite intervals: the text path does not read them either.
      if ((iv.micros == std::numeric_limits<int64_t>::max() ||
           iv.micros == std::numeric_limits<int64_t>::min()) &&
          (iv.months == std::numeric_limits<int32_t>::max() ||
           iv.months == std::numeric_limits<int32_t>::min()))
        return bad(type_oid, b, "an infinite interval");
      return Value::interval(new (arena.allocate(sizeof(Interval), alignof(Interval)))
                                 Interval(iv));
    }
    case oid::kUuid: {
      if (b.size() != 16) return wrong_size(type_oid, b, 16);
      auto* u = static_cast<uint8_t*>(arena.allocate(16, 1));
      std::memcpy(u, p, 16);
      return Value::uuid(u);
    }
    case oid::kJson: return Value::json(arena.copy(b));
    case oid::kJsonb:
      if (b.empty() || b[0] != 1) return bad(type_oid, b, "unknown jsonb version");
      return Value::json(arena.copy(b.substr(1)));
    case oid::kText:
    case oid::kVarchar:
    case oid::kBpchar:
    case oid::kName: return Value::string(arena.copy(b));
    case oid::kMacaddr: {
      if (b.size() != 6) return wrong_size(type_oid, b, 6);
      static constexpr char kHex[] = "0123456789abcdef";
      char* out = static_cast<char*>(arena.allocate(17, 1));
      for (int i = 0; i < 6; ++i) {
        out[3 * i] = kHex[uint8_t(p[i]) >> 4];
        out[3 * i + 1] = kHex[uint8_t(p[i]) & 15];
        if (i < 5) out[3 * i + 2] = ':';
      }
      return Value::string(std::string_view(out, 17));
    }
    case oid::kBit:
    case oid::kVarbit: return bits(type_oid, b, arena);
    default: break;
  }
  const TypeInfo* info = types.find(type_oid);
  if (info == nullptr) return bad(type_oid, b, "no binary decoder for this type");
  switch (info->kind) {
    case Kind::enumeration: return Value::string(arena.copy(b));  // enum_send: the label
    case Kind::domain: {
      // A domain's binary form is its base type's.
      if (depth > kMaxDepth) return bad(type_oid, b, "domain chain too deep");
      Result<Value> v = convert(types, info->element_oid, b, arena, depth + 1);
      if (!v)
        return Error(v.error().code(),
                     v.error().message() + " (domain " + std::to_string(type_oid) + ")");
      return v;
    }
    case Kind::array:
      if (depth > kMaxDepth) return bad(type_oid, b, "type nesting too deep");
      return BinaryArray(types, type_oid, info->element_oid, arena, depth).decode(b);
    case Kind::base:
    case Kind::composite:
    case Kind::other: break;
  }
  return bad(type_oid, b, "no binary decoder for this type");
}

bool decodable(const TypeRegistry& types, uint32_t type_oid, int depth) {
  switch (type_oid) {
    case oid::kBool:
    case oid::kInt2:
    case oid::kInt4:
    case oid::kOid:
    case oid::kInt8:
    case oid::kFloat4:
    case oid::kFloat8:
    case oid::kNumeric:
    case oid::kBytea:
    case oid::kDate:
    case oid::kTime:
    case oid::kTimetz:
    case oid::kTimestamp:
    case oid::kTimestamptz:
    case oid::kInterval:
    case oid::kUuid:
    case oid::kJson:
    case oid::kJsonb:
    case oid::kText:
    case oid::kVarchar:
    case oid::kBpchar:
    case oid::kName:
    case oid::kMacaddr:
    case oid::kBit:
    case oid::kVarbit: return true;
    default: break;
  }
  const TypeInfo* info = types.find(type_oid);
  if (info == nullptr || depth > kMaxDepth) return false;
  switch (info->kind) {
    case Kind::enumeration: return true;
    case Kind::domain:
    case Kind::array: return decodable(types, info->element_oid, depth + 1);
    case Kind::base:
    case Kind::composite:
    case Kind::other: return false;
  }
  return false;
}

}  // namespace

bool binary_decodable(const TypeRegistry& types, uint32_t type_oid) {
  return decodable(types, type_oid, 0);
}

Result<Value> binary_to_value(const TypeRegistry& types, uint32_t type_oid, std::string_view bytes,
                              Arena& arena) {
  return convert(types, type_oid, bytes, arena, 0);
}

bool binary_to_value_fast(uint32_t type_oid, std::string_view b, Arena& arena, Value* out) {
  const char* p = b.data();
  switch (type_oid) {
    case oid::kBool:
      if (b.size() != 1 || uint8_t(p[0]) > 1) return false;
      *out = Value::boolean(p[0] != 0);
      return true;
    case oid::kInt2:
      if (b.size() != 2) return false;
      *out = Value::int64(int16_t(be16(p)));
      return true;
    case oid::kInt4:
      if (b.size() != 4) return false;
      *out = Value::int64(int32_t(be32(p)));
      return true;
    case oid::kInt8:
      if (b.size() != 8) return false;
      *out = Value::int64(int64_t(be64(p)));
      return true;
    case oid::kFloat8:
      if (b.size() != 8) return false;
      *out = Value::float64(std::bit_cast<double>(be64(p)));
      return true;
    case oid::kDate: {
      if (b.size() != 4) return false;
      const int32_t d = int32_t(be32(p));
      if (d == std::numeric_limits<int32_t>::max() || d == std::numeric_limits<int32_t>::min())
        return false;  // ±infinity
      const int64_t days = int64_t(d) + kPgEpochDays;
      if (days >= std::numeric_limits<int32_t>::max()) return false;
      *out = Value::date(int32_t(days));
      return true;
    }
    case oid::kTimestamp:
    case oid::kTimestamptz: {
      if (b.size() != 8) return false;
      int64_t t = int64_t(be64(p));
      if (t == std::numeric_limits<int64_t>::max() || t == std::numeric_limits<int64_t>::min() ||
          __builtin_add_overflow(t, kPgEpochMicros, &t))
        return false;  // ±infinity, or beyond the range
      *out = type_oid == oid::kTimestamp ? Value::timestamp(t) : Value::timestamptz(t);
      return true;
    }
    case oid::kText:
    case oid::kVarchar:
    case oid::kBpchar:
    case oid::kName: *out = Value::string(arena.copy(b)); return true;
    default: return false;
  }
}

}  // namespace sluice::pg
