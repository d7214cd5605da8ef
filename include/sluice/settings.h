// Declarative connector/processor settings. Each connector declares one table of SettingSpec; that
// table drives validation of the pipeline file, `sluice connectors NAME` and docs/connectors.md.
//
// A migrated connector declares its table with `setting<&Options::field>(name, doc)` entries inside
// `settings_table<Options>(...)`: each entry names the setting, its type (deduced from the field,
// checked at compile time), default, range, secret flag and doc, and binds it to a field of the
// connector's options struct. `bind_settings(table, settings, context)` fills that struct from
// validated settings (defaults applied here, once); the connector's one `finalize(options)` does
// the cross-setting checks. See docs/development/settings.md. Model: librdkafka's property table
// (`_RK(field)`) and rd_kafka_conf_finalize.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "sluice/result.h"

namespace sluice {

enum class SettingType {
  string,
  integer,  // int64
  number,   // double
  boolean,
  duration,     // "250ms", "5s", "2m", "1h" or a bare number of milliseconds
  size,         // "64MiB", "512KiB", "1GB" or a bare number of bytes
  string_list,  // YAML sequence of strings, or one string
  number_map,   // YAML map of string -> number, e.g. {create: 0.8, update: 0.2}
  string_map,   // YAML map of string -> string
  enumeration,  // one of `choices` (comma-separated in the spec)
};

std::string_view setting_type_name(SettingType t) noexcept;

using SettingValue =
    std::variant<std::string, int64_t, double, bool, std::chrono::milliseconds, uint64_t /*size*/,
                 std::vector<std::string>, std::map<std::string, double>,
                 std::map<std::string, std::string>>;

struct SettingSpec;
// Extra check of one parsed value (e.g. "host:port"): the problem, without location, or nothing.
using SettingCheck = std::optional<std::string> (*)(const SettingValue& value);
// Stores a validated value into the bound field of an options struct (see setting<&O::field>).
using SettingAssign = void (*)(void* options, const SettingSpec& spec, const SettingValue& value);

struct SettingSpec {
  std::string_view name;  // may end in ".*": a prefix accepting any key (pass-through)
  SettingType type;
  std::string_view default_value;  // text form, parsed like a YAML scalar; empty = no default
  bool required;
  std::string_view doc;
  std::string_view choices = {};  // enumeration: "a,b,c"
  bool secret = false;            // never echoed in logs or errors
  // Inclusive bounds of integer, number, duration (milliseconds) and size (bytes) settings.
  std::optional<double> min = {};
  std::optional<double> max = {};
  SettingCheck check = nullptr;
  // Binding (set by setting<&O::field>; null for tables of unmigrated connectors and doc-only
  // rows).
  SettingAssign assign = nullptr;
  const void* owner = nullptr;  // identifies the options struct the field belongs to
  // A file or directory path: a relative value written in a pipeline file resolves against the
  // file's folder, not the working directory (the loader rewrites it; defaults stay as they are).
  bool path = false;

  // Declaration modifiers: setting<&O::f>("name", "doc").with_default("5ms").at_least(1) ...
  constexpr SettingSpec with_default(std::string_view text) const {
    SettingSpec s = *this;
    s.default_value = text;
    return s;
  }
  constexpr SettingSpec mandatory() const {
    SettingSpec s = *this;
    s.required = true;
    return s;
  }
  constexpr SettingSpec one_of(std::string_view list) const {  // a string (or enum) field: "a,b,c"
    SettingSpec s = *this;
    s.type = SettingType::enumeration;
    s.choices = list;
    return s;
  }
  constexpr SettingSpec at_least(double v) const {
    SettingSpec s = *this;
    s.min = v;
    return s;
  }
  constexpr SettingSpec at_most(double v) const {
    SettingSpec s = *this;
    s.max = v;
    return s;
  }
  constexpr SettingSpec secret_value() const {
    SettingSpec s = *this;
    s.secret = true;
    return s;
  }
  constexpr SettingSpec file_path() const {
    SettingSpec s = *this;
    s.path = true;
    return s;
  }
  constexpr SettingSpec checked_by(SettingCheck c) const {
    SettingSpec s = *this;
    s.check = c;
    return s;
  }
};

// Validated settings of one connector instance. Values exist for every spec'd setting that was
// given or has a default. Accessors assume validation happened (type mismatch ->
// default-constructed). Not for connector code: the get_* look-ups below silently return a
// default-constructed value on a typo. Every connector binds an options struct (bind_settings); the
// look-ups remain for tests that assert what the loader parsed. has() and with_prefix() serve
// bind_settings and the loader.
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

  const std::map<std::string, SettingValue, std::less<>>& values() const noexcept {
    return values_;
  }

 private:
  std::span<const SettingSpec> spec_;
  std::map<std::string, SettingValue, std::less<>> values_;
};

// Parses a scalar in text form into the spec's type (used for defaults and YAML scalars).
// Returns an error message (without location) on failure.
// Also applies the spec's range and check (a value out of range is an error like a mistyped one).
std::optional<std::string> parse_setting_scalar(const SettingSpec& spec, std::string_view text,
                                                SettingValue* out);
// Range (min/max) and `check` of a parsed value; `text` is the user's form for the message (empty:
// rendered from the value). Secret values are never echoed.
std::optional<std::string> check_setting_value(const SettingSpec& spec, const SettingValue& value,
                                               std::string_view text = {});
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

// ---------------------------------------------------------------- binding to an options struct

namespace settings_detail {

template <typename M>
struct Member;
template <typename C, typename F>
struct Member<F C::*> {
  using owner = C;
  using field = F;
};

template <typename T>
struct Unwrap {
  using type = T;
  static constexpr bool optional = false;
};
template <typename T>
struct Unwrap<std::optional<T>> {
  using type = T;
  static constexpr bool optional = true;
};

// One address per options type: tells tables of different structs apart.
template <typename C>
inline constexpr char kOwnerTag = 0;

template <typename T>
constexpr bool is_int = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// The setting type a field of type T holds by default.
template <typename T>
consteval SettingType deduced_type() {
  if constexpr (std::is_same_v<T, std::string>) return SettingType::string;
  else if constexpr (std::is_same_v<T, bool>) return SettingType::boolean;
  else if constexpr (std::is_same_v<T, std::chrono::milliseconds>) return SettingType::duration;
  else if constexpr (std::is_same_v<T, uint64_t>) return SettingType::size;
  else if constexpr (is_int<T>) return SettingType::integer;
  else if constexpr (std::is_floating_point_v<T>) return SettingType::number;
  else if constexpr (std::is_same_v<T, std::vector<std::string>>) return SettingType::string_list;
  else if constexpr (std::is_same_v<T, std::map<std::string, double>>)
    return SettingType::number_map;
  else if constexpr (std::is_same_v<T, std::map<std::string, std::string>>)
    return SettingType::string_map;
  else if constexpr (std::is_enum_v<T>) return SettingType::enumeration;
  else static_assert(!sizeof(T), "no setting type holds this field type");
}

// Whether a field of type T can hold values of setting type t.
template <typename T>
consteval bool holds(SettingType t) {
  switch (t) {
    case SettingType::string: return std::is_same_v<T, std::string>;
    case SettingType::enumeration: return std::is_same_v<T, std::string> || std::is_enum_v<T>;
    case SettingType::boolean: return std::is_same_v<T, bool>;
    case SettingType::duration: return std::is_same_v<T, std::chrono::milliseconds>;
    case SettingType::size: return is_int<T> && std::is_unsigned_v<T>;
    case SettingType::integer: return is_int<T>;
    case SettingType::number: return std::is_floating_point_v<T>;
    case SettingType::string_list: return std::is_same_v<T, std::vector<std::string>>;
    case SettingType::number_map: return std::is_same_v<T, std::map<std::string, double>>;
    case SettingType::string_map: return std::is_same_v<T, std::map<std::string, std::string>>;
  }
  return false;
}

// Index of `text` in the comma-separated `choices` (spaces around names ignored), or -1.
int choice_index(std::string_view choices, std::string_view text) noexcept;

template <typename T>
T convert(const SettingSpec& spec, const SettingValue& v) {
  if constexpr (std::is_enum_v<T>) {
    // Enum fields: the choices are listed in the order of the enum's values.
    return static_cast<T>(choice_index(spec.choices, std::get<std::string>(v)));
  } else if constexpr (is_int<T>) {
    if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<T>(*i);
    return static_cast<T>(std::get<uint64_t>(v));
  } else {
    return std::get<T>(v);
  }
}

// The owner type is a parameter of its own, not only through M: GCC does not give an instantiation
// internal linkage for a pointer-to-member argument of a class in an anonymous namespace, so two
// files' `Options::field` would share one (wrong-offset) instantiation; a type argument does.
template <typename C, typename F, F C::*M>
void assign(void* options, const SettingSpec& spec, const SettingValue& v) {
  static_cast<C*>(options)->*M = convert<typename Unwrap<F>::type>(spec, v);
}

}  // namespace settings_detail

// One bound setting: `setting<&Options::linger>("linger", "How long ...").with_default("5ms")`.
// The type is deduced from the field (std::string, bool, int64_t/any integer, uint64_t = size,
// double, milliseconds, vector<string>, map<string, double|string>, an enum with .one_of(...)), or
// given explicitly when the field could hold several (an integer field declared as a size). A field
// wrapped in std::optional stays empty when the setting is neither given nor defaulted. A
// "prefix.*" setting binds a map<string, string> field and receives the pass-through keys, prefix
// stripped.
namespace settings_detail {
// The body of setting<M>(); constexpr so that both consteval overloads can call it (clang 14
// refuses a consteval call from a consteval function that passes its own parameters on).
template <auto M>
constexpr SettingSpec make_setting(std::string_view name, std::string_view doc) {
  using F =
      typename settings_detail::Unwrap<typename settings_detail::Member<decltype(M)>::field>::type;
  using C = typename settings_detail::Member<decltype(M)>::owner;
  SettingType type = SettingType::string;  // a pass-through prefix: each key's value is a string
  if (name.ends_with(".*")) {
    if (!std::is_same_v<F, std::map<std::string, std::string>>)
      throw "a prefix.* setting binds a string map";
  } else {
    type = settings_detail::deduced_type<F>();
  }
  using Field = typename settings_detail::Member<decltype(M)>::field;
  return SettingSpec{name,
                     type,
                     {},
                     false,
                     doc,
                     {},
                     false,
                     {},
                     {},
                     nullptr,
                     &settings_detail::assign<C, Field, M>,
                     &settings_detail::kOwnerTag<C>};
}
}  // namespace settings_detail

template <auto M>
consteval SettingSpec setting(std::string_view name, std::string_view doc) {
  return settings_detail::make_setting<M>(name, doc);
}
template <auto M>
consteval SettingSpec setting(std::string_view name, std::string_view doc, SettingType type) {
  using F =
      typename settings_detail::Unwrap<typename settings_detail::Member<decltype(M)>::field>::type;
  if (!settings_detail::holds<F>(type)) throw "the field's type cannot hold this setting type";
  SettingSpec s = settings_detail::make_setting<M>(name, doc);
  s.type = type;
  return s;
}

// A table of settings bound to one options struct. Converts to the span the registry holds.
template <typename Options, size_t N>
struct SettingsTable {
  std::array<SettingSpec, N> specs;
  constexpr operator std::span<const SettingSpec>() const noexcept { return specs; }
  constexpr std::span<const SettingSpec> span() const noexcept { return specs; }
};

// Every entry must be bound to a field of Options, with a type the field holds; an enumeration
// bound to an enum needs its choices. Checked while compiling (a failed check is a
// constant-evaluation error).
template <typename Options, typename... S>
consteval SettingsTable<Options, sizeof...(S)> settings_table(S... entries) {
  SettingsTable<Options, sizeof...(S)> t{{entries...}};
  for (const SettingSpec& s : t.specs) {
    if (s.owner != &settings_detail::kOwnerTag<Options>)
      throw "setting bound to a field of another struct";
    if (s.type == SettingType::enumeration && s.choices.empty())
      throw "enumeration without choices";
  }
  return t;
}

// Fills `out` from validated settings: every declared setting, given or defaulted (the default text
// is parsed here, the one place defaults are applied), "prefix.*" keys as a map. Re-checks what the
// loader checks (unknown keys, required, types, enumerations, ranges), for Settings built by hand.
// Errors read "<context>: <setting>: <problem>" (or "setting '<name>': <problem>" without a
// context), Errc::config, and never contain a secret value.
Status bind_settings(std::span<const SettingSpec> table, const void* owner,
                     const Settings& settings, void* out, std::string_view context);

// Binds into an existing struct, leaving its unbound fields as they are.
template <typename Options, size_t N>
Status bind_settings_into(const SettingsTable<Options, N>& table, const Settings& settings,
                          Options* out, std::string_view context = {}) {
  return bind_settings(table.span(), &settings_detail::kOwnerTag<Options>, settings, out, context);
}

template <typename Options, size_t N>
Result<Options> bind_settings(const SettingsTable<Options, N>& table, const Settings& settings,
                              std::string_view context = {}) {
  Options out{};
  SLUICE_TRY(bind_settings_into(table, settings, &out, context));
  return out;
}

}  // namespace sluice
