// Incremental snapshots: the DBLog watermark algorithm (Andreakis & Papapanagiotou, "DBLog: A
// Watermark Based Change-Data-Capture Framework", 2020; Debezium's incremental snapshots), shared
// by the log sources. A table is read in key-ordered chunks while its change stream keeps flowing,
// and no chunk row ever overwrites a newer streamed change:
//
//   driver (reader thread, between stream reads)          stream, in log order
//   ───────────────────────────────────────────           ─────────────────────────────────────
//   1. write the LOW watermark (own transaction) ───────▶ LOW seen: the window opens
//   2. read one chunk: WHERE (k…) > (cursor…)              a change of a key in the buffer
//      ORDER BY k… LIMIT n — into the buffer                 drops that key from the buffer (the
//   3. write the HIGH watermark ────────────────────────▶    stream's version is newer)
//                                                         HIGH seen: the rows left in the buffer
//                                                           are emitted as snapshot records, the
//                                                           cursor moves past the chunk
//
// Any row the chunk read is either unchanged between LOW and HIGH — then the chunk's copy is the
// newest and is emitted at HIGH, after every change the stream delivered before LOW — or changed,
// and the stream's change (between LOW and HIGH) is the newer one: the chunk drops it.
//
// One refinement of the paper: the buffer drops keys for every change the stream delivers after
// the chunk was read, before LOW too. A commit that precedes LOW in the log is not always visible
// to a query started after LOW committed (PostgreSQL makes a transaction visible only after its
// commit record is written, and under load a backend can stall in between), so a chunk can miss
// a change that the stream delivers just before LOW; dropping such keys keeps the stream's
// version. Dropping is always safe: the stream carries the key's every later change.
//
// State: the tables pending and the current table's cursor live in the position
// (IncrementalState, "v2 cdc … isnap …"), so a restart (kill -9 mid-chunk included) re-reads the
// current chunk with new watermarks — a watermark of an earlier run seen again in the replayed
// stream matches no open window and is ignored. The buffer is memory only (one chunk).
//
// Markers: a table's first chunk is preceded by a snapshot_begin marker, its last followed by a
// snapshot_end one, so a keyed destination can remove rows the snapshot did not see. The driver
// emits snapshot_begin when it reads the first chunk, not when it emits it: a streamed change
// that drops a key from that chunk must come after the marker, or the destination's reconcile
// (snapshot.reconcile: sweep / truncate) would not count it and delete the row. A restart
// before the table's first chunk was emitted (cursor at start) emits snapshot_begin again: every
// row of the table comes again, so the destination's new epoch is complete.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "connectors/common/log_position.h"
#include "sluice/batch.h"
#include "sluice/result.h"

namespace sluice {

// One row of a chunk as the server printed it (text), owned: the buffer outlives batches.
struct ChunkRow {
  std::vector<std::string> key;                 // primary-key values, text, in key order
  std::vector<std::optional<std::string>> row;  // every column, text; nullopt = NULL
  // The key as the cursor stores it (the server's text, for the next chunk's query), when the
  // driver matches streamed changes on another form of it (`key`); empty: `key`.
  std::vector<std::string> cursor_key;
};

// A key as one string, for matching a streamed change against the buffer: the key columns' text
// values, each length-prefixed (so no separator can collide).
std::string key_identity(const std::vector<std::string_view>& key);

class IncrementalSnapshot {
 public:
  enum class Window : uint8_t { closed, awaiting_low, open };

  // Tables to snapshot, appended to the position's list unless already there. Returns how many
  // were added.
  size_t add_tables(IncrementalState& st, const std::vector<std::string>& tables);

  // A chunk is due: a table is pending and no window is in flight.
  bool chunk_due(const IncrementalState& st) const {
    return !st.empty() && window_ == Window::closed && !emit_ready_;
  }
  // Starts a chunk: returns the watermark id the driver writes as LOW and HIGH.
  std::string begin_chunk();
  // The driver read the chunk (after writing LOW, before writing HIGH). `exhausted`: fewer rows
  // than asked, so this is the table's last chunk.
  void chunk_read(std::vector<ChunkRow> rows, bool exhausted);

  // Watermarks seen in the stream. LOW opens the window; HIGH closes it, and then the buffer is
  // ready to emit (emit_ready()). Watermarks of other ids (an earlier run's) are ignored.
  void low_seen(std::string_view id);
  void high_seen(std::string_view id);

  // The current table (first pending), or empty.
  static std::string_view current(const IncrementalState& st) {
    return st.empty() ? std::string_view() : std::string_view(st.tables.front());
  }
  // A change of `table` to the row with key `identity` (key_identity()) arrived in the stream:
  // from the chunk's read until HIGH, that key leaves the buffer. True when a row was dropped.
  bool change_seen(const IncrementalState& st, std::string_view table, std::string_view identity);
  // The table was truncated: the whole buffer is stale.
  void truncate_seen(const IncrementalState& st, std::string_view table);

  // After HIGH: the rows to emit (the driver turns them into snapshot records), then finish().
  bool emit_ready() const { return emit_ready_; }
  bool table_started(const IncrementalState& st) const {
    return st.cursor.kind == KeysetCursor::Kind::start;
  }
  const std::vector<ChunkRow>& rows() const { return rows_; }
  bool kept(size_t i) const { return !dropped_[i]; }
  bool last_chunk() const { return exhausted_; }
  // The chunk is emitted: the cursor moves past its last key, or the table is done (popped).
  // Returns the finished table's name when it was the last chunk.
  std::optional<std::string> finish(IncrementalState& st);

  // The current table starts over (its columns changed): the cursor goes back to the start, a
  // chunk in flight is forgotten (its HIGH is then ignored), the next chunk emits snapshot_begin
  // again.
  void restart_table(IncrementalState& st);

  // Rows kept/dropped over the current table (progress, tests).
  uint64_t rows_emitted() const { return emitted_; }
  uint64_t rows_dropped() const { return dropped_total_; }
  Window window() const { return window_; }
  // The chunk is read and HIGH not yet seen: streamed changes drop keys.
  bool tracking() const { return window_ != Window::closed && read_; }

 private:
  Window window_ = Window::closed;
  std::string id_;
  uint64_t next_id_ = 0;
  std::vector<ChunkRow> rows_;
  std::vector<bool> dropped_;
  std::unordered_map<std::string, size_t> index_;
  bool exhausted_ = false;
  bool emit_ready_ = false;
  bool read_ = false;
  uint64_t emitted_ = 0, dropped_total_ = 0;
};

// A Debezium-compatible signal: type "execute-snapshot" with data
// {"data-collections": ["schema.table", …], "type": "incremental"} → the tables. Other types are
// not for sluice (nullopt); a malformed execute-snapshot signal is an error naming what is wrong.
Result<std::optional<std::vector<std::string>>> parse_snapshot_signal(std::string_view type,
                                                                      std::string_view data);
// The data of such a signal for `tables` (the CLI writes it).
std::string snapshot_signal_data(const std::vector<std::string>& tables);

// Appends a snapshot_begin / snapshot_end marker record of schema.table to `batch`.
void add_snapshot_marker(Batch& batch, std::string_view schema, std::string_view table, bool begin);

}  // namespace sluice
