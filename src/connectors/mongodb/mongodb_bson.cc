// Values ⇄ BSON: the one place the mongodb connector maps types (mongodb_bson.h).
#include "connectors/mongodb/mongodb_bson.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <charconv>
#include <cstring>
#include <limits>

#include "sluice/json.h"
#include "sluice/temporal.h"

namespace sluice::mongodb {

namespace {

constexpr int64_t kMillisPerDay = 86'400'000;

Error field_error(std::string_view key, std::string what) {
  return Error(Errc::data, fmt::format("field \"{}\": {}", key, what));
}

bool key_ok(std::string_view key) { return key.find('\0') == std::string_view::npos; }

int key_len(std::string_view key) { return static_cast<int>(key.size()); }

// Extended JSON objects the source produces for types without a sluice counterpart are turned
// back into those types, so MongoDB → MongoDB keeps them. Returns true when `v` was one.
bool append_extended(bson_t* doc, std::string_view key, const Value& v) {
  auto fields = v.fields();
  if (fields.empty() || fields.size() > 1 || fields[0].name.empty() || fields[0].name[0] != '$')
    return false;
  const Field& f = fields[0];
  const char* k = key.data();
  int kl = key_len(key);
  if (f.name == "$minKey") return bson_append_minkey(doc, k, kl);
  if (f.name == "$maxKey") return bson_append_maxkey(doc, k, kl);
  if (f.name == "$undefined") return bson_append_undefined(doc, k, kl);
  if (f.name == "$code" && f.value.kind() == ValueKind::string)
    return bson_append_code(doc, k, kl, std::string(f.value.as_text()).c_str());
  if (f.name == "$symbol" && f.value.kind() == ValueKind::string)
    return bson_append_symbol(doc, k, kl, f.value.as_text().data(),
                              static_cast<int>(f.value.as_text().size()));
  if (f.name == "$timestamp" && f.value.is_object()) {
    const Value* t = f.value.find("t");
    const Value* i = f.value.find("i");
    if (t && i && t->kind() == ValueKind::int64 && i->kind() == ValueKind::int64)
      return bson_append_timestamp(doc, k, kl, static_cast<uint32_t>(t->as_int64()),
                                   static_cast<uint32_t>(i->as_int64()));
  }
  if (f.name == "$regularExpression" && f.value.is_object()) {
    const Value* p = f.value.find("pattern");
    const Value* o = f.value.find("options");
    if (p && o && p->kind() == ValueKind::string && o->kind() == ValueKind::string)
      return bson_append_regex(doc, k, kl, std::string(p->as_text()).c_str(),
                               std::string(o->as_text()).c_str());
  }
  if (f.name == "$binary" && f.value.is_object()) {
    const Value* b = f.value.find("base64");
    const Value* s = f.value.find("subType");
    std::string raw;
    if (b && s && b->kind() == ValueKind::string && s->kind() == ValueKind::string &&
        base64_decode(b->as_text(), &raw)) {
      unsigned sub = 0;
      auto text = s->as_text();
      auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), sub, 16);
      if (ec == std::errc() && p == text.data() + text.size() && sub <= 0xff)
        return bson_append_binary(doc, k, kl, static_cast<bson_subtype_t>(sub),
                                  reinterpret_cast<const uint8_t*>(raw.data()),
                                  static_cast<uint32_t>(raw.size()));
    }
  }
  return false;
}

Status append_timestamp_micros(bson_t* doc, std::string_view key, int64_t micros, bool zoned,
                               const BsonWriteOptions& o) {
  if (micros % 1000 == 0) {
    if (!bson_append_date_time(doc, key.data(), key_len(key), micros / 1000))
      return field_error(key, "cannot append a date");
    return ok_status();
  }
  if (o.sub_millisecond == SubMillisecond::reject)
    return field_error(
        key, fmt::format("timestamp {} has a sub-millisecond part a BSON date cannot hold "
                         "(set timestamps.sub_millisecond: string to keep it as text)",
                         zoned ? format_timestamptz(micros) : format_timestamp(micros)));
  std::string text = zoned ? format_timestamptz(micros) : format_timestamp(micros);
  bson_append_utf8(doc, key.data(), key_len(key), text.data(), static_cast<int>(text.size()));
  return ok_status();
}

Status append_json_element(bson_t* doc, std::string_view key, simdjson::dom::element e) {
  const char* k = key.data();
  int kl = key_len(key);
  if (!key_ok(key)) return field_error(key, "a JSON key holds a NUL character");
  switch (e.type()) {
    case simdjson::dom::element_type::OBJECT: {
      bson_t child;
      bson_append_document_begin(doc, k, kl, &child);
      for (auto kv : simdjson::dom::object(e)) {
        Status s = append_json_element(&child, kv.key, kv.value);
        if (!s) {
          bson_append_document_end(doc, &child);
          return s;
        }
      }
      bson_append_document_end(doc, &child);
      return ok_status();
    }
    case simdjson::dom::element_type::ARRAY: {
      bson_t child;
      bson_append_array_begin(doc, k, kl, &child);
      uint32_t i = 0;
      for (auto item : simdjson::dom::array(e)) {
        const char* ik;
        char buf[16];
        size_t n = bson_uint32_to_string(i++, &ik, buf, sizeof buf);
        Status s = append_json_element(&child, std::string_view(ik, n), item);
        if (!s) {
          bson_append_array_end(doc, &child);
          return s;
        }
      }
      bson_append_array_end(doc, &child);
      return ok_status();
    }
    case simdjson::dom::element_type::INT64:
      bson_append_int64(doc, k, kl, int64_t(e));
      return ok_status();
    case simdjson::dom::element_type::UINT64: {
      bson_decimal128_t d;
      std::string text = std::to_string(uint64_t(e));
      bson_decimal128_from_string(text.c_str(), &d);
      bson_append_decimal128(doc, k, kl, &d);
      return ok_status();
    }
    case simdjson::dom::element_type::DOUBLE:
      bson_append_double(doc, k, kl, double(e));
      return ok_status();
    case simdjson::dom::element_type::STRING: {
      std::string_view s(e);
      bson_append_utf8(doc, k, kl, s.data(), static_cast<int>(s.size()));
      return ok_status();
    }
    case simdjson::dom::element_type::BOOL:
      bson_append_bool(doc, k, kl, bool(e));
      return ok_status();
    case simdjson::dom::element_type::NULL_VALUE: bson_append_null(doc, k, kl); return ok_status();
    default: break;
  }
  return field_error(key, "unsupported JSON element");
}

}  // namespace

bool decimal_to_bson(std::string_view text, bson_decimal128_t* out) {
  std::string t(text);
  if (t == "Infinity" || t == "+Infinity") t = "Inf";
  else if (t == "-Infinity") t = "-Inf";
  if (!bson_decimal128_from_string(t.c_str(), out)) return false;
  // libbson rounds nothing silently it cannot: it answers NaN for an inexact value. A NaN that
  // the text did not ask for is a value that does not fit.
  char buf[BSON_DECIMAL128_STRING];
  bson_decimal128_to_string(out, buf);
  return std::strcmp(buf, "NaN") != 0 || t == "NaN";
}

Status append_value(bson_t* doc, std::string_view key, const Value& v, const BsonWriteOptions& o) {
  if (!key_ok(key)) return field_error(key, "a field name holds a NUL character");
  const char* k = key.data();
  int kl = key_len(key);
  switch (v.kind()) {
    case ValueKind::absent: return ok_status();
    case ValueKind::null: bson_append_null(doc, k, kl); return ok_status();
    case ValueKind::boolean: bson_append_bool(doc, k, kl, v.as_bool()); return ok_status();
    case ValueKind::int64: bson_append_int64(doc, k, kl, v.as_int64()); return ok_status();
    case ValueKind::uint64: {
      if (v.as_uint64() <= uint64_t(std::numeric_limits<int64_t>::max())) {
        bson_append_int64(doc, k, kl, static_cast<int64_t>(v.as_uint64()));
        return ok_status();
      }
      std::string text = std::to_string(v.as_uint64());
      if (o.decimals == Decimals::string) {
        bson_append_utf8(doc, k, kl, text.data(), static_cast<int>(text.size()));
        return ok_status();
      }
      bson_decimal128_t d;
      bson_decimal128_from_string(text.c_str(), &d);
      bson_append_decimal128(doc, k, kl, &d);
      return ok_status();
    }
    case ValueKind::float64: bson_append_double(doc, k, kl, v.as_double()); return ok_status();
    case ValueKind::decimal: {
      if (o.decimals == Decimals::string) {
        bson_append_utf8(doc, k, kl, v.as_text().data(), static_cast<int>(v.as_text().size()));
        return ok_status();
      }
      bson_decimal128_t d;
      if (!decimal_to_bson(v.as_text(), &d))
        return field_error(key, fmt::format("decimal {} does not fit a Decimal128 exactly (34 "
                                            "significant digits, exponent -6176..6111)",
                                            v.as_text()));
      bson_append_decimal128(doc, k, kl, &d);
      return ok_status();
    }
    case ValueKind::string:
      if (!bson_utf8_validate(v.as_text().data(), v.as_text().size(), false))
        return field_error(key, "a string is not valid UTF-8 (or holds a NUL character)");
      bson_append_utf8(doc, k, kl, v.as_text().data(), static_cast<int>(v.as_text().size()));
      return ok_status();
    case ValueKind::bytes:
      bson_append_binary(doc, k, kl, BSON_SUBTYPE_BINARY,
                         reinterpret_cast<const uint8_t*>(v.as_text().data()),
                         static_cast<uint32_t>(v.as_text().size()));
      return ok_status();
    case ValueKind::date:
      bson_append_date_time(doc, k, kl, int64_t(v.as_date()) * kMillisPerDay);
      return ok_status();
    case ValueKind::time: {
      std::string t = format_time(v.as_micros());
      bson_append_utf8(doc, k, kl, t.data(), static_cast<int>(t.size()));
      return ok_status();
    }
    case ValueKind::timetz: {
      std::string t = format_timetz(v.as_micros(), v.tz_offset_seconds());
      bson_append_utf8(doc, k, kl, t.data(), static_cast<int>(t.size()));
      return ok_status();
    }
    case ValueKind::timestamp: return append_timestamp_micros(doc, key, v.as_micros(), false, o);
    case ValueKind::timestamptz: return append_timestamp_micros(doc, key, v.as_micros(), true, o);
    case ValueKind::interval: {
      std::string t = format_interval(v.as_interval());
      bson_append_utf8(doc, k, kl, t.data(), static_cast<int>(t.size()));
      return ok_status();
    }
    case ValueKind::uuid:
      bson_append_binary(doc, k, kl, BSON_SUBTYPE_UUID, v.uuid_bytes(), 16);
      return ok_status();
    case ValueKind::json: return append_json(doc, key, v.as_text());
    case ValueKind::array: {
      bson_t child;
      bson_append_array_begin(doc, k, kl, &child);
      uint32_t i = 0;
      for (const Value& item : v.items()) {
        const char* ik;
        char buf[16];
        size_t n = bson_uint32_to_string(i++, &ik, buf, sizeof buf);
        Status s = append_value(&child, std::string_view(ik, n),
                                item.is_absent() ? Value::null() : item, o);
        if (!s) {
          bson_append_array_end(doc, &child);
          return s;
        }
      }
      bson_append_array_end(doc, &child);
      return ok_status();
    }
    case ValueKind::object: {
      if (append_extended(doc, key, v)) return ok_status();
      bson_t child;
      bson_append_document_begin(doc, k, kl, &child);
      for (const Field& f : v.fields()) {
        Status s = append_value(&child, f.name, f.value, o);
        if (!s) {
          bson_append_document_end(doc, &child);
          return s;
        }
      }
      bson_append_document_end(doc, &child);
      return ok_status();
    }
  }
  return field_error(key, "unknown value kind");
}

Status append_json(bson_t* doc, std::string_view key, std::string_view json) {
  simdjson::dom::parser parser;
  simdjson::dom::element e;
  simdjson::padded_string padded(json);
  if (auto err = parser.parse(padded).get(e); err != simdjson::SUCCESS)
    return field_error(key,
                       fmt::format("JSON value does not parse: {}", simdjson::error_message(err)));
  return append_json_element(doc, key, e);
}

std::string decimal_text(const bson_decimal128_t& d) {
  char buf[BSON_DECIMAL128_STRING];
  bson_decimal128_to_string(&d, buf);
  std::string_view s(buf);
  if (s == "NaN") return "NaN";
  if (s == "Inf") return "Infinity";
  if (s == "-Inf") return "-Infinity";
  std::string out;
  if (!s.empty() && s[0] == '-') {
    out += '-';
    s.remove_prefix(1);
  }
  int64_t exp = 0;
  if (size_t e = s.find('E'); e != std::string_view::npos) {
    std::string_view es = s.substr(e + 1);
    if (!es.empty() && es[0] == '+') es.remove_prefix(1);
    std::from_chars(es.data(), es.data() + es.size(), exp);
    s = s.substr(0, e);
  }
  std::string digits;
  if (size_t dot = s.find('.'); dot != std::string_view::npos) {
    digits.append(s.substr(0, dot));
    digits.append(s.substr(dot + 1));
    exp -= static_cast<int64_t>(s.size() - dot - 1);
  } else {
    digits.append(s);
  }
  // Strip leading zeros (keep one digit before the point).
  size_t nz = 0;
  while (nz + 1 < digits.size() && digits[nz] == '0') ++nz;
  digits.erase(0, nz);
  if (exp >= 0) {
    if (digits != "0") digits.append(static_cast<size_t>(exp), '0');
    out += digits;
    return out;
  }
  auto scale = static_cast<size_t>(-exp);
  if (digits.size() <= scale) digits.insert(0, scale - digits.size() + 1, '0');
  out.append(digits, 0, digits.size() - scale);
  out += '.';
  out.append(digits, digits.size() - scale, scale);
  return out;
}

namespace {

Value text_value(ValueKind kind, std::string_view s, Arena& arena) {
  std::string_view c = arena.copy(s);
  switch (kind) {
    case ValueKind::bytes: return Value::bytes(c);
    case ValueKind::decimal: return Value::decimal(c);
    default: return Value::string(c);
  }
}

// { name: value } in the arena.
Value one_field(std::string_view name, Value v, Arena& arena) {
  Field* f = arena.allocate_array<Field>(1);
  f[0] = Field{name, v};
  return Value::object(f, 1);
}

Value two_fields(std::string_view n1, Value v1, std::string_view n2, Value v2, Arena& arena) {
  Field* f = arena.allocate_array<Field>(2);
  f[0] = Field{n1, v1};
  f[1] = Field{n2, v2};
  return Value::object(f, 2);
}

Value read_children(bson_iter_t* child, bool array, Arena& arena) {
  bson_iter_t count = *child;
  uint32_t n = 0;
  while (bson_iter_next(&count)) ++n;
  if (array) {
    Value* items = arena.allocate_array<Value>(n);
    uint32_t i = 0;
    while (i < n && bson_iter_next(child)) items[i++] = read_value(child, arena);
    return Value::array(items, i);
  }
  Field* fields = arena.allocate_array<Field>(n);
  uint32_t i = 0;
  while (i < n && bson_iter_next(child)) {
    uint32_t kl = bson_iter_key_len(child);
    fields[i].name = arena.copy(std::string_view(bson_iter_key(child), kl));
    fields[i].value = read_value(child, arena);
    ++i;
  }
  return Value::object(fields, i);
}

}  // namespace

Value read_value(const bson_iter_t* it, Arena& arena) {
  switch (bson_iter_type(it)) {
    case BSON_TYPE_DOUBLE: return Value::float64(bson_iter_double(it));
    case BSON_TYPE_UTF8: {
      uint32_t n = 0;
      const char* s = bson_iter_utf8(it, &n);
      return text_value(ValueKind::string, std::string_view(s, n), arena);
    }
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY: {
      bson_iter_t child;
      if (!bson_iter_recurse(it, &child)) return Value::null();
      return read_children(&child, bson_iter_type(it) == BSON_TYPE_ARRAY, arena);
    }
    case BSON_TYPE_BINARY: {
      bson_subtype_t sub;
      uint32_t n = 0;
      const uint8_t* data = nullptr;
      bson_iter_binary(it, &sub, &n, &data);
      std::string_view raw(reinterpret_cast<const char*>(data), n);
      if (sub == BSON_SUBTYPE_UUID && n == 16) {
        auto* b = static_cast<uint8_t*>(arena.allocate(16, 1));
        std::memcpy(b, data, 16);
        return Value::uuid(b);
      }
      if (sub == BSON_SUBTYPE_BINARY) return text_value(ValueKind::bytes, raw, arena);
      std::string b64 = base64_encode(raw);
      std::string st = fmt::format("{:02x}", static_cast<unsigned>(sub));
      return one_field("$binary",
                       two_fields("base64", text_value(ValueKind::string, b64, arena), "subType",
                                  text_value(ValueKind::string, st, arena), arena),
                       arena);
    }
    case BSON_TYPE_UNDEFINED: return one_field("$undefined", Value::boolean(true), arena);
    case BSON_TYPE_OID: {
      char hex[25];
      bson_oid_to_string(bson_iter_oid(it), hex);
      return text_value(ValueKind::string, std::string_view(hex, 24), arena);
    }
    case BSON_TYPE_BOOL: return Value::boolean(bson_iter_bool(it));
    case BSON_TYPE_DATE_TIME: {
      const int64_t ms = bson_iter_date_time(it);
      int64_t micros = 0;
      if (!temporal::micros_from_millis_checked(ms, &micros))
        return one_field("$date",
                         one_field("$numberLong",
                                   text_value(ValueKind::string, std::to_string(ms), arena), arena),
                         arena);
      return Value::timestamptz(micros);
    }
    case BSON_TYPE_NULL: return Value::null();
    case BSON_TYPE_REGEX: {
      const char* options = nullptr;
      const char* pattern = bson_iter_regex(it, &options);
      return one_field(
          "$regularExpression",
          two_fields("pattern", text_value(ValueKind::string, pattern, arena), "options",
                     text_value(ValueKind::string, options ? options : "", arena), arena),
          arena);
    }
    case BSON_TYPE_DBPOINTER: {
      uint32_t n = 0;
      const char* coll = nullptr;
      const bson_oid_t* oid = nullptr;
      bson_iter_dbpointer(it, &n, &coll, &oid);
      char hex[25];
      bson_oid_to_string(oid, hex);
      return one_field(
          "$dbPointer",
          two_fields(
              "$ref", text_value(ValueKind::string, std::string_view(coll, n), arena), "$id",
              one_field("$oid", text_value(ValueKind::string, std::string_view(hex, 24), arena),
                        arena),
              arena),
          arena);
    }
    case BSON_TYPE_CODE: {
      uint32_t n = 0;
      const char* code = bson_iter_code(it, &n);
      return one_field("$code", text_value(ValueKind::string, std::string_view(code, n), arena),
                       arena);
    }
    case BSON_TYPE_SYMBOL: {
      uint32_t n = 0;
      const char* sym = bson_iter_symbol(it, &n);
      return one_field("$symbol", text_value(ValueKind::string, std::string_view(sym, n), arena),
                       arena);
    }
    case BSON_TYPE_CODEWSCOPE: {
      uint32_t n = 0, sn = 0;
      const uint8_t* scope = nullptr;
      const char* code = bson_iter_codewscope(it, &n, &sn, &scope);
      bson_t sdoc;
      Value scope_value = Value::null();
      if (bson_init_static(&sdoc, scope, sn)) scope_value = read_document(&sdoc, arena);
      return two_fields("$code", text_value(ValueKind::string, std::string_view(code, n), arena),
                        "$scope", scope_value, arena);
    }
    case BSON_TYPE_INT32: return Value::int64(bson_iter_int32(it));
    case BSON_TYPE_TIMESTAMP: {
      uint32_t t = 0, i = 0;
      bson_iter_timestamp(it, &t, &i);
      return one_field("$timestamp", two_fields("t", Value::int64(t), "i", Value::int64(i), arena),
                       arena);
    }
    case BSON_TYPE_INT64: return Value::int64(bson_iter_int64(it));
    case BSON_TYPE_DECIMAL128: {
      bson_decimal128_t d;
      bson_iter_decimal128(it, &d);
      return text_value(ValueKind::decimal, decimal_text(d), arena);
    }
    case BSON_TYPE_MAXKEY: return one_field("$maxKey", Value::int64(1), arena);
    case BSON_TYPE_MINKEY: return one_field("$minKey", Value::int64(1), arena);
    case BSON_TYPE_EOD: break;
  }
  return Value::null();
}

Value read_document(const bson_t* doc, Arena& arena) {
  bson_iter_t it;
  if (!bson_iter_init(&it, doc)) return Value::object(nullptr, 0);
  return read_children(&it, false, arena);
}

}  // namespace sluice::mongodb
