// The `file` connector: JSON Lines in the OpenCDC shape (one record per line, see sluice/json.h).
// Source and destination live in their own files; the spec and settings tables in
// file_connector.cc.
#pragma once

#include <memory>
#include <string>

#include "sluice/registry.h"

namespace sluice::file {

// Options bound to the settings tables in file_connector.cc (defaults live there).
struct SourceOptions {
  std::string path;
  bool follow{};
};
struct DestinationOptions {
  std::string path;
  bool sync{};
};

// Binds and finalizes the options from validated settings.
Result<SourceOptions> source_options(const Settings& settings);
Result<DestinationOptions> destination_options(const Settings& settings);

Result<std::unique_ptr<Source>> make_source(const Settings& settings);
Result<std::unique_ptr<Destination>> make_destination(const Settings& settings);

}  // namespace sluice::file
