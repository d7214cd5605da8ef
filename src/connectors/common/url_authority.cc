#include "connectors/common/url_authority.h"

#include <fmt/format.h>

#include <charconv>

#include "connectors/common/credentials.h"

namespace sluice {

namespace {

Error bad(std::string what) { return Error(Errc::invalid_argument, std::move(what)); }

}  // namespace

Result<UrlAuthority> parse_url_authority(std::string_view rest, std::string_view query_hint) {
  UrlAuthority u;
  // Only after the user info: a password may hold '?' and '#'.
  const size_t last_at = rest.rfind('@');
  const std::string_view after_userinfo =
      last_at == std::string_view::npos ? rest : rest.substr(last_at + 1);
  if (after_userinfo.find('?') != std::string_view::npos)
    return bad(query_hint.empty()
                   ? std::string("query parameters are not supported")
                   : fmt::format("query parameters are not supported ({})", query_hint));
  if (after_userinfo.find('#') != std::string_view::npos)
    return bad("a fragment ('#') is not allowed");

  std::string_view userinfo;
  if (last_at != std::string_view::npos) {
    userinfo = rest.substr(0, last_at);
    rest = rest.substr(last_at + 1);
  }
  std::string_view hostport = rest;
  if (size_t slash = rest.find('/'); slash != std::string_view::npos) {
    hostport = rest.substr(0, slash);
    u.path = rest.substr(slash + 1);
    if (!u.path.empty() && u.path.back() == '/') u.path.remove_suffix(1);
  }

  if (!userinfo.empty()) {
    const size_t colon = userinfo.find(':');
    if (!percent_decode(userinfo.substr(0, colon), &u.user))
      return bad("the user has a malformed %-escape");
    if (colon != std::string_view::npos && !percent_decode(userinfo.substr(colon + 1), &u.password))
      return bad("the password has a malformed %-escape");
  }

  if (hostport.starts_with('[')) {
    const size_t close = hostport.find(']');
    if (close == std::string_view::npos) return bad("an IPv6 host lacks its closing ']'");
    u.host = std::string(hostport.substr(1, close - 1));
    hostport = hostport.substr(close + 1);
    if (!hostport.empty() && !hostport.starts_with(':'))
      return bad("unexpected text after the IPv6 host");
  } else {
    const size_t colon = hostport.find(':');
    u.host = std::string(hostport.substr(0, colon));
    hostport = colon == std::string_view::npos ? std::string_view{} : hostport.substr(colon);
  }
  if (u.host.empty()) return bad("the host is missing");
  if (!hostport.empty()) {
    const std::string_view port = hostport.substr(1);
    unsigned value = 0;
    auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (port.empty() || ec != std::errc() || p != port.data() + port.size() || value == 0 ||
        value > 65535)
      return bad(fmt::format("the port \"{}\" is not a number from 1 to 65535", port));
    u.port = static_cast<uint16_t>(value);
  }
  return u;
}

}  // namespace sluice
