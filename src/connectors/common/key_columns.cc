#include "connectors/common/key_columns.h"

#include <algorithm>

#include <fmt/format.h>

#include "sluice/settings.h"

namespace sluice {

Result<std::vector<std::string>> parse_key_column_list(std::string_view table,
                                                       std::string_view columns) {
  std::vector<std::string> list;
  std::string_view rest = columns;
  while (true) {
    const size_t comma = rest.find(',');
    std::string_view c = rest.substr(0, comma);
    while (!c.empty() && c.front() == ' ') c.remove_prefix(1);
    while (!c.empty() && c.back() == ' ') c.remove_suffix(1);
    if (c.empty())
      return Error(Errc::config,
                   fmt::format("setting 'message.key.columns': {}: an empty column name in {} "
                               "(list columns separated by commas)",
                               table, quote_user_text(columns)));
    list.emplace_back(c);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return list;
}

Status check_key_columns_captured(const KeyColumnsByTable& configured,
                                  const std::vector<std::pair<std::string, std::string>>& captured,
                                  std::string (*quote)(std::string_view)) {
  for (const auto& entry : configured) {
    const auto& name = entry.first;
    if (std::find(captured.begin(), captured.end(), name) == captured.end())
      return Error(Errc::config,
                   fmt::format("setting 'message.key.columns': {}.{} is not a captured table (add "
                               "it to `tables`, or remove it)",
                               quote(name.first), quote(name.second)));
  }
  return ok_status();
}

}  // namespace sluice
