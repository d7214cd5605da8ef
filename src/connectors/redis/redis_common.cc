#include "connectors/redis/redis_common.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
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

// A reply's memory: blocks chained from its group, which sits in the first block right before the
// top reply, so that free_reply finds it from the reply alone. Blocks grow from 4 KiB to 1 MiB (an
// XREADGROUP of 1,000 entries is about 1.5 MB); a string larger than that gets a block of its own.
struct ReplyBlock {
  ReplyBlock* next;
};
struct ReplyGroup {
  ReplyBlock* blocks;  // newest first; the last one holds this group
  char* cur;
  char* end;
  size_t next_size;
};
static_assert(sizeof(ReplyBlock) % alignof(redisReply) == 0);
static_assert(sizeof(ReplyGroup) % alignof(redisReply) == 0);
constexpr size_t kFirstReplyBlock = 4096;
constexpr size_t kLargestReplyBlock = size_t(1) << 20;

constexpr size_t round_up8(size_t n) { return (n + 7) & ~size_t(7); }

void* group_alloc(ReplyGroup* g, size_t n) {
  n = round_up8(n);
  if (size_t(g->end - g->cur) < n) {
    const size_t size = std::max(g->next_size, sizeof(ReplyBlock) + n);
    g->next_size = std::min(g->next_size * 2, kLargestReplyBlock);
    auto* b = static_cast<ReplyBlock*>(std::malloc(size));
    if (b == nullptr) return nullptr;
    b->next = g->blocks;
    g->blocks = b;
    g->cur = reinterpret_cast<char*>(b + 1);
    g->end = reinterpret_cast<char*>(b) + size;
  }
  void* p = g->cur;
  g->cur += n;
  return p;
}

ReplyGroup* group_of(const redisReply* top) {
  return reinterpret_cast<ReplyGroup*>(const_cast<redisReply*>(top)) - 1;
}

// A zeroed reply of `type` for `task`, plus `extra` bytes in *extra_out: a top reply (no parent)
// starts a group of its own, an element goes into its top reply's group and into its parent's
// element array. Null when memory runs out (hiredis then fails the read).
redisReply* new_reply(const redisReadTask* task, int type, size_t extra, void** extra_out) {
  redisReply* r = nullptr;
  ReplyGroup* g = nullptr;
  if (task->parent == nullptr) {
    // Only an array has elements to come: a scalar (an HSET's integer) takes just its own size.
    const size_t head = sizeof(ReplyBlock) + sizeof(ReplyGroup) + sizeof(redisReply);
    const size_t size = type == REDIS_REPLY_ARRAY
                            ? std::max(kFirstReplyBlock, head + round_up8(extra))
                            : head + round_up8(extra);
    auto* b = static_cast<ReplyBlock*>(std::malloc(size));
    if (b == nullptr) return nullptr;
    b->next = nullptr;
    g = reinterpret_cast<ReplyGroup*>(b + 1);
    r = reinterpret_cast<redisReply*>(g + 1);
    *g = ReplyGroup{b, reinterpret_cast<char*>(r + 1), reinterpret_cast<char*>(b) + size,
                    kFirstReplyBlock * 2};
  } else {
    const redisReadTask* top = task;
    while (top->parent != nullptr) top = top->parent;
    g = group_of(static_cast<const redisReply*>(top->obj));
    r = static_cast<redisReply*>(group_alloc(g, sizeof(redisReply)));
    if (r == nullptr) return nullptr;
  }
  std::memset(r, 0, sizeof(redisReply));
  r->type = type;
  if (extra > 0) {
    *extra_out = group_alloc(g, extra);
    if (*extra_out == nullptr) return nullptr;  // the group is freed with its top reply
  }
  if (task->parent != nullptr) {
    auto* parent = static_cast<redisReply*>(task->parent->obj);
    parent->element[task->idx] = r;
  }
  return r;
}

void* create_string(const redisReadTask* task, char* str, size_t len) {
  void* buf = nullptr;
  redisReply* r = new_reply(task, task->type, len + 1, &buf);
  if (r == nullptr) return nullptr;
  auto* text = static_cast<char*>(buf);
  std::memcpy(text, str, len);
  text[len] = '\0';
  r->str = text;
  r->len = len;
  return r;
}

void* create_array(const redisReadTask* task, int elements) {
  void* items = nullptr;
  const size_t n = elements > 0 ? size_t(elements) : 0;
  redisReply* r = new_reply(task, REDIS_REPLY_ARRAY, n * sizeof(redisReply*), &items);
  if (r == nullptr) return nullptr;
  if (n > 0) {
    std::memset(items, 0, n * sizeof(redisReply*));
    r->element = static_cast<redisReply**>(items);
  }
  r->elements = n;
  return r;
}

void* create_integer(const redisReadTask* task, long long value) {
  redisReply* r = new_reply(task, REDIS_REPLY_INTEGER, 0, nullptr);
  if (r != nullptr) r->integer = value;
  return r;
}

void* create_nil(const redisReadTask* task) { return new_reply(task, REDIS_REPLY_NIL, 0, nullptr); }

// hiredis frees only a top reply this way (a partial one when a read fails, or the reader's).
void free_object(void* reply) { free_reply(static_cast<redisReply*>(reply)); }

redisReplyObjectFunctions g_reply_functions = {create_string, create_array, create_integer,
                                               create_nil, free_object};

timeval to_timeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

}  // namespace

redisReplyObjectFunctions* reply_functions() noexcept { return &g_reply_functions; }

void free_reply(redisReply* r) noexcept {
  if (r == nullptr) return;
  ReplyBlock* b = group_of(r)->blocks;
  while (b != nullptr) {
    ReplyBlock* next = b->next;
    std::free(b);
    b = next;
  }
}

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
  ctx->reader->fn = reply_functions();  // replies are freed with free_reply (ReplyDeleter)
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
