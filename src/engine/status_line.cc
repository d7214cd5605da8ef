#include "engine/status_line.h"

namespace sluice {

namespace {
constexpr std::string_view kEraseLine = "\r\033[K";

void put(std::FILE* out, std::string_view s) {
  // A closed or broken stderr must not stop the run: what cannot be shown is dropped.
  if (!s.empty()) (void)std::fwrite(s.data(), 1, s.size(), out);
}
}  // namespace

StatusLine& StatusLine::stderr_line() {
  static StatusLine line(stderr);
  return line;
}

void StatusLine::show(std::string_view text) {
  std::lock_guard lock(mu_);
  text_.assign(text);
  put(out_, kEraseLine);
  put(out_, text_);
  shown_ = true;
  (void)std::fflush(out_);
}

void StatusLine::clear() {
  std::lock_guard lock(mu_);
  if (shown_) put(out_, kEraseLine);
  shown_ = false;
  text_.clear();
  (void)std::fflush(out_);
}

void StatusLine::write_log(std::string_view line) {
  std::lock_guard lock(mu_);
  if (shown_) put(out_, kEraseLine);
  put(out_, line);
  if (shown_) put(out_, text_);
  (void)std::fflush(out_);
}

}  // namespace sluice
