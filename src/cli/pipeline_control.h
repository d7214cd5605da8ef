// The engine's PipelineControl for one configured pipeline (engine/pipeline_control.h): how to
// build it again (resume, restart), ask its source for a snapshot, tell what its source retains,
// its resolved configuration as JSON (secrets redacted), and its dead-letter queue when that is
// a `file` one (the only kind that can be read back and rewritten).
#pragma once

#include "config/config.h"
#include "engine/pipeline_control.h"
#include "sluice/checkpoint.h"

namespace sluice {

PipelineControl make_pipeline_control(const PipelineConfig& config, CheckpointStore* checkpoints);

// The resolved configuration of a pipeline as a JSON object: every setting with its defaults,
// secret values (declared secret, or named like a credential) as "***", URL passwords masked.
std::string pipeline_config_json(const PipelineConfig& config);

}  // namespace sluice
