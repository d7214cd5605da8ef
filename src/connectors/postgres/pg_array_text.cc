// PostgreSQL array literals (array_out's text, what array_in accepts of it) → array Values, each
// element converted by its element type.
#include <cstring>

#include "connectors/postgres/pg_text.h"

namespace sluice::pg::text {

namespace {

// Array literal parser (array_out's format, and what array_in accepts of it).
class ArrayParser {
 public:
  ArrayParser(const TypeRegistry& types, uint32_t array_oid, uint32_t elem_oid, char delim,
              Arena& arena, int depth)
      : types_(types),
        array_oid_(array_oid),
        elem_oid_(elem_oid),
        delim_(delim),
        arena_(arena),
        depth_(depth) {}

  Result<Value> parse(std::string_view text) {
    text_ = text;
    std::string_view s = text;
    // Optional dimension decoration when a lower bound is not 1: "[0:1][1:2]={...}". An array
    // value has no lower bound, so such an array cannot be represented: reading it as if it began
    // at 1 would shift every element's subscript (the source marks the record for the
    // dead-letter queue, or stops).
    if (!s.empty() && s.front() == '[') {
      bool other_lower_bound = false;
      while (eat(s, '[')) {
        int64_t lower = 0;
        if (!bound(s, &lower) || !eat(s, ':') || !bound(s, nullptr) || !eat(s, ']'))
          return bad("bad dimension decoration");
        other_lower_bound = other_lower_bound || lower != 1;
      }
      if (!eat(s, '=')) return bad("expected '=' after dimensions");
      if (other_lower_bound)
        return bad(
            "an array whose subscripts do not start at 1 cannot be represented (array values have "
            "no lower bound)");
    }
    skip_ws(s);
    if (s.empty() || s.front() != '{') return bad("expected '{'");
    Result<Value> v = level(s, 0);
    if (!v) return v;
    skip_ws(s);
    if (!s.empty()) return bad("junk after closing '}'");
    return v;
  }

 private:
  static bool bound(std::string_view& s, int64_t* value) {
    const bool negative = eat(s, '-');
    if (!negative) eat(s, '+');
    size_t n = 0;
    int64_t v = 0;
    while (!s.empty() && is_digit(s.front()) && n < 10) {
      v = v * 10 + (s.front() - '0');
      s.remove_prefix(1);
      ++n;
    }
    if (value) *value = negative ? -v : v;
    return n > 0;
  }

  Error bad(std::string_view why) const { return invalid(array_oid_, text_, why); }

  // Counts the elements of the level starting at s[0] == '{' without consuming it; nullopt-like
  // SIZE_MAX when braces or quotes are unbalanced.
  size_t count(std::string_view s) const {
    size_t i = 1, n = 0, nest = 0;
    bool any = false, quoted = false;
    for (; i < s.size(); ++i) {
      char c = s[i];
      if (quoted) {
        if (c == '\\') ++i;
        else if (c == '"') quoted = false;
        continue;
      }
      if (c == '\\') {
        ++i;
        any = true;
        continue;
      }
      if (c == '"') {
        quoted = true;
        any = true;
        continue;
      }
      if (c == '{') {
        ++nest;
        any = true;
        continue;
      }
      if (c == '}') {
        if (nest == 0) return any ? n + 1 : 0;
        --nest;
        continue;
      }
      if (nest == 0 && c == delim_) {
        ++n;
        any = true;
        continue;
      }
      if (!is_ws(c)) any = true;
    }
    return SIZE_MAX;
  }

  Result<Value> level(std::string_view& s, int nest) {
    if (nest + depth_ > kMaxDepth) return bad("too deeply nested");
    size_t n = count(s);
    if (n == SIZE_MAX) return bad("unbalanced braces or quotes");
    s.remove_prefix(1);  // '{'
    Value* items = arena_.allocate_array<Value>(n);
    size_t i = 0;
    skip_ws(s);
    if (eat(s, '}')) {
      if (n != 0) return bad("malformed");
      return Value::array(items, 0);
    }
    while (true) {
      if (i >= n) return bad("malformed");
      skip_ws(s);
      Result<Value> v = (!s.empty() && s.front() == '{') ? level(s, nest + 1) : element(s);
      if (!v) return v;
      new (&items[i++]) Value(v.value());
      skip_ws(s);
      if (s.empty()) return bad("missing '}'");
      if (s.front() == '}') {
        s.remove_prefix(1);
        break;
      }
      if (s.front() != delim_) return bad("expected delimiter");
      s.remove_prefix(1);
    }
    if (i != n) return bad("malformed");
    return Value::array(items, uint32_t(n));
  }

  Result<Value> element(std::string_view& s) {
    if (s.empty()) return bad("missing '}'");
    if (s.front() == '"') {
      s.remove_prefix(1);
      size_t len = 0;
      bool escaped = false;
      size_t j = 0;
      for (; j < s.size() && s[j] != '"'; ++j, ++len) {
        if (s[j] == '\\') {
          escaped = true;
          ++j;
        }
      }
      if (j >= s.size()) return bad("unterminated quoted element");
      std::string_view raw = s.substr(0, j);
      s.remove_prefix(j + 1);
      if (!escaped) return convert(types_, elem_oid_, raw, arena_, false, depth_ + 1);
      char* buf = static_cast<char*>(arena_.allocate(len ? len : 1, 1));
      size_t k = 0;
      for (size_t q = 0; q < raw.size(); ++q) {
        if (raw[q] == '\\') ++q;
        buf[k++] = raw[q];
      }
      return convert(types_, elem_oid_, std::string_view(buf, k), arena_, true, depth_ + 1);
    }
    // Unquoted: up to the delimiter or '}', trailing whitespace trimmed; backslash escapes allowed.
    size_t j = 0, end = 0;  // end: one past the last significant character
    bool escaped = false;
    for (; j < s.size(); ++j) {
      char c = s[j];
      if (c == '\\') {
        if (j + 1 >= s.size()) return bad("dangling backslash");
        escaped = true;
        ++j;
        end = j + 1;
        continue;
      }
      if (c == delim_ || c == '}') break;
      if (c == '"' || c == '{') return bad("unexpected character in unquoted element");
      if (!is_ws(c)) end = j + 1;
    }
    std::string_view raw = s.substr(0, end);
    s.remove_prefix(end);
    if (raw.empty()) return bad("empty unquoted element");
    if (!escaped) {
      if (raw.size() == 4 && (raw[0] | 0x20) == 'n' && (raw[1] | 0x20) == 'u' &&
          (raw[2] | 0x20) == 'l' && (raw[3] | 0x20) == 'l')
        return Value::null();
      return convert(types_, elem_oid_, raw, arena_, false, depth_ + 1);
    }
    char* buf = static_cast<char*>(arena_.allocate(raw.size(), 1));
    size_t k = 0;
    for (size_t q = 0; q < raw.size(); ++q) {
      if (raw[q] == '\\') ++q;
      buf[k++] = raw[q];
    }
    return convert(types_, elem_oid_, std::string_view(buf, k), arena_, true, depth_ + 1);
  }

  const TypeRegistry& types_;
  uint32_t array_oid_;
  uint32_t elem_oid_;
  char delim_;
  Arena& arena_;
  int depth_;
  std::string_view text_;
};

}  // namespace

Result<Value> parse_array_text(const TypeRegistry& types, uint32_t array_oid, uint32_t elem_oid,
                               char delim, Arena& arena, int depth, std::string_view text) {
  return ArrayParser(types, array_oid, elem_oid, delim, arena, depth).parse(text);
}

}  // namespace sluice::pg::text
