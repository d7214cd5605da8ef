// `message.key.columns`: the record key of a table that has no primary key of its own, as the
// sources (postgres, mysql) accept it — a map of table name to a comma-separated column list.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/result.h"

namespace sluice {

// (schema or database, table) -> key columns, in the order listed.
using KeyColumnsByTable = std::map<std::pair<std::string, std::string>, std::vector<std::string>>;

// Splits "a, b" into {"a", "b"}; an empty name (",", "a,,b", "") is a config error naming `table`.
Result<std::vector<std::string>> parse_key_column_list(std::string_view table,
                                                       std::string_view columns);

// Every table named in `configured` must be one of `captured` (the (schema, table) pairs the source
// resolved); otherwise a config error saying to add it to `tables` or remove it, the names quoted
// by the source's own `quote` (PostgreSQL "x", MySQL `x`).
Status check_key_columns_captured(const KeyColumnsByTable& configured,
                                  const std::vector<std::pair<std::string, std::string>>& captured,
                                  std::string (*quote)(std::string_view));

}  // namespace sluice
