#include "engine/status_line.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace sluice {
namespace {

std::string contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string out;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  return out;
}

// Issue 13, item 11: a log line erases the progress line first and redraws it after.
TEST(StatusLine, ALogLineClearsTheProgressLineAndRedrawsItAfter) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  StatusLine line(f);
  line.write_log("before\n");
  line.show("10 records written");
  line.write_log("WARN something\n");
  line.show("20 records written");
  line.clear();
  line.write_log("after\n");
  EXPECT_EQ(contents(f),
            "before\n"
            "\r\033[K10 records written"
            "\r\033[KWARN something\n10 records written"
            "\r\033[K20 records written"
            "\r\033[K"
            "after\n");
  std::fclose(f);
}

TEST(StatusLine, ConcurrentLogLinesNeverSplitTheProgressText) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  StatusLine line(f);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        if (t == 0) line.show("PROGRESS " + std::to_string(i));
        else line.write_log("log " + std::to_string(t) + "\n");
      }
    });
  for (auto& th : threads) th.join();
  line.clear();
  // Every log line starts right after an erase (or at the start) and the progress text is never
  // cut: each "PROGRESS n" is followed by an erase, the end, or nothing else on its line.
  const std::string out = contents(f);
  size_t pos = 0;
  while ((pos = out.find("log ", pos)) != std::string::npos) {
    ASSERT_TRUE(pos == 0 || out.compare(pos - 4, 4, "\r\033[K") == 0 || out[pos - 1] == '\n')
        << out.substr(pos > 30 ? pos - 30 : 0, 60);
    pos += 4;
  }
  std::fclose(f);
}

}  // namespace
}  // namespace sluice
