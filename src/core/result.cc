#include "sluice/result.h"

namespace sluice {

std::string prefix_context(std::string_view context, std::string_view message) {
  // Try the longest tail of `context` (at a segment boundary) that `message` starts with.
  for (size_t start = 0; start < context.size();) {
    const std::string_view tail = context.substr(start);
    if (message.starts_with(tail))
      return std::string(context.substr(0, start)) + std::string(message);
    const size_t next = context.find(": ", start);
    if (next == std::string_view::npos) break;
    start = next + 2;
  }
  return std::string(context) + std::string(message);
}

std::string_view errc_name(Errc code) noexcept {
  switch (code) {
    case Errc::invalid_argument: return "invalid_argument";
    case Errc::config: return "config";
    case Errc::io: return "io";
    case Errc::connection: return "connection";
    case Errc::auth: return "auth";
    case Errc::permission: return "permission";
    case Errc::not_found: return "not_found";
    case Errc::unsupported: return "unsupported";
    case Errc::data: return "data";
    case Errc::conflict: return "conflict";
    case Errc::cancelled: return "cancelled";
    case Errc::timeout: return "timeout";
    case Errc::internal: return "internal";
  }
  return "unknown";
}

}  // namespace sluice
