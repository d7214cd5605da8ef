#include "processors/field_path.h"

#include <cstring>

namespace sluice {

std::string_view record_part_name(RecordPart part) noexcept {
  switch (part) {
    case RecordPart::key: return "key";
    case RecordPart::before: return "before";
    case RecordPart::after: return "after";
    case RecordPart::metadata: return "metadata";
  }
  return "after";
}

namespace {

bool part_from_name(std::string_view name, RecordPart* part) noexcept {
  for (RecordPart p :
       {RecordPart::key, RecordPart::before, RecordPart::after, RecordPart::metadata}) {
    if (record_part_name(p) == name) {
      *part = p;
      return true;
    }
  }
  return false;
}

}  // namespace

Result<FieldPath> parse_field_path(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return Error(Errc::config,
                 "invalid field path '" + std::string(text) + "': " + std::string(why));
  };
  if (text.empty()) return bad("empty");
  FieldPath path;
  path.text = std::string(text);

  size_t dot = text.find('.');
  std::string_view head = text.substr(0, dot);
  if (head.empty()) return bad("starts with '.'");
  if (dot == std::string_view::npos) {
    // One name: a record part alone, or a bare field name meaning after.NAME.
    if (!part_from_name(head, &path.part)) {
      path.part = RecordPart::after;
      path.names.emplace_back(head);
    }
    return path;
  }
  if (!part_from_name(head, &path.part))
    return bad(
        "unknown record part '" + std::string(head) +
        "' (paths start with key., before., after. or metadata.; a bare name means after.NAME)");
  std::string_view rest = text.substr(dot + 1);
  if (rest.empty()) return bad("ends with '.'");
  if (path.part == RecordPart::metadata) {
    path.names.emplace_back(rest);  // metadata keys keep their dots
    return path;
  }
  while (true) {
    size_t next = rest.find('.');
    std::string_view name = rest.substr(0, next);
    if (name.empty()) return bad("empty name between dots");
    path.names.emplace_back(name);
    if (next == std::string_view::npos) break;
    rest = rest.substr(next + 1);
    if (rest.empty()) return bad("ends with '.'");
  }
  return path;
}

Value& record_part(Record& r, RecordPart part) noexcept {
  switch (part) {
    case RecordPart::key: return r.key;
    case RecordPart::before: return r.before;
    case RecordPart::metadata: return r.metadata;
    case RecordPart::after: break;
  }
  return r.after;
}

const Value& record_part(const Record& r, RecordPart part) noexcept {
  return record_part(const_cast<Record&>(r), part);
}

Value lookup_field(const Record& r, const FieldPath& path) noexcept {
  const Value* v = &record_part(r, path.part);
  for (const std::string& name : path.names) {
    v = v->find(name);  // find() returns nullptr on non-objects too
    if (v == nullptr) return Value();
  }
  return *v;
}

Field* copy_fields(Arena& arena, const Value& obj, uint32_t extra) {
  std::span<const Field> src = obj.fields();
  Field* out = arena.allocate_array<Field>(src.size() + extra);
  if (!src.empty()) std::memcpy(static_cast<void*>(out), src.data(), src.size_bytes());
  return out;
}

Value with_field(Arena& arena, const Value& obj, std::string_view name, Value v) {
  std::span<const Field> fields = obj.fields();
  for (size_t i = 0; i < fields.size(); ++i)
    if (fields[i].name == name) return detail::with_field_value(arena, obj, i, v);
  const uint32_t n = obj.size();
  Field* out = copy_fields(arena, obj, 1);
  out[n] = Field{name, v};
  return Value::object(out, n + 1);
}

namespace detail {
Value with_field_value(Arena& arena, const Value& obj, size_t index, Value v) {
  Field* out = copy_fields(arena, obj, 0);
  out[index].value = v;
  return Value::object(out, obj.size());
}
}  // namespace detail

}  // namespace sluice
