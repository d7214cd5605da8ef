// The `mysql` source: a consistent snapshot, then row-based binlog CDC (MySQL 8 / MariaDB 10.11).
//
//   open: connect ─▶ checks (log_bin, binlog_format=ROW, privileges, tables)
//   read: ┌ snapshot: START TRANSACTION WITH CONSISTENT SNAPSHOT (binlog position captured with it:
//         │ MariaDB's binlog_snapshot_file/position, else a brief FLUSH TABLES WITH READ LOCK),
//         │ keyset chunks ordered by primary key ──────────────────────────────────────────────┐
//         └────────────────────────────────────────────────────────────────────────────────────┴▶
//         CDC: COM_BINLOG_DUMP (libmariadb's mariadb_rpl_open) from the position — by GTID on
//         MariaDB (@slave_connect_state) — raw events read on a reader thread, decoded by our own
//         decoder (binlog.h) into records.
//
// A driver of the log-source skeleton (connectors/common/log_source.h; the driver and its files:
// mysql_source_driver.h), which owns the phases, this position's codec, resume inside a
// transaction and reconnects (docs/development/log-sources.md).
//
// Position (opaque to the runtime, text; the skeleton's LogPosition, version 1; <gtid> is
// MariaDB's domain-server-seq list or "-"):
//   "snapshot <file> <pos> <gtid> <table-index> <resume>"   snapshot in progress; the stream starts
//                                                           at file:pos; <resume> is "-", "k<hex
//                                                           key values>" (keyset) or "o<offset>"
//   "cdc <file> <pos> <gtid> [<tx-file> <tx-pos> <n>]"      every transaction before file:pos is
//                                                           durable, plus the first n row changes
//                                                           of the transaction starting at tx-pos
//   "done <file> <pos> <gtid>"                              initial_only snapshot finished
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "connectors/builtin.h"

namespace sluice {

// The mysql connector's source half (settings table and factory); mysql_connector.cc registers it.
std::span<const SettingSpec> mysql_source_settings() noexcept;
Result<std::unique_ptr<Source>> make_mysql_source(const Settings& settings);

// The one-line error for a server whose binary log cannot feed the source (@@log_bin,
// @@binlog_format), naming the fix; nullopt when fine.
std::optional<std::string> mysql_binlog_config_problem(std::string_view log_bin,
                                                       std::string_view format,
                                                       std::string_view target);

}  // namespace sluice
