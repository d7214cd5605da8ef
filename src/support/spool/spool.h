// The spool: a durable log of batches between a pipeline's source side and its destinations.
//
//   source → processors → Spool::append(batch) ──▶ segment files ──▶ SpoolReader "destination"
//                          (durable before the      (append only,        next() → batch
//                           source is acked)         CRC per frame)      release(seq) once durable
//                                                                         at its destination
//
// Every appended batch gets the next sequence number (1, 2, …, never reused while the spool
// exists). A reader is named (one per destination) and resumes after the sequence number its own
// checkpoint holds; a segment is deleted once every named reader released all of its batches.
// The implementation on disk is DiskSpool (disk_spool.h); the interface leaves room for others.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/batch.h"
#include "sluice/result.h"

namespace sluice::spool {

// One spooled batch as a reader gets it: `payload` is the batch_codec encoding, whose bytes `owner`
// keeps alive (a batch decoded from it retains `owner`: its records point into those bytes). The
// owner is whatever the spool read them into, so a reader need not copy them (the Redis spool's
// is the server's reply).
struct SpooledBatch {
  uint64_t seq = 0;
  uint32_t records = 0;
  int64_t appended_unix_ms = 0;
  std::string_view payload;
  std::shared_ptr<const void> owner;
};

// What the spool holds that its slowest reader has not released: records, bytes on disk, and the
// append time of the oldest such batch (0: none).
struct SpoolDepth {
  uint64_t records = 0;
  uint64_t bytes = 0;
  int64_t oldest_unix_ms = 0;
};

class SpoolReader {
 public:
  virtual ~SpoolReader() = default;
  // The next batch after the last one returned, waiting up to `wait` for one to be appended;
  // nullopt when none came (or the stop was requested).
  virtual Result<std::optional<SpooledBatch>> next(std::chrono::milliseconds wait,
                                                   std::stop_token stop) = 0;
  // Every batch up to `seq` is durable at this reader's destination (and checkpointed): the
  // spool may delete it once every reader released it. Cheap; any thread.
  virtual void release(uint64_t seq) = 0;
  // True when the writer finished (Spool::finish) and this reader has returned every batch.
  virtual bool at_end() const = 0;
};

class Spool {
 public:
  virtual ~Spool() = default;
  // Opens (creating if needed) the spool; a torn or corrupt tail is truncated (logged).
  virtual Status open() = 0;
  // Appends `batch` (records and position); durable when it returns ok. May block while the
  // spool is full (back-pressure), until `stop`.
  virtual Status append(const Batch& batch, std::stop_token stop) = 0;
  // The source position of the last batch appended (empty when the spool holds none): where the
  // source resumes, so that nothing is spooled twice.
  virtual std::optional<std::string> last_position() const = 0;
  // Opens the reader `name` (one of the names the spool was created with) after `after_seq`
  // (nullopt: from the oldest batch retained).
  virtual Result<std::unique_ptr<SpoolReader>> open_reader(const std::string& name,
                                                           std::optional<uint64_t> after_seq) = 0;
  // The writer will append nothing more this run: readers that reach the end see at_end().
  virtual void finish() = 0;
  virtual SpoolDepth depth() const = 0;
  // What the reader `name` has not released (its lag): records, bytes, the append time of its
  // oldest such batch. A reader not opened yet this run counts from the oldest batch retained.
  virtual SpoolDepth reader_depth(const std::string& name) const = 0;
  // Whether the reader `name`, which has no checkpoint, misses nothing when it starts from the
  // spool's first batch: that batch is still retained, and either the spool was created at the
  // pipeline's beginning (the source had no position) or the reader was one of the spool's
  // readers when it was created (its destination had everything up to the source's position
  // then: the spool was added to a pipeline that ran without it). See mark_origin.
  virtual bool covers_beginning(const std::string& name) const = 0;
  // Records, once, when the spool is created: at the pipeline's beginning (`beginning`: the
  // source had no checkpoint) or later, and the readers it had then. Durable before it returns;
  // a no-op when recorded already or when the spool holds batches from before origins were
  // recorded (then unknown: covering nothing).
  virtual Status mark_origin(bool beginning) = 0;
  virtual void close() noexcept = 0;
};

// The checkpoint store key of a spool reader's position: beside the pipeline's own (the source's).
inline std::string spool_reader_checkpoint_key(std::string_view pipeline_id,
                                               std::string_view reader) {
  return std::string(pipeline_id) + "/spool/" + std::string(reader);
}

// Deletes a disk spool's segment files (and the directory once empty): `sluice cleanup`.
Status remove_disk_spool(const std::string& path);

// The position a reader's checkpoint holds: "spool:SEQ" (everything up to SEQ is durable at the
// reader's destination).
std::string spool_position(uint64_t seq);
// Parses spool_position(); nullopt for anything else (a source position stored by a run without
// a spool).
std::optional<uint64_t> parse_spool_position(std::string_view position);

}  // namespace sluice::spool
