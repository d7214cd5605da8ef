#include "server/api.h"

#include <fmt/format.h>
#include <httplib.h>
#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <charconv>
#include <cmath>
#include <optional>

#include "openapi_json.h"
#include "sluice/json.h"
#include "sluice/secrets.h"

namespace sluice {

namespace {

constexpr std::string_view kId = "([A-Za-z0-9_.-]+)";

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) out += fmt::format("\\u{:04x}", c);
        else out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  return fmt::format("{:.3f}", v);
}

const char* state_name(const PipelineStatus& s) {
  if (s.paused) return "paused";
  if (!s.started) return "created";
  switch (s.state) {
    case PipelineState::starting: return "starting";
    case PipelineState::running: return "running";
    case PipelineState::stopping: return "stopping";
    case PipelineState::stopped: return "stopped";
    case PipelineState::failed: return "failed";
  }
  return "unknown";
}

int http_status(Errc code) {
  switch (code) {
    case Errc::not_found: return 404;
    case Errc::conflict: return 409;
    case Errc::invalid_argument:
    case Errc::config:
    case Errc::data: return 400;
    case Errc::unsupported: return 501;
    case Errc::timeout: return 504;
    default: return 500;
  }
}

void reply(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(redact(body) + "\n", "application/json");
}

void reply_error(httplib::Response& res, int status, std::string_view message) {
  reply(res, status, fmt::format("{{\"error\":{}}}", json_string(message)));
}

void reply_error(httplib::Response& res, const Error& e) {
  reply_error(res, http_status(e.code()), e.message());
}

// Logs a mutating call and its outcome (the answer's status).
void log_call(const httplib::Request& req, const httplib::Response& res) {
  const std::string outcome =
      res.status < 300 ? "ok" : fmt::format("{} {}", res.status, res.body.substr(0, 300));
  spdlog::info("api: {} {} from {}: {}", req.method, req.path, req.remote_addr,
               redact(outcome.back() == '\n' ? outcome.substr(0, outcome.size() - 1) : outcome));
}

std::optional<double> metric(const Engine& engine, std::string_view name, MetricLabels match) {
  const auto v = engine.metrics().values(name, match);
  if (v.empty()) return std::nullopt;
  return metric_as_double(v.front().second);
}

std::string snapshot_json(const Engine& engine, const PipelineStatus& s) {
  const MetricLabels pipeline{{"pipeline", s.id}};
  std::string phase = "null";
  for (const char* p : {"snapshot", "stream", "done"}) {
    MetricLabels m = pipeline;
    m.emplace_back("phase", p);
    if (auto v = metric(engine, "sluice_source_phase", m); v && *v == 1) phase = json_string(p);
  }
  MetricLabels done = pipeline, total = pipeline;
  done.emplace_back("kind", "done");
  total.emplace_back("kind", "total");
  const double d = metric(engine, "sluice_snapshot_rows", done).value_or(-1);
  const double t = metric(engine, "sluice_snapshot_rows", total).value_or(-1);
  std::string tables = "[";
  for (size_t i = 0; i < s.snapshot_tables.size(); ++i)
    tables += fmt::format("{}{{\"table\":{},\"rows\":{}}}", i ? "," : "",
                          json_string(s.snapshot_tables[i].first), s.snapshot_tables[i].second);
  tables += "]";
  return fmt::format("{{\"phase\":{},\"rows_done\":{},\"rows_total\":{},\"tables\":{}}}", phase,
                     d < 0 ? std::string("null") : fmt::format("{:.0f}", d),
                     t < 0 ? std::string("null") : fmt::format("{:.0f}", t), tables);
}

std::string stalls_json(const PipelineStatus& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.stalls.size(); ++i)
    out += fmt::format("{}{{\"side\":{},\"pending\":{},\"seconds\":{}}}", i ? "," : "",
                       json_string(s.stalls[i].side), json_string(s.stalls[i].pending),
                       json_number(s.stalls[i].seconds));
  return out + "]";
}

std::optional<PipelineStatus> find_status(const Engine& engine, const std::string& id,
                                          httplib::Response& res) {
  auto s = engine.status(id);
  if (!s) reply_error(res, 404, fmt::format("no pipeline '{}'", id));
  return s;
}

std::optional<size_t> parse_index(const std::string& text) {
  size_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size()) return std::nullopt;
  return v;
}

// Tables of a snapshot request: {"tables": ["schema.table", ...]} (or ?tables=a,b).
Result<std::vector<std::string>> snapshot_tables(const httplib::Request& req) {
  std::vector<std::string> tables;
  if (req.has_param("tables")) {
    std::string list = req.get_param_value("tables");
    size_t start = 0;
    while (start <= list.size()) {
      size_t comma = list.find(',', start);
      if (comma == std::string::npos) comma = list.size();
      if (comma > start) tables.push_back(list.substr(start, comma - start));
      start = comma + 1;
    }
  } else if (!req.body.empty()) {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (parser.parse(req.body).get(doc) != simdjson::SUCCESS)
      return Error(Errc::invalid_argument,
                   "the body is not JSON: send {\"tables\": [\"schema.table\", ...]}");
    simdjson::dom::array list;
    if (doc["tables"].get_array().get(list) != simdjson::SUCCESS)
      return Error(Errc::invalid_argument,
                   "the body has no \"tables\" list: send {\"tables\": [\"schema.table\", ...]}");
    for (simdjson::dom::element t : list) {
      std::string_view name;
      if (t.get_string().get(name) != simdjson::SUCCESS)
        return Error(Errc::invalid_argument, "\"tables\" must be a list of strings");
      tables.emplace_back(name);
    }
  }
  if (tables.empty())
    return Error(Errc::invalid_argument,
                 "name the tables to snapshot: {\"tables\": [\"schema.table\", ...]}");
  return tables;
}

std::string replay_json(const std::string& id, const DeadLetterReplay& r, bool was_running) {
  std::string errors = "[";
  for (size_t i = 0; i < r.errors.size(); ++i) errors += (i ? "," : "") + json_string(r.errors[i]);
  errors += "]";
  return fmt::format(
      "{{\"pipeline\":{},\"replayed\":{},\"failed\":{},\"errors\":{},\"paused_meanwhile\":{}}}",
      json_string(id), r.replayed, r.failed, errors, was_running ? "true" : "false");
}

}  // namespace

std::string_view openapi_json() { return kOpenApiJson; }

std::string position_json(std::string_view position) {
  if (position.empty()) return "null";
  for (unsigned char c : position)
    if (c < 0x20 || c > 0x7e) return json_string("b64:" + base64_encode(position));
  return json_string(position);
}

std::string pipeline_json(const Engine& engine, const PipelineStatus& s) {
  const MetricLabels source{{"pipeline", s.id}, {"connector", s.source}};
  const auto lag = metric(engine, "sluice_source_lag_seconds", source);
  const auto spool_records = metric(engine, "sluice_spool_records", {{"pipeline", s.id}});
  std::string error = s.error ? json_string(s.error->message()) : "null";
  std::string last_error = s.last_error.empty() ? "null" : json_string(s.last_error);
  return fmt::format(
      "{{\"id\":{},\"state\":{},\"source\":{},\"destination\":{},\"runs\":{},"
      "\"positions\":{{\"read\":{},\"written\":{},\"checkpointed\":{}}},"
      "\"records\":{{\"read\":{},\"written\":{},\"filtered\":{},\"dead_lettered\":{},"
      "\"in_flight\":{}}},"
      "\"records_per_second\":{},\"lag_seconds\":{},"
      "\"errors\":{{\"write_errors\":{},\"write_retries\":{},\"error\":{},\"last_error\":{}}},"
      "\"snapshot\":{},\"spool_records\":{},\"idle\":{},\"stalls\":{}}}",
      json_string(s.id), json_string(state_name(s)), json_string(s.source),
      json_string(s.destination), s.runs, position_json(s.read_position),
      position_json(s.written_position), position_json(s.checkpoint), s.records_read,
      s.records_written, s.records_filtered, s.records_dead_lettered, s.records_in_flight,
      json_number(s.records_per_second), lag && *lag >= 0 ? json_number(*lag) : "null",
      s.write_errors, s.write_retries, error, last_error, snapshot_json(engine, s),
      spool_records ? fmt::format("{:.0f}", *spool_records) : "null",
      s.idle_since ? "true" : "false", stalls_json(s));
}

std::vector<ApiRoute> api_routes() {
  return {
      {"GET", "/api/v1/openapi.json"},
      {"GET", "/api/v1/pipelines"},
      {"GET", "/api/v1/pipelines/{id}"},
      {"POST", "/api/v1/pipelines/{id}/pause"},
      {"POST", "/api/v1/pipelines/{id}/resume"},
      {"POST", "/api/v1/pipelines/{id}/restart"},
      {"POST", "/api/v1/pipelines/{id}/snapshot"},
      {"GET", "/api/v1/pipelines/{id}/dlq"},
      {"DELETE", "/api/v1/pipelines/{id}/dlq"},
      {"POST", "/api/v1/pipelines/{id}/dlq/replay"},
      {"DELETE", "/api/v1/pipelines/{id}/dlq/{index}"},
      {"POST", "/api/v1/pipelines/{id}/dlq/{index}/replay"},
      {"POST", "/api/v1/reload"},
  };
}

ApiRouter::Route::Route(std::string m, const std::string& pattern, Handler h)
    : method(std::move(m)), regex(pattern), handler(std::move(h)) {}

void ApiRouter::add(httplib::Server& server, std::string method, const std::string& pattern,
                    Handler handler) {
  routes_.emplace_back(method, pattern, handler);
  auto h = [handler](const httplib::Request& req, httplib::Response& res) {
    handler(req, req.matches, res);
  };
  if (method == "GET") server.Get(pattern, h);
  else if (method == "POST") server.Post(pattern, h);
  else server.Delete(pattern, h);
}

bool ApiRouter::dispatch(const httplib::Request& req, httplib::Response& res) const {
  for (const Route& r : routes_) {
    httplib::Match m;
    if (r.method == req.method && std::regex_match(req.path, m, r.regex)) {
      r.handler(req, m, res);
      return true;
    }
  }
  return false;
}

std::shared_ptr<ApiRouter> register_api_routes(httplib::Server& server, Engine& engine) {
  auto router = std::make_shared<ApiRouter>();
  const std::string p = std::string("/api/v1/pipelines/") + std::string(kId);
  Engine* eng = &engine;

  router->add(server, "GET", "/api/v1/openapi.json",
              [](const httplib::Request&, const httplib::Match&, httplib::Response& res) {
                res.set_content(kOpenApiJson, "application/json");
              });

  router->add(server, "GET", "/api/v1/pipelines",
              [eng](const httplib::Request&, const httplib::Match&, httplib::Response& res) {
                std::string body = "{\"pipelines\":[";
                bool first = true;
                for (const PipelineStatus& s : eng->list()) {
                  body += (first ? "" : ",") + pipeline_json(*eng, s);
                  first = false;
                }
                reply(res, 200, body + "]}");
              });

  router->add(
      server, "GET", p,
      [eng](const httplib::Request&, const httplib::Match& m, httplib::Response& res) {
        const std::string id = m[1];
        auto s = find_status(*eng, id, res);
        if (!s) return;
        std::string body = pipeline_json(*eng, *s);
        const PipelineControl* c = eng->control(id);
        body.pop_back();  // the closing brace
        body += ",\"config\":" + (c ? c->config_json : std::string("{}"));
        body += ",\"dlq\":" +
                std::string(c && c->dead_letters
                                ? "{\"browsable\":true}"
                                : fmt::format("{{\"browsable\":false,"
                                              "\"why\":{}}}",
                                              json_string(c ? c->dead_letters_unsupported : "")));
        reply(res, 200, body + "}");
      });

  // pause / resume / restart answer the pipeline as it is afterwards.
  auto control_call = [eng](const std::string& verb) {
    return [eng, verb](const httplib::Request& req, const httplib::Match& m,
                       httplib::Response& res) {
      const std::string id = m[1];
      Status st = verb == "pause"    ? eng->pause(id)
                  : verb == "resume" ? eng->resume(id)
                                     : eng->restart(id);
      if (!st.ok()) {
        reply_error(res, st.error());
        log_call(req, res);
        return;
      }
      auto s = eng->status(id);
      std::string body = s ? pipeline_json(*eng, *s) : "{}";
      if (verb == "pause") {
        const PipelineControl* c = eng->control(id);
        std::string retains = c && c->retained_log ? c->retained_log() : "";
        body.pop_back();
        body += ",\"source_retains\":" + (retains.empty() ? "null" : json_string(retains)) + "}";
      }
      reply(res, 200, body);
      log_call(req, res);
    };
  };
  router->add(server, "POST", p + "/pause", control_call("pause"));
  router->add(server, "POST", p + "/resume", control_call("resume"));
  router->add(server, "POST", p + "/restart", control_call("restart"));

  router->add(server, "POST", p + "/snapshot",
              [eng](const httplib::Request& req, const httplib::Match& m, httplib::Response& res) {
                const std::string id = m[1];
                if (!find_status(*eng, id, res)) return log_call(req, res);
                auto tables = snapshot_tables(req);
                if (!tables.ok()) {
                  reply_error(res, tables.error());
                  return log_call(req, res);
                }
                const PipelineControl* c = eng->control(id);
                if (!c || !c->request_snapshot) {
                  reply_error(res, 501,
                              fmt::format("pipeline '{}' cannot take snapshot requests", id));
                  return log_call(req, res);
                }
                if (Status st = c->request_snapshot(tables.value()); !st.ok()) {
                  reply_error(res, st.error());
                  return log_call(req, res);
                }
                std::string list = "[";
                for (size_t i = 0; i < tables.value().size(); ++i)
                  list += (i ? "," : "") + json_string(tables.value()[i]);
                reply(res, 202,
                      fmt::format("{{\"pipeline\":{},\"requested\":{}]}}", json_string(id), list));
                log_call(req, res);
              });

  // The dead-letter queue: null (after answering) when the pipeline has none that can be read.
  auto queue_of = [eng](const std::string& id, httplib::Response& res) -> DeadLetterQueue* {
    if (!find_status(*eng, id, res)) return nullptr;
    const PipelineControl* c = eng->control(id);
    if (!c || !c->dead_letters) {
      reply_error(res, 501,
                  fmt::format("pipeline '{}': {}", id,
                              c ? c->dead_letters_unsupported : "no dead-letter queue"));
      return nullptr;
    }
    return c->dead_letters.get();
  };

  router->add(
      server, "GET", p + "/dlq",
      [queue_of](const httplib::Request& req, const httplib::Match& m, httplib::Response& res) {
        const std::string id = m[1];
        DeadLetterQueue* q = queue_of(id, res);
        if (!q) return;
        size_t limit = 100;
        if (req.has_param("limit")) {
          auto v = parse_index(req.get_param_value("limit"));
          if (!v || *v == 0) return reply_error(res, 400, "limit must be a positive integer");
          limit = *v;
        }
        auto entries = q->list();
        if (!entries.ok()) return reply_error(res, entries.error());
        const auto& all = entries.value();
        std::string body = fmt::format("{{\"pipeline\":{},\"total\":{},\"entries\":[",
                                       json_string(id), all.size());
        const size_t from = all.size() > limit ? all.size() - limit : 0;
        for (size_t i = from; i < all.size(); ++i)
          body += fmt::format("{}{{\"index\":{},\"reason\":{},\"destination\":{},\"record\":{}}}",
                              i > from ? "," : "", all[i].index, json_string(all[i].reason),
                              json_string(all[i].destination), all[i].record_json);
        reply(res, 200, body + "]}");
      });

  // Replay or discard, with the pipeline stopped meanwhile (resumed after if it ran).
  auto dlq_edit = [eng, queue_of](bool replay, bool one) {
    return [eng, queue_of, replay, one](const httplib::Request& req, const httplib::Match& m,
                                        httplib::Response& res) {
      const std::string id = m[1];
      DeadLetterQueue* q = queue_of(id, res);
      if (!q) return log_call(req, res);
      std::optional<size_t> index;
      if (one) {
        index = parse_index(m[2]);
        if (!index) {
          reply_error(res, 400, "the entry index must be a number (see GET …/dlq)");
          return log_call(req, res);
        }
      }
      std::optional<Result<DeadLetterReplay>> replayed;
      std::optional<Result<size_t>> discarded;
      bool was_running = false;
      Status st = eng->with_pipeline_stopped(
          id,
          [&] {
            if (replay) replayed = q->replay(index);
            else discarded = q->discard(index);
          },
          &was_running);
      const Error* err = nullptr;
      if (replayed && !replayed->ok()) err = &replayed->error();
      if (discarded && !discarded->ok()) err = &discarded->error();
      if (err) {
        reply_error(res, *err);
      } else if (!st.ok()) {
        reply_error(res, st.error());
      } else if (replay) {
        reply(res, 200, replay_json(id, replayed->value(), was_running));
      } else {
        reply(res, 200,
              fmt::format("{{\"pipeline\":{},\"discarded\":{},\"paused_meanwhile\":{}}}",
                          json_string(id), discarded->value(), was_running ? "true" : "false"));
      }
      log_call(req, res);
    };
  };
  router->add(server, "POST", p + "/dlq/replay", dlq_edit(true, false));
  router->add(server, "POST", p + "/dlq/([0-9]+)/replay", dlq_edit(true, true));
  router->add(server, "DELETE", p + "/dlq", dlq_edit(false, false));
  router->add(server, "DELETE", p + "/dlq/([0-9]+)", dlq_edit(false, true));

  router->add(
      server, "POST", "/api/v1/reload",
      [&engine](const httplib::Request& req, const httplib::Match&, httplib::Response& res) {
        std::optional<ReloadOutcome> r = engine.reload();
        if (!r) {
          reply_error(res, 501,
                      "this run has no pipeline file to reload (the quickstart): restart "
                      "sluice with a file");
        } else if (!r->applied) {
          reply_error(res, 400, r->error);
        } else {
          auto list = [](const std::vector<std::string>& v) {
            std::string out = "[";
            for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + json_string(v[i]);
            return out + "]";
          };
          reply(
              res, 200,
              fmt::format("{{\"applied\":true,\"added\":{},\"removed\":{},\"restarted\":{},"
                          "\"processors_replaced\":{},\"refused\":{},\"summary\":{}}}",
                          list(r->added), list(r->removed), list(r->restarted),
                          list(r->processors_replaced), list(r->refused), json_string(r->summary)));
        }
        log_call(req, res);
      });
  // Anything else under /api/: a JSON 404 (or 405 for a known path and another method).
  server.set_error_handler(
      httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
        if (!req.path.starts_with("/api/") || !res.body.empty())
          return httplib::Server::HandlerResponse::Unhandled;
        reply_error(res, res.status,
                    fmt::format("no route {} {} (the routes: GET /api/v1/openapi.json)", req.method,
                                req.path));
        return httplib::Server::HandlerResponse::Handled;
      }));
  return router;
}

}  // namespace sluice
