#include "connectors/common/tls_settings.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "sluice/secrets.h"

namespace sluice {

bool tls_verifies(std::string_view mode) noexcept {
  return mode == "verify_ca" || mode == "verify_identity";
}

namespace {

Status check_readable(std::string_view setting, const std::string& path) {
  if (path.empty()) return ok_status();
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Error(Errc::config,
                 fmt::format("setting '{}': cannot read \"{}\": {}; check the path and that this "
                             "user may read it",
                             setting, path, std::strerror(errno)));
  return ok_status();
}

}  // namespace

Status check_tls_settings(const TlsSettings& t) {
  if (!t.key_password.empty()) register_secret(t.key_password);
  if (tls_verifies(t.mode) && t.ca.empty())
    return Error(
        Errc::config,
        fmt::format("setting 'tls.mode' {} needs tls.ca (the CA certificate file)", t.mode));
  if (!t.cert.empty() && t.key.empty())
    return Error(Errc::config,
                 "setting 'tls.cert' needs tls.key (the client certificate's private key file)");
  if (t.cert.empty() && !t.key.empty())
    return Error(Errc::config, "setting 'tls.key' needs tls.cert (the client certificate file)");
  if (!t.key_password.empty() && t.key.empty())
    return Error(Errc::config,
                 "setting 'tls.key_password' needs tls.key (the encrypted private key file)");
  if (t.mode == "disabled") {
    for (const auto& [name, value] :
         {std::pair<std::string_view, const std::string&>{"tls.ca", t.ca},
          {"tls.cert", t.cert},
          {"tls.key", t.key}})
      if (!value.empty())
        return Error(Errc::config,
                     fmt::format("setting '{}' is set but tls.mode is disabled; set tls.mode (e.g. "
                                 "verify_identity) or remove {}",
                                 name, name));
  }
  SLUICE_TRY(check_readable("tls.ca", t.ca));
  SLUICE_TRY(check_readable("tls.cert", t.cert));
  SLUICE_TRY(check_readable("tls.key", t.key));
  return ok_status();
}

}  // namespace sluice
