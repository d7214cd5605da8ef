// Acknowledges source positions strictly in batch order.
//
//   reader:      begin(1,p1) begin(2,p2) begin(3,p3)
//   destination: complete(3) complete(1)           -> watermark advances to 1 (p1); 3 waits for 2
//                complete(2)                       -> watermark jumps to 3 (p3)
//
// A failed batch freezes the watermark below it forever (the checkpoint never passes a gap).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "sluice/result.h"

namespace sluice {

class OrderedAcker {
 public:
  // Registers batch `seq` (strictly increasing, called in order) covering source `position`.
  void begin(uint64_t seq, std::string position);
  // Marks batch `seq` finished. Any thread, any order. Returns true if the watermark advanced.
  bool complete(uint64_t seq, const Status& status);

  // Highest contiguous completed batch's position, if it changed since the last take.
  std::optional<std::string> take_advanced();
  // Blocks until the watermark advanced, a failure happened, or `timeout` passed.
  void wait_for_change(std::chrono::milliseconds timeout);
  // Wakes waiters (used at shutdown).
  void notify();

  uint64_t pending() const;  // begun but not yet contiguous-acked
  uint64_t acked_seq() const;
  std::optional<Error> failure() const;

 private:
  struct Entry {
    std::string position;
    bool done = false;
  };
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Entry> inflight_;
  uint64_t acked_seq_ = 0;
  std::optional<std::string> advanced_;  // latest position not yet taken
  std::optional<Error> failure_;
  bool changed_ = false;
};

}  // namespace sluice
