// The health of the source's replication slot, watched from its own thread and connection (so it
// keeps reporting while the reader is blocked on a slow destination, and never touches the
// replication stream):
//
//   every poll (heartbeat.interval, at most 5 s)
//     SELECT server WAL position, the slot's confirmed_flush_lsn and restart_lsn
//       ├─▶ sluice_source_slot_lag_bytes       server WAL − confirmed_flush_lsn
//       ├─▶ sluice_source_slot_retained_bytes  server WAL − restart_lsn (WAL the server keeps)
//       ├─▶ sluice_source_slot_lag_seconds     age of the oldest WAL the slot has not confirmed
//       ├─▶ a warning (at most every 5 min) while the lag is above slot_lag_warning
//       └─▶ a transactional heartbeat, pg_logical_emit_message(true, 'sluice.heartbeat', ''),
//           when the slot lags and its confirmed position has not moved for heartbeat.interval
//
// The server WAL position is pg_current_wal_lsn(), or pg_last_wal_receive_lsn() on a standby.
// Lag seconds, sampled: each poll records (time, server WAL position); the age is the time since
// the first sample whose position the slot has not yet confirmed (0 when it is caught up), so its
// resolution is the poll interval. The heartbeat makes a change in the slot's own database that
// the stream receives and acknowledges like any transaction: the slot advances even when the
// captured tables are idle while the server's other WAL grows. It is sluice's own message: never
// a record (logical_messages or not). The monitor only reads the slot: it never drops it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>

#include "connectors/postgres/pg_connection.h"
#include "sluice/connector.h"
#include "sluice/metrics.h"

namespace sluice::pg {

inline constexpr std::string_view kHeartbeatPrefix = "sluice.heartbeat";

struct SlotHealthOptions {
  std::string url;
  std::string slot;
  std::chrono::milliseconds interval{5000};  // heartbeat.interval
  bool heartbeat = true;                     // heartbeat.emit_message
  uint64_t lag_warning = 0;                  // slot_lag_warning in bytes (0: never)
};

// One server sample and what the monitor derives from it (pure: unit-tested).
class SlotLagClock {
 public:
  // Records the server's WAL position `wal` at `now` against the slot's `confirmed`; returns the
  // lag in seconds (the age of the oldest sample the slot has not confirmed).
  double observe(std::chrono::steady_clock::time_point now, uint64_t wal, uint64_t confirmed);

 private:
  struct Sample {
    std::chrono::steady_clock::time_point at;
    uint64_t wal;
  };
  std::deque<Sample> samples_;  // server positions not yet confirmed, oldest first
};

class SlotHealthMonitor {
 public:
  SlotHealthMonitor() = default;
  ~SlotHealthMonitor() { stop(); }
  SlotHealthMonitor(const SlotHealthMonitor&) = delete;
  SlotHealthMonitor& operator=(const SlotHealthMonitor&) = delete;

  // Registers the probe (when ctx.metrics is set) and starts the thread; a second call while it
  // runs does nothing.
  void start(const ConnectorContext& ctx, SlotHealthOptions options);
  void stop() noexcept;

 private:
  void run(std::stop_token stop);
  void poll_once(PgConn& conn, const std::stop_token& stop);

  ConnectorContext ctx_;
  SlotHealthOptions o_;
  std::jthread thread_;
  MetricsRegistry::Registration registration_;
  // Figures (-1: unknown, e.g. the slot does not exist yet or the server cannot be reached).
  std::atomic<int64_t> lag_bytes_{-1};
  std::atomic<int64_t> retained_bytes_{-1};
  std::atomic<int64_t> lag_ms_{-1};
  std::atomic<uint64_t> heartbeats_{0};
  // Monitor thread only.
  SlotLagClock clock_;
  uint64_t last_confirmed_ = 0;
  std::chrono::steady_clock::time_point confirmed_moved_{};
  std::chrono::steady_clock::time_point last_heartbeat_{};
  std::chrono::steady_clock::time_point last_warning_{};
  bool warned_ = false;
  bool heartbeat_refused_ = false;
};

}  // namespace sluice::pg
