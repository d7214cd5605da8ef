// Registry entry and settings tables of the `file` connector.
#include "connectors/file/file_connector.h"

#include "connectors/builtin.h"

namespace sluice {

namespace {

using file::DestinationOptions;
using file::SourceOptions;

constexpr auto kSourceSettings = settings_table<SourceOptions>(
    setting<&SourceOptions::path>("path", "JSON Lines file to read (one OpenCDC record per line).")
        .mandatory()
        .file_path(),
    setting<&SourceOptions::follow>(
        "follow",
        "Keep reading lines appended to the file instead of ending at its end (like `tail -f`).")
        .with_default("false"));

constexpr auto kDestinationSettings = settings_table<DestinationOptions>(
    setting<&DestinationOptions::path>(
        "path",
        "JSON Lines file to append records to (created if missing; its directory must exist).")
        .mandatory()
        .file_path(),
    setting<&DestinationOptions::sync>(
        "sync",
        "fsync the file after each batch before reporting it durable; false trades crash safety for speed.")
        .with_default("true"));

}  // namespace

namespace file {

// The cross-setting checks of each side, in one place.
Status finalize(const SourceOptions& o) {
  if (o.path.empty()) return Error(Errc::config, "file source: setting 'path' must name a file");
  return ok_status();
}
Status finalize(const DestinationOptions& o) {
  if (o.path.empty())
    return Error(Errc::config, "file destination: setting 'path' must name a file");
  return ok_status();
}

Result<SourceOptions> source_options(const Settings& settings) {
  SLUICE_TRY_ASSIGN(SourceOptions o, bind_settings(kSourceSettings, settings, "file source"));
  SLUICE_TRY(finalize(o));
  return o;
}

Result<DestinationOptions> destination_options(const Settings& settings) {
  SLUICE_TRY_ASSIGN(DestinationOptions o,
                    bind_settings(kDestinationSettings, settings, "file destination"));
  SLUICE_TRY(finalize(o));
  return o;
}

}  // namespace file

ConnectorSpec file_connector() {
  return ConnectorSpec{
      .name = "file",
      .summary =
          "JSON Lines file of OpenCDC records: appends records (destination) or reads them, "
          "optionally following the file as it grows (source).",
      .source_settings = kSourceSettings,
      .destination_settings = kDestinationSettings,
      .make_source = &file::make_source,
      .make_destination = &file::make_destination,
  };
}

}  // namespace sluice
