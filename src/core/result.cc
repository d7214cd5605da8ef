#include "sluice/result.h"

namespace sluice {

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
