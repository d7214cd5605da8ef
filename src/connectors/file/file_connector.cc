// Registry entry and settings tables of the `file` connector.
#include "connectors/file/file_connector.h"

#include "connectors/builtin.h"

namespace sluice {

namespace {

constexpr SettingSpec kSourceSettings[] = {
    {"path", SettingType::string, "", true, "JSON Lines file to read (one OpenCDC record per line)."},
    {"follow", SettingType::boolean, "false", false,
     "Keep reading lines appended to the file instead of ending at its end (like `tail -f`)."},
};

constexpr SettingSpec kDestinationSettings[] = {
    {"path", SettingType::string, "", true,
     "JSON Lines file to append records to (created if missing; its directory must exist)."},
    {"sync", SettingType::boolean, "true", false,
     "fsync the file after each batch before reporting it durable; false trades crash safety for speed."},
};

}  // namespace

ConnectorSpec file_connector() {
  return ConnectorSpec{
      .name = "file",
      .summary = "JSON Lines file of OpenCDC records: appends records (destination) or reads them, "
                 "optionally following the file as it grows (source).",
      .source_settings = kSourceSettings,
      .destination_settings = kDestinationSettings,
      .make_source = &file::make_source,
      .make_destination = &file::make_destination,
  };
}

}  // namespace sluice
