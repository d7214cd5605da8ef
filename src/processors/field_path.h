// Field paths shared by the built-in processors, and copy-on-write editing of immutable objects.
//
//   after.address.city      part=after     names=[address, city]
//   city                    part=after     names=[city]          (a bare name means after.NAME)
//   key.id / before.x       part=key/before
//   metadata.opencdc.readAt part=metadata  names=[opencdc.readAt] (metadata is a flat map whose
//   keys
//                                                                  contain dots: never split)
//   after                   part=after     names=[]              (the whole part)
//
// Values are immutable views, so editing a nested field builds new Field arrays in the batch arena
// for the edited object and each enclosing object; untouched siblings are shared, not copied
// deeply.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/arena.h"
#include "sluice/record.h"
#include "sluice/result.h"

namespace sluice {

enum class RecordPart : uint8_t { key, before, after, metadata };

std::string_view record_part_name(RecordPart part) noexcept;

struct FieldPath {
  RecordPart part = RecordPart::after;
  // Object member names from the part down to the field; empty when the path names the whole part.
  std::vector<std::string> names;
  std::string text;  // as written, for messages

  bool whole_part() const noexcept { return names.empty(); }
  const std::string& leaf() const noexcept { return names.back(); }
  // Names of the objects enclosing the leaf (empty: the leaf is a direct member of the part).
  std::span<const std::string> parent() const noexcept {
    return std::span<const std::string>(names).first(names.empty() ? 0 : names.size() - 1);
  }
};

// Parses a path; the error message (no setting name) says what is wrong and what is accepted.
Result<FieldPath> parse_field_path(std::string_view text);

Value& record_part(Record& r, RecordPart part) noexcept;
const Value& record_part(const Record& r, RecordPart part) noexcept;

// The value the path names, or an absent value when it (or an enclosing object) is missing.
Value lookup_field(const Record& r, const FieldPath& path) noexcept;

// A copy of `obj`'s fields in the arena, with room for `extra` more (trivially copyable: memcpy).
Field* copy_fields(Arena& arena, const Value& obj, uint32_t extra);

// `obj` with field `name` set to `v`: replaced in place if present, else appended.
Value with_field(Arena& arena, const Value& obj, std::string_view name, Value v);

// Applies `edit` to the object reached from `root` through `parent` names, then rebuilds each
// enclosing object around the result. `edit(const Value& object) -> std::optional<Value>` returns
// the replacement, or nullopt for "no change". Returns false (root untouched) when nothing changed,
// including when `root` or an intermediate value is absent or not an object.
template <typename Edit>
bool edit_object(Arena& arena, Value& root, std::span<const std::string> parent, Edit&& edit);

// ---- implementation ----

namespace detail {
// `obj` with the value of field `index` replaced.
Value with_field_value(Arena& arena, const Value& obj, size_t index, Value v);

template <typename Edit>
std::optional<Value> edited_object(Arena& arena, const Value& obj,
                                   std::span<const std::string> parent, Edit& edit) {
  if (!obj.is_object()) return std::nullopt;
  if (parent.empty()) return edit(obj);
  std::span<const Field> fields = obj.fields();
  for (size_t i = 0; i < fields.size(); ++i) {
    if (fields[i].name != parent.front()) continue;
    std::optional<Value> child = edited_object(arena, fields[i].value, parent.subspan(1), edit);
    if (!child) return std::nullopt;
    return with_field_value(arena, obj, i, *child);
  }
  return std::nullopt;
}
}  // namespace detail

template <typename Edit>
bool edit_object(Arena& arena, Value& root, std::span<const std::string> parent, Edit&& edit) {
  std::optional<Value> v = detail::edited_object(arena, root, parent, edit);
  if (!v) return false;
  root = *v;
  return true;
}

}  // namespace sluice
