// The text parsers behind text_to_value (pg_types.h), shared by its files: scalars and temporal
// forms in pg_types.cc, array literals in pg_array_text.cc. Private to the postgres connector.
#pragma once

#include <cstdint>
#include <string_view>

#include "connectors/postgres/pg_types.h"

namespace sluice::pg::text {

inline constexpr int kMaxDepth = 16;  // domain chains / array nesting

Error invalid(uint32_t type_oid, std::string_view text, std::string_view why = {});
bool is_digit(char c);
bool eat(std::string_view& s, char c);
void skip_ws(std::string_view& s);
bool is_ws(char c);
// `in_arena`: `text` already lives in `arena` (no copy needed).
Result<Value> convert(const TypeRegistry& types, uint32_t type_oid, std::string_view text,
                      Arena& arena, bool in_arena, int depth);
Result<Value> parse_array_text(const TypeRegistry& types, uint32_t array_oid, uint32_t elem_oid,
                               char delim, Arena& arena, int depth, std::string_view text);

}  // namespace sluice::pg::text
