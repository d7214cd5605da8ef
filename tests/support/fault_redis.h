// The fault suite's Redis side (tests/fault/fault_suite_*redis*_test.cc), with hiredis directly:
//
//   PostgreSQL → Redis: read_redis_image SCANs the keys `<prefix><id>` of the fault table (the
//   redis destination's hash mode: a field per column, no field for NULL), HGETALLs each and
//   canonicalises every column with canonical_value(…, Rendering::redis) — Redis holds the
//   destination's texts: bytes raw, booleans true/false, timestamps ISO 8601 with `T` and `Z`
//   (docs/redis.md, "Values"), which the canonical rules already read; redis_fingerprint is the
//   cheap "count/sum(id)/sum(rev)" polled before the full comparison.
//
//   Redis → PostgreSQL: StreamWriter keeps XADDing OpenCDC records (the redis source's `opencdc`
//   format) of a keyed table to a stream — creates of new keys, updates of earlier keys (rev + 1),
//   deletes, and MULTI/EXEC runs of 200–400 of them — and keeps the keyed end state it committed;
//   expected() is that state as a TableImage of stream_columns(), to compare with the PostgreSQL
//   table (read_pg_image with the same columns).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/fault_workload.h"

namespace sluice::test {

// The rows the redis destination wrote under `<key_prefix><id>` (key_prefix: the destination's
// `prefix`, its table and ':', e.g. "fpr:public.fault_rows:"), canonical, of fault_columns().
// `url`: redis://[user:password@]host:port[/db].
TableImage read_redis_image(const std::string& url, const std::string& key_prefix);
// "count/sum(id)/sum(rev)" of those keys ("" when unreachable).
std::string redis_fingerprint(const std::string& url, const std::string& key_prefix);
// Removes every key starting with `prefix` (the end of a test on the shared server).
void redis_delete_prefix(const std::string& url, const std::string& prefix);
// XPENDING's count of `group` on `stream` (-1 when it cannot be read).
int64_t redis_pending(const std::string& url, const std::string& stream, const std::string& group);

// The columns of StreamWriter's table (id is the key; rev counts its updates; note is NULL every
// fifth revision).
const std::vector<FaultColumn>& stream_columns();

class StreamWriter {
 public:
  // Records of `table` (OpenCDC metadata.table) into `stream`, in the entry field `value`.
  StreamWriter(std::string url, std::string stream, std::string table, uint64_t seed);
  ~StreamWriter();
  StreamWriter(const StreamWriter&) = delete;
  StreamWriter& operator=(const StreamWriter&) = delete;

  // Deletes the stream and XADDs `rows` creates (one MULTI/EXEC per 1,000).
  bool create(int64_t rows);
  void start(std::chrono::milliseconds pause = std::chrono::milliseconds(10));
  void stop();  // returns after the command in flight

  struct Stats {
    int64_t creates = 0, updates = 0, deletes = 0, transactions = 0, failed = 0;
    int64_t entries() const { return creates + updates + deletes; }
  };
  Stats stats() const;
  // The keyed state the committed entries give, canonical.
  TableImage expected() const;

 private:
  struct Impl;
  void one_op();
  std::unique_ptr<Impl> impl_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace sluice::test
