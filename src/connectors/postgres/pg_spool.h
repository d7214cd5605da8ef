// In-progress transactions PostgreSQL streams before they commit (pgoutput protocol 2, `streaming
// on`): their messages are held here, in arrival order, until the Stream Commit that makes them a
// transaction sluice forwards, or the Stream Abort that drops them (a whole transaction, or one
// subtransaction rolled back to its savepoint). Memory is bounded: past `memory_limit` bytes held
// in all, the largest transaction's messages move to an anonymous file in `spill_dir` (removed by
// the kernel when closed or the process dies), read back in order at its commit.
//
// Nothing here outlives the stream it came from: after a reconnect the server streams each
// in-progress transaction again from its start, so the stream clears the spool when it starts.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "connectors/common/log_position.h"
#include "sluice/result.h"

namespace sluice::pg {

class HeldTransaction;

class TransactionSpool {
 public:
  TransactionSpool(size_t memory_limit, std::string spill_dir);
  ~TransactionSpool();
  TransactionSpool(const TransactionSpool&) = delete;
  TransactionSpool& operator=(const TransactionSpool&) = delete;

  // Stream Start of transaction `xid` (`first`: its first segment).
  Status start(uint32_t xid, bool first);
  // One message of a streamed block: `type` and the body after the (sub)transaction xid.
  Status add(uint32_t xid, uint32_t subxid, Lsn lsn, char type, std::string_view body);
  // Stream Abort: the whole transaction (subxid == xid) or one subtransaction's changes.
  void abort(uint32_t xid, uint32_t subxid);
  // Stream Commit: the transaction's messages, to read in order; an error when it was not held.
  Result<std::unique_ptr<HeldTransaction>> take(uint32_t xid);
  void clear() noexcept;

  size_t memory() const noexcept { return memory_; }
  size_t transactions() const noexcept { return txns_.size(); }
  uint64_t spilled_bytes() const noexcept { return spilled_bytes_; }  // in all, since created

 private:
  friend class HeldTransaction;
  struct Txn;
  Status spill_largest();

  size_t memory_limit_;
  std::string spill_dir_;
  std::unordered_map<uint32_t, std::unique_ptr<Txn>> txns_;
  size_t memory_ = 0;
  uint64_t spilled_bytes_ = 0;
};

// A committed streamed transaction's messages, in the order they arrived, without those of its
// aborted subtransactions' changes (their Relation and Type messages stay: later changes may rely
// on them). Each payload is a protocol-1 pgoutput message (type byte, then the body), valid until
// the next call.
class HeldTransaction {
 public:
  struct Message {
    Lsn lsn;
    std::string_view payload;
  };
  ~HeldTransaction();
  // false at the end.
  Result<bool> next(Message* out);

 private:
  friend class TransactionSpool;
  explicit HeldTransaction(std::unique_ptr<TransactionSpool::Txn> t);
  Result<std::string_view> read_file(size_t n);

  std::unique_ptr<TransactionSpool::Txn> t_;
  uint64_t file_pos_ = 0;  // next byte of the file to read
  std::string buf_;        // bytes read from the file, from buf_pos_ on not consumed yet
  size_t buf_pos_ = 0;
  size_t mem_pos_ = 0;  // next byte of the in-memory tail
};

}  // namespace sluice::pg
