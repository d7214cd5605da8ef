// The HTTP endpoint: /metrics (Prometheus text) and /healthz. One listener thread.
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "runtime/pipeline.h"
#include "sluice/result.h"

namespace httplib { class Server; }

namespace sluice {

class HttpServer {
 public:
  explicit HttpServer(std::vector<Pipeline*> pipelines);
  ~HttpServer();
  // `listen` is host:port; port 0 picks a free port (see port()).
  Status start(const std::string& listen);
  void stop() noexcept;
  int port() const noexcept { return port_; }

 private:
  std::vector<Pipeline*> pipelines_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace sluice
