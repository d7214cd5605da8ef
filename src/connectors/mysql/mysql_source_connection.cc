#include "connectors/mysql/mysql_source_connection.h"

#include <errmsg.h>
#include <fmt/format.h>
#include <mysqld_error.h>

#include <algorithm>

namespace sluice::mysql::source_connection {

std::string quote_ident(std::string_view s) {
  std::string out = "`";
  for (char c : s) {
    if (c == '`') out += '`';
    out += c;
  }
  return out + "`";
}

bool connection_errno(unsigned no) {
  return (no >= 2000 && no < 3000) || no == ER_SERVER_SHUTDOWN || no == ER_CONNECTION_KILLED || no == 4031 ||
         no == ER_CON_COUNT_ERROR || no == ER_NET_READ_INTERRUPTED || no == ER_NET_READ_ERROR;
}

Error server_error(MYSQL* c, std::string_view doing) {
  const unsigned no = mysql_errno(c);
  const std::string msg = fmt::format("{}: {} ({})", doing, mysql_error(c), no);
  if (connection_errno(no)) return Error(Errc::connection, msg, true);
  switch (no) {
    case ER_ACCESS_DENIED_ERROR: return Error(Errc::auth, msg + "; check the user and password in `url`");
    case ER_DBACCESS_DENIED_ERROR:
    case ER_TABLEACCESS_DENIED_ERROR:
    case ER_COLUMNACCESS_DENIED_ERROR:
    case ER_SPECIFIC_ACCESS_DENIED_ERROR:
      return Error(Errc::permission, msg);
    case ER_BAD_DB_ERROR:
    case ER_NO_SUCH_TABLE: return Error(Errc::not_found, msg);
    case ER_LOCK_DEADLOCK:
    case ER_LOCK_WAIT_TIMEOUT: return Error(Errc::conflict, msg, true);
    default: return Error(Errc::data, msg);
  }
}

Result<MysqlPtr> connect_server(const ConnOptions& o, unsigned read_timeout_s) {
  MysqlPtr c(mysql_init(nullptr));
  if (!c) return Error(Errc::internal, "out of memory");
  unsigned timeout = unsigned(std::max<int64_t>(1, o.connect_timeout.count() / 1000));
  mysql_optionsv(c.get(), MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
  if (read_timeout_s) mysql_optionsv(c.get(), MYSQL_OPT_READ_TIMEOUT, &read_timeout_s);
  mysql_optionsv(c.get(), MYSQL_SET_CHARSET_NAME, "utf8mb4");
  my_bool yes = 1, no = 0;
  if (o.tls_mode == "preferred") {
    mysql_ssl_set(c.get(), nullptr, nullptr, nullptr, nullptr, nullptr);
    mysql_optionsv(c.get(), MYSQL_OPT_SSL_ENFORCE, &no);
    mysql_optionsv(c.get(), MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &no);
  } else if (o.tls_mode != "disabled") {
    mysql_ssl_set(c.get(), nullptr, nullptr, nullptr, nullptr, nullptr);
    mysql_optionsv(c.get(), MYSQL_OPT_SSL_ENFORCE, &yes);
    const bool verify = o.tls_mode == "verify_ca" || o.tls_mode == "verify_identity";
    mysql_optionsv(c.get(), MYSQL_OPT_SSL_VERIFY_SERVER_CERT, verify ? &yes : &no);
    if (!o.tls_ca.empty()) mysql_optionsv(c.get(), MYSQL_OPT_SSL_CA, o.tls_ca.c_str());
  }
  if (!mysql_real_connect(c.get(), o.url.host.c_str(), o.url.user.c_str(), o.url.password.c_str(),
                          o.url.database.c_str(), o.url.port, nullptr, 0)) {
    Error e = server_error(c.get(), fmt::format("cannot connect to {}", o.url.redacted()));
    return Error(e.code() == Errc::data ? Errc::connection : e.code(), e.message(), e.retriable() || e.code() == Errc::data);
  }
  if (o.tls_mode != "disabled" && o.tls_mode != "preferred" && mysql_get_ssl_cipher(c.get()) == nullptr)
    return Error(Errc::connection, fmt::format("{} does not offer TLS, which tls.mode {} requires; enable TLS on the "
                                               "server or set tls.mode to preferred", o.url.redacted(), o.tls_mode));
  return c;
}

Status exec(MYSQL* c, std::string_view sql) {
  if (mysql_real_query(c, sql.data(), sql.size()) != 0) return server_error(c, "query failed");
  if (ResPtr r{mysql_store_result(c)}) {
  }
  return ok_status();
}

Result<std::vector<Row>> query(MYSQL* c, std::string_view sql) {
  if (mysql_real_query(c, sql.data(), sql.size()) != 0) return server_error(c, "query failed");
  ResPtr r{mysql_store_result(c)};
  std::vector<Row> out;
  if (!r) {
    if (mysql_errno(c)) return server_error(c, "query failed");
    return out;
  }
  const unsigned n = mysql_num_fields(r.get());
  while (MYSQL_ROW row = mysql_fetch_row(r.get())) {
    unsigned long* lens = mysql_fetch_lengths(r.get());
    Row x(n);
    for (unsigned i = 0; i < n; ++i)
      if (row[i]) x[i] = std::string(row[i], lens[i]);
    out.push_back(std::move(x));
  }
  return out;
}

std::string literal(MYSQL* c, std::string_view s) {
  std::string out(s.size() * 2 + 3, '\0');
  out[0] = '\'';
  const unsigned long n = mysql_real_escape_string(c, out.data() + 1, s.data(), (unsigned long)s.size());
  out.resize(n + 1);
  out += '\'';
  return out;
}

Result<std::vector<Row>> binlog_status(MYSQL* c) {
  auto r = query(c, "SHOW MASTER STATUS");
  if (!r.ok() && mysql_errno(c) == ER_PARSE_ERROR) return query(c, "SHOW BINARY LOG STATUS");
  return r;
}

}  // namespace sluice::mysql::source_connection
