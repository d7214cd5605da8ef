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

Status Engine::add(std::unique_ptr<Pipeline> pipeline) {
  std::lock_guard lock(mu_);
  if (find(pipeline->options().id))
    return Error(Errc::invalid_argument,
                 fmt::format("pipeline '{}' exists already", pipeline->options().id));
  pipeline->register_metrics(metrics_);
  auto e = std::make_unique<Entry>();
  e->pipeline = std::move(pipeline);
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
  e->thread = std::thread([this, e] {
    Status result = e->pipeline->run();
    if (!result.ok())
      spdlog::error("pipeline {}: {}", e->pipeline->options().id, result.error().message());
    std::lock_guard lock(mu_);
    e->result = std::move(result);
    e->ended = true;
    ended_cv_.notify_all();
  });
  return ok_status();
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
  for (auto& e : entries_) e->pipeline->request_stop();
}

Status Engine::remove(std::string_view id) {
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

Status Engine::replace(std::string_view id, std::unique_ptr<Pipeline> pipeline) {
  if (pipeline->options().id != id)
    return Error(Errc::invalid_argument,
                 fmt::format("replace: pipeline '{}' is not '{}'", pipeline->options().id, id));
  bool was_started = false;
  {
    std::lock_guard lock(mu_);
    const Entry* e = find(id);
    if (!e) return Error(Errc::not_found, fmt::format("no pipeline '{}'", id));
    was_started = e->started;
  }
  if (Status st = remove(id); !st.ok())
    spdlog::warn("pipeline {}: the run replaced ended with: {}", id, st.error().message());
  SLUICE_TRY(add(std::move(pipeline)));
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
  s.records_written = p.destination_metrics().records_written.load();
  s.records_filtered = m.records_filtered.load();
  s.records_dead_lettered = p.destination_metrics().dlq_records.load();
  s.records_in_flight = p.in_flight_records();
  s.checkpoint = p.checkpoint_position();
  s.source_server_state = p.source_server_state();
  s.idle_since = p.idle_since();
  s.stalls = p.stalls();
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

bool Engine::wait(const std::function<void()>& tick) {
  auto all_ended = [this] {
    for (const auto& e : entries_)
      if (e->started && !e->ended) return false;
    return true;
  };
  for (;;) {
    {
      std::unique_lock lock(mu_);
      if (all_ended()) break;
      ended_cv_.wait_for(lock, options_.tick, all_ended);
    }
    check_idle();
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
