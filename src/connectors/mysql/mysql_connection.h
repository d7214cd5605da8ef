// RAII over libmariadb for the mysql source and destination: connecting from the URL and the TLS
// settings, running statements, quoting literals, and the one classification of server and
// client error numbers into Errc + retriable (+ whether the connection is gone).
#pragma once

#include <mysql.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "connectors/common/tls_settings.h"
#include "connectors/mysql/mysql_url.h"
#include "sluice/result.h"

namespace sluice::mysql {

// The `tls.mode` values, as the settings spell them.
inline constexpr std::string_view kTlsModes[] = {"disabled", "preferred", "required", "verify_ca",
                                                 "verify_identity"};

// Checks `tls.mode` (one of kTlsModes) and the tls.* settings across (check_tls_settings:
// verify_* need tls.ca, tls.cert needs tls.key, ...); the errors name the settings.
Status validate_tls_options(const TlsSettings& tls);

struct ConnectOptions {
  MysqlUrl url;
  std::string tls_mode = "preferred";  // one of kTlsModes
  std::string tls_ca;                  // CA file for verify_ca / verify_identity
  std::string tls_cert, tls_key;       // client certificate and key (PEM), both or neither
  std::string tls_key_password;        // passphrase of an encrypted tls_key (a secret)
  std::chrono::milliseconds connect_timeout{10000};
  unsigned read_timeout_s = 0;   // 0: the client library's default (the binlog stream sets one)
  unsigned write_timeout_s = 0;  // 0: the client library's default
  // > 0: TCP keepalives (first probe after half of it) and TCP_USER_TIMEOUT on the socket, so a
  // blackholed link fails within about this long instead of the kernel's minutes.
  std::chrono::milliseconds tcp_user_timeout{0};
  // A refusal that classify_errno() counts as Errc::data is retriable at connect time when true
  // (a server still starting up answers oddly); otherwise it stops the pipeline.
  bool retry_unclassified_connect_errors = false;
};

// How a server or client error number is handled.
struct ErrnoClass {
  Errc code = Errc::data;
  bool retriable = false;
  bool connection_lost = false;  // the connection is unusable: reconnect before using it again
};
// Deadlocks and lock timeouts: conflict, retriable. Lost or refused connections, server
// shutdown, killed connections, too many connections, network read errors and every client-side
// error (2000-2999): connection, retriable. Access denied: auth; missing privileges: permission;
// unknown database or table: not_found. Anything else the server rejects is about the data or
// the statement: data, not retriable.
ErrnoClass classify_errno(unsigned no) noexcept;

// "`doing`: <server message> (<errno>)" classified by classify_errno(); an access-denied error
// says which settings to check. Never contains the password.
Error server_error(MYSQL* conn, std::string_view doing);

// `name` as an identifier: in backticks, embedded backticks doubled.
std::string quote_identifier(std::string_view name);

struct MysqlResultDeleter {
  void operator()(MYSQL_RES* r) const noexcept { mysql_free_result(r); }
};
using MysqlResult = std::unique_ptr<MYSQL_RES, MysqlResultDeleter>;

// One row of a result: a value per column, nullopt for NULL (binary values kept exactly).
using MysqlRow = std::vector<std::optional<std::string>>;

class MysqlConn {
 public:
  MysqlConn() = default;
  MysqlConn(MysqlConn&& o) noexcept : conn_(o.conn_) { o.conn_ = nullptr; }
  MysqlConn& operator=(MysqlConn&& o) noexcept {
    if (this != &o) {
      reset();
      conn_ = o.conn_;
      o.conn_ = nullptr;
    }
    return *this;
  }
  MysqlConn(const MysqlConn&) = delete;
  MysqlConn& operator=(const MysqlConn&) = delete;
  ~MysqlConn() { reset(); }

  // Connects with utf8mb4 and the TLS mode applied (and checked: a server without TLS fails
  // required/verify_* even where the library would fall back to plain text). Errors start
  // "cannot connect to <redacted url>: ..." (callers add their own context).
  static Result<MysqlConn> connect(const ConnectOptions& options);

  MYSQL* get() const noexcept { return conn_; }
  explicit operator bool() const noexcept { return conn_ != nullptr; }
  void reset() noexcept {
    if (conn_) mysql_close(conn_);
    conn_ = nullptr;
  }

  // Runs a statement whose result, if any, is discarded; the error is server_error(doing).
  Status exec(std::string_view sql, std::string_view doing);
  // Runs a query and reads its whole result.
  Result<std::vector<MysqlRow>> query(std::string_view sql, std::string_view doing);
  // Runs a query and reads its rows as they arrive until they hold `max_bytes` (values and their
  // slots): the row that reaches it is the last kept, `*cut` is then set, and the rest of the
  // result is read off the connection and dropped. Memory stays within max_bytes and one row.
  Result<std::vector<MysqlRow>> query_within(std::string_view sql, std::string_view doing,
                                             size_t max_bytes, bool* cut);
  unsigned last_errno() const noexcept { return conn_ ? mysql_errno(conn_) : 0; }
  // Appends 'text' as a string literal escaped for this connection's character set.
  void append_quoted(std::string& out, std::string_view text) const;
  std::string quoted(std::string_view text) const {
    std::string out;
    append_quoted(out, text);
    return out;
  }

 private:
  MYSQL* conn_ = nullptr;
};

}  // namespace sluice::mysql
