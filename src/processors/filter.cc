// filter: keeps or drops records by operation and/or by comparing one field with a constant.
//
//   record ──▶ operation listed? ──no──▶ dropped
//                   │yes
//                   ▼
//           field condition holds? ──▶ kept or dropped by `action`
//
// Dropped records are erased from the batch in one stable pass; the batch position still covers
// them.
#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "processors/builtin.h"
#include "processors/field_path.h"
#include "processors/scalar_text.h"
#include "sluice/temporal.h"

namespace sluice {

namespace {

enum class Cmp { eq, ne, lt, le, gt, ge, exists, missing, in };

constexpr std::array<std::pair<std::string_view, Cmp>, 9> kCmpNames = {{
    {"eq", Cmp::eq},
    {"ne", Cmp::ne},
    {"lt", Cmp::lt},
    {"le", Cmp::le},
    {"gt", Cmp::gt},
    {"ge", Cmp::ge},
    {"exists", Cmp::exists},
    {"missing", Cmp::missing},
    {"in", Cmp::in},
}};

// Options bound to the settings table below (defaults written there, once); finalize() checks how
// they combine and derives what the filter runs on.
struct Options {
  std::optional<std::vector<std::string>> operations;
  std::string field;
  std::string op;
  std::optional<std::string> value;
  std::string action;
  // Derived by finalize.
  uint8_t operation_bits = 0;
  std::optional<FieldPath> path;
  Cmp cmp = Cmp::eq;
  std::vector<std::string> operands;
};

constexpr auto kSettings = settings_table<Options>(
    setting<&Options::operations>(
        "operations",
        "Operations to keep (snapshot, create, update, delete); records with any other are dropped."),
    setting<&Options::field>(
        "field",
        "Field the condition tests: after.NAME, before.NAME, key.NAME, metadata.NAME (a bare NAME means "
        "after.NAME; nested by dots)."),
    setting<&Options::op>(
        "op",
        "Comparison of the field with `value`: numbers numerically, text lexicographically, dates and "
        "times chronologically. A null or missing field equals nothing (only ne holds); exists is true "
        "for null, missing only for an absent field.")
        .one_of("eq,ne,lt,le,gt,ge,exists,missing,in")
        .with_default("eq"),
    setting<&Options::value>(
        "value",
        "Constant to compare with, read as the field's kind; for op in, a comma-separated list."),
    setting<&Options::action>(
        "action",
        "keep: keep the records where the condition holds, drop the others; drop: drop those where it "
        "holds.")
        .one_of("keep,drop")
        .with_default("keep"));

Error bad_setting(std::string_view setting, std::string_view problem) {
  return Error(Errc::config, "filter: " + std::string(setting) + ": " + std::string(problem));
}

template <typename T>
int three_way(T a, T b) noexcept {
  return (a > b) - (a < b);
}

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// strtold of a view; nullopt when it is not a number or is NaN (unordered). long double holds every
// int64/uint64 exactly on the platforms we build for (x87 80-bit, or 128-bit quad on aarch64).
std::optional<long double> to_long_double(std::string_view s) {
  char buf[64];
  std::string big;
  const char* z;
  if (s.size() < sizeof buf) {
    std::memcpy(buf, s.data(), s.size());
    buf[s.size()] = '\0';
    z = buf;
  } else {
    big.assign(s);
    z = big.c_str();
  }
  char* end = nullptr;
  long double v = std::strtold(z, &end);
  if (end == z || *end != '\0' || std::isnan(v)) return std::nullopt;
  return v;
}

// The filter's `value` (or one item of an `in` list), read once in every form a field's kind may
// need, so that a record costs one comparison. Not copyable: `decimal` views `text`.
struct Operand {
  explicit Operand(std::string_view t) : text(t) {
    int64_t i;
    if (parse_int64_text(text, &i)) i64 = i;
    uint64_t u;
    if (parse_uint64_text(text, &u)) u64 = u;
    PlainDecimal d;
    if (parse_plain_decimal(text, &d)) decimal = d;
    double f;
    if (parse_float_text(text, &f)) {
      f64 = f;
      if (std::isinf(f)) approx = f;
      else if (!std::isnan(f)) approx = to_long_double(text);
    }
    bool b;
    if (parse_yaml_bool(text, &b)) boolean = b;
    int32_t days;
    int64_t micros;
    int32_t offset;
    const bool is_date = parse_date(text, &days);
    if (is_date) date = days;
    if (parse_time(text, &micros)) time = micros;
    if (parse_timetz(text, &micros, &offset)) timetz = {micros, offset};
    // A date alone means its midnight; a timestamptz without a zone means UTC.
    if (parse_timestamp(text, &micros)) timestamp = timestamptz = micros;
    else if (is_date) timestamp = timestamptz = int64_t(days) * temporal::kMicrosPerDay;
    if (parse_timestamptz(text, &micros)) timestamptz = micros;
    Interval iv;
    if (parse_interval(text, &iv)) interval = iv;
    std::array<uint8_t, 16> id;
    if (parse_uuid(text, id.data())) uuid = id;
  }
  Operand(const Operand&) = delete;
  Operand& operator=(const Operand&) = delete;

  std::string text;
  std::optional<int64_t> i64;
  std::optional<uint64_t> u64;
  std::optional<PlainDecimal> decimal;  // exact, plain notation only
  std::optional<double> f64;            // nearest double, for float64 fields
  std::optional<long double> approx;    // exponent forms and infinities against exact kinds
  std::optional<bool> boolean;
  std::optional<int32_t> date;
  std::optional<int64_t> time;
  std::optional<std::pair<int64_t, int32_t>> timetz;
  std::optional<int64_t> timestamp;
  std::optional<int64_t> timestamptz;
  std::optional<Interval> interval;
  std::optional<std::array<uint8_t, 16>> uuid;
};

// An integer field against the operand: exact unless the operand has an exponent or is infinite.
template <typename Int>
std::optional<int> compare_integer(Int v, const Operand& o) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  PlainDecimal field;
  if (ec == std::errc() && o.decimal &&
      parse_plain_decimal(std::string_view(buf, size_t(end - buf)), &field))
    return compare_plain_decimal(field, *o.decimal);
  if (o.approx) return three_way(static_cast<long double>(v), *o.approx);
  return std::nullopt;
}

uint8_t operation_bit(Operation op) noexcept { return uint8_t(1u << static_cast<unsigned>(op)); }

// PostgreSQL orders intervals by their span with months of 30 days.
__int128 interval_span(const Interval& iv) noexcept {
  return (__int128(iv.months) * 30 + iv.days) * temporal::kMicrosPerDay + iv.micros;
}

// <0, 0, >0 for field versus operand; nullopt when they cannot be compared (the operand does not
// read as the field's kind, NaN, arrays, objects).
std::optional<int> compare(const Value& v, const Operand& o) {
  switch (v.kind()) {
    case ValueKind::int64:
      if (o.i64) return three_way(v.as_int64(), *o.i64);
      return compare_integer(v.as_int64(), o);
    case ValueKind::uint64:
      if (o.u64) return three_way(v.as_uint64(), *o.u64);
      return compare_integer(v.as_uint64(), o);
    case ValueKind::float64:
      // Read as the nearest double, so `value: 0.1` equals the double 0.1.
      if (!o.f64 || std::isnan(v.as_double()) || std::isnan(*o.f64)) return std::nullopt;
      return three_way(v.as_double(), *o.f64);
    case ValueKind::decimal: {
      PlainDecimal field;
      if (o.decimal && parse_plain_decimal(v.as_text(), &field))
        return compare_plain_decimal(field, *o.decimal);
      std::optional<long double> x =
          to_long_double(v.as_text());  // exponent, Infinity; NaN unordered
      if (!x || !o.approx) return std::nullopt;
      return three_way(*x, *o.approx);
    }
    case ValueKind::string:
    case ValueKind::bytes:
    case ValueKind::json: {
      int c = v.as_text().compare(o.text);
      return (c > 0) - (c < 0);
    }
    case ValueKind::boolean:
      if (!o.boolean) return std::nullopt;
      return three_way(int(v.as_bool()), int(*o.boolean));
    case ValueKind::date:
      if (!o.date) return std::nullopt;
      return three_way(v.as_date(), *o.date);
    case ValueKind::time:
      if (!o.time) return std::nullopt;
      return three_way(v.as_micros(), *o.time);
    case ValueKind::timetz: {
      // By UTC instant, then by offset (as PostgreSQL does), so distinct zones are never equal.
      if (!o.timetz) return std::nullopt;
      auto key = [](int64_t micros, int32_t off) {
        return std::pair(micros - int64_t(off) * 1000000, off);
      };
      auto a = key(v.as_micros(), v.tz_offset_seconds());
      auto b = key(o.timetz->first, o.timetz->second);
      return a < b ? -1 : (b < a ? 1 : 0);
    }
    case ValueKind::timestamp:
      if (!o.timestamp) return std::nullopt;
      return three_way(v.as_micros(), *o.timestamp);
    case ValueKind::timestamptz:
      if (!o.timestamptz) return std::nullopt;
      return three_way(v.as_micros(), *o.timestamptz);
    case ValueKind::interval:
      if (!o.interval) return std::nullopt;
      return three_way(interval_span(v.as_interval()), interval_span(*o.interval));
    case ValueKind::uuid: {
      if (!o.uuid) return std::nullopt;
      int c = std::memcmp(v.uuid_bytes(), o.uuid->data(), 16);  // byte order = canonical text order
      return (c > 0) - (c < 0);
    }
    case ValueKind::absent:
    case ValueKind::null:
    case ValueKind::array:
    case ValueKind::object: break;
  }
  return std::nullopt;
}

bool is_number_kind(ValueKind k) noexcept {
  return k == ValueKind::int64 || k == ValueKind::uint64 || k == ValueKind::float64 ||
         k == ValueKind::decimal;
}

// Whether the operand reads as a number in any form (NaN and infinities included).
bool is_number_text(const Operand& o) noexcept {
  return o.i64 || o.u64 || o.decimal || o.f64 || o.approx;
}

class Filter final : public Processor {
 public:
  Filter(uint8_t operations, std::optional<FieldPath> path, Cmp cmp,
         std::vector<std::unique_ptr<Operand>> operands, bool keep)
      : operations_(operations),
        path_(std::move(path)),
        cmp_(cmp),
        operands_(std::move(operands)),
        keep_(keep) {}

  Status open(const ConnectorContext& ctx) override {
    pipeline_ = ctx.pipeline_id;
    if (ctx.metrics && path_)
      registration_ = ctx.metrics->add({MetricDef::counter(
          "sluice_filter_field_missing_total",
          "Records a filter tested whose part (after, before, key, metadata) lacks the filter's "
          "field; the condition treats them as null.",
          {{"pipeline", ctx.pipeline_id}, {"field", path_->text}}, missing_)});
    return ok_status();
  }

  Status process(Batch& batch) override {
    // erase_if is remove_if + erase: one stable O(n) pass.
    std::erase_if(batch.records(), [this](const Record& r) { return !keeps(r); });
    if (mismatch_) {
      std::string problem = std::move(*mismatch_);
      mismatch_.reset();
      return Error(Errc::config, std::move(problem));
    }
    return ok_status();
  }

 private:
  bool keeps(const Record& r) {
    if (is_control(r.op)) return true;  // schema changes and markers are not rows
    if (operations_ != 0 && (operations_ & operation_bit(r.op)) == 0) return false;
    if (!path_) return true;
    return holds(r) == keep_;
  }

  // The field is missing although its part is there (a delete has no `after`: not counted).
  void note_missing(const Record& r) {
    if (!record_part(r, path_->part).is_object()) return;
    missing_.fetch_add(1, std::memory_order_relaxed);
    if (!warned_) {
      warned_ = true;
      spdlog::warn(
          "pipeline {}: filter: field {} is missing from a record (table {}); it is treated as "
          "null, so only op ne holds for it (counted in sluice_filter_field_missing_total; check "
          "the field name)",
          pipeline_.empty() ? "?" : pipeline_, path_->text,
          r.meta(meta::kTable).empty() ? "?" : r.meta(meta::kTable));
    }
  }

  // A number field against a value that is not a number in any form: no record can ever match,
  // so the filter stops the pipeline (before the checkpoint passes the batch) instead of dropping
  // every record. Other kinds keep "a value that does not read as the field's kind equals
  // nothing" (a NaN is unordered, a text field compares as text).
  void check_number_operands(const Value& v) {
    if (mismatch_ || !is_number_kind(v.kind())) return;
    for (const auto& o : operands_)
      if (is_number_text(*o)) return;
    mismatch_ = "filter: field " + path_->text + " is a number but value '" +
                operands_.front()->text +
                "' does not read as one, so no record can be compared with it (fix `value`, "
                "or filter on a field of that kind)";
  }

  bool holds(const Record& r) {
    const Value v = lookup_field(r, *path_);
    if (cmp_ == Cmp::exists) return !v.is_absent();
    if (cmp_ == Cmp::missing) return v.is_absent();
    if (v.is_absent()) note_missing(r);
    if (v.is_absent() || v.is_null())
      return cmp_ == Cmp::ne;  // null equals nothing, orders nowhere
    if (cmp_ == Cmp::in) {
      bool comparable = false;
      for (const auto& o : operands_) {
        std::optional<int> c = compare(v, *o);
        if (c && *c == 0) return true;
        comparable = comparable || c.has_value();
      }
      if (!comparable) check_number_operands(v);
      return false;
    }
    const std::optional<int> c = compare(v, *operands_.front());
    if (!c) {
      check_number_operands(v);
      return cmp_ == Cmp::ne;
    }
    switch (cmp_) {
      case Cmp::eq: return *c == 0;
      case Cmp::ne: return *c != 0;
      case Cmp::lt: return *c < 0;
      case Cmp::le: return *c <= 0;
      case Cmp::gt: return *c > 0;
      case Cmp::ge: return *c >= 0;
      default: return false;
    }
  }

  uint8_t operations_;  // bit per Operation; 0 = every operation
  std::optional<FieldPath> path_;
  Cmp cmp_;
  std::vector<std::unique_ptr<Operand>> operands_;
  bool keep_;
  std::string pipeline_;
  std::atomic<uint64_t> missing_{0};
  bool warned_ = false;  // once per pipeline and field: each pipeline has its own filter
  std::optional<std::string> mismatch_;
  MetricsRegistry::Registration registration_;  // last: unregisters before missing_ goes
};

// The cross-setting checks, in one place.
Status finalize(Options& o) {
  if (o.operations) {
    for (const std::string& item : *o.operations) {
      // Also accept "create,update" written as one string.
      std::string_view rest = item;
      while (true) {
        size_t comma = rest.find(',');
        std::string_view name = trim(rest.substr(0, comma));
        Operation op;
        if (!parse_operation(name, &op))
          return bad_setting("operations", "unknown operation '" + std::string(name) +
                                               "' (snapshot, create, update, delete)");
        o.operation_bits |= operation_bit(op);
        if (comma == std::string_view::npos) break;
        rest = rest.substr(comma + 1);
      }
    }
    if (o.operation_bits == 0)
      return bad_setting("operations", "empty list would drop every record");
  }

  if (!o.field.empty()) {
    Result<FieldPath> p = parse_field_path(o.field);
    if (!p) return p.error().with_context("filter: field: ");
    o.path = std::move(*p);
  }

  auto cmp_it = std::find_if(kCmpNames.begin(), kCmpNames.end(),
                             [&](const auto& e) { return e.first == o.op; });
  if (cmp_it == kCmpNames.end())
    return bad_setting(
        "op", "unknown comparison '" + o.op + "' (eq, ne, lt, le, gt, ge, exists, missing, in)");
  o.cmp = cmp_it->second;

  if (o.action != "keep" && o.action != "drop")
    return bad_setting("action", "unknown action '" + o.action + "' (keep, drop)");

  if (!o.path) {
    if (o.operation_bits == 0)
      return Error(Errc::config, "filter: needs `operations` or `field` (or both)");
    if (o.value) return bad_setting("value", "compares a field: set `field` too");
    // Without a condition there is nothing for `drop` to apply to; say so rather than keep only the
    // listed operations, which is the opposite of what `action: drop` reads like.
    if (o.action == "drop")
      return bad_setting("action",
                         "drop needs a `field` condition; to drop operations, list the ones "
                         "to keep in `operations`");
  } else if (o.cmp == Cmp::exists || o.cmp == Cmp::missing) {
    if (o.value) return bad_setting("value", "has no effect with op " + o.op + " (remove it)");
  } else {
    if (o.path->whole_part())
      return bad_setting("field", "'" + o.path->text + "' names the whole " +
                                      std::string(record_part_name(o.path->part)) +
                                      "; only op exists or missing applies to it");
    if (!o.value) return bad_setting("value", "required with op " + o.op);
    if (o.cmp == Cmp::in) {
      std::string_view rest = *o.value;
      while (true) {
        size_t comma = rest.find(',');
        o.operands.emplace_back(trim(rest.substr(0, comma)));
        if (comma == std::string_view::npos) break;
        rest = rest.substr(comma + 1);
      }
    } else {
      o.operands.push_back(*o.value);
    }
    for (const std::string& operand : o.operands)
      if (operand.empty())
        return bad_setting("value", o.cmp == Cmp::in ? "an empty item in the list of op in"
                                                     : "empty (give the constant to compare with)");
    // Metadata values are always text: an ordering against a number would compare the digits
    // lexicographically ("10" < "9"), never numerically.
    const bool ordering =
        o.cmp == Cmp::lt || o.cmp == Cmp::le || o.cmp == Cmp::gt || o.cmp == Cmp::ge;
    double number = 0;
    if (ordering && o.path->part == RecordPart::metadata &&
        parse_float_text(o.operands.front(), &number))
      return bad_setting("op", "metadata values are text, so " + o.op + " " + o.operands.front() +
                                   " would compare digits as text, never as numbers (use eq, ne "
                                   "or in on metadata)");
  }
  // A part the listed operations never carry: the condition could never see the field.
  if (o.path && o.operation_bits != 0) {
    const uint8_t with_before = operation_bit(Operation::update) | operation_bit(Operation::remove);
    const uint8_t with_after = operation_bit(Operation::snapshot) |
                               operation_bit(Operation::create) | operation_bit(Operation::update);
    if (o.path->part == RecordPart::before && (o.operation_bits & with_before) == 0)
      return bad_setting("field", "'" + o.path->text +
                                      "': records of the listed operations have no `before` (only "
                                      "update and delete do); filter on after or key");
    if (o.path->part == RecordPart::after && (o.operation_bits & with_after) == 0)
      return bad_setting(
          "field", "'" + o.path->text + "': deletes have no `after`; filter on before or key");
  }
  return ok_status();
}

Result<std::unique_ptr<Processor>> make_filter(const Settings& s) {
  SLUICE_TRY_ASSIGN(Options o, bind_settings(kSettings, s, "filter"));
  SLUICE_TRY(finalize(o));
  std::vector<std::unique_ptr<Operand>> operands;
  for (const std::string& text : o.operands) operands.push_back(std::make_unique<Operand>(text));
  std::unique_ptr<Processor> p = std::make_unique<Filter>(
      o.operation_bits, std::move(o.path), o.cmp, std::move(operands), o.action == "keep");
  return p;
}

}  // namespace

ProcessorSpec filter_processor() {
  return {"filter", "Keeps or drops records by operation or by a field condition.", kSettings,
          make_filter};
}

}  // namespace sluice
