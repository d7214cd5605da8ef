#include "server/http_server.h"

#include <fmt/format.h>
#include <httplib.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <memory>
#include <thread>

#include "server/prometheus_text.h"

namespace sluice {

HttpServer::HttpServer(const Engine& engine) : engine_(engine) {}

HttpServer::~HttpServer() { stop(); }

Status HttpServer::start(const std::string& listen) {
  const auto colon = listen.rfind(':');
  int port = -1;
  if (colon != std::string::npos) {
    auto [p, ec] = std::from_chars(listen.data() + colon + 1, listen.data() + listen.size(), port);
    if (ec != std::errc() || p != listen.data() + listen.size()) port = -1;
  }
  if (colon == std::string::npos || port < 0 || port > 65535)
    return Error(Errc::config,
                 fmt::format("http.listen '{}' is not host:port (e.g. 127.0.0.1:8080)", listen));
  std::string host = listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);

  server_ = std::make_unique<httplib::Server>();
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(render_prometheus(engine_.metrics()),
                    "text/plain; version=0.0.4; charset=utf-8");
  });
  server_->Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
    std::string body;
    bool healthy = true;
    for (const PipelineStatus& p : engine_.list()) {
      const bool failed = p.state == PipelineState::failed;
      healthy = healthy && !failed;
      body += fmt::format("{} {}\n", p.id, failed ? "failed" : "ok");
    }
    res.status = healthy ? 200 : 503;
    res.set_content(body, "text/plain");
  });
  if (port == 0) {
    port_ = server_->bind_to_any_port(host.c_str());
    if (port_ < 0) port_ = 0;
  } else {
    port_ = server_->bind_to_port(host.c_str(), port) ? port : 0;
  }
  if (port_ == 0)
    return Error(Errc::io,
                 fmt::format("cannot listen on {}: the address is in use or not local; set "
                             "http.listen to a free host:port or http.enabled: false",
                             listen));
  auto returned = std::make_shared<std::atomic<bool>>(false);
  thread_ = std::thread([this, returned] {
    server_->listen_after_bind();
    returned->store(true);
  });
  // httplib's stop() only takes effect once the listen loop runs: a pipeline that ends within
  // microseconds would otherwise stop() too early and join a thread that never returns.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!server_->is_running() && !returned->load() &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return ok_status();
}

void HttpServer::stop() noexcept {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace sluice
