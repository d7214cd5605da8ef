// The fault suite's shared steps (tests/fault/fault_suite_*_test.cc, one binary per pipeline):
// kill -9 at seeded random moments, waiting for a pipeline to converge, and the figures each case
// records. The workload, the verifier and the proxy are in tests/support (fault_workload.h,
// fault_proxy.h); docs/development/testing.md describes the suite.
#pragma once

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <thread>

#include "support/env.h"
#include "support/fault_proxy.h"
#include "support/fault_workload.h"
#include "support/pipeline_file.h"
#include "support/process.h"

namespace sluice::test::fault {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// This case's seed: the suite's seed (printed; SLUICE_FAULT_SEED replays) mixed with the test's
// name, so the cases of one run differ and each replays alone.
inline uint64_t case_seed() { return fault_seed() ^ std::hash<std::string>{}(current_test_slug()); }

// How many kill -9 per pipeline: 20 in make test, 100 in make soak.
inline int kill_count() { return fault_soak() ? 100 : 20; }

// One comparison of source and destination: rows verified, and "" when exact or what differs.
struct Check {
  int64_t verified = 0;
  int64_t lost = 0, duplicated = 0;
  std::string problem;  // "" when exact
};
using Checker = std::function<Check()>;

// Waits until `check` reports an exact match (the last check when it never does).
inline Check wait_exact(const Checker& check, std::chrono::seconds timeout, double* seconds) {
  // The soak's backlog after 100 kills or a 40 s outage takes longer to drain.
  if (fault_soak()) timeout = std::max(timeout, std::chrono::seconds(600));
  const auto t0 = Clock::now();
  Check c = check();
  while (!c.problem.empty() && Clock::now() - t0 < timeout) {
    std::this_thread::sleep_for(200ms);
    c = check();
  }
  if (seconds) *seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return c;
}

// Compares whole tables, once their cheap fingerprints (count, sums of id and rev) agree.
inline Checker images_checker(std::function<TableImage()> source,
                              std::function<TableImage()> destination,
                              std::function<std::string()> source_fingerprint = {},
                              std::function<std::string()> destination_fingerprint = {}) {
  return [source = std::move(source), destination = std::move(destination),
          sf = std::move(source_fingerprint), df = std::move(destination_fingerprint)] {
    if (sf && df) {
      const std::string a = sf(), b = df();
      if (a.empty() || a != b) {
        Check c;
        c.problem = "fingerprints differ: source " + a + ", destination " + b;
        return c;
      }
    }
    TableImage s = source();
    TableImage d = destination();
    Diff diff = compare_images(s, d);
    Check c;
    c.verified = diff.verified;
    c.lost = diff.lost + diff.extra + diff.differing;
    c.duplicated = diff.duplicated;
    if (!s.ok) c.problem = "source unreadable: " + s.error;
    else if (!diff.exact()) c.problem = diff.str();
    return c;
  };
}

// How often `needle` occurs in `text`.
inline size_t occurrences(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) n++;
  return n;
}

// `kills` times: start `sluice run p.yaml` in `dir`, wait until its pipeline has started (at most
// 20 s), let it run a random 0–`max_ms` ms more (seeded), kill -9. A run that exits by itself
// before its kill fails the test (with its stderr). The first kills land in the snapshot, the
// later ones in the stream.
inline int kill_loop(const std::filesystem::path& dir, int kills, std::mt19937_64& rng,
                     int max_ms = 1200) {
  int done = 0;
  for (int i = 0; i < kills; ++i) {
    Process p({"run", "p.yaml"}, dir);
    const size_t before = occurrences(p.stderr_text(), ": started (");
    wait_until([&] { return occurrences(p.stderr_text(), ": started (") > before || !p.running(); },
               20s, 20ms);
    const auto ms = std::chrono::milliseconds(rng() % uint64_t(max_ms));
    const int rc = p.wait_for(ms);
    if (rc != -1) {
      ADD_FAILURE() << "kill " << i << ": sluice exited with " << rc << " before its kill -9 at "
                    << ms.count() << " ms:\n"
                    << p.stderr_text();
      return done;
    }
    p.kill9();
    done++;
  }
  return done;
}

// Converges with a fresh `sluice run`, then stops it with SIGTERM (which must exit 0); records and
// checks the figures.
inline void converge_and_record(const std::filesystem::path& dir, const Checker& check,
                                FaultResult result, std::chrono::seconds timeout = 60s) {
  Process p({"run", "p.yaml"}, dir);
  double seconds = 0;
  Check c = wait_exact(check, timeout, &seconds);
  EXPECT_EQ(c.problem, "") << "after " << result.faults << " faults (" << result.fault << ", seed "
                           << result.seed << "):\n"
                           << p.stderr_text();
  result.recovery_seconds = std::max(result.recovery_seconds, seconds);
  result.rows_verified += c.verified;
  result.lost += c.lost;
  result.duplicated += c.duplicated;
  p.terminate();
  EXPECT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  record_fault_result(result);
}

// A tmpfs of `size` bytes mounted at `dir` (root only); unmounted at the end.
class SmallTmpfs {
 public:
  SmallTmpfs(const std::filesystem::path& dir, const std::string& size) : dir_(dir) {
    std::filesystem::create_directories(dir);
    if (geteuid() != 0) return;
    const std::string opts = "size=" + size;
    mounted_ = ::mount("tmpfs", dir.c_str(), "tmpfs", 0, opts.c_str()) == 0;
  }
  ~SmallTmpfs() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  // Fills the file system with a file until writing fails (ENOSPC); removes it on `free_space`.
  void fill() {
    std::FILE* f = std::fopen((dir_ / "filler").c_str(), "wb");
    if (!f) return;
    std::string chunk(4096, 'f');
    while (std::fwrite(chunk.data(), 1, chunk.size(), f) == chunk.size() && std::fflush(f) == 0) {
    }
    std::fclose(f);
  }
  void free_space() { std::filesystem::remove(dir_ / "filler"); }

 private:
  std::filesystem::path dir_;
  bool mounted_ = false;
};

}  // namespace sluice::test::fault
