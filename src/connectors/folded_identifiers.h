// Case-insensitive (ASCII) identifier comparison and hashing, for destinations whose server folds
// identifier case (SQLite, MySQL): "Id" and "id" name the same column.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace sluice {

inline char ascii_lower(char c) noexcept {
  return (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c;
}

inline bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
  return true;
}

// Transparent hash/equality for unordered containers keyed by identifiers.
struct FoldedHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept {
    uint64_t h = 1469598103934665603ULL;
    for (char c : s) h = (h ^ uint8_t(ascii_lower(c))) * 1099511628211ULL;
    return size_t(h);
  }
};
struct FoldedEqual {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const noexcept { return iequals(a, b); }
};

}  // namespace sluice
