// Secrets never leave the process: every secret value of the loaded configuration (a `password`,
// the password inside a `url`, a `password_file`'s content, sasl.password, …) is registered here
// once, and every outlet of text (log lines, the CLI's own lines, /metrics, dead-letter reasons)
// passes through redact(). redact() also masks the password of any URL it sees
// (scheme://user:PASSWORD@host), registered or not, so a message that quotes a URL as a library
// mis-parsed it still shows no password.
#pragma once

#include <string>
#include <string_view>

namespace sluice {

// Registers `value` (and its percent-decoded form) as secret. Values shorter than 3 characters
// are not registered (masking every "a" would garble all text; such a password is no protection).
void register_secret(std::string_view value);
// Registers the password of a URL (postgresql://user:pw@host/db, mysql://…): the text between
// the first ':' after "://" and the last '@' before the host, raw and percent-decoded.
void register_url_secret(std::string_view url);
// `text` with every registered secret and every URL password replaced by "***".
std::string redact(std::string_view text);
// True when `text` contains a registered secret or a URL password (redact() would change it).
bool contains_secret(std::string_view text);
// Forgets every registered secret (tests).
void clear_secrets_for_testing();

}  // namespace sluice
