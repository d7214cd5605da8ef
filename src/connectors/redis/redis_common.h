// What the redis source and destination share: the `url` setting
// (redis://[user:password@]host:port[/db]), one connection with its AUTH and SELECT done, and
// replies owned by RAII handles. hiredis (Debian's libhiredis-dev) does the protocol.
//
// Debian's hiredis is 0.14.1, which has no TLS support (hiredis_ssl came with 1.0): a `rediss://`
// URL is refused with an error that says so.
#pragma once

#include <hiredis/hiredis.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "connectors/common/credentials.h"
#include "sluice/result.h"

namespace sluice::redis {

struct RedisUrl {
  std::string user;      // empty: the default user (AUTH with the password only)
  std::string password;  // never log: use redacted()
  std::string host;      // without brackets for IPv6
  uint16_t port = 6379;
  int db = 0;

  // The URL with the password replaced by "***", for logs and errors.
  std::string redacted() const;
};

// Errors (invalid_argument) never contain the password. `credentials` (the `user`, `password`,
// `password_file` settings) override the URL's; the password is registered for redaction.
Result<RedisUrl> parse_redis_url(std::string_view url, Credentials credentials = {});

// Replies of a RedisConnection are built by reply_functions(), not by hiredis's defaults: hiredis
// allocates every element of a reply, and every string, on its own (about 46 allocations per
// stream entry of ten fields), and malloc and free of those took half of the stream source's CPU.
// Here a reply and everything under it share a few blocks, freed together by free_reply. Such a
// reply must be freed with free_reply (ReplyDeleter does), never with freeReplyObject.
redisReplyObjectFunctions* reply_functions() noexcept;
void free_reply(redisReply* r) noexcept;

struct ReplyDeleter {
  void operator()(redisReply* r) const noexcept { free_reply(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

// The text of a reply for messages: strings as they are, integers in decimal, arrays as [a, b].
std::string reply_text(const redisReply* r);

// One connection to a Redis server. Not thread-safe; move-only.
class RedisConnection {
 public:
  struct Options {
    std::chrono::milliseconds connect_timeout{10'000};
    // Read/write timeout of every command (0: none). A blocking read (XREADGROUP BLOCK n) must
    // stay below it.
    std::chrono::milliseconds command_timeout{60'000};
    std::string client_name;  // CLIENT SETNAME, when not empty
  };

  // Connects, authenticates (AUTH user password, or AUTH password) and selects the database.
  // Errors name the server (redacted URL) and the fix: unreachable, wrong password, missing
  // permission.
  static Result<RedisConnection> connect(const RedisUrl& url, const Options& options);

  RedisConnection(RedisConnection&&) noexcept = default;
  RedisConnection& operator=(RedisConnection&&) noexcept = default;
  ~RedisConnection() = default;

  // Runs one command. A Redis error reply ("-ERR …", "-NOPERM …") is an Error whose message
  // names the command; an I/O error or timeout is a retriable Errc::connection (or Errc::timeout)
  // error and leaves the connection unhealthy.
  Result<Reply> command(std::span<const std::string_view> args);
  Result<Reply> command(std::initializer_list<std::string_view> args) {
    return command(std::span<const std::string_view>(args.begin(), args.size()));
  }

  // Pipelining: append() queues a command in the output buffer; read_reply() flushes and reads
  // the next reply in order. A Redis error reply is returned as a Reply of type
  // REDIS_REPLY_ERROR (inside MULTI the caller decides); only I/O errors are Errors.
  void append(std::span<const std::string_view> args);
  void append(std::initializer_list<std::string_view> args) {
    append(std::span<const std::string_view>(args.begin(), args.size()));
  }
  Result<Reply> read_reply();
  // Sends what append() queued now, without waiting for a reply (read_reply() sends it too, but
  // only once it must wait: a reply already received does not send the commands behind it).
  Status flush();
  // read_reply() for a command named `command` whose error reply is an Error, as command() says.
  Result<Reply> read_reply_of(std::string_view command);
  // A reply already received, or one arriving within `timeout` (a subscriber's next message);
  // nullopt when none came. An I/O error or the server closing the connection is an Error.
  Result<std::optional<Reply>> poll_reply(std::chrono::milliseconds timeout);

  // False once an I/O error or timeout happened: reconnect.
  bool healthy() const noexcept { return ctx_ && ctx_->err == 0; }
  const RedisUrl& url() const noexcept { return url_; }

 private:
  struct ContextDeleter {
    void operator()(redisContext* c) const noexcept { redisFree(c); }
  };
  RedisConnection(std::unique_ptr<redisContext, ContextDeleter> ctx, RedisUrl url)
      : ctx_(std::move(ctx)), url_(std::move(url)) {}
  Error io_error(std::string_view what) const;

  std::unique_ptr<redisContext, ContextDeleter> ctx_;
  RedisUrl url_;
  std::vector<const char*> argv_;
  std::vector<size_t> argl_;
};

}  // namespace sluice::redis
