#include "support/process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace sluice::test {

const char* sluice_binary() { return SLUICE_BIN; }

std::filesystem::path make_temp_dir(const std::string& name) {
  std::string tmpl =
      (std::filesystem::temp_directory_path() / ("sluice-e2e-" + name + "-XXXXXX")).string();
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  return tmpl;
}

void write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
}

void append_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary | std::ios::app);
  f << text;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TempDir::TempDir(const std::string& name) : path_(make_temp_dir(name)) {}

TempDir::~TempDir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (info != nullptr && info->result()->Failed()) {
    std::cerr << "kept the test's files in " << path_ << "\n";
    return;
  }
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

Process::Process(const std::vector<std::string>& args, const std::filesystem::path& dir)
    : dir_(dir) {
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
    std::string bin = sluice_binary();
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
}

Process::~Process() {
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

void Process::signal(int sig) {
  if (pid_ > 0 && !reaped_) ::kill(pid_, sig);
}

void Process::terminate() { signal(SIGTERM); }

void Process::kill9() {
  signal(SIGKILL);
  if (!reaped_) wait();
}

namespace {
int exit_code(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
}  // namespace

int Process::wait() {
  if (reaped_) return rc_;
  int status = 0;
  waitpid(pid_, &status, 0);
  reaped_ = true;
  return rc_ = exit_code(status);
}

int Process::wait_for(std::chrono::milliseconds timeout) {
  if (reaped_) return rc_;
  auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      return rc_ = exit_code(status);
    }
    if (std::chrono::steady_clock::now() >= until) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

bool Process::running() { return wait_for(std::chrono::milliseconds(0)) < 0; }

std::string Process::stderr_text() const { return read_file(dir_ / "stderr.txt"); }
std::string Process::stdout_text() const { return read_file(dir_ / "stdout.txt"); }

int run_sluice(const std::vector<std::string>& args, const std::filesystem::path& dir,
               std::chrono::seconds timeout) {
  Process p(args, dir);
  int rc = p.wait_for(timeout);
  return rc < 0 ? 999 : rc;
}

bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout,
                std::chrono::milliseconds every) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(every);
  }
  return true;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    out.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

bool is_log_line(const std::string& line) {
  return line.size() > 24 && line[4] == '-' && line[7] == '-' && line[10] == ' ' && line[13] == ':';
}

bool is_error_log_line(const std::string& line) {
  return is_log_line(line) && line.compare(24, 5, "error") == 0;
}

}  // namespace sluice::test
