#include "connectors/common/credentials.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "sluice/secrets.h"

namespace sluice {

Status resolve_credentials(Credentials& c) {
  if (!c.password.empty() && !c.password_file.empty())
    return Error(Errc::config,
                 "settings 'password' and 'password_file' are both set; keep one of them");
  if (!c.password_file.empty()) {
    std::ifstream in(c.password_file, std::ios::binary);
    if (!in)
      return Error(Errc::config, fmt::format("setting 'password_file': cannot read \"{}\": {}; "
                                             "check the path and that this user may read it",
                                             c.password_file, std::strerror(errno)));
    std::ostringstream text;
    text << in.rdbuf();
    c.password = text.str();
    if (c.password.ends_with("\r\n")) c.password.resize(c.password.size() - 2);
    else if (c.password.ends_with('\n')) c.password.pop_back();
    if (c.password.empty())
      return Error(Errc::config, fmt::format("setting 'password_file': \"{}\" is empty; write "
                                             "the password into it",
                                             c.password_file));
  }
  if (!c.password.empty()) register_secret(c.password);
  return ok_status();
}

}  // namespace sluice
