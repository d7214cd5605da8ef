// `sluice status [URL]` and `sluice pipelines pause|resume|restart ID [--url URL]`: thin clients
// of a running sluice's HTTP API (/api/v1, docs/api.md). Exit codes (docs/api.md#cli):
//   0 done (status: no pipeline failed)     1 status: a pipeline failed; pipelines: the API refused
//   2 usage (a bad URL)                     3 no answer from URL (not running, wrong address)
//   4 unauthorized (token missing/wrong)    5 no such pipeline
#include <fmt/format.h>
#include <httplib.h>
#include <simdjson.h>

#include <cstdlib>

#include "cli/commands.h"
#include "cli/logging.h"

namespace sluice {

namespace {

constexpr int kExitRefused = 1;
constexpr int kExitUsage = 2;
constexpr int kExitUnreachable = 3;
constexpr int kExitUnauthorized = 4;
constexpr int kExitUnknownPipeline = 5;

struct Target {
  std::string scheme_host_port;  // http://127.0.0.1:8080
  std::string base_path;         // "" or "/prefix"
};

std::optional<Target> parse_url(std::string url) {
  if (url.find("://") == std::string::npos) url = "http://" + url;
  if (!url.starts_with("http://") && !url.starts_with("https://")) return std::nullopt;
  const size_t host_start = url.find("://") + 3;
  const size_t slash = url.find('/', host_start);
  Target t;
  t.scheme_host_port = url.substr(0, slash);
  if (t.scheme_host_port.size() <= host_start) return std::nullopt;
  if (slash != std::string::npos) t.base_path = url.substr(slash);
  while (!t.base_path.empty() && t.base_path.back() == '/') t.base_path.pop_back();
  return t;
}

struct Answer {
  int exit_code = 0;
  int status = 0;
  std::string body;
};

// One call; a transport failure or an error answer is printed (one line) and mapped to the exit
// code.
Answer call(const std::string& url, const std::string& method, const std::string& path,
            const std::string& token) {
  Answer a;
  auto target = parse_url(url);
  if (!target) {
    cli_error(fmt::format("'{}' is not an http:// URL (e.g. http://127.0.0.1:8080)", url));
    a.exit_code = kExitUsage;
    return a;
  }
  httplib::Client client(target->scheme_host_port);
  client.set_connection_timeout(5, 0);
  // pause and restart answer once the pipeline has drained (up to a minute).
  client.set_read_timeout(90, 0);
  httplib::Headers headers;
  if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
  const std::string full = target->base_path + path;
  httplib::Result r = method == "GET" ? client.Get(full, headers)
                                      : client.Post(full, headers, "", "application/json");
  if (!r) {
    cli_error(fmt::format("no answer from {}: {} (is sluice running with http.listen there?)",
                          target->scheme_host_port, httplib::to_string(r.error())));
    a.exit_code = kExitUnreachable;
    return a;
  }
  a.status = r->status;
  a.body = r->body;
  if (r->status == 200 || r->status == 202) return a;
  std::string message = r->body;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::string_view text;
  if (parser.parse(r->body).get(doc) == simdjson::SUCCESS &&
      doc["error"].get_string().get(text) == simdjson::SUCCESS)
    message = std::string(text);
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  if (r->status == 401) {
    cli_error(
        fmt::format("{} asks for a token: pass --token TOKEN or set SLUICE_HTTP_TOKEN (the "
                    "pipeline file's http.token)",
                    target->scheme_host_port));
    a.exit_code = kExitUnauthorized;
  } else if (r->status == 404 && message.starts_with("no pipeline")) {
    cli_error(message);
    a.exit_code = kExitUnknownPipeline;
  } else if (r->status == 404) {
    cli_error(fmt::format("{} has no {} (is it a sluice with the /api/v1 API?)",
                          target->scheme_host_port, path));
    a.exit_code = kExitUnreachable;
  } else {
    cli_error(fmt::format("{} ({})", message, r->status));
    a.exit_code = kExitRefused;
  }
  return a;
}

std::string token_or_env(const std::string& token) {
  if (!token.empty()) return token;
  const char* env = std::getenv("SLUICE_HTTP_TOKEN");
  return env ? env : "";
}

std::string str(simdjson::dom::element e, std::string_view key) {
  std::string_view v;
  if (e[key].get_string().get(v) == simdjson::SUCCESS) return std::string(v);
  return "-";
}

std::string num(simdjson::dom::element e, std::string_view key) {
  double d = 0;
  if (e[key].get_double().get(d) == simdjson::SUCCESS) {
    if (d == static_cast<double>(static_cast<int64_t>(d))) return std::to_string(int64_t(d));
    return fmt::format("{:.1f}", d);
  }
  return "-";
}

std::string pipeline_line(simdjson::dom::element p) {
  std::string line = fmt::format("{:<20} {:<9} {} → {}", str(p, "id"), str(p, "state"),
                                 str(p, "source"), str(p, "destination"));
  simdjson::dom::element records, positions, errors;
  if (p["records"].get(records) == simdjson::SUCCESS)
    line += fmt::format("  read {} written {}", num(records, "read"), num(records, "written"));
  line += fmt::format("  {} rec/s  lag {} s", num(p, "records_per_second"), num(p, "lag_seconds"));
  if (p["positions"].get(positions) == simdjson::SUCCESS)
    line += fmt::format("  checkpoint {}", str(positions, "checkpointed"));
  if (p["errors"].get(errors) == simdjson::SUCCESS) {
    std::string e = str(errors, "error");
    if (e != "-") line += "  error: " + e;
  }
  return line;
}

}  // namespace

int status_command(const std::string& url, bool json, const std::string& token) {
  Answer a = call(url, "GET", "/api/v1/pipelines", token_or_env(token));
  if (a.exit_code != 0) return a.exit_code;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::array pipelines;
  if (parser.parse(a.body).get(doc) != simdjson::SUCCESS ||
      doc["pipelines"].get_array().get(pipelines) != simdjson::SUCCESS) {
    cli_error(fmt::format("{} did not answer a pipeline list (is it sluice?)", url));
    return kExitUnreachable;
  }
  bool failed = false;
  std::string text;
  for (simdjson::dom::element p : pipelines) {
    failed = failed || str(p, "state") == "failed";
    text += pipeline_line(p) + "\n";
  }
  if (json) {
    std::string body = a.body;
    if (!body.empty() && body.back() != '\n') body += '\n';
    write_out(stdout, body);
  } else {
    write_out(stdout, text.empty() ? "no pipelines\n" : text);
  }
  return failed ? kExitRefused : 0;
}

int pipelines_command(const std::string& action, const std::string& id, const std::string& url,
                      bool json, const std::string& token) {
  if (action != "pause" && action != "resume" && action != "restart") {
    cli_error(fmt::format("unknown action '{}' (pause, resume, restart)", action));
    return kExitUsage;
  }
  Answer a =
      call(url, "POST", fmt::format("/api/v1/pipelines/{}/{}", id, action), token_or_env(token));
  if (a.exit_code != 0) return a.exit_code;
  if (json) {
    std::string body = a.body;
    if (!body.empty() && body.back() != '\n') body += '\n';
    write_out(stdout, body);
    return 0;
  }
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::string line = fmt::format("pipeline {}: {}", id,
                                 action == "pause"    ? "paused"
                                 : action == "resume" ? "resumed"
                                                      : "restarted");
  if (parser.parse(a.body).get(doc) == simdjson::SUCCESS) {
    simdjson::dom::element positions;
    if (doc["positions"].get(positions) == simdjson::SUCCESS)
      line += fmt::format(" (checkpoint {})", str(positions, "checkpointed"));
    const std::string retains = str(doc, "source_retains");
    if (retains != "-") line += "; its source's server retains: " + retains;
  }
  write_out(stdout, line + "\n");
  return 0;
}

}  // namespace sluice
