// libFuzzer target: the pipeline-file loader (src/config/config.h): YAML parsing, ${ENV}
// interpolation and validation of every setting type. Any input either loads or throws
// ConfigError; any other exception escaping load_config_string, or a crash, is a finding.
//
// The registry is a local one whose connectors carry the real connector names (so the seed
// corpus — docs/ and examples/ pipeline files — gets past name resolution) and a settings table
// with one setting of every SettingType, so the validation code of each type is reached without
// linking the connectors and their client libraries.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "config/config.h"
#include "sluice/registry.h"

namespace {

using sluice::SettingSpec;
using sluice::SettingType;

constexpr SettingSpec kSettings[] = {
    {"count", SettingType::integer, "0", false, "An integer."},
    {"rate", SettingType::number, "0", false, "A number."},
    {"fsync", SettingType::boolean, "false", false, "A boolean."},
    {"poll", SettingType::duration, "200ms", false, "A duration."},
    {"chunk", SettingType::size, "1MiB", false, "A size."},
    {"tables", SettingType::string_list, "", false, "A list."},
    {"operations", SettingType::number_map, "", false, "Weights."},
    {"labels", SettingType::string_map, "", false, "Labels."},
    {"mode", SettingType::enumeration, "a", false, "A choice.", "a,b,c"},
    {"password", SettingType::string, "", false, "A secret.", {}, true},
    {"path", SettingType::string, "", false, "A path."},
    {"url", SettingType::string, "", false, "A URL."},
    {"table", SettingType::string, "", false, "A table."},
    {"topic", SettingType::string, "", false, "A topic."},
    {"props.*", SettingType::string, "", false, "Pass-through properties."},
};

sluice::Result<std::unique_ptr<sluice::Source>> no_source(const sluice::Settings&) {
  return sluice::Error(sluice::Errc::unsupported, "fuzz");
}
sluice::Result<std::unique_ptr<sluice::Destination>> no_destination(const sluice::Settings&) {
  return sluice::Error(sluice::Errc::unsupported, "fuzz");
}
sluice::Result<std::unique_ptr<sluice::Processor>> no_processor(const sluice::Settings&) {
  return sluice::Error(sluice::Errc::unsupported, "fuzz");
}

const sluice::Registry& registry() {
  static const sluice::Registry r = [] {
    sluice::Registry r;
    for (std::string_view name :
         {"generator", "file", "sqlite", "postgres", "mysql", "kafka", "discard"}) {
      r.add(sluice::ConnectorSpec{name, "fuzz", kSettings, kSettings, no_source, no_destination});
    }
    for (std::string_view name : {"field.exclude", "field.rename", "field.set", "filter"}) {
      r.add(sluice::ProcessorSpec{name, "fuzz", kSettings, no_processor});
    }
    return r;
  }();
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("SLUICE_FUZZ_VAR", "value", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view yaml(reinterpret_cast<const char*>(data), size);
  try {
    (void)sluice::load_config_string(yaml, "fuzz.yaml", registry());
  } catch (const sluice::ConfigError&) {
    // The documented failure.
  }
  std::string out, missing;
  (void)sluice::interpolate_env(yaml, &out, &missing);
  return 0;
}
