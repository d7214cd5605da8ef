// The `file` connector: JSON Lines in the OpenCDC shape (one record per line, see sluice/json.h).
// Source and destination live in their own files; the spec and settings tables in file_connector.cc.
#pragma once

#include <memory>

#include "sluice/registry.h"

namespace sluice::file {

Result<std::unique_ptr<Source>> make_source(const Settings& settings);
Result<std::unique_ptr<Destination>> make_destination(const Settings& settings);

}  // namespace sluice::file
