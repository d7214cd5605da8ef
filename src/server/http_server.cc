#include "server/http_server.h"

#include <fmt/format.h>
#include <httplib.h>

#include <sys/socket.h>

#include <atomic>
#include <cctype>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "console_assets.h"
#include "server/api.h"
#include "server/prometheus_text.h"
#include "sluice/secrets.h"

namespace sluice {

namespace {

// httplib serves one connection per task until it closes or idles out, so a fixed pool of 8
// (its default) stops answering /healthz once 8 idle clients hold it. This pool starts a worker
// whenever none is free, up to kMaxWorkers (idle clients are then also timed out, below).
class GrowingThreadPool final : public httplib::TaskQueue {
 public:
  static constexpr size_t kMaxWorkers = 128;

  ~GrowingThreadPool() override { shutdown(); }

  void enqueue(std::function<void()> fn) override {
    std::unique_lock lock(mu_);
    jobs_.push_back(std::move(fn));
    if (idle_ < jobs_.size() && workers_.size() < kMaxWorkers)
      workers_.emplace_back([this] { work(); });
    lock.unlock();
    cv_.notify_one();
  }

  void shutdown() override {
    std::vector<std::thread> workers;
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      workers.swap(workers_);
    }
    cv_.notify_all();
    for (std::thread& t : workers) t.join();
  }

 private:
  void work() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock lock(mu_);
        ++idle_;
        cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
        --idle_;
        if (jobs_.empty()) return;  // stopping, nothing left to serve
        fn = std::move(jobs_.front());
        jobs_.pop_front();
      }
      fn();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> workers_;
  size_t idle_ = 0;
  bool stopping_ = false;
};

// httplib's default sets SO_REUSEPORT, which lets a second process bind the same port and take
// half the connections: keep SO_REUSEADDR only (a restart may rebind at once; a live listener
// still refuses a second one).
void listener_socket_options(int sock) {
  int yes = 1;
  setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
}

// Whether `given` equals `expected` (not empty), in a time that depends only on the length of
// `given`: no early exit on the first differing byte.
bool token_matches(std::string_view expected, std::string_view given) {
  unsigned char diff = expected.size() == given.size() ? 0 : 1;
  for (size_t i = 0; i < given.size(); ++i)
    diff |= static_cast<unsigned char>(given[i] ^ expected[i % expected.size()]);
  return diff == 0;
}

// The token of an `Authorization: Bearer TOKEN` header ("" without one).
std::string_view bearer_token(const httplib::Request& req) {
  constexpr std::string_view kScheme = "Bearer ";
  auto it = req.headers.find("Authorization");
  if (it == req.headers.end()) return {};
  std::string_view v = it->second;
  if (v.size() <= kScheme.size()) return {};
  for (size_t i = 0; i < kScheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(v[i])) !=
        std::tolower(static_cast<unsigned char>(kScheme[i])))
      return {};
  return v.substr(kScheme.size());
}

struct ConsoleAsset {
  const char* path;
  const char* type;
  const char* body;
};
constexpr ConsoleAsset kConsoleAssets[] = {
    {"/", "text/html; charset=utf-8", kConsoleIndexHtml},
    {"/console/console.js", "text/javascript; charset=utf-8", kConsoleJs},
    {"/console/console.css", "text/css; charset=utf-8", kConsoleCss},
};

bool is_console_asset(const httplib::Request& req) {
  if (req.method != "GET" && req.method != "HEAD") return false;
  for (const ConsoleAsset& a : kConsoleAssets)
    if (req.path == a.path) return true;
  return false;
}

}  // namespace

HttpServer::HttpServer(Engine& engine) : engine_(engine) {}

HttpServer::~HttpServer() { stop(); }

Status HttpServer::start(const std::string& listen, std::string token) {
  token_ = std::move(token);
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
  server_->new_task_queue = [] { return new GrowingThreadPool(); };
  server_->set_socket_options(listener_socket_options);
  // An idle client gives its worker back after this long (a scraper reconnects at no cost).
  server_->set_keep_alive_timeout(2);
  server_->set_read_timeout(5, 0);
  server_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!token_.empty() && req.path != "/healthz" && !is_console_asset(req) &&
        !token_matches(token_, bearer_token(req))) {
      res.status = 401;
      res.set_header("WWW-Authenticate", "Bearer realm=\"sluice\"");
      res.set_content("unauthorized: send Authorization: Bearer <http.token>\n", "text/plain");
      return httplib::Server::HandlerResponse::Handled;
    }
    // httplib refuses a body-less POST/DELETE without Content-Length before routing it.
    if (req.method != "GET" && !req.has_header("Content-Length") &&
        !req.has_header("Transfer-Encoding") && api_ && api_->dispatch(req, res))
      return httplib::Server::HandlerResponse::Handled;
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // The web console: static files that hold no data (the page reads everything through the API,
  // with the token when there is one), so they are served without it; nothing is loaded from
  // anywhere else (the policy says so to the browser).
  for (const ConsoleAsset& a : kConsoleAssets) {
    server_->Get(a.path, [&a](const httplib::Request&, httplib::Response& res) {
      res.set_header("Cache-Control", "no-cache");
      res.set_header("X-Content-Type-Options", "nosniff");
      res.set_header("Content-Security-Policy",
                     "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'");
      res.set_content(a.body, a.type);
    });
  }
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(redact(render_prometheus(engine_.metrics())),
                    "text/plain; version=0.0.4; charset=utf-8");
  });
  server_->Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
    std::string body;
    bool healthy = true;
    // One line per pipeline: "ID ok", "ID failed", or "ID degraded: CONNECTOR SIDE stalled for
    // N s, pending: …" (each stalled side, ';'-separated). Anything but ok answers 503.
    for (const PipelineStatus& p : engine_.list()) {
      const bool failed = p.state == PipelineState::failed;
      healthy = healthy && !failed && p.stalls.empty();
      if (failed || p.stalls.empty()) {
        body += fmt::format("{} {}\n", p.id, failed ? "failed" : "ok");
        continue;
      }
      body += fmt::format("{} degraded:", p.id);
      for (size_t i = 0; i < p.stalls.size(); ++i) {
        const Stall& st = p.stalls[i];
        const std::string& connector = st.side == "source" ? p.source : p.destination;
        body += fmt::format("{} {} {} stalled for {:.0f} s, pending: {}", i ? ";" : "", connector,
                            st.side, st.seconds, st.pending);
      }
      body += "\n";
    }
    res.status = healthy ? 200 : 503;
    res.set_content(redact(body), "text/plain");
  });
  api_ = register_api_routes(*server_, engine_);
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
