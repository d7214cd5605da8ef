#include "connectors/postgres/pg_connection.h"

#include <fmt/format.h>

#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <utility>
#include <vector>

#include "sluice/secrets.h"

namespace sluice::pg {

namespace {

std::string one_line(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\n' || c == '\r' || c == '\t') {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += c;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

bool contains(std::string_view hay, std::string_view needle) {
  return hay.find(needle) != std::string_view::npos;
}

bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// Percent-encodes what RFC 3986 does not allow raw in user info, keeping valid %XX escapes.
std::string encode_userinfo_part(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto u = static_cast<unsigned char>(s[i]);
    const bool escape = s[i] == '%' && i + 2 < s.size() && is_hex(s[i + 1]) && is_hex(s[i + 2]);
    if (escape || std::isalnum(u) || std::strchr("-._~!$&'()*+,;=", s[i]) != nullptr) {
      out += s[i];
    } else {
      out += fmt::format("%{:02X}", u);
    }
  }
  return out;
}

// postgres[ql]://user:pass@host/db with the user info encoded (see apply_credentials).
std::string encode_url_userinfo(const std::string& url) {
  std::string_view scheme;
  for (std::string_view s : {"postgresql://", "postgres://"})
    if (url.starts_with(s)) scheme = s;
  if (scheme.empty()) return url;  // a key=value DSN: libpq quotes values itself
  std::string_view rest = std::string_view(url).substr(scheme.size());
  const size_t at = rest.rfind('@');
  if (at == std::string_view::npos) return url;
  const std::string_view userinfo = rest.substr(0, at);
  const size_t colon = userinfo.find(':');
  std::string out(scheme);
  out += encode_userinfo_part(userinfo.substr(0, colon));
  if (colon != std::string_view::npos)
    out += ":" + encode_userinfo_part(userinfo.substr(colon + 1));
  out += rest.substr(at);
  return out;
}

// A value of a key=value DSN: single-quoted, with ' and \ escaped.
std::string dsn_value(std::string_view v) {
  std::string out = "'";
  for (char c : v) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

}  // namespace

Status apply_credentials(std::string& url, Credentials c) {
  SLUICE_TRY(resolve_credentials(c));
  url = encode_url_userinfo(url);
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(url.c_str(), &err);
  if (err) PQfreemem(err);  // may quote the URL: not shown
  if (opts) {               // a DSN's password=… is as secret as a URL's
    for (PQconninfoOption* o = opts; o->keyword; ++o)
      if (o->val && std::string_view(o->keyword) == "password") register_secret(o->val);
  }
  if (c.user.empty() && c.password.empty()) {
    if (opts) PQconninfoFree(opts);
    return ok_status();
  }
  if (!opts)
    return Error(Errc::config,
                 "setting 'url' is neither a postgresql:// URL nor a key=value DSN that libpq can "
                 "read; check its syntax (the password can go in `password` instead)");
  std::string dsn;
  for (PQconninfoOption* o = opts; o->keyword; ++o) {
    const std::string_view k = o->keyword;
    if (!o->val || (k == "user" && !c.user.empty()) || (k == "password" && !c.password.empty()))
      continue;
    dsn += fmt::format("{}={} ", k, dsn_value(o->val));
  }
  PQconninfoFree(opts);
  if (!c.user.empty()) dsn += "user=" + dsn_value(c.user) + " ";
  if (!c.password.empty()) dsn += "password=" + dsn_value(c.password) + " ";
  if (!dsn.empty()) dsn.pop_back();
  url = std::move(dsn);
  return ok_status();
}

Status apply_tls(std::string& url, const TlsSettings& t) {
  SLUICE_TRY(check_tls_settings(t));
  std::vector<std::pair<std::string_view, std::string>> set;
  if (!t.mode.empty()) {
    static constexpr std::pair<std::string_view, std::string_view> kModes[] = {
        {"disabled", "disable"},
        {"preferred", "prefer"},
        {"required", "require"},
        {"verify_ca", "verify-ca"},
        {"verify_identity", "verify-full"}};
    for (auto [mode, sslmode] : kModes)
      if (t.mode == mode) set.emplace_back("sslmode", sslmode);
  }
  if (!t.ca.empty()) set.emplace_back("sslrootcert", t.ca);
  if (!t.cert.empty()) set.emplace_back("sslcert", t.cert);
  if (!t.key.empty()) set.emplace_back("sslkey", t.key);
  if (!t.key_password.empty()) set.emplace_back("sslpassword", t.key_password);
  if (set.empty()) return ok_status();
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(url.c_str(), &err);
  if (err) PQfreemem(err);  // may quote the URL: not shown
  if (!opts)
    return Error(Errc::config,
                 "setting 'url' is neither a postgresql:// URL nor a key=value DSN that libpq can "
                 "read; check its syntax");
  std::string dsn;
  for (PQconninfoOption* o = opts; o->keyword; ++o) {
    if (!o->val) continue;
    const std::string_view k = o->keyword;
    bool replaced = false;
    for (const auto& kv : set) replaced |= kv.first == k;
    if (!replaced) dsn += fmt::format("{}={} ", k, dsn_value(o->val));
  }
  PQconninfoFree(opts);
  for (const auto& [k, v] : set) dsn += fmt::format("{}={} ", k, dsn_value(v));
  dsn.pop_back();
  url = std::move(dsn);
  return ok_status();
}

std::string quote_identifier(std::string_view ident) {
  std::string out = "\"";
  for (char c : ident) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

std::string describe_target(const std::string& url) {
  PQconninfoOption* opts = PQconninfoParse(url.c_str(), nullptr);
  if (!opts) return "the server in `url`";
  std::string host = "localhost", port = "5432", user, db;
  for (PQconninfoOption* o = opts; o->keyword; ++o) {
    if (!o->val) continue;
    std::string_view k = o->keyword;
    if (k == "host" || k == "hostaddr") host = o->val;
    else if (k == "port") port = o->val;
    else if (k == "user") user = o->val;
    else if (k == "dbname") db = o->val;
  }
  PQconninfoFree(opts);
  return fmt::format("{}:{}{}", host, port, db.empty() ? "" : "/" + db);
}

Error classify_error(std::string_view raw, std::string_view doing) {
  const std::string msg = one_line(raw);
  const std::string prefix = doing.empty() ? "" : std::string(doing) + ": ";
  if (contains(msg, "password authentication failed") || contains(msg, "no password supplied") ||
      contains(msg, "authentication failed"))
    return Error(
        Errc::auth,
        prefix + msg +
            " (check the user and password: `url`, or the `user` and `password` settings)");
  if (contains(msg, "must be superuser or replication role") ||
      contains(msg, "permission denied to start WAL sender") ||
      contains(msg, "must have REPLICATION") ||
      contains(msg, "permission denied to use replication"))
    return Error(Errc::permission,
                 prefix + msg + " (grant it: ALTER ROLE <user> WITH REPLICATION)");
  if (contains(msg, "permission denied"))
    return Error(Errc::permission, prefix + msg + " (grant the privilege to the user in `url`)");
  if (contains(msg, "logical decoding requires wal_level") || contains(msg, "wal_level"))
    return Error(
        Errc::unsupported,
        prefix + msg + " (set wal_level = logical in postgresql.conf and restart PostgreSQL)");
  if (contains(msg, "is active for PID") || contains(msg, "is in use"))
    return Error(
        Errc::conflict,
        prefix + msg + " (another process uses this slot: stop it, or set a different `slot`)");
  if (contains(msg, "does not exist")) return Error(Errc::not_found, prefix + msg);
  // TLS set-up problems are definite: retrying does not change a certificate.
  if (contains(msg, "certificate verify failed") || contains(msg, "server certificate for") ||
      contains(msg, "root certificate file") || contains(msg, "certificate file \"") ||
      contains(msg, "private key file") || contains(msg, "could not load private key") ||
      contains(msg, "tlsv1 alert unknown ca") || contains(msg, "no encryption"))
    return Error(Errc::config,
                 prefix + msg +
                     " (check tls.ca: it must be the CA that signed the server's certificate; "
                     "tls.mode, tls.cert and tls.key; and the server's TLS set-up)");
  if (contains(msg, "server does not support SSL"))
    return Error(Errc::config,
                 prefix + msg + " (enable ssl on the server, or set tls.mode to preferred)");
  if (contains(msg, "Connection refused") || contains(msg, "could not connect") ||
      contains(msg, "could not translate host") || contains(msg, "server closed the connection") ||
      contains(msg, "connection to server") || contains(msg, "timeout expired") ||
      contains(msg, "terminating connection") || contains(msg, "no connection to the server") ||
      contains(msg, "SSL SYSCALL"))
    return Error(Errc::connection, prefix + msg, true);
  if (contains(msg, "too many connections") ||
      contains(msg, "the database system is starting up") ||
      contains(msg, "the database system is shutting down"))
    return Error(Errc::connection, prefix + msg, true);
  return Error(Errc::internal, prefix + msg);
}

Result<PgConn> PgConn::connect(const std::string& url, bool replication, const PgNetOptions& net) {
  // Later keywords override what the URL says; expand_dbname makes libpq parse the URL/DSN. The
  // URL's own `options` are kept, ahead of the settings sluice needs for exact text values.
  std::string options;
  std::string application_name = "sluice";
  std::string connect_timeout = "10";
  // TCP keepalives and tcp_user_timeout (PgNetOptions), each unless the URL sets it.
  std::vector<std::pair<std::string, std::string>> tcp;
  if (net.tcp_user_timeout.count() > 0) {
    const int64_t ms = net.tcp_user_timeout.count();
    const int64_t idle_s = std::max<int64_t>(1, ms / 2000);
    tcp = {{"keepalives", "1"},
           {"keepalives_idle", std::to_string(idle_s)},
           {"keepalives_interval", std::to_string(std::max<int64_t>(1, idle_s / 3))},
           {"keepalives_count", "3"},
           {"tcp_user_timeout", std::to_string(ms)}};
  }
  if (PQconninfoOption* opts = PQconninfoParse(url.c_str(), nullptr)) {
    for (PQconninfoOption* o = opts; o->keyword; ++o) {
      if (!o->val) continue;
      const std::string_view k = o->keyword;
      if (k == "options") options = std::string(o->val) + " ";
      else if (k == "application_name") application_name = o->val;
      else if (k == "connect_timeout") connect_timeout = o->val;
      std::erase_if(tcp, [&](const auto& kv) { return kv.first == k; });
    }
    PQconninfoFree(opts);
  }
  options +=
      "-c DateStyle=ISO -c IntervalStyle=iso_8601 -c TimeZone=UTC -c extra_float_digits=3 "
      "-c synchronize_seqscans=off -c statement_timeout=0";
  std::vector<const char*> keys = {"dbname", "options", "application_name", "connect_timeout"};
  std::vector<const char*> vals = {url.c_str(), options.c_str(), application_name.c_str(),
                                   connect_timeout.c_str()};
  for (const auto& [k, v] : tcp) {
    keys.push_back(k.c_str());
    vals.push_back(v.c_str());
  }
  if (replication) {
    keys.push_back("replication");
    vals.push_back("database");
  }
  keys.push_back(nullptr);
  vals.push_back(nullptr);
  PGconn* c = PQconnectdbParams(keys.data(), vals.data(), 1);
  if (c == nullptr) return Error(Errc::internal, "out of memory creating a PostgreSQL connection");
  PgConn conn(c);
  if (!replication) conn.deadline_ = net.deadline;
  if (PQstatus(c) != CONNECTION_OK) {
    Error e = classify_error(PQerrorMessage(c), "cannot connect to " + describe_target(url));
    if (e.code() == Errc::connection)
      return Error(Errc::connection,
                   e.message() + " (is PostgreSQL running there? check host and port in `url`)",
                   true);
    return e;
  }
  return conn;
}

std::string PgConn::last_error() const {
  return conn_ ? one_line(PQerrorMessage(conn_)) : "no connection";
}

Error PgConn::deadline_error_or(Error e) const {
  if (!deadline_ || !deadline_->fired()) return e;
  const char* host = conn_ ? PQhost(conn_) : nullptr;
  const char* port = conn_ ? PQport(conn_) : nullptr;
  return Error(Errc::connection,
               fmt::format("no reply from {}:{} within query_timeout ({} ms): taking the "
                           "connection for dead",
                           host ? host : "?", port ? port : "?", deadline_->timeout().count()),
               true);
}

Result<PgResult> PgConn::exec(const std::string& sql, ExecStatusType expect) {
  auto armed = deadline_ ? deadline_->arm(*this) : PgCallDeadline::Armed(nullptr);
  PgResult r(PQexec(conn_, sql.c_str()));
  if (!r || PQresultStatus(r.get()) != expect) {
    std::string msg = r ? PQresultErrorMessage(r.get()) : PQerrorMessage(conn_);
    if (msg.empty()) msg = PQerrorMessage(conn_);
    return deadline_error_or(classify_error(msg, ""));
  }
  return r;
}

Result<PgResult> PgConn::exec_params(const std::string& sql, const std::vector<std::string>& params,
                                     ExecStatusType expect) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& p : params) values.push_back(p.c_str());
  auto armed = deadline_ ? deadline_->arm(*this) : PgCallDeadline::Armed(nullptr);
  PgResult r(PQexecParams(conn_, sql.c_str(), int(values.size()), nullptr, values.data(), nullptr,
                          nullptr, 0));
  if (!r || PQresultStatus(r.get()) != expect) {
    std::string msg = r ? PQresultErrorMessage(r.get()) : PQerrorMessage(conn_);
    if (msg.empty()) msg = PQerrorMessage(conn_);
    return deadline_error_or(classify_error(msg, ""));
  }
  return r;
}

Status PgConn::exec_params_rows(const std::string& sql, const std::vector<std::string>& params,
                                const std::function<bool(const PGresult*, int)>& on_row) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& p : params) values.push_back(p.c_str());
  auto armed = deadline_ ? deadline_->arm(*this) : PgCallDeadline::Armed(nullptr);
  if (!PQsendQueryParams(conn_, sql.c_str(), int(values.size()), nullptr, values.data(), nullptr,
                         nullptr, 0))
    return deadline_error_or(classify_error(PQerrorMessage(conn_), ""));
  // When single-row mode cannot be set, the rows come in one result: handed over the same way.
  (void)PQsetSingleRowMode(conn_);
  bool keep = true;
  std::optional<Error> failed;
  // Every result is read, to the last (a null one), so that the connection is ready again.
  while (PGresult* raw = PQgetResult(conn_)) {
    PgResult r(raw);
    const ExecStatusType st = PQresultStatus(raw);
    if (st == PGRES_SINGLE_TUPLE || st == PGRES_TUPLES_OK) {
      for (int i = 0, n = PQntuples(raw); keep && i < n; ++i) keep = on_row(raw, i);
    } else if (!failed) {
      std::string msg = PQresultErrorMessage(raw);
      if (msg.empty()) msg = PQerrorMessage(conn_);
      failed = classify_error(msg, "");
    }
  }
  if (failed) return deadline_error_or(std::move(*failed));
  if (!ok()) return deadline_error_or(classify_error(PQerrorMessage(conn_), ""));
  return ok_status();
}

std::string PgConn::quote_ident(std::string_view ident) const { return quote_identifier(ident); }

std::string PgConn::quote_literal(std::string_view text) const {
  char* q = PQescapeLiteral(conn_, text.data(), text.size());
  if (!q) return "''";
  std::string out(q);
  PQfreemem(q);
  return out;
}

PgCallDeadline::~PgCallDeadline() {
  if (watcher_.joinable()) {
    watcher_.request_stop();
    watcher_.join();
  }
}

PgCallDeadline::Armed PgCallDeadline::arm(const PgConn& c) {
  if (timeout_.count() <= 0 || !c.ok()) return Armed(nullptr);
  {
    std::lock_guard lock(mu_);
    fd_ = PQsocket(c.get());
    deadline_ = std::chrono::steady_clock::now() + timeout_;
    fired_.store(false, std::memory_order_release);
  }
  if (!watcher_.joinable()) watcher_ = std::jthread([this](std::stop_token st) { watch(st); });
  cv_.notify_one();
  return Armed(this);
}

void PgCallDeadline::extend() noexcept {
  {
    std::lock_guard lock(mu_);
    if (fd_ < 0) return;
    deadline_ = std::chrono::steady_clock::now() + timeout_;
  }
  cv_.notify_one();
}

void PgCallDeadline::disarm() noexcept {
  std::lock_guard lock(mu_);
  fd_ = -1;
}

void PgCallDeadline::watch(std::stop_token stop) {
  std::unique_lock lock(mu_);
  while (!stop.stop_requested()) {
    if (fd_ < 0) {
      cv_.wait(lock, stop, [&] { return fd_ >= 0; });
      continue;
    }
    const auto deadline = deadline_;
    if (cv_.wait_until(lock, stop, deadline, [&] { return fd_ < 0 || deadline_ != deadline; }))
      continue;  // disarmed or re-armed
    if (stop.stop_requested()) break;
    // Still armed past the deadline: the caller is blocked in libpq on this socket (it cannot
    // be closed meanwhile: disarm() waits for the lock). Shutting it down wakes that call.
    fired_.store(true, std::memory_order_release);  // before the woken caller looks
    ::shutdown(fd_, SHUT_RDWR);
    fd_ = -1;
  }
}

}  // namespace sluice::pg
