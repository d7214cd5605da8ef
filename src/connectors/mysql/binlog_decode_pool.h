// Rows events decoded on more than one thread (binlog.decode_threads). The source's thread reads
// the stream in order and keeps everything that depends on order: table maps, transactions,
// positions, schema changes and the records. While it works on one rows event it looks ahead in
// the ring (mysql_stream.cc, decode_ahead) and hands the rows events that follow to this pool as
// jobs; a helper thread decodes a job's row images into an arena of its own. When the source
// reaches that event it takes the decoded rows and only builds their records.
//
//   source thread:  event k: decode, build ─▶ event k+1: take job, build ─▶ event k+2: ...
//   helper thread:              decode job k+1 ─▶ decode job k+2 ─▶ ...
//
// Work is shared, not split up front: a helper takes the oldest job nobody took; the source,
// when the job it needs is still being decoded, decodes the newest job nobody took instead of
// waiting (and if it reaches a job nobody took, decodes that one itself). The decoded values live
// in the helpers' arenas until drain() hands that memory to the batch, so no value is copied.
//
// A job reads its table map and column names where the source keeps them: the source dispatches
// jobs only up to the next event that could change them (decode_ahead stops at it), and every job
// it dispatched is taken or drained before it handles that event.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <thread>
#include <vector>

#include "connectors/mysql/binlog.h"
#include "connectors/mysql/mysql_schema_history.h"
#include "sluice/arena.h"
#include "sluice/result.h"

namespace sluice::mysql {

namespace bl = binlog;

class RowsDecodePool {
 public:
  // One row of a rows event: its images (arrays of the map's columns, named; `after` for updates
  // only) and each image's first zero date.
  struct Row {
    Field* before = nullptr;
    Field* after = nullptr;
    bl::ZeroDates zero_before, zero_after;
  };

  struct Job {
    // What to decode. The plans are the job's own (images of every column); `map` and `names`
    // are the source's (see above); `schema` keeps the plans' ColumnInfo alive.
    std::shared_ptr<const TableSchema> schema;
    const bl::TableMap* map = nullptr;
    const std::vector<std::string_view>* names = nullptr;
    uint64_t map_generation = 0;  // the TableMapState it was planned with
    bl::RowPlan before, after;
    bool update = false;
    bool zero_dates = true;  // note zero dates (decoded as their text); false: they decode as null
    std::string_view rows;   // the event's row images, in the ring
    // What came out: the rows decoded, and why decoding stopped early (the rows before the bad
    // one are in `out`, as the source's own loop would have built them).
    std::vector<Row> out;
    Status status;

   private:
    friend class RowsDecodePool;
    enum class State : uint8_t { queued, running, done, cancelled };
    State state = State::queued;
  };

  // `helpers` threads beside the caller's (at least 1).
  explicit RowsDecodePool(unsigned helpers);
  ~RowsDecodePool();
  RowsDecodePool(const RowsDecodePool&) = delete;
  RowsDecodePool& operator=(const RowsDecodePool&) = delete;

  // The job to fill next; queue() hands it to the helpers (a job not queued is handed out again).
  // Jobs are reused after drain(): their vectors keep their capacity.
  Job& next();
  void queue(Job& job);
  // Jobs queued and not yet taken back.
  size_t outstanding() const noexcept { return outstanding_; }

  // The job's rows: decoded by a helper (waiting for it, helping with other jobs meanwhile) or,
  // when none took it, by the caller into `arena` now.
  const Job& take(Job& job, Arena& arena);

  // No job runs after this: the queued ones are dropped, the running ones waited for, and the
  // memory every helper decoded into belongs to `into` from now on.
  void drain(Arena& into);

  // Decodes `job` into `arena` (the decoding itself; any thread).
  static void decode(Job& job, Arena& arena);

 private:
  void helper(std::stop_token stop, size_t index);

  std::mutex mu_;
  std::condition_variable work_;  // helpers: a job was queued (or stop)
  std::condition_variable done_;  // the source: a job finished
  std::deque<Job> jobs_;          // [0, queued_) this round's, in stream order
  size_t queued_ = 0;
  size_t front_ = 0;        // helpers take from here
  size_t running_ = 0;      // jobs being decoded by helpers
  size_t outstanding_ = 0;  // queued, not taken back (the source's own count)
  size_t idle_helpers_ = 0;
  bool source_waiting_ = false;
  std::vector<Arena> arenas_;  // one per helper
  std::vector<std::jthread> threads_;
};

}  // namespace sluice::mysql
