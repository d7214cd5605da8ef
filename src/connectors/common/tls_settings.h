// The `tls.*` settings every network connector declares (postgres, mysql, kafka; sources and
// destinations), with one meaning everywhere:
//   tls.mode          disabled | preferred | required | verify_ca | verify_identity
//   tls.ca            PEM file of the CA that signed the server's certificate (verify_* need it)
//   tls.cert/tls.key  the client's certificate and private key (PEM), both or neither
//   tls.key_password  the key's passphrase, a secret (never logged)
// Each connector maps them onto its client library (libpq sslmode/sslrootcert/..., libmariadb
// MYSQL_OPT_SSL_*, librdkafka security.protocol/ssl.*). The checks across them live here, once.
#pragma once

#include <string>
#include <string_view>

#include "sluice/result.h"

namespace sluice {

struct TlsSettings {
  std::string mode;  // one of the modes above; "" when the connector leaves it to its URL
  std::string ca, cert, key, key_password;
};

// The settings' docs, shared by every connector that declares them.
inline constexpr std::string_view kTlsCaDoc =
    "PEM file of the certificate authority that signed the server's certificate; needed by "
    "tls.mode verify_ca and verify_identity.";
inline constexpr std::string_view kTlsCertDoc =
    "PEM file of the client certificate, for servers that authenticate clients by certificate; "
    "needs tls.key.";
inline constexpr std::string_view kTlsKeyDoc =
    "PEM file of the client certificate's private key; needs tls.cert.";
inline constexpr std::string_view kTlsKeyPasswordDoc =
    "Passphrase of an encrypted tls.key; `${ENV_VAR}` keeps it out of the file.";

// True for verify_ca and verify_identity.
bool tls_verifies(std::string_view mode) noexcept;

// The checks across the tls.* settings, as config errors naming the settings and the fix:
// verify_* without tls.ca, tls.cert without tls.key (or the reverse), tls.key_password without
// tls.key, files given while tls.mode is disabled, a file that cannot be read. Registers
// tls.key_password as a secret (sluice/secrets.h).
Status check_tls_settings(const TlsSettings& tls);

}  // namespace sluice
