#include "support/spool/batch_codec.h"

#include <cstring>

namespace sluice::spool {

namespace {

constexpr int kMaxDepth = 64;

void put_varint(std::string& out, uint64_t v) {
  char buf[10];
  size_t n = 0;
  while (v >= 0x80) {
    buf[n++] = static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  buf[n++] = static_cast<char>(v);
  out.append(buf, n);
}
void put_zigzag(std::string& out, int64_t v) {
  put_varint(out, (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
}
void put_text(std::string& out, std::string_view s) {
  put_varint(out, s.size());
  out.append(s);
}

void put_value(std::string& out, const Value& v) {
  out.push_back(static_cast<char>(v.kind()));
  switch (v.kind()) {
    case ValueKind::absent:
    case ValueKind::null: return;
    case ValueKind::boolean: out.push_back(v.as_bool() ? 1 : 0); return;
    case ValueKind::int64:
    case ValueKind::time:
    case ValueKind::timestamp:
    case ValueKind::timestamptz: put_zigzag(out, v.as_int64()); return;
    case ValueKind::date: put_zigzag(out, v.as_date()); return;
    case ValueKind::uint64: put_varint(out, v.as_uint64()); return;
    case ValueKind::float64: {
      const double d = v.as_double();
      char buf[8];
      std::memcpy(buf, &d, 8);
      out.append(buf, 8);
      return;
    }
    case ValueKind::decimal:
    case ValueKind::string:
    case ValueKind::bytes:
    case ValueKind::json: put_text(out, v.as_text()); return;
    case ValueKind::timetz:
      put_zigzag(out, v.as_micros());
      put_zigzag(out, v.tz_offset_seconds());
      return;
    case ValueKind::interval: {
      const Interval& iv = v.as_interval();
      put_zigzag(out, iv.months);
      put_zigzag(out, iv.days);
      put_zigzag(out, iv.micros);
      return;
    }
    case ValueKind::uuid: out.append(reinterpret_cast<const char*>(v.uuid_bytes()), 16); return;
    case ValueKind::array:
      put_varint(out, v.size());
      for (const Value& item : v.items()) put_value(out, item);
      return;
    case ValueKind::object:
      put_varint(out, v.size());
      for (const Field& f : v.fields()) {
        put_text(out, f.name);
        put_value(out, f.value);
      }
      return;
  }
}

class Reader {
 public:
  Reader(std::string_view in, Batch& batch) : in_(in), batch_(batch) {}

  bool varint(uint64_t* v) {
    uint64_t r = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= in_.size()) return false;
      const auto b = static_cast<uint8_t>(in_[pos_++]);
      r |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) {
        *v = r;
        return true;
      }
    }
    return false;
  }
  bool zigzag(int64_t* v) {
    uint64_t u;
    if (!varint(&u)) return false;
    *v = static_cast<int64_t>((u >> 1) ^ (~(u & 1) + 1));
    return true;
  }
  bool text(std::string_view* s) {
    uint64_t n;
    if (!varint(&n) || n > in_.size() - pos_) return false;
    *s = in_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  bool raw(size_t n, const char** p) {
    if (n > in_.size() - pos_) return false;
    *p = in_.data() + pos_;
    pos_ += n;
    return true;
  }
  bool byte(uint8_t* b) {
    if (pos_ >= in_.size()) return false;
    *b = static_cast<uint8_t>(in_[pos_++]);
    return true;
  }
  // A count of items that each take at least one byte: never more than what is left.
  bool count(uint64_t* n) { return varint(n) && *n <= in_.size() - pos_ && *n <= UINT32_MAX; }

  bool value(Value* out, int depth) {
    if (depth > kMaxDepth) return false;
    uint8_t kind;
    if (!byte(&kind)) return false;
    int64_t i = 0;
    switch (static_cast<ValueKind>(kind)) {
      case ValueKind::absent: *out = Value(); return true;
      case ValueKind::null: *out = Value::null(); return true;
      case ValueKind::boolean: {
        uint8_t b;
        if (!byte(&b) || b > 1) return false;
        *out = Value::boolean(b != 0);
        return true;
      }
      case ValueKind::int64:
        if (!zigzag(&i)) return false;
        *out = Value::int64(i);
        return true;
      case ValueKind::time:
        if (!zigzag(&i)) return false;
        *out = Value::time(i);
        return true;
      case ValueKind::timestamp:
        if (!zigzag(&i)) return false;
        *out = Value::timestamp(i);
        return true;
      case ValueKind::timestamptz:
        if (!zigzag(&i)) return false;
        *out = Value::timestamptz(i);
        return true;
      case ValueKind::date:
        if (!zigzag(&i) || i < INT32_MIN || i > INT32_MAX) return false;
        *out = Value::date(static_cast<int32_t>(i));
        return true;
      case ValueKind::uint64: {
        uint64_t u;
        if (!varint(&u)) return false;
        *out = Value::uint64(u);
        return true;
      }
      case ValueKind::float64: {
        const char* p;
        if (!raw(8, &p)) return false;
        double d;
        std::memcpy(&d, p, 8);
        *out = Value::float64(d);
        return true;
      }
      case ValueKind::decimal:
      case ValueKind::string:
      case ValueKind::bytes:
      case ValueKind::json: {
        std::string_view s;
        if (!text(&s) || s.size() > UINT32_MAX) return false;
        const auto k = static_cast<ValueKind>(kind);
        *out = k == ValueKind::decimal  ? Value::decimal(s)
               : k == ValueKind::string ? Value::string(s)
               : k == ValueKind::bytes  ? Value::bytes(s)
                                        : Value::json(s);
        return true;
      }
      case ValueKind::timetz: {
        int64_t off;
        if (!zigzag(&i) || !zigzag(&off) || off < INT32_MIN || off > INT32_MAX) return false;
        *out = Value::timetz(i, static_cast<int32_t>(off));
        return true;
      }
      case ValueKind::interval: {
        int64_t months, days, micros;
        if (!zigzag(&months) || !zigzag(&days) || !zigzag(&micros)) return false;
        if (months < INT32_MIN || months > INT32_MAX || days < INT32_MIN || days > INT32_MAX)
          return false;
        auto* iv = batch_.arena().allocate_array<Interval>(1);
        *iv = Interval{static_cast<int32_t>(months), static_cast<int32_t>(days), micros};
        *out = Value::interval(iv);
        return true;
      }
      case ValueKind::uuid: {
        const char* p;
        if (!raw(16, &p)) return false;
        *out = Value::uuid(reinterpret_cast<const uint8_t*>(p));
        return true;
      }
      case ValueKind::array: {
        uint64_t n;
        if (!count(&n)) return false;
        Value* items = batch_.arena().allocate_array<Value>(n);
        for (uint64_t k = 0; k < n; ++k)
          if (!value(&items[k], depth + 1)) return false;
        *out = Value::array(items, static_cast<uint32_t>(n));
        return true;
      }
      case ValueKind::object: {
        uint64_t n;
        if (!count(&n)) return false;
        Field* fields = batch_.arena().allocate_array<Field>(n);
        for (uint64_t k = 0; k < n; ++k) {
          fields[k].value = Value();
          if (!text(&fields[k].name) || !value(&fields[k].value, depth + 1)) return false;
        }
        *out = Value::object(fields, static_cast<uint32_t>(n));
        return true;
      }
    }
    return false;  // an unknown kind
  }

  bool done() const noexcept { return pos_ == in_.size(); }

 private:
  std::string_view in_;
  size_t pos_ = 0;
  Batch& batch_;
};

}  // namespace

void encode_batch(const Batch& batch, std::string& out) {
  put_text(out, batch.position());
  put_varint(out, batch.size());
  for (const Record& r : batch.records()) {
    out.push_back(static_cast<char>(r.op));
    put_text(out, r.position);
    put_value(out, r.metadata);
    put_value(out, r.key);
    put_value(out, r.before);
    put_value(out, r.after);
  }
}

Status decode_batch(std::string_view bytes, Batch& out) {
  Reader in(bytes, out);
  auto malformed = [] { return Error(Errc::data, "malformed spooled batch"); };
  std::string_view position;
  uint64_t n;
  if (!in.text(&position) || !in.count(&n)) return malformed();
  out.set_position(position);
  out.records().reserve(out.size() + n);
  size_t control = 0;
  for (uint64_t k = 0; k < n; ++k) {
    uint8_t op;
    if (!in.byte(&op) || op > static_cast<uint8_t>(Operation::marker)) return malformed();
    Record& r = out.add();
    r.op = static_cast<Operation>(op);
    control += is_control(r.op) ? 1 : 0;
    if (!in.text(&r.position) || !in.value(&r.metadata, 0) || !in.value(&r.key, 0) ||
        !in.value(&r.before, 0) || !in.value(&r.after, 0))
      return malformed();
  }
  if (!in.done()) return malformed();
  out.set_control_count(out.control_count() + control);
  out.set_read_count(out.size() - out.control_count());
  return ok_status();
}

}  // namespace sluice::spool
