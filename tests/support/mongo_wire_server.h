// A MongoDB-wire server for tests that no real server can run (change streams: FerretDB has
// none). It answers libmongoc's handshake (hello / isMaster, over OP_QUERY or OP_MSG) itself and
// every other command with the reply the test's handler gives — recorded server replies written
// as Extended JSON and built with libbson — and keeps every command it received. It speaks only
// what libmongoc sends a single server: OP_QUERY (the legacy handshake) and OP_MSG with a body
// section; no compression, TLS or authentication.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace sluice::test {

class MongoWireServer {
 public:
  // The reply (Extended JSON) to a command (canonical Extended JSON, without the "$db", "lsid"
  // and "$clusterTime" fields libmongoc adds), given its name (the first key).
  using Handler = std::function<std::string(const std::string& name, const std::string& command)>;

  explicit MongoWireServer(Handler handler);
  ~MongoWireServer();
  MongoWireServer(const MongoWireServer&) = delete;
  MongoWireServer& operator=(const MongoWireServer&) = delete;

  int port() const { return port_; }
  // mongodb://127.0.0.1:<port>/<database>, with short timeouts.
  std::string url(const std::string& database) const;
  // Every command received apart from the handshake, in order (as given to the handler).
  std::vector<std::string> commands() const;

 private:
  void accept_loop();
  void serve(int fd);

  Handler handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  mutable std::mutex mu_;
  std::vector<std::thread> connections_;
  std::vector<int> fds_;
  std::vector<std::string> commands_;
};

}  // namespace sluice::test
