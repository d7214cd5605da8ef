// A pipeline file written from C++: the YAML sluice run reads, with every string scalar
// double-quoted and escaped (URLs with '@' and '?', names with '#', ': ', quotes, non-ASCII), so a
// test never hand-builds YAML text. Flow style throughout; keys keep their insertion order.
//
//   PipelineFile f;
//   f.pipeline("p").source("postgres").set("url", db.url()).set("tables",
//   Yaml::strings({"public.t"})); f.pipeline("p").destination("sqlite").set("path", "out.db");
//   write_file(dir / "p.yaml", f.yaml());
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::test {

// One YAML value in flow style.
class Yaml {
 public:
  Yaml() : text_("null") {}
  Yaml(const char* s) : text_(quote(s)) {}         // NOLINT: a string scalar
  Yaml(const std::string& s) : text_(quote(s)) {}  // NOLINT
  Yaml(std::string_view s) : text_(quote(s)) {}    // NOLINT
  Yaml(bool b) : text_(b ? "true" : "false") {}    // NOLINT
  Yaml(int v) : text_(std::to_string(v)) {}        // NOLINT
  Yaml(int64_t v) : text_(std::to_string(v)) {}    // NOLINT
  Yaml(uint64_t v) : text_(std::to_string(v)) {}   // NOLINT
  Yaml(double v);                                  // NOLINT

  // YAML text as written (a test that checks how a scalar form is read, or an existing fragment).
  static Yaml raw(std::string text);
  static Yaml list(const std::vector<Yaml>& items);
  static Yaml strings(const std::vector<std::string>& items);
  static Yaml map(const std::vector<std::pair<std::string, Yaml>>& entries);

  // A double-quoted YAML scalar of `s` (escapes \, ", control characters).
  static std::string quote(std::string_view s);
  // A mapping key: plain when it is [A-Za-z0-9_.-]+, quoted otherwise.
  static std::string key(std::string_view k);

  const std::string& text() const { return text_; }

 private:
  struct Raw {};
  Yaml(Raw, std::string text) : text_(std::move(text)) {}
  std::string text_;
};

// An ordered mapping: set() replaces a key already there.
class YamlMap {
 public:
  YamlMap& set(const std::string& k, Yaml v);
  bool empty() const { return entries_.empty(); }
  const Yaml* find(const std::string& k) const;
  std::string flow() const;  // {k: v, ...}
  const std::vector<std::pair<std::string, Yaml>>& entries() const { return entries_; }

 private:
  std::vector<std::pair<std::string, Yaml>> entries_;
};

// A connector (source, destination, dead-letter queue) or a processor: its name and settings.
struct ConnectorYaml {
  std::string connector;  // processors: the type
  YamlMap settings;
  ConnectorYaml& set(const std::string& k, Yaml v) {
    settings.set(k, std::move(v));
    return *this;
  }
};

struct PipelineYaml {
  std::string id;
  ConnectorYaml source_, destination_;
  std::vector<ConnectorYaml> processors;
  std::optional<ConnectorYaml> dlq_;
  YamlMap batch;                        // max_records, max_bytes, linger_ms
  std::optional<std::string> on_error;  // stop | dlq | ...
  YamlMap extra;                        // any other pipeline key

  ConnectorYaml& source(const std::string& connector) {
    source_.connector = connector;
    return source_;
  }
  ConnectorYaml& destination(const std::string& connector) {
    destination_.connector = connector;
    return destination_;
  }
  ConnectorYaml& dlq(const std::string& connector) {
    dlq_ = ConnectorYaml{connector, {}};
    return *dlq_;
  }
  ConnectorYaml& processor(const std::string& type) {
    processors.push_back({type, {}});
    return processors.back();
  }
  PipelineYaml& max_records(size_t n) {
    batch.set("max_records", uint64_t(n));
    return *this;
  }
  PipelineYaml& linger_ms(int ms) {
    batch.set("linger_ms", ms);
    return *this;
  }
};

class PipelineFile {
 public:
  // The pipeline `id`, added on first use.
  PipelineYaml& pipeline(const std::string& id);
  // checkpoints: {path: ...} (default state/checkpoints.db); nullopt leaves the key out.
  std::optional<std::string> checkpoints_path = "state/checkpoints.db";
  // http: {enabled: false} unless set.
  YamlMap http = YamlMap().set("enabled", false);
  YamlMap extra;  // other top-level keys

  std::string yaml() const;
  void write(const std::filesystem::path& p) const;

 private:
  std::vector<PipelineYaml> pipelines_;
};

}  // namespace sluice::test
