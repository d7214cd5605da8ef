// PostgreSQL text representations → typed Values. pgoutput (text mode) and COPY ... TO STDOUT both
// carry each value as its type's output-function text; sluice sets DateStyle=ISO,
// IntervalStyle=iso_8601, TimeZone=UTC and extra_float_digits=3 on every connection, so the forms
// parsed here are exact and stable.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "sluice/arena.h"
#include "sluice/result.h"
#include "sluice/value.h"

namespace sluice::pg {

// Well-known built-in type OIDs (pg_type.dat).
namespace oid {
inline constexpr uint32_t kBool = 16, kBytea = 17, kChar = 18, kName = 19, kInt8 = 20, kInt2 = 21,
                          kInt4 = 23, kText = 25, kOid = 26, kJson = 114, kXml = 142, kFloat4 = 700,
                          kFloat8 = 701, kMoney = 790, kBpchar = 1042, kVarchar = 1043,
                          kDate = 1082, kTime = 1083, kTimestamp = 1114, kTimestamptz = 1184,
                          kInterval = 1186, kTimetz = 1266, kBit = 1560, kVarbit = 1562,
                          kNumeric = 1700, kUuid = 2950, kJsonb = 3802, kInet = 869, kCidr = 650,
                          kMacaddr = 829;
}  // namespace oid

// What sluice knows of a type: its category for conversion. Built-ins are known statically;
// user-defined types (enums, domains, arrays of them) are resolved by querying pg_type once and
// registered here.
struct TypeInfo {
  enum class Kind : uint8_t { base, array, enumeration, domain, composite, other };
  Kind kind = Kind::base;
  uint32_t element_oid = 0;  // array: element type; domain: base type
  char delimiter = ',';      // array element delimiter (',' for all but box)
};

class TypeRegistry {
 public:
  TypeRegistry();
  void add(uint32_t type_oid, TypeInfo info) { types_[type_oid] = info; }
  const TypeInfo* find(uint32_t type_oid) const {
    auto it = types_.find(type_oid);
    return it == types_.end() ? nullptr : &it->second;
  }
  bool known(uint32_t type_oid) const { return types_.count(type_oid) != 0; }

 private:
  std::unordered_map<uint32_t, TypeInfo> types_;
};

// Converts one value's text to a Value of the matching kind, with memory in `arena`:
//   bool→boolean; int2/int4/int8/oid→int64; float4/float8→float64 (NaN, Infinity, -Infinity);
//   numeric→decimal (exact text, incl. NaN, Infinity);
//   text/varchar/bpchar/name/char/xml/inet/...→string; bytea (hex "\x..")→bytes; date→date;
//   time→time; timetz→timetz; timestamp→timestamp; timestamptz→timestamptz; interval (ISO
//   8601)→interval; uuid→uuid; json/jsonb→json; arrays (any dimension, quoting, NULL)→array of the
//   element kind; enums→string; domains→the base type's kind; unknown types→string (their text,
//   unchanged).
// 'infinity'/'-infinity' dates and timestamps map to INT32/INT64 max/min.
// Malformed text → Errc::data naming the type.
Result<Value> text_to_value(const TypeRegistry& types, uint32_t type_oid, std::string_view text,
                            Arena& arena);

// Whether binary_to_value decodes the type's binary (send-function) form: the built-ins whose form
// is fixed and maps onto text_to_value's value exactly, enums, and domains and arrays over them.
bool binary_decodable(const TypeRegistry& types, uint32_t type_oid);

// Converts one value's binary form (COPY (FORMAT binary), pgoutput `binary`) to the Value
// text_to_value gives for the same value's text, with memory in `arena`. A type
// binary_decodable() refuses, or malformed bytes → Errc::data naming the type.
Result<Value> binary_to_value(const TypeRegistry& types, uint32_t type_oid, std::string_view bytes,
                              Arena& arena);
// The commonest of those (bool, int2/4/8, float8, date, timestamp(tz), text-like) without the
// Result: true with *out as binary_to_value gives it; false for any other type and for any value
// binary_to_value must judge (a wrong size, a date or timestamp out of range), which the caller
// then hands to binary_to_value. For the per-value loops of snapshots and streams.
bool binary_to_value_fast(uint32_t type_oid, std::string_view bytes, Arena& arena, Value* out);

// Unescapes one COPY text-format field (\\, \t, \n, \r, \b, \f, \v, \ooo octal, \xHH) into `out`.
// "\N" (NULL) must be checked by the caller before.
void copy_unescape(std::string_view field, std::string* out);

}  // namespace sluice::pg
