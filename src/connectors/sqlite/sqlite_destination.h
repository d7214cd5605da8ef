// The `sqlite` destination: keyed, idempotent writes into tables of an embedded SQLite file.
//
//   write(batch) ──▶ BEGIN IMMEDIATE
//                    for each record: table = render(table template, record metadata)
//                      snapshot/create/update ─▶ INSERT .. ON CONFLICT(key) DO UPDATE SET <present
//                      fields> delete                  ─▶ DELETE .. WHERE key
//                    COMMIT ──▶ done(ok)             (any error: ROLLBACK ──▶ done(error))
//
// Tables are created on first use from the first record (key columns + fields of `after`, key as
// PRIMARY KEY); a field the table lacks adds a column. Statements are cached per (table,
// operation, key names, present field names), so steady traffic prepares nothing.
//
// With checkpoint_in_destination, the batch's position is upserted into
// sluice_checkpoints(pipeline, position BLOB, updated_at) before COMMIT, and stored_position()
// reads it back: the rows and the position they reach are applied atomically.
//
// Built on the keyed SQL layer (src/connectors/sql/, docs/development/sql-destinations.md): the
// planning, runs, schema evolution and transaction flow are shared; this file's dialect and
// writer supply the SQL text and the fast path.
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>

#include "sluice/connector.h"
#include "sluice/settings.h"

namespace sluice {

struct SqliteDestinationOptions {
  std::string path;
  std::string table = "{{table}}";     // template: {{table}}, {{schema}}, any {{metadata-key}}
  std::string synchronous = "normal";  // off | normal | full
  std::string journal_mode = "wal";    // wal | delete | truncate | persist
  std::chrono::milliseconds busy_timeout{5000};
  // Commit each batch's source position into table sluice_checkpoints in the batch's transaction.
  bool checkpoint_in_destination = false;
  bool keep_dropped_columns = false;              // schema.keep_dropped_columns
  std::string reconcile = "sweep";                // snapshot.reconcile: sweep | truncate | none
  std::string unrepresentable_values = "reject";  // reject | null (NaN: SQLite has none)
};

// The destination's settings table (see sqlite_connector.cc).
std::span<const SettingSpec> sqlite_destination_settings() noexcept;

Result<SqliteDestinationOptions> sqlite_destination_options(const Settings& settings);

// Fails (invalid_argument) on a malformed table template.
Result<std::unique_ptr<Destination>> make_sqlite_destination(SqliteDestinationOptions options);

}  // namespace sluice
