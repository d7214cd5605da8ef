// Malformed pipeline files found by fuzz/config_fuzz.cc: each must be a ConfigError naming the
// place, promptly (yaml-cpp 0.7 alone loops forever on the first, growing memory until killed).
#include <gtest/gtest.h>

#include <string>

#include "config/config.h"

namespace sluice {
namespace {

std::string error_of(std::string_view yaml) {
  Registry empty;
  try {
    load_config_string(yaml, "p.yaml", empty);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "loaded";
}

TEST(LoadConfigMalformedYaml, StrayCommaIsAnErrorNotAHang) {
  EXPECT_EQ(error_of(",p:\n\n"), "p.yaml:1:1: invalid YAML: unexpected token");
  EXPECT_EQ(error_of(","), "p.yaml:1:1: invalid YAML: unexpected token");
}

TEST(LoadConfigMalformedYaml, SeveralDocumentsStillReported) {
  EXPECT_EQ(error_of("version: 1\n---\nversion: 2\n"),
            "p.yaml:3:1: expected one YAML document, found another (remove the '---' line)");
}

}  // namespace
}  // namespace sluice
