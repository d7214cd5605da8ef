// One source feeding several destinations, without a spool: every batch goes to each destination
// (after that destination's own processors) and is complete only when every destination has it
// durably, so the pipeline's acker acknowledges the source at the slowest one.
//
//   Pipeline writer ── write(batch) ──▶ FanOutDestination ──▶ lane 0: copy, processors, skip, write
//                                       (waits for all)   ──▶ lane 1: …                (own thread)
//                 ◀── done(first failure, or ok) ─────────┘    lane N-1: …
//
// To the pipeline it is one synchronous destination (max_in_flight 1): a batch is handed on only
// after the previous one settled at every lane, so a retried batch never lands after a later one.
// The lanes of one batch write in parallel, each on its own thread.
//
// Failures, per lane:
// - retriable (connection lost, deadlock): the write returns it; the pipeline retries the batch
//   with its backoff, and only the lanes that do not hold it yet write it again;
// - a record the lane's destination rejects: with the lane's on_error: dlq it is isolated (the
//   destination's own one-pass isolation or halving) and sent to the lane's dead-letter
//   destination, the rest lands; with on_error: stop the data error stops the pipeline.
//
// Exactly once, for destinations that store their position with their rows
// (checkpoint_in_destination, Kafka transactions): the last lane that stores positions is the
// anchor. It writes a batch only after every other lane holds it durably, so its stored position
// is never ahead of any lane's, and the source resumes from it (the pipeline's "position stored in
// the destination"): the anchor sees nothing again after a crash. The other lanes are at most one
// batch ahead of it; one that stores positions read its own at open and skips each replayed batch
// whose position is at or before it (Source::compare_positions), until the first one past it. A
// replayed batch that straddles such a lane's position (replay batches are not cut where the
// first run's were) is written whole to it: an idempotent upsert at a keyed destination, repeated
// messages at Kafka — which is why the destination where a repeat matters (Kafka with
// transactions) goes last in `destinations`. Lanes that store no position are idempotent
// (at-least-once) as with a single destination.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sluice/connector.h"
#include "sluice/metrics.h"

namespace sluice {

// Orders two source positions (Source::compare_positions).
using PositionOrder =
    std::function<std::optional<std::weak_ordering>(std::string_view, std::string_view)>;

struct FanOutLane {
  std::string name;       // unique in the pipeline
  std::string connector;  // registered name of the destination
  std::unique_ptr<Destination> destination;
  std::vector<std::unique_ptr<Processor>> processors;
  bool dead_letters = false;  // on_error: dlq
  std::string dlq_connector;
  std::unique_ptr<Destination> dlq;
};

// Figures of one lane (its probe): relaxed atomics.
struct FanOutLaneMetrics {
  std::atomic<uint64_t> records_written{0};
  std::atomic<uint64_t> batches_written{0};
  std::atomic<uint64_t> records_filtered{0};
  std::atomic<uint64_t> records_skipped{0};  // already held (stored position), not written again
  std::atomic<uint64_t> dlq_records{0};
  std::atomic<uint64_t> write_errors{0};
  std::atomic<uint64_t> busy{0};  // 1 while a batch is with the lane
};

class FanOutDestination final : public Destination {
 public:
  FanOutDestination(std::vector<FanOutLane> lanes, PositionOrder order);
  ~FanOutDestination() override;

  Status open(const ConnectorContext& ctx) override;
  void write(Batch& batch, WriteDone done) override;
  size_t max_in_flight() const noexcept override { return 1; }
  size_t preferred_max_records() const noexcept override;
  Status flush(std::chrono::milliseconds timeout) override;
  void close() noexcept override;
  Status check_routing(const std::vector<SourceTable>& tables) override;
  bool accepts_control_records() const noexcept override;
  // When some lane does: the pipeline then resumes from the anchor's stored position (or an older
  // one another lane stores) and hands on emptied batches whose position moved.
  bool stores_positions() const noexcept override;  // some lane does
  Result<std::optional<std::string>> stored_position(std::string_view pipeline_id) override;
  Status erase_stored_position(std::string_view pipeline_id) override;

  size_t lane_count() const noexcept { return lanes_.size(); }
  const FanOutLaneMetrics& lane_metrics(size_t i) const;
  const std::string& lane_name(size_t i) const;

 private:
  struct Lane;
  struct Round;
  void lane_loop(Lane& lane);
  // Writes `round`'s batch to `lane` (lane thread): the lane's copy, processors, skip, write,
  // dead-letter isolation.
  Status write_lane(Lane& lane, const Batch& batch);
  Status write_sync(Lane& lane, Batch& batch);
  Status isolate(Lane& lane, Batch& batch, const Error& error);
  Status send_dead_letters(Lane& lane, const Batch& batch,
                           const std::vector<std::pair<const Record*, std::string>>& rejected);

  std::vector<std::unique_ptr<Lane>> lanes_;
  PositionOrder order_;
  std::string pipeline_id_;
  std::optional<size_t> anchor_;  // the last lane whose destination stores positions
  std::vector<MetricsRegistry::Registration> probes_;
  bool opened_ = false;
};

}  // namespace sluice
