// The `sqlite` connector: its settings table and factory. The destination is in
// sqlite_destination.cc, the value/column type mapping in sqlite_value_mapping.h.
#include "connectors/builtin.h"
#include "connectors/sqlite/sqlite_destination.h"

namespace sluice {

namespace {

// Bound to the public options struct (sqlite_destination.h), whose initializers serve code that
// builds options directly; the check `SqliteSettings.DefaultsMatchTheOptionsStruct` keeps both
// equal.
constexpr auto kDestinationSettings = settings_table<SqliteDestinationOptions>(
    setting<&SqliteDestinationOptions::path>(
        "path", "SQLite database file; created, with its parent directories, if missing.")
        .mandatory()
        .file_path(),
    setting<&SqliteDestinationOptions::table>(
        "table",
        "Table each record is written to: a template where {{table}} and {{schema}} (or any "
        "{{metadata-key}}) are replaced from the record's metadata. A record without table metadata "
        "goes to \"records\". Tables are created on first use with the record key as PRIMARY KEY; "
        "missing columns are added.")
        .with_default("{{table}}"),
    setting<&SqliteDestinationOptions::synchronous>(
        "synchronous",
        "SQLite synchronous mode. normal: a written batch survives a crash of sluice (WAL, no fsync "
        "per batch); full: it also survives a power loss (fsync per batch); off: neither.")
        .one_of("off,normal,full")
        .with_default("normal"),
    setting<&SqliteDestinationOptions::journal_mode>(
        "journal_mode", "SQLite journal mode. wal lets readers query the file while sluice writes.")
        .one_of("wal,delete,truncate,persist")
        .with_default("wal"),
    setting<&SqliteDestinationOptions::busy_timeout>(
        "busy_timeout",
        "How long a write waits for another connection's lock before failing (the batch is then "
        "retried).")
        .with_default("5s"),
    setting<&SqliteDestinationOptions::keep_dropped_columns>(
        "schema.keep_dropped_columns",
        "What a dropped source column does at the destination (a schema record drop_column): false drops the column too; true keeps it with its values (rows written later read NULL in it, and a column re-added under its name is backfilled with NULL or the source default, never the old values). docs/schema-changes.md.")
        .with_default("false"),
    setting<&SqliteDestinationOptions::reconcile>(
        "snapshot.reconcile",
        "What a re-snapshot of a table (between the markers snapshot_begin and snapshot_end) does to rows the snapshot did not see. sweep: the keys written meanwhile are kept in a side table sluice_sweep_<table>, and at snapshot_end the rows with any other key are deleted (off when the `table` template has no {{table}}: one destination table then holds several source tables' rows); truncate: the table is emptied at snapshot_begin (it is incomplete until the snapshot ends); none: rows stay. docs/schema-changes.md.")
        .one_of("sweep,truncate,none")
        .with_default("sweep"),
    setting<&SqliteDestinationOptions::checkpoint_in_destination>(
        "checkpoint_in_destination",
        "Store the source position in the destination, in the same transaction as each batch (table "
        "sluice_checkpoints); on restart the pipeline resumes exactly after the last batch applied, so "
        "no change is applied twice.")
        .with_default("false"),
    setting<&SqliteDestinationOptions::unrepresentable_values>(
        "unrepresentable_values",
        "What happens to a value SQLite cannot store: NaN (a REAL NaN reads back as NULL; ±Infinity "
        "is stored as REAL ±Inf). reject: the record is rejected, so it goes to the dead-letter queue "
        "with on_error: dlq and stops the pipeline, naming the record and field, otherwise; null: the "
        "column is set to NULL.")
        .one_of("reject,null")
        .with_default("reject"));

// The checks no single declaration expresses.
Status finalize(SqliteDestinationOptions& o) {
  if (o.path.empty())
    return Error(Errc::invalid_argument,
                 "sqlite destination: `path` is empty; set the database file path");
  return ok_status();
}

Result<std::unique_ptr<Destination>> make_destination(const Settings& settings) {
  auto options = sqlite_destination_options(settings);
  if (!options) return std::move(options).error();
  return make_sqlite_destination(std::move(options.value()));
}

}  // namespace

std::span<const SettingSpec> sqlite_destination_settings() noexcept { return kDestinationSettings; }

Result<SqliteDestinationOptions> sqlite_destination_options(const Settings& settings) {
  SLUICE_TRY_ASSIGN(SqliteDestinationOptions o, bind_settings(kDestinationSettings, settings));
  SLUICE_TRY(finalize(o));
  return o;
}

namespace {
constexpr std::string_view kSqliteTemplateSettings[] = {"table"};
}  // namespace

ConnectorSpec sqlite_connector() {
  return ConnectorSpec{
      .name = "sqlite",
      .summary =
          "Writes records into tables of an SQLite file: idempotent upserts and deletes by key.",
      .source_settings = {},
      .destination_settings = kDestinationSettings,
      .make_source = nullptr,
      .make_destination = &make_destination,
      .template_settings = kSqliteTemplateSettings,
  };
}

}  // namespace sluice
