// A Kafka broker of the test's own, for tests that stop and start "their" broker: they must never
// restart a broker other tests (or other engineers) share. Starts one with scripts/services in a
// temporary SLUICE_SERVICES_DIR on free ports, points SLUICE_TEST_KAFKA_BROKERS — and the
// variables the test's own scripts/services calls inherit — at it, and stops it at the end.
#pragma once

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "support/process.h"

namespace sluice::test {

// Runs scripts/services with the current environment; its output goes to the test's log.
inline int services(const std::string& args) {
  const std::string cmd = std::string(SLUICE_SOURCE_DIR) + "/scripts/services " + args + " >&2";
  return std::system(cmd.c_str());
}

class PrivateKafka {
 public:
  PrivateKafka() {
    dir_ = e2e::make_temp_dir("private-kafka");
    port_ = free_port_pair();
    if (port_ == 0) {
      ADD_FAILURE() << "no two free adjacent loopback ports for a private Kafka broker";
      return;
    }
    setenv("SLUICE_SERVICES_DIR", dir_.c_str(), 1);
    setenv("SLUICE_KAFKA_PORT", std::to_string(port_).c_str(), 1);
    setenv("SLUICE_TEST_KAFKA_BROKERS", brokers().c_str(), 1);
    ok_ = services("start kafka") == 0;
    if (!ok_) ADD_FAILURE() << "cannot start a private Kafka broker on port " << port_;
  }
  ~PrivateKafka() {
    if (port_ != 0) (void)services("stop kafka");
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  PrivateKafka(const PrivateKafka&) = delete;
  PrivateKafka& operator=(const PrivateKafka&) = delete;

  bool ok() const { return ok_; }
  std::string brokers() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
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
  int port_ = 0;
  bool ok_ = false;
};

}  // namespace sluice::test
