#include "cli/pipeline_control.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>

#include "cli/logging.h"
#include "cli/pipeline_factory.h"
#include "sluice/json.h"
#include "sluice/record.h"
#include "sluice/secrets.h"

namespace sluice {

namespace {

std::string json_quoted(std::string_view s) { return "\"" + json_escape(s) + "\""; }

bool credential_key(std::string_view key) {
  return key.ends_with("password") || key.find("secret") != std::string_view::npos ||
         key.ends_with("token");
}

std::string setting_json(const SettingValue& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return json_quoted(redact(x));
        } else if constexpr (std::is_same_v<T, bool>) {
          return x ? "true" : "false";
        } else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, uint64_t>) {
          return std::to_string(x);
        } else if constexpr (std::is_same_v<T, double>) {
          return fmt::format("{}", x);
        } else if constexpr (std::is_same_v<T, std::chrono::milliseconds>) {
          return json_quoted(fmt::format("{}ms", x.count()));
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          std::string out = "[";
          for (size_t i = 0; i < x.size(); ++i) out += (i ? "," : "") + json_quoted(redact(x[i]));
          return out + "]";
        } else {
          std::string out = "{";
          bool first = true;
          for (const auto& [k, val] : x) {
            out += (first ? "" : ",") + json_quoted(k) + ":";
            if constexpr (std::is_same_v<T, std::map<std::string, double>>)
              out += fmt::format("{}", val);
            else out += credential_key(k) ? json_quoted("***") : json_quoted(redact(val));
            first = false;
          }
          return out + "}";
        }
      },
      v);
}

std::string settings_json(const Settings& settings) {
  std::string out = "{";
  bool first = true;
  for (const auto& [key, value] : settings.values()) {
    const SettingSpec* spec = find_setting(settings.spec(), key);
    out += (first ? "" : ",") + json_quoted(key) + ":";
    out += (spec && spec->secret) || credential_key(key) ? json_quoted("***") : setting_json(value);
    first = false;
  }
  return out + "}";
}

std::string connector_json(const ConnectorConfig& c) {
  return fmt::format("{{\"connector\":{},\"settings\":{}}}", json_quoted(c.connector),
                     settings_json(c.settings));
}

std::string processors_json(const std::vector<ProcessorConfig>& processors) {
  std::string out = "[";
  for (size_t i = 0; i < processors.size(); ++i)
    out += fmt::format("{}{{\"type\":{},\"settings\":{}}}", i ? "," : "",
                       json_quoted(processors[i].type), settings_json(processors[i].settings));
  return out + "]";
}

const char* on_error_name(OnError e) { return e == OnError::dlq ? "dlq" : "stop"; }

// A `file` dead-letter queue: one OpenCDC JSON record per line, appended by the pipeline's dlq
// destination. Read back line by line; replay writes records into a fresh instance of the
// pipeline's destination; both replay and discard rewrite the file (a temporary file renamed
// over it) with the pipeline stopped, so nothing appends meanwhile.
class FileDeadLetterQueue final : public DeadLetterQueue {
 public:
  FileDeadLetterQueue(PipelineConfig config, std::string path)
      : config_(std::move(config)), path_(std::move(path)) {}

  Result<std::vector<DeadLetterEntry>> list() override {
    SLUICE_TRY_ASSIGN(std::vector<std::string> lines, read_lines());
    std::vector<DeadLetterEntry> out;
    for (size_t i = 0; i < lines.size(); ++i) {
      DeadLetterEntry e;
      e.index = i;
      Batch b;
      if (decode_record_json(lines[i], b).ok() && !b.records().empty()) {
        const Record& r = b.records().front();
        e.reason = std::string(r.meta(meta::kError));
        e.destination = std::string(r.meta("sluice.destination"));
        e.record_json = lines[i];
      } else {
        e.reason = "(not an OpenCDC record line)";
        e.record_json = "null";
      }
      out.push_back(std::move(e));
    }
    return out;
  }

  Result<DeadLetterReplay> replay(std::optional<size_t> index) override {
    SLUICE_TRY_ASSIGN(std::vector<std::string> lines, read_lines());
    SLUICE_TRY(check_index(index, lines.size()));
    auto made = config_.destination.spec->make_destination(config_.destination.settings);
    if (!made.ok())
      return std::move(made).error().with_context(
          fmt::format("pipeline {}: {} destination: ", config_.id, config_.destination.connector));
    Destination& d = *made.value();
    ConnectorContext ctx{config_.id, config_.destination.connector, nullptr};
    SLUICE_TRY(d.open(ctx));
    // A destination that stores its position gets the one it has: a replay moves no position.
    std::string position;
    if (d.stores_positions()) {
      auto stored = d.stored_position(config_.id);
      if (!stored.ok()) {
        d.close();
        return std::move(stored).error();
      }
      position = stored.value().value_or("");
    }
    DeadLetterReplay out;
    std::vector<bool> keep(lines.size(), true);
    for (size_t i = 0; i < lines.size(); ++i) {
      if (index && *index != i) continue;
      Status st = write_one(d, lines[i], position);
      if (st.ok()) {
        keep[i] = false;
        ++out.replayed;
      } else {
        ++out.failed;
        out.errors.push_back(fmt::format("entry {}: {}", i, st.error().message()));
        if (st.error().retriable()) break;  // the destination is down: keep the rest
      }
    }
    Status flushed = d.flush(std::chrono::seconds(60));
    d.close();
    if (!flushed.ok())
      return std::move(flushed).error().with_context(
          "the replayed records may not have landed (the queue is unchanged): ");
    SLUICE_TRY(rewrite(lines, keep));
    spdlog::info("pipeline {}: dead-letter queue: {} replayed into the {} destination, {} failed",
                 config_.id, out.replayed, config_.destination.connector, out.failed);
    return out;
  }

  Result<size_t> discard(std::optional<size_t> index) override {
    SLUICE_TRY_ASSIGN(std::vector<std::string> lines, read_lines());
    SLUICE_TRY(check_index(index, lines.size()));
    std::vector<bool> keep(lines.size(), index.has_value());
    if (index) keep[*index] = false;
    SLUICE_TRY(rewrite(lines, keep));
    const size_t n = index ? 1 : lines.size();
    spdlog::info("pipeline {}: dead-letter queue: {} discarded", config_.id, n);
    return n;
  }

 private:
  Status check_index(std::optional<size_t> index, size_t size) const {
    if (index && *index >= size)
      return Error(Errc::not_found,
                   fmt::format("the dead-letter queue of pipeline '{}' has no entry {} (it has {})",
                               config_.id, *index, size));
    return ok_status();
  }

  // Whole lines only: a line the dead-letter destination is still writing has no '\n' yet.
  Result<std::vector<std::string>> read_lines() const {
    std::vector<std::string> out;
    std::ifstream in(path_, std::ios::binary);
    if (!in) {
      if (!std::filesystem::exists(path_)) return out;  // nothing dead-lettered yet
      return Error(Errc::io, fmt::format("cannot read the dead-letter queue {}", path_));
    }
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    size_t start = 0;
    for (size_t nl = text.find('\n'); nl != std::string::npos; nl = text.find('\n', start)) {
      if (nl > start) out.push_back(text.substr(start, nl - start));
      start = nl + 1;
    }
    return out;
  }

  Status rewrite(const std::vector<std::string>& lines, const std::vector<bool>& keep) const {
    const std::string tmp = path_ + ".rewrite";
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      for (size_t i = 0; i < lines.size(); ++i)
        if (keep[i]) out << lines[i] << '\n';
      out.flush();
      if (!out) return Error(Errc::io, fmt::format("cannot write {}", tmp));
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path_, ec);
    if (ec) return Error(Errc::io, fmt::format("cannot replace {}: {}", path_, ec.message()));
    return ok_status();
  }

  // Writes one dead-lettered record (without the sluice.* metadata the runtime added).
  static Status write_one(Destination& d, const std::string& line, const std::string& position) {
    Batch decoded;
    SLUICE_TRY(decode_record_json(line, decoded));
    if (decoded.records().empty()) return Error(Errc::data, "an empty line");
    Batch batch;
    // The record's values live in `decoded`'s arena, which outlives the write.
    Record& r = batch.add();
    r = decoded.records().front();
    if (r.metadata.is_object()) {
      auto fields = r.metadata.fields();
      auto kept = batch.object(static_cast<uint32_t>(fields.size()));
      for (const Field& f : fields)
        if (!f.name.starts_with("sluice.")) kept.add(f.name, f.value);
      r.metadata = kept.build();
    }
    if (!position.empty()) batch.set_position(position);
    std::promise<Status> done;
    auto result = done.get_future();
    d.write(batch, [&done](Status st) { done.set_value(std::move(st)); });
    return result.get();
  }

  PipelineConfig config_;
  std::string path_;
};

// What the source keeps on its server for the pipeline, from its doctor checks (nothing is
// created or moved): the check of the slot's WAL (postgres), empty when none says.
std::string retained_by_source(const PipelineConfig& pc) {
  auto source = build_source(pc);
  if (!source.ok()) return {};
  ConnectorContext ctx{pc.id, pc.source.connector, nullptr};
  auto checks = source.value()->doctor(ctx, std::nullopt);
  if (!checks.ok()) return {};
  for (const DoctorCheck& c : checks.value())
    if (c.name.find("still has its WAL") != std::string::npos ||
        c.name.find("retain") != std::string::npos)
      return c.detail;
  return {};
}

}  // namespace

std::string pipeline_config_json(const PipelineConfig& pc) {
  std::string out = fmt::format("{{\"id\":{},\"source\":{},\"processors\":{}", json_quoted(pc.id),
                                connector_json(pc.source), processors_json(pc.processors));
  if (pc.destinations.empty()) {
    out += ",\"destination\":" + connector_json(pc.destination);
  } else {
    out += ",\"destinations\":[";
    for (size_t i = 0; i < pc.destinations.size(); ++i) {
      const DestinationConfig& d = pc.destinations[i];
      out += fmt::format(
          "{}{{\"name\":{},\"connector\":{},\"settings\":{},\"processors\":{},"
          "\"on_error\":{},\"dlq\":{}}}",
          i ? "," : "", json_quoted(d.name), json_quoted(d.connector.connector),
          settings_json(d.connector.settings), processors_json(d.processors),
          json_quoted(on_error_name(d.on_error)),
          d.dlq ? connector_json(*d.dlq) : std::string("null"));
    }
    out += "]";
  }
  out += fmt::format(
      ",\"batch\":{{\"max_records\":{},\"max_bytes\":{},\"linger_ms\":{}}},\"on_error\":{},"
      "\"dlq\":{},\"stall_timeout_ms\":{}",
      pc.batch.max_records, pc.batch.max_bytes, pc.batch.linger.count(),
      json_quoted(on_error_name(pc.on_error)),
      pc.dlq ? connector_json(*pc.dlq) : std::string("null"), pc.stall_timeout.count());
  if (pc.spool)
    out +=
        fmt::format(",\"spool\":{{\"type\":{},\"path\":{},\"segment_size\":{},\"max_bytes\":{}}}",
                    json_quoted(pc.spool->type), json_quoted(pc.spool->path),
                    pc.spool->segment_size, pc.spool->max_bytes);
  return redact(out + "}");
}

PipelineControl make_pipeline_control(const PipelineConfig& pc, CheckpointStore* checkpoints) {
  PipelineControl c;
  c.rebuild = [pc, checkpoints]() { return build_pipeline(pc, checkpoints); };
  c.request_snapshot = [pc](const std::vector<std::string>& tables) -> Status {
    SLUICE_TRY_ASSIGN(auto source, build_source(pc));
    ConnectorContext ctx{pc.id, pc.source.connector, nullptr};
    if (Status st = source->request_snapshot(ctx, tables); !st.ok())
      return std::move(st).error().with_context(
          fmt::format("pipeline {}: {} source: ", pc.id, pc.source.connector));
    spdlog::info("pipeline {}: incremental snapshot of {} requested", pc.id,
                 fmt::join(tables, ", "));
    return ok_status();
  };
  c.retained_log = [pc] { return retained_by_source(pc); };
  c.config_json = pipeline_config_json(pc);
  if (!pc.destinations.empty()) {
    c.dead_letters_unsupported =
        "a pipeline with several destinations: each has its own dead-letter queue, which the API "
        "does not browse yet";
  } else if (pc.on_error != OnError::dlq || !pc.dlq) {
    c.dead_letters_unsupported = "the pipeline has no dead-letter queue (on_error: stop)";
  } else if (pc.dlq->connector != "file") {
    c.dead_letters_unsupported = fmt::format(
        "its dead-letter queue is a {} destination; only a file one can be listed, replayed and "
        "discarded through the API",
        pc.dlq->connector);
  } else {
    auto path = pc.dlq->settings.values().find("path");
    const std::string* text =
        path == pc.dlq->settings.values().end() ? nullptr : std::get_if<std::string>(&path->second);
    if (text) c.dead_letters = std::make_shared<FileDeadLetterQueue>(pc, *text);
    else c.dead_letters_unsupported = "its file dead-letter queue has no path";
  }
  return c;
}

}  // namespace sluice
