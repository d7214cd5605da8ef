// Turns a validated pipeline configuration into a runnable Pipeline (connectors constructed, not
// yet opened).
#pragma once

#include <memory>

#include "config/config.h"
#include "runtime/pipeline.h"

namespace sluice {

Result<std::unique_ptr<Pipeline>> build_pipeline(const PipelineConfig& config,
                                                 CheckpointStore* checkpoints);
Result<std::unique_ptr<Source>> build_source(const PipelineConfig& config);

}  // namespace sluice
