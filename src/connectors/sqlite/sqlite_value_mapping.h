// How record values are stored in SQLite.
//
//   value kind                  bound as                            column type when it creates the
//   column
//   --------------------------  ----------------------------------
//   --------------------------------------- null                        NULL (none: BLOB affinity,
//   stores as bound) bool                        INTEGER 0 / 1                       INTEGER int64
//   INTEGER                             INTEGER uint64                      INTEGER if <=
//   INT64_MAX, else TEXT  (none)   [1] float64                     REAL; NaN as TEXT 'NaN'  [2]
//   REAL decimal                     TEXT, exact ("-12.340")             TEXT     [3] string TEXT
//   TEXT bytes                       BLOB                                BLOB date TEXT 2024-02-29
//   TEXT time                        TEXT 13:45:00.123456                TEXT timetz TEXT
//   13:45:00+02:00                 TEXT timestamp                   TEXT 2024-02-29T13:45:00.123456
//   TEXT timestamptz                 TEXT 2024-02-29T13:45:00.123456Z    TEXT interval TEXT ISO
//   8601 P1Y2M3DT4H5M6.5S      TEXT uuid                        TEXT 8-4-4-4-12 lowercase hex TEXT
//   json                        TEXT, the document as received      TEXT
//   array, object               TEXT, JSON (encode_value_json)      TEXT
//
// Dates and times use the canonical forms of value.h, which SQLite's date functions understand.
// [1] INTEGER or NUMERIC affinity would turn the TEXT of a value above INT64_MAX into an inexact
//     REAL, so uint64 columns get no affinity and keep each value exactly as bound.
// [2] SQLite stores a NaN REAL as NULL, which would be indistinguishable from a null.
// [3] Not NUMERIC: NUMERIC affinity converts "12.340" to the REAL 12.34, losing exactness.
#pragma once

#include <sqlite3.h>

#include <string>
#include <string_view>

#include "sluice/value.h"

namespace sluice::sqlite_destination {

// Declared type of a column created for a first value of `kind` ("" = no declared type).
std::string_view column_type_for(ValueKind kind) noexcept;

// Binds `v` to parameter `index` of `stmt`. Text and bytes of the value are bound without copying
// (SQLITE_STATIC): they must outlive the step. Rendered forms (dates, uuid, JSON, ...) are written
// to `scratch`, which must likewise stay untouched until the statement has been stepped.
int bind_value(sqlite3_stmt* stmt, int index, const Value& v, std::string& scratch);

}  // namespace sluice::sqlite_destination
