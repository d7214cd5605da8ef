// A log source's bursts beside a busy neighbour: while `write_elsewhere` writes without a pause (on
// a thread of its own: another database of the same server, whose WAL or binlog the source's
// connection also sees), two bursts of 50 rows are written by `burst(from)` (ids from..from+49)
// and read back by `read_count(n)` (true once the reader holds n records). With a batch linger of
// 6 s, each burst must land in under 3 s: a tenth of the linger after its last change, whatever
// the neighbour writes.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

namespace sluice::test {

inline void expect_bursts_land_beside_a_busy_writer(const std::function<bool()>& write_elsewhere,
                                                    const std::function<bool(int)>& burst,
                                                    const std::function<bool(size_t)>& read_count) {
  using namespace std::chrono_literals;
  std::atomic<bool> stop{false};
  std::atomic<int> writes{0};
  std::thread writer([&] {
    while (!stop.load() && write_elsewhere()) writes.fetch_add(1);
  });
  for (int round = 0; round < 2; ++round) {
    std::this_thread::sleep_for(300ms);
    const int from = 1 + round * 50;
    if (!burst(from)) {
      ADD_FAILURE() << "the burst was not written";
      break;
    }
    const auto start = std::chrono::steady_clock::now();
    if (!read_count(size_t(from + 49))) break;  // (the reader reported why)
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_LT(took, 3s) << "a burst of 50 rows took "
                        << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                        << " ms with batch.linger_ms 6000";
  }
  stop = true;
  writer.join();
  EXPECT_GT(writes.load(), 10) << "the other database did not write";
}

}  // namespace sluice::test
