#include "connectors/mysql/mysql_url.h"

#include <fmt/format.h>

#include "connectors/common/url_authority.h"
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

  auto authority = parse_url_authority(rest, "set TLS with tls.mode and tls.ca");
  if (!authority) return url_error(authority.error().message());
  UrlAuthority& a = *authority;
  u.user = std::move(a.user);
  u.password = std::move(a.password);
  u.host = std::move(a.host);
  if (a.port) u.port = *a.port;
  if (Status st = resolve_credentials(credentials); !st) return std::move(st).error();
  if (!credentials.user.empty()) u.user = credentials.user;
  if (!credentials.password.empty()) u.password = credentials.password;
  if (u.user.empty()) return url_error("the user is missing (give it in the URL or in `user`)");
  register_secret(u.password);

  const std::string_view path = a.path;
  if (!percent_decode(path, &u.database)) return url_error("the database has a malformed %-escape");
  if (u.database.empty()) return url_error("the database is missing");
  if (u.database.find('/') != std::string::npos) return url_error("the database name contains '/'");
  return u;
}

}  // namespace sluice::mysql
