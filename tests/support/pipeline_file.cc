#include "support/pipeline_file.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "support/process.h"

namespace sluice::test {

Yaml::Yaml(double v) {
  // The shortest text that reads back as `v`.
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  text_ = buf;
  if (text_.find_first_of(".eEn") == std::string::npos) text_ += ".0";
}

Yaml Yaml::raw(std::string text) { return Yaml(Raw{}, std::move(text)); }

Yaml Yaml::list(const std::vector<Yaml>& items) {
  std::string s = "[";
  for (size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + items[i].text();
  return raw(s + "]");
}

Yaml Yaml::strings(const std::vector<std::string>& items) {
  std::vector<Yaml> v;
  v.reserve(items.size());
  for (const auto& s : items) v.emplace_back(s);
  return list(v);
}

Yaml Yaml::map(const std::vector<std::pair<std::string, Yaml>>& entries) {
  YamlMap m;
  for (const auto& [k, v] : entries) m.set(k, v);
  return raw(m.flow());
}

std::string Yaml::quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (u < 0x20 || u == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", u);
          out += buf;
        } else {
          out += c;  // UTF-8 bytes as they are
        }
    }
  }
  return out + "\"";
}

std::string Yaml::key(std::string_view k) {
  bool plain = !k.empty();
  for (char c : k)
    plain = plain && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '.' || c == '-');
  return plain ? std::string(k) : quote(k);
}

YamlMap& YamlMap::set(const std::string& k, Yaml v) {
  for (auto& [key, value] : entries_)
    if (key == k) {
      value = std::move(v);
      return *this;
    }
  entries_.emplace_back(k, std::move(v));
  return *this;
}

const Yaml* YamlMap::find(const std::string& k) const {
  for (const auto& [key, value] : entries_)
    if (key == k) return &value;
  return nullptr;
}

std::string YamlMap::flow() const {
  std::string s = "{";
  for (size_t i = 0; i < entries_.size(); ++i)
    s += (i ? ", " : "") + Yaml::key(entries_[i].first) + ": " + entries_[i].second.text();
  return s + "}";
}

PipelineYaml& PipelineFile::pipeline(const std::string& id) {
  for (auto& p : pipelines_)
    if (p.id == id) return p;
  pipelines_.push_back(PipelineYaml{});
  pipelines_.back().id = id;
  return pipelines_.back();
}

namespace {
std::string connector_block(const char* name, const ConnectorYaml& c) {
  std::string s =
      "    " + std::string(name) + ":\n      connector: " + Yaml::quote(c.connector) + "\n";
  if (!c.settings.empty()) {
    s += "      settings:\n";
    for (const auto& [k, v] : c.settings.entries())
      s += "        " + Yaml::key(k) + ": " + v.text() + "\n";
  }
  return s;
}
}  // namespace

std::string PipelineFile::yaml() const {
  std::string s = "version: 1\npipelines:\n";
  for (const auto& p : pipelines_) {
    s += "  - id: " + Yaml::quote(p.id) + "\n";
    s += connector_block("source", p.source_);
    if (!p.processors.empty()) {
      s += "    processors:\n";
      for (const auto& proc : p.processors)
        s += "      - {type: " + Yaml::quote(proc.connector) +
             (proc.settings.empty() ? "" : ", settings: " + proc.settings.flow()) + "}\n";
    }
    // No destination: the pipeline names several (`destinations` in extra).
    if (!p.destination_.connector.empty()) s += connector_block("destination", p.destination_);
    if (!p.batch.empty()) s += "    batch: " + p.batch.flow() + "\n";
    if (p.on_error) s += "    on_error: " + Yaml::quote(*p.on_error) + "\n";
    if (p.dlq_) {
      s += "    dlq: {connector: " + Yaml::quote(p.dlq_->connector) +
           (p.dlq_->settings.empty() ? "" : ", settings: " + p.dlq_->settings.flow()) + "}\n";
    }
    for (const auto& [k, v] : p.extra.entries())
      s += "    " + Yaml::key(k) + ": " + v.text() + "\n";
  }
  if (checkpoints_path) s += "checkpoints: {path: " + Yaml::quote(*checkpoints_path) + "}\n";
  if (!http.empty()) s += "http: " + http.flow() + "\n";
  for (const auto& [k, v] : extra.entries()) s += Yaml::key(k) + ": " + v.text() + "\n";
  return s;
}

void PipelineFile::write(const std::filesystem::path& p) const { write_file(p, yaml()); }

}  // namespace sluice::test
