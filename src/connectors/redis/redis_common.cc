#include "connectors/redis/redis_common.h"

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include <poll.h>

#include "connectors/common/url_authority.h"
#include "sluice/secrets.h"

namespace sluice::redis {

namespace {

Error url_error(std::string_view what) {
  return Error(Errc::invalid_argument,
               fmt::format("redis url: {}; expected redis://[user:password@]host:port[/db]", what));
}

timeval to_timeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

}  // namespace

std::string RedisUrl::redacted() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  std::string auth;
  if (!user.empty() || !password.empty())
    auth = fmt::format("{}{}@", user, password.empty() ? "" : ":***");
  return fmt::format("redis://{}{}:{}/{}", auth, h, port, db);
}

Result<RedisUrl> parse_redis_url(std::string_view url, Credentials credentials) {
  RedisUrl u;
  std::string_view rest;
  if (url.starts_with("rediss://"))
    return url_error(
        "TLS (rediss://) is not available: Debian's hiredis 0.14 has no TLS support; connect "
        "over a trusted network or a local TLS tunnel with redis://");
  if (url.starts_with("redis://")) rest = url.substr(8);
  else return url_error("the scheme must be redis://");

  auto authority = parse_url_authority(rest);
  if (!authority) return url_error(authority.error().message());
  UrlAuthority& a = *authority;
  // redis://:password@host (the default user) or redis://user:password@host.
  u.user = std::move(a.user);
  u.password = std::move(a.password);
  u.host = std::move(a.host);
  if (a.port) u.port = *a.port;
  if (Status st = resolve_credentials(credentials); !st) return std::move(st).error();
  if (!credentials.user.empty()) u.user = credentials.user;
  if (!credentials.password.empty()) u.password = credentials.password;
  if (!u.user.empty() && u.password.empty())
    return url_error(
        fmt::format("the user \"{}\" has no password (give it in the URL, "
                    "`password` or `password_file`)",
                    u.user));
  register_secret(u.password);

  const std::string_view path = a.path;
  if (!path.empty()) {
    int db = -1;
    auto [p, ec] = std::from_chars(path.data(), path.data() + path.size(), db);
    if (ec != std::errc() || p != path.data() + path.size() || db < 0)
      return url_error(fmt::format("the database \"{}\" is not a number (0, 1, …)", path));
    u.db = db;
  }
  return u;
}

std::string reply_text(const redisReply* r) {
  if (r == nullptr) return "(no reply)";
  switch (r->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR: return std::string(r->str, r->len);
    case REDIS_REPLY_INTEGER: return std::to_string(r->integer);
    case REDIS_REPLY_NIL: return "(nil)";
    case REDIS_REPLY_ARRAY: {
      std::string out = "[";
      for (size_t i = 0; i < r->elements; ++i) {
        if (i) out += ", ";
        out += reply_text(r->element[i]);
      }
      return out + "]";
    }
    default: return "(reply)";
  }
}

Result<RedisConnection> RedisConnection::connect(const RedisUrl& url, const Options& options) {
  timeval tv = to_timeval(options.connect_timeout);
  std::unique_ptr<redisContext, ContextDeleter> ctx(
      redisConnectWithTimeout(url.host.c_str(), url.port, tv));
  if (!ctx) return Error(Errc::internal, "redis: cannot allocate a connection");
  if (ctx->err)
    return Error(Errc::connection,
                 fmt::format("redis {}: cannot connect: {}; is the server running and the url "
                             "right?",
                             url.redacted(), ctx->errstr),
                 /*retriable=*/true);
  if (options.command_timeout.count() > 0)
    redisSetTimeout(ctx.get(), to_timeval(options.command_timeout));
  redisEnableKeepAlive(ctx.get());
  RedisConnection conn(std::move(ctx), url);

  if (!url.password.empty()) {
    Result<Reply> r = url.user.empty() ? conn.command({"AUTH", url.password})
                                       : conn.command({"AUTH", url.user, url.password});
    if (!r) {
      const std::string& m = r.error().message();
      if (m.find("WRONGPASS") != std::string::npos || m.find("invalid") != std::string::npos ||
          m.find("invalid password") != std::string::npos)
        return Error(Errc::auth, fmt::format("redis {}: authentication failed: wrong user or "
                                             "password (check `url`, `user`, `password`)",
                                             url.redacted()));
      return std::move(r).error();
    }
  }
  if (url.db != 0) {
    auto r = conn.command({"SELECT", std::to_string(url.db)});
    if (!r)
      return Error(r.error().code(), fmt::format("redis {}: cannot select database {}: {}",
                                                 url.redacted(), url.db, r.error().message()));
  }
  if (!options.client_name.empty()) {
    // CLIENT SETNAME is a convenience for operators (CLIENT LIST); a server that refuses it is no
    // reason to stop.
    (void)conn.command({"CLIENT", "SETNAME", options.client_name});
  }
  return conn;
}

Error RedisConnection::io_error(std::string_view what) const {
  // hiredis 0.14 reports a read/write timeout as an I/O error with errno EAGAIN.
  const bool timed_out =
      ctx_ && ctx_->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK);
  return Error(
      timed_out ? Errc::timeout : Errc::connection,
      fmt::format("redis {}: {}: {}", url_.redacted(), what, ctx_ ? ctx_->errstr : "no connection"),
      /*retriable=*/true);
}

void RedisConnection::append(std::span<const std::string_view> args) {
  argv_.clear();
  argl_.clear();
  for (std::string_view a : args) {
    argv_.push_back(a.data());
    argl_.push_back(a.size());
  }
  redisAppendCommandArgv(ctx_.get(), static_cast<int>(argv_.size()), argv_.data(), argl_.data());
}

Result<Reply> RedisConnection::read_reply() {
  void* raw = nullptr;
  if (redisGetReply(ctx_.get(), &raw) != REDIS_OK || raw == nullptr)
    return io_error("the connection failed");
  return Reply(static_cast<redisReply*>(raw));
}

Result<std::optional<Reply>> RedisConnection::poll_reply(std::chrono::milliseconds timeout) {
  void* raw = nullptr;
  if (redisGetReplyFromReader(ctx_.get(), &raw) != REDIS_OK) return io_error("a malformed reply");
  if (raw != nullptr) return std::optional<Reply>(Reply(static_cast<redisReply*>(raw)));
  pollfd p{ctx_->fd, POLLIN, 0};
  const int n = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, timeout.count())));
  if (n < 0 && errno == EINTR) return std::optional<Reply>();
  if (n < 0)
    return Error(Errc::connection,
                 fmt::format("redis {}: poll: {}", url_.redacted(), std::strerror(errno)),
                 /*retriable=*/true);
  if (n == 0) return std::optional<Reply>();
  if (redisBufferRead(ctx_.get()) != REDIS_OK) return io_error("the connection failed");
  if (redisGetReplyFromReader(ctx_.get(), &raw) != REDIS_OK) return io_error("a malformed reply");
  if (raw == nullptr) return std::optional<Reply>();
  return std::optional<Reply>(Reply(static_cast<redisReply*>(raw)));
}

Status RedisConnection::flush() {
  int done = 0;
  while (!done)
    if (redisBufferWrite(ctx_.get(), &done) != REDIS_OK) return io_error("the connection failed");
  return ok_status();
}

Result<Reply> RedisConnection::read_reply_of(std::string_view command) {
  SLUICE_TRY_ASSIGN(Reply reply, read_reply());
  if (reply->type == REDIS_REPLY_ERROR) {
    std::string text(reply->str, reply->len);
    const Errc code = text.starts_with("NOPERM")      ? Errc::permission
                      : text.starts_with("WRONGPASS") ? Errc::auth
                      : text.starts_with("NOAUTH")    ? Errc::auth
                                                      : Errc::data;
    // The command's arguments are never quoted here: AUTH carries the password.
    return Error(code, fmt::format("redis {}: {} refused: {}", url_.redacted(), command, text));
  }
  return reply;
}

Result<Reply> RedisConnection::command(std::span<const std::string_view> args) {
  append(args);
  return read_reply_of(args.empty() ? std::string_view() : args[0]);
}

}  // namespace sluice::redis
