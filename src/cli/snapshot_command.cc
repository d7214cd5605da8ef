// `sluice snapshot FILE PIPELINE TABLE…`: asks the pipeline's source for an incremental snapshot
// of the tables, by writing an execute-snapshot signal into its signal table (the source's
// `signal.table`) through the pipeline's own source settings. A running pipeline picks it up from
// its change stream; a stopped one when it next runs. docs/incremental-snapshots.md.
#include <fmt/format.h>

#include <algorithm>

#include "cli/commands.h"
#include "cli/pipeline_factory.h"
#include "config/config.h"
#include "sluice/registry.h"

namespace sluice {

int snapshot_command(const std::string& file, const std::string& pipeline,
                     const std::vector<std::string>& tables) {
  Config config;
  try {
    config = load_config_file(file, Registry::builtin());
  } catch (const ConfigError& e) {
    fmt::print(stderr, "sluice: {}\n", e.what());
    return 2;
  }
  auto it = std::find_if(config.pipelines.begin(), config.pipelines.end(),
                         [&](const PipelineConfig& pc) { return pc.id == pipeline; });
  if (it == config.pipelines.end()) {
    std::vector<std::string> ids;
    for (const PipelineConfig& pc : config.pipelines) ids.push_back(pc.id);
    fmt::print(stderr, "sluice: {} has no pipeline '{}' (it has: {})\n", file, pipeline,
               fmt::join(ids, ", "));
    return 2;
  }
  auto source = build_source(*it);
  if (!source.ok()) {
    fmt::print(stderr, "sluice: {}\n", source.error().message());
    return 2;
  }
  ConnectorContext ctx{it->id, it->source.connector, nullptr};
  if (Status st = source.value()->request_snapshot(ctx, tables); !st.ok()) {
    fmt::print(stderr, "sluice: pipeline {}: {} source: {}\n", it->id, it->source.connector,
               st.error().message());
    return st.error().code() == Errc::config || st.error().code() == Errc::unsupported ? 2 : 1;
  }
  fmt::print("pipeline {}: incremental snapshot of {} requested\n", it->id,
             fmt::join(tables, ", "));
  return 0;
}

}  // namespace sluice
