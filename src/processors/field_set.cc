// field.set: sets (or adds) one field of every record to a constant value.
#include <simdjson.h>

#include <memory>
#include <string>

#include "processors/builtin.h"
#include "processors/field_path.h"
#include "processors/scalar_text.h"

namespace sluice {

namespace {

struct Options {
  std::string field;
  std::string value;
  std::string type;
};

constexpr auto kSettings = settings_table<Options>(
    setting<&Options::field>(
        "field",
        "Field to set: after.NAME, before.NAME, key.NAME or metadata.NAME; a bare NAME means after.NAME; "
        "nested objects by dots (after.address.city). Records without the enclosing object are left "
        "unchanged (e.g. after of a delete).")
        .mandatory(),
    setting<&Options::value>(
        "value",
        "The value as text. With type auto it reads like a YAML scalar: null, true/false, an integer, a "
        "float, else a string. Always stored as a string on metadata.")
        .mandatory(),
    setting<&Options::type>("type", "Kind to store `value` as; auto infers it from the text.")
        .one_of("auto,string,int64,float64,bool,decimal,json,null")
        .with_default("auto"));

Error bad_setting(std::string_view setting, std::string_view problem) {
  return Error(Errc::config, "field.set: " + std::string(setting) + ": " + std::string(problem));
}

// The value `text` denotes as `type`; text-carrying kinds view `text`.
Result<Value> typed_value(std::string_view type, std::string_view text) {
  auto mismatch = [&] {
    return bad_setting("value", "'" + std::string(text) + "' is not a valid " + std::string(type));
  };
  if (type == "auto") return parse_scalar_value(text);
  if (type == "string") return Value::string(text);
  if (type == "null") return Value::null();
  if (type == "int64") {
    int64_t i;
    if (!parse_int64_text(text, &i)) return mismatch();
    return Value::int64(i);
  }
  if (type == "float64") {
    double d;
    if (!parse_float_text(text, &d)) return mismatch();
    return Value::float64(d);
  }
  if (type == "bool") {
    bool b;
    if (!parse_yaml_bool(text, &b)) return mismatch();
    return Value::boolean(b);
  }
  if (type == "decimal") {
    if (!is_decimal_text(text)) return mismatch();
    return Value::decimal(text);
  }
  if (type == "json") {
    // Checked once here so that a destination never receives a json value that is not JSON.
    simdjson::dom::parser parser;
    simdjson::padded_string doc(text);
    if (parser.parse(doc).error() != simdjson::SUCCESS) return mismatch();
    return Value::json(text);
  }
  return bad_setting("type", "unknown type '" + std::string(type) +
                                 "' (auto, string, int64, float64, bool, decimal, json, null)");
}

class FieldSet final : public Processor {
 public:
  FieldSet(FieldPath path, std::string text, Value value)
      : path_(std::move(path)), text_(std::move(text)), value_(value) {}

  Status process(Batch& batch) override {
    Arena& arena = batch.arena();
    // Name and text are copied into each batch once: records must not point into the processor,
    // which may be torn down while a destination or the DLQ still holds the batch.
    const std::string_view name = arena.copy(path_.leaf());
    const Value value =
        path_.part == RecordPart::metadata ? Value::string(arena.copy(text_)) : bind(arena);
    auto set = [&](const Value& obj) -> std::optional<Value> {
      return with_field(arena, obj, name, value);
    };

    for (Record& r : batch.records()) {
      if (is_control(r.op)) continue;  // schema changes and markers pass unchanged
      Value& root = record_part(r, path_.part);
      // Absent metadata is an empty map, not a missing object; an absent key/before/after is left
      // so.
      if (path_.part == RecordPart::metadata && root.is_absent()) {
        root = with_field(arena, Value(), name, value);
        continue;
      }
      edit_object(arena, root, path_.parent(), set);
    }
    return ok_status();
  }

 private:
  Value bind(Arena& arena) const {
    switch (value_.kind()) {
      case ValueKind::string: return Value::string(arena.copy(text_));
      case ValueKind::decimal: return Value::decimal(arena.copy(text_));
      case ValueKind::json: return Value::json(arena.copy(text_));
      default: return value_;
    }
  }

  FieldPath path_;
  std::string text_;
  Value value_;  // its text, if any, is rebound to a copy of text_ per batch
};

Result<std::unique_ptr<Processor>> make_field_set(const Settings& s) {
  SLUICE_TRY_ASSIGN(Options o, bind_settings(kSettings, s, "field.set"));
  Result<FieldPath> path = parse_field_path(o.field);
  if (!path) return path.error().with_context("field.set: field: ");
  if (path->whole_part())
    return bad_setting("field", "'" + path->text + "' names the whole " +
                                    std::string(record_part_name(path->part)) +
                                    "; name a field in it");
  Result<Value> value = typed_value(o.type, o.value);
  if (!value) return std::move(value).error();
  std::unique_ptr<Processor> p =
      std::make_unique<FieldSet>(std::move(*path), std::move(o.value), *value);
  return p;
}

}  // namespace

ProcessorSpec field_set_processor() {
  return {"field.set", "Sets or adds a field to a constant value.", kSettings, make_field_set};
}

}  // namespace sluice
