// field.rename: renames fields within their object (after.name -> full_name).
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "processors/builtin.h"
#include "processors/field_path.h"
#include "sluice/schema_change.h"

namespace sluice {

namespace {

struct Options {
  std::map<std::string, std::string> mapping;
};

constexpr auto kSettings = settings_table<Options>(
    setting<&Options::mapping>(
        "mapping",
        "Old field path -> new name in the same object, e.g. {after.name: full_name, "
        "metadata.table: source_table}. Missing fields are ignored; a new name that exists already is "
        "replaced. Renames within one object happen together, so {a: b, b: a} swaps.")
        .mandatory());

Error bad_setting(std::string_view problem) {
  return Error(Errc::config, "field.rename: mapping: " + std::string(problem));
}

// The renames that apply to one object (one part and parent path), done in one copy of it.
struct RenameGroup {
  RecordPart part;
  std::vector<std::string> parent;
  std::vector<std::string> from;
  std::vector<std::string> to;
};

int index_of(const std::vector<std::string>& names, std::string_view name) noexcept {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<int>(i);
  return -1;
}

class FieldRename final : public Processor {
 public:
  explicit FieldRename(std::vector<RenameGroup> groups) : groups_(std::move(groups)) {}

  Status process(Batch& batch) override {
    Arena& arena = batch.arena();
    for (const RenameGroup& g : groups_) {
      // New names are copied into each batch once (records must not point into the processor).
      auto* to = arena.allocate_array<std::string_view>(g.to.size());
      for (size_t i = 0; i < g.to.size(); ++i) to[i] = arena.copy(g.to[i]);

      auto rename = [&](const Value& obj) -> std::optional<Value> {
        std::span<const Field> fields = obj.fields();
        bool any = false;  // most records lack the source (other tables): no copy for them
        for (const Field& f : fields)
          if (index_of(g.from, f.name) >= 0) {
            any = true;
            break;
          }
        if (!any) return std::nullopt;
        Field* out = arena.allocate_array<Field>(fields.size());
        uint32_t n = 0;
        for (const Field& f : fields) {
          if (int i = index_of(g.from, f.name); i >= 0) {
            out[n++] = Field{to[i], f.value};
            continue;
          }
          // A field whose name a present source takes over is replaced (dropped here).
          if (int j = index_of(g.to, f.name); j >= 0 && obj.find(g.from[j]) != nullptr) continue;
          out[n++] = f;
        }
        return Value::object(out, n);
      };
      for (Record& r : batch.records()) {
        if (r.op == Operation::schema && g.part == RecordPart::after && g.parent.empty())
          rename_in_schema_change(batch, r, g);
        else if (!is_control(r.op)) edit_object(arena, record_part(r, g.part), g.parent, rename);
      }
    }
    return ok_status();
  }

  // A schema change names columns as the rows' `after` fields: renamed alike, so that the
  // destination changes the column the rows write.
  static void rename_in_schema_change(Batch& batch, Record& r, const RenameGroup& g) {
    auto change = schema_change_of(r);
    if (!change) return;  // malformed: the destination names the problem
    SchemaChange c = change.value();
    const int from = index_of(g.from, c.column);
    const int to = c.kind == SchemaChangeKind::rename_column ? index_of(g.from, c.to) : -1;
    if (from < 0 && to < 0) return;
    if (from >= 0) c.column = g.to[size_t(from)];
    if (to >= 0) c.to = g.to[size_t(to)];
    set_schema_change(batch, r, c);  // copies the names into the batch
  }

 private:
  std::vector<RenameGroup> groups_;
};

Result<std::unique_ptr<Processor>> make_field_rename(const Settings& s) {
  SLUICE_TRY_ASSIGN(Options o, bind_settings(kSettings, s, "field.rename"));
  const std::map<std::string, std::string>& mapping = o.mapping;
  if (mapping.empty()) return bad_setting("needs at least one entry (old path: new name)");
  std::vector<RenameGroup> groups;
  for (const auto& [from_text, to] : mapping) {
    Result<FieldPath> path = parse_field_path(from_text);
    if (!path) return path.error().with_context("field.rename: mapping: ");
    if (path->whole_part())
      return bad_setting("'" + from_text + "' names the whole " +
                         std::string(record_part_name(path->part)) + "; name a field in it");
    if (to.empty()) return bad_setting("new name for '" + from_text + "' is empty");
    // Metadata keys contain dots ("opencdc.readAt"); elsewhere a dot means a path was given.
    if (path->part != RecordPart::metadata && to.find('.') != std::string::npos)
      return bad_setting("new name '" + to + "' for '" + from_text +
                         "' must be a name within the same object, not a path");
    std::vector<std::string> parent(path->parent().begin(), path->parent().end());
    RenameGroup* g = nullptr;
    for (RenameGroup& existing : groups)
      if (existing.part == path->part && existing.parent == parent) g = &existing;
    if (g == nullptr) g = &groups.emplace_back(RenameGroup{path->part, std::move(parent), {}, {}});
    if (index_of(g->from, path->leaf()) >= 0)
      return bad_setting("'" + from_text + "' is renamed twice (a bare name means after.NAME)");
    if (index_of(g->to, to) >= 0)
      return bad_setting("two fields are renamed to '" + to + "' in the same object");
    g->from.push_back(path->leaf());
    g->to.push_back(to);
  }
  std::unique_ptr<Processor> p = std::make_unique<FieldRename>(std::move(groups));
  return p;
}

}  // namespace

ProcessorSpec field_rename_processor() {
  return {"field.rename", "Renames fields within their object.", kSettings, make_field_rename};
}

}  // namespace sluice
