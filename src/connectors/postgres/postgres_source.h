// The `postgres` source: a consistent snapshot (COPY inside the snapshot exported by slot
// creation), then logical replication (pgoutput, protocol 1) from the slot.
//
//   open: connect ─▶ checks (wal_level, REPLICATION, tables) ─▶ publication ─▶ slot
//                      (created with an exported snapshot the first time)
//   read: ┌ snapshot phase: COPY (SELECT cols FROM t WHERE ctid in a batch-sized page range) ┐
//         └──────────────────────────────────────────────────────────────────────────────┴▶ CDC:
//         START_REPLICATION from the checkpoint; XLogData → pgoutput → records
//   ack:  standby status updates carry flush = the position the runtime acknowledged (durable at
//         the destination), never what was merely received.
//
// A driver of the log-source skeleton (connectors/common/log_source.h; the driver and its files:
// postgres_source_driver.h), which owns the phases, this position's codec, resume inside a
// transaction and reconnects (docs/development/log-sources.md).
//
// Position (opaque to the runtime, text; the skeleton's LogPosition, version 1):
//   "snapshot <start-lsn> <table-index> <page>"     snapshot in progress: the pages before <page>
//                                                   are read (batches end where chunks end);
//                                                   stream starts at start-lsn
//   "cdc <flush-lsn> [<tx-commit-lsn> <n>] [cap <oid>,…]"
//                                                   all transactions ending at or before flush-lsn
//                                                   are durable, plus the first n changes of the
//                                                   transaction committing at tx-commit-lsn; the
//                                                   listed tables' oids (what the stream delivers)
//   "done <lsn>"                                    initial_only snapshot finished
#pragma once

#include "connectors/builtin.h"

namespace sluice {

ConnectorSpec postgres_connector();

}  // namespace sluice
