#include "connectors/postgres/pg_slot_health.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <poll.h>

#include <charconv>
#include <condition_variable>
#include <optional>
#include <vector>

#include "connectors/postgres/pg_connection.h"

namespace sluice::pg {

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxSamples = 4096;
constexpr auto kWarningEvery = std::chrono::minutes(5);

std::optional<uint64_t> as_u64(const char* text) {
  if (text == nullptr || *text == 0) return std::nullopt;
  std::string_view s(text);
  if (auto dot = s.find('.'); dot != std::string_view::npos) s = s.substr(0, dot);  // numeric
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// A query that gives up after `timeout` or when `stop` is requested: a server that went silent
// (a partition, a blackholed link) must never hold the monitor — and with it close() — forever.
// The caller drops the connection after an error.
Result<PgResult> exec_bounded(PgConn& conn, const std::string& sql,
                              const std::vector<std::string>& params,
                              std::chrono::milliseconds timeout, const std::stop_token& stop) {
  std::vector<const char*> values;
  for (const std::string& p : params) values.push_back(p.c_str());
  PGconn* c = conn.get();
  if (PQsendQueryParams(c, sql.c_str(), int(values.size()), nullptr, values.data(), nullptr,
                        nullptr, 0) != 1)
    return Error(Errc::connection, conn.last_error(), true);
  const auto deadline = Clock::now() + timeout;
  while (PQisBusy(c)) {
    if (stop.stop_requested()) return Error(Errc::cancelled, "stopped");
    if (Clock::now() >= deadline)
      return Error(Errc::timeout, "the server did not answer the slot query in time", true);
    pollfd pfd{PQsocket(c), POLLIN, 0};
    (void)::poll(&pfd, 1, 100);
    if (PQconsumeInput(c) != 1) return Error(Errc::connection, conn.last_error(), true);
  }
  PgResult first(PQgetResult(c));
  while (PGresult* more = PQgetResult(c)) PQclear(more);
  if (!first || PQresultStatus(first.get()) != PGRES_TUPLES_OK) {
    std::string message = first ? PQresultErrorMessage(first.get()) : conn.last_error();
    while (!message.empty() && (message.back() == '\n' || message.back() == ' '))
      message.pop_back();
    return Error(Errc::io, message);
  }
  return first;
}

std::string human_bytes(uint64_t b) {
  if (b >= (1ull << 30)) return fmt::format("{:.1f} GiB", double(b) / double(1ull << 30));
  if (b >= (1ull << 20)) return fmt::format("{:.1f} MiB", double(b) / double(1ull << 20));
  if (b >= (1ull << 10)) return fmt::format("{:.1f} KiB", double(b) / double(1ull << 10));
  return fmt::format("{} bytes", b);
}

}  // namespace

double SlotLagClock::observe(Clock::time_point now, uint64_t wal, uint64_t confirmed) {
  while (!samples_.empty() && samples_.front().wal <= confirmed) samples_.pop_front();
  if (wal > confirmed && (samples_.empty() || samples_.back().wal < wal))
    samples_.push_back({now, wal});
  if (samples_.size() > kMaxSamples) {
    // Thinned, never shortened at the front: the oldest unconfirmed sample is what counts.
    std::deque<Sample> kept;
    for (size_t i = 0; i < samples_.size(); i += 2) kept.push_back(samples_[i]);
    samples_.swap(kept);
  }
  if (samples_.empty()) return 0;
  return std::chrono::duration<double>(now - samples_.front().at).count();
}

void SlotHealthMonitor::start(const ConnectorContext& ctx, SlotHealthOptions options) {
  if (thread_.joinable()) return;
  ctx_ = ctx;
  o_ = std::move(options);
  if (ctx_.metrics != nullptr) {
    const MetricLabels labels = ctx_.metric_labels();
    registration_ = ctx_.metrics->add({
        MetricDef::gauge("sluice_source_slot_lag_bytes",
                         "WAL the replication slot has not confirmed: the server's WAL position "
                         "minus the slot's confirmed_flush_lsn (-1: unknown).",
                         labels, [this] { return MetricValue(lag_bytes_.load()); }),
        MetricDef::gauge("sluice_source_slot_retained_bytes",
                         "WAL the server keeps for the slot: its WAL position minus the slot's "
                         "restart_lsn (-1: unknown).",
                         labels, [this] { return MetricValue(retained_bytes_.load()); }),
        MetricDef::gauge("sluice_source_slot_lag_seconds",
                         "Age of the oldest WAL the slot has not confirmed, sampled every poll (0: "
                         "caught up; -1: unknown).",
                         labels,
                         [this] {
                           const int64_t ms = lag_ms_.load();
                           return MetricValue(ms < 0 ? -1.0 : double(ms) / 1000.0);
                         }),
        MetricDef::counter("sluice_source_heartbeats_total",
                           "Transactional heartbeats written to the source's database.", labels,
                           heartbeats_),
    });
  }
  confirmed_moved_ = Clock::now();
  thread_ = std::jthread([this](std::stop_token st) { run(st); });
}

void SlotHealthMonitor::stop() noexcept {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
  registration_.reset();
}

void SlotHealthMonitor::run(std::stop_token stop) {
  const auto interval = std::clamp<std::chrono::milliseconds>(
      o_.interval, std::chrono::milliseconds(100), std::chrono::seconds(5));
  std::mutex mu;
  std::condition_variable_any cv;
  PgConn conn;
  while (!stop.stop_requested()) {
    if (!conn.ok()) {
      auto c = PgConn::connect(o_.url, false);
      if (c.ok()) conn = std::move(c.value());
      else {
        lag_bytes_ = -1;
        retained_bytes_ = -1;
        lag_ms_ = -1;
      }
    }
    if (conn.ok()) poll_once(conn, stop);
    std::unique_lock lock(mu);
    cv.wait_for(lock, stop, interval, [] { return false; });
  }
}

void SlotHealthMonitor::poll_once(PgConn& conn, const std::stop_token& stop) {
  constexpr auto kQueryTimeout = std::chrono::seconds(10);
  auto r = exec_bounded(
      conn,
      "SELECT (w.lsn - '0/0'::pg_lsn)::text, (s.confirmed_flush_lsn - '0/0'::pg_lsn)::text, "
      "(s.restart_lsn - '0/0'::pg_lsn)::text, w.standby "
      "FROM (SELECT pg_is_in_recovery() AS standby, CASE WHEN pg_is_in_recovery() THEN "
      "pg_last_wal_receive_lsn() ELSE pg_current_wal_lsn() END AS lsn) w "
      "LEFT JOIN pg_replication_slots s ON s.slot_name = $1",
      {o_.slot}, kQueryTimeout, stop);
  if (!r.ok()) {
    // The server went away (the stream reconnects on its own); try a new connection next time.
    conn.reset();
    lag_bytes_ = -1;
    retained_bytes_ = -1;
    lag_ms_ = -1;
    return;
  }
  PGresult* res = r.value().get();
  const std::optional<uint64_t> wal_text = as_u64(PQgetvalue(res, 0, 0));
  const std::optional<uint64_t> confirmed_text =
      PQgetisnull(res, 0, 1) ? std::nullopt : as_u64(PQgetvalue(res, 0, 1));
  const std::optional<uint64_t> restart_text =
      PQgetisnull(res, 0, 2) ? std::nullopt : as_u64(PQgetvalue(res, 0, 2));
  const bool standby = std::string_view(PQgetvalue(res, 0, 3)) == "t";
  if (!wal_text || !confirmed_text) {  // no slot (yet): nothing to measure
    lag_bytes_ = -1;
    retained_bytes_ = -1;
    lag_ms_ = -1;
    return;
  }
  // Plain values from here (GCC's -O1 builds warn of the optionals as maybe-uninitialized).
  const uint64_t wal = wal_text.value_or(0), confirmed = confirmed_text.value_or(0);
  const bool has_restart = restart_text.has_value();
  const uint64_t restart = restart_text.value_or(0);
  const auto now = Clock::now();
  const uint64_t lag = wal > confirmed ? wal - confirmed : 0;
  lag_bytes_ = int64_t(lag);
  retained_bytes_ = has_restart && wal > restart ? int64_t(wal - restart) : 0;
  const double seconds = clock_.observe(now, wal, confirmed);
  lag_ms_ = int64_t(seconds * 1000);
  if (confirmed != last_confirmed_) {
    last_confirmed_ = confirmed;
    confirmed_moved_ = now;
  }

  if (o_.lag_warning > 0 && lag > o_.lag_warning) {
    if (!warned_ || now - last_warning_ >= kWarningEvery) {
      spdlog::warn(
          "pipeline {}: replication slot \"{}\" is {} behind the server's WAL (oldest unconfirmed "
          "{:.0f} s ago; slot_lag_warning {}): the server keeps that WAL until sluice confirms it "
          "— check that the destination keeps up",
          ctx_.pipeline_id, o_.slot, human_bytes(lag), seconds, human_bytes(o_.lag_warning));
      last_warning_ = now;
      warned_ = true;
    }
  } else if (warned_) {
    spdlog::info("pipeline {}: replication slot \"{}\" is back within slot_lag_warning ({} behind)",
                 ctx_.pipeline_id, o_.slot, human_bytes(lag));
    warned_ = false;
  }

  // Idle captured tables while other WAL grows: a change of our own moves the slot along.
  if (o_.heartbeat && !heartbeat_refused_ && !standby && lag > 0 &&
      now - confirmed_moved_ >= o_.interval && now - last_heartbeat_ >= o_.interval) {
    auto hb = exec_bounded(conn, "SELECT pg_logical_emit_message(true, $1, '')",
                           {std::string(kHeartbeatPrefix)}, kQueryTimeout, stop);
    last_heartbeat_ = now;
    if (hb.ok()) {
      heartbeats_.fetch_add(1, std::memory_order_relaxed);
    } else if (hb.error().retriable() || hb.error().code() == Errc::cancelled) {
      conn.reset();  // the server went away: reconnect on the next poll, try again then
    } else {
      heartbeat_refused_ = true;
      spdlog::warn(
          "pipeline {}: cannot write a heartbeat ({}); heartbeats are off for this run (grant "
          "EXECUTE on pg_logical_emit_message, or set heartbeat.emit_message: false)",
          ctx_.pipeline_id, hb.error().message());
    }
  }
}

}  // namespace sluice::pg
