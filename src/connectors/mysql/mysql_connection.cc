#include "connectors/mysql/mysql_connection.h"

#include <errmsg.h>
#include <fmt/format.h>
#include <mysqld_error.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>

namespace sluice::mysql {

Status validate_tls_options(const TlsSettings& tls) {
  bool known = false;
  for (auto m : kTlsModes) known |= m == tls.mode;
  if (!known)
    return Error(
        Errc::invalid_argument,
        fmt::format(
            "tls.mode \"{}\" is not one of disabled, preferred, required, verify_ca, verify_identity",
            tls.mode));
  return check_tls_settings(tls);
}

ErrnoClass classify_errno(unsigned no) noexcept {
  switch (no) {
    case ER_LOCK_DEADLOCK:      // 1213
    case ER_LOCK_WAIT_TIMEOUT:  // 1205
      return {Errc::conflict, true, false};
    case ER_SERVER_SHUTDOWN:       // 1053
    case ER_CONNECTION_KILLED:     // 1927 (MariaDB)
    case 4031:                     // MySQL 8: disconnected by the server (inactivity)
    case ER_CON_COUNT_ERROR:       // 1040 too many connections
    case ER_NET_READ_ERROR:        // 1158
    case ER_NET_READ_INTERRUPTED:  // 1159
      return {Errc::connection, true, true};
    case ER_ACCESS_DENIED_ERROR:  // 1045
      return {Errc::auth, false, true};
    case ER_DBACCESS_DENIED_ERROR:  // 1044
    case ER_TABLEACCESS_DENIED_ERROR:
    case ER_COLUMNACCESS_DENIED_ERROR:
    case ER_SPECIFIC_ACCESS_DENIED_ERROR: return {Errc::permission, false, false};
    case ER_BAD_DB_ERROR:  // 1049
    case ER_NO_SUCH_TABLE: return {Errc::not_found, false, false};
    default: break;
  }
  // Client-side errors: server gone (2006), lost (2013), cannot connect (2002, 2003), unknown
  // host (2005), ...
  if (no >= 2000 && no < 3000) return {Errc::connection, true, true};
  // Everything else the server rejects is about the data or statement: duplicate entries,
  // constraint and foreign-key failures, out-of-range values, data too long, invalid JSON...
  return {Errc::data, false, false};
}

std::string quote_identifier(std::string_view name) {
  std::string out = "`";
  for (char c : name) {
    if (c == '`') out += '`';
    out += c;
  }
  return out + "`";
}

Error server_error(MYSQL* conn, std::string_view doing) {
  const unsigned no = conn ? mysql_errno(conn) : CR_UNKNOWN_ERROR;
  const ErrnoClass c = classify_errno(no);
  std::string msg =
      fmt::format("{}: {} ({})", doing, conn ? mysql_error(conn) : "no connection", no);
  if (no == ER_ACCESS_DENIED_ERROR)
    msg += "; check the user and password (`url`, or the `user` and `password` settings)";
  return Error(c.code, std::move(msg), c.retriable);
}

namespace {

// The fix for a failed connect, as PostgreSQL's connection errors name theirs.
std::string connect_hint(unsigned no) {
  switch (no) {
    case CR_CONNECTION_ERROR:
    case CR_CONN_HOST_ERROR:
    case CR_UNKNOWN_HOST:
    case CR_SERVER_LOST:
    case CR_SERVER_GONE_ERROR:
      return " (is MySQL/MariaDB running there? check host and port in `url`)";
    case ER_BAD_DB_ERROR: return " (create the database, or fix the database name in `url`)";
    case ER_DBACCESS_DENIED_ERROR:
      return " (grant the user access to the database: GRANT ... ON <db>.* TO <user>)";
    case ER_CON_COUNT_ERROR:
      return " (the server is at max_connections: close idle clients or raise max_connections)";
    case ER_HOST_NOT_PRIVILEGED:
      return " (the user may not connect from this host: CREATE USER '<user>'@'<this host>')";
    case CR_SSL_CONNECTION_ERROR:
      return " (check tls.ca: it must be the CA that signed the server's certificate; tls.mode, "
             "tls.cert and tls.key; and the server's TLS set-up)";
    default: return "";
  }
}

}  // namespace

// libmariadb has no option for them: set on the socket. Best effort (a UNIX socket has none).
static void set_tcp_keepalive(int fd, std::chrono::milliseconds user_timeout) {
  if (fd < 0) return;
  const int on = 1;
  const int idle_s = int(std::max<int64_t>(1, user_timeout.count() / 2000));
  const int interval_s = std::max(1, idle_s / 3);
  const int count = 3;
  const unsigned timeout_ms = unsigned(user_timeout.count());
  (void)::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof(idle_s));
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof(interval_s));
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &timeout_ms, sizeof(timeout_ms));
}

Result<MysqlConn> MysqlConn::connect(const ConnectOptions& o) {
  MysqlConn c;
  c.conn_ = mysql_init(nullptr);
  if (!c.conn_) return Error(Errc::internal, "out of memory");
  unsigned timeout = unsigned(std::max<int64_t>(1, o.connect_timeout.count() / 1000));
  mysql_optionsv(c.conn_, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
  if (o.read_timeout_s) mysql_optionsv(c.conn_, MYSQL_OPT_READ_TIMEOUT, &o.read_timeout_s);
  if (o.write_timeout_s) mysql_optionsv(c.conn_, MYSQL_OPT_WRITE_TIMEOUT, &o.write_timeout_s);
  mysql_optionsv(c.conn_, MYSQL_SET_CHARSET_NAME, "utf8mb4");
  my_bool yes = 1, no = 0;
  if (o.tls_mode == "preferred") {
    // Use TLS when the server offers it; do not insist and do not verify.
    mysql_ssl_set(c.conn_, nullptr, nullptr, nullptr, nullptr, nullptr);
    mysql_optionsv(c.conn_, MYSQL_OPT_SSL_ENFORCE, &no);
    mysql_optionsv(c.conn_, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &no);
  } else if (o.tls_mode != "disabled") {
    mysql_ssl_set(c.conn_, nullptr, nullptr, nullptr, nullptr, nullptr);
    mysql_optionsv(c.conn_, MYSQL_OPT_SSL_ENFORCE, &yes);
    const bool verify = o.tls_mode == "verify_ca" || o.tls_mode == "verify_identity";
    mysql_optionsv(c.conn_, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, verify ? &yes : &no);
    if (!o.tls_ca.empty()) mysql_optionsv(c.conn_, MYSQL_OPT_SSL_CA, o.tls_ca.c_str());
  }
  if (o.tls_mode != "disabled" && !o.tls_cert.empty()) {
    mysql_optionsv(c.conn_, MYSQL_OPT_SSL_CERT, o.tls_cert.c_str());
    mysql_optionsv(c.conn_, MYSQL_OPT_SSL_KEY, o.tls_key.c_str());
    if (!o.tls_key_password.empty())
      mysql_optionsv(c.conn_, MARIADB_OPT_TLS_PASSPHRASE, o.tls_key_password.c_str());
  }
  if (!mysql_real_connect(c.conn_, o.url.host.c_str(), o.url.user.c_str(), o.url.password.c_str(),
                          o.url.database.c_str(), o.url.port, nullptr, 0)) {
    Error e = server_error(c.conn_, fmt::format("cannot connect to {}", o.url.redacted()));
    const bool unclassified = e.code() == Errc::data;
    // A certificate the client refuses (or that refuses the client) stays refused: definite.
    const std::string_view text = mysql_error(c.conn_);
    if (mysql_errno(c.conn_) == CR_SSL_CONNECTION_ERROR &&
        (text.find("certificate") != std::string_view::npos ||
         text.find("verify") != std::string_view::npos ||
         text.find("unknown ca") != std::string_view::npos))
      return Error(Errc::config, e.message() + connect_hint(CR_SSL_CONNECTION_ERROR));
    // A user created REQUIRE SSL (or X509) is refused as "access denied" over plain text.
    if (mysql_errno(c.conn_) == ER_ACCESS_DENIED_ERROR && o.tls_mode == "disabled")
      return Error(e.code(),
                   e.message() +
                       "; with tls.mode disabled: if the user must use TLS (REQUIRE SSL), set "
                       "tls.mode (e.g. verify_identity with tls.ca)",
                   e.retriable());
    return Error(unclassified ? Errc::connection : e.code(),
                 e.message() + connect_hint(mysql_errno(c.conn_)),
                 e.retriable() || (unclassified && o.retry_unclassified_connect_errors));
  }
  if (o.tcp_user_timeout.count() > 0)
    set_tcp_keepalive(int(mysql_get_socket(c.conn_)), o.tcp_user_timeout);
  // Some libmariadb versions fall back to plain text when the server lacks TLS even when
  // enforced: check the outcome rather than trust the option.
  if (o.tls_mode != "disabled" && o.tls_mode != "preferred" &&
      mysql_get_ssl_cipher(c.conn_) == nullptr)
    return Error(Errc::connection,
                 fmt::format("{} does not offer TLS, which tls.mode {} requires; enable TLS on the "
                             "server or set tls.mode to preferred",
                             o.url.redacted(), o.tls_mode));
  return c;
}

Status MysqlConn::exec(std::string_view sql, std::string_view doing) {
  if (mysql_real_query(conn_, sql.data(), sql.size()) != 0) return server_error(conn_, doing);
  MysqlResult r(mysql_store_result(conn_));
  if (!r && mysql_errno(conn_)) return server_error(conn_, doing);
  return ok_status();
}

Result<std::vector<MysqlRow>> MysqlConn::query(std::string_view sql, std::string_view doing) {
  if (mysql_real_query(conn_, sql.data(), sql.size()) != 0) return server_error(conn_, doing);
  MysqlResult r(mysql_store_result(conn_));
  std::vector<MysqlRow> out;
  if (!r) {
    if (mysql_errno(conn_)) return server_error(conn_, doing);
    return out;  // a statement without a result set
  }
  const unsigned n = mysql_num_fields(r.get());
  while (MYSQL_ROW row = mysql_fetch_row(r.get())) {
    unsigned long* lengths = mysql_fetch_lengths(r.get());
    MysqlRow x(n);
    for (unsigned i = 0; i < n; ++i)
      if (row[i]) x[i] = std::string(row[i], lengths[i]);
    out.push_back(std::move(x));
  }
  return out;
}

Result<std::vector<MysqlRow>> MysqlConn::query_within(std::string_view sql, std::string_view doing,
                                                      size_t max_bytes, bool* cut) {
  *cut = false;
  if (mysql_real_query(conn_, sql.data(), sql.size()) != 0) return server_error(conn_, doing);
  MysqlResult r(mysql_use_result(conn_));
  std::vector<MysqlRow> out;
  if (!r) {
    if (mysql_errno(conn_)) return server_error(conn_, doing);
    return out;
  }
  const unsigned n = mysql_num_fields(r.get());
  size_t bytes = 0;
  while (MYSQL_ROW row = mysql_fetch_row(r.get())) {
    unsigned long* lengths = mysql_fetch_lengths(r.get());
    MysqlRow x(n);
    bytes += sizeof(MysqlRow) + n * sizeof(std::optional<std::string>);
    for (unsigned i = 0; i < n; ++i)
      if (row[i]) {
        x[i] = std::string(row[i], lengths[i]);
        bytes += lengths[i];
      }
    out.push_back(std::move(x));
    if (bytes >= max_bytes) {
      *cut = true;
      break;  // r's mysql_free_result reads the rest off the connection
    }
  }
  if (!*cut && mysql_errno(conn_)) return server_error(conn_, doing);
  return out;
}

void MysqlConn::append_quoted(std::string& out, std::string_view text) const {
  const size_t at = out.size();
  out.resize(at + 2 * text.size() + 3);
  out[at] = '\'';
  unsigned long n = mysql_real_escape_string(conn_, out.data() + at + 1, text.data(), text.size());
  out.resize(at + 1 + n);
  out += '\'';
}

}  // namespace sluice::mysql
