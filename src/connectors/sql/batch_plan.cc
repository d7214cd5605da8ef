#include "connectors/sql/batch_plan.h"

#include <fmt/format.h>

#include "connectors/record_key.h"

namespace sluice::sql {

std::string record_key_text(const Record& r) {
  std::string key = r.key.is_absent() ? "(none)" : to_debug_string(r.key);
  if (key.size() > 200) key = key.substr(0, 200) + "...";
  return key;
}

Error record_error(std::string_view destination, const SqlTable& t, const Record& r, Errc code,
                   std::string_view what, bool retriable) {
  std::string line = fmt::format("{}: table {}, {} key {}: {}", destination, t.quoted,
                                 operation_name(r.op), record_key_text(r), what);
  for (char& c : line)
    if (c == '\n') c = ' ';  // one line, whatever the server said
  return Error(code, std::move(line), retriable);
}

bool BatchPlan::same_name(std::string_view a, std::string_view b) const noexcept {
  return fold_case_ ? iequals(a, b) : a == b;
}

bool BatchPlan::is_key(const PlannedRow& p, std::string_view name) const noexcept {
  for (uint32_t k = p.key_begin; k < p.key_end; ++k)
    if (same_name(fields_[k].name, name)) return true;
  return false;
}

Status BatchPlan::add(const Record& r, SqlTable& t) {
  if (is_control(r.op)) {
    flush_key_copies();  // keys written before a marker are in their side table when it runs
    rows_.push_back(PlannedRow{RowAction::control, &t, &r, 0, 0, 0, 0});
    return ok_status();
  }
  if (is_truncate(r)) {
    rows_.push_back(PlannedRow{RowAction::truncate, &t, &r, 0, 0, 0, 0});
    return ok_status();
  }
  Field scalar_key;
  std::span<const Field> key = record_key_fields(r, scalar_key);
  if (key.empty())
    return record_error(
        destination_, t, r, Errc::data,
        "record has no key; this destination upserts and deletes by key (give the source table a "
        "primary key, or set the key with a processor)");
  auto null_key = [&](std::string_view name) {
    return record_error(destination_, t, r, Errc::data,
                        fmt::format("key field \"{}\" is null; key values must not be null", name));
  };

  const uint32_t key_begin = uint32_t(fields_.size());
  fields_.insert(fields_.end(), key.begin(), key.end());
  const uint32_t key_end = uint32_t(fields_.size());

  if (r.op == Operation::remove) {
    for (uint32_t k = key_begin; k < key_end; ++k)
      if (fields_[k].value.is_null() || fields_[k].value.is_absent())
        return null_key(fields_[k].name);
    rows_.push_back(PlannedRow{RowAction::remove, &t, &r, key_begin, key_end, 0, 0});
    return ok_status();
  }

  // Columns: the present fields of `after`, then the key fields `after` lacks.
  const uint32_t col_begin = uint32_t(fields_.size());
  if (r.after.is_object()) {
    for (const Field& f : r.after.fields())
      if (!f.value.is_absent()) fields_.push_back(f);
  } else if (!r.after.is_absent() && !r.after.is_null()) {
    fields_.push_back(Field{"value", r.after});  // a scalar payload (e.g. a message body)
  }
  const uint32_t after_end = uint32_t(fields_.size());
  bool moved = false;  // `after` holds another key than record.key
  for (uint32_t k = key_begin; k < key_end; ++k) {
    bool in_after = false;
    for (uint32_t c = col_begin; c < after_end; ++c)
      if (same_name(fields_[c].name, fields_[k].name)) {
        if (r.op == Operation::update && !(fields_[c].value == fields_[k].value)) moved = true;
        fields_[k].value = fields_[c].value;  // the key as written
        in_after = true;
        break;
      }
    if (!in_after) fields_.push_back(fields_[k]);
    if (fields_[k].value.is_null() || fields_[k].value.is_absent())
      return null_key(fields_[k].name);
  }
  const uint32_t col_end = uint32_t(fields_.size());

  // An update that changed the key: the row under the old key goes first.
  if (r.op == Operation::update) {
    const uint32_t old_begin = uint32_t(fields_.size());
    bool usable = true, differs = false;
    if (moved) {
      for (size_t i = 0; i < key.size(); ++i) {
        usable &= !key[i].value.is_null() && !key[i].value.is_absent();
        fields_.push_back(key[i]);
      }
      differs = true;
    } else if (r.before.is_object()) {
      for (uint32_t k = key_begin; k < key_end; ++k) {
        const Value* old = r.before.find(fields_[k].name);
        if (!old || old->is_absent() || old->is_null()) {
          usable = false;
          break;
        }
        if (!(*old == fields_[k].value)) differs = true;
        fields_.push_back(Field{fields_[k].name, *old});
      }
    } else {
      usable = false;
    }
    if (usable && differs) {
      const uint32_t old_end = uint32_t(fields_.size());
      rows_.push_back(PlannedRow{RowAction::move, &t, &r, old_begin, old_end, key_begin, key_end});
      rows_.push_back(PlannedRow{RowAction::remove, &t, &r, old_begin, old_end, 0, 0});
    } else {
      fields_.resize(old_begin);
    }
  }
  rows_.push_back(PlannedRow{RowAction::upsert, &t, &r, key_begin, key_end, col_begin, col_end});
  return ok_status();
}

void BatchPlan::add_key_copy(SqlTable& side) {
  if (rows_.empty() || rows_.back().action != RowAction::upsert) return;
  const PlannedRow& last = rows_.back();
  pending_keys_.push_back(PlannedRow{RowAction::upsert, &side, last.record, last.key_begin,
                                     last.key_end, last.key_begin, last.key_end});
}

void BatchPlan::flush_key_copies() {
  rows_.insert(rows_.end(), pending_keys_.begin(), pending_keys_.end());
  pending_keys_.clear();
}

bool BatchPlan::same_names(uint32_t a_begin, uint32_t a_end, uint32_t b_begin,
                           uint32_t b_end) const noexcept {
  if (a_end - a_begin != b_end - b_begin) return false;
  for (uint32_t i = 0; i < a_end - a_begin; ++i) {
    std::string_view a = fields_[a_begin + i].name, b = fields_[b_begin + i].name;
    // Records of one source usually share their field names' storage: no need to compare bytes.
    if (a.data() == b.data() && a.size() == b.size()) continue;
    if (a != b) return false;
  }
  return true;
}

bool BatchPlan::same_run(const PlannedRow& a, const PlannedRow& b) const noexcept {
  if (a.action != b.action || a.table != b.table || b.action == RowAction::truncate ||
      b.action == RowAction::control || b.action == RowAction::move)
    return false;
  if (!same_names(a.key_begin, a.key_end, b.key_begin, b.key_end)) return false;
  return a.action != RowAction::upsert ||
         same_names(a.col_begin, a.col_end, b.col_begin, b.col_end);
}

size_t BatchPlan::run_end(size_t first, size_t max_rows) const noexcept {
  size_t end = first + 1;
  while (end < rows_.size() && end - first < max_rows && same_run(rows_[first], rows_[end])) ++end;
  return end;
}

void missing_columns(const BatchPlan& plan, size_t first, size_t end, const SqlTable& t,
                     bool key_columns_first, bool sample_first_non_null,
                     std::vector<ColumnDef>& out) {
  out.clear();
  const PlannedRow& head = plan.row(first);
  if (head.action != RowAction::upsert) return;
  auto sample = [&](size_t c) -> const Value* {
    const Value* v = &plan.columns(head)[c].value;
    if (!sample_first_non_null) return v;
    for (size_t i = first; i < end; ++i) {
      const Value& x = plan.columns(plan.row(i))[c].value;
      if (!x.is_null() && !x.is_absent()) return &x;
    }
    return v;
  };
  auto cols = plan.columns(head);
  auto add = [&](size_t c, bool key) {
    if (t.exists && t.has_column(cols[c].name)) return;
    out.push_back(ColumnDef{cols[c].name, sample(c), key});
  };

  if (key_columns_first) {
    // In key order (named as the key names them), then the others in the record's order.
    for (const Field& k : plan.keys(head)) {
      if (t.exists && t.has_column(k.name)) continue;
      size_t c = 0;
      while (c + 1 < cols.size() && !plan.same_name(cols[c].name, k.name)) ++c;
      out.push_back(ColumnDef{k.name, sample(c), true});
    }
    for (size_t c = 0; c < cols.size(); ++c)
      if (!plan.is_key(head, cols[c].name)) add(c, false);
  } else {
    for (size_t c = 0; c < cols.size(); ++c) add(c, plan.is_key(head, cols[c].name));
  }
}

}  // namespace sluice::sql
