// `spool: {type: redis, url: …}`: the pipeline's spool as one Redis stream.
//
//   KEY (default sluice:spool:<pipeline id>), one entry per spooled batch:
//     id  SEQ-0            the batch's sequence number (1, 2, …): XADD with an explicit id, so a
//                          retried append after a lost reply is recognised, never added twice
//     b   payload          the batch (support/spool/batch_codec.h)
//     r   records          t  append time (unix ms)
//     cr  records so far   cb  payload bytes so far (depth without reading the stream)
//     p   source position  the last one up to this batch: where the source resumes
//
// Readers (one per destination) read with XRANGE / XREAD BLOCK on connections of their own and
// resume after the SEQ their checkpoint holds; entries every reader released are trimmed
// (XTRIM MINID), the last one always kept (it carries the next SEQ and the source position).
//
// Durability is the server's: an append counts once Redis accepted it. With `fsync: true` (the
// default) the spool refuses a server that does not write every command to its append-only file
// before answering (`appendonly yes`, `appendfsync always`), since a batch acknowledged to the
// source and then lost in a Redis crash would be lost for good; `fsync: false` accepts any
// server (a crash of sluice loses nothing; a crash of Redis may lose its last second).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "connectors/redis/redis_common.h"
#include "support/spool/spool.h"

namespace sluice::redis {

struct RedisSpoolOptions {
  std::string url;         // redis://[user:password@]host:port[/db]
  std::string key;         // the stream
  uint64_t max_bytes = 0;  // 0: unbounded (payload bytes not yet released by every reader)
  bool fail_when_full = false;
  bool fsync = true;  // require appendonly yes + appendfsync always
  std::vector<std::string> readers{"destination"};
};

// The stream key a pipeline's Redis spool uses when `spool.key` is not set.
std::string default_spool_key(std::string_view pipeline_id);

class RedisSpool final : public spool::Spool {
 public:
  explicit RedisSpool(RedisSpoolOptions options);
  ~RedisSpool() override;

  Status open() override;
  Status append(const Batch& batch, std::stop_token stop) override;
  std::optional<std::string> last_position() const override;
  Result<std::unique_ptr<spool::SpoolReader>> open_reader(
      const std::string& name, std::optional<uint64_t> after_seq) override;
  void finish() override;
  spool::SpoolDepth depth() const override;
  void close() noexcept override;

 private:
  class Reader;
  struct ReaderState {
    bool registered = false;
    uint64_t released_seq = 0;
    uint64_t released_records = 0;  // cumulative records through released_seq
    uint64_t released_bytes = 0;
  };
  // One stream entry's bookkeeping fields.
  struct Meta {
    uint64_t seq = 0, records = 0, cum_records = 0, cum_bytes = 0;
    int64_t unix_ms = 0;
  };

  Result<RedisConnection> connect(std::string_view role) const;
  Status check_durability(RedisConnection& c) const;
  // Trims what every reader released and refreshes the age of the oldest batch kept; at most
  // once a second, from the appender's or a reader's thread.
  void maintain();
  uint64_t min_released_locked() const;
  void update_depth_locked();
  std::string where() const;

  RedisSpoolOptions options_;
  RedisUrl url_;

  mutable std::mutex mu_;
  std::condition_variable_any space_cv_;
  std::optional<RedisConnection> conn_;  // the appender's (guarded by append_mu_)
  std::mutex append_mu_;
  std::optional<RedisConnection> ctl_;  // trims and depth queries (guarded by ctl_mu_)
  std::mutex ctl_mu_;
  std::chrono::steady_clock::time_point last_maintained_{};
  uint64_t trimmed_below_ = 0;  // entries before this SEQ were trimmed (or asked to be)

  uint64_t next_seq_ = 1;
  uint64_t cum_records_ = 0, cum_bytes_ = 0;
  uint64_t base_records_ = 0, base_bytes_ = 0;  // cumulative counts before the first entry kept
  std::optional<std::string> last_position_;
  std::map<std::string, ReaderState> readers_;
  bool finished_ = false;
  bool open_ = false;

  std::atomic<uint64_t> depth_records_{0};
  std::atomic<uint64_t> depth_bytes_{0};
  std::atomic<int64_t> oldest_ms_{0};
};

// `sluice cleanup`: deletes the spool's stream.
Status remove_redis_spool(const std::string& url, const std::string& key);

}  // namespace sluice::redis
