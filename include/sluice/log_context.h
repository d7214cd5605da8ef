// Which pipeline and connector the calling thread works for, for the `pipeline` and `connector`
// fields of JSON log lines (`--log-format json`). Set once when a thread starts its part of a
// pipeline (LogScope), read by the log formatter only when a line is written: nothing per record.
#pragma once

#include <string_view>

namespace sluice {

struct LogContext {
  std::string_view pipeline;   // empty: the thread belongs to no pipeline
  std::string_view connector;  // the connector the thread drives (source, destination), if one
};

// The calling thread's context. The strings must outlive the scope that set them (the pipeline's
// options do).
inline LogContext& thread_log_context() noexcept {
  static thread_local LogContext context;
  return context;
}

// Sets the thread's context for its lifetime, then restores the previous one.
class LogScope {
 public:
  LogScope(std::string_view pipeline, std::string_view connector) noexcept
      : saved_(thread_log_context()) {
    thread_log_context() = {pipeline, connector};
  }
  ~LogScope() { thread_log_context() = saved_; }
  LogScope(const LogScope&) = delete;
  LogScope& operator=(const LogScope&) = delete;

 private:
  LogContext saved_;
};

}  // namespace sluice
