// The bytes of binlog events between the dump connection's reader thread and the source's decoding
// thread: one ring of memory, allocated once. The reader copies each event out of libmariadb's
// packet buffer (which its next read reuses) straight into the ring; the decoder reads it there in
// place and releases it once decoded. No allocation and no second copy per event.
//
//        released        popped (being decoded)   committed (not popped yet)    free
//   [ ............ | ####################### | ========================== | ......... ]
//                  tail                        next pop                     head (reserve)
//
//   reader thread: reserve(n) ─▶ write n bytes ─▶ commit(verified)   (waits while the ring is full)
//   decoder:       pop() ─▶ decode ─▶ release()                        (in the order popped)
//
// Bounded by its capacity: a reader ahead of the decoder waits for room, so the ring is the whole
// read-ahead.
//
// A reader waiting for room is woken once a quarter of the ring (or what it needs, if more) is
// free in one piece, or once the decoder has taken every committed event: not for each event
// released, which made the two threads take turns event by event (a futex call, an
// inter-processor interrupt and two context switches each) whenever the decoder was behind. A
// waiting decoder is woken by every commit: it waits only when it has nothing to do, and holding
// events back from it would delay them. An event that does not fit in the ring (a row image of many
// megabytes) is written to a buffer of its own once everything before it was released. An error
// (the connection broke) comes out of pop() after every event committed before it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "sluice/result.h"

namespace sluice::mysql {

class EventRing {
 public:
  static constexpr size_t kDefaultCapacity = 8u << 20;

  // A popped event: its bytes (valid until release()) and whether the reader verified its CRC32.
  struct Event {
    std::string_view bytes;
    bool crc_verified = false;
  };

  explicit EventRing(size_t capacity = kDefaultCapacity);
  EventRing(const EventRing&) = delete;
  EventRing& operator=(const EventRing&) = delete;

  // Reader: room for an event of `n` bytes, waiting while the ring is full; null once stopped.
  // At most one reservation is open at a time.
  char* reserve(size_t n);
  // Reader: the reserved event is written; `crc_verified`: its trailing CRC32 was checked.
  void commit(bool crc_verified = false);
  // Reader: the stream ended with `e`; pop() returns it once every committed event was popped.
  void fail(Error e);

  // Decoder: the next event, in commit order; false when none came before `deadline`.
  Result<bool> pop(Event* out, std::chrono::steady_clock::time_point deadline);
  // Decoder: the oldest popped event is no longer read (its bytes may be overwritten).
  void release();

  // Ends every wait; reserve() returns null from now on.
  void stop();

  size_t capacity() const noexcept { return capacity_; }

 private:
  struct Slot {
    size_t offset = 0;
    size_t size = 0;
    bool own_buffer = false;  // in big_, not in the ring
    bool crc_verified = false;
  };
  // Where an event of `n` bytes fits now (the ring's offset), if it does. Under mu_.
  std::optional<size_t> fit(size_t n) const;
  // Whether `room` bytes can be reserved now: in the ring (at *at), or for an event larger than
  // the ring in a buffer of its own, once the ring is empty. Under mu_.
  bool has_room(size_t room, std::optional<size_t>* at = nullptr) const;

  const size_t capacity_;
  std::unique_ptr<char[]> ring_;
  std::string big_;  // the one event larger than the ring, while it is not released
  std::mutex mu_;
  std::condition_variable room_, ready_;
  std::deque<Slot> slots_;  // committed and not released, oldest first
  size_t popped_ = 0;       // slots_[0, popped_) are with the decoder
  size_t head_ = 0;         // end of the newest ring slot
  std::optional<Slot> reserved_;
  // The reader waits for `reader_needs_` bytes of room.
  bool reader_waiting_ = false;
  size_t reader_needs_ = 0;
  bool stopped_ = false;
  std::optional<Error> error_;
};

}  // namespace sluice::mysql
