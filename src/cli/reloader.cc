#include "cli/reloader.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <map>

#include "cli/pipeline_control.h"
#include "cli/pipeline_factory.h"

namespace sluice {

namespace {

// Field-wise equality of the loaded (validated, defaults applied) configuration: a new
// PipelineConfig field must be compared here too, or an edit of it alone goes unnoticed.
bool same(const ConnectorConfig& a, const ConnectorConfig& b) {
  return a.connector == b.connector && a.settings.values() == b.settings.values();
}
bool same(const std::optional<ConnectorConfig>& a, const std::optional<ConnectorConfig>& b) {
  return a.has_value() == b.has_value() && (!a || same(*a, *b));
}
bool same(const std::vector<ProcessorConfig>& a, const std::vector<ProcessorConfig>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].type != b[i].type || a[i].settings.values() != b[i].settings.values()) return false;
  return true;
}
bool same(const std::optional<SpoolConfig>& a, const std::optional<SpoolConfig>& b) {
  if (a.has_value() != b.has_value()) return false;
  if (!a) return true;
  return a->type == b->type && a->path == b->path && a->url == b->url && a->key == b->key &&
         a->segment_size == b->segment_size && a->max_bytes == b->max_bytes &&
         a->when_full == b->when_full && a->fsync == b->fsync;
}
// Everything but the pipeline's own `processors`.
bool same_but_processors(const PipelineConfig& a, const PipelineConfig& b) {
  if (!same(a.source, b.source) || !same(a.destination, b.destination) ||
      a.destinations.size() != b.destinations.size() ||
      a.batch.max_records != b.batch.max_records ||
      a.batch.max_records_set != b.batch.max_records_set ||
      a.batch.max_bytes != b.batch.max_bytes || a.batch.linger != b.batch.linger ||
      a.on_error != b.on_error || a.stall_timeout != b.stall_timeout || !same(a.dlq, b.dlq) ||
      !same(a.spool, b.spool))
    return false;
  for (size_t i = 0; i < a.destinations.size(); ++i) {
    const DestinationConfig& x = a.destinations[i];
    const DestinationConfig& y = b.destinations[i];
    if (x.name != y.name || !same(x.connector, y.connector) || !same(x.processors, y.processors) ||
        x.on_error != y.on_error || !same(x.dlq, y.dlq))
      return false;
  }
  return true;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

std::string ReloadResult::summary() const {
  if (!applied) return "rejected: " + error;
  std::vector<std::string> parts;
  if (!added.empty()) parts.push_back("added " + join(added));
  if (!removed.empty()) parts.push_back("removed " + join(removed));
  if (!restarted.empty()) parts.push_back("restarted " + join(restarted));
  if (!processors_replaced.empty())
    parts.push_back("processors replaced in " + join(processors_replaced));
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out.empty() ? "no pipeline changed" : out;
}

Reloader::Reloader(std::string file, Engine& engine, CheckpointStore* checkpoints, Config current)
    : file_(std::move(file)),
      engine_(engine),
      checkpoints_(checkpoints),
      current_(std::move(current)) {
  applied_sig_ = stat_file();
  metrics_registration_ = engine_.metrics().add(
      {MetricDef::counter("sluice_reloads_total",
                          "Reloads of the pipeline file (file edit, SIGHUP, POST /api/v1/reload).",
                          {{"result", "applied"}}, applied_total_),
       MetricDef::counter("sluice_reloads_total",
                          "Reloads of the pipeline file (file edit, SIGHUP, POST /api/v1/reload).",
                          {{"result", "rejected"}}, rejected_total_)});
}

Reloader::~Reloader() { shutdown(); }

Reloader::FileSig Reloader::stat_path(const std::string& path) {
  struct stat st {};
  FileSig sig;
  if (::stat(path.c_str(), &st) != 0) return sig;
  sig.exists = true;
  sig.mtime_ns = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  sig.size = st.st_size;
  sig.inode = st.st_ino;
  sig.device = st.st_dev;
  if (S_ISDIR(st.st_mode)) {
    try {
      for (const std::string& f : pipeline_files_in(path)) {
        sig.files.push_back(stat_path(f));
        sig.files.back().name = f;
      }
    } catch (const ConfigError&) {
    }
  }
  return sig;
}

Reloader::FileSig Reloader::stat_file() const { return stat_path(file_); }

ReloadResult Reloader::reload(std::chrono::milliseconds timeout) {
  std::future<ReloadResult> result;
  {
    std::lock_guard lock(mu_);
    if (closed_) {
      ReloadResult r;
      r.error = "sluice is stopping: no reload";
      return r;
    }
    waiters_.emplace_back();
    result = waiters_.back().get_future();
  }
  requested_.store(true);
  if (result.wait_for(timeout) != std::future_status::ready) {
    ReloadResult r;
    r.error = "the reload did not run in time (the engine is busy stopping a pipeline)";
    return r;
  }
  return result.get();
}

void Reloader::shutdown() {
  std::vector<std::promise<ReloadResult>> waiters;
  {
    std::lock_guard lock(mu_);
    closed_ = true;
    waiters.swap(waiters_);
  }
  for (auto& w : waiters) {
    ReloadResult r;
    r.error = "sluice is stopping: no reload";
    w.set_value(r);
  }
}

void Reloader::poll() {
  {
    std::lock_guard lock(mu_);
    if (closed_) return;
  }
  bool run = requested_.exchange(false);
  const auto now = std::chrono::steady_clock::now();
  if (!run && now - last_stat_ >= std::chrono::milliseconds(250)) {
    last_stat_ = now;
    const FileSig sig = stat_file();
    // Missing (an editor between unlink and rename): wait for it to come back.
    if (!sig.exists || sig == applied_sig_) {
      seen_sig_.reset();
    } else if (!seen_sig_ || !(*seen_sig_ == sig)) {
      seen_sig_ = sig;  // changed: apply once it has stayed so for a moment
      seen_at_ = now;
    } else if (now - seen_at_ >= std::chrono::milliseconds(400)) {
      run = true;
    }
  }
  if (!run) return;
  seen_sig_.reset();
  ReloadResult r = apply();
  (r.applied ? applied_total_ : rejected_total_).fetch_add(1);
  std::vector<std::promise<ReloadResult>> waiters;
  {
    std::lock_guard lock(mu_);
    waiters.swap(waiters_);
  }
  for (auto& w : waiters) w.set_value(r);
}

ReloadResult Reloader::apply() {
  ReloadResult r;
  applied_sig_ = stat_file();  // before reading: an edit during the load is seen next time
  Config next;
  try {
    next = load_config_file(file_, Registry::builtin());
  } catch (const ConfigError& e) {
    r.error = e.what();
    spdlog::error("reload rejected, the pipelines run on unchanged: {}", r.error);
    return r;
  }
  // File-level keys the running process cannot change.
  if (next.checkpoints_path != current_.checkpoints_path) r.refused.push_back("checkpoints.path");
  if (next.http_enabled != current_.http_enabled) r.refused.push_back("http.enabled");
  if (next.http_listen != current_.http_listen) r.refused.push_back("http.listen");
  if (next.http_token != current_.http_token || next.http_token_file != current_.http_token_file)
    r.refused.push_back("http.token");
  if (next.http_allow_unauthenticated != current_.http_allow_unauthenticated)
    r.refused.push_back("http.allow_unauthenticated");
  if (!r.refused.empty())
    spdlog::warn("reload: {} changed: restart sluice to apply {} (the pipelines' edits apply now)",
                 join(r.refused), r.refused.size() == 1 ? "it" : "them");

  std::map<std::string, const PipelineConfig*> old_by_id;
  for (const PipelineConfig& pc : current_.pipelines) old_by_id[pc.id] = &pc;
  std::map<std::string, const PipelineConfig*> new_by_id;
  for (const PipelineConfig& pc : next.pipelines) new_by_id[pc.id] = &pc;

  // Build everything first: a connector's own checks may reject the edit, and then nothing is
  // touched.
  std::vector<std::pair<std::string, std::unique_ptr<Pipeline>>> to_start, to_restart;
  std::map<std::string, PipelineControl> controls;  // what the API needs to operate each
  std::vector<std::pair<std::string, std::vector<std::unique_ptr<Processor>>>> to_swap;
  auto fail = [&](const std::string& message) {
    r.error = fmt::format("{}: {}", file_, message);
    spdlog::error("reload rejected, the pipelines run on unchanged: {}", r.error);
    return r;
  };
  for (const PipelineConfig& pc : next.pipelines) {
    auto it = old_by_id.find(pc.id);
    if (it != old_by_id.end() && same_but_processors(*it->second, pc)) {
      if (same(it->second->processors, pc.processors)) continue;  // untouched
      std::vector<std::unique_ptr<Processor>> chain;
      for (size_t i = 0; i < pc.processors.size(); ++i) {
        auto p = pc.processors[i].spec->make(pc.processors[i].settings);
        if (!p.ok())
          return fail(prefix_context(
              fmt::format("pipeline {}: processors[{}] ({}): ", pc.id, i, pc.processors[i].type),
              p.error().message()));
        chain.push_back(std::move(p.value()));
      }
      to_swap.emplace_back(pc.id, std::move(chain));
      continue;
    }
    auto p = build_pipeline(pc, checkpoints_);
    if (!p.ok()) return fail(p.error().message());
    controls[pc.id] = make_pipeline_control(pc, checkpoints_);  // for the API's restart etc.
    (it == old_by_id.end() ? to_start : to_restart).emplace_back(pc.id, std::move(p.value()));
  }
  std::vector<std::string> to_remove;
  for (const PipelineConfig& pc : current_.pipelines)
    if (!new_by_id.count(pc.id)) to_remove.push_back(pc.id);

  for (const std::string& id : to_remove) {
    spdlog::info("reload: pipeline {} removed from the file: draining and stopping it", id);
    if (Status st = engine_.remove(id); !st.ok())
      spdlog::warn("pipeline {}: ended with: {}", id, st.error().message());
    r.removed.push_back(id);
  }
  for (auto& [id, p] : to_restart) {
    spdlog::info("reload: pipeline {} changed: draining, checkpointing and restarting it", id);
    if (Status st = engine_.replace(id, std::move(p), std::move(controls[id])); !st.ok())
      spdlog::error("reload: pipeline {}: {}", id, st.error().message());
    r.restarted.push_back(id);
  }
  for (auto& [id, chain] : to_swap) {
    spdlog::info("reload: pipeline {}: processors changed: swapping them (source keeps running)",
                 id);
    if (Status st = engine_.replace_processors(id, std::move(chain)); !st.ok())
      spdlog::error("reload: pipeline {}: {}", id, st.error().message());
    r.processors_replaced.push_back(id);
  }
  for (auto& [id, p] : to_start) {
    spdlog::info("reload: pipeline {} added: starting it", id);
    Status st = engine_.add(std::move(p), std::move(controls[id]));
    if (st.ok()) st = engine_.start(id);
    if (!st.ok()) spdlog::error("reload: pipeline {}: {}", id, st.error().message());
    r.added.push_back(id);
  }
  // Keep the file-level keys in force: a refused change is refused again on the next reload.
  next.checkpoints_path = current_.checkpoints_path;
  next.http_enabled = current_.http_enabled;
  next.http_listen = current_.http_listen;
  next.http_listen_set = current_.http_listen_set;
  next.http_token = current_.http_token;
  next.http_token_file = current_.http_token_file;
  next.http_allow_unauthenticated = current_.http_allow_unauthenticated;
  current_ = std::move(next);
  r.applied = true;
  spdlog::info("reload applied: {}", r.summary());
  return r;
}

}  // namespace sluice
