// Settings: typed values of one connector instance, and the text parsers behind every setting type
// (used for YAML scalars, spec defaults and the CLI).
#include "sluice/settings.h"

#include <charconv>
#include <cmath>
#include <limits>

namespace sluice {

std::string quote_user_text(std::string_view text) {
  std::string out = "'";
  size_t n = 0;
  for (char c : text) {
    if (++n > 80) {
      out += "...";
      break;
    }
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else out += c;
  }
  out += "'";
  return out;
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

// from_chars takes "-5" but not "+5"; accept the explicit sign but not "+-5".
bool strip_plus(std::string_view& text) {
  if (text.empty()) return false;
  if (text.front() != '+') return true;
  text.remove_prefix(1);
  return !text.empty() && text.front() != '-' && text.front() != '+';
}

bool parse_int64(std::string_view text, int64_t* out) {
  text = trim(text);
  if (!strip_plus(text)) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

bool parse_double(std::string_view text, double* out) {
  text = trim(text);
  if (!strip_plus(text)) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size() && std::isfinite(*out);
}

bool parse_bool(std::string_view text, bool* out) {
  text = trim(text);
  for (auto t : {"true", "yes", "on"})
    if (iequals(text, t)) return *out = true, true;
  for (auto f : {"false", "no", "off"})
    if (iequals(text, f)) return *out = false, true;
  return false;
}

// Leading unsigned decimal number ("1", "1.5", ".5"); advances `s` past it.
bool take_number(std::string_view& s, double* out) {
  size_t i = 0;
  bool digits = false;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i, digits = true;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i, digits = true;
  }
  if (!digits) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + i, *out);
  if (ec != std::errc() || end != s.data() + i) return false;
  s.remove_prefix(i);
  return true;
}

std::string_view take_unit(std::string_view& s) {
  s = trim(s);
  size_t i = 0;
  while (i < s.size() && ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z'))) ++i;
  auto unit = s.substr(0, i);
  s.remove_prefix(i);
  s = trim(s);
  return unit;
}

std::string_view unquote(std::string_view s) {
  s = trim(s);
  if (s.size() >= 2 && (s.front() == '"' || s.front() == '\'') && s.back() == s.front())
    return s.substr(1, s.size() - 2);
  return s;
}

// Splits "a, b, c" (and the inside of "[a, b]" / "{a: 1}") on commas; no nesting or escapes, which
// is all spec defaults and command-line values need.
std::vector<std::string_view> split_commas(std::string_view s) {
  std::vector<std::string_view> parts;
  s = trim(s);
  if (s.empty()) return parts;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == ',') {
      parts.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  return parts;
}

bool strip_brackets(std::string_view& s, char open, char close) {
  s = trim(s);
  if (s.size() >= 2 && s.front() == open && s.back() == close) {
    s = s.substr(1, s.size() - 2);
    return true;
  }
  return false;
}

// Map text for defaults and the CLI: "{a: 1, b: 2}" or "a=1,b=2".
bool parse_map_text(std::string_view text, std::vector<std::pair<std::string, std::string>>* out) {
  strip_brackets(text, '{', '}');
  for (auto part : split_commas(text)) {
    if (part.empty()) continue;
    size_t sep = part.find('=');
    size_t colon = part.find(':');
    if (sep == std::string_view::npos || (colon != std::string_view::npos && colon < sep))
      sep = colon;
    if (sep == std::string_view::npos) return false;
    auto key = unquote(part.substr(0, sep));
    if (key.empty()) return false;
    out->emplace_back(std::string(key), std::string(unquote(part.substr(sep + 1))));
  }
  return true;
}

std::string format_number(double d) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);
  return ec == std::errc() ? std::string(buf, end) : std::string();
}

// Text form of a value, for pass-through settings handed to client libraries.
std::string value_text(const SettingValue& v) {
  struct Render {
    std::string operator()(const std::string& s) const { return s; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return format_number(d); }
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(std::chrono::milliseconds d) const {
      return std::to_string(d.count()) + "ms";
    }
    std::string operator()(uint64_t n) const { return std::to_string(n); }
    std::string operator()(const std::vector<std::string>& l) const {
      std::string out;
      for (const auto& s : l) out += (out.empty() ? "" : ",") + s;
      return out;
    }
    std::string operator()(const std::map<std::string, double>& m) const {
      std::string out;
      for (const auto& [k, d] : m) out += (out.empty() ? "" : ",") + k + "=" + format_number(d);
      return out;
    }
    std::string operator()(const std::map<std::string, std::string>& m) const {
      std::string out;
      for (const auto& [k, s] : m) out += (out.empty() ? "" : ",") + k + "=" + s;
      return out;
    }
  };
  return std::visit(Render{}, v);
}

template <typename T>
T get_or_default(const std::map<std::string, SettingValue, std::less<>>& values,
                 std::string_view name) {
  auto it = values.find(name);
  if (it == values.end()) return T{};
  if (const T* v = std::get_if<T>(&it->second)) return *v;
  return T{};
}

std::string expected_phrase(const SettingSpec& spec) {
  switch (spec.type) {
    case SettingType::string: return "a string";
    case SettingType::integer: return "an integer";
    case SettingType::number: return "a number";
    case SettingType::boolean: return "a boolean (true or false)";
    case SettingType::duration: return "a duration like 250ms, 5s, 2m or 1h";
    case SettingType::size: return "a size like 512KiB, 64MiB or 1GiB";
    case SettingType::string_list: return "a list of strings";
    case SettingType::number_map: return "a map of names to numbers";
    case SettingType::string_map: return "a map of names to strings";
    case SettingType::enumeration: {
      std::string out = "one of ";
      auto choices = split_commas(spec.choices);
      for (size_t i = 0; i < choices.size(); ++i) out += (i ? ", " : "") + std::string(choices[i]);
      return out;
    }
  }
  return "a value";
}

// "expected X, got 'text'", without the text for secrets.
std::string type_error(const SettingSpec& spec, std::string_view text) {
  if (spec.secret)
    return "expected " + expected_phrase(spec) + " (value not shown: secret setting)";
  return "expected " + expected_phrase(spec) + ", got " + quote_user_text(text);
}

bool is_pattern(std::string_view name) { return name.size() >= 2 && name.ends_with(".*"); }

// A bound in the setting's own unit: 5000ms for durations, bytes for sizes.
std::string bound_text(const SettingSpec& spec, double b) {
  std::string n = format_number(b);
  return spec.type == SettingType::duration ? n + "ms" : n;
}

// The value as a number for the range check; false for types without a range.
bool numeric_value(const SettingValue& v, double* out) {
  if (const auto* i = std::get_if<int64_t>(&v)) return *out = static_cast<double>(*i), true;
  if (const auto* d = std::get_if<double>(&v)) return *out = *d, true;
  if (const auto* m = std::get_if<std::chrono::milliseconds>(&v))
    return *out = static_cast<double>(m->count()), true;
  if (const auto* z = std::get_if<uint64_t>(&v)) return *out = static_cast<double>(*z), true;
  return false;
}

// "must be 0 or more, got -1": the phrasing the pipeline file's batch keys always used.
std::string range_error(const SettingSpec& spec, std::string_view text) {
  std::string problem;
  if (spec.min && spec.max) {
    problem =
        "must be between " + bound_text(spec, *spec.min) + " and " + bound_text(spec, *spec.max);
  } else if (spec.min) {
    if (*spec.min == 0) problem = "must be 0 or more";
    else if (*spec.min == 1 && spec.type != SettingType::number) problem = "must be greater than 0";
    else problem = "must be at least " + bound_text(spec, *spec.min);
  } else {
    problem = "must be at most " + bound_text(spec, *spec.max);
  }
  if (spec.secret) return problem + " (value not shown: secret setting)";
  return problem + ", got " + std::string(text);
}

// A negative number where a duration or size with a lower bound was expected: say the bound rather
// than "expected a duration" (`linger_ms: -1`).
bool negative_number(std::string_view text) {
  text = trim(text);
  double d = 0;
  return !text.empty() && text.front() == '-' && parse_double(text, &d) && d < 0;
}

}  // namespace

std::string_view setting_type_name(SettingType t) noexcept {
  switch (t) {
    case SettingType::string: return "string";
    case SettingType::integer: return "integer";
    case SettingType::number: return "number";
    case SettingType::boolean: return "boolean";
    case SettingType::duration: return "duration";
    case SettingType::size: return "size";
    case SettingType::string_list: return "string list";
    case SettingType::number_map: return "number map";
    case SettingType::string_map: return "string map";
    case SettingType::enumeration: return "enum";
  }
  return "unknown";
}

std::string Settings::get_string(std::string_view name) const {
  return get_or_default<std::string>(values_, name);
}
int64_t Settings::get_int(std::string_view name) const {
  return get_or_default<int64_t>(values_, name);
}
double Settings::get_number(std::string_view name) const {
  return get_or_default<double>(values_, name);
}
bool Settings::get_bool(std::string_view name) const { return get_or_default<bool>(values_, name); }
std::chrono::milliseconds Settings::get_duration(std::string_view name) const {
  return get_or_default<std::chrono::milliseconds>(values_, name);
}
uint64_t Settings::get_size(std::string_view name) const {
  return get_or_default<uint64_t>(values_, name);
}
std::vector<std::string> Settings::get_list(std::string_view name) const {
  return get_or_default<std::vector<std::string>>(values_, name);
}
std::map<std::string, double> Settings::get_number_map(std::string_view name) const {
  return get_or_default<std::map<std::string, double>>(values_, name);
}
std::map<std::string, std::string> Settings::get_string_map(std::string_view name) const {
  return get_or_default<std::map<std::string, std::string>>(values_, name);
}

std::map<std::string, std::string> Settings::with_prefix(std::string_view prefix) const {
  // Accept "headers", "headers." and "headers.*" alike.
  if (is_pattern(prefix)) prefix.remove_suffix(2);
  if (prefix.ends_with('.')) prefix.remove_suffix(1);
  std::string lead = std::string(prefix) + ".";
  std::map<std::string, std::string> out;
  for (auto it = values_.lower_bound(lead); it != values_.end() && it->first.starts_with(lead);
       ++it) {
    if (it->first.size() > lead.size())
      out.emplace(it->first.substr(lead.size()), value_text(it->second));
  }
  return out;
}

std::optional<std::string> parse_duration(std::string_view text, std::chrono::milliseconds* out) {
  std::string_view s = trim(text);
  const std::string hint =
      "expected a duration like 250ms, 5s, 2m or 1h, got " + quote_user_text(text);
  if (s.empty()) return hint;
  double total_ms = 0;
  bool first = true;
  // One or more "<number><unit>" parts ("1h30m"); a lone bare number is milliseconds.
  while (!s.empty()) {
    double n = 0;
    if (!take_number(s, &n)) return hint;
    auto unit = take_unit(s);
    double scale = 0;
    if (unit.empty() && first && s.empty()) scale = 1;
    else if (unit == "ms") scale = 1;
    else if (unit == "s") scale = 1000;
    else if (unit == "m") scale = 60'000;
    else if (unit == "h") scale = 3'600'000;
    else if (unit == "d") scale = 86'400'000;
    else if (unit.empty()) return hint;
    else
      return "unknown duration unit '" + std::string(unit) + "' in " + quote_user_text(text) +
             " (use ms, s, m, h or d)";
    total_ms += n * scale;
    first = false;
  }
  // Well inside int64 milliseconds, leaving room for callers adding it to a time point.
  if (!(total_ms < 1e15)) return "duration " + quote_user_text(text) + " is too large";
  *out = std::chrono::milliseconds(static_cast<int64_t>(std::llround(total_ms)));
  return std::nullopt;
}

std::optional<std::string> parse_size(std::string_view text, uint64_t* out) {
  std::string_view s = trim(text);
  const std::string hint =
      "expected a size like 512KiB, 64MiB, 1GiB, 10MB or a number of bytes, got " +
      quote_user_text(text);
  double n = 0;
  std::string_view number_text = s;
  if (!take_number(s, &n)) return hint;
  number_text = number_text.substr(0, number_text.size() - s.size());
  auto unit = take_unit(s);
  if (!s.empty()) return hint;
  struct Unit {
    std::string_view name;
    double scale;
  };
  static constexpr Unit units[] = {
      {"b", 1},
      {"kb", 1e3},
      {"mb", 1e6},
      {"gb", 1e9},
      {"tb", 1e12},
      {"kib", 1ull << 10},
      {"mib", 1ull << 20},
      {"gib", 1ull << 30},
      {"tib", 1ull << 40},
  };
  double scale = 0;
  if (unit.empty()) {
    // A bare number is bytes, which are whole.
    if (number_text.find('.') != std::string_view::npos) return hint;
    scale = 1;
  } else {
    for (const auto& u : units)
      if (iequals(unit, u.name)) scale = u.scale;
    if (scale == 0)
      return "unknown size unit '" + std::string(unit) + "' in " + quote_user_text(text) +
             " (use B, kB, MB, GB, TB, KiB, MiB, GiB or TiB)";
  }
  double bytes = std::round(n * scale);
  if (!(bytes < 18446744073709551616.0)) return "size " + quote_user_text(text) + " is too large";
  *out = static_cast<uint64_t>(bytes);
  return std::nullopt;
}

namespace {

std::optional<std::string> parse_scalar_unchecked(const SettingSpec& spec, std::string_view text,
                                                  SettingValue* out) {
  switch (spec.type) {
    case SettingType::string: *out = std::string(text); return std::nullopt;
    case SettingType::integer: {
      int64_t v = 0;
      if (!parse_int64(text, &v)) return type_error(spec, text);
      *out = v;
      return std::nullopt;
    }
    case SettingType::number: {
      double v = 0;
      if (!parse_double(text, &v)) return type_error(spec, text);
      *out = v;
      return std::nullopt;
    }
    case SettingType::boolean: {
      bool v = false;
      if (!parse_bool(text, &v)) return type_error(spec, text);
      *out = v;
      return std::nullopt;
    }
    case SettingType::duration: {
      std::chrono::milliseconds v{};
      if (auto err = parse_duration(text, &v)) return spec.secret ? type_error(spec, text) : *err;
      *out = v;
      return std::nullopt;
    }
    case SettingType::size: {
      uint64_t v = 0;
      if (auto err = parse_size(text, &v)) return spec.secret ? type_error(spec, text) : *err;
      *out = v;
      return std::nullopt;
    }
    case SettingType::string_list: {
      // One string is a one-element list; "[a, b]" is the flow form spec defaults may use.
      std::vector<std::string> list;
      std::string_view inner = text;
      if (strip_brackets(inner, '[', ']')) {
        for (auto part : split_commas(inner)) list.emplace_back(unquote(part));
      } else if (!text.empty()) {
        list.emplace_back(text);
      }
      *out = std::move(list);
      return std::nullopt;
    }
    case SettingType::number_map: {
      std::vector<std::pair<std::string, std::string>> entries;
      if (!parse_map_text(text, &entries)) return type_error(spec, text);
      std::map<std::string, double> map;
      for (auto& [k, v] : entries) {
        double d = 0;
        if (!parse_double(v, &d)) return type_error(spec, text);
        map[k] = d;
      }
      *out = std::move(map);
      return std::nullopt;
    }
    case SettingType::string_map: {
      std::vector<std::pair<std::string, std::string>> entries;
      if (!parse_map_text(text, &entries)) return type_error(spec, text);
      std::map<std::string, std::string> map;
      for (auto& [k, v] : entries) map[k] = std::move(v);
      *out = std::move(map);
      return std::nullopt;
    }
    case SettingType::enumeration: {
      for (auto choice : split_commas(spec.choices)) {
        if (choice == text) {
          *out = std::string(text);
          return std::nullopt;
        }
      }
      return type_error(spec, text);
    }
  }
  return "unsupported setting type";
}

}  // namespace

std::optional<std::string> parse_setting_scalar(const SettingSpec& spec, std::string_view text,
                                                SettingValue* out) {
  SettingValue v;
  if (auto err = parse_scalar_unchecked(spec, text, &v)) {
    bool unit_type = spec.type == SettingType::duration || spec.type == SettingType::size;
    if (unit_type && spec.min && *spec.min >= 0 && negative_number(text))
      return range_error(spec, trim(text));
    return err;
  }
  if (auto err = check_setting_value(spec, v, trim(text))) return err;
  *out = std::move(v);
  return std::nullopt;
}

std::optional<std::string> check_setting_value(const SettingSpec& spec, const SettingValue& value,
                                               std::string_view text) {
  double n = 0;
  if ((spec.min || spec.max) && numeric_value(value, &n)) {
    if ((spec.min && n < *spec.min) || (spec.max && n > *spec.max))
      return range_error(spec, text.empty() ? value_text(value) : std::string(text));
  }
  if (spec.check) return spec.check(value);
  return std::nullopt;
}

const SettingSpec* find_setting(std::span<const SettingSpec> spec, std::string_view name) noexcept {
  for (const auto& s : spec)
    if (s.name == name) return &s;
  // The longest "prefix.*" that covers the name, so a narrower pattern wins over a wider one.
  const SettingSpec* best = nullptr;
  for (const auto& s : spec) {
    if (!is_pattern(s.name)) continue;
    auto prefix = s.name.substr(0, s.name.size() - 1);  // keeps the dot
    if (name.size() > prefix.size() && name.starts_with(prefix) &&
        (!best || s.name.size() > best->name.size()))
      best = &s;
  }
  return best;
}

std::optional<std::string> settings_from_text(std::span<const SettingSpec> spec,
                                              const std::map<std::string, std::string>& text,
                                              Settings* out) {
  Settings settings(spec);
  for (const auto& [name, value] : text) {
    const SettingSpec* s = find_setting(spec, name);
    if (!s) {
      std::string known;
      for (const auto& k : spec) known += (known.empty() ? "" : ", ") + std::string(k.name);
      return "unknown setting '" + name + "' (known: " + known + ")";
    }
    SettingValue v;
    if (auto err = parse_setting_scalar(*s, value, &v)) return "setting '" + name + "': " + *err;
    settings.set(name, std::move(v));
  }
  for (const auto& s : spec) {
    if (is_pattern(s.name) || settings.has(s.name)) continue;
    if (!s.default_value.empty()) {
      SettingValue v;
      if (auto err = parse_setting_scalar(s, s.default_value, &v))
        return "setting '" + std::string(s.name) + "': invalid built-in default: " + *err;
      settings.set(std::string(s.name), std::move(v));
    } else if (s.required) {
      return "missing required setting '" + std::string(s.name) + "'";
    }
  }
  *out = std::move(settings);
  return std::nullopt;
}

namespace settings_detail {

int choice_index(std::string_view choices, std::string_view text) noexcept {
  int i = 0;
  for (auto choice : split_commas(choices)) {
    if (choice == text) return i;
    ++i;
  }
  return -1;
}

}  // namespace settings_detail

namespace {

// Whether the value holds the alternative the setting type parses into.
bool holds_type(SettingType t, const SettingValue& v) {
  switch (t) {
    case SettingType::string:
    case SettingType::enumeration: return std::holds_alternative<std::string>(v);
    case SettingType::integer: return std::holds_alternative<int64_t>(v);
    case SettingType::number: return std::holds_alternative<double>(v);
    case SettingType::boolean: return std::holds_alternative<bool>(v);
    case SettingType::duration: return std::holds_alternative<std::chrono::milliseconds>(v);
    case SettingType::size: return std::holds_alternative<uint64_t>(v);
    case SettingType::string_list: return std::holds_alternative<std::vector<std::string>>(v);
    case SettingType::number_map: return std::holds_alternative<std::map<std::string, double>>(v);
    case SettingType::string_map:
      return std::holds_alternative<std::map<std::string, std::string>>(v);
  }
  return false;
}

Error bind_error(std::string_view context, std::string_view name, std::string_view problem) {
  if (context.empty())
    return Error(Errc::config, "setting '" + std::string(name) + "': " + std::string(problem));
  return Error(Errc::config,
               std::string(context) + ": " + std::string(name) + ": " + std::string(problem));
}

// Validates one value against its spec as the loader would (for Settings built by hand).
std::optional<std::string> validate_value(const SettingSpec& spec, const SettingValue& v) {
  if (!holds_type(spec.type, v)) {
    if (spec.secret)
      return "expected " + expected_phrase(spec) + " (value not shown: secret setting)";
    return "expected " + expected_phrase(spec) + ", got " + quote_user_text(value_text(v));
  }
  if (spec.type == SettingType::enumeration &&
      settings_detail::choice_index(spec.choices, std::get<std::string>(v)) < 0)
    return type_error(spec, std::get<std::string>(v));
  return check_setting_value(spec, v);
}

}  // namespace

Status bind_settings(std::span<const SettingSpec> table, const void* owner,
                     const Settings& settings, void* out, std::string_view context) {
  for (const auto& [name, value] : settings.values()) {
    if (find_setting(table, name)) continue;
    std::string known;
    for (const auto& k : table) known += (known.empty() ? "" : ", ") + std::string(k.name);
    return bind_error(context, name,
                      table.empty() ? "unknown setting (this takes no settings)"
                                    : "unknown setting (known: " + known + ")");
  }
  for (const SettingSpec& spec : table) {
    if (spec.owner != owner || !spec.assign)
      return bind_error(context, spec.name,
                        "internal: not bound to a field of this options struct");
    if (is_pattern(spec.name)) {
      spec.assign(out, spec, SettingValue(settings.with_prefix(spec.name)));
      continue;
    }
    auto it = settings.values().find(spec.name);
    if (it != settings.values().end()) {
      if (auto err = validate_value(spec, it->second)) return bind_error(context, spec.name, *err);
      spec.assign(out, spec, it->second);
    } else if (!spec.default_value.empty()) {
      SettingValue v;
      if (auto err = parse_setting_scalar(spec, spec.default_value, &v))
        return bind_error(context, spec.name, "invalid built-in default: " + *err);
      spec.assign(out, spec, v);
    } else if (spec.required) {
      return bind_error(context, spec.name, "missing required setting");
    }
  }
  return ok_status();
}

}  // namespace sluice
