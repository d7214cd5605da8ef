// Settings bound to typed options: defaults applied once from the declaration, ranges, required,
// enumerations (also into enums), pass-through prefixes, finalize errors, and secret values never
// in error text. Type mismatches between a setting and its field do not compile (consteval).
#include <gtest/gtest.h>

#include "config/config.h"
#include "sluice/settings.h"

namespace sluice {
namespace {

using std::chrono::milliseconds;

enum class Mode { fast, safe };

struct Opts {
  std::string url;
  int64_t count = -7;  // overwritten by the default: bind writes every declared field
  double ratio = 0;
  bool verbose = false;
  milliseconds timeout{};
  uint64_t buffer = 0;
  size_t workers = 0;
  std::vector<std::string> tables;
  std::map<std::string, double> weights;
  std::optional<std::string> label;  // no default: stays empty unless given
  std::string level;
  Mode mode = Mode::fast;
  std::string password;
  std::map<std::string, std::string> props;
  int derived = 0;  // set by finalize
};

std::optional<std::string> no_spaces(const SettingValue& v) {
  if (std::get<std::string>(v).find(' ') == std::string::npos) return std::nullopt;
  return "must not contain spaces";
}

constexpr auto kTable = settings_table<Opts>(
    setting<&Opts::url>("url", "Where to connect.").mandatory().checked_by(no_spaces),
    setting<&Opts::count>("count", "How many.").with_default("3").at_least(0).at_most(100),
    setting<&Opts::ratio>("ratio", "A share.").with_default("0.5").at_least(0).at_most(1),
    setting<&Opts::verbose>("verbose", "Talk more.").with_default("false"),
    setting<&Opts::timeout>("timeout", "How long.").with_default("5s").at_least(1),
    setting<&Opts::buffer>("buffer", "How much.").with_default("1MiB").at_least(1024),
    setting<&Opts::workers>("workers", "Threads.", SettingType::integer)
        .with_default("2")
        .at_least(1),
    setting<&Opts::tables>("tables", "Which tables."),
    setting<&Opts::weights>("weights", "Operation mix."),
    setting<&Opts::label>("label", "A label."),
    setting<&Opts::level>("level", "Log level.").one_of("low,high").with_default("low"),
    setting<&Opts::mode>("mode", "Mode.").one_of("fast,safe").with_default("safe"),
    setting<&Opts::password>("password", "The password.").secret_value().at_least(0),
    setting<&Opts::props>("props.*", "Pass-through properties."));

// The declaration carries everything the loader and the docs use.
static_assert(kTable.specs.size() == 14);
static_assert(kTable.specs[1].type == SettingType::integer && *kTable.specs[1].min == 0 &&
              *kTable.specs[1].max == 100);
static_assert(kTable.specs[4].type == SettingType::duration);
static_assert(kTable.specs[5].type == SettingType::size);
static_assert(kTable.specs[6].type == SettingType::integer);
static_assert(kTable.specs[11].type == SettingType::enumeration);
static_assert(kTable.specs[12].secret);
static_assert(kTable.specs[13].type == SettingType::string);  // each pass-through value is a string

Status finalize(Opts& o) {
  if (o.verbose && o.level == "low") return Error(Errc::config, "verbose needs level: high");
  o.derived = static_cast<int>(o.count) * 2;
  return ok_status();
}

Result<Opts> bind_text(const std::map<std::string, std::string>& text) {
  Settings s;
  if (auto err = settings_from_text(kTable, text, &s)) return Error(Errc::config, *err);
  SLUICE_TRY_ASSIGN(Opts o, bind_settings(kTable, s, "test"));
  SLUICE_TRY(finalize(o));
  return o;
}

std::string text_error(const std::map<std::string, std::string>& text) {
  Settings s;
  auto err = settings_from_text(kTable, text, &s);
  return err ? *err : "<no error>";
}

TEST(SettingsBinding, FillsEveryFieldFromGivenValuesAndDeclaredDefaults) {
  auto o = bind_text(
      {{"url", "pg://h"}, {"tables", "[a, b]"}, {"props.linger.ms", "5"}, {"props.acks", "all"}});
  ASSERT_TRUE(o.ok()) << o.error().message();
  EXPECT_EQ(o->url, "pg://h");
  EXPECT_EQ(o->count, 3);  // the declared default, not the struct's initializer
  EXPECT_DOUBLE_EQ(o->ratio, 0.5);
  EXPECT_FALSE(o->verbose);
  EXPECT_EQ(o->timeout, milliseconds(5000));
  EXPECT_EQ(o->buffer, 1u << 20);
  EXPECT_EQ(o->workers, 2u);
  EXPECT_EQ(o->tables, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(o->weights.empty());
  EXPECT_FALSE(o->label.has_value());
  EXPECT_EQ(o->level, "low");
  EXPECT_EQ(o->mode, Mode::safe);
  EXPECT_EQ(o->props, (std::map<std::string, std::string>{{"acks", "all"}, {"linger.ms", "5"}}));
  EXPECT_EQ(o->derived, 6);
}

TEST(SettingsBinding, DefaultsAreAppliedByBindingWhenSettingsWereBuiltByHand) {
  // A Settings without any defaults (as tests build them): binding applies each declared default.
  Settings s;
  s.set("url", std::string("x"));
  s.set("label", std::string("l"));
  auto o = bind_settings(kTable, s);
  ASSERT_TRUE(o.ok()) << o.error().message();
  EXPECT_EQ(o->count, 3);
  EXPECT_EQ(o->timeout, milliseconds(5000));
  EXPECT_EQ(o->mode, Mode::safe);
  EXPECT_EQ(o->label, "l");
}

TEST(SettingsBinding, RangesAreCheckedWhereValuesAreParsed) {
  EXPECT_EQ(text_error({{"url", "x"}, {"count", "-1"}}),
            "setting 'count': must be between 0 and 100, got -1");
  EXPECT_EQ(text_error({{"url", "x"}, {"count", "101"}}),
            "setting 'count': must be between 0 and 100, got 101");
  EXPECT_EQ(text_error({{"url", "x"}, {"ratio", "1.5"}}),
            "setting 'ratio': must be between 0 and 1, got 1.5");
  EXPECT_EQ(text_error({{"url", "x"}, {"workers", "0"}}),
            "setting 'workers': must be greater than 0, got 0");
  EXPECT_EQ(text_error({{"url", "x"}, {"buffer", "1KB"}}),
            "setting 'buffer': must be at least 1024, got 1KB");
  EXPECT_EQ(text_error({{"url", "x"}, {"timeout", "0s"}}),
            "setting 'timeout': must be greater than 0, got 0s");
  EXPECT_EQ(text_error({{"url", "x"}, {"timeout", "-5"}}),
            "setting 'timeout': must be greater than 0, got -5");
  EXPECT_EQ(text_error({{"url", "x"}, {"count", "100"}, {"buffer", "1KiB"}}), "<no error>");
}

TEST(SettingsBinding, RangesAreCheckedAgainForSettingsBuiltByHand) {
  Settings s;
  s.set("url", std::string("x"));
  s.set("count", int64_t{500});
  auto o = bind_settings(kTable, s, "test");
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.error().code(), Errc::config);
  EXPECT_EQ(o.error().message(), "test: count: must be between 0 and 100, got 500");
}

TEST(SettingsBinding, RequiredUnknownWrongTypeAndEnumerationsAreRefused) {
  EXPECT_EQ(text_error({}), "missing required setting 'url'");
  Settings none;
  auto missing = bind_settings(kTable, none, "test");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message(), "test: url: missing required setting");

  Settings unknown;
  unknown.set("url", std::string("x"));
  unknown.set("cuont", int64_t{1});
  auto u = bind_settings(kTable, unknown);
  ASSERT_FALSE(u.ok());
  EXPECT_NE(u.error().message().find("setting 'cuont': unknown setting (known: url, count,"),
            std::string::npos)
      << u.error().message();

  Settings wrong;
  wrong.set("url", std::string("x"));
  wrong.set("count", std::string("ten"));
  auto w = bind_settings(kTable, wrong);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().message(), "setting 'count': expected an integer, got 'ten'");

  Settings bad_choice;
  bad_choice.set("url", std::string("x"));
  bad_choice.set("mode", std::string("slow"));
  auto c = bind_settings(kTable, bad_choice);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message(), "setting 'mode': expected one of fast, safe, got 'slow'");
}

TEST(SettingsBinding, ChecksRunOnGivenValues) {
  EXPECT_EQ(text_error({{"url", "a b"}}), "setting 'url': must not contain spaces");
}

TEST(SettingsBinding, FinalizeSeesTheWholeStruct) {
  auto o = bind_text({{"url", "x"}, {"verbose", "true"}});
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.error().message(), "verbose needs level: high");
  EXPECT_TRUE(bind_text({{"url", "x"}, {"verbose", "true"}, {"level", "high"}}).ok());
}

TEST(SettingsBinding, SecretValuesNeverAppearInErrors) {
  Settings s;
  s.set("url", std::string("x"));
  s.set("password", int64_t{-42});  // wrong type, by hand
  auto o = bind_settings(kTable, s);
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.error().message().find("42"), std::string::npos) << o.error().message();
  EXPECT_NE(o.error().message().find("secret"), std::string::npos) << o.error().message();

  constexpr SettingSpec secret_int{"pin", SettingType::integer, "", false, "", {}, true, 0.0, 9.0};
  SettingValue v;
  auto err = parse_setting_scalar(secret_int, "12345", &v);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->find("12345"), std::string::npos) << *err;
  EXPECT_EQ(*err, "must be between 0 and 9 (value not shown: secret setting)");
}

TEST(SettingsBinding, ATableOfUnboundSpecsIsRefusedWhenBound) {
  // Unmigrated tables (plain SettingSpec arrays) carry no binding: binding them is an internal
  // error.
  constexpr SettingSpec plain[] = {{"x", SettingType::string, "", false, ""}};
  Opts o;
  Settings s;
  Status st = bind_settings(plain, &settings_detail::kOwnerTag<Opts>, s, &o, "test");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("internal"), std::string::npos);
}

// Every registered table: defaults parse and lie in range, docs are written, every migrated table
// is bound throughout (a half-bound table would fail at bind time).
TEST(SettingsBinding, EveryBuiltinTableIsConsistent) {
  const Registry& r = Registry::builtin();
  auto check = [](std::string_view where, std::span<const SettingSpec> table) {
    size_t bound = 0;
    for (const SettingSpec& s : table) {
      EXPECT_FALSE(s.doc.empty()) << where << "." << s.name;
      if (s.assign) ++bound;
      if (!s.default_value.empty()) {
        SettingValue v;
        auto err = parse_setting_scalar(s, s.default_value, &v);
        EXPECT_FALSE(err) << where << "." << s.name << ": " << *err;
      }
      if (s.required) {
        EXPECT_TRUE(s.default_value.empty())
            << where << "." << s.name << ": required with a default";
      }
    }
    EXPECT_TRUE(bound == 0 || bound == table.size()) << where << ": partly bound";
  };
  for (const auto& c : r.connectors()) {
    check(std::string(c.name) + " source", c.source_settings);
    check(std::string(c.name) + " destination", c.destination_settings);
  }
  for (const auto& p : r.processors()) check(p.name, p.settings);
  check("pipeline file", file_settings());
  check("pipeline", pipeline_settings());
  check("batch", batch_settings());
}

TEST(SettingsBinding, MigratedConnectorsAreBound) {
  const Registry& r = Registry::builtin();
  for (std::string_view name : {"kafka", "file", "generator"}) {
    const ConnectorSpec* c = r.connector(name);
    ASSERT_NE(c, nullptr) << name;
    for (const SettingSpec& s : c->source_settings)
      EXPECT_NE(s.assign, nullptr) << name << "." << s.name;
    for (const SettingSpec& s : c->destination_settings)
      EXPECT_NE(s.assign, nullptr) << name << "." << s.name;
  }
  for (const auto& p : r.processors())
    for (const SettingSpec& s : p.settings) EXPECT_NE(s.assign, nullptr) << p.name << "." << s.name;
}

// Every connector is migrated: no table of unbound specs (read with string look-ups) is left.
TEST(SettingsBinding, EveryBuiltinConnectorIsBound) {
  for (const ConnectorSpec& c : Registry::builtin().connectors()) {
    for (const SettingSpec& s : c.source_settings)
      EXPECT_NE(s.assign, nullptr) << c.name << "." << s.name;
    for (const SettingSpec& s : c.destination_settings)
      EXPECT_NE(s.assign, nullptr) << c.name << "." << s.name;
  }
}

TEST(SettingsBinding, DiscardRefusesSettingsGivenByHand) {
  const ConnectorSpec* d = Registry::builtin().connector("discard");
  ASSERT_NE(d, nullptr);
  Settings s;
  EXPECT_TRUE(d->make_destination(s).ok());
  s.set("path", std::string("x"));
  auto r = d->make_destination(s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("this takes no settings"), std::string::npos)
      << r.error().message();
}

Result<std::unique_ptr<Source>> no_source(const Settings&) {
  return Error(Errc::unsupported, "test only");
}
Result<std::unique_ptr<Destination>> no_destination(const Settings&) {
  return Error(Errc::unsupported, "test only");
}

std::string load_error(const std::string& settings) {
  Registry r;
  r.add(ConnectorSpec{"t", "Test.", kTable, {}, no_source, nullptr});
  r.add(ConnectorSpec{"d", "Test.", {}, {}, nullptr, no_destination});
  std::string yaml =
      "version: 1\n"
      "pipelines:\n"
      "  - id: p\n"
      "    source:\n"
      "      connector: t\n"
      "      settings:\n" +
      settings + "    destination: {connector: d}\n";
  try {
    (void)load_config_string(yaml, "p.yaml", r);
    return "<no error>";
  } catch (const ConfigError& e) {
    return e.what();
  }
}

TEST(SettingsBinding, TheLoaderValidatesWithTheDeclaration) {
  EXPECT_EQ(load_error("        url: a b\n"),
            "p.yaml:7:14: pipelines[0].source.settings.url: must not contain spaces");
  EXPECT_EQ(load_error("        url: x\n        count: 101\n"),
            "p.yaml:8:16: pipelines[0].source.settings.count: must be between 0 and 100, got 101");
  EXPECT_EQ(load_error("        url: x\n        timeout: -5\n"),
            "p.yaml:8:18: pipelines[0].source.settings.timeout: must be greater than 0, got -5");
  EXPECT_EQ(
      load_error("        url: x\n        mode: slow\n"),
      "p.yaml:8:15: pipelines[0].source.settings.mode: expected one of fast, safe, got 'slow'");
  EXPECT_EQ(load_error("        url: x\n        password: 5\n"), "<no error>");
  EXPECT_EQ(load_error("        count: 1\n"),
            "p.yaml:7:9: pipelines[0].source.settings: missing required setting 'url'");
}

TEST(SettingsBinding, GeneratorRangeIsAFileErrorWithItsLocation) {
  const char* yaml =
      "version: 1\n"
      "pipelines:\n"
      "  - id: p\n"
      "    source: {connector: generator, settings: {count: -1}}\n"
      "    destination: {connector: discard}\n";
  try {
    (void)load_config_string(yaml, "p.yaml", Registry::builtin());
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(),
                 "p.yaml:4:54: pipelines[0].source.settings.count: must be 0 or more, got -1");
  }
}

}  // namespace
}  // namespace sluice
