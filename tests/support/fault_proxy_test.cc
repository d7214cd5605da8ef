// The fault proxy against a local echo server (no database): each fault does to the traffic what
// its name says. Bounds on time are lower bounds the proxy guarantees (it holds bytes at least that
// long), never speed.
#include "support/fault_proxy.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace sluice::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Echoes every byte back on each accepted connection, one thread per connection.
class EchoServer {
 public:
  EchoServer() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(listen(fd_, 16), 0);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      for (;;) {
        int c = accept(fd_, nullptr, nullptr);
        if (c < 0 || stop_) {
          if (c >= 0) close(c);
          return;
        }
        workers_.emplace_back([c] {
          char buf[16384];
          for (;;) {
            ssize_t n = recv(c, buf, sizeof buf, 0);
            if (n <= 0) break;
            if (send(c, buf, size_t(n), MSG_NOSIGNAL) != n) break;
          }
          close(c);
        });
      }
    });
  }
  ~EchoServer() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
    for (auto& w : workers_) w.join();
  }
  int port() const { return port_; }

 private:
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::vector<std::thread> workers_;
};

int connect_to(int port) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return s;
}

// Reads exactly `n` bytes within `timeout`; what arrived (shorter on timeout, close or error;
// `err` gets errno of an error, -1 for an orderly close).
std::string read_n(int s, size_t n, std::chrono::milliseconds timeout, int* err = nullptr) {
  std::string out;
  const auto end = Clock::now() + timeout;
  if (err) *err = 0;
  while (out.size() < n) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
    if (left <= 0) break;
    pollfd p{s, POLLIN, 0};
    if (poll(&p, 1, int(left)) <= 0) break;
    char buf[65536];
    ssize_t r = recv(s, buf, std::min(sizeof buf, n - out.size()), 0);
    if (r < 0) {
      if (err) *err = errno;
      break;
    }
    if (r == 0) {
      if (err) *err = -1;
      break;
    }
    out.append(buf, size_t(r));
  }
  return out;
}

void send_all(int s, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = send(s, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    ASSERT_GT(n, 0) << std::strerror(errno);
    off += size_t(n);
  }
}

TEST(FaultProxy, ForwardsBothWaysWhenNormal) {
  EchoServer echo;
  FaultProxy proxy("127.0.0.1", echo.port());
  int s = connect_to(proxy.port());
  std::string big(300000, 'x');
  for (size_t i = 0; i < big.size(); ++i) big[i] = char('a' + i % 26);
  std::thread w([&] { send_all(s, big); });
  EXPECT_EQ(read_n(s, big.size(), 10s), big);
  w.join();
  EXPECT_EQ(proxy.connections_accepted(), 1);
  // The proxy counts a chunk after sending it on: the echo may reach the client first.
  for (int i = 0; i < 200 && proxy.bytes_forwarded() < int64_t(2 * big.size()); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_GE(proxy.bytes_forwarded(), int64_t(2 * big.size()));
  close(s);
}

TEST(FaultProxy, LatencyHoldsEveryChunk) {
  EchoServer echo;
  FaultProxy proxy("127.0.0.1", echo.port());
  proxy.set_latency(150);
  int s = connect_to(proxy.port());
  const auto t0 = Clock::now();
  send_all(s, "ping");
  EXPECT_EQ(read_n(s, 4, 10s), "ping");
  // Held 150 ms each way.
  EXPECT_GE(Clock::now() - t0, 300ms);
  proxy.set_normal();
  const auto t1 = Clock::now();
  send_all(s, "pong");
  EXPECT_EQ(read_n(s, 4, 10s), "pong");
  EXPECT_LT(Clock::now() - t1, 300ms * 10);  // no longer held (a loose bound: a loaded machine)
  close(s);
}

TEST(FaultProxy, BandwidthCapSlowsATransfer) {
  EchoServer echo;
  FaultProxy proxy("127.0.0.1", echo.port());
  proxy.set_bandwidth(100 * 1024);  // 100 KiB/s each way, a burst of 10 KiB
  int s = connect_to(proxy.port());
  std::string data(60 * 1024, 'b');
  const auto t0 = Clock::now();
  std::thread w([&] { send_all(s, data); });
  EXPECT_EQ(read_n(s, data.size(), 20s), data);
  w.join();
  // At least (60 - 10) KiB at 100 KiB/s.
  EXPECT_GE(Clock::now() - t0, 450ms);
  close(s);
}

TEST(FaultProxy, BlackholeKeepsTheConnectionOpenAndSilentUntilItEnds) {
  EchoServer echo;
  FaultProxy proxy("127.0.0.1", echo.port());
  int s = connect_to(proxy.port());
  send_all(s, "one");
  ASSERT_EQ(read_n(s, 3, 5s), "one");
  proxy.set_blackhole(true);
  send_all(s, "two");
  int err = 0;
  EXPECT_EQ(read_n(s, 3, 400ms, &err), "");
  EXPECT_EQ(err, 0) << "the blackhole closed or reset the connection";
  // A new connection is accepted but not answered either.
  int s2 = connect_to(proxy.port());
  send_all(s2, "new");
  EXPECT_EQ(read_n(s2, 3, 300ms, &err), "");
  EXPECT_EQ(err, 0);
  proxy.set_blackhole(false);
  EXPECT_EQ(read_n(s, 3, 5s), "two");
  EXPECT_EQ(read_n(s2, 3, 5s), "new");
  close(s);
  close(s2);
}

TEST(FaultProxy, ResetSendsRstAndLaterConnectionsWork) {
  EchoServer echo;
  FaultProxy proxy("127.0.0.1", echo.port());
  int s = connect_to(proxy.port());
  send_all(s, "abc");
  ASSERT_EQ(read_n(s, 3, 5s), "abc");
  proxy.reset();
  int err = 0;
  EXPECT_EQ(read_n(s, 1, 5s, &err), "");
  EXPECT_EQ(err, ECONNRESET);
  EXPECT_EQ(proxy.connections_reset(), 1);
  close(s);
  int s2 = connect_to(proxy.port());
  send_all(s2, "def");
  EXPECT_EQ(read_n(s2, 3, 5s), "def");
  close(s2);
}

TEST(FaultProxy, OutageRefusesNewConnectionsUntilItEnds) {
  EchoServer echo;
  FaultProxy proxy("127.0.0.1", echo.port());
  int s = connect_to(proxy.port());
  send_all(s, "abc");
  ASSERT_EQ(read_n(s, 3, 5s), "abc");
  proxy.set_outage(true);
  int err = 0;
  EXPECT_EQ(read_n(s, 1, 5s, &err), "");
  EXPECT_EQ(err, ECONNRESET);
  close(s);
  int s2 = connect_to(proxy.port());  // the handshake completes in the kernel, then a reset
  EXPECT_EQ(read_n(s2, 1, 5s, &err), "");
  EXPECT_NE(err, 0);
  close(s2);
  proxy.set_outage(false);
  int s3 = connect_to(proxy.port());
  send_all(s3, "up");
  EXPECT_EQ(read_n(s3, 2, 5s), "up");
  close(s3);
}

TEST(FaultProxy, AServerThatIsNotThereResetsTheClient) {
  int port = 0;
  {
    EchoServer gone;
    port = gone.port();
  }
  FaultProxy proxy("127.0.0.1", port);
  int s = connect_to(proxy.port());
  int err = 0;
  EXPECT_EQ(read_n(s, 1, 5s, &err), "");
  EXPECT_NE(err, 0);
  close(s);
}

}  // namespace
}  // namespace sluice::test
