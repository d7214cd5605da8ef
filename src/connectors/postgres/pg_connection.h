// RAII over libpq: connections (regular and replication), results, and the translation of libpq
// failures into one-line errors that name the fix.
#pragma once

#include <libpq-fe.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "connectors/common/credentials.h"
#include "connectors/common/tls_settings.h"
#include "sluice/result.h"

namespace sluice::pg {

struct PgResultDeleter {
  void operator()(PGresult* r) const noexcept { PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, PgResultDeleter>;

class PgConn {
 public:
  PgConn() = default;
  explicit PgConn(PGconn* c) : conn_(c) {}
  PgConn(PgConn&& o) noexcept : conn_(o.conn_) { o.conn_ = nullptr; }
  PgConn& operator=(PgConn&& o) noexcept {
    if (this != &o) {
      reset();
      conn_ = o.conn_;
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
  static Result<PgConn> connect(const std::string& url, bool replication);

  PGconn* get() const noexcept { return conn_; }
  explicit operator bool() const noexcept { return conn_ != nullptr; }
  bool ok() const noexcept { return conn_ && PQstatus(conn_) == CONNECTION_OK; }
  void reset() noexcept {
    if (conn_) PQfinish(conn_);
    conn_ = nullptr;
  }

  // Runs a command/query expecting `expect` (PGRES_COMMAND_OK or PGRES_TUPLES_OK).
  Result<PgResult> exec(const std::string& sql, ExecStatusType expect = PGRES_TUPLES_OK);
  Result<PgResult> exec_params(const std::string& sql, const std::vector<std::string>& params,
                               ExecStatusType expect = PGRES_TUPLES_OK);
  std::string quote_ident(std::string_view ident) const;
  std::string quote_literal(std::string_view text) const;
  std::string last_error() const;

 private:
  PGconn* conn_ = nullptr;
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
