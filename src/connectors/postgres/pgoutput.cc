#include "connectors/postgres/pgoutput.h"

#include "connectors/postgres/pg_wire.h"

#include <cstring>
#include <string>

namespace sluice::pg {

namespace {

using wire::Reader;

constexpr std::string_view kPgCatalog = "pg_catalog";

Error truncated(std::string_view what) {
  return Error(Errc::data, "pgoutput: truncated " + std::string(what) + " message");
}
Error malformed(std::string_view what, std::string_view why) {
  return Error(Errc::data,
               "pgoutput: malformed " + std::string(what) + " message: " + std::string(why));
}
Error trailing(std::string_view what, size_t n) {
  return Error(Errc::data, "pgoutput: malformed " + std::string(what) +
                               " message: " + std::to_string(n) + " trailing bytes");
}

std::string describe_byte(uint8_t b) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  if (b >= 0x20 && b < 0x7f) {
    s += '\'';
    s += char(b);
    s += "' ";
  }
  s += "(0x";
  s += kHex[b >> 4];
  s += kHex[b & 15];
  s += ')';
  return s;
}

bool pg_time_to_unix(int64_t pg_micros, int64_t* out) {
  return !__builtin_add_overflow(pg_micros, kPgEpochOffsetMicros, out);
}

// TupleData: Int16 ncols, then per column a kind byte and for 't'/'b' an Int32 length + bytes.
Status read_tuple(Reader& r, std::string_view what, Tuple* tuple) {
  int16_t ncols;
  if (!r.i16(&ncols)) return truncated(what);
  if (ncols < 0) return malformed(what, "negative column count " + std::to_string(ncols));
  // Every column takes at least one byte: refuse counts the payload cannot hold before allocating.
  if (size_t(ncols) > r.remaining()) return truncated(what);
  tuple->resize(size_t(ncols));
  for (TupleValue& v : *tuple) {
    char kind;
    if (!r.byte(&kind)) return truncated(what);
    v.kind = kind;
    v.data = {};
    switch (kind) {
      case 'n':
      case 'u': break;
      case 't':
      case 'b': {
        int32_t len;
        if (!r.i32(&len)) return truncated(what);
        if (len < 0) return malformed(what, "negative value length " + std::to_string(len));
        if (!r.bytes(size_t(len), &v.data)) return truncated(what);
        break;
      }
      default: return malformed(what, "unknown tuple value kind " + describe_byte(uint8_t(kind)));
    }
  }
  return ok_status();
}

template <typename T>
T& reuse(Message* out) {
  if (auto* p = std::get_if<T>(out)) return *p;
  return out->emplace<T>();
}

Status decode_begin(Reader& r, Message* out) {
  constexpr std::string_view what = "Begin";
  BeginMsg m;
  int64_t ts;
  if (!r.lsn(&m.final_lsn) || !r.i64(&ts) || !r.u32(&m.xid)) return truncated(what);
  if (!r.at_end()) return trailing(what, r.remaining());
  if (!pg_time_to_unix(ts, &m.commit_time)) return malformed(what, "commit timestamp out of range");
  *out = m;
  return ok_status();
}

Status decode_commit(Reader& r, Message* out) {
  constexpr std::string_view what = "Commit";
  CommitMsg m;
  int64_t ts;
  if (!r.u8(&m.flags) || !r.lsn(&m.commit_lsn) || !r.lsn(&m.end_lsn) || !r.i64(&ts))
    return truncated(what);
  if (!r.at_end()) return trailing(what, r.remaining());
  if (!pg_time_to_unix(ts, &m.commit_time)) return malformed(what, "commit timestamp out of range");
  *out = m;
  return ok_status();
}

Status decode_origin(Reader& r, Message* out) {
  constexpr std::string_view what = "Origin";
  OriginMsg m;
  if (!r.lsn(&m.origin_lsn) || !r.cstr(&m.name)) return truncated(what);
  if (!r.at_end()) return trailing(what, r.remaining());
  *out = m;
  return ok_status();
}

Status decode_relation(Reader& r, Message* out) {
  constexpr std::string_view what = "Relation";
  auto rel = std::make_shared<Relation>();
  std::string_view ns, name;
  char ident;
  int16_t ncols;
  if (!r.u32(&rel->oid) || !r.cstr(&ns) || !r.cstr(&name) || !r.byte(&ident) || !r.i16(&ncols))
    return truncated(what);
  if (ncols < 0) return malformed(what, "negative column count " + std::to_string(ncols));
  // Each column is at least flags + empty name + type oid + typmod = 10 bytes.
  if (size_t(ncols) * 10 > r.remaining()) return truncated(what);
  rel->schema = ns.empty() ? std::string(kPgCatalog) : std::string(ns);
  rel->name = std::string(name);
  rel->replica_identity = ident;
  rel->columns.resize(size_t(ncols));
  for (Column& c : rel->columns) {
    uint8_t flags;
    std::string_view cname;
    if (!r.u8(&flags) || !r.cstr(&cname) || !r.u32(&c.type_oid) || !r.i32(&c.type_mod))
      return truncated(what);
    c.key = (flags & 1) != 0;
    c.name = std::string(cname);
  }
  if (!r.at_end()) return trailing(what, r.remaining());
  out->emplace<RelationMsg>(RelationMsg{std::move(rel)});
  return ok_status();
}

Status decode_type(Reader& r, Message* out) {
  constexpr std::string_view what = "Type";
  TypeMsg m;
  if (!r.u32(&m.oid) || !r.cstr(&m.schema) || !r.cstr(&m.name)) return truncated(what);
  if (!r.at_end()) return trailing(what, r.remaining());
  if (m.schema.empty()) m.schema = kPgCatalog;
  *out = m;
  return ok_status();
}

Status decode_insert(Reader& r, Message* out) {
  constexpr std::string_view what = "Insert";
  InsertMsg& m = reuse<InsertMsg>(out);
  char tag;
  if (!r.u32(&m.relation_oid) || !r.byte(&tag)) return truncated(what);
  if (tag != 'N') return malformed(what, "expected 'N', got " + describe_byte(uint8_t(tag)));
  if (Status s = read_tuple(r, what, &m.new_tuple); !s) return s;
  if (!r.at_end()) return trailing(what, r.remaining());
  return ok_status();
}

Status decode_update(Reader& r, Message* out) {
  constexpr std::string_view what = "Update";
  UpdateMsg& m = reuse<UpdateMsg>(out);
  char tag;
  if (!r.u32(&m.relation_oid) || !r.byte(&tag)) return truncated(what);
  m.old_kind = 0;
  if (tag == 'K' || tag == 'O') {
    m.old_kind = tag;
    if (Status s = read_tuple(r, what, &m.old_tuple); !s) return s;
    if (!r.byte(&tag)) return truncated(what);
  } else {
    m.old_tuple.clear();
  }
  if (tag != 'N') return malformed(what, "expected 'N', got " + describe_byte(uint8_t(tag)));
  if (Status s = read_tuple(r, what, &m.new_tuple); !s) return s;
  if (!r.at_end()) return trailing(what, r.remaining());
  return ok_status();
}

Status decode_delete(Reader& r, Message* out) {
  constexpr std::string_view what = "Delete";
  DeleteMsg& m = reuse<DeleteMsg>(out);
  char tag;
  if (!r.u32(&m.relation_oid) || !r.byte(&tag)) return truncated(what);
  if (tag != 'K' && tag != 'O')
    return malformed(what, "expected 'K' or 'O', got " + describe_byte(uint8_t(tag)));
  m.old_kind = tag;
  if (Status s = read_tuple(r, what, &m.old_tuple); !s) return s;
  if (!r.at_end()) return trailing(what, r.remaining());
  return ok_status();
}

Status decode_truncate(Reader& r, Message* out) {
  constexpr std::string_view what = "Truncate";
  TruncateMsg& m = reuse<TruncateMsg>(out);
  int32_t nrels;
  if (!r.i32(&nrels) || !r.u8(&m.options)) return truncated(what);
  if (nrels < 0) return malformed(what, "negative relation count " + std::to_string(nrels));
  if (size_t(nrels) * 4 > r.remaining()) return truncated(what);
  m.relation_oids.resize(size_t(nrels));
  for (uint32_t& oid : m.relation_oids)
    if (!r.u32(&oid)) return truncated(what);
  if (!r.at_end()) return trailing(what, r.remaining());
  return ok_status();
}

Status decode_message(Reader& r, Message* out) {
  constexpr std::string_view what = "logical decoding Message";
  LogicalMsg m;
  uint8_t flags;
  int32_t len;
  if (!r.u8(&flags) || !r.lsn(&m.lsn) || !r.cstr(&m.prefix) || !r.i32(&len)) return truncated(what);
  if (len < 0) return malformed(what, "negative content length " + std::to_string(len));
  if (!r.bytes(size_t(len), &m.content)) return truncated(what);
  if (!r.at_end()) return trailing(what, r.remaining());
  m.transactional = (flags & 1) != 0;
  *out = m;
  return ok_status();
}

Status decode_stream_start(Reader& r, Message* out) {
  constexpr std::string_view what = "Stream Start";
  StreamStartMsg m;
  uint8_t first;
  if (!r.u32(&m.xid) || !r.u8(&first)) return truncated(what);
  if (!r.at_end()) return trailing(what, r.remaining());
  m.first_segment = first == 1;
  *out = m;
  return ok_status();
}

Status decode_stream_commit(Reader& r, Message* out) {
  constexpr std::string_view what = "Stream Commit";
  StreamCommitMsg m;
  int64_t ts;
  if (!r.u32(&m.xid) || !r.u8(&m.flags) || !r.lsn(&m.commit_lsn) || !r.lsn(&m.end_lsn) ||
      !r.i64(&ts))
    return truncated(what);
  if (!r.at_end()) return trailing(what, r.remaining());
  if (!pg_time_to_unix(ts, &m.commit_time)) return malformed(what, "commit timestamp out of range");
  *out = m;
  return ok_status();
}

Status decode_stream_abort(Reader& r, Message* out) {
  constexpr std::string_view what = "Stream Abort";
  StreamAbortMsg m;
  // Protocol 4 adds the abort's LSN and time (only with parallel apply, never requested here).
  if (!r.u32(&m.xid) || !r.u32(&m.subxid)) return truncated(what);
  if (!r.at_end()) return trailing(what, r.remaining());
  *out = m;
  return ok_status();
}

}  // namespace

Status decode_pgoutput(std::string_view payload, Message* out) {
  if (payload.empty()) return Error(Errc::data, "pgoutput: empty message");
  Reader r(payload.substr(1));
  const uint8_t type = static_cast<uint8_t>(payload.front());
  switch (type) {
    case 'B': return decode_begin(r, out);
    case 'C': return decode_commit(r, out);
    case 'O': return decode_origin(r, out);
    case 'R': return decode_relation(r, out);
    case 'Y': return decode_type(r, out);
    case 'I': return decode_insert(r, out);
    case 'U': return decode_update(r, out);
    case 'D': return decode_delete(r, out);
    case 'T': return decode_truncate(r, out);
    case 'M': return decode_message(r, out);
    case 'S': return decode_stream_start(r, out);
    case 'E':
      if (!r.at_end()) return trailing("Stream Stop", r.remaining());
      *out = StreamStopMsg{};
      return ok_status();
    case 'c': return decode_stream_commit(r, out);
    case 'A': return decode_stream_abort(r, out);
    case 'b':  // Begin Prepare (protocol version 3+)
    case 'P':  // Prepare
    case 'K':  // Commit Prepared
    case 'r':  // Rollback Prepared
    case 'p':  // Stream Prepare
      return Error(
          Errc::unsupported,
          "pgoutput: message type " + describe_byte(type) +
              " belongs to two-phase commit (protocol version 3), which sluice does not request");
    default: return Error(Errc::data, "pgoutput: unknown message type " + describe_byte(type));
  }
}

}  // namespace sluice::pg
