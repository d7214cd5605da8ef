#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "processors/builtin.h"
#include "processors/field_path.h"
#include "processors/scalar_text.h"
#include "sluice/batch.h"
#include "sluice/connector.h"
#include "sluice/metrics.h"
#include "sluice/registry.h"
#include "sluice/schema_change.h"
#include "sluice/settings.h"

namespace sluice {
namespace {

using Text = std::map<std::string, std::string>;

std::unique_ptr<Processor> make(const ProcessorSpec& spec, const Text& text) {
  Settings s;
  std::optional<std::string> err = settings_from_text(spec.settings, text, &s);
  EXPECT_FALSE(err) << *err;
  Result<std::unique_ptr<Processor>> p = spec.make(s);
  EXPECT_TRUE(p.ok()) << p.error().message();
  return p.ok() ? std::move(p).value() : nullptr;
}

// The factory's error for settings that pass type validation but not the processor's own.
std::string make_error(const ProcessorSpec& spec, const Text& text) {
  Settings s;
  std::optional<std::string> err = settings_from_text(spec.settings, text, &s);
  EXPECT_FALSE(err) << *err;
  Result<std::unique_ptr<Processor>> p = spec.make(s);
  if (p.ok()) return "<no error>";
  EXPECT_EQ(p.error().code(), Errc::config);
  EXPECT_EQ(p.error().message().find('\n'), std::string::npos);
  return p.error().message();
}

void run(Processor& p, Batch& b) {
  Status st = p.process(b);
  ASSERT_TRUE(st.ok()) << st.error().message();
}

// {"id": 1, "name": "ada", "address": {"city": "Paris", "zip": "75001"}}
Value person(Batch& b, int64_t id = 1, std::string_view name = "ada") {
  Value address =
      b.object(2).add("city", Value::string("Paris")).add("zip", Value::string("75001")).build();
  return b.object(3)
      .add("id", Value::int64(id))
      .add("name", Value::string(name))
      .add("address", address)
      .build();
}

Record& add_record(Batch& b, Operation op, Value after, Value before = Value()) {
  Record& r = b.add();
  r.op = op;
  r.key = b.object(1).add("id", after.is_object() ? *after.find("id") : Value::int64(0)).build();
  r.before = before;
  r.after = after;
  r.metadata = b.object(2)
                   .add("table", Value::string("people"))
                   .add("opencdc.readAt", Value::string("17"))
                   .build();
  return r;
}

std::vector<std::string_view> names(const Value& obj) {
  std::vector<std::string_view> out;
  for (const Field& f : obj.fields()) out.push_back(f.name);
  return out;
}

using Names = std::vector<std::string_view>;

FieldPath path(std::string_view text) { return parse_field_path(text).value(); }

// ---------------------------------------------------------------- field paths

TEST(FieldPath, ParsesPartsBareNamesNestingAndMetadataKeysWithDots) {
  Result<FieldPath> p = parse_field_path("after.address.city");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->part, RecordPart::after);
  EXPECT_EQ(p->names, (std::vector<std::string>{"address", "city"}));
  EXPECT_EQ(p->parent().size(), 1u);
  EXPECT_EQ(p->leaf(), "city");

  p = parse_field_path("salary");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->part, RecordPart::after);
  EXPECT_EQ(p->names, std::vector<std::string>{"salary"});

  p = parse_field_path("key.id");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->part, RecordPart::key);

  p = parse_field_path("before.x");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->part, RecordPart::before);

  p = parse_field_path("metadata.opencdc.readAt");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->part, RecordPart::metadata);
  EXPECT_EQ(p->names, std::vector<std::string>{"opencdc.readAt"});

  p = parse_field_path("before");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->part, RecordPart::before);
  EXPECT_TRUE(p->whole_part());
}

TEST(FieldPath, RejectsBadPaths) {
  for (std::string_view bad : {"", ".x", "after.", "after..x", "payload.x", "after.x."}) {
    Result<FieldPath> p = parse_field_path(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.error().code(), Errc::config);
  }
  EXPECT_NE(parse_field_path("payload.x").error().message().find("payload"), std::string::npos);
}

TEST(FieldPath, LooksUpNestedFieldsAndReportsAbsence) {
  Batch b;
  Record& r = add_record(b, Operation::update, person(b));
  EXPECT_EQ(lookup_field(r, path("after.address.city")), Value::string("Paris"));
  EXPECT_TRUE(lookup_field(r, path("after.address.country")).is_absent());
  EXPECT_TRUE(lookup_field(r, path("after.id.x")).is_absent());  // through a non-object
  EXPECT_TRUE(lookup_field(r, path("before.id")).is_absent());
  EXPECT_EQ(lookup_field(r, path("metadata.opencdc.readAt")), Value::string("17"));
}

// ---------------------------------------------------------------- scalar text

TEST(ScalarText, ReadsYamlLikeScalars) {
  EXPECT_EQ(parse_scalar_value("null"), Value::null());
  EXPECT_EQ(parse_scalar_value("~"), Value::null());
  EXPECT_EQ(parse_scalar_value("True"), Value::boolean(true));
  EXPECT_EQ(parse_scalar_value("false"), Value::boolean(false));
  EXPECT_EQ(parse_scalar_value("42"), Value::int64(42));
  EXPECT_EQ(parse_scalar_value("-7"), Value::int64(-7));
  EXPECT_EQ(parse_scalar_value("0x1F"), Value::int64(31));
  EXPECT_EQ(parse_scalar_value("-9223372036854775808"),
            Value::int64(std::numeric_limits<int64_t>::min()));
  EXPECT_EQ(parse_scalar_value("18446744073709551615"),
            Value::uint64(std::numeric_limits<uint64_t>::max()));
  EXPECT_EQ(parse_scalar_value("123456789012345678901234567890"),
            Value::decimal("123456789012345678901234567890"));
  EXPECT_EQ(parse_scalar_value("3.5"), Value::float64(3.5));
  EXPECT_EQ(parse_scalar_value("1e3"), Value::float64(1000.0));
  EXPECT_EQ(parse_scalar_value("-.inf"), Value::float64(-std::numeric_limits<double>::infinity()));
  EXPECT_EQ(parse_scalar_value("hello"), Value::string("hello"));
  EXPECT_EQ(parse_scalar_value("tRUE"), Value::string("tRUE"));
  EXPECT_EQ(parse_scalar_value(""), Value::string(""));
  EXPECT_EQ(parse_scalar_value("1.2.3"), Value::string("1.2.3"));
}

TEST(ScalarText, ComparesPlainDecimalsExactly) {
  auto cmp = [](std::string_view a, std::string_view b) {
    PlainDecimal x, y;
    EXPECT_TRUE(parse_plain_decimal(a, &x)) << a;
    EXPECT_TRUE(parse_plain_decimal(b, &y)) << b;
    return compare_plain_decimal(x, y);
  };
  EXPECT_EQ(cmp("0.10", "0.1"), 0);
  EXPECT_EQ(cmp("-0", "0.000"), 0);
  EXPECT_EQ(cmp("007", "7"), 0);
  EXPECT_LT(cmp("0.1", "0.12"), 0);
  EXPECT_GT(cmp("10", "9.999"), 0);
  EXPECT_LT(cmp("-10", "-9.5"), 0);
  EXPECT_LT(cmp("12345678901234567890.1", "12345678901234567890.10000001"), 0);
  PlainDecimal d;
  EXPECT_FALSE(parse_plain_decimal("1e5", &d));
  EXPECT_FALSE(parse_plain_decimal(".", &d));
}

// ---------------------------------------------------------------- field.set

TEST(FieldSet, ReplacesAnExistingFieldInPlaceAndAddsANewOneAtTheEnd) {
  Batch b;
  add_record(b, Operation::create, person(b));
  auto replace = make(field_set_processor(), {{"field", "after.name"}, {"value", "grace"}});
  auto add = make(field_set_processor(), {{"field", "country"}, {"value", "FR"}});
  run(*replace, b);
  run(*add, b);
  const Value& after = b.records()[0].after;
  EXPECT_EQ(names(after), (Names{"id", "name", "address", "country"}));
  EXPECT_EQ(*after.find("name"), Value::string("grace"));
  EXPECT_EQ(*after.find("country"), Value::string("FR"));
}

TEST(FieldSet, LeavesTheOriginalValueUntouched) {
  Batch b;
  Value original = person(b);
  add_record(b, Operation::create, original);
  run(*make(field_set_processor(), {{"field", "after.address.city"}, {"value", "Lyon"}}), b);
  EXPECT_EQ(*original.find("address")->find("city"), Value::string("Paris"));
  EXPECT_EQ(*b.records()[0].after.find("address")->find("city"), Value::string("Lyon"));
  EXPECT_EQ(*b.records()[0].after.find("address")->find("zip"), Value::string("75001"));
}

TEST(FieldSet, InfersTheKindFromTheText) {
  const std::vector<std::pair<std::string, Value>> cases = {
      {"null", Value::null()},
      {"true", Value::boolean(true)},
      {"42", Value::int64(42)},
      {"-2.5", Value::float64(-2.5)},
      {"hello world", Value::string("hello world")},
  };
  for (const auto& [text, want] : cases) {
    Batch b;
    add_record(b, Operation::create, person(b));
    run(*make(field_set_processor(), {{"field", "after.v"}, {"value", text}}), b);
    EXPECT_EQ(*b.records()[0].after.find("v"), want) << text;
  }
}

TEST(FieldSet, ForcesTheKindWithType) {
  const std::vector<std::tuple<std::string, std::string, Value>> cases = {
      {"string", "42", Value::string("42")},
      {"int64", "-42", Value::int64(-42)},
      {"float64", "42", Value::float64(42.0)},
      {"bool", "FALSE", Value::boolean(false)},
      {"decimal", "12.340", Value::decimal("12.340")},
      {"json", "{\"a\": [1, 2]}", Value::json("{\"a\": [1, 2]}")},
      {"null", "anything", Value::null()},
  };
  for (const auto& [type, text, want] : cases) {
    Batch b;
    add_record(b, Operation::create, person(b));
    run(*make(field_set_processor(), {{"field", "after.v"}, {"value", text}, {"type", type}}), b);
    EXPECT_EQ(*b.records()[0].after.find("v"), want) << type;
  }
}

TEST(FieldSet, RejectsAValueThatIsNotOfTheForcedType) {
  for (auto [type, text] : {std::pair{"int64", "4.5"},
                            {"int64", "99999999999999999999"},
                            {"float64", "x"},
                            {"bool", "yes please"},
                            {"decimal", "12,5"},
                            {"json", "{a:"}}) {
    std::string err =
        make_error(field_set_processor(), {{"field", "after.v"}, {"value", text}, {"type", type}});
    EXPECT_NE(err.find("field.set: value:"), std::string::npos) << err;
  }
}

TEST(FieldSet, ValidatesTheFieldPathAndType) {
  EXPECT_NE(make_error(field_set_processor(), {{"field", "payload.x"}, {"value", "1"}})
                .find("field.set: field:"),
            std::string::npos);
  EXPECT_NE(
      make_error(field_set_processor(), {{"field", "after"}, {"value", "1"}}).find("whole after"),
      std::string::npos);
  Settings s;
  s.set("field", std::string("after.x"));
  s.set("value", std::string("1"));
  s.set("type", std::string("money"));
  Result<std::unique_ptr<Processor>> p = field_set_processor().make(s);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message().find("field.set: type:"), std::string::npos);
}

TEST(FieldSet, SetsNestedFieldsAndLeavesRecordsWithoutTheEnclosingObject) {
  Batch b;
  add_record(b, Operation::create, person(b));
  Record& flat = add_record(b, Operation::create, b.object(1).add("id", Value::int64(2)).build());
  Value flat_after = flat.after;
  run(*make(field_set_processor(), {{"field", "after.address.country"}, {"value", "FR"}}), b);
  const Value* address = b.records()[0].after.find("address");
  EXPECT_EQ(names(*address), (Names{"city", "zip", "country"}));
  EXPECT_EQ(names(b.records()[0].after), (Names{"id", "name", "address"}));
  EXPECT_EQ(b.records()[1].after, flat_after);  // no address object to set it in
}

TEST(FieldSet, LeavesAnAbsentAfterOfADeleteAbsent) {
  Batch b;
  Record& r = add_record(b, Operation::remove, Value(), person(b));
  r.after = Value();
  run(*make(field_set_processor(), {{"field", "after.name"}, {"value", "x"}}), b);
  EXPECT_TRUE(b.records()[0].after.is_absent());
}

TEST(FieldSet, SetsKeyAndBeforeFields) {
  Batch b;
  add_record(b, Operation::update, person(b), person(b));
  run(*make(field_set_processor(), {{"field", "key.tenant"}, {"value", "7"}}), b);
  run(*make(field_set_processor(), {{"field", "before.name"}, {"value", "old"}}), b);
  EXPECT_EQ(*b.records()[0].key.find("tenant"), Value::int64(7));
  EXPECT_EQ(*b.records()[0].before.find("name"), Value::string("old"));
  EXPECT_EQ(*b.records()[0].after.find("name"), Value::string("ada"));
}

TEST(FieldSet, StoresStringsOnMetadataAndCreatesAbsentMetadata) {
  Batch b;
  add_record(b, Operation::create, person(b));
  Record& bare = add_record(b, Operation::create, person(b));
  bare.metadata = Value();
  run(*make(field_set_processor(), {{"field", "metadata.opencdc.readAt"}, {"value", "42"}}), b);
  run(*make(field_set_processor(), {{"field", "metadata.team"}, {"value", "null"}}), b);
  EXPECT_EQ(b.records()[0].meta("opencdc.readAt"), "42");
  EXPECT_EQ(b.records()[0].metadata.find("opencdc.readAt")->kind(), ValueKind::string);
  EXPECT_EQ(*b.records()[0].metadata.find("team"), Value::string("null"));
  EXPECT_EQ(names(b.records()[0].metadata), (Names{"table", "opencdc.readAt", "team"}));
  EXPECT_EQ(names(b.records()[1].metadata), (Names{"opencdc.readAt", "team"}));
}

TEST(FieldSet, BatchOutlivesTheProcessor) {
  Batch b;
  add_record(b, Operation::create, person(b));
  {
    auto p = make(field_set_processor(),
                  {{"field", "after.long_name"}, {"value", std::string(100, 'z')}});
    run(*p, b);
  }  // the processor's strings are gone; the batch holds its own copies
  EXPECT_EQ(*b.records()[0].after.find("long_name"), Value::string(std::string(100, 'z')));
}

// ---------------------------------------------------------------- field.rename

TEST(FieldRename, RenamesInPlaceAndIgnoresMissingSources) {
  Batch b;
  add_record(b, Operation::create, person(b));
  add_record(b, Operation::create, b.object(1).add("id", Value::int64(2)).build());
  run(*make(field_rename_processor(),
            {{"mapping", "{after.name: full_name, after.missing: other}"}}),
      b);
  EXPECT_EQ(names(b.records()[0].after), (Names{"id", "full_name", "address"}));
  EXPECT_EQ(*b.records()[0].after.find("full_name"), Value::string("ada"));
  EXPECT_EQ(names(b.records()[1].after), (Names{"id"}));
}

TEST(FieldRename, ReplacesAnExistingFieldOfTheNewName) {
  Batch b;
  add_record(b, Operation::create, person(b));
  run(*make(field_rename_processor(), {{"mapping", "{name: id}"}}), b);
  EXPECT_EQ(names(b.records()[0].after), (Names{"id", "address"}));
  EXPECT_EQ(*b.records()[0].after.find("id"), Value::string("ada"));
}

TEST(FieldRename, RenamesWithinOneObjectTogether) {
  Batch b;
  add_record(b, Operation::create, person(b));
  run(*make(field_rename_processor(), {{"mapping", "{after.id: name, after.name: id}"}}), b);
  EXPECT_EQ(names(b.records()[0].after), (Names{"name", "id", "address"}));
  EXPECT_EQ(*b.records()[0].after.find("name"), Value::int64(1));
  EXPECT_EQ(*b.records()[0].after.find("id"), Value::string("ada"));
}

TEST(FieldRename, RenamesNestedKeyBeforeAndMetadataFields) {
  Batch b;
  add_record(b, Operation::update, person(b), person(b));
  run(*make(field_rename_processor(),
            {{"mapping",
              "{after.address.city: town, key.id: pk, before.name: old_name, "
              "metadata.opencdc.readAt: read.at}"}}),
      b);
  const Record& r = b.records()[0];
  EXPECT_EQ(names(*r.after.find("address")), (Names{"town", "zip"}));
  EXPECT_EQ(names(r.key), (Names{"pk"}));
  EXPECT_EQ(names(r.before), (Names{"id", "old_name", "address"}));
  EXPECT_EQ(names(r.after), (Names{"id", "name", "address"}));
  EXPECT_EQ(names(r.metadata), (Names{"table", "read.at"}));
}

TEST(FieldRename, LeavesAbsentPartsAbsent) {
  Batch b;
  add_record(b, Operation::remove, Value(), person(b));
  run(*make(field_rename_processor(), {{"mapping", "{after.name: n}"}}), b);
  EXPECT_TRUE(b.records()[0].after.is_absent());
  EXPECT_EQ(names(b.records()[0].before), (Names{"id", "name", "address"}));
}

TEST(FieldRename, ValidatesTheMapping) {
  auto err = [](std::string mapping) {
    return make_error(field_rename_processor(), {{"mapping", mapping}});
  };
  EXPECT_NE(err("{after.name: after.full_name}").find("field.rename: mapping:"), std::string::npos);
  EXPECT_NE(err("{payload.name: n}").find("field.rename: mapping:"), std::string::npos);
  EXPECT_NE(err("{after: n}").find("whole after"), std::string::npos);
  EXPECT_NE(err("{a: x, b: x}").find("'x'"), std::string::npos);
  EXPECT_NE(err("{a: x, after.a: y}").find("twice"), std::string::npos);
  EXPECT_NE(err("{a: ''}").find("empty"), std::string::npos);
}

// ---------------------------------------------------------------- field.exclude

Record& add_schema_change(Batch& b, const SchemaChange& c) {
  Record& r = b.add();
  set_schema_change(b, r, c);
  r.metadata = b.object(1).add("table", Value::string("people")).build();
  return r;
}
SchemaChange change(SchemaChangeKind kind, std::string_view column, std::string_view to = "") {
  SchemaChange c;
  c.kind = kind;
  c.column = column;
  c.to = to;
  c.type = "text";
  return c;
}

TEST(FieldExclude, DropsTheSchemaChangesOfExcludedColumnsAndRenamesIntoThemBecomeDrops) {
  Batch b;
  add_schema_change(b, change(SchemaChangeKind::add_column, "salary"));
  add_schema_change(b, change(SchemaChangeKind::add_column, "name"));
  add_record(b, Operation::create, person(b));
  add_schema_change(b, change(SchemaChangeKind::rename_column, "salary", "pay"));
  add_schema_change(b, change(SchemaChangeKind::rename_column, "name", "secret"));
  Record& marker = b.add();
  marker.op = Operation::marker;
  run(*make(field_exclude_processor(), {{"fields", "[after.salary, after.secret, before.name]"}}),
      b);
  ASSERT_EQ(b.size(), 4u);
  EXPECT_EQ(schema_change_of(b.records()[0]).value().column, "name");
  EXPECT_EQ(b.records()[1].op, Operation::create);
  const SchemaChange drop = schema_change_of(b.records()[2]).value();
  EXPECT_EQ(drop.kind, SchemaChangeKind::drop_column);
  EXPECT_EQ(drop.column, "name");
  EXPECT_EQ(b.records()[3].op, Operation::marker);
}

TEST(FieldRename, RenamesTheColumnsOfSchemaChangesLikeTheFields) {
  Batch b;
  add_schema_change(b, change(SchemaChangeKind::add_column, "name"));
  add_schema_change(b, change(SchemaChangeKind::rename_column, "name", "nick"));
  add_schema_change(b, change(SchemaChangeKind::drop_column, "other"));
  run(*make(field_rename_processor(), {{"mapping", "{after.name: full_name, after.nick: alias}"}}),
      b);
  EXPECT_EQ(schema_change_of(b.records()[0]).value().column, "full_name");
  const SchemaChange rename = schema_change_of(b.records()[1]).value();
  EXPECT_EQ(rename.column, "full_name");
  EXPECT_EQ(rename.to, "alias");
  EXPECT_EQ(schema_change_of(b.records()[2]).value().column, "other");
}

TEST(FieldExclude, RemovesFieldsFromEveryPart) {
  Batch b;
  add_record(b, Operation::update, person(b), person(b));
  run(*make(
          field_exclude_processor(),
          {{"fields",
            "[name, before.id, key.id, metadata.opencdc.readAt, after.address.zip, after.nope]"}}),
      b);
  const Record& r = b.records()[0];
  EXPECT_EQ(names(r.after), (Names{"id", "address"}));
  EXPECT_EQ(names(*r.after.find("address")), (Names{"city"}));
  EXPECT_TRUE(r.after.find("name") == nullptr);
  EXPECT_EQ(names(r.before), (Names{"name", "address"}));
  EXPECT_EQ(r.key.size(), 0u);
  EXPECT_EQ(names(r.metadata), (Names{"table"}));
}

TEST(FieldExclude, RemovesWholePartsAndIgnoresAbsentOnes) {
  Batch b;
  add_record(b, Operation::update, person(b), person(b));
  add_record(b, Operation::remove, Value(), person(b));
  run(*make(field_exclude_processor(), {{"fields", "[before, after.name]"}}), b);
  EXPECT_TRUE(b.records()[0].before.is_absent());
  EXPECT_EQ(names(b.records()[0].after), (Names{"id", "address"}));
  EXPECT_TRUE(b.records()[1].before.is_absent());
  EXPECT_TRUE(b.records()[1].after.is_absent());
}

TEST(FieldExclude, SharesUntouchedObjects) {
  Batch b;
  add_record(b, Operation::create, person(b));
  const Value before_run = b.records()[0].after;
  run(*make(field_exclude_processor(), {{"fields", "after.nope"}}), b);
  // Nothing removed: the very same field array, no copy.
  EXPECT_EQ(b.records()[0].after.fields().data(), before_run.fields().data());
}

TEST(FieldExclude, ValidatesPaths) {
  EXPECT_NE(make_error(field_exclude_processor(), {{"fields", "[after.x, payload.y]"}})
                .find("field.exclude: fields:"),
            std::string::npos);
  EXPECT_NE(make_error(field_exclude_processor(), {{"fields", "[after..y]"}})
                .find("field.exclude: fields:"),
            std::string::npos);
}

// ---------------------------------------------------------------- filter

// One record per operation with after = {n: i}; returns the ids (n) kept.
std::vector<int64_t> kept(Processor& p, Batch& b) {
  run(p, b);
  std::vector<int64_t> out;
  for (const Record& r : b.records()) {
    const Value& image = r.after.is_absent() ? r.before : r.after;
    out.push_back(image.find("n")->as_int64());
  }
  return out;
}

void add_numbered(Batch& b, Operation op, int64_t n) {
  Record& r = b.add();
  r.op = op;
  Value image = b.object(1).add("n", Value::int64(n)).build();
  if (op == Operation::remove) r.before = image;
  else r.after = image;
}

TEST(Filter, KeepsListedOperations) {
  Batch b;
  add_numbered(b, Operation::snapshot, 0);
  add_numbered(b, Operation::create, 1);
  add_numbered(b, Operation::update, 2);
  add_numbered(b, Operation::remove, 3);
  add_numbered(b, Operation::create, 4);
  EXPECT_EQ(kept(*make(filter_processor(), {{"operations", "[create, delete]"}}), b),
            (std::vector<int64_t>{1, 3, 4}));
}

TEST(Filter, AcceptsOperationsAsOneCommaSeparatedString) {
  Batch b;
  add_numbered(b, Operation::snapshot, 0);
  add_numbered(b, Operation::update, 1);
  add_numbered(b, Operation::remove, 2);
  EXPECT_EQ(kept(*make(filter_processor(), {{"operations", "snapshot,update"}}), b),
            (std::vector<int64_t>{0, 1}));
}

TEST(Filter, RejectsUnknownOperationsAndIncompleteConditions) {
  EXPECT_NE(make_error(filter_processor(), {{"operations", "[create, insert]"}})
                .find("filter: operations:"),
            std::string::npos);
  EXPECT_NE(make_error(filter_processor(), {}).find("filter:"), std::string::npos);
  EXPECT_NE(make_error(filter_processor(), {{"field", "after.x"}}).find("filter: value:"),
            std::string::npos);
  EXPECT_NE(make_error(filter_processor(), {{"field", "payload.x"}, {"value", "1"}})
                .find("filter: field:"),
            std::string::npos);
  EXPECT_NE(
      make_error(filter_processor(), {{"field", "after"}, {"value", "1"}}).find("filter: field:"),
      std::string::npos);
  EXPECT_NE(make_error(filter_processor(), {{"operations", "delete"}, {"action", "drop"}})
                .find("filter: action:"),
            std::string::npos);
  EXPECT_NE(make_error(filter_processor(), {{"operations", "delete"}, {"value", "3"}})
                .find("filter: value:"),
            std::string::npos);
  Settings s;
  s.set("field", std::string("after.x"));
  s.set("op", std::string("like"));
  s.set("value", std::string("1"));
  Result<std::unique_ptr<Processor>> p = filter_processor().make(s);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message().find("filter: op:"), std::string::npos);
}

// Records with after.n = 1..5; the ids kept by `op value`.
std::vector<int64_t> kept_by(const std::string& op, const std::string& value,
                             const std::string& action = "keep") {
  Batch b;
  for (int64_t n = 1; n <= 5; ++n) add_numbered(b, Operation::create, n);
  return kept(*make(filter_processor(),
                    {{"field", "after.n"}, {"op", op}, {"value", value}, {"action", action}}),
              b);
}

TEST(Filter, ComparesIntegersWithEveryOp) {
  using V = std::vector<int64_t>;
  EXPECT_EQ(kept_by("eq", "3"), (V{3}));
  EXPECT_EQ(kept_by("ne", "3"), (V{1, 2, 4, 5}));
  EXPECT_EQ(kept_by("lt", "3"), (V{1, 2}));
  EXPECT_EQ(kept_by("le", "3"), (V{1, 2, 3}));
  EXPECT_EQ(kept_by("gt", "3"), (V{4, 5}));
  EXPECT_EQ(kept_by("ge", "3"), (V{3, 4, 5}));
  EXPECT_EQ(kept_by("in", "1, 4,9"), (V{1, 4}));
  EXPECT_EQ(kept_by("lt", "2.5"), (V{1, 2}));  // exact against a fraction
  EXPECT_EQ(kept_by("eq", "3.000"), (V{3}));
  EXPECT_EQ(kept_by("ge", "4e0"), (V{4, 5}));  // exponent form
  EXPECT_EQ(kept_by("lt", "-.inf"), (V{}));
}

// The batch's error when a number field meets a value that is not a number: the filter stops the
// pipeline instead of dropping every record (issue 13, item 5).
std::string mismatch_error(const std::string& op, const std::string& value) {
  Batch b;
  for (int64_t n = 1; n <= 3; ++n) add_numbered(b, Operation::create, n);
  std::unique_ptr<Processor> p =
      make(filter_processor(), {{"field", "after.n"}, {"op", op}, {"value", value}});
  Status st = p->process(b);
  return st.ok() ? "<no error>" : st.error().message();
}

TEST(Filter, ANumberFieldAgainstANonNumberStopsInsteadOfDroppingEverything) {
  for (const char* op : {"eq", "ne", "gt", "in"}) {
    const std::string err = mismatch_error(op, "three");
    EXPECT_NE(err.find("filter: field after.n is a number but value 'three' does not read as one"),
              std::string::npos)
        << op << ": " << err;
  }
  EXPECT_EQ(mismatch_error("gt", "2"), "<no error>");
}

TEST(Filter, ImpossibleFiltersAreRefusedAtLoad) {
  EXPECT_NE(make_error(filter_processor(), {{"field", "after.n"}, {"op", "exists"}, {"value", "1"}})
                .find("filter: value: has no effect with op exists"),
            std::string::npos);
  EXPECT_NE(make_error(filter_processor(), {{"field", "after.n"}, {"op", "in"}, {"value", "1,,2"}})
                .find("filter: value: an empty item"),
            std::string::npos);
  EXPECT_NE(make_error(filter_processor(), {{"field", "after.n"}, {"value", ""}})
                .find("filter: value: empty"),
            std::string::npos);
  EXPECT_NE(make_error(filter_processor(),
                       {{"operations", "delete"}, {"field", "after.n"}, {"value", "1"}})
                .find("deletes have no `after`"),
            std::string::npos);
  EXPECT_NE(
      make_error(filter_processor(),
                 {{"operations", "[snapshot, create]"}, {"field", "before.n"}, {"value", "1"}})
          .find("have no `before`"),
      std::string::npos);
  EXPECT_NE(
      make_error(filter_processor(), {{"field", "metadata.lsn"}, {"op", "gt"}, {"value", "100"}})
          .find("metadata values are text"),
      std::string::npos);
  // Still fine: text against metadata, before on updates, after on deletes with exists.
  make(filter_processor(), {{"field", "metadata.table"}, {"op", "gt"}, {"value", "m"}});
  make(filter_processor(), {{"operations", "update"}, {"field", "before.n"}, {"value", "1"}});
}

TEST(Filter, AFieldMissingFromRecordsWarnsOnceAndIsCounted) {
  MetricsRegistry metrics;
  std::unique_ptr<Processor> p =
      make(filter_processor(), {{"field", "after.nosuch"}, {"op", "eq"}, {"value", "1"}});
  ConnectorContext ctx{"p1", "processor", nullptr, &metrics};
  ASSERT_TRUE(p->open(ctx).ok());
  Batch b;
  for (int64_t n = 1; n <= 4; ++n) add_numbered(b, Operation::create, n);
  add_numbered(b, Operation::remove, 5);  // no `after` at all: not a missing field
  run(*p, b);
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(metrics.sum("sluice_filter_field_missing_total",
                        {{"pipeline", "p1"}, {"field", "after.nosuch"}}),
            4);
}

TEST(Filter, DropActionDropsWhereTheConditionHolds) {
  using V = std::vector<int64_t>;
  EXPECT_EQ(kept_by("eq", "3", "drop"), (V{1, 2, 4, 5}));
  EXPECT_EQ(kept_by("gt", "3", "drop"), (V{1, 2, 3}));
  EXPECT_EQ(kept_by("in", "2,5", "drop"), (V{1, 3, 4}));
}

// Whether `op value` holds for a record whose after.v is `v`.
bool holds(Value v, const std::string& op, const std::string& value = "") {
  Batch b;
  Record& r = b.add();
  r.after = v.is_absent() ? b.object(0).build() : b.object(1).add("v", v).build();
  Text text = {{"field", "v"}, {"op", op}};
  if (op != "exists" && op != "missing") text["value"] = value;
  run(*make(filter_processor(), text), b);
  return b.size() == 1;
}

TEST(Filter, ComparesLargeUnsignedAndDecimalNumbersExactly) {
  const Value big = Value::uint64(18446744073709551615ull);
  EXPECT_TRUE(holds(big, "eq", "18446744073709551615"));
  EXPECT_TRUE(holds(big, "gt", "18446744073709551614"));
  EXPECT_TRUE(holds(big, "gt", "-1"));
  EXPECT_TRUE(
      holds(Value::int64(std::numeric_limits<int64_t>::max()), "lt", "9223372036854775808"));
  EXPECT_TRUE(holds(Value::int64(-5), "lt", "18446744073709551615"));

  const Value dec = Value::decimal("12345678901234567890.10");
  EXPECT_TRUE(holds(dec, "eq", "12345678901234567890.1"));
  EXPECT_TRUE(holds(dec, "lt", "12345678901234567890.100001"));
  EXPECT_TRUE(holds(dec, "gt", "12345678901234567890"));
  EXPECT_TRUE(holds(Value::decimal("1.5E3"), "eq", "1500"));  // exponent form: numeric
  EXPECT_TRUE(holds(Value::decimal("Infinity"), "gt", "1e300"));
  EXPECT_FALSE(holds(Value::decimal("NaN"), "eq", "NaN"));  // unordered, never equal
  EXPECT_TRUE(holds(Value::decimal("NaN"), "ne", "1"));
}

TEST(Filter, ComparesFloatsAsTheNearestDouble) {
  EXPECT_TRUE(holds(Value::float64(0.1), "eq", "0.1"));
  EXPECT_TRUE(holds(Value::float64(0.1), "lt", "0.2"));
  EXPECT_TRUE(holds(Value::float64(2.0), "eq", "2"));
  EXPECT_TRUE(holds(Value::float64(1e300), "lt", ".inf"));
  EXPECT_FALSE(holds(Value::float64(std::numeric_limits<double>::quiet_NaN()), "eq", "nan"));
  // A float against a value that is not a number stops the pipeline instead:
  // ANumberFieldAgainstANonNumberStopsInsteadOfDroppingEverything.
}

TEST(Filter, ComparesTextLexicographically) {
  EXPECT_TRUE(holds(Value::string("apple"), "eq", "apple"));
  EXPECT_TRUE(holds(Value::string("apple"), "lt", "banana"));
  EXPECT_TRUE(holds(Value::string("10"), "lt", "9"));  // text, not numbers
  EXPECT_TRUE(holds(Value::string("b"), "in", "a, b ,c"));
  EXPECT_FALSE(holds(Value::string("d"), "in", "a,b,c"));
  EXPECT_TRUE(holds(Value::json("{\"a\":1}"), "eq", "{\"a\":1}"));
  EXPECT_TRUE(holds(Value::bytes("abc"), "ge", "abc"));
}

TEST(Filter, ComparesBooleans) {
  EXPECT_TRUE(holds(Value::boolean(true), "eq", "true"));
  EXPECT_TRUE(holds(Value::boolean(false), "ne", "True"));
  EXPECT_TRUE(holds(Value::boolean(false), "lt", "true"));
  EXPECT_FALSE(holds(Value::boolean(true), "eq", "1"));
}

TEST(Filter, ComparesDatesAndTimesChronologically) {
  int32_t day;
  ASSERT_TRUE(parse_date("2024-02-29", &day));
  EXPECT_TRUE(holds(Value::date(day), "eq", "2024-02-29"));
  EXPECT_TRUE(holds(Value::date(day), "lt", "2024-03-01"));
  EXPECT_TRUE(holds(Value::date(day), "gt", "999-12-31") == false);  // not a date: incomparable

  int64_t ts;
  ASSERT_TRUE(parse_timestamp("2024-02-29T13:45:00", &ts));
  EXPECT_TRUE(holds(Value::timestamp(ts), "eq", "2024-02-29 13:45:00"));
  EXPECT_TRUE(holds(Value::timestamp(ts), "gt", "2024-02-29"));  // a date means its midnight
  EXPECT_TRUE(holds(Value::timestamp(ts), "lt", "2024-02-29T13:45:00.000001"));

  int64_t tstz;
  ASSERT_TRUE(parse_timestamptz("2024-02-29T13:45:00Z", &tstz));
  EXPECT_TRUE(holds(Value::timestamptz(tstz), "eq", "2024-02-29T15:45:00+02:00"));
  EXPECT_TRUE(holds(Value::timestamptz(tstz), "eq", "2024-02-29T13:45:00"));  // no zone: UTC
  EXPECT_TRUE(holds(Value::timestamptz(tstz), "lt", "2024-02-29T15:45:00+01:00"));

  EXPECT_TRUE(holds(Value::time(3600000000LL), "eq", "01:00:00"));
  EXPECT_TRUE(holds(Value::time(3600000000LL), "lt", "01:00:00.5"));
  EXPECT_TRUE(holds(Value::timetz(3600000000LL, 3600), "lt", "01:00:00+00:00"));  // 00:00 UTC
  EXPECT_TRUE(holds(Value::timetz(3600000000LL, 3600), "eq", "01:00:00+01:00"));

  Batch b;
  Interval* iv = b.arena().allocate_array<Interval>(1);
  *iv = Interval{1, 0, 0};
  EXPECT_TRUE(holds(Value::interval(iv), "eq", "P30D"));  // a month spans 30 days
  EXPECT_TRUE(holds(Value::interval(iv), "gt", "P29DT23H"));
}

TEST(Filter, ComparesUuids) {
  static uint8_t id[16];
  ASSERT_TRUE(parse_uuid("123e4567-e89b-12d3-a456-426614174000", id));
  EXPECT_TRUE(holds(Value::uuid(id), "eq", "123e4567-e89b-12d3-a456-426614174000"));
  EXPECT_TRUE(holds(Value::uuid(id), "lt", "223e4567-e89b-12d3-a456-426614174000"));
  EXPECT_FALSE(holds(Value::uuid(id), "eq", "not-a-uuid"));
}

TEST(Filter, NullAndMissingFieldsEqualNothing) {
  for (Value v : {Value::null(), Value()}) {
    const bool is_null = v.is_null();
    EXPECT_FALSE(holds(v, "eq", "null"));
    EXPECT_FALSE(holds(v, "eq", "1"));
    EXPECT_TRUE(holds(v, "ne", "1"));
    EXPECT_FALSE(holds(v, "lt", "1"));
    EXPECT_FALSE(holds(v, "ge", "1"));
    EXPECT_FALSE(holds(v, "in", "1,null"));
    EXPECT_EQ(holds(v, "exists"), is_null);  // null exists
    EXPECT_EQ(holds(v, "missing"), !is_null);
  }
  EXPECT_TRUE(holds(Value::int64(0), "exists"));
  EXPECT_FALSE(holds(Value::int64(0), "missing"));
}

TEST(Filter, TestsWholePartsForExistence) {
  Batch b;
  add_numbered(b, Operation::create, 1);
  add_numbered(b, Operation::remove, 2);
  EXPECT_EQ(kept(*make(filter_processor(), {{"field", "after"}, {"op", "missing"}}), b),
            (std::vector<int64_t>{2}));
}

TEST(Filter, FiltersOnMetadataKeyAndBefore) {
  Batch b;
  for (int64_t i = 1; i <= 3; ++i) {
    Record& r =
        add_record(b, Operation::update, person(b, i), person(b, i, i == 2 ? "bob" : "ada"));
    r.metadata = b.object(1).add("table", Value::string(i == 3 ? "orders" : "people")).build();
  }
  auto ids = [](const Batch& batch) {
    std::vector<int64_t> out;
    for (const Record& r : batch.records()) out.push_back(r.key.find("id")->as_int64());
    return out;
  };
  run(*make(filter_processor(), {{"field", "metadata.table"}, {"value", "people"}}), b);
  EXPECT_EQ(ids(b), (std::vector<int64_t>{1, 2}));
  run(*make(filter_processor(), {{"field", "before.name"}, {"op", "ne"}, {"value", "bob"}}), b);
  EXPECT_EQ(ids(b), (std::vector<int64_t>{1}));
  run(*make(filter_processor(), {{"field", "key.id"}, {"op", "gt"}, {"value", "1"}}), b);
  EXPECT_TRUE(b.empty());
}

TEST(Filter, FiltersOnNestedFields) {
  Batch b;
  add_record(b, Operation::create, person(b, 1));
  Record& r = add_record(b, Operation::create, person(b, 2));
  r.after = b.object(2)
                .add("id", Value::int64(2))
                .add("address", b.object(1).add("city", Value::string("Lyon")).build())
                .build();
  run(*make(filter_processor(), {{"field", "after.address.city"}, {"value", "Lyon"}}), b);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(*b.records()[0].after.find("id"), Value::int64(2));
}

TEST(Filter, OperationsAndConditionTogether) {
  Batch b;
  add_numbered(b, Operation::snapshot, 1);
  add_numbered(b, Operation::create, 2);
  add_numbered(b, Operation::update, 3);
  add_numbered(b, Operation::create, 4);
  add_numbered(b, Operation::remove, 5);
  // Only inserts and updates; of those, drop n >= 4.
  EXPECT_EQ(kept(*make(filter_processor(), {{"operations", "[create, update]"},
                                            {"field", "n"},
                                            {"op", "ge"},
                                            {"value", "4"},
                                            {"action", "drop"}}),
                 b),
            (std::vector<int64_t>{2, 3}));
}

TEST(Filter, ErasingKeepsOrderPositionAndCounts) {
  Batch b;
  for (int64_t n = 0; n < 1000; ++n) {
    add_numbered(b, Operation::create, n);
    b.records().back().position = b.copy(std::to_string(n));
  }
  b.set_position("999");
  b.set_read_count(1000);
  b.set_sequence(7);
  run(*make(filter_processor(), {{"field", "n"}, {"op", "in"}, {"value", "3,1,998,500,999"}}), b);
  ASSERT_EQ(b.size(), 5u);
  std::vector<std::string_view> positions;
  for (const Record& r : b.records()) positions.push_back(r.position);
  EXPECT_EQ(positions, (std::vector<std::string_view>{"1", "3", "500", "998", "999"}));
  EXPECT_EQ(b.position(), "999");
  EXPECT_EQ(b.read_count(), 1000u);
  EXPECT_EQ(b.sequence(), 7u);

  run(*make(filter_processor(), {{"field", "n"}, {"op", "lt"}, {"value", "0"}}), b);
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.position(), "999");  // the source still advances past the dropped records
}

// ---------------------------------------------------------------- registry

TEST(Processors, AreRegisteredWithTheirSettingsTables) {
  Registry r;
  register_builtin_processors(r);
  for (std::string_view name : {"field.set", "field.rename", "field.exclude", "filter"}) {
    const ProcessorSpec* spec = r.processor(name);
    ASSERT_NE(spec, nullptr) << name;
    EXPECT_NE(spec->make, nullptr);
    EXPECT_FALSE(spec->settings.empty());
    EXPECT_FALSE(spec->summary.empty());
    for (const SettingSpec& s : spec->settings) {
      EXPECT_FALSE(s.doc.empty()) << name << "." << s.name;
      if (!s.default_value.empty()) {
        SettingValue v;
        EXPECT_FALSE(parse_setting_scalar(s, s.default_value, &v)) << name << "." << s.name;
      }
    }
  }
}

}  // namespace
}  // namespace sluice
