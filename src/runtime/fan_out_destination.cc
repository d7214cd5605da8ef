#include "runtime/fan_out_destination.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <functional>
#include <future>
#include <span>

#include "sluice/log_context.h"
#include "sluice/result.h"
#include "sluice/secrets.h"

namespace sluice {

namespace {

size_t count_control(const Batch& batch) noexcept {
  size_t n = 0;
  for (const Record& r : batch.records()) n += is_control(r.op) ? 1 : 0;
  return n;
}

// "destination kafka-2 (kafka): "
std::string lane_context(const FanOutLane& lane) {
  return lane.name == lane.connector
             ? fmt::format("destination {}: ", lane.name)
             : fmt::format("destination {} ({}): ", lane.name, lane.connector);
}

}  // namespace

struct FanOutDestination::Round {
  const Batch* batch = nullptr;
  std::mutex mu;
  std::condition_variable cv;
  size_t remaining = 0;
  std::optional<Error> error;  // a fatal one wins over a retriable one
};

struct FanOutDestination::Lane {
  explicit Lane(FanOutLane c) : cfg(std::move(c)) {}
  FanOutLane cfg;
  FanOutLaneMetrics m;
  // The position this lane's destination stored before the run: batches at or before it are
  // held already (skipped) until the first one past it.
  std::optional<std::string> skip_through;
  // Lane thread only: the last position written to a destination that stores positions, and the
  // sequence of the batch it holds durably (a retried batch is not written again here).
  std::string last_position_written;
  uint64_t held_sequence = 0;
  Batch copy{64 * 1024};  // the lane's view of the batch: processors edit it, not the original

  std::mutex mu;
  std::condition_variable cv;
  std::shared_ptr<Round> task;
  bool stop = false;
  std::thread thread;
};

FanOutDestination::FanOutDestination(std::vector<FanOutLane> lanes, PositionOrder order)
    : order_(std::move(order)) {
  for (FanOutLane& l : lanes) lanes_.push_back(std::make_unique<Lane>(std::move(l)));
  for (size_t i = 0; i < lanes_.size(); ++i)
    if (lanes_[i]->cfg.destination->stores_positions()) anchor_ = i;
}

FanOutDestination::~FanOutDestination() { close(); }

const FanOutLaneMetrics& FanOutDestination::lane_metrics(size_t i) const { return lanes_[i]->m; }
const std::string& FanOutDestination::lane_name(size_t i) const { return lanes_[i]->cfg.name; }

Status FanOutDestination::open(const ConnectorContext& ctx) {
  pipeline_id_ = ctx.pipeline_id;
  size_t opened = 0;
  auto undo = [&] {
    for (size_t i = 0; i < opened; ++i) {
      lanes_[i]->cfg.destination->close();
      if (lanes_[i]->cfg.dlq) lanes_[i]->cfg.dlq->close();
    }
  };
  for (auto& lp : lanes_) {
    Lane& lane = *lp;
    ConnectorContext lctx{ctx.pipeline_id, lane.cfg.connector, nullptr, ctx.metrics};
    lctx.destination = lane.cfg.name;
    if (Status st = lane.cfg.destination->open(lctx); !st.ok()) {
      undo();
      return st.error().with_context(lane_context(lane.cfg));
    }
    if (lane.cfg.destination->stores_positions()) {
      auto stored = lane.cfg.destination->stored_position(ctx.pipeline_id);
      if (!stored.ok()) {
        lane.cfg.destination->close();
        undo();
        return stored.error().with_context(lane_context(lane.cfg) +
                                           "cannot read the stored position: ");
      }
      lane.skip_through = stored.value();
      if (lane.skip_through) lane.last_position_written = *lane.skip_through;
    }
    if (lane.cfg.dlq) {
      ConnectorContext dctx{ctx.pipeline_id, lane.cfg.dlq_connector, nullptr, ctx.metrics};
      dctx.is_dead_letter_queue = true;
      dctx.destination = lane.cfg.name + ".dlq";
      if (Status st = lane.cfg.dlq->open(dctx); !st.ok()) {
        lane.cfg.destination->close();
        undo();
        return st.error().with_context(lane_context(lane.cfg) + "dead-letter destination (" +
                                       lane.cfg.dlq_connector + "): ");
      }
    }
    ++opened;
    for (auto& p : lane.cfg.processors) {
      ConnectorContext pctx{ctx.pipeline_id, "processor", nullptr, ctx.metrics};
      pctx.destination = lane.cfg.name;
      if (Status st = p->open(pctx); !st.ok()) {
        undo();
        return st.error().with_context(lane_context(lane.cfg) + "processor: ");
      }
    }
  }
  if (ctx.metrics) {
    for (auto& lp : lanes_) {
      const FanOutLaneMetrics& m = lp->m;
      MetricLabels labels{{"pipeline", ctx.pipeline_id},
                          {"destination", lp->cfg.name},
                          {"connector", lp->cfg.connector}};
      probes_.push_back(ctx.metrics->add({
          MetricDef::counter("sluice_destination_records_written_total",
                             "Records durably written by this destination of the pipeline.", labels,
                             m.records_written),
          MetricDef::counter("sluice_destination_batches_written_total",
                             "Batches durably written by this destination of the pipeline.", labels,
                             m.batches_written),
          MetricDef::counter("sluice_destination_records_filtered_total",
                             "Records dropped by this destination's own processors.", labels,
                             m.records_filtered),
          MetricDef::counter("sluice_destination_records_skipped_total",
                             "Replayed records this destination already held (at or before the "
                             "position it stores), not written again.",
                             labels, m.records_skipped),
          MetricDef::counter("sluice_destination_dlq_records_total",
                             "Records this destination rejected, sent to its dead-letter queue.",
                             labels, m.dlq_records),
          MetricDef::counter("sluice_destination_errors_total",
                             "Batch writes to this destination that failed (retried or fatal).",
                             labels, m.write_errors),
          MetricDef::gauge("sluice_destination_busy",
                           "1 while a batch is with this destination (the others may wait for "
                           "it: without a spool they advance together).",
                           labels, [&m] { return MetricValue(m.busy.load()); }),
      }));
    }
  }
  for (auto& lp : lanes_) {
    Lane* lane = lp.get();
    lane->stop = false;
    lane->thread = std::thread([this, lane] { lane_loop(*lane); });
  }
  opened_ = true;
  return ok_status();
}

void FanOutDestination::lane_loop(Lane& lane) {
  LogScope log_scope(pipeline_id_, lane.cfg.connector);
  for (;;) {
    std::shared_ptr<Round> round;
    {
      std::unique_lock lock(lane.mu);
      lane.cv.wait(lock, [&] { return lane.stop || lane.task; });
      if (!lane.task) return;  // stopped
      round = std::move(lane.task);
      lane.task.reset();
    }
    lane.m.busy = 1;
    Status st = write_lane(lane, *round->batch);
    lane.m.busy = 0;
    if (st.ok()) {
      lane.held_sequence = round->batch->sequence();
    } else {
      lane.m.write_errors.fetch_add(1, std::memory_order_relaxed);
    }
    std::lock_guard lock(round->mu);
    if (!st.ok()) {
      Error e = st.error().with_context(lane_context(lane.cfg));
      if (!round->error || (round->error->retriable() && !e.retriable()))
        round->error = std::move(e);
    }
    if (--round->remaining == 0) round->cv.notify_all();
  }
}

void FanOutDestination::write(Batch& batch, WriteDone done) {
  // The anchor (the last lane that stores positions) writes once every other lane holds the
  // batch durably: its stored position is then never ahead of another lane's.
  std::vector<Lane*> first, last;
  for (size_t i = 0; i < lanes_.size(); ++i) {
    Lane* lane = lanes_[i].get();
    // A retried batch (same sequence) goes only to the lanes that do not hold it yet.
    if (batch.sequence() != 0 && lane->held_sequence == batch.sequence()) continue;
    (anchor_ && *anchor_ == i ? last : first).push_back(lane);
  }
  std::optional<Error> error;
  for (const std::vector<Lane*>* group : {&first, &last}) {
    if (group->empty()) continue;
    auto round = std::make_shared<Round>();
    round->batch = &batch;
    round->remaining = group->size();
    for (Lane* lane : *group) {
      {
        std::lock_guard lock(lane->mu);
        lane->task = round;
      }
      lane->cv.notify_one();
    }
    std::unique_lock lock(round->mu);
    round->cv.wait(lock, [&] { return round->remaining == 0; });
    error = std::move(round->error);
    if (error) break;
  }
  done(error ? Status(std::move(*error)) : ok_status());
}

Status FanOutDestination::write_sync(Lane& lane, Batch& batch) {
  auto done = std::make_shared<std::promise<Status>>();
  std::future<Status> result = done->get_future();
  lane.cfg.destination->write(batch, [done](Status st) { done->set_value(std::move(st)); });
  return result.get();
}

Status FanOutDestination::write_lane(Lane& lane, const Batch& batch) {
  if (lane.skip_through && batch.has_position()) {
    const auto order = order_ ? order_(batch.position(), *lane.skip_through) : std::nullopt;
    if (order && *order <= 0) {  // held already: committed before the restart
      lane.m.records_skipped.fetch_add(batch.data_count(), std::memory_order_relaxed);
      return ok_status();
    }
    if (order) lane.skip_through.reset();  // past it: nothing more to compare
  }
  Batch& c = lane.copy;
  c.clear();
  c.records().assign(batch.records().begin(), batch.records().end());
  c.set_position(batch.position());
  c.set_read_count(batch.read_count());
  c.set_sequence(batch.sequence());
  const size_t data_before = batch.data_count();
  for (auto& p : lane.cfg.processors)
    if (Status st = p->process(c); !st.ok()) return st.error().with_context("processor: ");
  size_t control = count_control(c);
  if (control > 0 && !lane.cfg.destination->accepts_control_records()) {
    std::erase_if(c.records(), [](const Record& r) { return is_control(r.op); });
    control = 0;
  }
  c.set_control_count(control);
  const size_t filtered = data_before - c.data_count();
  if (filtered) lane.m.records_filtered.fetch_add(filtered, std::memory_order_relaxed);
  Destination& d = *lane.cfg.destination;
  if (c.empty()) {
    // Nothing left for this lane; a destination that stores positions still commits the
    // position once it moved (else its stored position falls behind).
    if (!d.stores_positions() || !c.has_position() || c.position() == lane.last_position_written)
      return ok_status();
  }
  Status st = write_sync(lane, c);
  if (st.ok()) {
    if (c.has_position()) lane.last_position_written = c.position();
    lane.m.records_written.fetch_add(c.data_count(), std::memory_order_relaxed);
    if (!c.empty()) lane.m.batches_written.fetch_add(1, std::memory_order_relaxed);
    return ok_status();
  }
  if (st.error().code() == Errc::data && lane.cfg.dead_letters && lane.cfg.dlq) {
    const Error& error = st.error();
    SLUICE_TRY(isolate(lane, c, error));
    if (c.has_position()) lane.last_position_written = c.position();
    return ok_status();
  }
  return st;
}

Status FanOutDestination::isolate(Lane& lane, Batch& c, const Error& error) {
  Destination& d = *lane.cfg.destination;
  const bool position_after = d.stores_positions() && c.has_position();
  std::vector<std::pair<const Record*, std::string>> letters;
  size_t rejected_data = 0;
  bool isolated = false;
  if (d.isolates_rejected_records()) {
    // One pass: a savepoint (or delivery report) per record.
    std::vector<RejectedRecord> rejected;
    Status st = d.write_isolating(c, !position_after, rejected);
    if (st.ok()) {
      for (const RejectedRecord& r : rejected)
        letters.emplace_back(&c.records()[r.index], r.error.message());
      isolated = true;
    } else if (st.error().code() != Errc::data && st.error().code() != Errc::unsupported) {
      return st;  // retriable: the pipeline writes the batch again
    }
  }
  bool position_written = !c.has_position() || (isolated && !position_after);
  if (!isolated) {
    // In halves down to single records, depth first: what the destination accepts lands in
    // order; the sub-write ending with the batch's last record carries its position.
    const std::span<const Record> all(c.records());
    const Record* const end = all.data() + all.size();
    std::function<Status(std::span<const Record>, const Error&)> split =
        [&](std::span<const Record> part, const Error& err) -> Status {
      if (part.size() == 1) {
        if (is_control(part.front().op)) return err;  // a schema change is not a row
        letters.emplace_back(&part.front(), err.message());
        return ok_status();
      }
      const size_t mid = part.size() / 2;
      for (std::span<const Record> half : {part.first(mid), part.subspan(mid)}) {
        Batch sub(4096);
        sub.records().assign(half.begin(), half.end());
        sub.set_control_count(count_control(sub));
        const bool last = half.data() + half.size() == end;
        if (last && c.has_position()) {
          // The rejected ones go to the dead-letter queue before the position commits.
          SLUICE_TRY(send_dead_letters(lane, c, letters));
          rejected_data += letters.size();
          letters.clear();
          sub.set_position(c.position());
        }
        Status st = write_sync(lane, sub);
        if (st.ok()) {
          position_written = position_written || last;
          continue;
        }
        if (st.error().code() != Errc::data) return st;
        SLUICE_TRY(split(half, st.error()));
      }
      return ok_status();
    };
    SLUICE_TRY(split(all, error));
  }
  rejected_data += letters.size();
  SLUICE_TRY(send_dead_letters(lane, c, letters));
  if ((position_after && isolated) || (!position_written && d.stores_positions())) {
    Batch tail(1024);
    tail.set_position(c.position());
    SLUICE_TRY(write_sync(lane, tail));
  }
  const size_t data = c.data_count();
  lane.m.records_written.fetch_add(data > rejected_data ? data - rejected_data : 0,
                                   std::memory_order_relaxed);
  lane.m.batches_written.fetch_add(1, std::memory_order_relaxed);
  return ok_status();
}

Status FanOutDestination::send_dead_letters(
    Lane& lane, const Batch& batch, const std::vector<std::pair<const Record*, std::string>>& in) {
  if (in.empty()) return ok_status();
  Batch dl(16 * 1024);
  dl.records().reserve(in.size());
  for (const auto& [record, reason] : in) {
    Record& r = dl.add();
    r = *record;
    const uint32_t n = record->metadata.is_object() ? record->metadata.size() : 0;
    ObjectBuilder m = dl.object(n + 4);
    if (n)
      for (const Field& f : record->metadata.fields())
        if (f.name != meta::kError) m.add(f.name, f.value);
    m.add(meta::kError, Value::string(dl.copy(redact(reason))));
    m.add("sluice.pipeline", Value::string(dl.copy(pipeline_id_)));
    m.add("sluice.destination", Value::string(dl.copy(lane.cfg.connector)));
    m.add("sluice.destination_name", Value::string(dl.copy(lane.cfg.name)));
    r.metadata = m.build();
  }
  auto done = std::make_shared<std::promise<Status>>();
  std::future<Status> result = done->get_future();
  lane.cfg.dlq->write(dl, [done](Status st) { done->set_value(std::move(st)); });
  Status st = result.get();
  if (!st.ok())
    return st.error().with_context("dead-letter queue (" + lane.cfg.dlq_connector + "): ");
  lane.m.dlq_records.fetch_add(in.size(), std::memory_order_relaxed);
  spdlog::warn("pipeline {}: {} of {} records sent to the dead-letter queue by {}first: {}",
               pipeline_id_, in.size(), batch.size(), lane_context(lane.cfg), in.front().second);
  return ok_status();
}

size_t FanOutDestination::preferred_max_records() const noexcept {
  size_t best = 0;
  for (const auto& lp : lanes_) {
    const size_t p = lp->cfg.destination->preferred_max_records();
    if (p > 0 && (best == 0 || p < best)) best = p;
  }
  return best;
}

Status FanOutDestination::flush(std::chrono::milliseconds timeout) {
  for (auto& lp : lanes_) {
    if (Status st = lp->cfg.destination->flush(timeout); !st.ok())
      return st.error().with_context(lane_context(lp->cfg));
    if (lp->cfg.dlq)
      if (Status st = lp->cfg.dlq->flush(timeout); !st.ok())
        return st.error().with_context(lane_context(lp->cfg) + "dead-letter destination: ");
  }
  return ok_status();
}

void FanOutDestination::close() noexcept {
  if (!opened_) return;
  opened_ = false;
  for (auto& lp : lanes_) {
    {
      std::lock_guard lock(lp->mu);
      lp->stop = true;
    }
    lp->cv.notify_one();
  }
  for (auto& lp : lanes_)
    if (lp->thread.joinable()) lp->thread.join();
  probes_.clear();
  for (auto& lp : lanes_) {
    lp->cfg.destination->close();
    if (lp->cfg.dlq) lp->cfg.dlq->close();
  }
}

Status FanOutDestination::check_routing(const std::vector<SourceTable>& tables) {
  for (auto& lp : lanes_)
    if (Status st = lp->cfg.destination->check_routing(tables); !st.ok())
      return st.error().with_context(lane_context(lp->cfg));
  return ok_status();
}

bool FanOutDestination::accepts_control_records() const noexcept {
  for (const auto& lp : lanes_)
    if (lp->cfg.destination->accepts_control_records()) return true;
  return false;
}

bool FanOutDestination::stores_positions() const noexcept { return anchor_.has_value(); }

Result<std::optional<std::string>> FanOutDestination::stored_position(
    std::string_view pipeline_id) {
  if (!anchor_) return std::optional<std::string>();
  auto anchored = lanes_[*anchor_]->cfg.destination->stored_position(pipeline_id);
  if (!anchored.ok())
    return std::move(anchored).error().with_context(lane_context(lanes_[*anchor_]->cfg));
  // The anchor has none (new, or reset): the checkpoint store decides.
  if (!anchored.value()) return std::optional<std::string>();
  std::optional<std::string> oldest = std::move(anchored.value());
  // Another lane that stores positions is never behind the anchor, unless its store was restored
  // from an older state: then the source resumes from there. A lane without one is new and
  // starts from here.
  for (size_t i = 0; i < lanes_.size(); ++i) {
    Destination& d = *lanes_[i]->cfg.destination;
    if (i == *anchor_ || !d.stores_positions()) continue;
    auto stored = d.stored_position(pipeline_id);
    if (!stored.ok()) return std::move(stored).error().with_context(lane_context(lanes_[i]->cfg));
    if (!stored.value()) continue;
    const auto order = order_ ? order_(*stored.value(), *oldest) : std::nullopt;
    if (order && *order < 0) oldest = std::move(stored.value());
  }
  return oldest;
}

Status FanOutDestination::erase_stored_position(std::string_view pipeline_id) {
  for (auto& lp : lanes_)
    if (lp->cfg.destination->stores_positions())
      if (Status st = lp->cfg.destination->erase_stored_position(pipeline_id); !st.ok())
        return st.error().with_context(lane_context(lp->cfg));
  return ok_status();
}

}  // namespace sluice
