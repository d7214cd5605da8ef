// The disk spool: append-only segment files in one directory.
//
//   DIR/00000000000000000001.seg   frames 1..k     (deleted once every reader released k)
//   DIR/0000000000000000000k+1.seg frames k+1..    (the active segment: appends go here)
//
//   frame := u32 magic "SPL1" · u32 payload length · u64 seq · i64 append time (unix ms) ·
//            u32 records · u32 crc32 (CRC-32 as zlib's, over the 24 header bytes before it and the
//            payload) · payload (batch_codec)
//
// A segment is named after its first sequence number. A frame is written with one write(2), then
// fdatasync'd (`fsync`), and only then shown to readers and acknowledged: a reader never delivers
// a batch that a crash could take back. At open every segment's headers are read; the last
// segment's frames are CRC-checked and a torn or corrupt tail (a crash inside a write) is
// truncated with a warning — that batch was never acknowledged, so the source sends it again. A
// bad frame before the last segment's tail is corruption: open fails.
//
// The segment holding the last frame is never deleted, so the next sequence number and the last
// source position survive a restart. `max_bytes` bounds the files on disk; a full spool blocks
// the appender until a reader releases a segment (`when_full: block`) or fails the append.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>

#include "support/spool/spool.h"

namespace sluice::spool {

struct DiskSpoolOptions {
  std::string path;
  uint64_t segment_bytes = 64u << 20;  // a segment rolls once it holds this much
  uint64_t max_bytes = 0;              // 0: unbounded
  enum class WhenFull { block, fail } when_full = WhenFull::block;
  bool fsync = true;  // fdatasync each frame before it counts as durable
  // Every reader that will read the spool: nothing is deleted before all of them released it.
  std::vector<std::string> readers{"destination"};
};

class DiskSpool final : public Spool {
 public:
  explicit DiskSpool(DiskSpoolOptions options);
  ~DiskSpool() override;

  Status open() override;
  Status append(const Batch& batch, std::stop_token stop) override;
  std::optional<std::string> last_position() const override;
  Result<std::unique_ptr<SpoolReader>> open_reader(const std::string& name,
                                                   std::optional<uint64_t> after_seq) override;
  void finish() override;
  SpoolDepth depth() const override;
  SpoolDepth reader_depth(const std::string& name) const override;
  bool covers_beginning(const std::string& name) const override;
  Status mark_origin(bool beginning) override;
  void close() noexcept override;

  // Test hooks.
  size_t segment_count() const;
  uint64_t disk_bytes() const;

 private:
  class Reader;
  struct Segment {
    uint64_t first_seq = 0;
    uint64_t last_seq = 0;        // first_seq - 1 while empty
    uint64_t bytes = 0;           // bytes of complete frames
    uint64_t records_before = 0;  // records of every frame before this segment (relative)
    uint64_t records = 0;
    std::string path;
  };
  struct ReaderState {
    bool registered = false;
    uint64_t released_seq = 0;
    uint64_t released_records = 0;  // records of every frame up to the released one (relative)
    uint64_t seg_first = 0;         // the segment of the frame after the released one
    uint64_t offset_after = 0;      // and its offset there
  };

  std::string segment_path(uint64_t first_seq) const;
  Status scan_segment(Segment& seg, bool last);
  Status roll_locked(std::unique_lock<std::mutex>& lock);
  // Deletes segments every reader passed; recomputes the depth. Holds mu_.
  void collect_locked();
  uint64_t min_released_locked() const;
  // What `st` has not released: records and bytes (not the oldest batch's time).
  SpoolDepth reader_depth_locked(const ReaderState& st) const;
  // The append time of the first frame at (seg_first, offset) or after it (0: none).
  int64_t frame_time_locked(uint64_t seg_first, uint64_t offset) const;
  Status fail_io(const std::string& what, int err) const;

  DiskSpoolOptions options_;
  mutable std::mutex mu_;
  std::condition_variable_any appended_cv_;  // readers wait for frames
  std::condition_variable_any space_cv_;     // the appender waits for space
  std::deque<Segment> segments_;
  int fd_ = -1;  // the active segment, opened for appending
  uint64_t next_seq_ = 1;
  uint64_t total_records_ = 0;
  uint64_t disk_bytes_ = 0;
  std::optional<std::string> last_position_;
  std::map<std::string, ReaderState> readers_;
  bool finished_ = false;
  bool open_ = false;
  // DIR/origin: "beginning" or "resumed" (mark_origin), then the readers the spool was created
  // with; empty while unknown.
  std::string origin_;
  std::vector<std::string> origin_readers_;
  std::string scratch_;  // the frame being written (appender thread)

  std::atomic<uint64_t> depth_records_{0};
  std::atomic<uint64_t> depth_bytes_{0};
  std::atomic<int64_t> oldest_ms_{0};
};

}  // namespace sluice::spool
