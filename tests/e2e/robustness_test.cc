// The binary under ordinary hostile conditions (issue 13, items 6, 9, 15): two runs on one
// checkpoint store or one HTTP port, a closed stderr or a gone pipe reader, many idle HTTP
// clients, SIGHUP, and the CLI's usage errors and JSON output.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <regex>
#include <thread>

#include "e2e/harness.h"
#include "support/pipeline_file.h"

namespace sluice::e2e {
namespace {

using namespace std::chrono_literals;
using test::lines_of;
using test::TempDir;
using test::wait_until;

// A generator → file pipeline; rate 0 and count 0 run until stopped.
test::PipelineFile generator_to_file(int rate, int count = 0) {
  test::PipelineFile f;
  f.checkpoints_path = "cp.db";
  f.pipeline("g").source("generator").set("rate", rate).set("count", count);
  f.pipeline("g").destination("file").set("path", "out.jsonl");
  return f;
}

// The port a running sluice announced on stderr ("…127.0.0.1:PORT/metrics"), 0 if none in 5 s.
int announced_port(const Process& p) {
  int port = 0;
  wait_until(
      [&] {
        std::smatch m;
        const std::string err = p.stderr_text();
        if (std::regex_search(err, m, std::regex("127\\.0\\.0\\.1:([0-9]+)/metrics")))
          port = std::stoi(m[1]);
        return port != 0;
      },
      5s, 10ms);
  return port;
}

// Item 6: one process per checkpoint store.
TEST(Robustness, SecondRunOnTheSameCheckpointStoreIsRefused) {
  TempDir dir("cp-lock");
  generator_to_file(200).write(dir / "p.yaml");
  Process first({"run", "p.yaml"}, dir.path());
  ASSERT_TRUE(wait_until([&] { return std::filesystem::exists(dir / "out.jsonl"); }, 10s))
      << first.stderr_text();

  Process second({"run", "p.yaml"}, dir.path());
  const int rc = second.wait_for(20s);
  EXPECT_NE(rc, 0) << second.stderr_text();
  EXPECT_NE(rc, -1) << "the second run did not stop";
  const std::string err = second.stderr_text();
  EXPECT_NE(
      err.find("is in use by another sluice process (pid " + std::to_string(first.pid()) + ")"),
      std::string::npos)
      << err;
  // So is a cleanup while the run goes on.
  Process cleanup({"cleanup", "p.yaml"}, dir.path());
  EXPECT_NE(cleanup.wait_for(20s), 0);
  EXPECT_NE(cleanup.stderr_text().find("in use by another sluice process"), std::string::npos)
      << cleanup.stderr_text();

  first.terminate();
  ASSERT_EQ(first.wait_for(30s), 0) << first.stderr_text();
  // Released with the first process: the next run starts.
  generator_to_file(0, 10).write(dir / "p2.yaml");
  EXPECT_EQ(run_sluice({"run", "p2.yaml", "--idle-exit", "0.2"}, dir.path(), 60s), 0)
      << read_file(dir / "stderr.txt");
}

// Item 6: a second process on the same http.listen is an error (no SO_REUSEPORT sharing).
TEST(Robustness, SecondRunOnTheSameHttpPortIsRefused) {
  TempDir dir("http-port");
  auto f = generator_to_file(200);
  f.http = test::YamlMap().set("listen", "127.0.0.1:0");
  f.write(dir / "a.yaml");
  Process first({"run", "a.yaml"}, dir.path());
  const int port = announced_port(first);
  ASSERT_GT(port, 0) << first.stderr_text();

  TempDir dir2("http-port-2");
  auto f2 = generator_to_file(200);
  f2.http = test::YamlMap().set("listen", "127.0.0.1:" + std::to_string(port));
  f2.write(dir2 / "b.yaml");
  Process second({"run", "b.yaml"}, dir2.path());
  const int rc = second.wait_for(20s);
  EXPECT_NE(rc, 0) << second.stderr_text();
  EXPECT_NE(rc, -1) << "the second run shares the port";
  EXPECT_NE(second.stderr_text().find("cannot listen on 127.0.0.1:" + std::to_string(port)),
            std::string::npos)
      << second.stderr_text();
  first.terminate();
  EXPECT_EQ(first.wait_for(30s), 0) << first.stderr_text();
}

// A killed sluice leaves nothing in /dev/shm. libmongoc kept its counters in /dev/shm/mongoc-<pid>
// until a clean exit; after kill -9 the file stayed, and a later sluice given the same pid printed
// a stray libmongoc warning before its one-line error.
TEST(Robustness, AKilledRunLeavesNoSharedMemoryFile) {
  TempDir dir("shm");
  generator_to_file(200).write(dir / "g.yaml");
  Process p({"run", "g.yaml"}, dir.path());
  ASSERT_TRUE(wait_until([&] { return std::filesystem::exists(dir / "out.jsonl"); }, 20s))
      << p.stderr_text();
  const std::filesystem::path counters = "/dev/shm/mongoc-" + std::to_string(p.pid());
  EXPECT_FALSE(std::filesystem::exists(counters)) << "while running";
  p.kill9();
  EXPECT_FALSE(std::filesystem::exists(counters)) << "after kill -9";
}

// Runs `sluice ARGS` in `dir` with stdout and stderr on `fd` (or closed when fd < 0); the raw
// wait status.
int run_with_output_fd(const std::vector<std::string>& args, const std::filesystem::path& dir,
                       int fd) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (chdir(dir.c_str()) != 0) _exit(97);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    } else {
      close(1);
      close(2);
    }
    std::vector<char*> argv;
    std::string bin = test::sluice_binary();
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(bin.c_str(), argv.data());
    _exit(98);
  }
  int status = 0;
  // Bounded: a hang fails the test instead of blocking ctest.
  for (int i = 0; i < 600; ++i) {
    if (waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(100ms);
  }
  ::kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

// Item 9: output that cannot be written (a pipe whose reader left, a closed stderr) never kills
// the run; the records still arrive.
TEST(Robustness, GonePipeReaderOrClosedStderrIsNoCrash) {
  TempDir dir("epipe");
  auto f = generator_to_file(0, 2000);
  f.http = test::YamlMap().set("listen", "127.0.0.1:0");  // the HTTP server ignores SIGPIPE
  f.write(dir / "p.yaml");
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  close(fds[0]);  // `| head -1` after its line: the reader is gone
  int status = run_with_output_fd({"run", "p.yaml", "--idle-exit", "0.2", "--log-level", "debug"},
                                  dir.path(), fds[1]);
  close(fds[1]);
  ASSERT_NE(status, -1) << "hung";
  EXPECT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  if (WIFEXITED(status)) {
    EXPECT_EQ(WEXITSTATUS(status), 0);
  }
  EXPECT_EQ(lines_of(read_file(dir / "out.jsonl")).size(), 2000u);

  std::filesystem::remove(dir / "cp.db");
  std::filesystem::remove(dir / "out.jsonl");
  status = run_with_output_fd({"run", "p.yaml", "--idle-exit", "0.2"}, dir.path(), -1);
  ASSERT_NE(status, -1) << "hung";
  EXPECT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  if (WIFEXITED(status)) {
    EXPECT_EQ(WEXITSTATUS(status), 0);
  }
  EXPECT_EQ(lines_of(read_file(dir / "out.jsonl")).size(), 2000u);
}

// Item 9: /healthz keeps answering while 64 clients hold idle connections.
TEST(Robustness, HealthzAnswersWithManyIdleClients) {
  TempDir dir("idle-clients");
  auto f = generator_to_file(100);
  f.http = test::YamlMap().set("listen", "127.0.0.1:0");
  f.write(dir / "p.yaml");
  Process p({"run", "p.yaml"}, dir.path());
  const int port = announced_port(p);
  ASSERT_GT(port, 0) << p.stderr_text();
  std::vector<int> idle;
  for (int i = 0; i < 64; ++i) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(s, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    idle.push_back(s);
    // httplib listens with a backlog of 5: a burst of connects beyond it waits for SYN retries.
    std::this_thread::sleep_for(5ms);
  }
  std::this_thread::sleep_for(200ms);  // every idle connection accepted and handed to a worker
  httplib::Client client("127.0.0.1", port);
  // Generous: a fixed pool of 8 workers held by 64 idle clients answers only after ~40 s.
  client.set_read_timeout(3, 0);
  client.set_connection_timeout(3, 0);
  auto res = client.Get("/healthz");
  ASSERT_TRUE(res) << "GET /healthz got no answer with 64 idle clients";

  EXPECT_EQ(res->status, 200);
  for (int s : idle) close(s);
  p.terminate();
  EXPECT_EQ(p.wait_for(30s), 0) << p.stderr_text();
}

// SIGHUP reloads the pipeline file (as daemons do, `systemctl reload`): the run goes on, an
// unchanged file changes nothing, and SIGTERM then drains and checkpoints as before.
TEST(Robustness, SighupReloadsAndKeepsRunning) {
  TempDir dir("sighup");
  generator_to_file(500).write(dir / "p.yaml");
  Process p({"run", "p.yaml"}, dir.path());
  ASSERT_TRUE(wait_until([&] { return std::filesystem::exists(dir / "out.jsonl"); }, 10s));
  p.signal(SIGHUP);
  ASSERT_TRUE(wait_until(
      [&] {
        return p.stderr_text().find("reload applied: no pipeline changed") != std::string::npos;
      },
      20s))
      << p.stderr_text();
  EXPECT_NE(p.stderr_text().find("received SIGHUP: reloading"), std::string::npos);
  const size_t before = lines_of(read_file(dir / "out.jsonl")).size();
  ASSERT_TRUE(
      wait_until([&] { return lines_of(read_file(dir / "out.jsonl")).size() > before; }, 20s))
      << "the pipeline stopped on SIGHUP: " << p.stderr_text();
  p.terminate();
  ASSERT_EQ(p.wait_for(30s), 0) << p.stderr_text();
  const std::string err = p.stderr_text();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      err, m, std::regex("pipeline g stopped: ([0-9,]+) read, ([0-9,]+) written")))
      << err;
  EXPECT_EQ(m[1], m[2]);
  EXPECT_EQ(err.find("pipeline g: started", err.find("pipeline g: started") + 1), std::string::npos)
      << "SIGHUP restarted an unchanged pipeline: " << err;
  EXPECT_EQ(lines_of(read_file(dir / "out.jsonl")).size(),
            static_cast<size_t>(std::stoll(std::regex_replace(m[2].str(), std::regex(","), ""))));
}

// Item 15: an unknown subcommand says so; every usage error exits 2 with one line.
TEST(Robustness, UsageErrorsExitTwoWithOneLine) {
  TempDir dir("usage");
  struct Case {
    std::vector<std::string> args;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {{"frobnicate"}, "unknown command 'frobnicate'"},
      {{"frobnicate", "p.yaml"}, "unknown command 'frobnicate'"},
      {{}, "sluice --help"},
      {{"run", "--no-such-flag"}, "--no-such-flag"},
      {{"validate"}, "FILE"},
      {{"run", "--idle-exit", "soon"}, "--idle-exit"},
      {{"run", "--log-format", "xml"}, "--log-format"},
  };
  for (const Case& c : cases) {
    std::filesystem::remove(dir / "stderr.txt");
    EXPECT_EQ(run_sluice(c.args, dir.path(), 30s), 2) << testing::PrintToString(c.args);
    const std::string err = read_file(dir / "stderr.txt");
    EXPECT_NE(err.find(c.expect), std::string::npos) << testing::PrintToString(c.args) << err;
    EXPECT_EQ(lines_of(err).size(), 1u) << err;
    EXPECT_EQ(err.rfind("sluice: ", 0), 0u) << err;
  }
  // Help and version are no errors.
  EXPECT_EQ(run_sluice({"--help"}, dir.path(), 30s), 0);
  EXPECT_EQ(run_sluice({"--version"}, dir.path(), 30s), 0);
}

// Item 15: with --log-format json every line on stderr is a JSON object, the summary included,
// and so is an error line.
TEST(Robustness, JsonLogFormatMakesEveryLineJson) {
  TempDir dir("json-lines");
  generator_to_file(0, 100).write(dir / "p.yaml");
  ASSERT_EQ(
      run_sluice({"run", "p.yaml", "--idle-exit", "0.2", "--log-format", "json"}, dir.path(), 60s),
      0)
      << read_file(dir / "stderr.txt");
  const auto lines = lines_of(read_file(dir / "stderr.txt"));
  ASSERT_FALSE(lines.empty());
  bool summary = false;
  for (const std::string& line : lines) {
    EXPECT_EQ(line.front(), '{') << line;
    EXPECT_EQ(line.back(), '}') << line;
    if (line.find("\"msg\":\"pipeline g stopped") != std::string::npos) {
      summary = true;
      EXPECT_NE(line.find("\"records_written\":100"), std::string::npos) << line;
    }
  }
  EXPECT_TRUE(summary) << read_file(dir / "stderr.txt");

  write_file(dir / "bad.yaml", "version: 1\npipelines: []\n");
  std::filesystem::remove(dir / "stderr.txt");
  EXPECT_NE(run_sluice({"run", "bad.yaml", "--log-format", "json"}, dir.path(), 30s), 0);
  for (const std::string& line : lines_of(read_file(dir / "stderr.txt")))
    EXPECT_EQ(line.rfind("{\"time\":", 0), 0u) << line;
  std::filesystem::remove(dir / "stderr.txt");
  EXPECT_EQ(run_sluice({"frobnicate", "--log-format", "json"}, dir.path(), 30s), 2);
  for (const std::string& line : lines_of(read_file(dir / "stderr.txt")))
    EXPECT_EQ(line.rfind("{\"time\":", 0), 0u) << line;
}

// Item 15: a connector's own prefix is not repeated by the layers above it.
TEST(Robustness, ErrorPrefixesAreNotDoubled) {
  TempDir dir("prefixes");
  test::PipelineFile f;
  f.checkpoints_path = "cp.db";
  f.pipeline("d").source("generator").set("count", 1);
  f.pipeline("d").destination("sqlite").set("path", "");
  f.write(dir / "p.yaml");
  for (const char* cmd : {"validate", "run"}) {
    std::filesystem::remove(dir / "stderr.txt");
    EXPECT_NE(run_sluice({cmd, "p.yaml"}, dir.path(), 30s), 0);
    const std::string err = read_file(dir / "stderr.txt");
    EXPECT_NE(err.find("sqlite destination: `path` is empty"), std::string::npos) << err;
    EXPECT_EQ(err.find("sqlite destination: sqlite destination:"), std::string::npos) << err;
  }
}

}  // namespace
}  // namespace sluice::e2e

namespace sluice::e2e {
namespace {

// Item 7: `sluice cleanup` is a full reset: a position the destination stores itself
// (checkpoint_in_destination) is removed too, so the next run starts over instead of resuming.
TEST(Robustness, CleanupAlsoErasesThePositionStoredInTheDestination) {
  TempDir dir("cleanup-destination");
  test::PipelineFile f;
  f.checkpoints_path = "cp.db";
  f.pipeline("c").source("generator").set("count", 50);
  f.pipeline("c")
      .destination("sqlite")
      .set("path", "out.db")
      .set("checkpoint_in_destination", true);
  f.write(dir / "p.yaml");
  ASSERT_EQ(run_sluice({"run", "p.yaml", "--idle-exit", "0.2"}, dir.path(), 60s), 0)
      << read_file(dir / "stderr.txt");
  auto stored = [&] {
    Db db(dir / "out.db");
    return db.scalar("SELECT COUNT(*) FROM sluice_checkpoints WHERE pipeline = 'c'");
  };
  ASSERT_EQ(stored(), 1);
  ASSERT_EQ(run_sluice({"cleanup", "p.yaml"}, dir.path(), 60s), 0) << read_file(dir / "stderr.txt");
  EXPECT_NE(read_file(dir / "stdout.txt").find("position stored in the destination"),
            std::string::npos)
      << read_file(dir / "stdout.txt");
  EXPECT_EQ(stored(), 0);
}

}  // namespace
}  // namespace sluice::e2e

namespace sluice::e2e {
namespace {

// Item 15: a MySQL connection error names its fix, as PostgreSQL's do (and shows no password).
TEST(Robustness, MysqlConnectionErrorsNameTheFix) {
  TempDir dir("mysql-hint");
  test::PipelineFile f;
  f.checkpoints_path = "cp.db";
  f.pipeline("m").source("generator").set("count", 1);
  // Port 1 on loopback: nothing listens there.
  f.pipeline("m").destination("mysql").set("url", "mysql://u:hunter2-pw@127.0.0.1:1/db");
  f.write(dir / "p.yaml");
  EXPECT_EQ(run_sluice({"run", "p.yaml"}, dir.path(), 60s), 1);
  const std::string err = read_file(dir / "stderr.txt");
  EXPECT_NE(err.find("is MySQL/MariaDB running there? check host and port in `url`"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("hunter2-pw"), std::string::npos) << err;
}

}  // namespace
}  // namespace sluice::e2e
