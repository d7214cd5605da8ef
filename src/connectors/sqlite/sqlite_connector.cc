// The `sqlite` connector: its settings table and factory. The destination is in
// sqlite_destination.cc, the value/column type mapping in sqlite_value_mapping.h.
#include "connectors/builtin.h"
#include "connectors/sqlite/sqlite_destination.h"

namespace sluice {

namespace {

constexpr SettingSpec kDestinationSettings[] = {
    {"path", SettingType::string, "", true,
     "SQLite database file; created, with its parent directories, if missing."},
    {"table", SettingType::string, "{{table}}", false,
     "Table each record is written to: a template where {{table}} and {{schema}} (or any "
     "{{metadata-key}}) are replaced from the record's metadata. A record without table metadata "
     "goes to \"records\". Tables are created on first use with the record key as PRIMARY KEY; "
     "missing columns are added."},
    {"synchronous", SettingType::enumeration, "normal", false,
     "SQLite synchronous mode. normal: a written batch survives a crash of sluice (WAL, no fsync "
     "per batch); full: it also survives a power loss (fsync per batch); off: neither.",
     "off,normal,full"},
    {"journal_mode", SettingType::enumeration, "wal", false,
     "SQLite journal mode. wal lets readers query the file while sluice writes.",
     "wal,delete,truncate,persist"},
    {"busy_timeout", SettingType::duration, "5s", false,
     "How long a write waits for another connection's lock before failing (the batch is then "
     "retried)."},
    {"checkpoint_in_destination", SettingType::boolean, "false", false,
     "Store the source position in the destination, in the same transaction as each batch (table "
     "sluice_checkpoints); on restart the pipeline resumes exactly after the last batch applied, so "
     "no change is applied twice."},
};

Result<std::unique_ptr<Destination>> make_destination(const Settings& settings) {
  auto options = sqlite_destination_options(settings);
  if (!options) return std::move(options).error();
  return make_sqlite_destination(std::move(options.value()));
}

}  // namespace

std::span<const SettingSpec> sqlite_destination_settings() noexcept { return kDestinationSettings; }

Result<SqliteDestinationOptions> sqlite_destination_options(const Settings& settings) {
  SqliteDestinationOptions o;
  o.path = settings.get_string("path");
  if (settings.has("table")) o.table = settings.get_string("table");
  if (settings.has("synchronous")) o.synchronous = settings.get_string("synchronous");
  if (settings.has("journal_mode")) o.journal_mode = settings.get_string("journal_mode");
  if (settings.has("busy_timeout")) o.busy_timeout = settings.get_duration("busy_timeout");
  if (settings.has("checkpoint_in_destination"))
    o.checkpoint_in_destination = settings.get_bool("checkpoint_in_destination");
  if (o.path.empty())
    return Error(Errc::invalid_argument, "sqlite destination: `path` is empty; set the database file path");
  return o;
}

ConnectorSpec sqlite_connector() {
  return ConnectorSpec{
      .name = "sqlite",
      .summary = "Writes records into tables of an SQLite file: idempotent upserts and deletes by key.",
      .source_settings = {},
      .destination_settings = kDestinationSettings,
      .make_source = nullptr,
      .make_destination = &make_destination,
  };
}

}  // namespace sluice
