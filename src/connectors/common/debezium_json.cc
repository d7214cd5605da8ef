#include "connectors/common/debezium_json.h"

#include <charconv>
#include <cmath>

#include "sluice/json.h"
#include "sluice/temporal.h"

namespace sluice::kafka {

namespace {

void append_int(std::string& out, int64_t v) {
  char buf[24];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, size_t(p - buf));
}

void append_string(std::string& out, std::string_view s) {
  encode_value_json(Value::string(s), out);
}

// Debezium's MicroDuration: months count as 365.25 / 12 days.
int64_t interval_micros(const Interval& iv) {
  constexpr double kMonthMicros = 365.25 / 12.0 * 86400.0 * 1e6;
  return static_cast<int64_t>(std::llround(iv.months * kMonthMicros)) +
         int64_t(iv.days) * temporal::kMicrosPerDay + iv.micros;
}

// Debezium's ZonedTime: the time in UTC, ISO-8601 with a Z.
std::string timetz_utc(int64_t micros, int32_t offset_seconds) {
  constexpr int64_t kDay = temporal::kMicrosPerDay;
  int64_t utc = (micros - int64_t(offset_seconds) * 1000000LL) % kDay;
  if (utc < 0) utc += kDay;
  return format_time(utc) + "Z";
}

std::string_view meta_text(const Record& r, std::string_view name) {
  const Value* v = r.metadata.find(name);
  return v && v->kind() == ValueKind::string ? v->as_text() : std::string_view{};
}

void append_text_or_null(std::string& out, std::string_view s) {
  if (s.empty()) out += "null";
  else append_string(out, s);
}

}  // namespace

bool parse_pg_lsn(std::string_view text, uint64_t* out) noexcept {
  const size_t slash = text.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 >= text.size()) return false;
  uint32_t hi = 0, lo = 0;
  auto a = std::from_chars(text.data(), text.data() + slash, hi, 16);
  auto b = std::from_chars(text.data() + slash + 1, text.data() + text.size(), lo, 16);
  if (a.ec != std::errc() || a.ptr != text.data() + slash) return false;
  if (b.ec != std::errc() || b.ptr != text.data() + text.size()) return false;
  *out = (uint64_t(hi) << 32) | lo;
  return true;
}

void encode_debezium_value(const Value& v, std::string& out) {
  switch (v.kind()) {
    case ValueKind::absent:
    case ValueKind::null: out += "null"; return;
    case ValueKind::date: append_int(out, v.as_date()); return;
    case ValueKind::time:
    case ValueKind::timestamp: append_int(out, v.as_micros()); return;
    case ValueKind::timetz:
      append_string(out, timetz_utc(v.as_micros(), v.tz_offset_seconds()));
      return;
    case ValueKind::timestamptz:  // ISO 8601 in UTC: nothing to escape, written in place
      out += '"';
      temporal::append_timestamptz(out, v.as_micros());
      out += '"';
      return;
    case ValueKind::interval: append_int(out, interval_micros(v.as_interval())); return;
    case ValueKind::json:
      append_string(out, v.as_text());
      return;  // io.debezium.data.Json: a string
    case ValueKind::array: {
      out += '[';
      bool first = true;
      for (const Value& item : v.items()) {
        if (!first) out += ',';
        first = false;
        encode_debezium_value(item, out);
      }
      out += ']';
      return;
    }
    case ValueKind::object: {
      out += '{';
      bool first = true;
      for (const Field& f : v.fields()) {
        if (f.value.is_absent()) continue;  // e.g. unchanged TOAST: not sent
        if (!first) out += ',';
        first = false;
        append_string(out, f.name);
        out += ':';
        encode_debezium_value(f.value, out);
      }
      out += '}';
      return;
    }
    default:
      // bool, integers, doubles (NaN/Infinity as strings), decimal (string), string, bytes
      // (base64), uuid.
      encode_value_json(v, out);
      return;
  }
}

bool encode_key(const Record& r, bool debezium, std::string& out) {
  if (r.key.is_absent() || r.key.is_null()) return false;
  if (debezium) encode_debezium_value(r.key, out);
  else encode_value_json(r.key, out);
  return true;
}

char debezium_op(const Record& r) noexcept {
  switch (r.op) {
    case Operation::snapshot: return 'r';
    case Operation::create: return 'c';
    case Operation::update: return 'u';
    case Operation::remove: return is_truncate(r) ? 't' : 'd';
    case Operation::schema:  // control records never reach the Kafka destination (it declines
    case Operation::marker:  // them: Destination::accepts_control_records)
      break;
  }
  return 'c';
}

void encode_debezium_envelope(const Record& r, const DebeziumSource& src, std::string& out) {
  const char op = debezium_op(r);
  out += "{\"before\":";
  if (op == 'd') {
    // Without a before image (REPLICA IDENTITY DEFAULT) Debezium's before holds the key columns.
    encode_debezium_value(r.before.is_absent() || r.before.is_null() ? r.key : r.before, out);
  } else if (op == 'u' && !r.before.is_absent()) {
    encode_debezium_value(r.before, out);
  } else {
    out += "null";
  }
  out += ",\"after\":";
  if (op == 'd' || op == 't' || r.after.is_absent()) out += "null";
  else encode_debezium_value(r.after, out);

  // source
  std::string_view connector = meta_text(r, "connector");
  if (connector.empty()) connector = "sluice";
  int64_t ts_ms = src.now_ms;
  if (std::string_view ct = meta_text(r, "commit_time"); !ct.empty()) {
    int64_t micros = 0;
    if (parse_timestamptz(ct, &micros)) ts_ms = micros / 1000;
  }
  const std::string_view binlog_file = meta_text(r, "binlog_file");
  const bool mysql = !binlog_file.empty();  // a binlog source: Debezium's MySQL source block
  std::string_view db = meta_text(r, "db");
  if (db.empty()) db = meta_text(r, "database");
  if (db.empty() && mysql) db = meta_text(r, "schema");  // MySQL: the database is the schema
  std::string_view table = meta_text(r, "table");
  if (table.empty()) table = meta_text(r, "opencdc.collection");
  out += ",\"source\":{\"version\":";
  append_string(out, src.version);
  out += ",\"connector\":";
  append_string(out, connector);
  out += ",\"name\":";
  append_string(out, src.name);
  out += ",\"ts_ms\":";
  append_int(out, ts_ms);
  out += ",\"snapshot\":";
  out += op == 'r' ? "\"true\"" : "\"false\"";
  out += ",\"db\":";
  append_text_or_null(out, db);
  out += ",\"sequence\":null";
  if (mysql) {
    out += ",\"table\":";
    append_text_or_null(out, table);
    out += ",\"server_id\":0,\"gtid\":";
    append_text_or_null(out, meta_text(r, "gtid"));
    out += ",\"file\":";
    append_string(out, binlog_file);
    out += ",\"pos\":";
    std::string_view pos = meta_text(r, "binlog_pos");
    int64_t n = 0;
    auto [p, ec] = std::from_chars(pos.data(), pos.data() + pos.size(), n);
    if (!pos.empty() && ec == std::errc() && p == pos.data() + pos.size()) append_int(out, n);
    else out += "0";
    out += ",\"row\":0,\"thread\":null,\"query\":null}";
  } else {
    out += ",\"schema\":";
    append_text_or_null(out, meta_text(r, "schema"));
    out += ",\"table\":";
    append_text_or_null(out, table);
    out += ",\"txId\":";
    {
      std::string_view xid = meta_text(r, "xid");
      int64_t n = 0;
      auto [p, ec] = std::from_chars(xid.data(), xid.data() + xid.size(), n);
      if (!xid.empty() && ec == std::errc() && p == xid.data() + xid.size()) append_int(out, n);
      else out += "null";
    }
    out += ",\"lsn\":";
    {
      uint64_t lsn = 0;
      if (parse_pg_lsn(meta_text(r, "lsn"), &lsn) || parse_pg_lsn(meta_text(r, "commit_lsn"), &lsn))
        append_int(out, int64_t(lsn));
      else out += "null";
    }
    out += ",\"xmin\":null}";
  }
  out += ",\"op\":\"";
  out += op;
  out += "\",\"ts_ms\":";
  append_int(out, src.now_ms);
  out += ",\"transaction\":null}";
}

}  // namespace sluice::kafka
