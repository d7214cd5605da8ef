// The terminal's live status line (`sluice run`'s progress) and the log lines written around it.
// Both go to one stream under one lock: a log line first erases the status line, then the status
// line is drawn again below it, so a log line never lands in the middle of the progress text.
//
//   show("1,000 records written ...")   "\r\033[K1,000 records written ..."      (no newline)
//   write_log("... WARN x\n")           "\r\033[K... WARN x\n1,000 records written ..."
//   clear()                             "\r\033[K"                                (forgotten)
#pragma once

#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>

namespace sluice {

class StatusLine {
 public:
  explicit StatusLine(std::FILE* out) : out_(out) {}
  // The process's line on stderr, shared by the log sink and the progress display.
  static StatusLine& stderr_line();

  // Draws `text` in place of the current status line (and keeps it for redraws).
  void show(std::string_view text);
  // Erases the status line; log lines are then written as they are.
  void clear();
  // Writes one formatted log line (ending in a newline) around the status line.
  void write_log(std::string_view line);

 private:
  std::mutex mu_;
  std::FILE* out_;
  std::string text_;
  bool shown_ = false;
};

}  // namespace sluice
