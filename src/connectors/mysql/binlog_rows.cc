// Row images of rows events → Values, column by column per the TABLE_MAP's types and metadata.
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "connectors/mysql/binlog.h"
#include "connectors/mysql/binlog_wire.h"
#include "sluice/temporal.h"

namespace sluice::mysql::binlog {

using namespace wire;  // NOLINT: the decoder's own field readers

// ── values ──────────────────────────────────────────────────────────────────

Result<std::string> decode_decimal(const uint8_t* p, size_t avail, int precision, int scale,
                                   size_t* size) {
  static constexpr int kDigBytes[10] = {0, 1, 1, 2, 2, 3, 3, 4, 4, 4};
  if (precision <= 0 || scale < 0 || scale > precision)
    return Error(Errc::data, "binlog DECIMAL has a bad precision/scale");
  const int intg = precision - scale;
  const int intg0 = intg / 9, intg0x = intg % 9, frac0 = scale / 9, frac0x = scale % 9;
  const size_t n =
      size_t(intg0) * 4 + size_t(kDigBytes[intg0x]) + size_t(frac0) * 4 + size_t(kDigBytes[frac0x]);
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

std::string latin1_to_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  for (char c : s) {
    const uint8_t b = uint8_t(c);
    if (b < 0x80) out += c;
    else {
      out += char(0xc0 | (b >> 6));
      out += char(0x80 | (b & 0x3f));
    }
  }
  return out;
}

}  // namespace

namespace {
const ColumnInfo kDefaultColumn;  // a column information_schema did not describe
}  // namespace

Status make_row_plan(const TableMap& map, const std::vector<ColumnInfo>& cols,
                     std::string_view present, RowPlan& plan) {
  const size_t n = map.types.size();
  if (present.size() * 8 < n)
    return Error(Errc::data, "binlog rows event: column bitmap shorter than the table map");
  plan.steps.clear();
  plan.absent.clear();
  for (size_t i = 0; i < n; ++i) {
    if (!bit(present, i)) {
      plan.absent.push_back(uint32_t(i));
      continue;
    }
    RowPlan::Step s;
    s.info = i < cols.size() ? &cols[i] : &kDefaultColumn;
    s.column = uint32_t(i);
    s.type = map.types[i];
    s.meta = map.meta[i];
    if (s.type == kTypeString && s.meta >= 256) {  // the real type (ENUM, SET, STRING) and length
      const uint8_t b0 = uint8_t(s.meta >> 8), b1 = uint8_t(s.meta & 0xff);
      if ((b0 & 0x30) != 0x30) {
        s.meta = uint16_t(b1 | (((b0 & 0x30) ^ 0x30) << 4));
        s.type = uint8_t(b0 | 0x30);
      } else {
        s.type = b0;
        s.meta = b1;
      }
    }
    s.kind = RowPlan::dense(s.type);
    plan.steps.push_back(s);
  }
  return ok_status();
}

Result<size_t> decode_row(const TableMap& map, const std::vector<ColumnInfo>& cols,
                          std::string_view present, std::string_view data, Arena& arena, Value* out,
                          ZeroDates* zero_dates) {
  RowPlan plan;
  SLUICE_TRY(make_row_plan(map, cols, present, plan));
  return decode_row(plan, map, data, arena, out, zero_dates);
}

namespace {

// decode_row's output: column i's value, in a Value array or in a Field array.
struct FieldValues {
  Field* f;
  Value& operator[](size_t i) const { return f[i].value; }
};

template <typename Out>
Result<size_t> decode_row_into(const RowPlan& plan, const TableMap& map, std::string_view data,
                               Arena& arena, Out out, ZeroDates* zero_dates) {
  if (zero_dates) zero_dates->first = ZeroDates::kNone;
  // A zero date: its text when the caller asks (and the column noted), else null.
  auto zero_date = [&](size_t i, std::string text) {
    if (!zero_dates) return Value::null();
    if (zero_dates->first == ZeroDates::kNone) zero_dates->first = i;
    return Value::string(arena.copy(text));
  };
  for (const uint32_t i : plan.absent) out[i] = Value();
  // Locals, not the vector: a store through `out` could alias it, and it would be read again.
  const RowPlan::Step* const steps = plan.steps.data();
  const size_t nsteps = plan.steps.size();
  const size_t null_bytes = (nsteps + 7) / 8;
  if (data.size() < null_bytes) return truncated("ROWS");
  const std::string_view nulls = data.substr(0, null_bytes);
  const uint8_t* base = u8(data);
  size_t off = null_bytes;
  for (size_t k = 0; k < nsteps; ++k) {
    const RowPlan::Step& step = steps[k];
    const size_t i = step.column;
    if (bit(nulls, k)) {
      out[i] = Value::null();
      continue;
    }
    const ColumnInfo& ci = *step.info;
    const uint8_t* p = base + off;
    const size_t avail = data.size() - off;
    const uint8_t type = step.type;
    const uint16_t meta = step.meta;
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
    // Short UTF-8 text (most VARCHAR and CHAR values) is copied without a call to memcpy, reading
    // on into the image's bytes after it (`s` lies in the image).
    auto short_text_value = [&](std::string_view s) -> Value {
      if (ci.text == ColumnInfo::Text::utf8 && !ci.json)
        return Value::string(arena.copy_padded(s, size_t(base + data.size() - u8(s))));
      return text_value(s);
    };
    switch (step.kind) {
      case RowPlan::dense(kTypeTiny):
        if (!need(1)) return truncated("ROWS");
        out[i] = ci.is_unsigned ? Value::uint64(p[0]) : Value::int64(int8_t(p[0]));
        len = 1;
        break;
      case RowPlan::dense(kTypeShort):
        if (!need(2)) return truncated("ROWS");
        out[i] = ci.is_unsigned ? Value::uint64(le16(p)) : Value::int64(int16_t(le16(p)));
        len = 2;
        break;
      case RowPlan::dense(kTypeInt24): {
        if (!need(3)) return truncated("ROWS");
        uint32_t v = le24(p);
        out[i] = ci.is_unsigned ? Value::uint64(v) : Value::int64(int32_t(v << 8) >> 8);
        len = 3;
        break;
      }
      case RowPlan::dense(kTypeLong):
        if (!need(4)) return truncated("ROWS");
        out[i] = ci.is_unsigned ? Value::uint64(le32(p)) : Value::int64(int32_t(le32(p)));
        len = 4;
        break;
      case RowPlan::dense(kTypeLonglong):
        if (!need(8)) return truncated("ROWS");
        out[i] = ci.is_unsigned ? Value::uint64(le64(p)) : Value::int64(int64_t(le64(p)));
        len = 8;
        break;
      case RowPlan::dense(kTypeFloat): {
        if (!need(4)) return truncated("ROWS");
        float f;
        uint32_t b = le32(p);
        std::memcpy(&f, &b, 4);
        out[i] = Value::float64(double(f));
        len = 4;
        break;
      }
      case RowPlan::dense(kTypeDouble): {
        if (!need(8)) return truncated("ROWS");
        double d;
        uint64_t b = le64(p);
        std::memcpy(&d, &b, 8);
        out[i] = Value::float64(d);
        len = 8;
        break;
      }
      case RowPlan::dense(kTypeNewDecimal): {
        auto s = decode_decimal(p, avail, meta >> 8, meta & 0xff, &len);
        if (!s.ok()) return std::move(s).error();
        out[i] = Value::decimal(arena.copy(s.value()));
        break;
      }
      case RowPlan::dense(kTypeYear):
        if (!need(1)) return truncated("ROWS");
        out[i] = Value::int64(p[0] ? 1900 + p[0] : 0);
        len = 1;
        break;
      case RowPlan::dense(kTypeDate): {
        if (!need(3)) return truncated("ROWS");
        const uint32_t v = le24(p);
        const unsigned d = v & 31, m = (v >> 5) & 15;
        const int64_t y = v >> 9;
        out[i] = (d == 0 || m == 0) ? zero_date(i, fmt::format("{:04}-{:02}-{:02}", y, m, d))
                                    : Value::date(days_from_civil(y, m, d));
        len = 3;
        break;
      }
      case RowPlan::dense(kTypeTime): {  // old format: HHMMSS as a signed 3-byte integer
        if (!need(3)) return truncated("ROWS");
        int32_t v = int32_t(le24(p) << 8) >> 8;
        const int64_t sign = v < 0 ? -1 : 1;
        v = std::abs(v);
        out[i] =
            Value::time(sign * ((v / 10000) * 3600LL + (v / 100 % 100) * 60 + v % 100) * 1000000);
        len = 3;
        break;
      }
      case RowPlan::dense(kTypeTime2): {
        const int fsp = meta;
        len = 3 + size_t((fsp + 1) / 2);
        if (!need(len)) return truncated("ROWS");
        int64_t packed;
        int64_t intpart = int64_t(be(p, 3)) - 0x800000;
        switch ((fsp + 1) / 2) {
          case 0: packed = intpart * (1LL << 24); break;
          case 1: {
            int64_t frac = p[3];  // unsigned; negative values store it reversed
            if (intpart < 0 && frac) {
              ++intpart;
              frac -= 0x100;
            }
            packed = intpart * (1LL << 24) + frac * 10000;
            break;
          }
          case 2: {
            int64_t frac = int64_t(be(p + 3, 2));
            if (intpart < 0 && frac) {
              ++intpart;
              frac -= 0x10000;
            }
            packed = intpart * (1LL << 24) + frac * 100;
            break;
          }
          default: packed = int64_t(be(p, 6)) - 0x800000000000LL; break;
        }
        const int64_t sign = packed < 0 ? -1 : 1;
        const uint64_t a = uint64_t(packed < 0 ? -packed : packed);
        const uint64_t hms = a >> 24, frac = a & 0xffffff;
        const int64_t secs =
            int64_t(((hms >> 12) & 0x3ff) * 3600 + ((hms >> 6) & 63) * 60 + (hms & 63));
        out[i] = Value::time(sign * (secs * 1000000 + int64_t(frac)));
        break;
      }
      case RowPlan::dense(kTypeDatetime): {  // old format: YYYYMMDDhhmmss as an 8-byte integer
        if (!need(8)) return truncated("ROWS");
        uint64_t v = le64(p);
        const uint64_t dpart = v / 1000000, tpart = v % 1000000;
        const unsigned d = unsigned(dpart % 100), m = unsigned(dpart / 100 % 100);
        // A server writes years 0-9999; a larger one is a corrupt event (and overflows the value).
        if (dpart / 10000 > 9999) return Error(Errc::data, "binlog DATETIME is out of range");
        if (d == 0 || m == 0)
          out[i] = zero_date(i, fmt::format("{:04}-{:02}-{:02} {:02}:{:02}:{:02}", dpart / 10000, m,
                                            d, tpart / 10000, tpart / 100 % 100, tpart % 100));
        else
          out[i] = Value::timestamp(
              int64_t(days_from_civil(int64_t(dpart / 10000), m, d)) * temporal::kMicrosPerDay +
              int64_t((tpart / 10000) * 3600 + (tpart / 100 % 100) * 60 + tpart % 100) * 1000000);
        len = 8;
        break;
      }
      case RowPlan::dense(kTypeDatetime2): {
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
          out[i] = zero_date(i, fmt::format("{:04}-{:02}-{:02} {:02}:{:02}:{:02}", y, m, d,
                                            hms >> 12, (hms >> 6) & 63, hms & 63));
        } else {
          const int64_t secs = (hms >> 12) * 3600 + ((hms >> 6) & 63) * 60 + (hms & 63);
          out[i] = Value::timestamp(int64_t(days_from_civil(y, m, d)) * temporal::kMicrosPerDay +
                                    secs * 1000000 + frac_micros(p + 5, fsp));
        }
        break;
      }
      case RowPlan::dense(kTypeTimestamp):
        if (!need(4)) return truncated("ROWS");
        // TIMESTAMP starts at 1970-01-01 00:00:01 UTC: 0 is the zero date.
        out[i] = le32(p) == 0 ? zero_date(i, "0000-00-00 00:00:00")
                              : Value::timestamptz(int64_t(le32(p)) * 1000000);
        len = 4;
        break;
      case RowPlan::dense(kTypeTimestamp2): {
        const int fsp = meta;
        len = 4 + size_t((fsp + 1) / 2);
        if (!need(len)) return truncated("ROWS");
        const int64_t us = int64_t(be(p, 4)) * 1000000 + frac_micros(p + 4, fsp);
        out[i] = us == 0 ? zero_date(i, "0000-00-00 00:00:00") : Value::timestamptz(us);
        break;
      }
      case RowPlan::dense(kTypeVarchar):
      case RowPlan::dense(kTypeVarString): {
        const size_t lb = meta < 256 ? 1 : 2;
        if (!need(lb)) return truncated("ROWS");
        const size_t sl = lb == 1 ? p[0] : le16(p);
        if (!need(lb + sl)) return truncated("ROWS");
        out[i] = short_text_value(std::string_view(reinterpret_cast<const char*>(p + lb), sl));
        len = lb + sl;
        break;
      }
      case RowPlan::dense(kTypeString): {
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
          out[i] = short_text_value(s);
        }
        len = lb + sl;
        break;
      }
      case RowPlan::dense(kTypeEnum): {
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
      case RowPlan::dense(kTypeSet): {
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
      case RowPlan::dense(kTypeBit): {
        const size_t nbytes = (meta & 0xff) + ((meta >> 8) ? 1 : 0);
        if (!need(nbytes) || nbytes > 8) return truncated("ROWS");
        out[i] = Value::uint64(be(p, nbytes));
        len = nbytes;
        break;
      }
      case RowPlan::dense(kTypeBlob):
      case RowPlan::dense(kTypeTinyBlob):
      case RowPlan::dense(kTypeMediumBlob):
      case RowPlan::dense(kTypeLongBlob):
      case RowPlan::dense(kTypeGeometry):
      case RowPlan::dense(kTypeJson): {
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
        return Error(Errc::unsupported,
                     fmt::format("binlog column type {} of {}.{} column {} is not supported", type,
                                 map.database, map.table, i + 1));
    }
    off += len;
  }
  return off;
}

}  // namespace

Result<size_t> decode_row(const RowPlan& plan, const TableMap& map, std::string_view data,
                          Arena& arena, Value* out, ZeroDates* zero_dates) {
  return decode_row_into(plan, map, data, arena, out, zero_dates);
}

Result<size_t> decode_row(const RowPlan& plan, const TableMap& map, std::string_view data,
                          Arena& arena, Field* out, ZeroDates* zero_dates) {
  return decode_row_into(plan, map, data, arena, FieldValues{out}, zero_dates);
}

}  // namespace sluice::mysql::binlog
