// mysql://user:password@host:port/database — the `url` setting of the mysql connector.
//
// user, password and database are percent-decoded ("p%40ss" is "p@ss"); the password may itself
// contain '@' or ':' unencoded (the last '@' ends the user info). host may be a name, an IPv4
// address or a bracketed IPv6 address; port defaults to 3306. The scheme may be mysql:// or
// mariadb://. Query parameters are refused: TLS is set with the `tls.mode` / `tls.ca` settings.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "connectors/common/credentials.h"
#include "sluice/result.h"

namespace sluice::mysql {

struct MysqlUrl {
  std::string user;
  std::string password;  // never log: use redacted()
  std::string host;      // without brackets for IPv6
  uint16_t port = 3306;
  std::string database;

  // The URL with the password replaced by "***", for logs and errors.
  std::string redacted() const;
};

// Errors (invalid_argument) never contain the password. `credentials` (the `user`, `password`,
// `password_file` settings) override the URL's user and password; a URL may then omit its user
// info. The password is registered for redaction (sluice/secrets.h).
Result<MysqlUrl> parse_mysql_url(std::string_view url, Credentials credentials = {});

}  // namespace sluice::mysql
