// The HTTP API under /api/v1/ (docs/api.md; described by docs/api/openapi.json, served at
// /api/v1/openapi.json): JSON views of the engine's pipelines and the calls that operate them
// (pause, resume, restart, snapshot, the dead-letter queue). Every mutating call is logged with
// its outcome. Errors are `{"error": "one line"}` with 400 (bad request), 404 (unknown pipeline
// or route), 409 (the pipeline's state does not allow it), 501 (not built, or not possible for
// this pipeline), 504 (a stop that did not finish in time), 500 (anything else).
#pragma once

#include <functional>
#include <memory>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"

#include <httplib.h>

namespace sluice {

// One route of the API, as the OpenAPI file spells it ("/api/v1/pipelines/{id}").
struct ApiRoute {
  std::string_view method;  // "GET", "POST", "DELETE"
  std::string_view path;
};

// Every route register_api_routes() serves (the test compares them with the OpenAPI file).
std::vector<ApiRoute> api_routes();

// The routes, also callable without httplib's routing: httplib answers 400 to a POST or DELETE
// without Content-Length (curl -X POST URL) before it routes, so the server's pre-routing
// handler dispatches those itself.
class ApiRouter {
 public:
  using Handler =
      std::function<void(const httplib::Request&, const httplib::Match&, httplib::Response&)>;
  void add(httplib::Server& server, std::string method, const std::string& pattern,
           Handler handler);
  // Runs the route matching `req` (true), or does nothing (false).
  bool dispatch(const httplib::Request& req, httplib::Response& res) const;

 private:
  struct Route {
    Route(std::string m, const std::string& pattern, Handler h);
    std::string method;
    std::regex regex;
    Handler handler;
  };
  std::vector<Route> routes_;
};

std::shared_ptr<ApiRouter> register_api_routes(httplib::Server& server, Engine& engine);

// The JSON of one pipeline (GET /api/v1/pipelines/{id} adds "config"): exposed for the tests.
std::string pipeline_json(const Engine& engine, const PipelineStatus& status);

// docs/api/openapi.json as embedded at build time (served at /api/v1/openapi.json).
std::string_view openapi_json();

// A position as JSON text: the printable text, or base64 of opaque bytes ("b64:…"); null when
// empty.
std::string position_json(std::string_view position);

}  // namespace sluice
