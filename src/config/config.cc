// The pipeline file: YAML -> Config, validated against the registry's settings tables. Every
// problem becomes one ConfigError line "file:line:col: key.path: problem" pointing at the offending
// node.
#include "config/config.h"

#include "connectors/record_template.h"
#include "sluice/secrets.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <memory>
#include <sstream>

namespace sluice {

namespace {

// yaml-cpp 0.7's LoadAll never returns on some malformed streams (a stray ',' as in ",p:"): its
// parser reports an empty document at the same place forever and LoadAll collects them until
// memory runs out (yaml-cpp issue 1040, fixed upstream after 0.8.0). A first pass over the parser's
// events stops at the first document that starts where the previous one did.
class DocumentProgress : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override {
    stuck_ = started_ && mark.pos == last_.pos;
    started_ = true;
    last_ = mark;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
  bool stuck() const noexcept { return stuck_; }
  const YAML::Mark& mark() const noexcept { return last_; }

 private:
  bool started_ = false;
  bool stuck_ = false;
  YAML::Mark last_;
};

// Nested settings maps deeper than this are a mistake (or an alias cycle, which yaml-cpp allows).
constexpr int kMaxSettingsDepth = 32;

constexpr SettingSpec kInteger{"", SettingType::integer, "", false, ""};

// A node to validate, where to point at when it is wrong, and its key path.
struct Val {
  YAML::Node node;
  YAML::Mark mark;  // the value's position, or its key's when the value is empty (yaml-cpp gives an
                    // empty value the position of whatever follows it)
  std::string path;
};

struct Entry {
  std::string key;
  YAML::Node key_node;
  YAML::Node value;
};

std::string join(std::string_view path, std::string_view key) {
  return path.empty() ? std::string(key) : std::string(path) + "." + std::string(key);
}

std::string describe(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Scalar: return quote_user_text(n.Scalar());
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a map";
    default: return "nothing";
  }
}

// "a string", "an integer", "one of a, b" — for a value of the wrong shape (list, map, nothing).
std::string describe_type(const SettingSpec& spec) {
  if (spec.type == SettingType::enumeration) {
    std::string out = "one of ";
    std::string_view c = spec.choices;
    for (size_t i = 0; i < c.size(); ++i) {
      if (c[i] == ',') {
        out += ", ";
        while (i + 1 < c.size() && c[i + 1] == ' ') ++i;
      } else {
        out += c[i];
      }
    }
    return out;
  }
  std::string_view name = setting_type_name(spec.type);
  bool vowel =
      !name.empty() && std::string_view("aeiou").find(name.front()) != std::string_view::npos;
  return std::string(vowel ? "an " : "a ") + std::string(name);
}

bool is_map_type(SettingType t) {
  return t == SettingType::number_map || t == SettingType::string_map;
}

bool valid_id(std::string_view id) {
  if (id.empty()) return false;
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// "host:port" with a numeric port; the host may be a bracketed IPv6 address.
bool valid_listen(std::string_view s) {
  size_t colon = s.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == s.size()) return false;
  auto port = s.substr(colon + 1);
  if (port.size() > 5) return false;
  unsigned value = 0;
  for (char c : port) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  if (value > 65535) return false;
  auto host = s.substr(0, colon);
  if (host.front() == '[') return host.size() > 2 && host.back() == ']';
  return host.find(':') == std::string_view::npos;
}

}  // namespace

bool is_loopback_host(std::string_view host) {
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host == "localhost" || host == "::1") return true;
  // 127.0.0.0/8 in dotted-quad form.
  if (!host.starts_with("127.")) return false;
  int dots = 0;
  for (char c : host) {
    if (c == '.') ++dots;
    else if (c < '0' || c > '9') return false;
  }
  return dots == 3;
}

namespace {

std::optional<std::string> check_listen(const SettingValue& v) {
  const std::string& text = std::get<std::string>(v);
  if (valid_listen(text)) return std::nullopt;
  return "expected host:port like 127.0.0.1:8080, got " + quote_user_text(text);
}

std::optional<std::string> check_file_path(const SettingValue& v) {
  if (!std::get<std::string>(v).empty()) return std::nullopt;
  return "expected a file path, got ''";
}

// The pipeline-level keys, declared once: they drive the loader below and the generated reference.
// File-level keys are named by their section (`http.listen` is `http: {listen: ...}`).
constexpr auto kFileSettings = settings_table<Config>(
    setting<&Config::checkpoints_path>(
        "checkpoints.path", "The embedded SQLite file holding every pipeline's checkpoint.")
        .with_default(".sluice/checkpoints.db")
        .checked_by(check_file_path)
        .file_path(),
    setting<&Config::http_listen>("http.listen",
                                  "host:port of the HTTP server (/metrics, /healthz). The port is "
                                  "never shared: an address given here that another process holds "
                                  "is an error; the default one in use only turns HTTP off for "
                                  "the run, with a warning.")
        .with_default("127.0.0.1:8080")
        .checked_by(check_listen),
    setting<&Config::http_enabled>("http.enabled", "Serve HTTP at all.").with_default("true"),
    setting<&Config::http_token>(
        "http.token",
        "Bearer token every HTTP request but /healthz and the console's static files (/, "
        "/console/…) must carry (`Authorization: Bearer TOKEN`; 401 otherwise; the console asks "
        "for it); `${ENV_VAR}` keeps it out of the file. Default: none (no token asked).")
        .secret_value(),
    setting<&Config::http_token_file>(
        "http.token_file",
        "File whose content is the bearer token (one trailing newline dropped); instead of "
        "http.token.")
        .file_path(),
    setting<&Config::http_allow_unauthenticated>(
        "http.allow_unauthenticated",
        "Allow http.listen on an address beyond loopback without http.token or http.token_file "
        "(refused otherwise: /metrics shows table names and positions to anyone who can connect).")
        .with_default("false"));

constexpr auto kPipelineSettings = settings_table<PipelineConfig>(
    setting<&PipelineConfig::on_error>(
        "on_error",
        "What a record the destination rejects does. stop: the pipeline stops with the error (the "
        "checkpoint stays before the batch); dlq: the record goes to the `dlq` destination and the "
        "pipeline goes on.")
        .one_of("stop,dlq")
        .with_default("stop"),
    setting<&PipelineConfig::stall_timeout>(
        "stall_timeout",
        "A side that makes no progress this long while work is pending is reported as stalled: "
        "the source (a read that does not return) or the destination (batches handed to it that "
        "do not become durable, e.g. a locked table). Logged once with what is pending, shown on "
        "/healthz as degraded (HTTP 503), counted in sluice_pipeline_stalls_total{side}; recovery "
        "logs once. 0 turns it off.")
        .with_default("5m")
        .at_least(0));

constexpr auto kBatchSettings = settings_table<BatchConfig>(
    setting<&BatchConfig::max_records>(
        "max_records",
        "Most records in one batch. When this is not given, a destination may ask for "
        "fewer, and a pipeline with a `spool` uses at most 2500 (it holds batches on both "
        "sides of the spool).",
        SettingType::integer)
        .with_default("10000")
        .at_least(1),
    setting<&BatchConfig::max_bytes>("max_bytes", "Most bytes of record data in one batch.")
        .with_default("64MiB")
        .at_least(1),
    setting<&BatchConfig::linger>(
        "linger_ms",
        "How long a batch that is not full may wait for more records after its first; a bare "
        "number is milliseconds. The change-stream sources (PostgreSQL, MySQL, Kafka, Redis "
        "streams) return it sooner once nothing arrived for a tenth of this: a burst's last "
        "records are not held back.")
        .with_default("50")
        .at_least(0));

constexpr auto kSpoolSettings = settings_table<SpoolConfig>(
    setting<&SpoolConfig::type>("type",
                                "Where batches are spooled. disk: append-only segment files in "
                                "`path`; redis: one Redis stream (`url`, `key`).")
        .one_of("disk,redis")
        .mandatory(),
    setting<&SpoolConfig::path>(
        "path",
        "Directory of the segment files (created if missing; type disk, where it is required). "
        "One pipeline per directory; keep it on a local disk.")
        .checked_by(check_file_path)
        .file_path(),
    setting<&SpoolConfig::url>("url",
                               "The Redis server of a type redis spool (required there): "
                               "redis://[user:password@]host:port[/db].")
        .secret_value(),
    setting<&SpoolConfig::key>("key",
                               "The stream of a type redis spool; empty: sluice:spool:<pipeline "
                               "id>. One pipeline per stream."),
    setting<&SpoolConfig::segment_size>(
        "segment_size",
        "A segment file rolls once it holds this much; a segment is deleted once the destination "
        "has every batch in it (type disk).")
        .with_default("64MiB")
        .at_least(4096),
    setting<&SpoolConfig::max_bytes>(
        "max_bytes",
        "Most bytes the spool holds for the destination: of segment files on disk (type disk), of "
        "batches in the stream (type redis); 0: no bound but the disk or the server's memory (a "
        "full disk holds the source back until the destination frees a segment).")
        .with_default("0"),
    setting<&SpoolConfig::when_full>(
        "when_full",
        "What the source side does when the spool holds max_bytes. block: it waits (the source "
        "is held back, as without a spool); fail: the pipeline stops with an error.")
        .one_of("block,fail")
        .with_default("block"),
    setting<&SpoolConfig::fsync>(
        "fsync",
        "type disk: fdatasync each batch before the source is acknowledged (group commit: one per "
        "batch). type redis: refuse a server that does not fsync each write to its append-only "
        "file (appendonly yes, appendfsync always). false survives a crash of sluice but not of "
        "the machine (or of the Redis server).")
        .with_default("true"));

// The keys of a section's entries in a table ("http.listen" -> "listen" for section "http").
std::vector<std::string_view> section_keys(std::span<const SettingSpec> table,
                                           std::string_view section) {
  std::vector<std::string_view> keys;
  for (const auto& s : table) {
    if (section.empty()) keys.push_back(s.name);
    else if (s.name.size() > section.size() + 1 && s.name.starts_with(section) &&
             s.name[section.size()] == '.')
      keys.push_back(s.name.substr(section.size() + 1));
  }
  return keys;
}

enum class Role { source, destination };

class Loader {
 public:
  // `base_dir`: the folder relative paths resolve against ("" leaves them as written).
  Loader(std::string file, const Registry& registry, std::string base_dir = "")
      : file_(std::move(file)), registry_(registry), base_dir_(std::move(base_dir)) {}

  Config load(std::string_view yaml) {
    std::vector<YAML::Node> docs;
    try {
      std::istringstream in{std::string(yaml)};
      YAML::Parser parser(in);
      DocumentProgress progress;
      while (parser.HandleNextDocument(progress))
        if (progress.stuck()) fail(progress.mark(), "", "invalid YAML: unexpected token");
      docs = YAML::LoadAll(std::string(yaml));
    } catch (const YAML::DeepRecursion& e) {
      fail(e.mark, "", "invalid YAML: nested too deeply");  // yaml-cpp's own text says "bad file"
    } catch (const YAML::Exception& e) {
      fail(e.mark, "", "invalid YAML: " + e.msg);
    }
    try {
      return load_documents(docs);
    } catch (const YAML::Exception& e) {
      // Not expected (every node is type-checked before use), but a bad file must never crash.
      fail(e.mark, "", "invalid YAML: " + e.msg);
    }
  }

 private:
  [[noreturn]] void fail(const YAML::Mark& mark, std::string_view path,
                         std::string_view problem) const {
    int line = mark.line >= 0 ? mark.line + 1 : 1;
    int column = mark.column >= 0 ? mark.column + 1 : 1;
    std::string msg = file_ + ":" + std::to_string(line) + ":" + std::to_string(column) + ": ";
    if (!path.empty()) msg += std::string(path) + ": ";
    msg += problem;
    // One line, always: values were escaped already, this catches anything else.
    for (char& c : msg)
      if (c == '\n' || c == '\r') c = ' ';
    throw ConfigError(msg);
  }

  static Val child(const Val& parent, const Entry& e) {
    bool empty = !e.value.IsDefined() || e.value.IsNull();
    return Val{e.value, empty ? e.key_node.Mark() : e.value.Mark(), join(parent.path, e.key)};
  }

  static Val item(const Val& parent, const YAML::Node& n, size_t i) {
    bool empty = !n.IsDefined() || n.IsNull();
    return Val{n, empty ? parent.mark : n.Mark(), parent.path + "[" + std::to_string(i) + "]"};
  }

  static bool empty(const Val& v) { return !v.node.IsDefined() || v.node.IsNull(); }

  // The entries of a map, checking keys are plain, unique and (when `allowed` is given) known.
  std::vector<Entry> entries(const Val& v, std::initializer_list<std::string_view> allowed = {},
                             bool null_is_empty = true) const {
    return entries(v, std::span<const std::string_view>(allowed.begin(), allowed.size()),
                   null_is_empty);
  }

  std::vector<Entry> entries(const Val& v, std::span<const std::string_view> allowed,
                             bool null_is_empty) const {
    std::vector<Entry> out;
    if (null_is_empty && empty(v)) return out;
    if (!v.node.IsMap()) fail(v.mark, v.path, "expected a map, got " + describe(v.node));
    std::map<std::string, int, std::less<>> first_line;
    for (auto it = v.node.begin(); it != v.node.end(); ++it) {
      // Copies: the iterator's pair is a temporary, references into it dangle.
      YAML::Node k = it->first;
      YAML::Node value = it->second;
      if (!k.IsScalar()) fail(k.Mark(), v.path, "expected a plain key, got " + describe(k));
      std::string key = k.Scalar();
      if (allowed.size() != 0) {
        bool known = false;
        std::string list;
        for (auto a : allowed) {
          known = known || a == key;
          list += (list.empty() ? "" : ", ") + std::string(a);
        }
        if (!known)
          fail(k.Mark(), join(v.path, key), "unknown key '" + key + "' (known: " + list + ")");
      }
      if (auto f = first_line.find(key); f != first_line.end())
        fail(k.Mark(), join(v.path, key),
             "duplicate key '" + key + "' (first at line " + std::to_string(f->second) + ")");
      first_line.emplace(key, k.Mark().line + 1);
      out.push_back(Entry{std::move(key), k, value});
    }
    return out;
  }

  static const Entry* find(const std::vector<Entry>& entries, std::string_view key) {
    for (const auto& e : entries)
      if (e.key == key) return &e;
    return nullptr;
  }

  std::string interpolate(const Val& v, const std::string& raw) const {
    std::string out, missing;
    if (interpolate_env(raw, &out, &missing)) return out;
    if (missing.empty())
      fail(v.mark, v.path,
           "malformed ${...} (use ${NAME} or ${NAME:-default}; write $$ for a literal $)");
    fail(v.mark, v.path,
         "environment variable '" + missing + "' is not set (set it, or give a default: ${" +
             missing + ":-default})");
  }

  // A scalar value, environment variables substituted.
  std::string scalar(const Val& v, std::string_view expected = "a string") const {
    if (!v.node.IsScalar())
      fail(v.mark, v.path, "expected " + std::string(expected) + ", got " + describe(v.node));
    return interpolate(v, v.node.Scalar());
  }

  SettingValue typed_scalar(const Val& v, const SettingSpec& spec) const {
    std::string text = scalar(v, describe_type(spec));
    SettingValue out;
    if (auto err = parse_setting_scalar(spec, text, &out)) fail(v.mark, v.path, *err);
    return out;
  }

  Config load_documents(const std::vector<YAML::Node>& docs) {
    if (docs.empty() || docs[0].IsNull())
      fail(docs.empty() ? YAML::Mark() : docs[0].Mark(), "",
           "the file is empty (expected a map with 'version' and 'pipelines')");
    for (size_t i = 1; i < docs.size(); ++i)
      if (!docs[i].IsNull())
        fail(docs[i].Mark(), "",
             "expected one YAML document, found another (remove the '---' line)");

    Config config;
    config.file = file_;
    Val root{docs[0], docs[0].Mark(), ""};
    auto top = entries(root, {"version", "pipelines", "checkpoints", "http"}, false);

    if (const Entry* e = find(top, "version")) {
      Val v = child(root, *e);
      int64_t version = std::get<int64_t>(typed_scalar(v, kInteger));
      if (version != 1)
        fail(v.mark, v.path,
             "unsupported version " + std::to_string(version) + " (this sluice reads version 1)");
      config.version = 1;
    }

    const Entry* pipelines = find(top, "pipelines");
    if (!pipelines) fail(root.mark, "", "missing required key 'pipelines'");
    Val list = child(root, *pipelines);
    if (!list.node.IsSequence())
      fail(list.mark, list.path, "expected a list of pipelines, got " + describe(list.node));
    if (list.node.size() == 0) fail(list.mark, list.path, "expected at least one pipeline");
    std::map<std::string, int, std::less<>> ids;  // id -> line, for duplicates
    for (size_t i = 0; i < list.node.size(); ++i) {
      Val p = item(list, list.node[i], i);
      config.pipelines.push_back(load_pipeline(p, ids));
    }

    Settings file_level(kFileSettings);
    for (std::string_view section : {"checkpoints", "http"})
      if (const Entry* e = find(top, section))
        load_section(child(root, *e), kFileSettings, section, file_level);
    resolve_paths(file_level);
    bind(kFileSettings, file_level, root, &config);
    config.http_listen_set = file_level.has("http.listen");
    for (const SettingSpec& spec : std::span<const SettingSpec>(kFileSettings))
      if (file_level.has(spec.name)) config.file_keys_set.emplace_back(spec.name);
    check_http(config, top, root);
    return config;
  }

  // The http.* checks across settings: one token source, the token file read here (so validate
  // says it too), and no listener beyond loopback without a token unless allowed.
  void check_http(Config& config, const std::vector<Entry>& top, const Val& root) const {
    const Entry* e = find(top, "http");
    const Val at = e ? child(root, *e) : root;
    if (!config.http_token.empty() && !config.http_token_file.empty())
      fail(at.mark, "http", "http.token and http.token_file are both set; keep one of them");
    if (!config.http_token_file.empty()) {
      std::ifstream in(config.http_token_file, std::ios::binary);
      if (!in)
        fail(at.mark, "http.token_file",
             "cannot read \"" + config.http_token_file + "\": " + std::strerror(errno) +
                 "; check the path and that this user may read it");
      std::ostringstream text;
      text << in.rdbuf();
      config.http_token = text.str();
      if (config.http_token.ends_with("\r\n"))
        config.http_token.resize(config.http_token.size() - 2);
      else if (config.http_token.ends_with('\n')) config.http_token.pop_back();
      if (config.http_token.empty())
        fail(at.mark, "http.token_file",
             "\"" + config.http_token_file + "\" is empty; write the token into it");
    }
    if (!config.http_token.empty()) register_secret(config.http_token);
    if (!config.http_enabled || !config.http_token.empty() || config.http_allow_unauthenticated)
      return;
    const std::string& listen = config.http_listen;
    if (!is_loopback_host(std::string_view(listen).substr(0, listen.rfind(':'))))
      fail(at.mark, "http.listen",
           quote_user_text(listen) +
               " is beyond loopback and no token is set: set http.token (e.g. "
               "${SLUICE_HTTP_TOKEN}) or http.token_file, listen on 127.0.0.1, or set "
               "http.allow_unauthenticated: true");
  }

  PipelineConfig load_pipeline(const Val& p, std::map<std::string, int, std::less<>>& ids) {
    PipelineConfig out;
    auto fields = entries(p,
                          {"id", "source", "processors", "destination", "destinations", "batch",
                           "on_error", "stall_timeout", "dlq", "spool"},
                          false);

    const Entry* id = find(fields, "id");
    if (!id) fail(p.mark, p.path, "missing required key 'id'");
    Val idv = child(p, *id);
    out.id = scalar(idv);
    if (!valid_id(out.id))
      fail(idv.mark, idv.path,
           "invalid pipeline id " + quote_user_text(out.id) +
               " (use letters, digits, '_', '.' and '-')");
    if (auto it = ids.find(out.id); it != ids.end())
      fail(idv.mark, idv.path,
           "duplicate pipeline id '" + out.id + "' (first at line " + std::to_string(it->second) +
               ")");
    ids.emplace(out.id, idv.mark.line + 1);

    const Entry* source = find(fields, "source");
    if (!source) fail(p.mark, p.path, "missing required key 'source'");
    out.source = load_connector(child(p, *source), Role::source);

    if (const Entry* e = find(fields, "processors")) {
      Val list = child(p, *e);
      if (!empty(list)) {
        if (!list.node.IsSequence())
          fail(list.mark, list.path, "expected a list of processors, got " + describe(list.node));
        for (size_t i = 0; i < list.node.size(); ++i)
          out.processors.push_back(load_processor(item(list, list.node[i], i)));
      }
    }

    const Entry* destination = find(fields, "destination");
    const Entry* destinations = find(fields, "destinations");
    if (destination && destinations)
      fail(destinations->key_node.Mark(), join(p.path, "destinations"),
           "both 'destination' and 'destinations' are set; keep one (destinations: [...] feeds "
           "several destinations from one source)");
    if (!destination && !destinations)
      fail(p.mark, p.path, "missing required key 'destination' (or 'destinations')");
    if (destination) {
      out.destination = load_connector(child(p, *destination), Role::destination);
      check_templates(out, out.destination, {});
      check_table_routing(out, out.destination);
    }

    if (const Entry* e = find(fields, "spool")) {
      Val v = child(p, *e);
      if (!v.node.IsMap()) fail(v.mark, v.path, "expected a map like {type: disk, path: DIR}");
      Settings settings = load_settings(kSpoolSettings, v);
      SpoolConfig spool;
      bind(kSpoolSettings, settings, v, &spool);
      if (spool.type == "disk" && spool.path.empty())
        fail(v.mark, v.path,
             "missing required setting 'path' (the segment directory of a disk spool)");
      if (spool.type == "redis" && spool.url.empty())
        fail(v.mark, v.path, "missing required setting 'url' (the Redis server of a redis spool)");
      for (std::string_view other : {std::string_view("path"), std::string_view("segment_size")})
        if (spool.type == "redis" && v.node[std::string(other)])
          fail(v.mark, join(v.path, other),
               fmt::format("'{}' is for a disk spool; a redis spool has url and key", other));
      for (std::string_view other : {std::string_view("url"), std::string_view("key")})
        if (spool.type == "disk" && v.node[std::string(other)])
          fail(v.mark, join(v.path, other),
               fmt::format("'{}' is for a redis spool; a disk spool has path", other));
      if (spool.type == "redis" && spool.key.empty()) spool.key = "sluice:spool:" + out.id;
      out.spool = std::move(spool);
    }

    // Always loaded: the defaults come from the batch table.
    const Entry* batch = find(fields, "batch");
    out.batch =
        load_batch(batch ? child(p, *batch) : Val{YAML::Node(), p.mark, join(p.path, "batch")});

    Settings pipeline_level(kPipelineSettings);
    for (const SettingSpec& spec : kPipelineSettings.specs)
      if (const Entry* e = find(fields, spec.name))
        pipeline_level.set(e->key, setting_value(spec, child(p, *e)));
    bind(kPipelineSettings, pipeline_level, p, &out);

    const Entry* dlq = find(fields, "dlq");
    if (out.on_error == OnError::dlq && !dlq)
      fail(p.mark, p.path, "missing required key 'dlq' (on_error is dlq)");
    if (dlq) {
      Val v = child(p, *dlq);
      if (out.on_error != OnError::dlq)
        fail(dlq->key_node.Mark(), v.path,
             "dlq is set but on_error is not dlq (add 'on_error: dlq')");
      out.dlq = load_connector(v, Role::destination);
    }
    if (destinations) load_destinations(child(p, *destinations), out);
    return out;
  }

  // `destinations: [{connector, settings, processors, on_error, dlq, name}, ...]`: each checked
  // like the single `destination` (its settings, templates, routing, its own dlq rule);
  // on_error and dlq default to the pipeline's.
  void load_destinations(const Val& list, PipelineConfig& out) {
    if (!list.node.IsSequence())
      fail(list.mark, list.path,
           "expected a list of destinations ([{connector: NAME, settings: {...}}, ...]), got " +
               describe(list.node));
    if (list.node.size() == 0) fail(list.mark, list.path, "expected at least one destination");
    std::map<std::string, int, std::less<>> names;  // name -> line, for duplicates
    std::optional<size_t> inherited_dlq;            // the destination using the pipeline's dlq
    for (size_t i = 0; i < list.node.size(); ++i) {
      Val v = item(list, list.node[i], i);
      auto fields =
          entries(v, {"connector", "settings", "processors", "on_error", "dlq", "name"}, false);
      DestinationConfig d;
      if (const Entry* e = find(fields, "processors")) {
        Val procs = child(v, *e);
        if (!empty(procs)) {
          if (!procs.node.IsSequence())
            fail(procs.mark, procs.path,
                 "expected a list of processors, got " + describe(procs.node));
          for (size_t j = 0; j < procs.node.size(); ++j)
            d.processors.push_back(load_processor(item(procs, procs.node[j], j)));
        }
      }
      // After the processors: the checks below point into the settings loaded last.
      d.connector = load_connector(v, Role::destination, true);
      check_templates(out, d.connector, d.processors);
      check_table_routing(out, d.connector);
      YAML::Mark name_mark = v.mark;
      std::string name_path = join(v.path, "name");
      if (const Entry* e = find(fields, "name")) {
        Val nv = child(v, *e);
        d.name = scalar(nv);
        name_mark = nv.mark;
        if (!valid_id(d.name))
          fail(nv.mark, nv.path,
               "invalid destination name " + quote_user_text(d.name) +
                   " (use letters, digits, '_', '.' and '-')");
      } else {
        d.name = d.connector.connector + "-" + std::to_string(i);
      }
      if (auto it = names.find(d.name); it != names.end())
        fail(name_mark, name_path,
             "duplicate destination name '" + d.name + "' (first at line " +
                 std::to_string(it->second) + "); give each destination its own `name`");
      names.emplace(d.name, name_mark.line + 1);
      d.on_error = out.on_error;
      if (const Entry* e = find(fields, "on_error")) {
        Val ov = child(v, *e);
        const SettingSpec* spec = find_setting(kPipelineSettings, "on_error");
        Settings lane(kPipelineSettings);
        lane.set("on_error", setting_value(*spec, ov));
        PipelineConfig tmp;
        bind(kPipelineSettings, lane, v, &tmp);
        d.on_error = tmp.on_error;
      }
      const Entry* dlq = find(fields, "dlq");
      if (dlq) {
        Val dv = child(v, *dlq);
        if (d.on_error != OnError::dlq)
          fail(dlq->key_node.Mark(), dv.path,
               "dlq is set but on_error is not dlq (add 'on_error: dlq' to this destination)");
        d.dlq = load_connector(dv, Role::destination);
      } else if (d.on_error == OnError::dlq) {
        if (!out.dlq)
          fail(v.mark, v.path,
               "missing required key 'dlq' (on_error is dlq; give this destination a dlq, or "
               "the pipeline one)");
        // Two writers of one dead-letter file or table would interleave or lock each other.
        if (inherited_dlq)
          fail(v.mark, v.path,
               "destinations[" + std::to_string(*inherited_dlq) +
                   "] already uses the pipeline's dlq; give this destination a dlq of its own");
        inherited_dlq = i;
        d.dlq = out.dlq;
      }
      out.destinations.push_back(std::move(d));
    }
    out.destination = out.destinations.front().connector;
  }

  // The metadata keys records of this pipeline may carry at the destination, or nullopt when the
  // source passes its input's metadata through (any key may be there).
  static std::optional<std::vector<std::string>> known_metadata(
      const PipelineConfig& p, const std::vector<ProcessorConfig>& extra) {
    if (p.source.spec->source_metadata.empty()) return std::nullopt;
    std::vector<std::string> keys(p.source.spec->source_metadata.begin(),
                                  p.source.spec->source_metadata.end());
    // A processor may add metadata (field.set's `field: metadata.tenant`, a rename to metadata.x).
    auto add = [&](std::string_view text) {
      if (text.starts_with("metadata.") && text.size() > 9) keys.emplace_back(text.substr(9));
    };
    std::vector<const ProcessorConfig*> all;
    for (const ProcessorConfig& proc : p.processors) all.push_back(&proc);
    for (const ProcessorConfig& proc : extra) all.push_back(&proc);
    for (const ProcessorConfig* proc : all)
      for (const auto& [name, value] : proc->settings.values()) {
        if (const auto* str = std::get_if<std::string>(&value)) add(*str);
        if (const auto* list = std::get_if<std::vector<std::string>>(&value))
          for (const std::string& item : *list) add(item);
        if (const auto* map = std::get_if<std::map<std::string, std::string>>(&value))
          for (const auto& [k, v] : *map) {
            add(k);
            add(v);
          }
      }
    return keys;
  }

  // Every placeholder of the destination's template settings must name a key the pipeline's
  // records carry: `{{tabel}}` is a typo, never a fallback table named "records".
  void check_templates(const PipelineConfig& p, const ConnectorConfig& d,
                       const std::vector<ProcessorConfig>& extra) const {
    const std::optional<std::vector<std::string>> known = known_metadata(p, extra);
    for (std::string_view name : d.spec->template_settings) {
      auto it = d.settings.values().find(name);
      if (it == d.settings.values().end()) continue;
      const auto* text = std::get_if<std::string>(&it->second);
      if (!text) continue;
      auto mark = marks_.find(name);
      const YAML::Mark& at = mark != marks_.end() ? mark->second : settings_mark_;
      const std::string path = join(settings_path_, name);
      auto parsed = RecordTemplate::parse(*text, name);
      if (!parsed) fail(at, path, parsed.error().message());
      if (!known) continue;
      for (std::string_view key : parsed.value().placeholders()) {
        bool ok = false;
        for (const std::string& k : *known) ok = ok || k == key;
        if (ok) continue;
        std::string list;
        for (const std::string& k : *known) list += (list.empty() ? "" : ", ") + k;
        fail(at, path,
             "unknown template key '{{" + std::string(key) + "}}': " + p.source.connector +
                 " records carry " + list +
                 " (a processor may add one: field.set with field: metadata.KEY)");
      }
    }
  }

  // Listed tables of the same name in two schemas (s1.t, s2.t) that the destination's default
  // `table: {{table}}` would write into one table, merging rows that share a key. Patterns and
  // "*" are resolved by the source at start; the destination refuses the same collision there.
  void check_table_routing(const PipelineConfig& p, const ConnectorConfig& d) const {
    auto tables = p.source.settings.values().find("tables");
    if (tables == p.source.settings.values().end() || p.source.spec->source_metadata.empty())
      return;
    const auto* list = std::get_if<std::vector<std::string>>(&tables->second);
    if (!list) return;
    bool table_is_template = false;
    for (std::string_view name : d.spec->template_settings) table_is_template |= name == "table";
    if (!table_is_template) return;
    auto table = d.settings.values().find("table");
    auto schema = d.settings.values().find("schema");
    auto text = [](const auto& it, const Settings& s) -> std::string {
      if (it == s.values().end()) return "";
      const auto* str = std::get_if<std::string>(&it->second);
      return str ? *str : "";
    };
    if (text(table, d.settings) != "{{table}}") return;
    if (text(schema, d.settings).find("{{schema}}") != std::string::npos) return;
    std::map<std::string, std::string, std::less<>> schema_of;  // bare name -> first "schema.t"
    for (const std::string& t : *list) {
      size_t dot = t.find('.');
      if (dot == std::string::npos || t.find('"') != std::string::npos ||
          t.find('*') != std::string::npos || t.find('%') != std::string::npos)
        continue;
      // Exact names only: whether `T` and `t` meet depends on the destination (the destination's
      // own check at start knows).
      std::string bare = t.substr(dot + 1);
      auto [it, fresh] = schema_of.try_emplace(bare, t);
      if (fresh) continue;
      auto mark = marks_.find("table");
      std::string separate =
          d.spec->template_settings.size() > 1
              ? "set `schema: \"{{schema}}\"` or `table: \"{{schema}}_{{table}}\"`"
              : "set `table: \"{{schema}}_{{table}}\"`";
      fail(mark != marks_.end() ? mark->second : settings_mark_, join(settings_path_, "table"),
           "source tables " + it->second + " and " + t + " would both be written to table " +
               quote_user_text(bare) + ", where rows sharing a key merge; " + separate +
               " on the " + d.connector +
               " destination to keep them apart, or name one table (table: NAME) to merge them "
               "on purpose");
    }
  }

  std::string known_connectors(Role role) const {
    std::string list;
    for (const auto& c : registry_.connectors()) {
      bool fits = role == Role::source ? c.make_source != nullptr : c.make_destination != nullptr;
      if (fits) list += (list.empty() ? "" : ", ") + std::string(c.name);
    }
    return list.empty() ? "none in this build" : list;
  }

  // `lane`: an entry of `destinations`, whose other keys its caller reads.
  ConnectorConfig load_connector(const Val& v, Role role, bool lane = false) const {
    ConnectorConfig out;
    auto fields =
        lane ? entries(v, {"connector", "settings", "processors", "on_error", "dlq", "name"}, false)
             : entries(v, {"connector", "settings"}, false);
    const Entry* name = find(fields, "connector");
    if (!name) fail(v.mark, v.path, "missing required key 'connector'");
    Val nv = child(v, *name);
    out.connector = scalar(nv);
    const char* role_name = role == Role::source ? "source" : "destination";
    out.spec = registry_.connector(out.connector);
    if (!out.spec)
      fail(nv.mark, nv.path,
           "unknown " + std::string(role_name) + " connector " + quote_user_text(out.connector) +
               " (known: " + known_connectors(role) + ")");
    bool fits = role == Role::source ? out.spec->make_source != nullptr
                                     : out.spec->make_destination != nullptr;
    if (!fits)
      fail(nv.mark, nv.path,
           "connector '" + out.connector + "' cannot be a " + role_name + " (" + role_name +
               " connectors: " + known_connectors(role) + ")");
    auto spec = role == Role::source ? out.spec->source_settings : out.spec->destination_settings;
    out.settings = load_settings(spec, settings_val(v, fields));
    return out;
  }

  ProcessorConfig load_processor(const Val& v) const {
    ProcessorConfig out;
    auto fields = entries(v, {"type", "settings"}, false);
    const Entry* type = find(fields, "type");
    if (!type) fail(v.mark, v.path, "missing required key 'type'");
    Val tv = child(v, *type);
    out.type = scalar(tv);
    out.spec = registry_.processor(out.type);
    if (!out.spec) {
      std::string list;
      for (const auto& p : registry_.processors())
        list += (list.empty() ? "" : ", ") + std::string(p.name);
      fail(tv.mark, tv.path,
           "unknown processor " + quote_user_text(out.type) +
               " (known: " + (list.empty() ? "none in this build" : list) + ")");
    }
    out.settings = load_settings(out.spec->settings, settings_val(v, fields));
    return out;
  }

  // The `settings` map of a connector or processor; when absent, errors point at the parent.
  static Val settings_val(const Val& parent, const std::vector<Entry>& fields) {
    if (const Entry* e = find(fields, "settings")) return child(parent, *e);
    return Val{YAML::Node(), parent.mark, join(parent.path, "settings")};
  }

  BatchConfig load_batch(const Val& b) const {
    BatchConfig out;
    Settings batch(kBatchSettings);
    load_section(b, kBatchSettings, "", batch);
    out.max_records_set = batch.has("max_records");
    bind(kBatchSettings, batch, b, &out);
    return out;
  }

  // The keys of one map of pipeline-level settings (`section` names them in `table`, "" for all).
  void load_section(const Val& v, std::span<const SettingSpec> table, std::string_view section,
                    Settings& out) const {
    std::vector<std::string_view> keys = section_keys(table, section);
    for (const Entry& e : entries(v, keys, true)) {
      std::string name = section.empty() ? e.key : std::string(section) + "." + e.key;
      out.set(name, setting_value(*find_setting(table, name), child(v, e)));
    }
  }

  // Fills the bound fields; values were validated while loading, so this fails only on a bad table.
  template <typename Options, size_t N>
  void bind(const SettingsTable<Options, N>& table, const Settings& settings, const Val& at,
            Options* out) const {
    if (Status st = bind_settings_into(table, settings, out); !st.ok())
      fail(at.mark, at.path, st.error().message());
  }

  Settings load_settings(std::span<const SettingSpec> spec, const Val& v) const {
    Settings out(spec);
    marks_.clear();
    settings_mark_ = v.mark;
    settings_path_ = v.path;
    std::map<std::string, int, std::less<>> seen;  // name -> line, for "given twice"
    if (!empty(v)) collect(spec, v, "", out, seen, 0);
    resolve_paths(out);
    for (const auto& s : spec) {
      if (s.name.ends_with(".*") || out.has(s.name)) continue;
      if (!s.default_value.empty()) {
        SettingValue value;
        if (auto err = parse_setting_scalar(s, s.default_value, &value))
          fail(v.mark, v.path,
               "built-in default of '" + std::string(s.name) + "' is invalid: " + *err);
        out.set(std::string(s.name), std::move(value));
      } else if (s.required) {
        fail(v.mark, v.path, "missing required setting '" + std::string(s.name) + "'");
      }
    }
    return out;
  }

  // Relative path settings written in the file resolve against the file's folder (defaults are
  // applied after this, and stay relative to the working directory).
  void resolve_paths(Settings& settings) const {
    if (base_dir_.empty()) return;
    for (const SettingSpec& s : settings.spec()) {
      if (!s.path) continue;
      auto it = settings.values().find(s.name);
      if (it == settings.values().end()) continue;
      const auto* text = std::get_if<std::string>(&it->second);
      if (!text || text->empty() || text->front() == '/') continue;
      settings.set(std::string(s.name), base_dir_ + "/" + *text);
    }
  }

  // Whether `name` is a proper prefix of some setting, so a nested map under it is meaningful.
  static bool has_children(std::span<const SettingSpec> spec, std::string_view name) {
    std::string lead = std::string(name) + ".";
    for (const auto& s : spec) {
      if (s.name.starts_with(lead)) return true;
      if (s.name.ends_with(".*") && lead.starts_with(s.name.substr(0, s.name.size() - 1)))
        return true;
    }
    return false;
  }

  [[noreturn]] void unknown_setting(std::span<const SettingSpec> spec, const YAML::Mark& mark,
                                    const std::string& path, const std::string& name) const {
    if (spec.empty()) fail(mark, path, "unknown setting '" + name + "' (this takes no settings)");
    std::string known;
    for (const auto& s : spec) known += (known.empty() ? "" : ", ") + std::string(s.name);
    fail(mark, path, "unknown setting '" + name + "' (known: " + known + ")");
  }

  // Walks a settings map; nested maps are dotted names (`snapshot: {mode: x}` is `snapshot.mode:
  // x`) unless the spec declares that name as a map setting.
  void collect(std::span<const SettingSpec> spec, const Val& map, const std::string& prefix,
               Settings& out, std::map<std::string, int, std::less<>>& seen, int depth) const {
    for (const Entry& e : entries(map, {}, false)) {
      std::string name = prefix.empty() ? e.key : prefix + "." + e.key;
      Val v = child(map, e);
      const SettingSpec* s = find_setting(spec, name);
      bool exact = s && s->name == name;
      if (v.node.IsMap() && !exact && !(s && is_map_type(s->type))) {
        if (!has_children(spec, name)) unknown_setting(spec, e.key_node.Mark(), v.path, name);
        if (depth >= kMaxSettingsDepth) fail(v.mark, v.path, "settings nested too deeply");
        collect(spec, v, name, out, seen, depth + 1);
        continue;
      }
      if (!s && empty(v) && has_children(spec, name))
        continue;  // `snapshot:` with its keys commented out
      if (!s) unknown_setting(spec, e.key_node.Mark(), v.path, name);
      if (auto it = seen.find(name); it != seen.end())
        fail(e.key_node.Mark(), v.path,
             "setting '" + name + "' is given twice (first at line " + std::to_string(it->second) +
                 ")");
      seen.emplace(name, e.key_node.Mark().line + 1);
      marks_[name] = v.mark;
      out.set(name, setting_value(*s, v));
    }
  }

  // A list or map value through the spec's `checked_by` (scalars get it while being parsed).
  SettingValue checked(const SettingSpec& spec, const Val& v, SettingValue value) const {
    if (auto err = check_setting_value(spec, value)) fail(v.mark, v.path, *err);
    return value;
  }

  SettingValue setting_value(const SettingSpec& spec, const Val& v) const {
    const YAML::Node& n = v.node;
    if (n.IsScalar()) {
      // A single string is a one-element list (never split on commas: values may contain them).
      if (spec.type == SettingType::string_list)
        return checked(spec, v, std::vector<std::string>{scalar(v)});
      return typed_scalar(v, spec);
    }
    if (n.IsSequence() && spec.type == SettingType::string_list) {
      std::vector<std::string> list;
      for (size_t i = 0; i < n.size(); ++i) list.push_back(scalar(item(v, n[i], i)));
      return checked(spec, v, std::move(list));
    }
    if (n.IsMap() && is_map_type(spec.type)) {
      const SettingSpec number{"", SettingType::number, "", false, "", {}, spec.secret};
      std::map<std::string, double> numbers;
      std::map<std::string, std::string> strings;
      for (const Entry& e : entries(v, {}, false)) {
        Val ev = child(v, e);
        if (spec.type == SettingType::number_map)
          numbers[e.key] = std::get<double>(typed_scalar(ev, number));
        else strings[e.key] = scalar(ev);
      }
      if (spec.type == SettingType::number_map) return checked(spec, v, std::move(numbers));
      return checked(spec, v, std::move(strings));
    }
    fail(v.mark, v.path,
         "expected " + describe_type(spec) + ", got " + (n.IsScalar() ? "a value" : describe(n)));
  }

  // Where each setting of the connector or processor loaded last was written (for checks that
  // run after loading: templates).
  mutable std::map<std::string, YAML::Mark, std::less<>> marks_;
  mutable YAML::Mark settings_mark_;
  mutable std::string settings_path_;

  std::string file_;
  const Registry& registry_;
  std::string base_dir_;
};

bool valid_env_name(std::string_view name) {
  if (name.empty() || (name.front() >= '0' && name.front() <= '9')) return false;
  for (char c : name) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::span<const SettingSpec> file_settings() noexcept { return kFileSettings; }
std::span<const SettingSpec> pipeline_settings() noexcept { return kPipelineSettings; }
std::span<const SettingSpec> spool_settings() noexcept { return kSpoolSettings; }
std::span<const SettingSpec> batch_settings() noexcept { return kBatchSettings; }

// A malformed reference ("${", "${}", "${1X}") fails with an empty `missing`.
bool interpolate_env(std::string_view in, std::string* out, std::string* missing) {
  out->clear();
  missing->clear();
  for (size_t i = 0; i < in.size();) {
    if (in[i] != '$' || i + 1 == in.size() || (in[i + 1] != '$' && in[i + 1] != '{')) {
      *out += in[i++];
      continue;
    }
    if (in[i + 1] == '$') {
      *out += '$';
      i += 2;
      continue;
    }
    // Find the closing brace, allowing ${...} nested in a default.
    size_t j = i + 2;
    int depth = 1;
    while (j < in.size()) {
      if (in[j] == '$' && j + 1 < in.size() && (in[j + 1] == '{' || in[j + 1] == '$')) {
        if (in[j + 1] == '{') ++depth;
        j += 2;
        continue;
      }
      if (in[j] == '}' && --depth == 0) break;
      ++j;
    }
    if (j >= in.size()) return false;
    std::string_view body = in.substr(i + 2, j - i - 2);
    size_t sep = body.find(":-");
    std::string name(body.substr(0, sep));
    if (!valid_env_name(name)) return false;
    const char* value = std::getenv(name.c_str());
    if (sep == std::string_view::npos) {
      if (!value) {
        *missing = name;
        return false;
      }
      *out += value;
    } else if (value && *value) {
      *out += value;
    } else {
      std::string def;
      if (!interpolate_env(body.substr(sep + 2), &def, missing)) return false;
      *out += def;
    }
    i = j + 1;
  }
  return true;
}

namespace {

// A key that names a credential whether or not its declaration says secret (pass-through
// library properties: rdkafka.sasl.password, rdkafka.ssl.key.password, …).
bool credential_key(std::string_view key) {
  return key.ends_with("password") || key.find("secret") != std::string_view::npos;
}

void register_connector_secrets(const Settings& settings) {
  for (const auto& [key, value] : settings.values()) {
    const std::string* text = std::get_if<std::string>(&value);
    if (!text) continue;
    const SettingSpec* spec = find_setting(settings.spec(), key);
    if ((spec && spec->secret) || credential_key(key)) register_secret(*text);
    register_url_secret(*text);
  }
}

}  // namespace

void register_config_secrets(const Config& config) {
  for (const PipelineConfig& p : config.pipelines) {
    register_connector_secrets(p.source.settings);
    register_connector_secrets(p.destination.settings);
    if (p.dlq) register_connector_secrets(p.dlq->settings);
    for (const DestinationConfig& d : p.destinations) {
      register_connector_secrets(d.connector.settings);
      if (d.dlq) register_connector_secrets(d.dlq->settings);
    }
  }
}

Config load_config_string(std::string_view yaml, const std::string& name,
                          const Registry& registry) {
  Config config = Loader(name, registry).load(yaml);
  register_config_secrets(config);
  return config;
}

namespace {

Config load_one_config_file(const std::string& path, const Registry& registry) {
  struct Close {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, Close> f(std::fopen(path.c_str(), "rb"));
  if (!f) throw ConfigError(path + ": cannot read: " + std::strerror(errno));
  std::string text;
  char buf[65536];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) text.append(buf, n);
  if (std::ferror(f.get())) throw ConfigError(path + ": cannot read: " + std::strerror(errno));
  // Relative paths in the file resolve against its folder, wherever sluice runs from.
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  std::filesystem::path absolute = std::filesystem::absolute(dir, ec);
  if (!ec) dir = absolute.lexically_normal().string();
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return Loader(path, registry, dir).load(text);
}

// Moves file-level key `key` of `from` into `to`.
void take_file_key(const std::string& key, Config& from, Config& to) {
  if (key == "checkpoints.path") to.checkpoints_path = std::move(from.checkpoints_path);
  else if (key == "http.listen") {
    to.http_listen = std::move(from.http_listen);
    to.http_listen_set = true;
  } else if (key == "http.enabled") to.http_enabled = from.http_enabled;
  else if (key == "http.token") to.http_token = std::move(from.http_token);
  else if (key == "http.token_file") {
    to.http_token_file = std::move(from.http_token_file);
    to.http_token = std::move(from.http_token);  // read from the file by the loader
  } else if (key == "http.allow_unauthenticated")
    to.http_allow_unauthenticated = from.http_allow_unauthenticated;
  to.file_keys_set.push_back(key);
}

}  // namespace

std::vector<std::string> pipeline_files_in(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    if (!name.ends_with(".yaml") && !name.ends_with(".yml")) continue;
    std::error_code fec;
    if (!e.is_regular_file(fec)) continue;
    files.push_back(e.path().string());
  }
  if (ec) throw ConfigError(dir + ": cannot list the directory: " + ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

Config load_config_file(const std::string& path, const Registry& registry) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return load_one_config_file(path, registry);
  const std::vector<std::string> files = pipeline_files_in(path);
  if (files.empty())
    throw ConfigError(path +
                      ": no pipeline files in this directory: put one or more *.yaml files in it");
  Config merged;
  std::map<std::string, std::string> pipeline_file;  // id -> the file defining it
  std::map<std::string, std::string> key_file;       // file-level key -> the file setting it
  for (size_t i = 0; i < files.size(); ++i) {
    Config c = load_one_config_file(files[i], registry);
    for (const PipelineConfig& pc : c.pipelines)
      if (auto [it, fresh] = pipeline_file.emplace(pc.id, files[i]); !fresh)
        throw ConfigError(files[i] + ": pipeline id '" + pc.id + "' is also defined in " +
                          it->second + ": give each pipeline of the directory its own id");
    if (i == 0) {
      merged = std::move(c);
      for (const std::string& k : merged.file_keys_set) key_file[k] = files[i];
      continue;
    }
    for (PipelineConfig& pc : c.pipelines) merged.pipelines.push_back(std::move(pc));
    for (const std::string& k : c.file_keys_set) {
      if (auto it = key_file.find(k); it != key_file.end())
        throw ConfigError(files[i] + ": " + k + " is also set in " + it->second +
                          ": set the file-level keys (checkpoints, http) in one file of the "
                          "directory");
      key_file[k] = files[i];
      take_file_key(k, c, merged);
    }
  }
  merged.file = path;
  return merged;
}

}  // namespace sluice
