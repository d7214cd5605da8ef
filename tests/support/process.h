// Process control for end-to-end tests of the sluice binary: a child running `sluice ARGS...` in
// a directory (stdout/stderr to stdout.txt/stderr.txt there), waiting with a timeout, SIGTERM,
// SIGKILL (kill -9), the exit code; temporary directories and whole files.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace sluice::test {

// The sluice binary the tests run (SLUICE_BIN of the build).
const char* sluice_binary();

std::filesystem::path make_temp_dir(const std::string& name);
void write_file(const std::filesystem::path& p, const std::string& text);
void append_file(const std::filesystem::path& p, const std::string& text);
std::string read_file(const std::filesystem::path& p);

// A directory of its own under the temporary directory, removed at the end unless the test failed
// (then kept, and named in the failure output, for a look at the files).
class TempDir {
 public:
  explicit TempDir(const std::string& name);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// A child process running the sluice binary; stdout/stderr are appended to files in `dir`. The
// destructor kills (SIGKILL) and reaps a child still running.
class Process {
 public:
  Process(const std::vector<std::string>& args, const std::filesystem::path& dir);
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  void signal(int sig);
  void terminate();  // SIGTERM: a graceful stop
  void kill9();      // SIGKILL: a crash; reaps the child
  // Exit code, or 128+signal.
  int wait();
  // Waits at most `timeout`; -1 if still running.
  int wait_for(std::chrono::milliseconds timeout);
  bool running();
  std::string stderr_text() const;
  std::string stdout_text() const;

 private:
  std::filesystem::path dir_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int rc_ = -1;
};

// Runs to completion; the exit code (timeout: SIGKILL and 999).
int run_sluice(const std::vector<std::string>& args, const std::filesystem::path& dir,
               std::chrono::seconds timeout = std::chrono::seconds(300));

// Polls `pred` every `every` until it holds or `timeout` passes.
bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout,
                std::chrono::milliseconds every = std::chrono::milliseconds(50));

// Lines of a text (a process's stderr).
std::vector<std::string> lines_of(const std::string& text);
// A log line: "2024-01-02 03:04:05.678 level message"; an error one.
bool is_log_line(const std::string& line);
bool is_error_log_line(const std::string& line);

}  // namespace sluice::test
