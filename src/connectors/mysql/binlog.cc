#include "connectors/mysql/binlog.h"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace sluice::mysql::binlog {

namespace {

// ── little helpers ──────────────────────────────────────────────────────────

inline uint32_t le16(const uint8_t* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8; }
inline uint32_t le24(const uint8_t* p) { return le16(p) | uint32_t(p[2]) << 16; }
inline uint32_t le32(const uint8_t* p) { return le24(p) | uint32_t(p[3]) << 24; }
inline uint64_t le48(const uint8_t* p) { return uint64_t(le32(p)) | uint64_t(le16(p + 4)) << 32; }
inline uint64_t le64(const uint8_t* p) { return uint64_t(le32(p)) | uint64_t(le32(p + 4)) << 32; }
inline uint64_t be(const uint8_t* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}
inline const uint8_t* u8(std::string_view s) { return reinterpret_cast<const uint8_t*>(s.data()); }

Error truncated(std::string_view what) {
  return Error(Errc::data, fmt::format("binlog {} event is truncated", what));
}

struct Crc32Table {
  std::array<std::array<uint32_t, 256>, 8> t{};
  Crc32Table() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
      for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
  }
};
const Crc32Table kCrc;

bool bit(std::string_view bitmap, size_t i) noexcept {
  return (uint8_t(bitmap[i / 8]) >> (i % 8)) & 1;
}

}  // namespace

uint32_t crc32(const void* data, size_t n, uint32_t crc) noexcept {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  crc = ~crc;
  const auto& t = kCrc.t;
  while (n >= 8) {  // slicing-by-8
    const uint32_t a = crc ^ le32(p);
    const uint32_t b = le32(p + 4);
    crc = t[7][a & 0xff] ^ t[6][(a >> 8) & 0xff] ^ t[5][(a >> 16) & 0xff] ^ t[4][a >> 24] ^ t[3][b & 0xff] ^
          t[2][(b >> 8) & 0xff] ^ t[1][(b >> 16) & 0xff] ^ t[0][b >> 24];
    p += 8;
    n -= 8;
  }
  while (n--) crc = t[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
  return ~crc;
}

bool read_lenenc(std::string_view& in, uint64_t* out) noexcept {
  if (in.empty()) return false;
  const uint8_t* p = u8(in);
  size_t n = 0;
  if (p[0] < 251) { *out = p[0]; n = 1; }
  else if (p[0] == 0xfc) { if (in.size() < 3) return false; *out = le16(p + 1); n = 3; }
  else if (p[0] == 0xfd) { if (in.size() < 4) return false; *out = le24(p + 1); n = 4; }
  else if (p[0] == 0xfe) { if (in.size() < 9) return false; *out = le64(p + 1); n = 9; }
  else return false;
  in.remove_prefix(n);
  return true;
}

std::string to_hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) {
    out += kDigits[uint8_t(c) >> 4];
    out += kDigits[uint8_t(c) & 15];
  }
  return out;
}

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
    else { out += char(hi * 16 + v); hi = -1; }
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

Result<Event> parse_event(std::string_view raw, bool crc32_checksum) {
  if (raw.size() < kHeaderSize) return Error(Errc::data, fmt::format("binlog event of {} bytes is shorter than its header", raw.size()));
  Event e;
  e.header = parse_header(u8(raw));
  if (e.header.size != raw.size())
    return Error(Errc::data, fmt::format("binlog event size {} does not match the {} bytes received", e.header.size, raw.size()));
  size_t end = raw.size();
  if (crc32_checksum) {
    if (end < kHeaderSize + 4) return truncated("checksummed");
    const uint32_t want = le32(u8(raw) + end - 4);
    const uint32_t got = crc32(raw.data(), end - 4);
    if (want != got)
      return Error(Errc::data, fmt::format("binlog event (type {}, ending at position {}) fails its CRC32 check "
                                           "(stored {:08x}, computed {:08x}): the stream is corrupt",
                                           e.header.type, e.header.next_pos, want, got));
    end -= 4;
  }
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
  if (major > 5 || (major == 5 && (minor > 6 || (minor == 6 && patch >= 1))) || fd.mariadb) has_alg = true;
  if (has_alg) {
    if (rest.size() < 5) return truncated("FORMAT_DESCRIPTION");
    const uint8_t alg = uint8_t(rest[rest.size() - 5]);
    fd.crc32 = alg == 1;
    if (fd.crc32) {
      const uint32_t want = le32(u8(raw) + raw.size() - 4);
      if (crc32(raw.data(), raw.size() - 4) != want)
        return Error(Errc::data, "binlog FORMAT_DESCRIPTION event fails its CRC32 check: the stream is corrupt");
    } else if (alg != 0 && alg != 0xff) {
      return Error(Errc::unsupported, fmt::format("binlog checksum algorithm {} is not supported (only NONE and CRC32)", alg));
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
  return fmt::format("{}-{}-{}-{}-{}:{}", hex.substr(0, 8), hex.substr(8, 4), hex.substr(12, 4), hex.substr(16, 4),
                     hex.substr(20), gno);
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
      case kTypeFloat: case kTypeDouble: case kTypeBlob: case kTypeJson: case kTypeGeometry:
      case kTypeTimestamp2: case kTypeDatetime2: case kTypeTime2: case kTypeTinyBlob: case kTypeMediumBlob:
      case kTypeLongBlob:
        need = 1; break;
      case kTypeVarchar: case kTypeVarString: case kTypeBit: case kTypeNewDecimal: case kTypeString:
      case kTypeEnum: case kTypeSet:
        need = 2; break;
      default: need = 0;
    }
    if (mi + need > meta.size()) return truncated("TABLE_MAP");
    if (need == 1) m.meta[i] = mp[mi];
    else if (need == 2) {
      switch (m.types[i]) {
        case kTypeVarchar: case kTypeVarString: m.meta[i] = uint16_t(le16(mp + mi)); break;
        default: m.meta[i] = uint16_t(mp[mi] << 8 | mp[mi + 1]);  // (real type or precision, length or scale)
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
    return t == kTypeTiny || t == kTypeShort || t == kTypeInt24 || t == kTypeLong || t == kTypeLonglong ||
           t == kTypeNewDecimal || t == kTypeFloat || t == kTypeDouble || t == kTypeDecimal;
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
  return (type >= kWriteRowsV1 && type <= kDeleteRowsV1) || (type >= kWriteRowsV2 && type <= kDeleteRowsV2);
}

Result<RowsEvent> parse_rows(const Event& e, const FormatDescription& fd) {
  RowsEvent r;
  const uint8_t t = e.header.type;
  const bool v2 = t >= kWriteRowsV2;
  const uint8_t base = v2 ? kWriteRowsV2 : kWriteRowsV1;
  r.kind = t == base ? RowsEvent::Kind::write : t == base + 1 ? RowsEvent::Kind::update : RowsEvent::Kind::remove;
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

// ── values ──────────────────────────────────────────────────────────────────

Result<std::string> decode_decimal(const uint8_t* p, size_t avail, int precision, int scale, size_t* size) {
  static constexpr int kDigBytes[10] = {0, 1, 1, 2, 2, 3, 3, 4, 4, 4};
  if (precision <= 0 || scale < 0 || scale > precision) return Error(Errc::data, "binlog DECIMAL has a bad precision/scale");
  const int intg = precision - scale;
  const int intg0 = intg / 9, intg0x = intg % 9, frac0 = scale / 9, frac0x = scale % 9;
  const size_t n = size_t(intg0) * 4 + size_t(kDigBytes[intg0x]) + size_t(frac0) * 4 +
                   size_t(kDigBytes[frac0x]);
  if (avail < n || n == 0) return Error(Errc::data, "binlog DECIMAL value is truncated");
  *size = n;
  uint8_t buf[64];
  if (n > sizeof(buf)) return Error(Errc::data, "binlog DECIMAL value is too long");
  std::memcpy(buf, p, n);
  const bool negative = !(buf[0] & 0x80);
  buf[0] ^= 0x80;
  if (negative)
    for (size_t i = 0; i < n; ++i) buf[i] = uint8_t(~buf[i]);
  std::string digits;  // integer part
  size_t off = 0;
  auto group = [&](int ndig, bool pad) {
    const int nbytes = ndig == 9 ? 4 : kDigBytes[ndig];
    const uint64_t v = be(buf + off, size_t(nbytes));
    off += size_t(nbytes);
    std::string s = std::to_string(v);
    if (pad && int(s.size()) < ndig) s.insert(0, size_t(ndig) - s.size(), '0');
    return s;
  };
  if (intg0x) digits += group(intg0x, true);
  for (int i = 0; i < intg0; ++i) digits += group(9, true);
  size_t nz = digits.find_first_not_of('0');
  digits = nz == std::string::npos ? "0" : digits.substr(nz);
  std::string frac;
  for (int i = 0; i < frac0; ++i) frac += group(9, true);
  if (frac0x) frac += group(frac0x, true);
  std::string out = negative ? "-" : "";
  out += digits;
  if (scale > 0) out += "." + frac;
  if (negative && out.find_first_not_of("-0.") == std::string::npos) out.erase(0, 1);  // -0 → 0
  return out;
}

namespace {

// Fractional seconds of DATETIME2/TIME2/TIMESTAMP2: (fsp + 1) / 2 bytes, big-endian.
int64_t frac_micros(const uint8_t* p, int fsp) {
  switch ((fsp + 1) / 2) {
    case 1: return int64_t(p[0]) * 10000;
    case 2: return int64_t(be(p, 2)) * 100;
    case 3: return int64_t(be(p, 3));
    default: return 0;
  }
}

void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (uint8_t(c) < 0x20) out += fmt::format("\\u{:04x}", uint8_t(c));
        else out += c;
    }
  }
  out += '"';
}

// MySQL binary JSON (sql-common/json_binary.cc format).
struct JsonReader {
  std::string_view doc;
  std::string& out;
  int depth = 0;

  bool var_len(size_t pos, size_t* len, size_t* used) {
    uint64_t v = 0;
    for (size_t i = 0; i < 5 && pos + i < doc.size(); ++i) {
      const uint8_t b = uint8_t(doc[pos + i]);
      v |= uint64_t(b & 0x7f) << (7 * i);
      if (!(b & 0x80)) { *len = size_t(v); *used = i + 1; return true; }
    }
    return false;
  }

  bool value(uint8_t type, size_t pos) {  // pos: start of the value's data
    if (++depth > 100) return false;
    bool ok = value_inner(type, pos);
    --depth;
    return ok;
  }

  bool value_inner(uint8_t type, size_t pos) {
    auto need = [&](size_t n) { return pos + n <= doc.size(); };
    const uint8_t* p = u8(doc) + pos;
    switch (type) {
      case 0x00: case 0x01: return container(pos, type == 0x01, true);
      case 0x02: case 0x03: return container(pos, type == 0x03, false);
      case 0x04:
        if (!need(1)) return false;
        out += p[0] == 1 ? "true" : p[0] == 2 ? "false" : "null";
        return true;
      case 0x05: if (!need(2)) return false; out += std::to_string(int16_t(le16(p))); return true;
      case 0x06: if (!need(2)) return false; out += std::to_string(le16(p)); return true;
      case 0x07: if (!need(4)) return false; out += std::to_string(int32_t(le32(p))); return true;
      case 0x08: if (!need(4)) return false; out += std::to_string(le32(p)); return true;
      case 0x09: if (!need(8)) return false; out += std::to_string(int64_t(le64(p))); return true;
      case 0x0a: if (!need(8)) return false; out += std::to_string(le64(p)); return true;
      case 0x0b: {
        if (!need(8)) return false;
        double d;
        uint64_t bits = le64(p);
        std::memcpy(&d, &bits, 8);
        out += fmt::format("{}", d);
        return true;
      }
      case 0x0c: {
        size_t len, used;
        if (!var_len(pos, &len, &used) || !need(used + len)) return false;
        append_json_string(out, doc.substr(pos + used, len));
        return true;
      }
      case 0x0f: {  // opaque: field type, length, bytes → string
        if (!need(1)) return false;
        size_t len, used;
        if (!var_len(pos + 1, &len, &used) || !need(1 + used + len)) return false;
        append_json_string(out, fmt::format("base64:type{}:{}", p[0], to_hex(doc.substr(pos + 1 + used, len))));
        return true;
      }
      default: return false;
    }
  }

  bool container(size_t pos, bool large, bool object) {
    const size_t w = large ? 4 : 2;
    if (pos + 2 * w > doc.size()) return false;
    const uint8_t* base = u8(doc) + pos;
    const size_t count = large ? le32(base) : le16(base);
    const size_t bytes = large ? le32(base + w) : le16(base + w);
    if (pos + bytes > doc.size()) return false;
    const size_t key_entry = object ? (large ? 6 : 4) : 0;
    const size_t value_entry = 1 + w;
    if (2 * w + count * (key_entry + value_entry) > bytes) return false;
    out += object ? '{' : '[';
    for (size_t i = 0; i < count; ++i) {
      if (i) out += ',';
      if (object) {
        const uint8_t* ke = base + 2 * w + i * key_entry;
        const size_t koff = large ? le32(ke) : le16(ke);
        const size_t klen = le16(ke + w);
        if (koff + klen > bytes) return false;
        append_json_string(out, doc.substr(pos + koff, klen));
        out += ':';
      }
      const uint8_t* ve = base + 2 * w + count * key_entry + i * value_entry;
      const uint8_t t = ve[0];
      const bool inlined = t == 0x04 || t == 0x05 || t == 0x06 || (large && (t == 0x07 || t == 0x08));
      if (inlined) {
        if (!value(t, size_t(ve + 1 - u8(doc)))) return false;
      } else {
        const size_t voff = large ? le32(ve + 1) : le16(ve + 1);
        if (voff >= bytes) return false;
        if (!value(t, pos + voff)) return false;
      }
    }
    out += object ? '}' : ']';
    return true;
  }
};

std::string latin1_to_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  for (char c : s) {
    const uint8_t b = uint8_t(c);
    if (b < 0x80) out += c;
    else { out += char(0xc0 | (b >> 6)); out += char(0x80 | (b & 0x3f)); }
  }
  return out;
}

}  // namespace

Result<std::string> mysql_json_to_text(std::string_view bin) {
  std::string out;
  if (bin.empty()) return std::string("null");
  JsonReader r{bin, out};
  if (!r.value(uint8_t(bin[0]), 1)) return Error(Errc::data, "malformed MySQL binary JSON value");
  return out;
}

Result<size_t> decode_row(const TableMap& map, const std::vector<ColumnInfo>& cols, std::string_view present,
                          std::string_view data, Arena& arena, Value* out) {
  const size_t n = map.types.size();
  if (present.size() * 8 < n) return Error(Errc::data, "binlog rows event: column bitmap shorter than the table map");
  size_t npresent = 0;
  for (size_t i = 0; i < n; ++i) npresent += bit(present, i);
  const size_t null_bytes = (npresent + 7) / 8;
  if (data.size() < null_bytes) return truncated("ROWS");
  const std::string_view nulls = data.substr(0, null_bytes);
  const uint8_t* base = u8(data);
  size_t off = null_bytes;
  size_t k = 0;  // index among present columns
  static const ColumnInfo kDefault;
  for (size_t i = 0; i < n; ++i) {
    if (!bit(present, i)) {
      out[i] = Value();
      continue;
    }
    const bool is_null = bit(nulls, k++);
    if (is_null) {
      out[i] = Value::null();
      continue;
    }
    const ColumnInfo& ci = i < cols.size() ? cols[i] : kDefault;
    const uint8_t* p = base + off;
    const size_t avail = data.size() - off;
    uint8_t type = map.types[i];
    uint16_t meta = map.meta[i];
    size_t len = 0;
    auto need = [&](size_t x) -> bool { return x <= avail; };
    auto text_value = [&](std::string_view s) -> Value {
      if (ci.json) return Value::json(arena.copy(s));
      switch (ci.text) {
        case ColumnInfo::Text::binary: return Value::bytes(arena.copy(s));
        case ColumnInfo::Text::latin1: return Value::string(arena.copy(latin1_to_utf8(s)));
        case ColumnInfo::Text::utf8: break;
      }
      return Value::string(arena.copy(s));
    };
    if (type == kTypeString && meta >= 256) {
      const uint8_t b0 = uint8_t(meta >> 8), b1 = uint8_t(meta & 0xff);
      if ((b0 & 0x30) != 0x30) {
        meta = uint16_t(b1 | (((b0 & 0x30) ^ 0x30) << 4));
        type = uint8_t(b0 | 0x30);
      } else {
        type = b0;
        meta = b1;
      }
    }
    switch (type) {
      case kTypeTiny:
        if (!need(1)) return truncated("ROWS");
        out[i] = ci.is_unsigned ? Value::uint64(p[0]) : Value::int64(int8_t(p[0]));
        len = 1;
        break;
      case kTypeShort:
        if (!need(2)) return truncated("ROWS");
        out[i] = ci.is_unsigned ? Value::uint64(le16(p)) : Value::int64(int16_t(le16(p)));
        len = 2;
        break;
      case kTypeInt24: {
        if (!need(3)) return truncated("ROWS");
        uint32_t v = le24(p);
        out[i] = ci.is_unsigned ? Value::uint64(v) : Value::int64(int32_t(v << 8) >> 8);
        len = 3;
        break;
      }
      case kTypeLong:
        if (!need(4)) return truncated("ROWS");
        out[i] = ci.is_unsigned ? Value::uint64(le32(p)) : Value::int64(int32_t(le32(p)));
        len = 4;
        break;
      case kTypeLonglong:
        if (!need(8)) return truncated("ROWS");
        out[i] = ci.is_unsigned ? Value::uint64(le64(p)) : Value::int64(int64_t(le64(p)));
        len = 8;
        break;
      case kTypeFloat: {
        if (!need(4)) return truncated("ROWS");
        float f;
        uint32_t b = le32(p);
        std::memcpy(&f, &b, 4);
        out[i] = Value::float64(double(f));
        len = 4;
        break;
      }
      case kTypeDouble: {
        if (!need(8)) return truncated("ROWS");
        double d;
        uint64_t b = le64(p);
        std::memcpy(&d, &b, 8);
        out[i] = Value::float64(d);
        len = 8;
        break;
      }
      case kTypeNewDecimal: {
        auto s = decode_decimal(p, avail, meta >> 8, meta & 0xff, &len);
        if (!s.ok()) return std::move(s).error();
        out[i] = Value::decimal(arena.copy(s.value()));
        break;
      }
      case kTypeYear:
        if (!need(1)) return truncated("ROWS");
        out[i] = Value::int64(p[0] ? 1900 + p[0] : 0);
        len = 1;
        break;
      case kTypeDate: {
        if (!need(3)) return truncated("ROWS");
        const uint32_t v = le24(p);
        const unsigned d = v & 31, m = (v >> 5) & 15;
        const int64_t y = v >> 9;
        out[i] = (d == 0 || m == 0) ? Value::null() : Value::date(days_from_civil(y, m, d));  // zero dates → null
        len = 3;
        break;
      }
      case kTypeTime: {  // old format: HHMMSS as a signed 3-byte integer
        if (!need(3)) return truncated("ROWS");
        int32_t v = int32_t(le24(p) << 8) >> 8;
        const int64_t sign = v < 0 ? -1 : 1;
        v = std::abs(v);
        out[i] = Value::time(sign * ((v / 10000) * 3600LL + (v / 100 % 100) * 60 + v % 100) * 1000000);
        len = 3;
        break;
      }
      case kTypeTime2: {
        const int fsp = meta;
        len = 3 + size_t((fsp + 1) / 2);
        if (!need(len)) return truncated("ROWS");
        int64_t packed;
        int64_t intpart = int64_t(be(p, 3)) - 0x800000;
        switch ((fsp + 1) / 2) {
          case 0: packed = intpart * (1LL << 24); break;
          case 1: {
            int64_t frac = p[3];  // unsigned; negative values store it reversed
            if (intpart < 0 && frac) { ++intpart; frac -= 0x100; }
            packed = intpart * (1LL << 24) + frac * 10000;
            break;
          }
          case 2: {
            int64_t frac = int64_t(be(p + 3, 2));
            if (intpart < 0 && frac) { ++intpart; frac -= 0x10000; }
            packed = intpart * (1LL << 24) + frac * 100;
            break;
          }
          default: packed = int64_t(be(p, 6)) - 0x800000000000LL; break;
        }
        const int64_t sign = packed < 0 ? -1 : 1;
        const uint64_t a = uint64_t(packed < 0 ? -packed : packed);
        const uint64_t hms = a >> 24, frac = a & 0xffffff;
        const int64_t secs = int64_t(((hms >> 12) & 0x3ff) * 3600 + ((hms >> 6) & 63) * 60 + (hms & 63));
        out[i] = Value::time(sign * (secs * 1000000 + int64_t(frac)));
        break;
      }
      case kTypeDatetime: {  // old format: YYYYMMDDhhmmss as an 8-byte integer
        if (!need(8)) return truncated("ROWS");
        uint64_t v = le64(p);
        const uint64_t dpart = v / 1000000, tpart = v % 1000000;
        const unsigned d = unsigned(dpart % 100), m = unsigned(dpart / 100 % 100);
        // A server writes years 0-9999; a larger one is a corrupt event (and overflows the value).
        if (dpart / 10000 > 9999) return Error(Errc::data, "binlog DATETIME is out of range");
        if (d == 0 || m == 0) out[i] = Value::null();
        else
          out[i] = Value::timestamp(int64_t(days_from_civil(int64_t(dpart / 10000), m, d)) * 86400000000LL +
                                    int64_t((tpart / 10000) * 3600 + (tpart / 100 % 100) * 60 + tpart % 100) * 1000000);
        len = 8;
        break;
      }
      case kTypeDatetime2: {
        const int fsp = meta;
        len = 5 + size_t((fsp + 1) / 2);
        if (!need(len)) return truncated("ROWS");
        const int64_t intpart = int64_t(be(p, 5)) - 0x8000000000LL;
        // DATETIME is never negative; a negative one is a corrupt event (its month would be
        // negative and the value overflow).
        if (intpart < 0) return Error(Errc::data, "binlog DATETIME2 is out of range");
        const int64_t ymd = intpart >> 17, ym = ymd >> 5, hms = intpart & 0x1ffff;
        const unsigned d = unsigned(ymd & 31), m = unsigned(ym % 13);
        const int64_t y = ym / 13;
        if (d == 0 || m == 0) {
          out[i] = Value::null();
        } else {
          const int64_t secs = (hms >> 12) * 3600 + ((hms >> 6) & 63) * 60 + (hms & 63);
          out[i] = Value::timestamp(int64_t(days_from_civil(y, m, d)) * 86400000000LL + secs * 1000000 +
                                    frac_micros(p + 5, fsp));
        }
        break;
      }
      case kTypeTimestamp:
        if (!need(4)) return truncated("ROWS");
        out[i] = Value::timestamptz(int64_t(le32(p)) * 1000000);
        len = 4;
        break;
      case kTypeTimestamp2: {
        const int fsp = meta;
        len = 4 + size_t((fsp + 1) / 2);
        if (!need(len)) return truncated("ROWS");
        out[i] = Value::timestamptz(int64_t(be(p, 4)) * 1000000 + frac_micros(p + 4, fsp));
        break;
      }
      case kTypeVarchar:
      case kTypeVarString: {
        const size_t lb = meta < 256 ? 1 : 2;
        if (!need(lb)) return truncated("ROWS");
        const size_t sl = lb == 1 ? p[0] : le16(p);
        if (!need(lb + sl)) return truncated("ROWS");
        out[i] = text_value(std::string_view(reinterpret_cast<const char*>(p + lb), sl));
        len = lb + sl;
        break;
      }
      case kTypeString: {
        const size_t lb = meta < 256 ? 1 : 2;
        if (!need(lb)) return truncated("ROWS");
        const size_t sl = lb == 1 ? p[0] : le16(p);
        if (!need(lb + sl)) return truncated("ROWS");
        std::string_view s(reinterpret_cast<const char*>(p + lb), sl);
        if (ci.text == ColumnInfo::Text::binary && meta > sl) {
          // BINARY(n) is right-padded with zero bytes the binlog strips: restore them.
          std::string padded(s);
          padded.resize(meta, '\0');
          out[i] = Value::bytes(arena.copy(padded));
        } else {
          out[i] = text_value(s);
        }
        len = lb + sl;
        break;
      }
      case kTypeEnum: {
        const size_t sz = meta & 0xff;
        if (sz != 1 && sz != 2) return Error(Errc::data, "binlog ENUM has a bad size");
        if (!need(sz)) return truncated("ROWS");
        const uint32_t idx = sz == 1 ? p[0] : le16(p);
        // The label is copied: it belongs to the caller's ColumnInfo, which need not outlive the
        // batch (the decoded row must not point into it).
        if (idx == 0) out[i] = Value::string("");
        else if (idx <= ci.labels.size()) out[i] = Value::string(arena.copy(ci.labels[idx - 1]));
        else out[i] = Value::string(arena.copy(std::to_string(idx)));
        len = sz;
        break;
      }
      case kTypeSet: {
        const size_t sz = meta & 0xff;
        if (sz == 0 || sz > 8 || !need(sz)) return truncated("ROWS");
        uint64_t bits = 0;
        for (size_t b = 0; b < sz; ++b) bits |= uint64_t(p[b]) << (8 * b);
        std::string s;
        for (size_t b = 0; b < 64; ++b)
          if (bits >> b & 1) {
            if (!s.empty()) s += ',';
            s += b < ci.labels.size() ? ci.labels[b] : std::to_string(b + 1);
          }
        out[i] = Value::string(arena.copy(s));
        len = sz;
        break;
      }
      case kTypeBit: {
        const size_t nbytes = (meta & 0xff) + ((meta >> 8) ? 1 : 0);
        if (!need(nbytes) || nbytes > 8) return truncated("ROWS");
        out[i] = Value::uint64(be(p, nbytes));
        len = nbytes;
        break;
      }
      case kTypeBlob:
      case kTypeTinyBlob:
      case kTypeMediumBlob:
      case kTypeLongBlob:
      case kTypeGeometry:
      case kTypeJson: {
        const size_t lb = meta;
        if (lb < 1 || lb > 4 || !need(lb)) return truncated("ROWS");
        const size_t sl = size_t(lb == 1 ? p[0] : lb == 2 ? le16(p) : lb == 3 ? le24(p) : le32(p));
        if (!need(lb + sl)) return truncated("ROWS");
        std::string_view s(reinterpret_cast<const char*>(p + lb), sl);
        if (type == kTypeJson) {
          auto j = mysql_json_to_text(s);
          if (!j.ok()) return std::move(j).error();
          out[i] = Value::json(arena.copy(j.value()));
        } else if (type == kTypeGeometry) {
          out[i] = Value::bytes(arena.copy(s));
        } else {
          out[i] = text_value(s);
        }
        len = lb + sl;
        break;
      }
      default:
        return Error(Errc::unsupported, fmt::format("binlog column type {} of {}.{} column {} is not supported", type,
                                                    map.database, map.table, i + 1));
    }
    off += len;
  }
  return off;
}

}  // namespace sluice::mysql::binlog
