// `sluice doctor FILE`: for each pipeline, the source's checks (Source::doctor) as a checklist,
// each failure with its fix. Nothing is created on a server and no data moves. Exit 0 when every
// check passed (warnings allowed), 1 when one failed, 2 for a file that does not load.
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/pipeline_factory.h"
#include "config/config.h"
#include "sluice/registry.h"

namespace sluice {

namespace {

void print_check(const DoctorCheck& c) {
  using O = DoctorCheck::Outcome;
  const char* mark = c.outcome == O::pass ? "ok  " : c.outcome == O::warn ? "warn" : "FAIL";
  std::string line = fmt::format("  [{}] {}", mark, c.name);
  if (!c.detail.empty()) line += " — " + c.detail;
  fmt::print("{}\n", line);
  if (c.outcome != O::pass && !c.fix.empty()) fmt::print("         fix: {}\n", c.fix);
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
  int failed = 0, warned = 0, unchecked = 0;
  for (const PipelineConfig& pc : config.pipelines) {
    fmt::print("pipeline {}: {} source\n", pc.id, pc.source.connector);
    auto source = build_source(pc);
    if (!source.ok()) {
      fmt::print(stderr, "sluice: {}\n", source.error().message());
      return 2;
    }
    ConnectorContext ctx{pc.id, pc.source.connector, nullptr};
    auto checks = source.value()->doctor(ctx);
    if (!checks.ok()) {
      if (checks.error().code() == Errc::unsupported) {
        fmt::print("  [--] {}\n", checks.error().message());
        ++unchecked;
        continue;
      }
      print_check({DoctorCheck::Outcome::fail, "the checks ran", checks.error().message(),
                   "see the message"});
      ++failed;
      continue;
    }
    for (const DoctorCheck& c : checks.value()) {
      print_check(c);
      if (c.outcome == DoctorCheck::Outcome::fail) ++failed;
      if (c.outcome == DoctorCheck::Outcome::warn) ++warned;
    }
    // Destinations have no doctor checks yet: say so rather than imply they passed.
    fmt::print("pipeline {}: {} destination\n  [--] no doctor checks for destinations yet\n", pc.id,
               pc.destination.connector);
  }
  fmt::print("{} failed, {} warning{}{}\n", failed, warned, warned == 1 ? "" : "s",
             unchecked
                 ? fmt::format(", {} source{} without checks", unchecked, unchecked == 1 ? "" : "s")
                 : std::string());
  return failed ? 1 : 0;
}

}  // namespace sluice
