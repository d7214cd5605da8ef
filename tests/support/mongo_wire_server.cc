// The MongoDB-wire test server (mongo_wire_server.h).
#include "support/mongo_wire_server.h"

#include <arpa/inet.h>
#include <bson/bson.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>

namespace sluice::test {

namespace {

constexpr int32_t kOpReply = 1;
constexpr int32_t kOpQuery = 2004;
constexpr int32_t kOpMsg = 2013;

bool read_all(int fd, uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t got = ::recv(fd, p, n, 0);
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

bool write_all(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t sent = ::send(fd, p, n, MSG_NOSIGNAL);
    if (sent <= 0) return false;
    p += sent;
    n -= static_cast<size_t>(sent);
  }
  return true;
}

void put32(std::vector<uint8_t>& out, int32_t v) {
  uint32_t le = BSON_UINT32_TO_LE(static_cast<uint32_t>(v));
  const auto* b = reinterpret_cast<const uint8_t*>(&le);
  out.insert(out.end(), b, b + 4);
}

int32_t get32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return static_cast<int32_t>(BSON_UINT32_FROM_LE(v));
}

bson_t* from_json(const std::string& json) {
  bson_error_t err;
  bson_t* b = bson_new_from_json(reinterpret_cast<const uint8_t*>(json.data()),
                                 static_cast<ssize_t>(json.size()), &err);
  if (b) return b;
  // The test's recorded reply is malformed: the client sees a server error saying so.
  std::string msg = "MongoWireServer: the recorded reply is not Extended JSON: ";
  msg += err.message;
  return BCON_NEW("ok", BCON_DOUBLE(0), "errmsg", BCON_UTF8(msg.c_str()), "code", BCON_INT32(1));
}

std::string hello_reply() {
  return R"({"helloOk":true,"isWritablePrimary":true,"ismaster":true,)"
         R"("maxBsonObjectSize":16777216,"maxMessageSizeBytes":48000000,)"
         R"("maxWriteBatchSize":100000,"minWireVersion":0,"maxWireVersion":17,"ok":1.0})";
}

}  // namespace

MongoWireServer::MongoWireServer(Handler handler) : handler_(std::move(handler)) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, 16) != 0)
    throw std::runtime_error("MongoWireServer: cannot listen on 127.0.0.1");
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

MongoWireServer::~MongoWireServer() {
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  ::close(listen_fd_);
  acceptor_.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
    threads = std::move(connections_);
  }
  for (auto& t : threads) t.join();
  for (int fd : fds_) ::close(fd);
}

std::string MongoWireServer::url(const std::string& database) const {
  return "mongodb://127.0.0.1:" + std::to_string(port_) + "/" + database +
         "?serverSelectionTimeoutMS=3000&connectTimeoutMS=3000&socketTimeoutMS=10000";
}

std::vector<std::string> MongoWireServer::commands() const {
  std::lock_guard lock(mu_);
  return commands_;
}

void MongoWireServer::accept_loop() {
  while (!stopping_) {
    int fd = ::accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) {
      if (stopping_) return;
      continue;
    }
    std::lock_guard lock(mu_);
    fds_.push_back(fd);
    connections_.emplace_back([this, fd] { serve(fd); });
  }
}

void MongoWireServer::serve(int fd) {
  for (;;) {
    uint8_t header[16];
    if (!read_all(fd, header, sizeof header)) return;
    const int32_t length = get32(header), request_id = get32(header + 4), op = get32(header + 12);
    if (length < 16 || length > 48 * 1024 * 1024) return;
    std::vector<uint8_t> body(static_cast<size_t>(length) - 16);
    if (!read_all(fd, body.data(), body.size())) return;
    const uint8_t* doc = nullptr;
    uint32_t flags = 0;
    if (op == kOpQuery) {
      // flags, fullCollectionName (cstring), numberToSkip, numberToReturn, query
      size_t at = 4;
      while (at < body.size() && body[at] != 0) ++at;
      at += 1 + 8;
      if (at + 5 > body.size()) return;
      doc = body.data() + at;
    } else if (op == kOpMsg) {
      std::memcpy(&flags, body.data(), 4);
      flags = BSON_UINT32_FROM_LE(flags);
      if (body.size() < 10 || body[4] != 0) return;  // the body section comes first
      doc = body.data() + 5;
    } else {
      return;
    }
    const int32_t doc_len = get32(doc);
    if (doc_len < 5 || doc + doc_len > body.data() + body.size()) return;
    bson_t cmd;
    if (!bson_init_static(&cmd, doc, static_cast<size_t>(doc_len))) return;
    bson_iter_t it;
    std::string name = bson_iter_init(&it, &cmd) && bson_iter_next(&it) ? bson_iter_key(&it) : "";
    std::string reply_json;
    if (name == "hello" || name == "isMaster" || name == "ismaster") {
      reply_json = hello_reply();
    } else {
      bson_t shown = BSON_INITIALIZER;
      bson_copy_to_excluding_noinit(&cmd, &shown, "$db", "lsid", "$clusterTime", "$readPreference",
                                    nullptr);
      size_t n = 0;
      char* s = bson_as_canonical_extended_json(&shown, &n);
      std::string json(s, n);
      bson_free(s);
      bson_destroy(&shown);
      {
        std::lock_guard lock(mu_);
        commands_.push_back(json);
      }
      reply_json = handler_(name, json);
      if (reply_json.empty()) reply_json = R"({"ok":1.0})";
    }
    if (op == kOpMsg && (flags & 2u)) continue;  // moreToCome: no reply
    bson_t* reply = from_json(reply_json);
    std::vector<uint8_t> out;
    put32(out, 0);  // length, set below
    put32(out, request_id + 1000000);
    put32(out, request_id);
    if (op == kOpQuery) {
      put32(out, kOpReply);
      put32(out, 0);  // responseFlags
      put32(out, 0);  // cursorID (int64)
      put32(out, 0);
      put32(out, 0);  // startingFrom
      put32(out, 1);  // numberReturned
    } else {
      put32(out, kOpMsg);
      put32(out, 0);     // flagBits
      out.push_back(0);  // a body section
    }
    out.insert(out.end(), bson_get_data(reply), bson_get_data(reply) + reply->len);
    bson_destroy(reply);
    const uint32_t total = BSON_UINT32_TO_LE(static_cast<uint32_t>(out.size()));
    std::memcpy(out.data(), &total, 4);
    if (!write_all(fd, out.data(), out.size())) return;
  }
}

}  // namespace sluice::test
