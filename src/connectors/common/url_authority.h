// The part of a connector URL after its scheme that the mysql:// and redis:// URLs share:
//
//   [user[:password]@]host[:port][/path]
//
// The last '@' ends the user info, so that an unencoded '@' in the password still parses; user
// and password are percent-decoded ("p%40ss" is "p@ss"). host may be a name, an IPv4 address or a
// bracketed IPv6 address. Query parameters and fragments (after the user info: a password may
// hold '?' and '#') are refused. The path (after the first '/' following the host, one trailing
// '/' dropped) is returned as it is: its meaning is the scheme's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "sluice/result.h"

namespace sluice {

struct UrlAuthority {
  std::string user;
  std::string password;          // never log
  std::string host;              // without brackets for IPv6
  std::optional<uint16_t> port;  // nullopt: the URL has none (the scheme's default)
  std::string_view path;         // a view into the parsed text, not decoded
};

// `rest` is the URL without its scheme ("u:p@host:1/db"). An error (invalid_argument) says what is
// wrong in a few words ("the host is missing") without the password; the caller adds the URL form
// it expects. `query_hint` is appended to the error for a query ("?…"), e.g. where TLS is set.
Result<UrlAuthority> parse_url_authority(std::string_view rest, std::string_view query_hint = {});

}  // namespace sluice
