// pgoutput (PostgreSQL's built-in logical decoding output plugin) protocol messages, version 1 and
// the streaming messages of version 2 (in-progress transactions), and the decoder that turns the
// raw payload of an XLogData message into them. No I/O here: the decoder is unit-tested on raw
// bytes. All string_views in decoded messages point into the payload.
//
// Reference: PostgreSQL docs, "Logical Replication Message Formats".
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "connectors/common/log_position.h"
#include "sluice/result.h"

namespace sluice::pg {

// A WAL position (the one strong type all log-source positions share).
using Lsn = sluice::Lsn;

// Microseconds between 1970-01-01 and 2000-01-01 (PostgreSQL's epoch).
inline constexpr int64_t kPgEpochOffsetMicros = 946684800LL * 1000000LL;

struct Column {
  std::string name;
  uint32_t type_oid = 0;
  int32_t type_mod = -1;
  bool key = false;  // part of the replica identity
};

// A table as described by the latest Relation message. Shared (immutable once built) so batches
// referencing column names can retain it after a newer version replaces it.
struct Relation {
  uint32_t oid = 0;
  std::string schema;
  std::string name;
  char replica_identity = 'd';  // d default, n nothing, f full, i index
  std::vector<Column> columns;
};

struct TupleValue {
  char kind = 'n';  // 'n' null, 'u' unchanged TOASTed value (not sent), 't' text, 'b' binary
  std::string_view data;
};
using Tuple = std::vector<TupleValue>;

struct BeginMsg {
  Lsn final_lsn;            // LSN of the commit record
  int64_t commit_time = 0;  // microseconds since the Unix epoch
  uint32_t xid = 0;
};
struct CommitMsg {
  uint8_t flags = 0;
  Lsn commit_lsn;
  Lsn end_lsn;              // end of the commit record: the position to confirm once applied
  int64_t commit_time = 0;  // microseconds since the Unix epoch
};
struct OriginMsg {
  Lsn origin_lsn;
  std::string_view name;
};
struct RelationMsg {
  std::shared_ptr<const Relation> relation;
};
struct TypeMsg {
  uint32_t oid = 0;
  std::string_view schema;
  std::string_view name;
};
struct InsertMsg {
  uint32_t relation_oid = 0;
  Tuple new_tuple;
};
struct UpdateMsg {
  uint32_t relation_oid = 0;
  char old_kind =
      0;  // 0: no old tuple; 'K': key columns only; 'O': full old row (REPLICA IDENTITY FULL)
  Tuple old_tuple;
  Tuple new_tuple;
};
struct DeleteMsg {
  uint32_t relation_oid = 0;
  char old_kind = 'K';  // 'K' or 'O'
  Tuple old_tuple;
};
struct TruncateMsg {
  uint8_t options = 0;  // 1 CASCADE, 2 RESTART IDENTITY
  std::vector<uint32_t> relation_oids;
};
struct LogicalMsg {
  bool transactional = false;
  Lsn lsn;
  std::string_view prefix;
  std::string_view content;
};

// Protocol 2 (`streaming on`): a transaction in progress arrives in blocks, each between a Stream
// Start and a Stream Stop, whose change, Relation, Type and transactional Message messages carry
// the (sub)transaction's xid after their type byte; it ends with a Stream Commit or Stream Abort.
struct StreamStartMsg {
  uint32_t xid = 0;
  bool first_segment = false;
};
struct StreamStopMsg {};
struct StreamCommitMsg {
  uint32_t xid = 0;
  uint8_t flags = 0;
  Lsn commit_lsn;
  Lsn end_lsn;
  int64_t commit_time = 0;  // microseconds since the Unix epoch
};
struct StreamAbortMsg {
  uint32_t xid = 0;
  uint32_t subxid = 0;  // == xid: the whole transaction; else a subtransaction rolled back
};

using Message = std::variant<BeginMsg, CommitMsg, OriginMsg, RelationMsg, TypeMsg, InsertMsg,
                             UpdateMsg, DeleteMsg, TruncateMsg, LogicalMsg, StreamStartMsg,
                             StreamStopMsg, StreamCommitMsg, StreamAbortMsg>;

// Inside a streamed block, whether a message of this type carries a (sub)transaction xid after
// its type byte (its body is then that of protocol 1 after those four bytes).
inline bool carries_stream_xid(char type) noexcept {
  switch (type) {
    case 'R':
    case 'Y':
    case 'I':
    case 'U':
    case 'D':
    case 'T':
    case 'M': return true;
    default: return false;
  }
}

// Decodes one pgoutput message (the payload after the XLogData header). Malformed or truncated
// input is an Errc::data error naming the message type, never a crash. Reuses `out`'s tuple
// storage when possible.
Status decode_pgoutput(std::string_view payload, Message* out);

// Keeps the latest Relation per OID (schema changes replace the entry; old versions stay alive
// through shared_ptrs held by batches).
class RelationCache {
 public:
  void put(std::shared_ptr<const Relation> r) { relations_[r->oid] = std::move(r); }
  std::shared_ptr<const Relation> get(uint32_t oid) const {
    auto it = relations_.find(oid);
    return it == relations_.end() ? nullptr : it->second;
  }

 private:
  std::unordered_map<uint32_t, std::shared_ptr<const Relation>> relations_;
};

}  // namespace sluice::pg
