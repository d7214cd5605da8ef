// The `postgres` destination: keyed, idempotent writes into PostgreSQL tables, one transaction per
// batch.
//
//   write(batch) ──▶ BEGIN
//                    consecutive records of one table, one operation kind and one set of present
//                    columns form a run; runs are applied in order:
//                      upserts ─▶ COPY into a temp staging table (ON COMMIT DELETE ROWS) with a
//                                 sequence column, then INSERT .. SELECT DISTINCT ON (key) .. ORDER
//                                 BY key, seq DESC ON CONFLICT (key) DO UPDATE SET <present
//                                 columns>
//                      deletes ─▶ COPY the keys into a staging table, DELETE .. USING staging
//                      truncate ─▶ TRUNCATE
//                    COMMIT ──▶ done(ok)          (any error: ROLLBACK, caches dropped ──▶
//                    done(error))
//
// Values travel as text (COPY text format) and PostgreSQL casts them to the column's actual type.
//
// Built on the keyed SQL layer (src/connectors/sql/, docs/development/sql-destinations.md): the
// planning, runs, schema evolution and transaction flow are shared; this file's dialect and
// writer supply the SQL text and the fast path.
#pragma once

#include <memory>
#include <span>

#include "sluice/connector.h"
#include "sluice/settings.h"

namespace sluice {

extern const std::span<const SettingSpec> kPostgresDestinationSettings;
Result<std::unique_ptr<Destination>> make_postgres_destination(const Settings& settings);

}  // namespace sluice
