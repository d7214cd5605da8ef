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

namespace {
int hex_digit(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

bool percent_decode(std::string_view in, std::string* out) {
  out->clear();
  out->reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c != '%') {
      *out += c;
      continue;
    }
    if (i + 2 >= in.size()) return false;
    int hi = hex_digit(in[i + 1]), lo = hex_digit(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    *out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return true;
}

}  // namespace sluice
