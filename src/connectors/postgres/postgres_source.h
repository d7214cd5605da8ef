// The `postgres` source: a consistent snapshot (COPY inside the snapshot exported by slot
// creation), then logical replication (pgoutput, protocol 1) from the slot.
//
//   open: connect ─▶ checks (wal_level, REPLICATION, tables) ─▶ publication ─▶ slot
//                      (created with an exported snapshot the first time)
//   read: ┌ snapshot phase: COPY (SELECT ctid, cols FROM t WHERE ctid > cursor), ctid order ──┐
//         └──────────────────────────────────────────────────────────────────────────────┴▶ CDC:
//         START_REPLICATION from the checkpoint; XLogData → pgoutput → records
//   ack:  standby status updates carry flush = the position the runtime acknowledged (durable at
//         the destination), never what was merely received.
//
// A driver of the log-source skeleton (connectors/common/log_source.h; the driver and its files:
// postgres_source_driver.h), which owns the phases, this position's codec, resume inside a
// transaction and reconnects (docs/development/log-sources.md).
//
// Position (opaque to the runtime, text; the skeleton's LogPosition, versions 1 and 3):
//   "v3 snapshot <start-lsn> <table-index> <page>:<tuple>"
//                                                   snapshot in progress: every row of the table
//                                                   up to heap tuple (page, tuple) is read; the
//                                                   stream starts at start-lsn. "snapshot … <page>"
//                                                   (version 1): resume at that page's start
//   "cdc <flush-lsn> [<tx-commit-lsn> <n>]"         all transactions ending at or before flush-lsn
//   are
//                                                   durable, plus the first n changes of the
//                                                   transaction committing at tx-commit-lsn
//   "done <lsn>"                                    initial_only snapshot finished
#pragma once

#include "connectors/builtin.h"

namespace sluice {

ConnectorSpec postgres_connector();

}  // namespace sluice
