// A Kafka broker of the test's own, for tests that stop and start "their" broker: they must never
// restart a broker other tests (or other engineers) share. Starts one with scripts/services in a
// temporary SLUICE_SERVICES_DIR on free ports, points SLUICE_TEST_KAFKA_BROKERS — and the
// variables the test's own scripts/services calls inherit — at it, and stops it at the end.
#pragma once

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "support/fault_proxy.h"
#include "support/kafka.h"
#include "support/process.h"

namespace sluice::test {

// Runs scripts/services with the current environment; its output goes to the test's log.
inline int services(const std::string& args) {
  const std::string cmd = std::string(SLUICE_SOURCE_DIR) + "/scripts/services " + args + " >&2";
  return std::system(cmd.c_str());
}

class PrivateKafka {
 public:
  // Behind a proxy: every client connection (sluice's, the test's, the broker's own to itself)
  // goes through a fault proxy in front of the broker, which advertises the proxy's address.
  enum class Via { direct, fault_proxy };
  explicit PrivateKafka(Via via = Via::direct) {
    dir_ = make_temp_dir("private-kafka");
    port_ = free_port_pair();
    if (port_ == 0) {
      ADD_FAILURE() << "no two free adjacent loopback ports for a private Kafka broker";
      return;
    }
    if (via == Via::fault_proxy) proxy_ = std::make_unique<FaultProxy>("127.0.0.1", port_);
    setenv("SLUICE_SERVICES_DIR", dir_.c_str(), 1);
    setenv("SLUICE_KAFKA_PORT", std::to_string(port_).c_str(), 1);
    if (proxy_) setenv("SLUICE_KAFKA_ADVERTISED_PORT", std::to_string(proxy_->port()).c_str(), 1);
    setenv("SLUICE_TEST_KAFKA_BROKERS", brokers().c_str(), 1);
    ok_ = services("start kafka") == 0;
    unsetenv("SLUICE_KAFKA_ADVERTISED_PORT");
    if (!ok_) ADD_FAILURE() << "cannot start a private Kafka broker on port " << port_;
    if (ok_) ok_ = coordinator_ready();
  }
  ~PrivateKafka() {
    if (proxy_) proxy_->set_normal();
    if (port_ != 0) (void)services("stop kafka");
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  PrivateKafka(const PrivateKafka&) = delete;
  PrivateKafka& operator=(const PrivateKafka&) = delete;

  bool ok() const { return ok_; }
  std::string brokers() const {
    return "127.0.0.1:" + std::to_string(proxy_ ? proxy_->port() : port_);
  }
  // Via::fault_proxy: the proxy in front of the broker.
  FaultProxy& proxy() { return *proxy_; }

 private:
  // A new broker answers metadata before its group coordinator (__consumer_offsets) is loaded:
  // wait for the coordinator, as the shared broker of a running test suite has it already.
  static bool coordinator_ready() {
    rd_kafka_t* rk = detail::make_client(
        RD_KAFKA_CONSUMER,
        {{"group.id", "sluice-private-kafka-warmup"}, {"enable.auto.commit", "false"}});
    if (!rk) return false;
    rd_kafka_topic_partition_list_t* l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, "sluice_private_kafka_warmup", 0);
    // Its first use creates __consumer_offsets (50 partitions), which takes a while on a busy host.
    rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR_NO_ERROR;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(180);
    for (;;) {
      e = rd_kafka_committed(rk, l, 10000);
      if (e == RD_KAFKA_RESP_ERR_NO_ERROR || std::chrono::steady_clock::now() > give_up) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    rd_kafka_topic_partition_list_destroy(l);
    rd_kafka_destroy(rk);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
      ADD_FAILURE() << "the private Kafka broker's group coordinator is not ready: "
                    << rd_kafka_err2str(e);
    return e == RD_KAFKA_RESP_ERR_NO_ERROR;
  }

  // The broker listens on PORT and its controller on PORT + 1.
  static int free_port_pair() {
    for (int attempt = 0; attempt < 20; ++attempt) {
      const int p = bound_port(0);
      if (p > 0 && p < 65535 && bound_port(p + 1) == p + 1) return p;
    }
    return 0;
  }
  static int bound_port(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(uint16_t(port));
    socklen_t len = sizeof(a);
    int got = -1;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      got = ntohs(a.sin_port);
    ::close(fd);
    return got;
  }

  std::filesystem::path dir_;
  std::unique_ptr<FaultProxy> proxy_;
  int port_ = 0;
  bool ok_ = false;
};

}  // namespace sluice::test
