// Log set-up: spdlog to stderr, text or JSON lines, level from --log-level; and the lines the CLI
// itself prints (errors, the final summary), in the same format: with --log-format json every line
// on stderr is one JSON object. Writes never throw: a closed stderr or a pipe whose reader has
// exited loses the line, never the process.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice {

// Returns false (and leaves defaults) if level or format is unknown.
bool setup_logging(const std::string& level, const std::string& format);
bool json_output();

// Writes `text` to `f` as is, ignoring failures (EPIPE, EBADF).
void write_out(std::FILE* f, std::string_view text) noexcept;

// One line of the CLI's own on stderr: text "sluice: MESSAGE", or with --log-format json
// {"time":…,"level":LEVEL,"msg":MESSAGE, FIELDS…} (field values are JSON text as given).
void cli_line(std::string_view level, std::string_view message,
              const std::vector<std::pair<std::string, std::string>>& fields = {}) noexcept;
inline void cli_error(std::string_view message) noexcept { cli_line("error", message); }

// `text` as the body of a JSON string (quotes, backslashes and control characters escaped).
std::string json_escape(std::string_view text);

}  // namespace sluice
