// `sluice doctor FILE`: for each pipeline, the source's checks (Source::doctor), each destination's
// (Destination::doctor, the dead-letter destination's too) and the free disk space of the
// checkpoint file's and the spool's directories, as a checklist, each failure with its fix.
// Nothing is created on a server and no data moves. Exit 0 when every check passed (warnings
// allowed), 1 when one failed, 2 for a file that does not load.
#include <fmt/format.h>

#include <filesystem>

#include "cli/commands.h"
#include "cli/pipeline_factory.h"
#include "config/config.h"
#include "sluice/checkpoint.h"
#include "sluice/registry.h"

namespace sluice {

namespace {

namespace fs = std::filesystem;
using Outcome = DoctorCheck::Outcome;

// The free space a directory sluice writes must have at least: below it a checkpoint or spool
// write may fail with ENOSPC and stop the pipeline. A spool with `max_bytes` needs that much.
constexpr uint64_t kMinFreeBytes = uint64_t(1) << 30;  // 1 GiB

std::string pretty_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (b >= 1024 && u < 5) {
    b /= 1024;
    ++u;
  }
  return fmt::format("{:.1f} {}", b, units[u]);
}

struct Tally {
  int failed = 0, warned = 0, unchecked = 0;
};

void print_check(const DoctorCheck& c, Tally& t) {
  const char* mark = c.outcome == Outcome::pass   ? "ok  "
                     : c.outcome == Outcome::warn ? "warn"
                                                  : "FAIL";
  std::string line = fmt::format("  [{}] {}", mark, c.name);
  if (!c.detail.empty()) line += " — " + c.detail;
  fmt::print("{}\n", line);
  if (c.outcome != Outcome::pass && !c.fix.empty()) fmt::print("         fix: {}\n", c.fix);
  if (c.outcome == Outcome::fail) ++t.failed;
  if (c.outcome == Outcome::warn) ++t.warned;
}

// A connector's checks, or the line saying it has none (never implying they passed).
void print_checks(const Result<std::vector<DoctorCheck>>& checks, Tally& t) {
  if (!checks.ok()) {
    if (checks.error().code() == Errc::unsupported) {
      fmt::print("  [--] {}\n", checks.error().message());
      ++t.unchecked;
      return;
    }
    print_check({Outcome::fail, "the checks ran", checks.error().message(), "see the message"}, t);
    return;
  }
  for (const DoctorCheck& c : checks.value()) print_check(c, t);
}

// Free space where `path` is (or would be created: its nearest existing ancestor).
DoctorCheck disk_check(const std::string& what, const std::string& path, uint64_t need) {
  std::error_code ec;
  fs::path p = fs::absolute(path.empty() ? fs::path(".") : fs::path(path), ec);
  while (!p.empty() && !fs::exists(p, ec) && p != p.parent_path()) p = p.parent_path();
  const std::string name = fmt::format("{} has at least {} free", what, pretty_bytes(double(need)));
  auto space = fs::space(p, ec);
  if (ec)
    return {Outcome::fail, name,
            fmt::format("cannot read the free space of {}: {}", p.string(), ec.message()),
            "check that the directory exists and is readable"};
  const std::string detail =
      fmt::format("{} free of {} at {}", pretty_bytes(double(space.available)),
                  pretty_bytes(double(space.capacity)), p.string());
  if (space.available >= need) return {Outcome::pass, name, detail, {}};
  return {Outcome::fail, name, detail,
          "free space on that file system, or point the setting at a larger one"};
}

// The pipeline's stored position, when the checkpoint file exists (doctor creates nothing); a
// store it cannot read (a running sluice holds its lock) is a warning: the checks that compare
// the server with the checkpoint are then skipped.
std::optional<std::string> stored_checkpoint(const Config& config, const std::string& id,
                                             Tally& t) {
  std::error_code ec;
  if (!fs::exists(config.checkpoints_path, ec)) return std::nullopt;
  auto store = open_sqlite_checkpoint_store(config.checkpoints_path);
  Result<std::optional<std::string>> p =
      store.ok() ? store.value()->load(id) : Result<std::optional<std::string>>(store.error());
  if (p.ok()) return p.value();
  print_check({Outcome::warn, "the checkpoint can be read", p.error().message(),
               "stop the sluice that runs this file to compare the servers with its checkpoint"},
              t);
  return std::nullopt;
}

void doctor_destination(const PipelineConfig& pc, const ConnectorConfig& dc,
                        const std::string& label, const std::string& name,
                        const std::vector<SourceTable>& tables, Tally& t, bool dlq = false) {
  fmt::print("pipeline {}: {} {}\n", pc.id, dc.connector, label);
  auto made = dc.spec->make_destination(dc.settings);
  if (!made.ok()) {
    print_check({Outcome::fail, "the destination's settings", made.error().message(), "fix them"},
                t);
    return;
  }
  ConnectorContext ctx{pc.id, dc.connector, nullptr};
  ctx.destination = name;
  ctx.is_dead_letter_queue = dlq;
  print_checks(made.value()->doctor(ctx, tables), t);
}

}  // namespace

int doctor_command(const std::string& file) {
  Config config;
  try {
    config = load_config_file(file, Registry::builtin());
  } catch (const ConfigError& e) {
    fmt::print(stderr, "sluice: {}\n", e.what());
    return 2;
  }
  Tally t;
  for (const PipelineConfig& pc : config.pipelines) {
    fmt::print("pipeline {}: {} source\n", pc.id, pc.source.connector);
    auto source = build_source(pc);
    if (!source.ok()) {
      fmt::print(stderr, "sluice: {}\n", source.error().message());
      return 2;
    }
    ConnectorContext ctx{pc.id, pc.source.connector, nullptr};
    const std::optional<std::string> checkpoint = stored_checkpoint(config, pc.id, t);
    print_checks(source.value()->doctor(ctx, checkpoint), t);
    const std::vector<SourceTable> tables = source.value()->captured_tables();
    source.value()->close();
    if (pc.destinations.empty()) {
      doctor_destination(pc, pc.destination, "destination", {}, tables, t);
      if (pc.dlq) doctor_destination(pc, *pc.dlq, "dead-letter destination", {}, {}, t, true);
    } else {
      for (const DestinationConfig& d : pc.destinations) {
        doctor_destination(pc, d.connector, fmt::format("destination {}", d.name), d.name, tables,
                           t);
        if (d.dlq)
          doctor_destination(pc, *d.dlq, fmt::format("dead-letter destination of {}", d.name),
                             d.name + ".dlq", {}, t, true);
      }
    }
    fmt::print("pipeline {}: disk\n", pc.id);
    print_check(disk_check("the checkpoint directory",
                           fs::path(config.checkpoints_path).parent_path().string(), kMinFreeBytes),
                t);
    if (pc.spool)
      print_check(disk_check("the spool directory", pc.spool->path,
                             std::max(kMinFreeBytes, pc.spool->max_bytes)),
                  t);
  }
  std::string tail;
  if (t.unchecked)
    tail = fmt::format(", {} connector{} without checks", t.unchecked, t.unchecked == 1 ? "" : "s");
  fmt::print("{} failed, {} warning{}{}\n", t.failed, t.warned, t.warned == 1 ? "" : "s", tail);
  return t.failed ? 1 : 0;
}

}  // namespace sluice
