// Log set-up: spdlog to stderr, text or JSON lines, level from --log-level.
#pragma once

#include <string>

namespace sluice {

// Returns false (and leaves defaults) if level or format is unknown.
bool setup_logging(const std::string& level, const std::string& format);

}  // namespace sluice
