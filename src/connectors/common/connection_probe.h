// The connection probe of a connector: whether it is connected, how often it reconnected, how long
// the current outage lasts, and (sources) the phase. The connector's own thread stores relaxed
// atomics at connection events only — never per record — and the registry reads them on a scrape:
//
//   sluice_source_connected{pipeline,connector}            1 connected, 0 down
//   sluice_source_reconnects_total{pipeline,connector}     connections re-established after a loss
//   sluice_source_down_seconds{pipeline,connector}         length of the current outage (0: up)
//   sluice_source_connection_timeouts_total{pipeline,connector}
//                                                          connections given up as dead: the server
//                                                          stayed silent beyond the timeout
//   sluice_source_phase{pipeline,connector,phase=...}      1 for the current phase, else 0
//
// (`role` "destination" gives the same series named sluice_destination_*, without the phase.)
//
// Events may come from more than one thread (librdkafka serves its callbacks on whichever thread
// polls, while open() runs on the pipeline's), so every field is an atomic; a connector still
// reports from one thread at a time.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "sluice/connector.h"
#include "sluice/metrics.h"

namespace sluice {

enum class ConnectionPhase : int { none = 0, snapshot = 1, stream = 2, done = 3 };

class ConnectionProbe {
 public:
  // Registers the probe in ctx.metrics (nothing when null), replacing an earlier registration.
  // The probe starts down until connected() is called.
  void register_into(const ConnectorContext& ctx, const std::string& role, bool with_phase) {
    registration_.reset();
    connected_.store(0, std::memory_order_relaxed);
    down_since_ms_.store(now_ms(), std::memory_order_relaxed);
    lost_.store(false, std::memory_order_relaxed);
    if (ctx.metrics == nullptr) return;
    const MetricLabels labels = ctx.metric_labels();
    const std::string p = "sluice_" + role + "_";
    std::vector<MetricDef> defs{
        MetricDef::gauge(
            p + "connected",
            "1 while the " + role + " is connected to its server, 0 while it is down.", labels,
            [this] { return MetricValue(connected_.load(std::memory_order_relaxed)); }),
        MetricDef::counter(
            p + "reconnects_total",
            "Connections to the server re-established after the " + role + " lost one.", labels,
            reconnects_),
        MetricDef::counter(p + "connection_timeouts_total",
                           "Connections the " + role +
                               " gave up as dead because the server stayed silent beyond the "
                               "timeout (then reconnected).",
                           labels, timeouts_),
        MetricDef::gauge(p + "down_seconds",
                         "Length of the current outage of the " + role + " (0: connected).", labels,
                         [this] { return MetricValue(down_seconds()); }),
    };
    if (with_phase) {
      static constexpr std::pair<const char*, ConnectionPhase> kPhases[] = {
          {"snapshot", ConnectionPhase::snapshot},
          {"stream", ConnectionPhase::stream},
          {"done", ConnectionPhase::done}};
      for (const auto& [name, phase] : kPhases) {
        const ConnectionPhase this_phase = phase;  // clang 14 cannot capture a structured binding
        MetricLabels l = labels;
        l.emplace_back("phase", name);
        defs.push_back(MetricDef::gauge(
            p + "phase", "1 for the phase the " + role + " is in (snapshot, stream, done).",
            std::move(l), [this, this_phase] {
              return MetricValue(
                  int64_t(phase_.load(std::memory_order_relaxed) == int(this_phase)));
            }));
      }
    }
    registration_ = ctx.metrics->add(std::move(defs));
  }
  void unregister() noexcept { registration_.reset(); }

  // The connection is up; counts a reconnect when it follows a loss (lost() or a failed attempt).
  void connected() noexcept {
    if (lost_.exchange(false, std::memory_order_relaxed))
      reconnects_.fetch_add(1, std::memory_order_relaxed);
    connected_.store(1, std::memory_order_relaxed);
    down_since_ms_.store(0, std::memory_order_relaxed);
  }
  // The connection broke, or an attempt to (re)connect failed; the outage starts at the first.
  void lost() noexcept {
    lost_.store(true, std::memory_order_relaxed);
    connected_.store(0, std::memory_order_relaxed);
    if (down_since_ms_.load(std::memory_order_relaxed) == 0)
      down_since_ms_.store(now_ms(), std::memory_order_relaxed);
  }
  // The connection was given up as dead: the server stayed silent beyond the timeout.
  void timed_out() noexcept {
    timeouts_.fetch_add(1, std::memory_order_relaxed);
    lost();
  }
  void set_phase(ConnectionPhase p) noexcept { phase_.store(int(p), std::memory_order_relaxed); }

  int64_t is_connected() const noexcept { return connected_.load(std::memory_order_relaxed); }
  uint64_t reconnects() const noexcept { return reconnects_.load(std::memory_order_relaxed); }
  uint64_t timeouts() const noexcept { return timeouts_.load(std::memory_order_relaxed); }
  double down_seconds() const noexcept {
    const int64_t since = down_since_ms_.load(std::memory_order_relaxed);
    return since == 0 ? 0.0 : double(now_ms() - since) / 1000.0;
  }
  ConnectionPhase phase() const noexcept {
    return ConnectionPhase(phase_.load(std::memory_order_relaxed));
  }

 private:
  static int64_t now_ms() noexcept {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
               .count() +
           1;  // never 0, which means "up"
  }

  std::atomic<int64_t> connected_{0};
  std::atomic<uint64_t> reconnects_{0};
  std::atomic<uint64_t> timeouts_{0};
  std::atomic<int64_t> down_since_ms_{0};
  std::atomic<int> phase_{0};
  std::atomic<bool> lost_{false};  // a loss not yet followed by a connection
  MetricsRegistry::Registration registration_;
};

}  // namespace sluice
