// The fault suite's workload and its proof:
//
//   SourceWriter ──INSERT/UPDATE/DELETE, 200–400-row transactions──▶ source table (PostgreSQL or
//        │                                                           MariaDB), varied column types
//        └── what it committed (live keys, each key's revision, counts)
//
//   verify: source table ──canonical rows──┐
//                                          ├─▶ Diff: verified, lost, duplicated, differing, extra
//           destination  ──canonical rows──┘
//
// Each value is brought to one canonical text per logical type (FaultColumn::Kind), whichever
// database rendered it: numeric 1.500000 and 1.5 are "1.5"; timestamps are UTC
// "YYYY-MM-DD HH:MM:SS.ffffff"; bytes are lower-case hex (PostgreSQL's "\x…", MySQL's and
// SQLite's raw bytes); JSON is re-serialised with sorted keys and no spaces; booleans are
// "true"/"false" (t/f, 1/0). A row's checksum is FNV-1a over its canonical values.
//
// BSON values (a MongoDB document, read_mongodb_image; Rendering::bson) are first rendered as
// text, then canonicalised as above: int32/int64 as decimal digits; double as "%.17g"; Decimal128
// as libbson's text ("1.500000", "1.5E+3": the decimal rules bring both to one form); a string as
// itself (the mongodb destination writes a decimal as its exact text with `decimals: string`, which
// FerretDB needs, and a timestamp with a sub-millisecond part as its ISO 8601 text with
// microseconds, "2024-03-10T01:59:00.001237Z" — docs/mongodb.md); a date (milliseconds) as UTC
// "YYYY-MM-DD HH:MM:SS.ffffff" (a date column is its first ten characters); bool as "true"/"false";
// binary of any subtype as its raw bytes (then hex, as MySQL's); an embedded document or array
// as its relaxed Extended JSON (int64 as plain numbers), then canonical JSON as above; null or
// a missing field as NULL.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support/kafka.h"

namespace sluice::test {

struct FaultColumn {
  enum class Kind { integer, decimal, text, boolean, timestamp, date, bytes, json };
  std::string name;
  Kind kind;
};

// Which database rendered a value (how bytes and booleans look as text). redis: the redis
// destination's hash fields (docs/redis.md): bytes raw, booleans true/false, timestamps
// "YYYY-MM-DDTHH:MM:SS[.ffffff]Z", decimals as the source gave them — read like the others' (raw
// bytes as hex, the timestamp's `T` and `Z` by the timestamp parser). bson: read_mongodb_image's
// renderings (below).
enum class Rendering { postgres, mysql, sqlite, redis, bson };

// The canonical text of one value ("∅" for NULL).
std::string canonical_value(FaultColumn::Kind kind, const std::optional<std::string>& value,
                            Rendering from);
// JSON with sorted object keys and no insignificant spaces; the input unchanged when it does not
// parse.
std::string canonical_json(const std::string& text);

// The columns of the fault table (id is the key, rev counts the updates of a row).
const std::vector<FaultColumn>& fault_columns();

// A table's rows by key, canonical; keys seen more than once are counted.
struct TableImage {
  std::map<int64_t, std::vector<std::string>> rows;
  int64_t duplicate_keys = 0;
  bool ok = true;  // the table could be read
  std::string error;
};

TableImage read_pg_image(const std::string& url, const std::string& table);
// A table of other columns (the first is the key).
TableImage read_pg_image(const std::string& url, const std::string& table,
                         const std::vector<FaultColumn>& columns);
TableImage read_mysql_image(const std::string& url, const std::string& table);
TableImage read_sqlite_image(const std::filesystem::path& db, const std::string& table,
                             const std::vector<FaultColumn>& columns);
// The documents of `collection` in the database `url` names (mongodb://host:port/db), their
// fields read as fault_columns() (BSON values rendered as in the header comment); the row key is
// the document's `id` field.
TableImage read_mongodb_image(const std::string& url, const std::string& collection);

// A cheap fingerprint of the table ("count/sum(id)/sum(rev)"; "" when unreadable), to poll before
// the full comparison.
std::string pg_fingerprint(const std::string& url, const std::string& table);
std::string mysql_fingerprint(const std::string& url, const std::string& table);
std::string sqlite_fingerprint(const std::filesystem::path& db, const std::string& table);
std::string mongodb_fingerprint(const std::string& url, const std::string& collection);

uint64_t row_checksum(const std::vector<std::string>& canonical_row);

struct Diff {
  int64_t verified = 0;  // source rows found equal at the destination
  int64_t lost = 0;      // in the source, not at the destination
  int64_t duplicated = 0;
  int64_t differing = 0;
  int64_t extra = 0;                  // at the destination, not in the source (a delete lost)
  std::vector<std::string> examples;  // the first few differences, for the failure message
  bool exact() const { return lost == 0 && duplicated == 0 && differing == 0 && extra == 0; }
  std::string str() const;
};
Diff compare_images(const TableImage& source, const TableImage& destination);

// Keeps changing the fault table of a source database until stopped: single-row inserts (new
// keys only, never reused), updates (rev + 1 and new values), deletes, and transactions of
// 200–400 rows mixing the three; pauses `pause` between statements so sluice can keep up.
class SourceWriter {
 public:
  enum class Db { postgres, mysql };
  SourceWriter(Db db, std::string url, std::string table, uint64_t seed);
  ~SourceWriter();
  SourceWriter(const SourceWriter&) = delete;
  SourceWriter& operator=(const SourceWriter&) = delete;

  // Creates the table (dropping an old one) and inserts `rows` rows in one statement per 1,000.
  bool create(int64_t rows);
  void start(std::chrono::milliseconds pause = std::chrono::milliseconds(10));
  void stop();  // returns after the statement in flight committed or failed
  // Rows per transaction (default 200–400); before start(). For a destination whose cost per
  // row grows with the table (FerretDB), so one transaction does not outlast a fault window.
  void set_transaction_rows(int min, int max);
  // Runs `n` operations on the calling thread (between faults, when no writer thread runs).
  void run_ops(int n);

  struct Stats {
    int64_t inserts = 0, updates = 0, deletes = 0, transactions = 0, statements_failed = 0;
    int64_t committed() const { return inserts + updates + deletes; }
  };
  Stats stats() const;
  // Live keys and their revision, as committed.
  std::map<int64_t, int> live() const;

 private:
  struct Impl;
  void one_op();
  std::unique_ptr<Impl> impl_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// The kafka destination's read_committed output of the fault table, checked for exactly once:
// per key, the messages must be [snapshot r | create 1], then updates r+1, r+2, … without a
// repeat or a gap, then at most one delete, and the last one must match the source table (rev of
// a live row; a delete for a deleted one).
struct KafkaExactlyOnce {
  int64_t messages = 0, snapshot_rows = 0, changes = 0;
  int64_t duplicated = 0, gaps = 0, lost = 0, differing = 0, unparsed = 0;
  std::vector<std::string> examples;
  bool exact() const {
    return duplicated == 0 && gaps == 0 && lost == 0 && differing == 0 && unparsed == 0;
  }
  std::string str() const;
};
KafkaExactlyOnce check_kafka_exactly_once(const std::vector<KafkaMessage>& messages,
                                          const TableImage& source);

// One line of the fault suite's figures (appended to the build's fault-results.tsv; ctest's
// fault.summary prints them as one table).
struct FaultResult {
  std::string pipeline, fault;
  int iterations = 0, faults = 0;
  int64_t rows_verified = 0, lost = 0, duplicated = 0;
  double recovery_seconds = 0;  // the slowest recovery after one fault
  uint64_t seed = 0;  // the case's own seed (printed); the file records the suite's (the replay)
};
void record_fault_result(const FaultResult& r);

// The suite's seed: SLUICE_FAULT_SEED when set (a replay), else a fresh one; printed either way.
uint64_t fault_seed();
// SLUICE_FAULT_SOAK=1 (make soak): the long version (more kills, 40 s outages).
bool fault_soak();

}  // namespace sluice::test
