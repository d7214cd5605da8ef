// libFuzzer target: PostgreSQL binary values (src/connectors/postgres/pg_binary.cc), as COPY
// (FORMAT binary) and pgoutput `binary` carry them. The first byte picks the type (the table
// below: every type binary_decodable() accepts, an enum, a domain, arrays); the rest is the value.
// Malformed bytes must be an Errc::data error, never a crash or a read outside the value, which is
// copied to a heap buffer of exactly its size so AddressSanitizer sees a read one byte past it;
// binary_to_value_fast, where it takes a value, must give binary_to_value's.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <string_view>

#include "connectors/postgres/pg_types.h"

namespace {

constexpr uint32_t kEnum = 90001, kDomain = 90002, kEnumArray = 90003, kDomainArray = 90004;

const sluice::pg::TypeRegistry& registry() {
  static const sluice::pg::TypeRegistry r = [] {
    using sluice::pg::TypeInfo;
    sluice::pg::TypeRegistry t;
    t.add(kEnum, {TypeInfo::Kind::enumeration, 0, ','});
    t.add(kDomain, {TypeInfo::Kind::domain, sluice::pg::oid::kNumeric, ','});
    t.add(kEnumArray, {TypeInfo::Kind::array, kEnum, ','});
    t.add(kDomainArray, {TypeInfo::Kind::array, kDomain, ','});
    return t;
  }();
  return r;
}

constexpr uint32_t kTypes[] = {
    16,   17,   19,   20,   21,   23,   25,    26,      114,        700,         701,
    829,  1042, 1043, 1082, 1083, 1114, 1184,  1186,    1266,       1560,        1562,
    1700, 2950, 3802, 1000, 1007, 1009, 1016,  1021,    1022,       1115,        1182,
    1185, 1187, 1231, 1270, 2951, 3807, kEnum, kDomain, kEnumArray, kDomainArray};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint32_t type = kTypes[data[0] % std::size(kTypes)];
  std::unique_ptr<char[]> copy(new char[size - 1 ? size - 1 : 1]);
  if (size > 1) std::memcpy(copy.get(), data + 1, size - 1);
  sluice::Arena arena(4096);
  const std::string_view value(copy.get(), size - 1);
  sluice::Result<sluice::Value> full = sluice::pg::binary_to_value(registry(), type, value, arena);
  // The fast path of the common types: what it takes, it must decode exactly as the full decoder.
  sluice::Value fast;
  if (sluice::pg::binary_to_value_fast(type, value, arena, &fast) &&
      (!full.ok() || !(fast == full.value())))
    __builtin_trap();
  return 0;
}
