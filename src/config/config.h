// The pipeline file: YAML loading, ${ENV} interpolation and validation against the registry's
// settings tables. Every problem is a ConfigError whose message is one line:
//   "pipeline.yaml:12:7: pipelines[0].source.settings.count: expected an integer, got 'ten'"
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/registry.h"
#include "sluice/settings.h"

namespace sluice {

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ConnectorConfig {
  std::string connector;                // registered name
  const ConnectorSpec* spec = nullptr;  // resolved from the registry
  Settings settings;                    // validated, defaults applied
};

struct ProcessorConfig {
  std::string type;
  const ProcessorSpec* spec = nullptr;
  Settings settings;
};

struct BatchConfig {
  size_t max_records = 10000;
  bool max_records_set = false;  // given in the file (else the destination may prefer fewer)
  uint64_t max_bytes = 64ull << 20;
  std::chrono::milliseconds linger{50};
};

enum class OnError { stop, dlq };

struct PipelineConfig {
  std::string id;  // [A-Za-z0-9_.-]+, unique in the file
  ConnectorConfig source;
  std::vector<ProcessorConfig> processors;
  ConnectorConfig destination;
  BatchConfig batch;
  OnError on_error = OnError::stop;
  std::optional<ConnectorConfig> dlq;  // required when on_error is dlq
};

struct Config {
  std::string file;  // path it was loaded from (or "<quickstart>")
  int version = 1;
  std::vector<PipelineConfig> pipelines;
  std::string checkpoints_path = ".sluice/checkpoints.db";
  bool http_enabled = true;
  std::string http_listen = "127.0.0.1:8080";  // host:port
};

// Throws ConfigError.
Config load_config_file(const std::string& path, const Registry& registry);
Config load_config_string(std::string_view yaml, const std::string& name, const Registry& registry);

// Replaces ${VAR} and ${VAR:-default} (and $$ -> $) in a scalar. Returns the name of an unset
// variable without default through `missing` and false.
bool interpolate_env(std::string_view in, std::string* out, std::string* missing);

// Markdown reference of one connector / processor, generated from its settings tables (used by
// `sluice connectors NAME --markdown` and docs/connectors.md), and the plain-text form.
std::string render_connector_markdown(const ConnectorSpec& spec);
std::string render_processor_markdown(const ProcessorSpec& spec);
std::string render_connector_text(const ConnectorSpec& spec);
std::string render_reference_markdown(const Registry& registry);  // the whole docs/connectors.md

}  // namespace sluice
