// A TCP fault proxy the tests control: it listens on a loopback port of its own and forwards every
// connection to one server, and its faults switch at run time, between any two bytes:
//
//   client (sluice) ──▶ [listen 127.0.0.1:port] ══ FaultProxy thread (poll) ══▶ server
//
//   normal      forwards both ways as fast as it can
//   latency     holds every chunk read `ms` before forwarding it (each direction)
//   bandwidth   forwards at most `bytes_per_second` per connection and direction
//   blackhole   stops reading and forwarding but keeps every socket open (a partition, lost NAT
//               state, a proxy that holds TCP open): the peers see silence, never a close; new
//               connections are accepted but not forwarded until it ends
//   reset       sends RST (SO_LINGER 0) on every open connection, both sides; new ones work
//   outage      reset, then refuses new connections (accepted and reset at once) until it ends:
//               what a server restart looks like from sluice's side of the network
//
// One thread runs every socket with poll(); the control calls take a mutex and wake it through a
// pipe, and reset()/set_outage() return once the connections are closed.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace sluice::test {

class FaultProxy {
 public:
  // Forwards to `host`:`port` (numeric IPv4). Throws std::runtime_error when it cannot listen.
  FaultProxy(std::string host, int port);
  ~FaultProxy();
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  int port() const { return listen_port_; }

  // Back to plain forwarding (no latency, no cap, no blackhole, no outage).
  void set_normal();
  void set_latency(int ms);
  void set_bandwidth(int64_t bytes_per_second);  // 0: no cap
  void set_blackhole(bool on);
  // RST on every open connection; returns when they are closed.
  void reset();
  // on: reset and refuse new connections; off: accept them again.
  void set_outage(bool on);

  // Counters (for assertions that a fault really hit traffic).
  int64_t connections_accepted() const { return accepted_.load(); }
  int64_t connections_reset() const { return reset_count_.load(); }
  int64_t bytes_forwarded() const { return forwarded_.load(); }
  int open_connections() const { return open_.load(); }

 private:
  struct State {
    int latency_ms = 0;
    int64_t bandwidth = 0;
    bool blackhole = false;
    bool outage = false;
    uint64_t reset_requests = 0;
  };
  void run();
  void wake();
  State snapshot_state();

  std::string host_;
  int target_port_;
  int listen_fd_ = -1;
  int listen_port_ = 0;
  int wake_pipe_[2] = {-1, -1};

  std::mutex mu_;
  std::condition_variable cv_;
  State state_;
  uint64_t resets_done_ = 0;
  bool stop_ = false;

  std::atomic<int64_t> accepted_{0}, reset_count_{0}, forwarded_{0};
  std::atomic<int> open_{0};
  std::thread thread_;
};

}  // namespace sluice::test
