#include "engine/engine.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace sluice {

Engine::Engine(EngineOptions options)
    : options_(options), started_at_(std::chrono::steady_clock::now()) {
  // spdlog builds its registry on first use: do it here, before pipeline threads log at once.
  (void)spdlog::default_logger_raw();
}

Engine::~Engine() {
  stop_all();
  for (auto& e : entries_)
    if (e->thread.joinable()) e->thread.join();
}

double Engine::uptime_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_at_).count();
}

Engine::Entry* Engine::find(std::string_view id) {
  for (auto& e : entries_)
    if (e->pipeline->options().id == id) return e.get();
  return nullptr;
}

const Engine::Entry* Engine::find(std::string_view id) const {
  for (const auto& e : entries_)
    if (e->pipeline->options().id == id) return e.get();
  return nullptr;
}

Status Engine::add(std::unique_ptr<Pipeline> pipeline, PipelineControl control) {
  std::lock_guard lock(mu_);
  if (find(pipeline->options().id))
    return Error(Errc::invalid_argument,
                 fmt::format("pipeline '{}' exists already", pipeline->options().id));
  pipeline->register_metrics(metrics_);
  auto e = std::make_unique<Entry>();
  e->pipeline = std::move(pipeline);
  e->control = std::move(control);
  entries_.push_back(std::move(e));
  return ok_status();
}

Status Engine::start(std::string_view id) {
  std::lock_guard lock(mu_);
  Entry* e = find(id);
  if (!e) return Error(Errc::not_found, fmt::format("no pipeline '{}'", id));
  if (e->started)
    return Error(Errc::invalid_argument, fmt::format("pipeline '{}' was started already", id));
  e->started = true;
  launch(e);
  return ok_status();
}

void Engine::launch(Entry* e) {
  ++e->runs;
  e->samples.clear();
  e->thread = std::thread([this, e] {
    Status result = e->pipeline->run();
    if (!result.ok())
      spdlog::error("pipeline {}: {}", e->pipeline->options().id, result.error().message());
    std::lock_guard lock(mu_);
    if (!result.ok()) e->last_error = result.error().message();
    e->result = std::move(result);
    e->ended = true;
    ended_cv_.notify_all();
  });
}

Status Engine::stop_and_wait(Entry* e, std::chrono::milliseconds timeout, bool pause) {
  std::unique_lock lock(mu_);
  const std::string id = e->pipeline->options().id;
  if (!e->started || e->ended)
    return Error(Errc::conflict, fmt::format("pipeline '{}' is not running", id));
  if (stopping_all_ || finished_)
    return Error(Errc::conflict, "sluice is shutting down: its pipelines are stopping");
  e->paused = pause;
  e->pipeline->request_stop();
  if (!ended_cv_.wait_for(lock, timeout, [&] { return e->ended; }))
    return Error(Errc::timeout,
                 fmt::format("pipeline '{}' did not finish draining within {} s; it is still "
                             "stopping, ask again later",
                             id, timeout.count() / 1000));
  if (e->result && !e->result->ok()) {
    e->paused = false;
    return Error(Errc::internal, fmt::format("pipeline '{}' failed while stopping: {}", id,
                                             e->result->error().message()));
  }
  return ok_status();
}

Status Engine::relaunch(Entry* e) {
  const std::string id = [&] {
    std::lock_guard lock(mu_);
    return e->pipeline->options().id;
  }();
  if (!e->control.rebuild)
    return Error(Errc::unsupported,
                 fmt::format("pipeline '{}' cannot be started again in this process", id));
  {
    std::lock_guard lock(mu_);
    if (stopping_all_ || finished_)
      return Error(Errc::conflict, "sluice is shutting down: its pipelines are stopping");
    if (e->started && !e->ended)
      return Error(Errc::conflict, fmt::format("pipeline '{}' is running", id));
  }
  // Built outside the lock: constructing connectors opens nothing, but may take a moment.
  auto fresh = e->control.rebuild();
  if (!fresh.ok()) return std::move(fresh).error();
  std::lock_guard lock(mu_);
  if (stopping_all_ || finished_)
    return Error(Errc::conflict, "sluice is shutting down: its pipelines are stopping");
  // The old run ended (under mu_, which it released): its thread only has to return.
  if (e->thread.joinable()) e->thread.join();
  // Its probes go with it before the fresh one registers the same series.
  e->pipeline.reset();
  e->pipeline = std::move(fresh.value());
  e->pipeline->register_metrics(metrics_);
  e->result.reset();
  e->ended = false;
  e->paused = false;
  e->started = true;
  launch(e);
  return ok_status();
}

Status Engine::pause(std::string_view id, std::chrono::milliseconds timeout) {
  std::lock_guard control(control_mu_);
  Entry* e = nullptr;
  {
    std::lock_guard lock(mu_);
    e = find(id);
    if (!e) return Error(Errc::not_found, fmt::format("no pipeline '{}'", id));
    if (e->paused) return Error(Errc::conflict, fmt::format("pipeline '{}' is paused already", id));
  }
  return stop_and_wait(e, timeout, true);
}

Status Engine::resume(std::string_view id) {
  std::lock_guard control(control_mu_);
  Entry* e = nullptr;
  {
    std::lock_guard lock(mu_);
    e = find(id);
    if (!e) return Error(Errc::not_found, fmt::format("no pipeline '{}'", id));
    if (!e->paused) return Error(Errc::conflict, fmt::format("pipeline '{}' is not paused", id));
  }
  return relaunch(e);
}

Status Engine::restart(std::string_view id, std::chrono::milliseconds timeout) {
  std::lock_guard control(control_mu_);
  Entry* e = nullptr;
  bool running = false;
  {
    std::lock_guard lock(mu_);
    e = find(id);
    if (!e) return Error(Errc::not_found, fmt::format("no pipeline '{}'", id));
    running = e->started && !e->ended;
  }
  if (!e->control.rebuild)
    return Error(Errc::unsupported,
                 fmt::format("pipeline '{}' cannot be started again in this process", id));
  // Marked paused while it drains: wait() must not take its end for the end of the run.
  if (running) SLUICE_TRY(stop_and_wait(e, timeout, true));
  return relaunch(e);
}

Status Engine::with_pipeline_stopped(std::string_view id, const std::function<void()>& fn,
                                     bool* was_running, std::chrono::milliseconds timeout) {
  std::lock_guard control(control_mu_);
  Entry* e = nullptr;
  bool running = false;
  {
    std::lock_guard lock(mu_);
    e = find(id);
    if (!e) return Error(Errc::not_found, fmt::format("no pipeline '{}'", id));
    running = e->started && !e->ended;
  }
  if (was_running) *was_running = running;
  if (running) SLUICE_TRY(stop_and_wait(e, timeout, true));
  fn();
  if (running) return relaunch(e);
  return ok_status();
}

void Engine::set_reload_handler(std::function<ReloadOutcome()> handler) {
  std::lock_guard lock(mu_);
  reload_handler_ = std::move(handler);
}

std::optional<ReloadOutcome> Engine::reload() {
  std::function<ReloadOutcome()> handler;
  {
    std::lock_guard lock(mu_);
    handler = reload_handler_;
  }
  if (!handler) return std::nullopt;
  return handler();
}

const PipelineControl* Engine::control(std::string_view id) const {
  std::lock_guard lock(mu_);
  const Entry* e = find(id);
  return e ? &e->control : nullptr;
}

std::vector<std::string> Engine::ids() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& e : entries_) out.push_back(e->pipeline->options().id);
  return out;
}

void Engine::start_all() {
  std::vector<std::string> ids;
  {
    std::lock_guard lock(mu_);
    for (const auto& e : entries_)
      if (!e->started) ids.push_back(e->pipeline->options().id);
  }
  for (const std::string& id : ids) (void)start(id);
}

Status Engine::stop(std::string_view id) {
  std::lock_guard lock(mu_);
  Entry* e = find(id);
  if (!e) return Error(Errc::not_found, fmt::format("no pipeline '{}'", id));
  e->pipeline->request_stop();
  return ok_status();
}

void Engine::stop_all() noexcept {
  std::lock_guard lock(mu_);
  stopping_all_ = true;
  for (auto& e : entries_) e->pipeline->request_stop();
  ended_cv_.notify_all();  // a paused pipeline now counts as ended
}

Status Engine::remove(std::string_view id) {
  // Serialised with the API's pause/resume/restart, which hold an entry while they work on it.
  std::lock_guard control(control_mu_);
  return remove_entry(id);
}

Status Engine::remove_entry(std::string_view id) {
  Entry* e = nullptr;
  {
    std::lock_guard lock(mu_);
    e = find(id);
    if (!e) return Error(Errc::not_found, fmt::format("no pipeline '{}'", id));
    e->pipeline->request_stop();
  }
  // Only this thread joins or erases an entry while the engine runs (see the header).
  if (e->thread.joinable()) e->thread.join();
  std::unique_ptr<Entry> gone;
  {
    std::lock_guard lock(mu_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
      if (it->get() == e) {
        gone = std::move(*it);
        entries_.erase(it);
        break;
      }
  }
  Status result = gone->result ? std::move(*gone->result) : ok_status();
  gone.reset();  // destroys the pipeline outside the lock: its connectors close, probes unregister
  ended_cv_.notify_all();
  return result;
}

Status Engine::replace(std::string_view id, std::unique_ptr<Pipeline> pipeline,
                       PipelineControl control) {
  if (pipeline->options().id != id)
    return Error(Errc::invalid_argument,
                 fmt::format("replace: pipeline '{}' is not '{}'", pipeline->options().id, id));
  std::lock_guard serial(control_mu_);
  bool was_started = false;
  {
    std::lock_guard lock(mu_);
    const Entry* e = find(id);
    if (!e) return Error(Errc::not_found, fmt::format("no pipeline '{}'", id));
    was_started = e->started;
  }
  if (Status st = remove_entry(id); !st.ok())
    spdlog::warn("pipeline {}: the run replaced ended with: {}", id, st.error().message());
  SLUICE_TRY(add(std::move(pipeline), std::move(control)));
  return was_started ? start(id) : ok_status();
}

Status Engine::replace_processors(std::string_view id,
                                  std::vector<std::unique_ptr<Processor>> chain) {
  std::lock_guard lock(mu_);
  Entry* e = find(id);
  if (!e) return Error(Errc::not_found, fmt::format("no pipeline '{}'", id));
  e->pipeline->replace_processors(std::move(chain));
  return ok_status();
}

PipelineStatus Engine::status_of(const Entry& e) const {
  const Pipeline& p = *e.pipeline;
  const PipelineMetrics& m = p.metrics();
  PipelineStatus s;
  s.id = p.options().id;
  s.source = p.options().source_connector;
  s.destination = p.destination_connector();
  s.state = p.state();
  s.started = e.started;
  s.ended = e.ended;
  if (e.result && !e.result->ok()) s.error = e.result->error();
  s.records_read = m.records_read.load();
  // With a spool: what reached the destination, not the spool.
  s.records_written = p.destination_records_written();
  s.records_filtered = m.records_filtered.load();
  s.records_dead_lettered = p.destination_dlq_records();
  s.records_in_flight = p.in_flight_records();
  s.snapshot_tables = p.snapshot_rows_by_table();
  s.checkpoint = p.checkpoint_position();
  s.read_position = p.read_position();
  s.written_position = p.written_position();
  s.source_server_state = p.source_server_state();
  s.idle_since = p.idle_since();
  s.stalls = p.stalls();
  s.paused = e.paused;
  s.runs = e.runs;
  s.write_errors = p.destination_metrics().write_errors.load();
  s.write_retries = p.destination_metrics().write_retries.load();
  s.last_error = e.last_error;
  if (e.samples.size() >= 2 && !e.ended) {
    const auto& [t0, w0] = e.samples.front();
    const auto& [t1, w1] = e.samples.back();
    const double dt = std::chrono::duration<double>(t1 - t0).count();
    if (dt > 0 && w1 >= w0) s.records_per_second = double(w1 - w0) / dt;
  }
  return s;
}

std::vector<PipelineStatus> Engine::list() const {
  std::lock_guard lock(mu_);
  std::vector<PipelineStatus> out;
  out.reserve(entries_.size());
  for (const auto& e : entries_) out.push_back(status_of(*e));
  return out;
}

std::optional<PipelineStatus> Engine::status(std::string_view id) const {
  std::lock_guard lock(mu_);
  const Entry* e = find(id);
  if (!e) return std::nullopt;
  return status_of(*e);
}

bool Engine::running() const {
  std::lock_guard lock(mu_);
  for (const auto& e : entries_)
    if (e->started && !e->ended) return true;
  return false;
}

void Engine::check_idle() {
  if (options_.idle_exit.count() <= 0 || idle_stop_) return;
  const auto now = std::chrono::steady_clock::now();
  bool all_idle = true;
  size_t running = 0;  // pipelines that ended (finished or failed) are not idle sources
  {
    std::lock_guard lock(mu_);
    for (const auto& e : entries_) {
      if (!e->started || e->ended) continue;
      ++running;
      auto since = e->pipeline->idle_since();
      all_idle =
          all_idle && since && std::chrono::duration<double>(now - *since) >= options_.idle_exit;
    }
  }
  if (all_idle && running > 0) {
    idle_stop_ = true;
    spdlog::info("every source idle for {} s and everything acknowledged: stopping",
                 options_.idle_exit.count());
    stop_all();
  }
}

void Engine::sample_rates() {
  constexpr auto kWindow = std::chrono::seconds(5);
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(mu_);
  for (auto& e : entries_) {
    if (!e->started || e->ended) continue;
    e->samples.emplace_back(now, e->pipeline->destination_metrics().records_written.load());
    while (e->samples.size() > 2 && now - e->samples.front().first > kWindow)
      e->samples.pop_front();
  }
}

bool Engine::wait(const std::function<void()>& tick) {
  // A paused pipeline has ended its run but is still supervised (it may resume), until
  // stop_all().
  auto all_ended = [this] {
    for (const auto& e : entries_)
      if (e->started && (!e->ended || (e->paused && !stopping_all_))) return false;
    return true;
  };
  for (;;) {
    {
      std::unique_lock lock(mu_);
      if (all_ended()) {
        finished_ = true;
        break;
      }
      ended_cv_.wait_for(lock, options_.tick, all_ended);
    }
    check_idle();
    sample_rates();
    if (tick) tick();
  }
  bool ok = true;
  for (auto& e : entries_) {
    if (e->thread.joinable()) e->thread.join();
    std::lock_guard lock(mu_);
    ok = ok && (!e->started || (e->result && e->result->ok()));
  }
  return ok;
}

}  // namespace sluice
