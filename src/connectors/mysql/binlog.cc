// The binlog decoder's event layer: checksums, event headers and the bodies of the events the
// source uses (FORMAT_DESCRIPTION, ROTATE, QUERY, GTIDs, TABLE_MAP, rows-event headers). Row
// images: binlog_rows.cc; binary JSON: binlog_json.cc.
#include "connectors/mysql/binlog.h"

#include <fmt/format.h>
#include <libdeflate.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "connectors/common/log_position.h"
#include "connectors/mysql/binlog_wire.h"

namespace sluice::mysql::binlog {

using namespace wire;  // NOLINT: the decoder's own field readers

namespace {}  // namespace

uint32_t crc32(const void* data, size_t n, uint32_t crc) noexcept {
  // libdeflate's: the same CRC-32 as the server's, with carry-less multiplication where the CPU
  // has it.
  return libdeflate_crc32(crc, data, n);
}

bool read_lenenc(std::string_view& in, uint64_t* out) noexcept {
  if (in.empty()) return false;
  const uint8_t* p = u8(in);
  size_t n = 0;
  if (p[0] < 251) {
    *out = p[0];
    n = 1;
  } else if (p[0] == 0xfc) {
    if (in.size() < 3) return false;
    *out = le16(p + 1);
    n = 3;
  } else if (p[0] == 0xfd) {
    if (in.size() < 4) return false;
    *out = le24(p + 1);
    n = 4;
  } else if (p[0] == 0xfe) {
    if (in.size() < 9) return false;
    *out = le64(p + 1);
    n = 9;
  } else return false;
  in.remove_prefix(n);
  return true;
}

std::string to_hex(std::string_view bytes) { return hex_encode(bytes); }

std::string from_hex(std::string_view hex) {
  std::string out;
  int hi = -1;
  for (char c : hex) {
    int v;
    if (c >= '0' && c <= '9') v = c - '0';
    else if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') v = c - 'A' + 10;
    else if (c == ' ' || c == '\n' || c == '\t' || c == '\r') continue;
    else return {};
    if (hi < 0) hi = v;
    else {
      out += char(hi * 16 + v);
      hi = -1;
    }
  }
  return hi < 0 ? out : std::string();
}

// ── events ──────────────────────────────────────────────────────────────────

static Header parse_header(const uint8_t* p) {
  Header h;
  h.timestamp = le32(p);
  h.type = p[4];
  h.server_id = le32(p + 5);
  h.size = le32(p + 9);
  h.next_pos = le32(p + 13);
  h.flags = uint16_t(le16(p + 17));
  return h;
}

bool crc32_matches(std::string_view raw) noexcept {
  return raw.size() >= kHeaderSize + 4 &&
         le32(u8(raw) + raw.size() - 4) == crc32(raw.data(), raw.size() - 4);
}

bool StreamChecksums::verified(std::string_view raw) {
  if (raw.size() >= kHeaderSize && uint8_t(raw[4]) == kFormatDescription) {
    if (auto fd = parse_format_description(raw); fd.ok()) crc32_ = fd->crc32;
    return false;
  }
  return crc32_ && crc32_matches(raw);
}

Result<Event> parse_event(std::string_view raw, Checksum checksum) {
  if (raw.size() < kHeaderSize)
    return Error(Errc::data,
                 fmt::format("binlog event of {} bytes is shorter than its header", raw.size()));
  Event e;
  e.header = parse_header(u8(raw));
  if (e.header.size != raw.size())
    return Error(Errc::data,
                 fmt::format("binlog event size {} does not match the {} bytes received",
                             e.header.size, raw.size()));
  size_t end = raw.size();
  if (checksum != Checksum::none && end < kHeaderSize + 4) return truncated("checksummed");
  if (checksum == Checksum::verify) {
    const uint32_t want = le32(u8(raw) + end - 4);
    const uint32_t got = crc32(raw.data(), end - 4);
    if (want != got)
      return Error(
          Errc::data,
          fmt::format("binlog event (type {}, ending at position {}) fails its CRC32 check "
                      "(stored {:08x}, computed {:08x}): the stream is corrupt",
                      e.header.type, e.header.next_pos, want, got));
  }
  if (checksum != Checksum::none) end -= 4;
  e.body = raw.substr(kHeaderSize, end - kHeaderSize);
  return e;
}

Result<FormatDescription> parse_format_description(std::string_view raw) {
  auto ev = parse_event(raw, false);
  if (!ev.ok()) return std::move(ev).error();
  std::string_view b = ev->body;
  if (b.size() < 57) return truncated("FORMAT_DESCRIPTION");
  FormatDescription fd;
  const uint8_t* p = u8(b);
  fd.binlog_version = uint16_t(le16(p));
  std::string_view ver(b.data() + 2, 50);
  fd.server_version = std::string(ver.substr(0, ver.find('\0')));
  fd.mariadb = fd.server_version.find("MariaDB") != std::string::npos;
  std::string_view rest = b.substr(57);
  // Servers since MySQL 5.6.1 / MariaDB 5.3 end the event with the checksum algorithm (1 byte) and
  // a CRC32 (4 bytes, present whatever the algorithm).
  bool has_alg = false;
  int major = 0, minor = 0, patch = 0;
  std::sscanf(fd.server_version.c_str(), "%d.%d.%d", &major, &minor, &patch);
  if (major > 5 || (major == 5 && (minor > 6 || (minor == 6 && patch >= 1))) || fd.mariadb)
    has_alg = true;
  if (has_alg) {
    if (rest.size() < 5) return truncated("FORMAT_DESCRIPTION");
    const uint8_t alg = uint8_t(rest[rest.size() - 5]);
    fd.crc32 = alg == 1;
    if (fd.crc32) {
      const uint32_t want = le32(u8(raw) + raw.size() - 4);
      if (crc32(raw.data(), raw.size() - 4) != want)
        return Error(
            Errc::data,
            "binlog FORMAT_DESCRIPTION event fails its CRC32 check: the stream is corrupt");
    } else if (alg != 0 && alg != 0xff) {
      return Error(
          Errc::unsupported,
          fmt::format("binlog checksum algorithm {} is not supported (only NONE and CRC32)", alg));
    }
    rest.remove_suffix(5);
  }
  fd.post_header_len.assign(rest.begin(), rest.end());
  return fd;
}

Result<Rotate> parse_rotate(const Event& e) {
  if (e.body.size() < 8) return truncated("ROTATE");
  Rotate r;
  r.position = le64(u8(e.body));
  r.file = std::string(e.body.substr(8));
  return r;
}

Result<Query> parse_query(const Event& e) {
  const std::string_view b = e.body;
  if (b.size() < 13) return truncated("QUERY");
  const uint8_t* p = u8(b);
  const size_t db_len = p[8];
  const size_t status_len = le16(p + 11);
  const size_t off = 13 + status_len;
  if (b.size() < off + db_len + 1) return truncated("QUERY");
  Query q;
  q.database = b.substr(off, db_len);
  q.sql = b.substr(off + db_len + 1);
  return q;
}

std::string MariaGtid::to_string() const { return fmt::format("{}-{}-{}", domain, server_id, seq); }

Result<MariaGtid> parse_maria_gtid(const Event& e) {
  if (e.body.size() < 13) return truncated("GTID");
  MariaGtid g;
  const uint8_t* p = u8(e.body);
  g.seq = le64(p);
  g.domain = le32(p + 8);
  g.server_id = e.header.server_id;
  g.standalone = p[12] & 1;
  return g;
}

Result<std::vector<MariaGtid>> parse_maria_gtid_list(const Event& e) {
  if (e.body.size() < 4) return truncated("GTID_LIST");
  const uint8_t* p = u8(e.body);
  const uint32_t n = le32(p) & 0x0fffffff;
  if (e.body.size() < 4 + size_t(n) * 16) return truncated("GTID_LIST");
  std::vector<MariaGtid> out(n);
  for (uint32_t i = 0; i < n; ++i) {
    const uint8_t* q = p + 4 + i * 16;
    out[i].domain = le32(q);
    out[i].server_id = le32(q + 4);
    out[i].seq = le64(q + 8);
  }
  return out;
}

std::string MysqlGtid::to_string() const {
  std::string hex = to_hex(std::string_view(reinterpret_cast<const char*>(sid), 16));
  return fmt::format("{}-{}-{}-{}-{}:{}", hex.substr(0, 8), hex.substr(8, 4), hex.substr(12, 4),
                     hex.substr(16, 4), hex.substr(20), gno);
}

Result<MysqlGtid> parse_mysql_gtid(const Event& e) {
  if (e.body.size() < 25) return truncated("GTID");
  MysqlGtid g;
  std::memcpy(g.sid, e.body.data() + 1, 16);
  g.gno = int64_t(le64(u8(e.body) + 17));
  return g;
}

Result<TableMap> parse_table_map(const Event& e, const FormatDescription& fd) {
  std::string_view b = e.body;
  const size_t ph = fd.post_header(kTableMap, 8);
  if (b.size() < ph) return truncated("TABLE_MAP");
  TableMap m;
  m.table_id = ph == 6 ? le32(u8(b)) : le48(u8(b));
  b.remove_prefix(ph);
  auto name = [&](std::string* out) {
    if (b.empty()) return false;
    const size_t n = uint8_t(b[0]);
    if (b.size() < n + 2) return false;
    *out = std::string(b.substr(1, n));
    b.remove_prefix(n + 2);  // length, name, NUL
    return true;
  };
  if (!name(&m.database) || !name(&m.table)) return truncated("TABLE_MAP");
  uint64_t ncols = 0;
  if (!read_lenenc(b, &ncols) || b.size() < ncols) return truncated("TABLE_MAP");
  m.types.assign(b.begin(), b.begin() + ncols);
  b.remove_prefix(ncols);
  uint64_t meta_len = 0;
  if (!read_lenenc(b, &meta_len) || b.size() < meta_len) return truncated("TABLE_MAP");
  std::string_view meta = b.substr(0, meta_len);
  b.remove_prefix(meta_len);
  m.meta.assign(ncols, 0);
  const uint8_t* mp = u8(meta);
  size_t mi = 0;
  for (size_t i = 0; i < ncols; ++i) {
    size_t need = 0;
    switch (m.types[i]) {
      case kTypeFloat:
      case kTypeDouble:
      case kTypeBlob:
      case kTypeJson:
      case kTypeGeometry:
      case kTypeTimestamp2:
      case kTypeDatetime2:
      case kTypeTime2:
      case kTypeTinyBlob:
      case kTypeMediumBlob:
      case kTypeLongBlob: need = 1; break;
      case kTypeVarchar:
      case kTypeVarString:
      case kTypeBit:
      case kTypeNewDecimal:
      case kTypeString:
      case kTypeEnum:
      case kTypeSet: need = 2; break;
      default: need = 0;
    }
    if (mi + need > meta.size()) return truncated("TABLE_MAP");
    if (need == 1) m.meta[i] = mp[mi];
    else if (need == 2) {
      switch (m.types[i]) {
        case kTypeVarchar:
        case kTypeVarString: m.meta[i] = uint16_t(le16(mp + mi)); break;
        default:
          m.meta[i] =
              uint16_t(mp[mi] << 8 | mp[mi + 1]);  // (real type or precision, length or scale)
      }
    }
    mi += need;
  }
  const size_t nb = (ncols + 7) / 8;
  m.nullable.assign(ncols, 1);
  if (b.size() >= nb) {
    for (size_t i = 0; i < ncols; ++i) m.nullable[i] = bit(b, i);
    b.remove_prefix(nb);
  } else {
    b = {};
  }
  // Optional metadata: (type, length, value) fields.
  auto numeric = [](uint8_t t) {
    return t == kTypeTiny || t == kTypeShort || t == kTypeInt24 || t == kTypeLong ||
           t == kTypeLonglong || t == kTypeNewDecimal || t == kTypeFloat || t == kTypeDouble ||
           t == kTypeDecimal;
  };
  while (b.size() >= 2) {
    const uint8_t type = uint8_t(b[0]);
    b.remove_prefix(1);
    uint64_t len = 0;
    if (!read_lenenc(b, &len) || b.size() < len) return truncated("TABLE_MAP optional metadata");
    std::string_view v = b.substr(0, len);
    b.remove_prefix(len);
    if (type == 1) {  // SIGNEDNESS: one bit per numeric column, most significant bit first
      m.is_unsigned.assign(ncols, 0);
      size_t k = 0;
      for (size_t i = 0; i < ncols; ++i) {
        if (!numeric(m.types[i])) continue;
        if (k / 8 < v.size()) m.is_unsigned[i] = (uint8_t(v[k / 8]) >> (7 - k % 8)) & 1;
        ++k;
      }
    } else if (type == 4) {  // COLUMN_NAME: a length-prefixed name per column
      std::vector<std::string> names;
      while (!v.empty()) {
        uint64_t n = 0;
        if (!read_lenenc(v, &n) || v.size() < n) return truncated("TABLE_MAP column names");
        names.emplace_back(v.substr(0, n));
        v.remove_prefix(n);
      }
      if (names.size() == ncols) m.column_names = std::move(names);
    }
  }
  return m;
}

bool is_rows_event(uint8_t type) noexcept {
  return (type >= kWriteRowsV1 && type <= kDeleteRowsV1) ||
         (type >= kWriteRowsV2 && type <= kDeleteRowsV2);
}

Result<RowsEvent> parse_rows(const Event& e, const FormatDescription& fd) {
  RowsEvent r;
  const uint8_t t = e.header.type;
  const bool v2 = t >= kWriteRowsV2;
  const uint8_t base = v2 ? kWriteRowsV2 : kWriteRowsV1;
  r.kind = t == base       ? RowsEvent::Kind::write
           : t == base + 1 ? RowsEvent::Kind::update
                           : RowsEvent::Kind::remove;
  std::string_view b = e.body;
  const size_t ph = fd.post_header(t, v2 ? 10 : 8);
  if (b.size() < ph || ph < 8) return truncated("ROWS");
  r.table_id = ph == 6 ? le32(u8(b)) : le48(u8(b));
  r.flags = uint16_t(le16(u8(b) + (ph == 6 ? 4 : 6)));
  b.remove_prefix(ph);
  if (v2) {
    // extra data: its length (2 bytes) counts itself.
    const size_t extra = ph >= 10 ? le16(u8(e.body) + 8) : 0;
    if (ph < 10) {
      if (b.size() < 2) return truncated("ROWS");
      const size_t x = le16(u8(b));
      if (x < 2 || b.size() < x) return truncated("ROWS");
      b.remove_prefix(x);
    } else if (extra > 2) {
      if (b.size() < extra - 2) return truncated("ROWS");
      b.remove_prefix(extra - 2);
    }
  }
  uint64_t ncols = 0;
  if (!read_lenenc(b, &ncols)) return truncated("ROWS");
  r.columns = uint32_t(ncols);
  const size_t nb = (ncols + 7) / 8;
  if (b.size() < nb) return truncated("ROWS");
  r.present = b.substr(0, nb);
  b.remove_prefix(nb);
  if (r.kind == RowsEvent::Kind::update) {
    if (b.size() < nb) return truncated("ROWS");
    r.present_after = b.substr(0, nb);
    b.remove_prefix(nb);
  }
  r.rows = b;
  return r;
}

}  // namespace sluice::mysql::binlog
