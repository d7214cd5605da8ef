// Turns a validated pipeline configuration into a runnable Pipeline (connectors constructed, not
// yet opened).
#pragma once

#include <memory>

#include "config/config.h"
#include "runtime/fan_out_destination.h"
#include "runtime/pipeline.h"

namespace sluice {

Result<std::unique_ptr<Pipeline>> build_pipeline(const PipelineConfig& config,
                                                 CheckpointStore* checkpoints);
Result<std::unique_ptr<Source>> build_source(const PipelineConfig& config);
// `destinations:`: the fan-out over them (constructed, not opened); `order` compares the
// source's positions.
Result<std::unique_ptr<FanOutDestination>> build_fan_out(const PipelineConfig& config,
                                                         PositionOrder order);
// `destinations:`: each one constructed (destination, processors, dlq), not opened.
Result<std::vector<FanOutLane>> build_lanes(const PipelineConfig& config);
// `spool:` with `destinations:`: one source side writing the spool, one reader per destination.
std::unique_ptr<Pipeline> make_spooled_fan_out(const PipelineConfig& config,
                                               std::unique_ptr<Source> source,
                                               std::vector<std::unique_ptr<Processor>> processors,
                                               std::vector<FanOutLane> lanes,
                                               CheckpointStore* checkpoints);
std::unique_ptr<Pipeline> make_pipeline(const PipelineConfig& config,
                                        std::unique_ptr<Source> source,
                                        std::vector<std::unique_ptr<Processor>> processors,
                                        std::unique_ptr<Destination> destination,
                                        CheckpointStore* checkpoints,
                                        std::unique_ptr<Destination> dlq);
// `sluice cleanup`: deletes what a pipeline's spool holds (segment files, or the Redis stream).
Status remove_spool(const SpoolConfig& spool);

}  // namespace sluice
