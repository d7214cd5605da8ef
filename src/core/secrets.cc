#include "sluice/secrets.h"

#include <algorithm>
#include <mutex>
#include <shared_mutex>
#include <vector>

namespace sluice {

namespace {

struct Registry {
  std::shared_mutex mu;
  std::vector<std::string> values;  // longest first, so a secret that contains another goes whole
};

Registry& registry() {
  static Registry r;
  return r;
}

bool is_word(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decoded(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      const int hi = hex_value(s[i + 1]), lo = hex_value(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

void add(std::string value) {
  if (value.size() < 3) return;
  Registry& r = registry();
  std::unique_lock lock(r.mu);
  if (std::find(r.values.begin(), r.values.end(), value) != r.values.end()) return;
  r.values.push_back(std::move(value));
  std::stable_sort(r.values.begin(), r.values.end(),
                   [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
}

// The password span of the URL starting at `scheme_end` ("://" position) in `text`:
// [begin, end) or begin == end when there is none. The userinfo ends at the last '@' before the
// next whitespace or quote in a message (a password may hold '/', '@', '?', '#'); a setting's
// value (`whole`) is one URL to its end.
std::pair<size_t, size_t> url_password(std::string_view text, size_t scheme_end,
                                       bool whole = false) {
  const size_t start = scheme_end + 3;
  size_t stop = whole ? text.size() : start;
  while (stop < text.size() && text[stop] != ' ' && text[stop] != '"' && text[stop] != '\'' &&
         text[stop] != '\n' && text[stop] != '\t' && text[stop] != '`')
    ++stop;
  const std::string_view rest = text.substr(start, stop - start);
  const size_t at = rest.rfind('@');
  if (at == std::string_view::npos) return {start, start};
  const size_t colon = rest.find(':');
  if (colon == std::string_view::npos || colon > at) return {start, start};
  return {start + colon + 1, start + at};
}

}  // namespace

void register_secret(std::string_view value) {
  add(std::string(value));
  std::string decoded = percent_decoded(value);
  if (decoded != value) add(std::move(decoded));
}

void register_url_secret(std::string_view url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string_view::npos) return;
  auto [b, e] = url_password(url, scheme, true);
  if (e > b) register_secret(url.substr(b, e - b));
}

std::string redact(std::string_view text) {
  std::string out(text);
  {
    Registry& r = registry();
    std::shared_lock lock(r.mu);
    for (const std::string& v : r.values) {
      for (size_t pos = out.find(v); pos != std::string::npos;) {
        // A secret that is also an ordinary word (a test server's password "sluice") is masked
        // where it stands alone, not inside a longer name ("sluice_slot"): masking every
        // substring would garble every line and hide which slot or table an error names.
        // Secrets with other characters are masked everywhere.
        const size_t end = pos + v.size();
        const bool joined =
            std::all_of(v.begin(), v.end(), is_word) &&
            ((pos > 0 && is_word(out[pos - 1])) || (end < out.size() && is_word(out[end])));
        if (joined) {
          pos = out.find(v, pos + 1);
          continue;
        }
        out.replace(pos, v.size(), "***");
        pos = out.find(v, pos + 3);
      }
    }
  }
  for (size_t scheme = out.find("://"); scheme != std::string::npos;
       scheme = out.find("://", scheme + 3)) {
    auto [b, e] = url_password(out, scheme);
    if (e > b && std::string_view(out).substr(b, e - b) != "***") out.replace(b, e - b, "***");
  }
  return out;
}

bool contains_secret(std::string_view text) { return redact(text) != text; }

void clear_secrets_for_testing() {
  Registry& r = registry();
  std::unique_lock lock(r.mu);
  r.values.clear();
}

}  // namespace sluice
