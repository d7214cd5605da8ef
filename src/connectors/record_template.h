// Names built from record metadata, shared by the destinations' `table` (and `schema`) settings:
// literal text with {{name}} placeholders filled from the record's metadata. {{table}} falls back
// to opencdc.collection, then to "records".
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <vector>

#include "sluice/record.h"
#include "sluice/result.h"

namespace sluice {

// A metadata value as text; empty when missing or not a string.
inline std::string_view metadata_text(const Record& r, std::string_view name) noexcept {
  const Value* v = r.metadata.find(name);
  return v && v->kind() == ValueKind::string ? v->as_text() : std::string_view{};
}

inline constexpr std::string_view kDefaultTableName = "records";

class RecordTemplate {
 public:
  // `what` names the setting in errors ("table", "schema").
  static Result<RecordTemplate> parse(std::string_view text, std::string_view what = "table") {
    RecordTemplate t;
    while (!text.empty()) {
      size_t open = text.find("{{");
      if (open == std::string_view::npos) {
        t.parts_.push_back({false, std::string(text)});
        break;
      }
      if (open > 0) t.parts_.push_back({false, std::string(text.substr(0, open))});
      size_t close = text.find("}}", open + 2);
      if (close == std::string_view::npos)
        return Error(Errc::invalid_argument,
                     fmt::format("{} template \"{}\" has an unclosed \"{{{{\"", what, text));
      std::string_view name = text.substr(open + 2, close - open - 2);
      while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
      while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
      if (name.empty())
        return Error(
            Errc::invalid_argument,
            fmt::format(
                "{} template has an empty \"{{{{}}}}\"; use {{{{table}}}}, {{{{schema}}}} or a "
                "metadata key",
                what));
      t.parts_.push_back({true, std::string(name)});
      text.remove_prefix(close + 2);
    }
    t.table_only_ = t.parts_.size() == 1 && t.parts_[0].placeholder && t.parts_[0].text == "table";
    return t;
  }

  // Renders into `out`; an empty result becomes `fallback`.
  void render(const Record& r, std::string& out, std::string_view fallback) const {
    out.clear();
    for (const Part& p : parts_) {
      if (!p.placeholder) out += p.text;
      else if (p.text == "table") out += table_of(r);
      else out += metadata_text(r, p.text);
    }
    if (out.empty()) out = fallback;
  }

  // The rendered name of `r` (default "records"); the view is valid until the next call.
  std::string_view render(const Record& r) {
    if (table_only_) return table_of(r);  // the common case: no copy
    render(r, out_, kDefaultTableName);
    return out_;
  }

  // Whether the template is `{{table}}` alone (every destination's default).
  bool table_only() const noexcept { return table_only_; }

  // The placeholder names, in order ("table", "schema", metadata keys).
  std::vector<std::string_view> placeholders() const {
    std::vector<std::string_view> out;
    for (const Part& p : parts_)
      if (p.placeholder) out.push_back(p.text);
    return out;
  }

  static std::string_view table_of(const Record& r) {
    std::string_view t = metadata_text(r, meta::kTable);
    if (t.empty()) t = metadata_text(r, meta::kCollection);
    return t.empty() ? kDefaultTableName : t;
  }

 private:
  struct Part {
    bool placeholder;
    std::string text;
  };
  std::vector<Part> parts_;
  bool table_only_ = false;
  std::string out_;
};

}  // namespace sluice
