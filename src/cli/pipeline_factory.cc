#include "cli/pipeline_factory.h"

#include <fmt/format.h>

namespace sluice {

Result<std::unique_ptr<Source>> build_source(const PipelineConfig& config) {
  auto source = config.source.spec->make_source(config.source.settings);
  if (!source.ok())
    return std::move(source).error().with_context(
        fmt::format("pipeline {}: {} source: ", config.id, config.source.connector));
  return source;
}

Result<std::unique_ptr<Pipeline>> build_pipeline(const PipelineConfig& config,
                                                 CheckpointStore* checkpoints) {
  auto source = build_source(config);
  if (!source.ok()) return std::move(source).error();
  std::vector<std::unique_ptr<Processor>> processors;
  for (size_t i = 0; i < config.processors.size(); ++i) {
    const ProcessorConfig& pc = config.processors[i];
    auto p = pc.spec->make(pc.settings);
    if (!p.ok())
      return std::move(p).error().with_context(
          fmt::format("pipeline {}: processors[{}] ({}): ", config.id, i, pc.type));
    processors.push_back(std::move(p.value()));
  }
  auto destination = config.destination.spec->make_destination(config.destination.settings);
  if (!destination.ok())
    return std::move(destination)
        .error()
        .with_context(
            fmt::format("pipeline {}: {} destination: ", config.id, config.destination.connector));

  std::unique_ptr<Destination> dlq;
  if (config.on_error == OnError::dlq && config.dlq) {
    auto d = config.dlq->spec->make_destination(config.dlq->settings);
    if (!d.ok())
      return std::move(d).error().with_context(
          fmt::format("pipeline {}: dlq ({}): ", config.id, config.dlq->connector));
    dlq = std::move(d.value());
  }

  PipelineOptions options;
  options.id = config.id;
  options.source_connector = config.source.connector;
  options.destination_connector = config.destination.connector;
  options.max_records = config.batch.max_records;
  if (size_t preferred = destination.value()->preferred_max_records();
      !config.batch.max_records_set && preferred > 0 && preferred < options.max_records) {
    options.max_records = preferred;
  }
  options.max_bytes = config.batch.max_bytes;
  options.linger = config.batch.linger;
  options.on_error = config.on_error == OnError::dlq ? PipelineOptions::OnError::dlq
                                                     : PipelineOptions::OnError::stop;
  if (config.dlq) options.dlq_connector = config.dlq->connector;
  options.stall_timeout = config.stall_timeout;
  if (config.spool) {
    spool::DiskSpoolOptions so;
    so.path = config.spool->path;
    so.segment_bytes = config.spool->segment_size;
    so.max_bytes = config.spool->max_bytes;
    so.when_full = config.spool->when_full == SpoolWhenFull::fail
                       ? spool::DiskSpoolOptions::WhenFull::fail
                       : spool::DiskSpoolOptions::WhenFull::block;
    so.fsync = config.spool->fsync;
    options.spool = std::move(so);
  }
  return std::make_unique<Pipeline>(std::move(options), std::move(source.value()),
                                    std::move(processors), std::move(destination.value()),
                                    checkpoints, std::move(dlq));
}

}  // namespace sluice
