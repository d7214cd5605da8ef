// The metrics registry: every component (pipeline, source, destination, later the spool) publishes
// its live figures by registering a "probe" once — a list of named counters and gauges, each with
// labels and a way to read its current value — and keeps the returned Registration for as long
// as the figures exist. /metrics (Prometheus text) and the progress line are rendered from the
// registry, never from a component's own fields.
//
// Reading happens only on a scrape or a progress tick: a probe's readers load the component's
// relaxed atomics, so the hot path pays nothing for being observable.
//
//   struct MyProbe { std::atomic<uint64_t> resets{0}; } probe_;
//   registration_ = ctx.metrics->add({MetricDef::counter(
//       "sluice_mysql_reconnects_total", "Reconnects to the server.", ctx.metric_labels(),
//       probe_.resets)});
//
// The registry must outlive every Registration taken from it (the engine owns the registry and
// destroys its pipelines, and with them their connectors, first).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace sluice {

// Fixed-bucket latency histogram (seconds), Prometheus-style cumulative on render.
class LatencyHistogram {
 public:
  static constexpr std::array<double, 12> kBounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                     0.05,   0.1,   0.25,   0.5,   1.0,  5.0};
  void observe(double seconds) noexcept {
    size_t i = 0;
    while (i < kBounds.size() && seconds > kBounds[i]) ++i;
    buckets_[i].fetch_add(1, std::memory_order_relaxed);
    count_.fetch_add(1, std::memory_order_relaxed);
    sum_us_.fetch_add(static_cast<uint64_t>(seconds * 1e6), std::memory_order_relaxed);
  }
  uint64_t bucket(size_t i) const noexcept { return buckets_[i].load(std::memory_order_relaxed); }
  uint64_t count() const noexcept { return count_.load(std::memory_order_relaxed); }
  double sum_seconds() const noexcept {
    return double(sum_us_.load(std::memory_order_relaxed)) / 1e6;
  }

 private:
  std::array<std::atomic<uint64_t>, kBounds.size() + 1> buckets_{};
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_us_{0};
};

// Ordered name="value" pairs; the order is the order on the exposition line.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;
// Integers render as integers, doubles as Prometheus floats (-1 for "unknown" stays "-1").
using MetricValue = std::variant<uint64_t, int64_t, double>;

enum class MetricType { counter, gauge, histogram };

struct MetricDef {
  std::string name;
  MetricType type = MetricType::gauge;
  std::string help;
  MetricLabels labels;
  std::function<MetricValue()> read;            // counter and gauge
  const LatencyHistogram* histogram = nullptr;  // histogram

  static MetricDef counter(std::string name, std::string help, MetricLabels labels,
                           const std::atomic<uint64_t>& value) {
    return {std::move(name),
            MetricType::counter,
            std::move(help),
            std::move(labels),
            [&value] { return MetricValue(value.load(std::memory_order_relaxed)); },
            nullptr};
  }
  static MetricDef gauge(std::string name, std::string help, MetricLabels labels,
                         std::function<MetricValue()> read) {
    return {std::move(name),   MetricType::gauge, std::move(help),
            std::move(labels), std::move(read),   nullptr};
  }
  static MetricDef latency(std::string name, std::string help, MetricLabels labels,
                           const LatencyHistogram& h) {
    return {
        std::move(name), MetricType::histogram, std::move(help), std::move(labels), nullptr, &h};
  }
};

inline double metric_as_double(const MetricValue& v) {
  return std::visit([](auto x) { return static_cast<double>(x); }, v);
}

class MetricsRegistry {
 public:
  // Keeps a probe registered; unregisters it when destroyed or reset. Move-only.
  class Registration {
   public:
    Registration() = default;
    Registration(MetricsRegistry* r, uint64_t id) : registry_(r), id_(id) {}
    Registration(Registration&& o) noexcept
        : registry_(std::exchange(o.registry_, nullptr)), id_(o.id_) {}
    Registration& operator=(Registration&& o) noexcept {
      if (this != &o) {
        reset();
        registry_ = std::exchange(o.registry_, nullptr);
        id_ = o.id_;
      }
      return *this;
    }
    Registration(const Registration&) = delete;
    Registration& operator=(const Registration&) = delete;
    ~Registration() { reset(); }
    void reset() noexcept {
      if (registry_) registry_->remove(id_);
      registry_ = nullptr;
    }
    bool active() const noexcept { return registry_ != nullptr; }

   private:
    MetricsRegistry* registry_ = nullptr;
    uint64_t id_ = 0;
  };

  MetricsRegistry() = default;
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // Registers a probe. Metrics of one name form one family: its type and help are those of the
  // first registration; families appear in the order their names were first registered, and
  // within a family in registration order.
  [[nodiscard]] Registration add(std::vector<MetricDef> probe) {
    std::lock_guard lock(mu_);
    const uint64_t id = next_id_++;
    for (const MetricDef& m : probe) {
      bool known = false;
      for (const std::string& f : families_) known = known || f == m.name;
      if (!known) families_.push_back(m.name);
    }
    probes_.emplace(id, std::move(probe));
    return Registration(this, id);
  }

  // Calls `fn(family_first_def, metrics_of_family)` for each family, under the registry's lock
  // (fn must not register or unregister).
  void visit(
      const std::function<void(const MetricDef&, const std::vector<const MetricDef*>&)>& fn) const {
    std::lock_guard lock(mu_);
    std::vector<const MetricDef*> members;
    for (const std::string& family : families_) {
      members.clear();
      for (const auto& [id, probe] : probes_)
        for (const MetricDef& m : probe)
          if (m.name == family) members.push_back(&m);
      if (!members.empty()) fn(*members.front(), members);
    }
  }

  // The values of metric `name` whose labels include every pair of `match`, in registration order.
  std::vector<std::pair<MetricLabels, MetricValue>> values(std::string_view name,
                                                           const MetricLabels& match = {}) const {
    std::vector<std::pair<MetricLabels, MetricValue>> out;
    std::lock_guard lock(mu_);
    for (const auto& [id, probe] : probes_)
      for (const MetricDef& m : probe) {
        if (m.name != name || !m.read) continue;
        bool all = true;
        for (const auto& want : match) {
          bool found = false;
          for (const auto& have : m.labels) found = found || have == want;
          all = all && found;
        }
        if (all) out.emplace_back(m.labels, m.read());
      }
    return out;
  }

  // Sum of metric `name` over the series matching `match` (0 when none).
  double sum(std::string_view name, const MetricLabels& match = {}) const {
    double total = 0;
    for (const auto& [labels, v] : values(name, match)) total += metric_as_double(v);
    return total;
  }

 private:
  void remove(uint64_t id) noexcept {
    std::lock_guard lock(mu_);
    probes_.erase(id);
  }

  mutable std::mutex mu_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::vector<MetricDef>> probes_;  // by id: registration order
  std::vector<std::string> families_;                  // first-registration order
};

}  // namespace sluice
