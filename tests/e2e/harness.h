// End-to-end tests of the sluice binary: the names they use for the shared test support
// (tests/support: process control, temporary directories, reading SQLite results).
#pragma once

#include <signal.h>

#include "support/process.h"
#include "support/sqlite.h"

namespace sluice::e2e {

using test::make_temp_dir;
using test::Process;
using test::read_file;
using test::run_sluice;
using test::write_file;
using Db = test::SqliteFile;

inline std::string column_text(sqlite3_stmt* st, int i) { return test::sqlite_column_text(st, i); }

}  // namespace sluice::e2e
