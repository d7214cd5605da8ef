#include "sluice/schema_change.h"

#include <string>

namespace sluice {

namespace {
constexpr std::string_view kKindNames[] = {"add_column", "drop_column", "rename_column",
                                           "alter_column_type"};
}  // namespace

std::string_view schema_change_kind_name(SchemaChangeKind kind) noexcept {
  return kKindNames[static_cast<size_t>(kind)];
}

void set_schema_change(Batch& batch, Record& r, const SchemaChange& c) {
  r.op = Operation::schema;
  ObjectBuilder b = batch.object(5);
  b.add("change", Value::string(schema_change_kind_name(c.kind)));
  b.add("column", Value::string(batch.copy(c.column)));
  switch (c.kind) {
    case SchemaChangeKind::add_column:
      b.add("type", Value::string(batch.copy(c.type)));
      // The default's text (if any) must already live in the batch's arena or static storage.
      if (!c.default_value.is_absent()) b.add("default", c.default_value);
      break;
    case SchemaChangeKind::drop_column: break;
    case SchemaChangeKind::rename_column: b.add("to", Value::string(batch.copy(c.to))); break;
    case SchemaChangeKind::alter_column_type:
      b.add("type", Value::string(batch.copy(c.type)));
      b.add("from", Value::string(batch.copy(c.from)));
      break;
  }
  r.after = b.build();
}

Result<SchemaChange> schema_change_of(const Record& r) {
  auto bad = [](std::string what) {
    return Error(Errc::data, "schema change record: " + std::move(what));
  };
  if (r.op != Operation::schema) return bad("not a schema record");
  if (r.after.kind() != ValueKind::object) return bad("`after` is not an object");
  auto text = [&](std::string_view name) -> const Value* {
    const Value* v = r.after.find(name);
    return v != nullptr && v->kind() == ValueKind::string ? v : nullptr;
  };
  SchemaChange c;
  const Value* change = text("change");
  if (change == nullptr) return bad("missing \"change\"");
  bool known = false;
  for (size_t i = 0; i < std::size(kKindNames); ++i)
    if (kKindNames[i] == change->as_text()) {
      c.kind = static_cast<SchemaChangeKind>(i);
      known = true;
    }
  if (!known) return bad("unknown change '" + std::string(change->as_text().substr(0, 32)) + "'");
  const Value* column = text("column");
  if (column == nullptr || column->as_text().empty()) return bad("missing \"column\"");
  c.column = column->as_text();
  if (c.kind == SchemaChangeKind::rename_column) {
    const Value* to = text("to");
    if (to == nullptr || to->as_text().empty()) return bad("rename_column: missing \"to\"");
    c.to = to->as_text();
  }
  if (c.kind == SchemaChangeKind::add_column || c.kind == SchemaChangeKind::alter_column_type) {
    if (const Value* t = text("type")) c.type = t->as_text();
  }
  if (c.kind == SchemaChangeKind::alter_column_type) {
    if (const Value* f = text("from")) c.from = f->as_text();
  }
  if (c.kind == SchemaChangeKind::add_column) {
    if (const Value* d = r.after.find("default")) c.default_value = *d;
  }
  return c;
}

}  // namespace sluice
