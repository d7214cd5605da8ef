// The `user`, `password` and `password_file` settings every database connector accepts besides
// its `url`, so that no one has to percent-encode a password: resolving them reads the file and
// registers the password for redaction (sluice/secrets.h).
#pragma once

#include <string>
#include <string_view>

#include "sluice/result.h"

namespace sluice {

struct Credentials {
  std::string user;           // empty: the user of `url`
  std::string password;       // empty: password_file, else the password of `url`
  std::string password_file;  // a file holding the password (a trailing newline is dropped)
};

// The settings' docs, shared by every connector that declares them.
inline constexpr std::string_view kUserDoc =
    "User name; overrides the user in `url`. Taken as written: no percent-encoding.";
inline constexpr std::string_view kPasswordDoc =
    "Password; overrides the password in `url`. Taken as written (any character, no "
    "percent-encoding); `${ENV_VAR}` keeps it out of the file.";
inline constexpr std::string_view kPasswordFileDoc =
    "File whose content is the password (one trailing newline dropped), e.g. a mounted secret; "
    "instead of `password`.";

// Reads `password_file` into `password` (both set: a config error) and registers the password as
// a secret. Errors never contain the password.
Status resolve_credentials(Credentials& c);

// Percent-decodes `in` (the user info and path of a connector URL); false on a malformed escape
// ("%zz", a trailing "%").
bool percent_decode(std::string_view in, std::string* out);

}  // namespace sluice
