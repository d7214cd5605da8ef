// Fail points (failpoint.h): SLUICE_FAILPOINTS parsed once before main, each armed point with its
// own hit counter.
#include "support/failpoint.h"

#if SLUICE_FAILPOINTS_ON

#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace sluice::failpoint {
namespace {

// Every point the code has; an armed name must be one of them.
constexpr std::array<std::string_view, 5> kFailPoints = {
    "after_destination_commit",  // runtime: a batch is durable at the destination, not checkpointed
    "after_checkpoint",          // runtime: the checkpoint is saved, the source not yet acked
    "mid_transaction",           // log sources: a batch ends inside a CDC transaction
    "mid_snapshot_chunk",        // log sources: a batch ends inside a table's snapshot
    "spool_after_write",         // disk spool: a frame is written, not yet synced or acknowledged
};

struct Armed {
  uint64_t at = 0;        // crash on this hit (1: the first); 0: no crash
  uint64_t delay_ms = 0;  // sleep this long at every hit; 0: no delay
  std::atomic<uint64_t> hits{0};
};
std::array<Armed, kFailPoints.size()> g_points;

[[noreturn]] void refuse(const std::string& why) {
  std::fprintf(stderr,
               "sluice: SLUICE_FAILPOINTS: %s (expected name=crash[@N] or name=delay:MS,…)\n",
               why.c_str());
  std::_Exit(2);
}

bool parse_env() {
  const char* env = std::getenv("SLUICE_FAILPOINTS");
  if (!env || !*env) return false;
  std::string_view rest(env);
  bool any = false;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) refuse("'" + std::string(item) + "' has no action");
    const std::string_view name = item.substr(0, eq);
    std::string_view action = item.substr(eq + 1);
    uint64_t at = 1, delay_ms = 0;
    if (action.starts_with("delay:")) {  // delay:MS, at every hit, no crash
      const std::string_view n = action.substr(6);
      auto [p, ec] = std::from_chars(n.data(), n.data() + n.size(), delay_ms);
      if (ec != std::errc() || p != n.data() + n.size() || delay_ms == 0 || delay_ms > 60000)
        refuse("'" + std::string(item) + "': delay:MS needs 1 to 60000 milliseconds");
      at = 0;
    } else {  // crash[@N]
      if (const size_t amp = action.find('@'); amp != std::string_view::npos) {
        const std::string_view n = action.substr(amp + 1);
        auto [p, ec] = std::from_chars(n.data(), n.data() + n.size(), at);
        if (ec != std::errc() || p != n.data() + n.size() || at == 0)
          refuse("'" + std::string(item) + "': @N needs a count of at least 1");
        action = action.substr(0, amp);
      }
      if (action != "crash")
        refuse("'" + std::string(item) + "': unknown action '" + std::string(action) + "'");
    }
    size_t i = 0;
    while (i < kFailPoints.size() && kFailPoints[i] != name) ++i;
    if (i == kFailPoints.size()) {
      std::string names;
      for (std::string_view k : kFailPoints) names += (names.empty() ? "" : ", ") + std::string(k);
      refuse("unknown fail point '" + std::string(name) + "' (there are " + names + ")");
    }
    g_points[i].at = at;
    g_points[i].delay_ms = delay_ms;
    any = true;
  }
  return any;
}

}  // namespace

const bool armed = parse_env();

void hit(std::string_view name) noexcept {
  for (size_t i = 0; i < kFailPoints.size(); ++i) {
    if (kFailPoints[i] != name) continue;
    Armed& p = g_points[i];
    if (p.delay_ms) std::this_thread::sleep_for(std::chrono::milliseconds(p.delay_ms));
    if (p.at == 0) return;
    if (p.hits.fetch_add(1, std::memory_order_relaxed) + 1 != p.at) return;
    // One write(2), no stdio buffer: the line is out before the signal.
    const std::string line = "sluice: fail point " + std::string(name) + " fired (crash)\n";
    (void)!::write(STDERR_FILENO, line.data(), line.size());
    ::kill(::getpid(), SIGKILL);
    std::_Exit(137);
  }
}

}  // namespace sluice::failpoint

#endif
