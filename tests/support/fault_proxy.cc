#include "support/fault_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <memory>
#include <stdexcept>
#include <vector>

namespace sluice::test {

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kChunk = 64 * 1024;
constexpr size_t kMaxQueued = 1024 * 1024;  // per direction: stop reading beyond it

void set_nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

// Closes with RST instead of FIN.
void close_with_rst(int fd) {
  if (fd < 0) return;
  linger l{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  ::close(fd);
}

struct Chunk {
  Clock::time_point due;
  std::string data;
  size_t off = 0;
};

// One direction of a connection: bytes read from `from`, queued, written to `to`.
struct Pipe {
  std::deque<Chunk> queue;
  size_t queued = 0;
  bool eof = false;   // `from` closed its side
  bool shut = false;  // shutdown(to, SHUT_WR) done after eof and an empty queue
  double tokens = 0;  // bandwidth cap: bytes that may still be read
  Clock::time_point last_refill = Clock::now();
};

struct Conn {
  int client = -1, server = -1;
  bool connected = false;  // upstream connect done (deferred while blackholed)
  Pipe up, down;           // up: client → server, down: server → client
};

}  // namespace

FaultProxy::FaultProxy(std::string host, int port) : host_(std::move(host)), target_port_(port) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
  if (listen_fd_ < 0) throw std::runtime_error("fault proxy: socket failed");
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      listen(listen_fd_, 128) != 0 ||
      getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(listen_fd_);
    throw std::runtime_error(std::string("fault proxy: cannot listen: ") + std::strerror(errno));
  }
  listen_port_ = ntohs(a.sin_port);
  set_nonblocking(listen_fd_);
  if (pipe(wake_pipe_) != 0) throw std::runtime_error("fault proxy: pipe failed");
  set_nonblocking(wake_pipe_[0]);
  set_nonblocking(wake_pipe_[1]);
  thread_ = std::thread([this] { run(); });
}

FaultProxy::~FaultProxy() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  wake();
  thread_.join();
  ::close(listen_fd_);
  ::close(wake_pipe_[0]);
  ::close(wake_pipe_[1]);
}

void FaultProxy::wake() {
  char c = 1;
  (void)!write(wake_pipe_[1], &c, 1);
}

void FaultProxy::set_normal() {
  {
    std::lock_guard lk(mu_);
    state_.latency_ms = 0;
    state_.bandwidth = 0;
    state_.blackhole = false;
    state_.outage = false;
  }
  wake();
}

void FaultProxy::set_latency(int ms) {
  {
    std::lock_guard lk(mu_);
    state_.latency_ms = std::max(0, ms);
  }
  wake();
}

void FaultProxy::set_bandwidth(int64_t bytes_per_second) {
  {
    std::lock_guard lk(mu_);
    state_.bandwidth = std::max<int64_t>(0, bytes_per_second);
  }
  wake();
}

void FaultProxy::set_blackhole(bool on) {
  {
    std::lock_guard lk(mu_);
    state_.blackhole = on;
  }
  wake();
}

void FaultProxy::reset() {
  std::unique_lock lk(mu_);
  const uint64_t want = ++state_.reset_requests;
  lk.unlock();
  wake();
  lk.lock();
  cv_.wait(lk, [&] { return resets_done_ >= want || stop_; });
}

void FaultProxy::set_outage(bool on) {
  {
    std::lock_guard lk(mu_);
    state_.outage = on;
  }
  if (on) reset();
  else wake();
}

FaultProxy::State FaultProxy::snapshot_state() {
  std::lock_guard lk(mu_);
  return state_;
}

void FaultProxy::run() {
  std::vector<std::unique_ptr<Conn>> conns;
  uint64_t resets_seen = 0;
  std::vector<pollfd> fds;
  std::vector<std::pair<Conn*, int>> owner;  // per pollfd after the first two: conn, side

  auto drop = [&](Conn& c, bool rst) {
    if (rst) {
      close_with_rst(c.client);
      close_with_rst(c.server);
    } else {
      if (c.client >= 0) ::close(c.client);
      if (c.server >= 0) ::close(c.server);
    }
    c.client = c.server = -1;
  };

  auto connect_upstream = [&](Conn& c) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(target_port_));
    inet_pton(AF_INET, host_.c_str(), &a.sin_addr);
    // Loopback: a blocking connect is immediate (refused or accepted).
    if (s < 0 || ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      if (s >= 0) ::close(s);
      close_with_rst(c.client);  // the server is not there: the client sees a reset
      c.client = -1;
      return;
    }
    int one = 1;
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    set_nonblocking(s);
    c.server = s;
    c.connected = true;
  };

  for (;;) {
    const State st = snapshot_state();
    {
      std::lock_guard lk(mu_);
      if (stop_) break;
    }
    const auto now = Clock::now();

    if (st.reset_requests > resets_seen) {
      for (auto& c : conns) {
        drop(*c, true);
        reset_count_++;
      }
      conns.clear();
      resets_seen = st.reset_requests;
      {
        std::lock_guard lk(mu_);
        resets_done_ = resets_seen;
      }
      cv_.notify_all();
    }

    if (!st.blackhole)
      for (auto& c : conns)
        if (!c->connected && c->client >= 0) connect_upstream(*c);

    // Writes of due chunks; refills of the bandwidth buckets.
    auto pump = [&](Pipe& p, int to) {
      if (st.blackhole || to < 0) return;
      while (!p.queue.empty() && p.queue.front().due <= now) {
        Chunk& ch = p.queue.front();
        ssize_t n = ::send(to, ch.data.data() + ch.off, ch.data.size() - ch.off, MSG_NOSIGNAL);
        if (n < 0) break;  // EAGAIN (poll for POLLOUT) or an error (seen on read)
        ch.off += size_t(n);
        p.queued -= size_t(n);
        forwarded_ += n;
        if (ch.off < ch.data.size()) break;
        p.queue.pop_front();
      }
      if (p.eof && p.queue.empty() && !p.shut) {
        shutdown(to, SHUT_WR);
        p.shut = true;
      }
    };
    auto refill = [&](Pipe& p) {
      if (st.bandwidth <= 0) return;
      double dt = std::chrono::duration<double>(now - p.last_refill).count();
      // A burst of at most a tenth of a second's worth.
      const double burst = std::max(1.0, double(st.bandwidth) / 10);
      p.tokens = std::min(burst, p.tokens + dt * double(st.bandwidth));
      p.last_refill = now;
    };
    for (auto& c : conns) {
      if (!c->connected) continue;
      refill(c->up);
      refill(c->down);
      pump(c->up, c->server);
      pump(c->down, c->client);
    }
    std::erase_if(conns, [&](const std::unique_ptr<Conn>& c) {
      bool done = c->client < 0 || (c->connected && c->up.shut && c->down.shut);
      if (done) drop(*c, false);
      return done;
    });
    open_ = int(conns.size());

    // Poll set: wake pipe, listener, then each socket.
    fds.clear();
    owner.clear();
    fds.push_back({wake_pipe_[0], POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    int timeout_ms = 1000;
    auto consider_due = [&](const Pipe& p) {
      if (p.queue.empty()) return;
      auto ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(p.queue.front().due - now).count();
      timeout_ms = std::min<int>(timeout_ms, int(std::max<int64_t>(0, ms)) + 1);
    };
    for (auto& c : conns) {
      if (!c->connected || st.blackhole) continue;
      auto want = [&](int fd, Pipe& in, Pipe& out, int side) {
        short ev = 0;
        bool cap = st.bandwidth > 0 && in.tokens < 1;
        if (!in.eof && in.queued < kMaxQueued && !cap) ev |= POLLIN;
        if (!out.queue.empty() && out.queue.front().due <= now) ev |= POLLOUT;
        if (cap) timeout_ms = std::min(timeout_ms, 10);
        fds.push_back({fd, ev, 0});
        owner.emplace_back(c.get(), side);
      };
      want(c->client, c->up, c->down, 0);
      want(c->server, c->down, c->up, 1);
      consider_due(c->up);
      consider_due(c->down);
    }
    if (st.blackhole) timeout_ms = 100;

    int r = ::poll(fds.data(), fds.size(), timeout_ms);
    if (r < 0 && errno != EINTR) break;
    if (fds[0].revents & POLLIN) {
      char buf[64];
      while (read(wake_pipe_[0], buf, sizeof buf) > 0) {
      }
    }
    if (fds[1].revents & POLLIN) {
      for (;;) {
        int cfd = accept(listen_fd_, nullptr, nullptr);
        if (cfd < 0) break;
        // The state once accepted, not the one before poll: a connection made right after a
        // control call returned must see its effect.
        const State at_accept = snapshot_state();
        accepted_++;
        if (at_accept.outage) {
          close_with_rst(cfd);
          continue;
        }
        int one = 1;
        setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        set_nonblocking(cfd);
        auto c = std::make_unique<Conn>();
        c->client = cfd;
        if (!at_accept.blackhole) connect_upstream(*c);
        if (c->client >= 0) conns.push_back(std::move(c));
      }
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      auto [c, side] = owner[i - 2];
      if (c->client < 0) continue;
      Pipe& in = side == 0 ? c->up : c->down;
      const short re = fds[i].revents;
      if (re & (POLLIN | POLLHUP | POLLERR)) {
        size_t want = kChunk;
        if (st.bandwidth > 0) want = std::min<size_t>(want, size_t(std::max(1.0, in.tokens)));
        std::string buf(want, '\0');
        ssize_t n = ::recv(fds[i].fd, buf.data(), buf.size(), 0);
        if (n > 0) {
          buf.resize(size_t(n));
          if (st.bandwidth > 0) in.tokens -= double(n);
          in.queued += size_t(n);
          in.queue.push_back(
              {Clock::now() + std::chrono::milliseconds(st.latency_ms), std::move(buf), 0});
        } else if (n == 0) {
          in.eof = true;
        } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          // A reset from one peer is passed on as a reset to the other.
          drop(*c, true);
        }
      }
    }
  }
  for (auto& c : conns) drop(*c, true);
  open_ = 0;
  cv_.notify_all();
}

}  // namespace sluice::test
