// Helpers for end-to-end tests of the sluice binary: temporary directories, running the binary,
// killing it with SIGKILL mid-run, reading SQLite results.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace sluice::e2e {

inline std::filesystem::path make_temp_dir(const std::string& name) {
  std::string tmpl = (std::filesystem::temp_directory_path() / ("sluice-e2e-" + name + "-XXXXXX")).string();
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  return tmpl;
}

inline void write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream f(p);
  f << text;
}

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A child process running the sluice binary; stdout/stderr go to files in `dir`.
class Process {
 public:
  Process(const std::vector<std::string>& args, const std::filesystem::path& dir) : dir_(dir) {
    pid_ = fork();
    if (pid_ == 0) {
      if (chdir(dir.c_str()) != 0) _exit(127);
      int out = open("stdout.txt", O_WRONLY | O_CREAT | O_APPEND, 0644);
      int err = open("stderr.txt", O_WRONLY | O_CREAT | O_APPEND, 0644);
      dup2(out, 1);
      dup2(err, 2);
      int devnull = open("/dev/null", O_RDONLY);
      dup2(devnull, 0);
      std::vector<char*> argv;
      std::string bin = SLUICE_BIN;
      argv.push_back(bin.data());
      std::vector<std::string> copy = args;
      for (auto& a : copy) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(bin.c_str(), argv.data());
      _exit(127);
    }
  }
  ~Process() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  void signal(int sig) { kill(pid_, sig); }
  // Exit code, or 128+signal.
  int wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  // Waits at most `timeout`; returns -1 if still running.
  int wait_for(std::chrono::milliseconds timeout) {
    auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      int status = 0;
      pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }
  std::string stderr_text() const { return read_file(dir_ / "stderr.txt"); }

 private:
  std::filesystem::path dir_;
  pid_t pid_ = -1;
  bool reaped_ = false;
};

// Runs to completion; returns the exit code (timeout: SIGKILL and 999).
inline int run_sluice(const std::vector<std::string>& args, const std::filesystem::path& dir,
                      std::chrono::seconds timeout = std::chrono::seconds(300)) {
  Process p(args, dir);
  int rc = p.wait_for(timeout);
  return rc < 0 ? 999 : rc;
}

class Db {
 public:
  explicit Db(const std::filesystem::path& p) {
    if (sqlite3_open_v2(p.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK)
      throw std::runtime_error("cannot open " + p.string());
    sqlite3_busy_timeout(db_, 5000);
  }
  ~Db() { sqlite3_close(db_); }
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  // Calls `row` for each result row; returns false on SQL error.
  bool query(const std::string& sql, const std::function<void(sqlite3_stmt*)>& row) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) return false;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) row(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE;
  }
  int64_t scalar(const std::string& sql) {
    int64_t v = -1;
    query(sql, [&](sqlite3_stmt* st) { v = sqlite3_column_int64(st, 0); });
    return v;
  }
  std::string text(const std::string& sql) {
    std::string v;
    query(sql, [&](sqlite3_stmt* st) {
      auto p = sqlite3_column_text(st, 0);
      v = p ? reinterpret_cast<const char*>(p) : "";
    });
    return v;
  }

 private:
  sqlite3* db_ = nullptr;
};

inline std::string column_text(sqlite3_stmt* st, int i) {
  auto p = sqlite3_column_text(st, i);
  return p ? std::string(reinterpret_cast<const char*>(p)) : std::string("<null>");
}

}  // namespace sluice::e2e
