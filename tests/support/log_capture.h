// What the default logger writes while a LogCapture lives: the last `lines` formatted lines, at the
// logger's level or at `level` when one is given. The logger's sinks and level are as before once
// it goes, also when a failed assertion ends the test early.
#pragma once

#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::test {

class LogCapture {
 public:
  explicit LogCapture(size_t lines, std::optional<spdlog::level::level_enum> level = std::nullopt)
      : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(lines)),
        level_(spdlog::get_level()) {
    spdlog::default_logger()->sinks().push_back(sink_);
    if (level) spdlog::set_level(*level);
  }
  ~LogCapture() {
    spdlog::set_level(level_);
    auto& sinks = spdlog::default_logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  std::vector<std::string> lines() const { return sink_->last_formatted(); }
  bool contains(std::string_view what) const {
    for (const std::string& line : lines())
      if (line.find(what) != std::string::npos) return true;
    return false;
  }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  spdlog::level::level_enum level_;
};

}  // namespace sluice::test
