// The HTTP endpoint: /metrics (Prometheus text, from the engine's metrics registry) and /healthz
// (the engine's pipeline list). One listener thread; handlers only read the engine.
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

class HttpServer {
 public:
  explicit HttpServer(const Engine& engine);
  ~HttpServer();
  // `listen` is host:port; port 0 picks a free port (see port()).
  Status start(const std::string& listen);
  void stop() noexcept;
  int port() const noexcept { return port_; }

 private:
  const Engine& engine_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace sluice
