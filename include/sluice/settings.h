// Declarative connector/processor settings. Each connector declares one table of SettingSpec; that
// table drives validation of the pipeline file, `sluice connectors NAME` and docs/connectors.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace sluice {

enum class SettingType {
  string,
  integer,      // int64
  number,       // double
  boolean,
  duration,     // "250ms", "5s", "2m", "1h" or a bare number of milliseconds
  size,         // "64MiB", "512KiB", "1GB" or a bare number of bytes
  string_list,  // YAML sequence of strings, or one string
  number_map,   // YAML map of string -> number, e.g. {create: 0.8, update: 0.2}
  string_map,   // YAML map of string -> string
  enumeration,  // one of `choices` (comma-separated in the spec)
};

std::string_view setting_type_name(SettingType t) noexcept;

struct SettingSpec {
  std::string_view name;           // may end in ".*": a prefix accepting any key (pass-through)
  SettingType type;
  std::string_view default_value;  // text form, parsed like a YAML scalar; empty = no default
  bool required;
  std::string_view doc;
  std::string_view choices = {};   // enumeration: "a,b,c"
  bool secret = false;             // never echoed in logs or errors
};

using SettingValue = std::variant<std::string, int64_t, double, bool, std::chrono::milliseconds,
                                  uint64_t /*size*/, std::vector<std::string>,
                                  std::map<std::string, double>, std::map<std::string, std::string>>;

// Validated settings of one connector instance. Values exist for every spec'd setting that was given
// or has a default. Accessors assume validation happened (type mismatch -> default-constructed).
class Settings {
 public:
  Settings() = default;
  explicit Settings(std::span<const SettingSpec> spec) : spec_(spec) {}

  std::span<const SettingSpec> spec() const noexcept { return spec_; }
  void set(std::string name, SettingValue v) { values_[std::move(name)] = std::move(v); }
  bool has(std::string_view name) const { return values_.find(name) != values_.end(); }

  std::string get_string(std::string_view name) const;
  int64_t get_int(std::string_view name) const;
  double get_number(std::string_view name) const;
  bool get_bool(std::string_view name) const;
  std::chrono::milliseconds get_duration(std::string_view name) const;
  uint64_t get_size(std::string_view name) const;
  std::vector<std::string> get_list(std::string_view name) const;
  std::map<std::string, double> get_number_map(std::string_view name) const;
  std::map<std::string, std::string> get_string_map(std::string_view name) const;
  // Pass-through keys under a "prefix.*" spec, with the prefix stripped, values as text.
  std::map<std::string, std::string> with_prefix(std::string_view prefix) const;

  const std::map<std::string, SettingValue, std::less<>>& values() const noexcept { return values_; }

 private:
  std::span<const SettingSpec> spec_;
  std::map<std::string, SettingValue, std::less<>> values_;
};

// Parses a scalar in text form into the spec's type (used for defaults and YAML scalars).
// Returns an error message (without location) on failure.
std::optional<std::string> parse_setting_scalar(const SettingSpec& spec, std::string_view text,
                                                SettingValue* out);
std::optional<std::string> parse_duration(std::string_view text, std::chrono::milliseconds* out);
std::optional<std::string> parse_size(std::string_view text, uint64_t* out);

// Echoes user text in an error on one line ('…', newlines and tabs escaped), shortened so a pasted
// blob does not flood the terminal. Setting and config errors use it alike.
std::string quote_user_text(std::string_view text);

// Finds the spec for `name` (exact match, or a "prefix.*" pattern). nullptr if unknown.
const SettingSpec* find_setting(std::span<const SettingSpec> spec, std::string_view name) noexcept;

// Builds Settings from text values (tests, CLI): applies defaults, checks required and types.
// Error text names the setting.
std::optional<std::string> settings_from_text(std::span<const SettingSpec> spec,
                                              const std::map<std::string, std::string>& text,
                                              Settings* out);

}  // namespace sluice
