// Snapshot values (text protocol, session time_zone +00:00) → the same Values the binlog decoder
// produces for each column, so that snapshot and stream records of one row are alike.
#include <fmt/format.h>

#include <charconv>
#include <string>
#include <type_traits>

#include "connectors/mysql/mysql_source_driver.h"
#include "sluice/temporal.h"

namespace sluice::mysql {

// Parses "a,b" labels of enum('a','b') / set('a','b') column types.
std::vector<std::string> parse_labels(std::string_view column_type) {
  std::vector<std::string> out;
  size_t open = column_type.find('(');
  if (open == std::string_view::npos) return out;
  size_t i = open + 1;
  while (i < column_type.size() && column_type[i] == '\'') {
    std::string label;
    ++i;
    while (i < column_type.size()) {
      char c = column_type[i];
      if (c == '\'' && i + 1 < column_type.size() && column_type[i + 1] == '\'') {
        label += '\'';
        i += 2;
        continue;
      }
      if (c == '\\' && i + 1 < column_type.size()) {
        label += column_type[i + 1];
        i += 2;
        continue;
      }
      if (c == '\'') {
        ++i;
        break;
      }
      label += c;
      ++i;
    }
    out.push_back(std::move(label));
    if (i < column_type.size() && column_type[i] == ',') ++i;
  }
  return out;
}

namespace {

bool parse_int(std::string_view s, int64_t* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}
bool parse_uint(std::string_view s, uint64_t* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

// How text_to_value reads a column, from its information_schema DATA_TYPE. Found by the first
// letter, then one or two comparisons: text_to_value runs for every value of a snapshot, and a
// chain of fourteen string comparisons took a quarter of a MySQL snapshot's CPU.
enum class TextKind {
  integer,
  year,
  decimal,
  float32,
  float64,
  bit,
  date,
  datetime,
  timestamp,
  time,
  other
};

TextKind text_kind(std::string_view t) {
  if (t.empty()) return TextKind::other;
  switch (t[0]) {
    case 't':
      if (t == "tinyint") return TextKind::integer;
      if (t == "timestamp") return TextKind::timestamp;
      if (t == "time") return TextKind::time;
      return TextKind::other;
    case 's': return t == "smallint" ? TextKind::integer : TextKind::other;
    case 'm': return t == "mediumint" ? TextKind::integer : TextKind::other;
    case 'i': return t == "int" ? TextKind::integer : TextKind::other;
    case 'b':
      if (t == "bigint") return TextKind::integer;
      if (t == "bit") return TextKind::bit;
      return TextKind::other;
    case 'y': return t == "year" ? TextKind::year : TextKind::other;
    case 'f': return t == "float" ? TextKind::float32 : TextKind::other;
    case 'd':
      if (t == "decimal") return TextKind::decimal;
      if (t == "double") return TextKind::float64;
      if (t == "date") return TextKind::date;
      if (t == "datetime") return TextKind::datetime;
      return TextKind::other;
    default: return TextKind::other;
  }
}

// As the binlog decoder has it: a zero month or day (YYYY-MM-DD[ hh:mm:ss]), in the text of a
// date, datetime or timestamp column.
bool zero_month_or_day(std::string_view s) {
  return s.size() >= 10 && (s.substr(4, 3) == "-00" || s.substr(7, 3) == "-00");
}

// A float or double column's text (as the server prints it); strtod's reading when from_chars
// declines (it never should for server output).
template <typename F>
F parse_floating(std::string_view s) {
  F v{};
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc() && p == s.data() + s.size()) return v;
  const std::string z(s);
  if constexpr (std::is_same_v<F, float>) return std::strtof(z.c_str(), nullptr);
  else return std::strtod(z.c_str(), nullptr);
}

}  // namespace

bool is_numeric_type(std::string_view t) {
  return t == "tinyint" || t == "smallint" || t == "mediumint" || t == "int" || t == "bigint" ||
         t == "decimal" || t == "float" || t == "double" || t == "year";
}

// Converts a snapshot value (text protocol, session time_zone +00:00) to the same Value the binlog
// decoder produces for the column.
// Whether `s` is a zero date of a date, datetime or timestamp column (zero_month_or_day).
bool is_zero_date_text(std::string_view type, std::string_view s) {
  if (type != "date" && type != "datetime" && type != "timestamp") return false;
  return zero_month_or_day(s);
}

Error unrepresentable_value_stop(std::string_view why, bool zero_date) {
  return Error(Errc::data,
               fmt::format("{}; to go on, {}set on_error: dlq with a dlq destination: such records "
                           "then go to the dead-letter queue, with the value as text",
                           why,
                           zero_date ? "set the source's zero_dates: null (zero dates become NULL, "
                                       "as Debezium writes them), or "
                                     : ""));
}

void mark_source_reject(Batch& batch, Record& r, std::string_view why) {
  const uint32_t n = r.metadata.is_object() ? r.metadata.size() : 0;
  ObjectBuilder m = batch.object(n + 1);
  if (n)
    for (const Field& f : r.metadata.fields()) m.add(f.name, f.value);
  m.add(meta::kError, Value::string(batch.copy(why)));
  r.metadata = m.build();
  batch.add_source_reject();
}

Result<Value> text_to_value(const TableSchema& t, size_t i, std::string_view s, Arena& arena,
                            bool zero_dates_as_null) {
  const std::string& type = t.data_types[i];
  const bl::ColumnInfo& ci = t.cols[i];
  auto bad = [&]() {
    return Error(Errc::data, fmt::format("{}.{}.{}: cannot read {} value '{}'", t.db, t.table,
                                         ci.name, type, s));
  };
  const TextKind kind = text_kind(type);
  if (kind == TextKind::integer) {
    if (ci.is_unsigned) {
      uint64_t v;
      if (!parse_uint(s, &v)) return bad();
      return Value::uint64(v);
    }
    int64_t v;
    if (!parse_int(s, &v)) return bad();
    return Value::int64(v);
  }
  if (kind == TextKind::year) {
    int64_t v;
    if (!parse_int(s, &v)) return bad();
    return Value::int64(v);
  }
  if (kind == TextKind::decimal) return Value::decimal(arena.copy(s));
  if (kind == TextKind::float32) return Value::float64(double(parse_floating<float>(s)));
  if (kind == TextKind::float64) return Value::float64(parse_floating<double>(s));
  if (kind == TextKind::bit) {
    uint64_t v = 0;
    for (char c : s) v = (v << 8) | uint8_t(c);
    return Value::uint64(v);
  }
  auto zero_date = [&]() -> Result<Value> {
    if (zero_dates_as_null) return Value::null();
    return Error(Errc::data,
                 fmt::format("{}.{}.{}: zero date '{}' ({}) is no date", quote_identifier(t.db),
                             quote_identifier(t.table), quote_identifier(ci.name), s, type));
  };
  if (kind == TextKind::date) {
    if (zero_month_or_day(s)) return zero_date();
    int32_t d;
    if (!parse_date(s, &d)) return bad();
    return Value::date(d);
  }
  if (kind == TextKind::datetime || kind == TextKind::timestamp) {
    if (zero_month_or_day(s)) return zero_date();
    int64_t us;
    if (!parse_timestamp(s, &us)) return bad();
    return kind == TextKind::timestamp ? Value::timestamptz(us) : Value::timestamp(us);
  }
  if (kind == TextKind::time) {
    // [-]HHH:MM:SS[.ffffff], possibly beyond 24 hours and negative
    int64_t us;
    std::string_view x = s;
    if (!temporal::parse_duration_prefix(x, &us) || !x.empty()) return bad();
    return Value::time(us);
  }
  if (ci.json) return Value::json(arena.copy(s));
  if (ci.text == bl::ColumnInfo::Text::binary) return Value::bytes(arena.copy(s));
  return Value::string(arena.copy(s));
}

}  // namespace sluice::mysql
