#include "connectors/common/message_formats.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <string>
#include <vector>

#include "sluice/json.h"
#include "sluice/settings.h"
#include "sluice/temporal.h"

namespace sluice::kafka {

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

constexpr std::string_view kMetaTopic = "kafka.topic";
constexpr std::string_view kMetaPartition = "kafka.partition";
constexpr std::string_view kMetaOffset = "kafka.offset";
constexpr std::string_view kMetaTimestamp = "kafka.timestamp";

std::string_view format_name(Format f) {
  switch (f) {
    case Format::opencdc: return "opencdc";
    case Format::debezium: return "debezium";
    case Format::raw: return "raw";
  }
  return "?";
}

bool is_utf8(std::string_view s) { return simdjson::validate_utf8(s.data(), s.size()); }

std::string_view arena_number(Arena& arena, int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return arena.copy(std::string_view(buf, size_t(r.ptr - buf)));
}

// ── Kafka Connect / Debezium logical types ─────────────────────────────────

// The struct schema of field `name` in a struct schema's "fields" (nullptr if none).
bool schema_field(const element& struct_schema, std::string_view name, element* out) {
  simdjson::dom::array fields;
  if (struct_schema.at_key("fields").get_array().get(fields)) return false;
  for (element f : fields) {
    std::string_view fname;
    if (f.at_key("field").get_string().get(fname) == simdjson::SUCCESS && fname == name) {
      *out = f;
      return true;
    }
  }
  return false;
}

std::string_view schema_string(const element& schema, std::string_view key) {
  std::string_view s;
  if (schema.at_key(key).get_string().get(s)) return {};
  return s;
}

class JsonToValue {
 public:
  explicit JsonToValue(Arena& arena) : arena_(arena) {}

  // Converts `e` guided by an optional Kafka Connect schema. Returns false with error() set.
  bool convert(const element& e, const element* schema, Value* out, int depth = 0) {
    if (depth > 256) return fail("nesting too deep");
    if (schema != nullptr && !e.is_null()) {
      bool handled = false;
      if (!logical(e, *schema, out, &handled)) return false;
      if (handled) return true;
    }
    switch (e.type()) {
      case element_type::NULL_VALUE: *out = Value::null(); return true;
      case element_type::BOOL:
        *out = Value::boolean(bool(e.get_bool().value_unsafe()));
        return true;
      case element_type::INT64: *out = Value::int64(e.get_int64().value_unsafe()); return true;
      case element_type::UINT64: *out = Value::uint64(e.get_uint64().value_unsafe()); return true;
      case element_type::DOUBLE: *out = Value::float64(e.get_double().value_unsafe()); return true;
      case element_type::STRING:
        *out = Value::string(arena_.copy(e.get_string().value_unsafe()));
        return true;
      case element_type::ARRAY: {
        simdjson::dom::array a = e.get_array().value_unsafe();
        const size_t n = a.size();
        Value* items = arena_.allocate_array<Value>(n);
        element item_schema;
        const bool has_items =
            schema != nullptr && schema->at_key("items").get(item_schema) == simdjson::SUCCESS;
        size_t i = 0;
        for (element item : a) {
          if (!convert(item, has_items ? &item_schema : nullptr, &items[i], depth + 1))
            return false;
          ++i;
        }
        *out = Value::array(items, uint32_t(i));
        return true;
      }
      case element_type::OBJECT: {
        simdjson::dom::object o = e.get_object().value_unsafe();
        const size_t n = o.size();
        Field* fields = arena_.allocate_array<Field>(n);
        size_t i = 0;
        for (simdjson::dom::key_value_pair kv : o) {
          element fs;
          const bool has_fs = schema != nullptr && schema_field(*schema, kv.key, &fs);
          fields[i].name = arena_.copy(kv.key);
          if (!convert(kv.value, has_fs ? &fs : nullptr, &fields[i].value, depth + 1)) {
            path_ = std::string(kv.key) + (path_.empty() ? "" : "." + path_);
            return false;
          }
          ++i;
        }
        *out = Value::object(fields, uint32_t(i));
        return true;
      }
      default: break;
    }
    return fail("unsupported JSON value");
  }

  std::string error() const { return path_.empty() ? error_ : path_ + ": " + error_; }

 private:
  bool fail(std::string msg) {
    error_ = std::move(msg);
    return false;
  }

  bool want_int(const element& e, int64_t* v, std::string_view name) {
    if (e.get_int64().get(*v) == simdjson::SUCCESS) return true;
    return fail(fmt::format("{} expects an integer", name));
  }
  bool want_string(const element& e, std::string_view* s, std::string_view name) {
    if (e.get_string().get(*s) == simdjson::SUCCESS) return true;
    return fail(fmt::format("{} expects a string", name));
  }
  bool decode_base64(std::string_view s, std::string* out, std::string_view name) {
    if (base64_decode(s, out)) return true;
    return fail(fmt::format("{}: invalid base64", name));
  }

  // Milliseconds to microseconds, refusing a value whose microseconds overflow int64.
  bool micros_from_millis(int64_t* i, std::string_view name) {
    const int64_t ms = *i;
    if (!temporal::micros_from_millis_checked(ms, i))
      return fail(fmt::format("{}: {} milliseconds is out of range", name, ms));
    return true;
  }

  // Logical types named in the schema. *handled=false leaves `e` to the plain conversion.
  bool logical(const element& e, const element& schema, Value* out, bool* handled) {
    const std::string_view name = schema_string(schema, "name");
    const std::string_view type = schema_string(schema, "type");
    *handled = true;
    int64_t i = 0;
    std::string_view s;
    if (name == "io.debezium.time.Date" || name == "org.apache.kafka.connect.data.Date") {
      if (!want_int(e, &i, name)) return false;
      if (i < INT32_MIN || i > INT32_MAX)
        return fail(fmt::format("{}: {} is out of range", name, i));
      *out = Value::date(int32_t(i));
    } else if (name == "io.debezium.time.Timestamp" ||
               name == "org.apache.kafka.connect.data.Timestamp") {
      if (!want_int(e, &i, name) || !micros_from_millis(&i, name)) return false;
      *out = Value::timestamp(i);
    } else if (name == "io.debezium.time.MicroTimestamp") {
      if (!want_int(e, &i, name)) return false;
      *out = Value::timestamp(i);
    } else if (name == "io.debezium.time.NanoTimestamp") {
      if (!want_int(e, &i, name)) return false;
      *out = Value::timestamp(i / 1000);
    } else if (name == "io.debezium.time.Time" || name == "org.apache.kafka.connect.data.Time") {
      if (!want_int(e, &i, name) || !micros_from_millis(&i, name)) return false;
      *out = Value::time(i);
    } else if (name == "io.debezium.time.MicroTime") {
      if (!want_int(e, &i, name)) return false;
      *out = Value::time(i);
    } else if (name == "io.debezium.time.NanoTime") {
      if (!want_int(e, &i, name)) return false;
      *out = Value::time(i / 1000);
    } else if (name == "io.debezium.time.ZonedTimestamp" ||
               name == "io.debezium.time.IsoTimestamp") {
      if (!want_string(e, &s, name)) return false;
      int64_t micros;
      if (!parse_timestamptz(s, &micros))
        return fail(fmt::format("{}: bad value {}", name, quote_user_text(s)));
      *out = Value::timestamptz(micros);
    } else if (name == "io.debezium.time.ZonedTime" || name == "io.debezium.time.IsoTime") {
      if (!want_string(e, &s, name)) return false;
      int64_t micros;
      int32_t offset;
      if (!parse_timetz(s, &micros, &offset))
        return fail(fmt::format("{}: bad value {}", name, quote_user_text(s)));
      *out = Value::timetz(micros, offset);
    } else if (name == "io.debezium.time.IsoDate") {
      if (!want_string(e, &s, name)) return false;
      int32_t days;
      if (!parse_date(s.substr(0, 10), &days))
        return fail(fmt::format("{}: bad value {}", name, quote_user_text(s)));
      *out = Value::date(days);
    } else if (name == "org.apache.kafka.connect.data.Decimal") {
      if (e.type() != element_type::STRING) {
        *handled = false;  // decimal.handling.mode=double/string: keep the plain value
        return true;
      }
      int64_t scale = 0;
      element params;
      if (schema.at_key("parameters").get(params) == simdjson::SUCCESS) {
        std::string_view sc;
        if (params.at_key("scale").get_string().get(sc) == simdjson::SUCCESS) {
          std::from_chars(sc.data(), sc.data() + sc.size(), scale);
        } else {
          if (params.at_key("scale").get_int64().get(scale) != simdjson::SUCCESS) scale = 0;
        }
      }
      std::string raw;
      if (!decode_base64(e.get_string().value_unsafe(), &raw, name)) return false;
      *out = Value::decimal(arena_.copy(decimal_from_unscaled(raw, int32_t(scale))));
    } else if (name == "io.debezium.data.VariableScaleDecimal") {
      int64_t scale = 0;
      std::string_view v;
      if (e.at_key("scale").get_int64().get(scale) || e.at_key("value").get_string().get(v))
        return fail(fmt::format("{} expects {{\"scale\":…,\"value\":…}}", name));
      std::string raw;
      if (!decode_base64(v, &raw, name)) return false;
      *out = Value::decimal(arena_.copy(decimal_from_unscaled(raw, int32_t(scale))));
    } else if (name == "io.debezium.data.Uuid") {
      if (!want_string(e, &s, name)) return false;
      uint8_t bytes[16];
      if (!parse_uuid(s, bytes))
        return fail(fmt::format("{}: bad value {}", name, quote_user_text(s)));
      *out = Value::uuid(reinterpret_cast<const uint8_t*>(
          arena_.copy({reinterpret_cast<char*>(bytes), 16}).data()));
    } else if (name == "io.debezium.data.Json") {
      if (!want_string(e, &s, name)) return false;
      *out = Value::json(arena_.copy(s));
    } else if (type == "bytes" && e.type() == element_type::STRING) {
      std::string raw;
      if (!decode_base64(e.get_string().value_unsafe(), &raw, "bytes")) return false;
      *out = Value::bytes(arena_.copy(raw));
    } else {
      *handled = false;
    }
    return true;
  }

  Arena& arena_;
  std::string error_;
  std::string path_;
};

// A reusable parser with a padded input buffer.
struct Parser {
  simdjson::dom::parser parser;
  std::string input;

  simdjson::error_code parse(std::string_view text, element* out) {
    const size_t need = text.size() + simdjson::SIMDJSON_PADDING;
    if (input.size() < need) input.resize(std::max(need, input.size() * 2));
    std::memcpy(input.data(), text.data(), text.size());
    std::memset(input.data() + text.size(), 0, simdjson::SIMDJSON_PADDING);
    return parser.parse(input.data(), text.size(), false).get(*out);
  }
  // After an unusually large message, give the memory back.
  void shrink_after(size_t size) {
    if (size > (8u << 20)) {
      parser = simdjson::dom::parser();
      std::string().swap(input);
    }
  }
};

}  // namespace

bool parse_format(std::string_view name, Format* out) noexcept {
  if (name == "opencdc") *out = Format::opencdc;
  else if (name == "debezium") *out = Format::debezium;
  else if (name == "raw") *out = Format::raw;
  else return false;
  return true;
}

Value text_or_bytes(Arena& arena, std::string_view s) {
  std::string_view c = arena.copy(s);
  return is_utf8(s) ? Value::string(c) : Value::bytes(c);
}

std::string decimal_from_unscaled(std::string_view be, int32_t scale) {
  // Two's complement → sign and magnitude (big-endian bytes).
  std::vector<uint8_t> mag(be.begin(), be.end());
  const bool negative = !mag.empty() && (mag[0] & 0x80);
  if (negative) {
    for (auto& b : mag) b = uint8_t(~b);
    for (size_t i = mag.size(); i-- > 0;) {
      if (++mag[i] != 0) break;
    }
  }
  // Magnitude → decimal digits by repeated division by 10.
  std::string digits;
  size_t start = 0;
  while (start < mag.size() && mag[start] == 0) ++start;
  while (start < mag.size()) {
    unsigned rem = 0;
    for (size_t i = start; i < mag.size(); ++i) {
      unsigned cur = (rem << 8) | mag[i];
      mag[i] = uint8_t(cur / 10);
      rem = cur % 10;
    }
    digits.push_back(char('0' + rem));
    while (start < mag.size() && mag[start] == 0) ++start;
  }
  if (digits.empty()) digits = "0";
  std::reverse(digits.begin(), digits.end());
  std::string out;
  if (scale > 0) {
    if (digits.size() <= size_t(scale)) digits.insert(0, size_t(scale) - digits.size() + 1, '0');
    digits.insert(digits.size() - size_t(scale), 1, '.');
  } else if (scale < 0 && digits != "0") {
    digits.append(size_t(-scale), '0');
  }
  if (negative && digits.find_first_not_of("0.") != std::string::npos) out = "-";
  return out + digits;
}

struct MessageDecoder::State {
  Parser value;
  Parser key;
  // Per-batch copies of the topic and the last timestamp's text (messages of one batch mostly
  // share them); valid while `arena` is the batch's arena and the batch is not empty.
  const Arena* arena = nullptr;
  std::string topic;
  std::string_view topic_text;
  int64_t ts_ms = -1;
  std::string_view ts_text;
};

MessageDecoder::MessageDecoder(Format format) : format_(format), st_(std::make_unique<State>()) {}
MessageDecoder::~MessageDecoder() = default;

namespace {

Error decode_error(const MessageView& m, Format f, std::string_view what, std::string_view why) {
  if (!m.kafka_metadata)
    return Error(Errc::data,
                 fmt::format("cannot decode the {} of {} as {}: {}; fix the producer or "
                             "choose the matching `format`",
                             what, m.where, format_name(f), why));
  return Error(
      Errc::data,
      fmt::format(
          "cannot decode the {} of the message at topic '{}' partition {} offset {} as {}: {}; fix "
          "the producer or choose the matching `format` (raw accepts any message)",
          what, m.topic, m.partition, m.offset, format_name(f), why));
}

// Builds the record's final metadata: its own fields (minus kafka.*), the kafka.* fields, then the
// headers whose names are not taken yet.
struct MetaCache {
  std::string_view topic, timestamp;
};

Value merge_metadata(Arena& arena, const Value& own, const MessageView& m, const MetaCache& cache) {
  const size_t own_n = own.is_object() ? own.size() : 0;
  const size_t cap = own_n + 4 + m.headers.size();
  Field* f = arena.allocate_array<Field>(cap);
  size_t n = 0;
  auto taken = [&](std::string_view name) {
    for (size_t i = 0; i < n; ++i)
      if (f[i].name == name) return true;
    return false;
  };
  if (own_n) {
    for (const Field& x : own.fields()) {
      if (m.kafka_metadata && (x.name == kMetaTopic || x.name == kMetaPartition ||
                               x.name == kMetaOffset || x.name == kMetaTimestamp))
        continue;
      f[n++] = x;
    }
  }
  if (m.kafka_metadata) {
    f[n++] = Field{kMetaTopic, Value::string(cache.topic)};
    f[n++] = Field{kMetaPartition, Value::string(arena_number(arena, m.partition))};
    f[n++] = Field{kMetaOffset, Value::string(arena_number(arena, m.offset))};
    if (m.timestamp_ms >= 0) f[n++] = Field{kMetaTimestamp, Value::string(cache.timestamp)};
  }
  for (const auto& [name, value] : m.headers) {
    if (taken(name)) continue;
    f[n++] = Field{arena.copy(name), Value::string(arena.copy(value))};
  }
  return Value::object(f, uint32_t(n));
}

}  // namespace

Status MessageDecoder::decode(const MessageView& m, Batch& batch) {
  Arena& arena = batch.arena();
  State& st = *st_;
  if (batch.empty() || st.arena != &arena) {
    st.arena = &arena;
    st.topic.clear();
    st.topic_text = {};
    st.ts_ms = -1;
  }
  MetaCache cache;
  if (st.topic_text.empty() || st.topic != m.topic) {
    st.topic.assign(m.topic);
    st.topic_text = arena.copy(m.topic);
  }
  cache.topic = st.topic_text;
  if (m.timestamp_ms >= 0) {
    if (st.ts_ms != m.timestamp_ms) {
      // A producer may set any int64; one whose microseconds overflow is refused, not wrapped.
      int64_t micros = 0;
      if (!temporal::micros_from_millis_checked(m.timestamp_ms, &micros))
        return decode_error(
            m, format_, "timestamp",
            fmt::format("{} milliseconds is out of range for a timestamp", m.timestamp_ms));
      st.ts_ms = m.timestamp_ms;
      st.ts_text = arena.copy(format_timestamptz(micros));
    }
    cache.timestamp = st.ts_text;
  }
  switch (format_) {
    case Format::opencdc: {
      if (!m.value) return ok_status();  // tombstone
      const size_t before = batch.size();
      Status ds = decode_record_json(*m.value, batch);
      if (!ds.ok()) {
        if (batch.size() > before) batch.records().resize(before);
        std::string why = ds.error().message();
        if (why.rfind("JSON record: ", 0) == 0) why.erase(0, 13);
        return decode_error(m, format_, "value", why);
      }
      Record& r = batch.records().back();
      r.position = {};
      r.metadata = merge_metadata(arena, r.metadata, m, cache);
      return ok_status();
    }
    case Format::raw: {
      if (!m.value && !m.key) return ok_status();
      Record r;
      if (m.key) {
        ObjectBuilder k = batch.object(1);
        k.add("key", text_or_bytes(arena, *m.key));
        r.key = k.build();
      }
      if (m.value) {
        ObjectBuilder a = batch.object(1);
        a.add("value", text_or_bytes(arena, *m.value));
        r.after = a.build();
        r.op = Operation::create;
      } else {
        r.op = Operation::remove;  // a keyed tombstone deletes its key
      }
      ObjectBuilder own = batch.object(1);
      own.add(meta::kTable, Value::string(cache.topic));
      r.metadata = merge_metadata(arena, own.build(), m, cache);
      batch.add() = r;
      return ok_status();
    }
    case Format::debezium: break;
  }

  // ── debezium ──
  if (!m.value) return ok_status();  // tombstone (follows a delete when tombstones.on.delete)
  struct Shrink {
    Parser& p;
    size_t n;
    ~Shrink() { p.shrink_after(n); }
  } shrink{st.value, m.value->size()};
  element root;
  if (auto e = st.value.parse(*m.value, &root))
    return decode_error(m, format_, "value",
                        std::string("invalid JSON: ") + simdjson::error_message(e));
  if (!root.is_object()) return decode_error(m, format_, "value", "not a JSON object");
  element envelope = root, schema;
  bool has_schema = false;
  {
    element payload, sch;
    if (root.at_key("payload").get(payload) == simdjson::SUCCESS &&
        root.at_key("schema").get(sch) == simdjson::SUCCESS) {
      envelope = payload;
      has_schema = sch.is_object();
      if (has_schema) schema = sch;
    }
  }
  if (envelope.is_null()) return ok_status();  // a null payload is a tombstone too
  if (!envelope.is_object())
    return decode_error(m, format_, "value", "the payload is not a JSON object");
  std::string_view op;
  if (envelope.at_key("op").get_string().get(op))
    return decode_error(
        m, format_, "value",
        "no \"op\" field: not a Debezium change event (schema-change, heartbeat and transaction "
        "topics carry other messages; do not subscribe to them)");
  Record r;
  bool truncate = false;
  if (op == "c") r.op = Operation::create;
  else if (op == "u") r.op = Operation::update;
  else if (op == "d") r.op = Operation::remove;
  else if (op == "r") r.op = Operation::snapshot;
  else if (op == "t") {
    r.op = Operation::remove;
    truncate = true;
  } else {
    return decode_error(m, format_, "value", fmt::format("unsupported op {}", quote_user_text(op)));
  }

  JsonToValue conv(arena);
  auto image = [&](std::string_view name, Value* out) -> Status {
    element e;
    if (envelope.at_key(name).get(e) != simdjson::SUCCESS || e.is_null())
      return ok_status();  // absent
    element fs;
    const bool has_fs = has_schema && schema_field(schema, name, &fs);
    if (!conv.convert(e, has_fs ? &fs : nullptr, out))
      return decode_error(m, format_, "value", std::string(name) + "." + conv.error());
    return ok_status();
  };
  if (!truncate) {
    if (Status is = image("before", &r.before); !is.ok()) return is;
    if (Status is = image("after", &r.after); !is.ok()) return is;
  }

  // Metadata from source.
  std::string_view schema_name, table_name;
  element source;
  if (envelope.at_key("source").get(source) == simdjson::SUCCESS && source.is_object()) {
    if (source.at_key("schema").get_string().get(schema_name) != simdjson::SUCCESS &&
        source.at_key("db").get_string().get(schema_name) != simdjson::SUCCESS)
      schema_name = {};
    if (source.at_key("table").get_string().get(table_name) != simdjson::SUCCESS) table_name = {};
  }
  ObjectBuilder own = batch.object(3);
  if (!schema_name.empty()) own.add(meta::kSchema, Value::string(arena.copy(schema_name)));
  if (!table_name.empty()) own.add(meta::kTable, Value::string(arena.copy(table_name)));
  if (truncate) own.add(meta::kTruncate, Value::string("true"));

  // Key from the message key.
  if (!truncate && m.key && !m.key->empty()) {
    struct ShrinkKey {
      Parser& p;
      size_t n;
      ~ShrinkKey() { p.shrink_after(n); }
    } shrink_key{st.key, m.key->size()};
    element k;
    if (auto e = st.key.parse(*m.key, &k))
      return decode_error(m, format_, "key",
                          std::string("invalid JSON: ") + simdjson::error_message(e));
    element kpayload, kschema;
    const element* kschema_p = nullptr;
    if (k.is_object() && k.at_key("payload").get(kpayload) == simdjson::SUCCESS &&
        k.at_key("schema").get(kschema) == simdjson::SUCCESS) {
      k = kpayload;
      if (kschema.is_object()) kschema_p = &kschema;
    }
    if (!k.is_null() && !conv.convert(k, kschema_p, &r.key))
      return decode_error(m, format_, "key", conv.error());
  }
  r.metadata = merge_metadata(arena, own.build(), m, cache);
  batch.add() = r;
  return ok_status();
}

}  // namespace sluice::kafka
