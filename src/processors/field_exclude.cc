// field.exclude: removes fields (or whole parts: `before`, `metadata`) from every record.
#include <memory>
#include <string>
#include <vector>

#include "processors/builtin.h"
#include "processors/field_path.h"
#include "sluice/schema_change.h"

namespace sluice {

namespace {

struct Options {
  std::vector<std::string> fields;
};

constexpr auto kSettings = settings_table<Options>(
    setting<&Options::fields>(
        "fields",
        "Fields to remove: after.NAME, before.NAME, key.NAME, metadata.NAME (a bare NAME means "
        "after.NAME; nested by dots), or a whole part (before, metadata, ...). Missing fields are "
        "ignored; removed fields are absent afterwards.")
        .mandatory());

// The names removed from one object (one part and parent path), done in one copy of it.
struct ExcludeGroup {
  RecordPart part;
  std::vector<std::string> parent;
  std::vector<std::string> names;
};

bool contains(const std::vector<std::string>& names, std::string_view name) noexcept {
  for (const std::string& n : names)
    if (n == name) return true;
  return false;
}

class FieldExclude final : public Processor {
 public:
  FieldExclude(std::vector<ExcludeGroup> groups, std::vector<RecordPart> whole_parts)
      : groups_(std::move(groups)), whole_parts_(std::move(whole_parts)) {}

  Status process(Batch& batch) override {
    Arena& arena = batch.arena();
    dropped_.clear();
    for (size_t i = 0; i < batch.records().size(); ++i) {
      Record& r = batch.records()[i];
      if (r.op == Operation::schema) {
        if (edit_schema_change(batch, r)) dropped_.push_back(i);
        continue;
      }
      if (is_control(r.op)) continue;  // markers pass unchanged
      for (RecordPart part : whole_parts_) record_part(r, part) = Value();
      for (const ExcludeGroup& g : groups_) {
        auto exclude = [&](const Value& obj) -> std::optional<Value> {
          std::span<const Field> fields = obj.fields();
          uint32_t removed = 0;
          for (const Field& f : fields) removed += contains(g.names, f.name) ? 1 : 0;
          if (removed == 0) return std::nullopt;  // no copy when nothing goes
          Field* out = arena.allocate_array<Field>(fields.size() - removed);
          uint32_t n = 0;
          for (const Field& f : fields)
            if (!contains(g.names, f.name)) out[n++] = f;
          return Value::object(out, n);
        };
        edit_object(arena, record_part(r, g.part), g.parent, exclude);
      }
    }
    if (!dropped_.empty()) {
      // One stable pass; the batch position still covers the removed records.
      auto& records = batch.records();
      size_t out = 0, next = 0;
      for (size_t i = 0; i < records.size(); ++i) {
        if (next < dropped_.size() && dropped_[next] == i) {
          ++next;
          continue;
        }
        if (out != i) records[out] = records[i];
        ++out;
      }
      records.resize(out);
    }
    return ok_status();
  }

 private:
  // A column of the row (a field of `after`) that is excluded.
  bool excluded_column(std::string_view name) const noexcept {
    for (RecordPart part : whole_parts_)
      if (part == RecordPart::after) return true;
    for (const ExcludeGroup& g : groups_)
      if (g.part == RecordPart::after && g.parent.empty() && contains(g.names, name)) return true;
    return false;
  }

  // A schema change of an excluded column never reaches the destination (it would create or
  // backfill the column the processor keeps out): true, the record is removed. A rename to an
  // excluded name is, for the destination, a drop.
  bool edit_schema_change(Batch& batch, Record& r) const {
    auto change = schema_change_of(r);
    if (!change) return false;  // malformed: the destination names the problem
    const SchemaChange& c = change.value();
    if (excluded_column(c.column)) return true;
    if (c.kind == SchemaChangeKind::rename_column && excluded_column(c.to)) {
      SchemaChange drop;
      drop.kind = SchemaChangeKind::drop_column;
      drop.column = c.column;
      set_schema_change(batch, r, drop);
    }
    return false;
  }

  std::vector<ExcludeGroup> groups_;
  std::vector<RecordPart> whole_parts_;
  std::vector<size_t> dropped_;  // indexes of the schema records removed from this batch
};

Result<std::unique_ptr<Processor>> make_field_exclude(const Settings& s) {
  SLUICE_TRY_ASSIGN(Options o, bind_settings(kSettings, s, "field.exclude"));
  const std::vector<std::string>& fields = o.fields;
  if (fields.empty())
    return Error(Errc::config, "field.exclude: fields: needs at least one field path");
  std::vector<ExcludeGroup> groups;
  std::vector<RecordPart> whole_parts;
  for (const std::string& text : fields) {
    Result<FieldPath> path = parse_field_path(text);
    if (!path) return path.error().with_context("field.exclude: fields: ");
    if (path->whole_part()) {
      whole_parts.push_back(path->part);
      continue;
    }
    std::vector<std::string> parent(path->parent().begin(), path->parent().end());
    ExcludeGroup* g = nullptr;
    for (ExcludeGroup& existing : groups)
      if (existing.part == path->part && existing.parent == parent) g = &existing;
    if (g == nullptr) g = &groups.emplace_back(ExcludeGroup{path->part, std::move(parent), {}});
    if (!contains(g->names, path->leaf())) g->names.push_back(path->leaf());
  }
  std::unique_ptr<Processor> p =
      std::make_unique<FieldExclude>(std::move(groups), std::move(whole_parts));
  return p;
}

}  // namespace

ProcessorSpec field_exclude_processor() {
  return {"field.exclude", "Removes fields from records.", kSettings, make_field_exclude};
}

}  // namespace sluice
