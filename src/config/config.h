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

// The pipeline-level keys are declared like connector settings (tables in config.cc, bound to the
// fields below; the defaults are written there, once). A Config comes from the loader only.
struct BatchConfig {
  size_t max_records = 0;              // batch.max_records
  bool max_records_set = false;        // given in the file (else the destination may prefer fewer)
  uint64_t max_bytes = 0;              // batch.max_bytes
  std::chrono::milliseconds linger{};  // batch.linger_ms
};

enum class OnError { stop, dlq };  // the order of the `on_error` choices

// A pipeline's `spool` map (declared in config.cc: kSpoolSettings).
enum class SpoolWhenFull { block, fail };  // the order of the `when_full` choices
struct SpoolConfig {
  std::string type;           // spool.type: disk | redis
  std::string path;           // spool.path: the segment directory (disk)
  std::string url;            // spool.url: the Redis server (redis)
  std::string key;            // spool.key: the Redis stream ("": sluice:spool:<pipeline id>)
  uint64_t segment_size = 0;  // spool.segment_size
  uint64_t max_bytes = 0;     // spool.max_bytes (0: no bound but the disk)
  SpoolWhenFull when_full{};  // spool.when_full
  bool fsync = true;          // spool.fsync
};

// One entry of `destinations:` (a pipeline feeding several destinations).
struct DestinationConfig {
  std::string name;  // unique in the pipeline; default "<connector>-<index>"
  ConnectorConfig connector;
  std::vector<ProcessorConfig> processors;  // after the pipeline's, for this destination only
  OnError on_error{};                       // default: the pipeline's
  std::optional<ConnectorConfig> dlq;       // default: the pipeline's
};

struct PipelineConfig {
  std::string id;  // [A-Za-z0-9_.-]+, unique in the file
  ConnectorConfig source;
  std::vector<ProcessorConfig> processors;
  // `destination:`; with `destinations:` a copy of the first one's connector (for code that names
  // "the" destination), the list being in `destinations`.
  ConnectorConfig destination;
  std::vector<DestinationConfig> destinations;  // `destinations:` (empty with `destination:`)
  BatchConfig batch;
  OnError on_error{};                         // on_error
  std::chrono::milliseconds stall_timeout{};  // stall_timeout (0: stalls are not reported)
  std::optional<ConnectorConfig> dlq;         // required when on_error is dlq
  std::optional<SpoolConfig> spool;           // spool: between the processors and the destination
};

struct Config {
  std::string file;  // path it was loaded from (or "<quickstart>")
  int version = 1;
  std::vector<PipelineConfig> pipelines;
  std::string checkpoints_path;  // checkpoints.path
  bool http_enabled = false;     // http.enabled
  std::string http_listen;       // http.listen, host:port
  bool http_listen_set = false;  // http.listen given in the file (else the default)
  std::string http_token;        // http.token, or the content of http.token_file ("": none)
  std::string http_token_file;   // http.token_file
  bool http_allow_unauthenticated = false;  // http.allow_unauthenticated
  std::vector<std::string>
      file_keys_set;  // the file-level keys the file gave (checkpoints.path, …)
};

// Whether `host` (of http.listen: an IPv4 address, a bracketed or bare IPv6 address, a name) is
// a loopback address: 127.0.0.0/8, ::1, localhost.
bool is_loopback_host(std::string_view host);

// The declared pipeline-level settings: file-level (`checkpoints.path`, `http.*`), per pipeline
// (`on_error`) and the pipeline's `batch` map. They drive the loader and the generated reference.
std::span<const SettingSpec> file_settings() noexcept;

// Registers every secret of `config` for redaction (sluice/secrets.h): values of settings declared
// secret or named like a credential (…password, …secret…), and the password of every URL.
// load_config_* call it.
void register_config_secrets(const Config& config);
std::span<const SettingSpec> pipeline_settings() noexcept;
std::span<const SettingSpec> batch_settings() noexcept;
std::span<const SettingSpec> spool_settings() noexcept;

// Throws ConfigError. `path` may be a directory of pipeline files: every `*.yaml` / `*.yml` in it
// (not hidden, in name order) is loaded and their pipelines run together; a pipeline id defined in
// two files, or a file-level key (checkpoints.*, http.*) set in two files, is an error.
Config load_config_file(const std::string& path, const Registry& registry);
// The pipeline files `load_config_file(dir)` reads from directory `dir`, in order.
std::vector<std::string> pipeline_files_in(const std::string& dir);
Config load_config_string(std::string_view yaml, const std::string& name, const Registry& registry);

// Replaces ${VAR} and ${VAR:-default} (and $$ -> $) in a scalar. Returns the name of an unset
// variable without default through `missing` and false.
bool interpolate_env(std::string_view in, std::string* out, std::string* missing);

// Markdown reference of one connector / processor, generated from its settings tables (used by
// `sluice connectors NAME --markdown` and docs/connectors.md), and the plain-text form.
std::string render_connector_markdown(const ConnectorSpec& spec);
std::string render_processor_markdown(const ProcessorSpec& spec);
std::string render_connector_text(const ConnectorSpec& spec);
std::string render_pipeline_file_markdown();                      // the "Pipeline file" section
std::string render_reference_markdown(const Registry& registry);  // the whole docs/connectors.md
std::string render_pipeline_file_page(const Registry& registry);  // docs/pipeline-file.md

}  // namespace sluice
