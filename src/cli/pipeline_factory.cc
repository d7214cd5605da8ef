#include "cli/pipeline_factory.h"

#include <fmt/format.h>

#include "connectors/build_options.h"  // generated: SLUICE_WITH_<NAME>
#if SLUICE_WITH_REDIS
#include "connectors/redis/redis_spool.h"
#endif

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
#if !SLUICE_WITH_REDIS
  if (config.spool && config.spool->type == "redis")
    return Error(Errc::unsupported,
                 fmt::format("pipeline {}: spool: this sluice was built without Redis "
                             "(SLUICE_WITH_REDIS=OFF); use spool type disk",
                             config.id));
#endif
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
  if (!config.destinations.empty() && config.spool) {
    // Several destinations over a spool: each reads it at its own pace (runtime/pipeline.h).
    auto lanes = build_lanes(config);
    if (!lanes.ok()) return std::move(lanes).error();
    size_t storing = 0;
    std::string names;
    for (const FanOutLane& l : lanes.value())
      if (l.destination->stores_positions()) {
        ++storing;
        names += (names.empty() ? "" : ", ") + l.name;
      }
    // Each would store its own spool position under the pipeline's id: two in one place (one
    // table, one topic) would overwrite each other's.
    if (storing > 1)
      return Error(Errc::config,
                   fmt::format("pipeline {}: with a spool, at most one destination may store its "
                               "position itself (checkpoint_in_destination, Kafka transactions); "
                               "{} do: keep it on one (the others resume from their own spool "
                               "checkpoint and upsert by key), or give them pipelines of their own",
                               config.id, names));
    return make_spooled_fan_out(config, std::move(source.value()), std::move(processors),
                                std::move(lanes.value()), checkpoints);
  }
  if (!config.destinations.empty()) {
    const Source* src = source.value().get();
    auto fan_out = build_fan_out(config, [src](std::string_view a, std::string_view b) {
      return src->compare_positions(a, b);
    });
    if (!fan_out.ok()) return std::move(fan_out).error();
    return make_pipeline(config, std::move(source.value()), std::move(processors),
                         std::move(fan_out.value()), checkpoints, nullptr);
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
  return make_pipeline(config, std::move(source.value()), std::move(processors),
                       std::move(destination.value()), checkpoints, std::move(dlq));
}

namespace {

// "destinations[1] (sqlite-1): "
std::string lane_context(const PipelineConfig& config, size_t i) {
  return fmt::format("pipeline {}: destinations[{}] ({}): ", config.id, i,
                     config.destinations[i].name);
}

}  // namespace

Result<std::unique_ptr<FanOutDestination>> build_fan_out(const PipelineConfig& config,
                                                         PositionOrder order) {
  auto lanes = build_lanes(config);
  if (!lanes.ok()) return std::move(lanes).error();
  return std::make_unique<FanOutDestination>(std::move(lanes.value()), std::move(order));
}

Result<std::vector<FanOutLane>> build_lanes(const PipelineConfig& config) {
  std::vector<FanOutLane> lanes;
  for (size_t i = 0; i < config.destinations.size(); ++i) {
    const DestinationConfig& dc = config.destinations[i];
    FanOutLane lane;
    lane.name = dc.name;
    lane.connector = dc.connector.connector;
    auto d = dc.connector.spec->make_destination(dc.connector.settings);
    if (!d.ok())
      return std::move(d).error().with_context(lane_context(config, i) + dc.connector.connector +
                                               " destination: ");
    lane.destination = std::move(d.value());
    for (size_t j = 0; j < dc.processors.size(); ++j) {
      const ProcessorConfig& pc = dc.processors[j];
      auto p = pc.spec->make(pc.settings);
      if (!p.ok())
        return std::move(p).error().with_context(
            fmt::format("{}processors[{}] ({}): ", lane_context(config, i), j, pc.type));
      lane.processors.push_back(std::move(p.value()));
    }
    lane.dead_letters = dc.on_error == OnError::dlq;
    if (lane.dead_letters && dc.dlq) {
      auto q = dc.dlq->spec->make_destination(dc.dlq->settings);
      if (!q.ok())
        return std::move(q).error().with_context(
            fmt::format("{}dlq ({}): ", lane_context(config, i), dc.dlq->connector));
      lane.dlq_connector = dc.dlq->connector;
      lane.dlq = std::move(q.value());
    }
    lanes.push_back(std::move(lane));
  }
  return lanes;
}

namespace {

// The pipeline's spool (`spool:`), disk or redis.
void set_spool(const PipelineConfig& config, PipelineOptions& options) {
  if (config.spool && config.spool->type == "redis") {
#if SLUICE_WITH_REDIS
    redis::RedisSpoolOptions ro;
    ro.url = config.spool->url;
    ro.key = config.spool->key;
    ro.max_bytes = config.spool->max_bytes;
    ro.fail_when_full = config.spool->when_full == SpoolWhenFull::fail;
    ro.fsync = config.spool->fsync;
    options.spool_type = "redis";
    options.make_spool = [ro](const std::vector<std::string>& readers) {
      redis::RedisSpoolOptions o = ro;
      o.readers = readers;
      return std::unique_ptr<spool::Spool>(std::make_unique<redis::RedisSpool>(std::move(o)));
    };
#endif
  } else if (config.spool) {
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
}

// batch.max_records as given, else its default lowered to what the destination prefers and, with
// a spool, to kSpooledMaxRecords: a spooled pipeline holds two pools of batches (either side of
// the spool) and serialized copies of the batches being spooled and read back (a Redis spool's
// client buffers hold several), so its batches are smaller to keep the same memory bound as an
// unspooled one. 2,500 measured 37 / 43 MB peak (disk / Redis spool, PostgreSQL CDC →
// PostgreSQL) against 59–63 / 73–77 MB with 5,000 (benchmarks/2026-12-04-spool-batches-2500).
constexpr size_t kSpooledMaxRecords = 2500;
size_t batch_max_records(const PipelineConfig& config, size_t preferred) {
  size_t n = config.batch.max_records;
  if (config.batch.max_records_set) return n;
  if (preferred > 0) n = std::min(n, preferred);
  if (config.spool) n = std::min(n, kSpooledMaxRecords);
  return n;
}

PipelineOptions base_options(const PipelineConfig& config, size_t preferred_max_records) {
  PipelineOptions options;
  options.id = config.id;
  options.source_connector = config.source.connector;
  options.max_records = batch_max_records(config, preferred_max_records);
  options.max_bytes = config.batch.max_bytes;
  options.linger = config.batch.linger;
  options.stall_timeout = config.stall_timeout;
  set_spool(config, options);
  return options;
}

}  // namespace

std::unique_ptr<Pipeline> make_spooled_fan_out(const PipelineConfig& config,
                                               std::unique_ptr<Source> source,
                                               std::vector<std::unique_ptr<Processor>> processors,
                                               std::vector<FanOutLane> lanes,
                                               CheckpointStore* checkpoints) {
  size_t preferred = 0;  // the smallest preference among the destinations
  for (const FanOutLane& l : lanes)
    if (size_t p = l.destination->preferred_max_records(); p > 0)
      preferred = preferred == 0 ? p : std::min(preferred, p);
  PipelineOptions options = base_options(config, preferred);
  for (const FanOutLane& l : lanes)
    options.destination_connector += (options.destination_connector.empty() ? "" : "+") + l.name;
  return std::make_unique<Pipeline>(std::move(options), std::move(source), std::move(processors),
                                    std::move(lanes), checkpoints);
}

std::unique_ptr<Pipeline> make_pipeline(const PipelineConfig& config,
                                        std::unique_ptr<Source> source,
                                        std::vector<std::unique_ptr<Processor>> processors,
                                        std::unique_ptr<Destination> destination,
                                        CheckpointStore* checkpoints,
                                        std::unique_ptr<Destination> dlq) {
  PipelineOptions options;
  options.id = config.id;
  options.source_connector = config.source.connector;
  if (config.destinations.empty()) {
    options.destination_connector = config.destination.connector;
  } else {
    // Several destinations: each has its own on_error and DLQ (the fan-out handles them).
    for (const DestinationConfig& d : config.destinations)
      options.destination_connector += (options.destination_connector.empty() ? "" : "+") + d.name;
  }
  options.max_records = batch_max_records(config, destination->preferred_max_records());
  options.max_bytes = config.batch.max_bytes;
  options.linger = config.batch.linger;
  options.on_error = config.on_error == OnError::dlq && dlq ? PipelineOptions::OnError::dlq
                                                            : PipelineOptions::OnError::stop;
  if (config.dlq && dlq) options.dlq_connector = config.dlq->connector;
  options.stall_timeout = config.stall_timeout;
  set_spool(config, options);
  return std::make_unique<Pipeline>(std::move(options), std::move(source), std::move(processors),
                                    std::move(destination), checkpoints, std::move(dlq));
}

}  // namespace sluice

namespace sluice {

Status remove_spool(const SpoolConfig& spool) {
#if SLUICE_WITH_REDIS
  if (spool.type == "redis") return redis::remove_redis_spool(spool.url, spool.key);
#endif
  if (spool.type == "disk") return spool::remove_disk_spool(spool.path);
  return Error(Errc::unsupported, fmt::format("spool type {} is not built in", spool.type));
}

}  // namespace sluice
