// MySQL's binary JSON (the JSON column's storage format in row images) → JSON text.
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "connectors/mysql/binlog.h"
#include "connectors/mysql/binlog_wire.h"

namespace sluice::mysql::binlog {

using namespace wire;  // NOLINT: the decoder's own field readers

namespace {

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
      if (!(b & 0x80)) {
        *len = size_t(v);
        *used = i + 1;
        return true;
      }
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
      case 0x00:
      case 0x01: return container(pos, type == 0x01, true);
      case 0x02:
      case 0x03: return container(pos, type == 0x03, false);
      case 0x04:
        if (!need(1)) return false;
        out += p[0] == 1 ? "true" : p[0] == 2 ? "false" : "null";
        return true;
      case 0x05:
        if (!need(2)) return false;
        out += std::to_string(int16_t(le16(p)));
        return true;
      case 0x06:
        if (!need(2)) return false;
        out += std::to_string(le16(p));
        return true;
      case 0x07:
        if (!need(4)) return false;
        out += std::to_string(int32_t(le32(p)));
        return true;
      case 0x08:
        if (!need(4)) return false;
        out += std::to_string(le32(p));
        return true;
      case 0x09:
        if (!need(8)) return false;
        out += std::to_string(int64_t(le64(p)));
        return true;
      case 0x0a:
        if (!need(8)) return false;
        out += std::to_string(le64(p));
        return true;
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
        append_json_string(
            out, fmt::format("base64:type{}:{}", p[0], to_hex(doc.substr(pos + 1 + used, len))));
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
      const bool inlined =
          t == 0x04 || t == 0x05 || t == 0x06 || (large && (t == 0x07 || t == 0x08));
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

}  // namespace

Result<std::string> mysql_json_to_text(std::string_view bin) {
  std::string out;
  if (bin.empty()) return std::string("null");
  JsonReader r{bin, out};
  if (!r.value(uint8_t(bin[0]), 1)) return Error(Errc::data, "malformed MySQL binary JSON value");
  return out;
}

}  // namespace sluice::mysql::binlog
