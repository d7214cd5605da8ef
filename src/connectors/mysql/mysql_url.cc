#include "connectors/mysql/mysql_url.h"

#include <fmt/format.h>

#include <charconv>

#include "sluice/secrets.h"

namespace sluice::mysql {

namespace {

Error url_error(std::string_view what) {
  return Error(
      Errc::invalid_argument,
      fmt::format("mysql url: {}; expected mysql://user:password@host:port/database", what));
}

}  // namespace

std::string MysqlUrl::redacted() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return fmt::format("mysql://{}{}@{}:{}/{}", user, password.empty() ? "" : ":***", h, port,
                     database);
}

Result<MysqlUrl> parse_mysql_url(std::string_view url, Credentials credentials) {
  MysqlUrl u;
  std::string_view rest;
  if (url.starts_with("mysql://")) rest = url.substr(8);
  else if (url.starts_with("mariadb://")) rest = url.substr(10);
  else return url_error("the scheme must be mysql:// or mariadb://");

  // Only after the user info: a password may hold '?' and '#'.
  const size_t last_at = rest.rfind('@');
  const std::string_view after_userinfo =
      last_at == std::string_view::npos ? rest : rest.substr(last_at + 1);
  if (after_userinfo.find('?') != std::string_view::npos)
    return url_error("query parameters are not supported (set TLS with tls.mode and tls.ca)");
  if (after_userinfo.find('#') != std::string_view::npos)
    return url_error("a fragment ('#') is not allowed");

  // The last '@' ends the user info, so that an unencoded '@' in the password still parses. The
  // path starts at the first '/' after it.
  std::string_view userinfo;
  size_t at = rest.rfind('@');
  if (at != std::string_view::npos) {
    userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
  }
  std::string_view hostport = rest, path;
  if (size_t slash = rest.find('/'); slash != std::string_view::npos) {
    hostport = rest.substr(0, slash);
    path = rest.substr(slash + 1);
  }

  if (!userinfo.empty()) {
    size_t colon = userinfo.find(':');
    std::string_view user = userinfo.substr(0, colon);
    if (!percent_decode(user, &u.user)) return url_error("the user has a malformed %-escape");
    if (colon != std::string_view::npos && !percent_decode(userinfo.substr(colon + 1), &u.password))
      return url_error("the password has a malformed %-escape");
  }
  if (Status st = resolve_credentials(credentials); !st) return std::move(st).error();
  if (!credentials.user.empty()) u.user = credentials.user;
  if (!credentials.password.empty()) u.password = credentials.password;
  if (u.user.empty()) return url_error("the user is missing (give it in the URL or in `user`)");
  register_secret(u.password);

  if (hostport.starts_with('[')) {
    size_t close = hostport.find(']');
    if (close == std::string_view::npos) return url_error("an IPv6 host lacks its closing ']'");
    u.host = std::string(hostport.substr(1, close - 1));
    hostport = hostport.substr(close + 1);
    if (!hostport.empty() && !hostport.starts_with(':'))
      return url_error("unexpected text after the IPv6 host");
  } else {
    size_t colon = hostport.find(':');
    u.host = std::string(hostport.substr(0, colon));
    hostport = colon == std::string_view::npos ? std::string_view{} : hostport.substr(colon);
  }
  if (u.host.empty()) return url_error("the host is missing");
  if (!hostport.empty()) {
    std::string_view port = hostport.substr(1);
    unsigned value = 0;
    auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (port.empty() || ec != std::errc() || p != port.data() + port.size() || value == 0 ||
        value > 65535)
      return url_error(fmt::format("the port \"{}\" is not a number from 1 to 65535", port));
    u.port = static_cast<uint16_t>(value);
  }

  if (!path.empty() && path.back() == '/') path.remove_suffix(1);
  if (!percent_decode(path, &u.database)) return url_error("the database has a malformed %-escape");
  if (u.database.empty()) return url_error("the database is missing");
  if (u.database.find('/') != std::string::npos) return url_error("the database name contains '/'");
  return u;
}

}  // namespace sluice::mysql
