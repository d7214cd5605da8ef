// `sluice run`: loads the file (or the embedded quickstart), runs every pipeline side by side,
// serves /metrics, shows live progress on a terminal, stops gracefully on the first SIGINT/SIGTERM
// and aborts on the second.
#include <fmt/format.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <thread>

#include "cli/commands.h"
#include "cli/pipeline_factory.h"
#include "config/config.h"
#include "quickstart.h"
#include "server/http_server.h"

namespace sluice {

namespace {

using Clock = std::chrono::steady_clock;

std::string thousands(uint64_t n) {
  const std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

// Positions are opaque bytes; show them when they are printable text.
std::string printable_position(const std::string& p) {
  if (p.empty()) return "none";
  for (unsigned char c : p)
    if (c < 0x20 || c > 0x7e) return fmt::format("<{} bytes>", p.size());
  return p.size() > 80 ? p.substr(0, 77) + "..." : p;
}

std::string duration_text(double s) {
  if (s < 60) return fmt::format("{:.0f}s", s);
  if (s < 3600) return fmt::format("{:.0f}m{:02.0f}s", s / 60 - 0.5, std::fmod(s, 60));
  return fmt::format("{:.1f}h", s / 3600);
}

// Blocks SIGINT/SIGTERM in every thread and handles them on one: first = graceful stop,
// second = abort.
class SignalWatcher {
 public:
  explicit SignalWatcher(std::vector<Pipeline*> pipelines) : pipelines_(std::move(pipelines)) {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    std::thread([this] { loop(); }).detach();
  }
  bool stopping() const { return count_.load() > 0; }

 private:
  void loop() {
    for (;;) {
      int sig = 0;
      if (sigwait(&set_, &sig) != 0) continue;
      if (count_.fetch_add(1) == 0) {
        spdlog::info("received {}: draining in-flight batches and checkpointing (send again to abort)",
                     sig == SIGINT ? "SIGINT" : "SIGTERM");
        for (Pipeline* p : pipelines_) p->request_stop();
      } else {
        spdlog::error("received a second signal: aborting without waiting for in-flight batches");
        std::fflush(stderr);
        std::_Exit(130);
      }
    }
  }
  std::vector<Pipeline*> pipelines_;
  sigset_t set_;
  std::atomic<int> count_{0};
};

// Loads FILE (no FILE: the embedded quickstart) and opens its checkpoint store; on failure prints
// the one-line error and returns false.
bool load_config_and_checkpoints(const std::optional<std::string>& file, Config* config,
                                 std::unique_ptr<CheckpointStore>* checkpoints) {
  try {
    *config = file ? load_config_file(*file, Registry::builtin())
                   : load_config_string(kQuickstartYaml, "<quickstart>", Registry::builtin());
  } catch (const ConfigError& e) {
    fmt::print(stderr, "sluice: {}\n", e.what());
    return false;
  }
  auto store = open_sqlite_checkpoint_store(config->checkpoints_path);
  if (!store.ok()) {
    fmt::print(stderr, "sluice: checkpoints: {}\n", store.error().message());
    return false;
  }
  *checkpoints = std::move(store.value());
  return true;
}

}  // namespace

int run_command(const std::optional<std::string>& file, double idle_exit_seconds) {
  Config config;
  std::unique_ptr<CheckpointStore> checkpoints;
  if (!load_config_and_checkpoints(file, &config, &checkpoints)) return 2;
  std::vector<std::unique_ptr<Pipeline>> pipelines;
  std::vector<Pipeline*> raw;
  for (const PipelineConfig& pc : config.pipelines) {
    auto p = build_pipeline(pc, checkpoints.get());
    if (!p.ok()) {
      fmt::print(stderr, "sluice: {}\n", p.error().message());
      return 2;
    }
    raw.push_back(p.value().get());
    pipelines.push_back(std::move(p.value()));
  }

  SignalWatcher signals(raw);  // before any other thread starts, so all inherit the mask

  std::unique_ptr<HttpServer> http;
  if (config.http_enabled) {
    http = std::make_unique<HttpServer>(raw);
    if (Status st = http->start(config.http_listen); !st.ok()) {
      fmt::print(stderr, "sluice: {}\n", st.error().message());
      return 2;
    }
    spdlog::info("metrics on http://{}:{}/metrics", config.http_listen.substr(0, config.http_listen.rfind(':')),
                 http->port());
  }

  const auto started = Clock::now();
  std::vector<std::optional<Status>> results(pipelines.size());
  std::vector<std::atomic<bool>> done(pipelines.size());
  std::mutex done_mu;
  std::condition_variable done_cv;
  std::vector<std::thread> threads;
  for (size_t i = 0; i < pipelines.size(); ++i) {
    threads.emplace_back([&, i] {
      results[i] = pipelines[i]->run();
      if (!results[i]->ok()) spdlog::error("pipeline {}: {}", pipelines[i]->options().id, results[i]->error().message());
      std::lock_guard lock(done_mu);
      done[i] = true;
      done_cv.notify_all();
    });
  }

  const bool tty = isatty(STDERR_FILENO) == 1;
  auto last_progress = Clock::now();
  uint64_t last_written = 0;
  bool idle_stop = false;
  bool progress_shown = false;
  for (;;) {
    bool all_done = true;
    for (auto& d : done) all_done = all_done && d.load();
    if (all_done) break;
    {
      std::unique_lock lock(done_mu);
      done_cv.wait_for(lock, std::chrono::milliseconds(100), [&] {
        return std::all_of(done.begin(), done.end(), [](const std::atomic<bool>& d) { return d.load(); });
      });
    }
    const auto now = Clock::now();

    if (idle_exit_seconds > 0 && !idle_stop) {
      bool all_idle = true;
      size_t running = 0;  // pipelines that ended (finished or failed) are not idle sources
      for (size_t i = 0; i < pipelines.size(); ++i) {
        if (done[i]) continue;
        ++running;
        auto since = pipelines[i]->idle_since();
        all_idle = all_idle && since && std::chrono::duration<double>(now - *since).count() >= idle_exit_seconds;
      }
      if (all_idle && running > 0) {
        idle_stop = true;
        spdlog::info("every source idle for {} s and everything acknowledged: stopping", idle_exit_seconds);
        for (Pipeline* p : raw) p->request_stop();
      }
    }

    if (tty && now - last_progress >= std::chrono::seconds(1)) {
      const double dt = std::chrono::duration<double>(now - last_progress).count();
      last_progress = now;
      uint64_t written = 0, in_flight = 0;
      for (Pipeline* p : raw) {
        written += p->metrics().records_written.load();
        in_flight += p->in_flight_records();
      }
      std::string line = fmt::format("{} records written  {}/s  in flight {}", thousands(written),
                                     thousands(uint64_t(double(written - last_written) / dt)), thousands(in_flight));
      last_written = written;
      for (Pipeline* p : raw) {
        const auto& s = p->metrics().source_stats;
        if (int64_t lag = s.lag_ms.load(); lag >= 0) line += fmt::format("  lag {:.1f}s", double(lag) / 1000.0);
        int64_t d = s.snapshot_rows_done.load(), t = s.snapshot_rows_total.load();
        if (d >= 0 && t > 0) {
          const double el = std::chrono::duration<double>(now - started).count();
          const double eta = d > 0 ? el * double(t - std::min(d, t)) / double(d) : 0;
          line += fmt::format("  snapshot {}/{} ({:.0f}%) ETA {}", thousands(uint64_t(d)), thousands(uint64_t(t)),
                              100.0 * double(d) / double(t), duration_text(eta));
        }
      }
      fmt::print(stderr, "\r\033[K{}", line);
      progress_shown = true;
    }
  }
  for (auto& t : threads) t.join();
  if (http) http->stop();
  if (progress_shown) fmt::print(stderr, "\r\033[K");

  const double elapsed = std::chrono::duration<double>(Clock::now() - started).count();
  int exit_code = 0;
  for (size_t i = 0; i < pipelines.size(); ++i) {
    const Pipeline& p = *pipelines[i];
    const auto& m = p.metrics();
    const bool ok = results[i] && results[i]->ok();
    if (!ok) exit_code = 1;
    const uint64_t written = m.records_written.load();
    const uint64_t dead = m.dlq_records.load();
    fmt::print(stderr, "sluice: pipeline {} {}: {} read, {} written, {} filtered{} in {:.2f} s ({} rec/s); checkpoint {}\n",
               p.options().id, ok ? "stopped" : "FAILED", thousands(m.records_read.load()), thousands(written),
               thousands(m.records_filtered.load()), dead ? fmt::format(", {} to the dead-letter queue", thousands(dead)) : "",
               elapsed,
               thousands(uint64_t(elapsed > 0 ? double(written) / elapsed : 0)),
               printable_position(p.checkpoint_position()));
  }
  (void)signals;
  return exit_code;
}

int validate_command(const std::string& file) {
  try {
    Config config = load_config_file(file, Registry::builtin());
    for (const PipelineConfig& pc : config.pipelines) {
      // Constructing the connectors runs their own cross-setting checks (nothing is opened).
      if (auto s = build_source(pc); !s.ok()) {
        fmt::print(stderr, "sluice: {}: {}\n", file, s.error().message());
        return 2;
      }
      if (pc.dlq) {
        if (auto d = pc.dlq->spec->make_destination(pc.dlq->settings); !d.ok()) {
          fmt::print(stderr, "sluice: {}: pipeline {}: dlq ({}): {}\n", file, pc.id, pc.dlq->connector, d.error().message());
          return 2;
        }
      }
      for (const ProcessorConfig& proc : pc.processors)
        if (auto p = proc.spec->make(proc.settings); !p.ok()) {
          fmt::print(stderr, "sluice: {}: pipeline {}: {}: {}\n", file, pc.id, proc.type, p.error().message());
          return 2;
        }
      if (auto d = pc.destination.spec->make_destination(pc.destination.settings); !d.ok()) {
        fmt::print(stderr, "sluice: {}: pipeline {}: {} destination: {}\n", file, pc.id, pc.destination.connector,
                   d.error().message());
        return 2;
      }
    }
    fmt::print("{}: ok ({} pipeline{})\n", file, config.pipelines.size(), config.pipelines.size() == 1 ? "" : "s");
    return 0;
  } catch (const ConfigError& e) {
    fmt::print(stderr, "sluice: {}\n", e.what());
    return 2;
  }
}

int connectors_command(const std::optional<std::string>& name, bool markdown) {
  const Registry& r = Registry::builtin();
  if (!name) {
    if (markdown) {
      fmt::print("{}", render_reference_markdown(r));
      return 0;
    }
    fmt::print("Connectors:\n");
    for (const auto& c : r.connectors()) {
      std::string kind = c.make_source && c.make_destination ? "source, destination"
                         : c.make_source                     ? "source"
                                                             : "destination";
      fmt::print("  {:<12} {:<20} {}\n", c.name, kind, c.summary);
    }
    fmt::print("Processors:\n");
    for (const auto& p : r.processors()) fmt::print("  {:<14} {}\n", p.name, p.summary);
    fmt::print("\n`sluice connectors NAME` shows a connector's settings.\n");
    return 0;
  }
  if (const ConnectorSpec* c = r.connector(*name)) {
    fmt::print("{}", markdown ? render_connector_markdown(*c) : render_connector_text(*c));
    return 0;
  }
  if (const ProcessorSpec* p = r.processor(*name)) {
    fmt::print("{}", render_processor_markdown(*p));
    return 0;
  }
  std::string known;
  for (const auto& c : r.connectors()) known += (known.empty() ? "" : ", ") + std::string(c.name);
  fmt::print(stderr, "sluice: unknown connector '{}' (known: {})\n", *name, known);
  return 2;
}

int cleanup_command(const std::string& file) {
  Config config;
  std::unique_ptr<CheckpointStore> checkpoints;
  if (!load_config_and_checkpoints(file, &config, &checkpoints)) return 2;
  int rc = 0;
  for (const PipelineConfig& pc : config.pipelines) {
    auto source = build_source(pc);
    if (!source.ok()) {
      fmt::print(stderr, "sluice: {}\n", source.error().message());
      return 2;
    }
    ConnectorContext ctx{pc.id, pc.source.connector, nullptr};
    if (Status st = source.value()->cleanup(ctx); !st.ok()) {
      fmt::print(stderr, "sluice: pipeline {}: {} source: {}\n", pc.id, pc.source.connector, st.error().message());
      rc = 1;
      continue;
    }
    if (Status st = checkpoints->erase(pc.id); !st.ok()) {
      fmt::print(stderr, "sluice: pipeline {}: checkpoint: {}\n", pc.id, st.error().message());
      rc = 1;
      continue;
    }
    fmt::print("pipeline {}: cleaned up (server-side state dropped, checkpoint removed)\n", pc.id);
  }
  return rc;
}

}  // namespace sluice
