// RAII over libpq: connections (regular and replication), results, and the translation of libpq
// failures into one-line errors that name the fix.
#pragma once

#include <libpq-fe.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "connectors/common/credentials.h"
#include "connectors/common/tls_settings.h"
#include "sluice/result.h"

namespace sluice::pg {

struct PgResultDeleter {
  void operator()(PGresult* r) const noexcept { PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, PgResultDeleter>;

// TCP settings of a connection, so that a dead link fails instead of hanging: with
// tcp_user_timeout > 0, keepalives probe an idle connection (first after half the timeout) and
// the kernel drops the connection once data or probes stay unacknowledged that long. A libpq
// keyword the URL sets itself (keepalives*, tcp_user_timeout) wins. 0: the system's defaults.
class PgCallDeadline;
struct PgNetOptions {
  std::chrono::milliseconds tcp_user_timeout{0};
  // Regular (not replication) connections: every exec()/exec_params() is armed with it, so a
  // server that stops answering fails the call after its timeout instead of hanging it. It
  // must outlive the connections and be used from one thread. Null: no deadline.
  PgCallDeadline* deadline = nullptr;
};

class PgConn {
 public:
  PgConn() = default;
  explicit PgConn(PGconn* c) : conn_(c) {}
  PgConn(PgConn&& o) noexcept : conn_(o.conn_), deadline_(o.deadline_) { o.conn_ = nullptr; }
  PgConn& operator=(PgConn&& o) noexcept {
    if (this != &o) {
      reset();
      conn_ = o.conn_;
      deadline_ = o.deadline_;
      o.conn_ = nullptr;
    }
    return *this;
  }
  PgConn(const PgConn&) = delete;
  PgConn& operator=(const PgConn&) = delete;
  ~PgConn() { reset(); }

  // Connects with `url` (a libpq URL or key=value DSN; every libpq option, TLS included, passes
  // through). Session settings make text output exact and stable (ISO dates, ISO 8601 intervals,
  // UTC, round-trip floats). `replication` opens a logical replication connection.
  static Result<PgConn> connect(const std::string& url, bool replication,
                                const PgNetOptions& net = {});

  PGconn* get() const noexcept { return conn_; }
  explicit operator bool() const noexcept { return conn_ != nullptr; }
  bool ok() const noexcept { return conn_ && PQstatus(conn_) == CONNECTION_OK; }
  void reset() noexcept {
    if (conn_) PQfinish(conn_);
    conn_ = nullptr;
  }

  // Runs a command/query expecting `expect` (PGRES_COMMAND_OK or PGRES_TUPLES_OK). With a
  // deadline (PgNetOptions::deadline), a reply that does not come in time is a retriable
  // connection error naming query_timeout (the connection is then unusable).
  Result<PgResult> exec(const std::string& sql, ExecStatusType expect = PGRES_TUPLES_OK);
  Result<PgResult> exec_params(const std::string& sql, const std::vector<std::string>& params,
                               ExecStatusType expect = PGRES_TUPLES_OK);
  // Runs a query and hands its rows to `on_row` one at a time as they arrive (libpq's single-row
  // mode), so that only one row is held at once; once `on_row` returns false, the rest of the
  // result is read off the connection and dropped. Same deadline and errors as exec_params.
  Status exec_params_rows(const std::string& sql, const std::vector<std::string>& params,
                          const std::function<bool(const PGresult* res, int row)>& on_row);
  std::string quote_ident(std::string_view ident) const;
  std::string quote_literal(std::string_view text) const;
  std::string last_error() const;
  // The deadline of this connection's calls (PgNetOptions::deadline), or null.
  PgCallDeadline* deadline() const noexcept { return deadline_; }
  // A failed call: when the deadline cut it, the error says so (query_timeout), else `e`.
  Error deadline_error_or(Error e) const;

 private:
  PGconn* conn_ = nullptr;
  PgCallDeadline* deadline_ = nullptr;
};

// Cuts the connection of a call that does not return in time. libpq waits for a reply without a
// limit, and a server that is silently gone (a partition; a stopped process, whose kernel still
// ACKs, so neither keepalives nor tcp_user_timeout fire) never sends one. While armed, a watcher
// thread shuts the socket down once the deadline passes, and the blocked call fails as a lost
// connection; fired() then tells that loss from others. One caller thread arms and disarms.
class PgCallDeadline {
 public:
  explicit PgCallDeadline(std::chrono::milliseconds timeout) : timeout_(timeout) {}
  ~PgCallDeadline();
  PgCallDeadline(const PgCallDeadline&) = delete;
  PgCallDeadline& operator=(const PgCallDeadline&) = delete;

  // Disarms when it goes out of scope.
  class Armed {
   public:
    explicit Armed(PgCallDeadline* d) : d_(d) {}
    Armed(const Armed&) = delete;
    Armed& operator=(const Armed&) = delete;
    ~Armed() {
      if (d_) d_->disarm();
    }

   private:
    PgCallDeadline* d_;
  };
  // The deadline is now + timeout, for the calls on `c` until the result is destroyed (nothing
  // with a timeout of 0 or no connection). Clears fired().
  [[nodiscard]] Armed arm(const PgConn& c);
  // While armed: the deadline moves to now + timeout (progress was made).
  void extend() noexcept;
  bool fired() const noexcept { return fired_.load(std::memory_order_acquire); }
  std::chrono::milliseconds timeout() const noexcept { return timeout_; }

 private:
  void disarm() noexcept;
  void watch(std::stop_token stop);

  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable_any cv_;
  int fd_ = -1;  // armed: the socket to cut
  std::chrono::steady_clock::time_point deadline_{};
  std::atomic<bool> fired_{false};
  std::jthread watcher_;  // started by the first arm()
};

// Resolves `c` (password_file) and folds it into `url`: a URL whose user info holds characters
// that need percent-encoding ('/', '@', '?', '#', ':', a stray '%') is encoded first, so libpq
// reads the password the user meant (and no fragment of it turns up as a host or port in an
// error); a `user`/`password` setting makes `url` a key=value DSN with them in place of the URL's.
// Errors never show the URL or the password.
Status apply_credentials(std::string& url, Credentials c);
// Folds the tls.* settings into `url` (a key=value DSN then, their libpq keywords replacing the
// URL's): tls.mode as sslmode (disabled disable, preferred prefer, required require, verify_ca
// verify-ca, verify_identity verify-full), tls.ca sslrootcert, tls.cert sslcert, tls.key sslkey,
// tls.key_password sslpassword. Nothing set (mode ""): `url` stays as it is.
Status apply_tls(std::string& url, const TlsSettings& tls);
// "host:port" of a URL/DSN for messages (never the password).
std::string describe_target(const std::string& url);
// Turns a server error into an Error with a code and a fix where one is known.
Error classify_error(std::string_view message, std::string_view doing);
// Always-quoted identifier (for text built without a connection).
std::string quote_identifier(std::string_view ident);

}  // namespace sluice::pg
