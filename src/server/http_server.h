// The HTTP endpoint: /metrics (Prometheus text, from the engine's metrics registry), /healthz
// (the engine's pipeline list), the API under /api/v1/ (server/api.h: reads and operates the
// engine) and the web console at / (src/server/console/, embedded at build time; it reads and
// operates through the API only). One listener thread. With a bearer token, every request but
// /healthz (liveness probes carry no credentials) and the console's static files (no data in them)
// must present it (`Authorization: Bearer TOKEN`), else 401; the token is compared in constant
// time and never logged.
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "sluice/result.h"

namespace httplib {
class Server;
}

namespace sluice {

class ApiRouter;

class HttpServer {
 public:
  explicit HttpServer(Engine& engine);
  ~HttpServer();
  // `listen` is host:port; port 0 picks a free port (see port()). `token` empty: no token asked.
  Status start(const std::string& listen, std::string token = {});
  void stop() noexcept;
  int port() const noexcept { return port_; }

 private:
  Engine& engine_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::shared_ptr<ApiRouter> api_;
  std::string token_;
  int port_ = 0;
};

}  // namespace sluice
