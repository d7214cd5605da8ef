// `sluice run`: loads the file (or the embedded quickstart), hands every pipeline to the engine,
// serves /metrics, shows live progress on a terminal, reloads FILE when it changes or on SIGHUP
// (cli/reloader.h), stops gracefully on the first SIGINT/SIGTERM and aborts on the second (thread
// model: docs/development/engine.md).
#include <fmt/format.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>

#include "cli/commands.h"
#include "cli/logging.h"
#include "cli/pipeline_control.h"
#include "cli/pipeline_factory.h"
#include "cli/reloader.h"
#include "config/config.h"
#include "engine/engine.h"
#include "engine/progress.h"
#include "engine/status_line.h"
#include "quickstart.h"
#include "server/http_server.h"

namespace sluice {

namespace {

using Clock = std::chrono::steady_clock;

// Positions are opaque bytes; show them when they are printable text.
std::string printable_position(const std::string& p) {
  if (p.empty()) return "none";
  for (unsigned char c : p)
    if (c < 0x20 || c > 0x7e) return fmt::format("<{} bytes>", p.size());
  return p.size() > 80 ? p.substr(0, 77) + "..." : p;
}

// Blocks SIGINT/SIGTERM/SIGHUP in every thread and handles them on one: SIGHUP = reload (when
// there is a file), SIGINT/SIGTERM: first = graceful stop, second = abort.
class SignalWatcher {
 public:
  explicit SignalWatcher(Engine* engine) : state_(std::make_shared<State>()) {
    state_->engine = engine;
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    std::thread([set = set_, state = state_] { loop(set, state); }).detach();
  }
  // The thread outlives this object (sigwait cannot be interrupted): it only ever reaches the
  // engine through `state`, which this destructor disconnects.
  ~SignalWatcher() {
    std::lock_guard lock(state_->mu);
    state_->engine = nullptr;
    state_->reloader = nullptr;
  }
  void set_reloader(Reloader* reloader) {
    std::lock_guard lock(state_->mu);
    state_->reloader = reloader;
  }
  bool stopping() const { return state_->count.load() > 0; }
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

 private:
  struct State {
    std::mutex mu;
    Engine* engine = nullptr;
    Reloader* reloader = nullptr;
    std::atomic<int> count{0};
  };
  // A second signal this soon after the first, of the same kind, is the same request.
  static constexpr std::chrono::milliseconds kSameRequest{500};
  static void loop(sigset_t set, std::shared_ptr<State> state) {
    int first_sig = 0;
    std::chrono::steady_clock::time_point first_at{};
    for (;;) {
      int sig = 0;
      if (sigwait(&set, &sig) != 0) continue;
      // After ~SignalWatcher (engine null) the process is exiting and may be tearing down the
      // logger: the thread then logs nothing. The lock keeps the destructor from passing a log.
      std::lock_guard lock(state->mu);
      const bool connected = state->engine != nullptr;
      if (sig == SIGHUP) {
        if (state->reloader && state->count.load() == 0) {
          spdlog::info("received SIGHUP: reloading the pipeline file");
          state->reloader->request();
        } else if (connected) {
          spdlog::info("received SIGHUP: nothing to reload (no pipeline file, or stopping)");
        }
        continue;
      }
      const auto now = std::chrono::steady_clock::now();
      if (state->count.load() > 0 && sig == first_sig && now - first_at < kSameRequest) {
        // timeout(1) and some supervisors signal the process and then its process group: the
        // same request delivered twice, not an operator asking to abort.
        if (connected)
          spdlog::debug(
              "received {} again {} ms after the first: the same request",
              sig == SIGINT ? "SIGINT" : "SIGTERM",
              std::chrono::duration_cast<std::chrono::milliseconds>(now - first_at).count());
        continue;
      }
      if (state->count.fetch_add(1) == 0) {
        first_sig = sig;
        first_at = now;
        if (connected) {
          spdlog::info(
              "received {}: draining in-flight batches and checkpointing (send again to abort)",
              sig == SIGINT ? "SIGINT" : "SIGTERM");
          state->engine->stop_all();
        }
      } else {
        if (connected) {
          spdlog::error("received a second signal: aborting without waiting for in-flight batches");
          spdlog::default_logger()->flush();
        }
        std::_Exit(130);
      }
    }
  }
  std::shared_ptr<State> state_;
  sigset_t set_;
};

// Loads FILE (no FILE: the embedded quickstart) and opens its checkpoint store; on failure prints
// the one-line error and returns false.
bool load_config_and_checkpoints(const std::optional<std::string>& file, Config* config,
                                 std::unique_ptr<CheckpointStore>* checkpoints) {
  try {
    *config = file ? load_config_file(*file, Registry::builtin())
                   : load_config_string(kQuickstartYaml, "<quickstart>", Registry::builtin());
  } catch (const ConfigError& e) {
    cli_error(e.what());
    return false;
  }
  auto store = open_sqlite_checkpoint_store(config->checkpoints_path);
  if (!store.ok()) {
    cli_error(store.error().message());
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
  EngineOptions engine_options;
  engine_options.idle_exit = std::chrono::duration<double>(idle_exit_seconds);
  // Declared after the checkpoint store: the pipelines (in the engine) are destroyed first.
  Engine engine(engine_options);
  for (const PipelineConfig& pc : config.pipelines) {
    auto p = build_pipeline(pc, checkpoints.get());
    if (!p.ok()) {
      cli_error(p.error().message());
      return 2;
    }
    if (Status st = engine.add(std::move(p.value()), make_pipeline_control(pc, checkpoints.get()));
        !st.ok()) {
      cli_error(st.error().message());
      return 2;
    }
  }

  SignalWatcher signals(&engine);  // before any other thread starts, so all inherit the mask
  // Watches FILE and reloads it on edits and SIGHUP (the quickstart has no file to watch).
  // Shared with the API's reload handler: a call in flight on the HTTP thread keeps it alive.
  std::shared_ptr<Reloader> reloader;
  if (file) {
    reloader = std::make_shared<Reloader>(*file, engine, checkpoints.get(), config);
    signals.set_reloader(reloader.get());
    engine.set_reload_handler([r = reloader] {
      ReloadResult res = r->reload();
      ReloadOutcome out;
      out.applied = res.applied;
      out.error = res.error;
      out.added = res.added;
      out.removed = res.removed;
      out.restarted = res.restarted;
      out.processors_replaced = res.processors_replaced;
      out.refused = res.refused;
      out.summary = res.summary();
      return out;
    });
  }

  std::unique_ptr<HttpServer> http;
  if (config.http_enabled) {
    http = std::make_unique<HttpServer>(engine);
    if (Status st = http->start(config.http_listen, config.http_token); !st.ok()) {
      if (config.http_listen_set) {
        cli_error(st.error().message());
        signals.set_reloader(nullptr);  // before the reloader goes
        engine.set_reload_handler(nullptr);
        return 2;
      }
      // The default address taken (another sluice, another tool): this run goes on without
      // HTTP rather than refuse; a listen address given in the file must be served.
      spdlog::warn(
          "http: the default address {} is in use: /metrics and /healthz are off for "
          "this run (set http.listen to a free host:port, or http.enabled: false)",
          config.http_listen);
      http.reset();
    }
  }
  if (http) {
    spdlog::info("metrics on http://{}:{}/metrics",
                 config.http_listen.substr(0, config.http_listen.rfind(':')), http->port());
  }

  const auto started = Clock::now();
  engine.start_all();

  // JSON lines only with --log-format json: no progress line then.
  const bool tty = isatty(STDERR_FILENO) == 1 && !json_output();
  ProgressLine progress(engine.metrics());
  auto last_progress = Clock::now();
  bool progress_shown = false;
  engine.wait([&] {
    if (reloader) {
      if (signals.stopping()) reloader->shutdown();
      else reloader->poll();
    }
    const auto now = Clock::now();
    if (!tty || now - last_progress < std::chrono::seconds(1)) return;
    last_progress = now;
    StatusLine::stderr_line().show(
        progress.render(std::chrono::duration<double>(now - started).count()));
    progress_shown = true;
  });
  if (reloader) reloader->shutdown();
  engine.set_reload_handler(nullptr);
  signals.set_reloader(nullptr);
  if (http) http->stop();
  if (progress_shown) StatusLine::stderr_line().clear();

  const double elapsed = std::chrono::duration<double>(Clock::now() - started).count();
  int exit_code = 0;
  for (const PipelineStatus& p : engine.list()) {
    const bool ok = p.ended && !p.error;
    if (!ok) exit_code = 1;
    const uint64_t written = p.records_written;
    const uint64_t dead = p.records_dead_lettered;
    const auto rate = uint64_t(elapsed > 0 ? double(written) / elapsed : 0);
    cli_line(
        ok ? "info" : "error",
        fmt::format("pipeline {} {}: {} read, {} written, {} filtered{} in {:.2f} s ({} rec/s); "
                    "checkpoint {}",
                    p.id, ok ? "stopped" : "FAILED", thousands(p.records_read), thousands(written),
                    thousands(p.records_filtered),
                    dead ? fmt::format(", {} to the dead-letter queue", thousands(dead)) : "",
                    elapsed, thousands(rate), printable_position(p.checkpoint)),
        {{"pipeline", "\"" + json_escape(p.id) + "\""},
         {"state", ok ? "\"stopped\"" : "\"failed\""},
         {"records_read", std::to_string(p.records_read)},
         {"records_written", std::to_string(written)},
         {"records_filtered", std::to_string(p.records_filtered)},
         {"records_dead_lettered", std::to_string(dead)},
         {"seconds", fmt::format("{:.3f}", elapsed)},
         {"checkpoint", "\"" + json_escape(printable_position(p.checkpoint)) + "\""}});
    if (!ok && !p.source_server_state.empty())
      cli_line(
          "error",
          fmt::format("pipeline {}: its {} source created a {}; run again to resume, or run "
                      "`sluice cleanup {}` to drop it if you abandon the pipeline",
                      p.id, p.source, p.source_server_state, file ? *file : std::string("<file>")));
  }
  return exit_code;
}

int validate_command(const std::string& file) {
  try {
    Config config = load_config_file(file, Registry::builtin());
    for (const PipelineConfig& pc : config.pipelines) {
      // Constructing the connectors runs their own cross-setting checks (nothing is opened).
      if (auto s = build_source(pc); !s.ok()) {
        cli_error(fmt::format("{}: {}", file, s.error().message()));
        return 2;
      }
      if (pc.dlq) {
        if (auto d = pc.dlq->spec->make_destination(pc.dlq->settings); !d.ok()) {
          cli_error(fmt::format(
              "{}: {}", file,
              prefix_context(fmt::format("pipeline {}: dlq ({}): ", pc.id, pc.dlq->connector),
                             d.error().message())));
          return 2;
        }
      }
      for (const ProcessorConfig& proc : pc.processors)
        if (auto p = proc.spec->make(proc.settings); !p.ok()) {
          cli_error(fmt::format("{}: {}", file,
                                prefix_context(fmt::format("pipeline {}: {}: ", pc.id, proc.type),
                                               p.error().message())));
          return 2;
        }
      if (pc.destinations.empty()) {
        if (auto d = pc.destination.spec->make_destination(pc.destination.settings); !d.ok()) {
          cli_error(fmt::format("{}: {}", file,
                                prefix_context(fmt::format("pipeline {}: {} destination: ", pc.id,
                                                           pc.destination.connector),
                                               d.error().message())));
          return 2;
        }
      } else if (auto f = build_fan_out(pc, nullptr); !f.ok()) {
        // Each destination like the single one: its settings, processors and dlq.
        cli_error(fmt::format("{}: {}", file, f.error().message()));
        return 2;
      }
    }
    write_out(stdout, fmt::format("{}: ok ({} pipeline{})\n", file, config.pipelines.size(),
                                  config.pipelines.size() == 1 ? "" : "s"));
    return 0;
  } catch (const ConfigError& e) {
    cli_error(e.what());
    return 2;
  }
}

int connectors_command(const std::optional<std::string>& name, bool markdown, bool pipeline_file) {
  const Registry& r = Registry::builtin();
  if (pipeline_file) {
    if (name) {
      fmt::print(stderr, "sluice: --pipeline-file takes no connector name\n");
      return 2;
    }
    fmt::print("{}", render_pipeline_file_page(r));
    return 0;
  }
  if (!name) {
    if (markdown) {
      write_out(stdout, render_reference_markdown(r));
      return 0;
    }
    std::string text = "Connectors:\n";
    for (const auto& c : r.connectors()) {
      std::string kind = c.make_source && c.make_destination ? "source, destination"
                         : c.make_source                     ? "source"
                                                             : "destination";
      text += fmt::format("  {:<12} {:<20} {}\n", c.name, kind, c.summary);
    }
    text += "Processors:\n";
    for (const auto& p : r.processors()) text += fmt::format("  {:<14} {}\n", p.name, p.summary);
    text += "\n`sluice connectors NAME` shows a connector's settings.\n";
    write_out(stdout, text);
    return 0;
  }
  if (const ConnectorSpec* c = r.connector(*name)) {
    write_out(stdout, markdown ? render_connector_markdown(*c) : render_connector_text(*c));
    return 0;
  }
  if (const ProcessorSpec* p = r.processor(*name)) {
    write_out(stdout, render_processor_markdown(*p));
    return 0;
  }
  std::string known;
  for (const auto& c : r.connectors()) known += (known.empty() ? "" : ", ") + std::string(c.name);
  cli_error(fmt::format("unknown connector '{}' (known: {})", *name, known));
  return 2;
}

namespace {

// Opens the destination only when it stores positions itself, and erases the pipeline's.
Status erase_destination_position(const PipelineConfig& pc, const ConnectorConfig& dc,
                                  bool* erased) {
  *erased = false;
  auto made = dc.spec->make_destination(dc.settings);
  if (!made.ok()) return std::move(made).error();
  Destination& d = *made.value();
  if (!d.stores_positions()) return ok_status();
  ConnectorContext ctx{pc.id, dc.connector, nullptr};
  SLUICE_TRY(d.open(ctx));
  Status st = d.erase_stored_position(pc.id);
  if (st.ok()) st = d.flush(std::chrono::seconds(30));
  d.close();
  *erased = st.ok();
  return st;
}

}  // namespace

int cleanup_command(const std::string& file) {
  Config config;
  std::unique_ptr<CheckpointStore> checkpoints;
  if (!load_config_and_checkpoints(file, &config, &checkpoints)) return 2;
  int rc = 0;
  for (const PipelineConfig& pc : config.pipelines) {
    auto source = build_source(pc);
    if (!source.ok()) {
      cli_error(source.error().message());
      return 2;
    }
    ConnectorContext ctx{pc.id, pc.source.connector, nullptr};
    if (Status st = source.value()->cleanup(ctx); !st.ok()) {
      cli_error(prefix_context(fmt::format("pipeline {}: {} source: ", pc.id, pc.source.connector),
                               st.error().message()));
      rc = 1;
      continue;
    }
    // A full reset: a position the destination stores itself (checkpoint_in_destination, Kafka
    // transactions) would otherwise resume the next run from where this one was.
    bool erased_in_destination = false;
    std::vector<const ConnectorConfig*> stores;  // every destination of the pipeline
    if (pc.destinations.empty()) stores.push_back(&pc.destination);
    for (const DestinationConfig& d : pc.destinations) stores.push_back(&d.connector);
    bool erase_failed = false;
    for (const ConnectorConfig* dc : stores) {
      bool erased_here = false;
      if (Status st = erase_destination_position(pc, *dc, &erased_here); !st.ok()) {
        cli_error(fmt::format(
            "{} (run sluice cleanup again once the destination is reachable)",
            prefix_context(fmt::format("pipeline {}: {} destination: ", pc.id, dc->connector),
                           st.error().message())));
        erase_failed = true;
        break;
      }
      erased_in_destination = erased_in_destination || erased_here;
    }
    if (erase_failed) {
      rc = 1;
      continue;
    }
    Status erased = checkpoints->erase(pc.id);
    if (erased.ok()) erased = checkpoints->erase(source_history_key(pc.id));
    // A spool: its reader's checkpoint and its segments (what they hold is read again).
    if (erased.ok() && pc.spool)
      erased = checkpoints->erase(spool::spool_reader_checkpoint_key(pc.id, "destination"));
    for (const DestinationConfig& d : pc.destinations)  // several: one reader each
      if (erased.ok() && pc.spool)
        erased = checkpoints->erase(spool::spool_reader_checkpoint_key(pc.id, d.name));
    if (erased.ok() && pc.spool) erased = remove_spool(*pc.spool);
    if (Status st = std::move(erased); !st.ok()) {
      cli_error(fmt::format("pipeline {}: checkpoint: {}", pc.id, st.error().message()));
      rc = 1;
      continue;
    }
    write_out(
        stdout,
        fmt::format("pipeline {}: cleaned up (server-side state dropped, {}checkpoint removed{})\n",
                    pc.id, erased_in_destination ? "position stored in the destination and " : "",
                    pc.spool ? ", spool emptied" : ""));
  }
  return rc;
}

}  // namespace sluice
