// The Redis spool (redis_spool.h).
#include "connectors/redis/redis_spool.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <deque>
#include <thread>

#include "support/spool/batch_codec.h"

namespace sluice::redis {

namespace {

using namespace std::chrono_literals;

int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string entry_id(uint64_t seq) { return fmt::format("{}-0", seq); }

std::optional<uint64_t> parse_u64(std::string_view s) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string_view str(const redisReply* r) {
  return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS)
             ? std::string_view(r->str, r->len)
             : std::string_view();
}

// Entries a reader asks for per XRANGE / XREAD (see fill()).
constexpr const char* kEntriesPerRead = "2";

// One entry of an XRANGE / XREAD reply: [id, [field, value, …]].
struct Entry {
  uint64_t seq = 0;
  std::string_view payload, position;
  uint64_t records = 0, cum_records = 0, cum_bytes = 0;
  int64_t unix_ms = 0;
};

Result<Entry> parse_entry(const redisReply* e, std::string_view key) {
  auto bad = [&](std::string_view what) {
    return Error(Errc::data,
                 fmt::format("redis spool {}: an entry that is not a spooled batch ({}); the key "
                             "holds something else: set spool.key to a stream of its own",
                             key, what));
  };
  if (!e || e->type != REDIS_REPLY_ARRAY || e->elements != 2) return bad("not [id, fields]");
  const std::string_view id = str(e->element[0]);
  const size_t dash = id.find('-');
  auto seq = parse_u64(id.substr(0, dash));
  if (!seq || dash == std::string_view::npos || id.substr(dash + 1) != "0")
    return bad(fmt::format("id {}", id));
  const redisReply* f = e->element[1];
  if (!f || f->type != REDIS_REPLY_ARRAY || f->elements % 2 != 0) return bad("fields");
  Entry out;
  out.seq = *seq;
  int seen = 0;
  for (size_t i = 0; i + 1 < f->elements; i += 2) {
    const std::string_view name = str(f->element[i]), value = str(f->element[i + 1]);
    auto number = [&](uint64_t* to) {
      if (auto v = parse_u64(value)) {
        *to = *v;
        ++seen;
      }
    };
    if (name == "b") {
      out.payload = value;
      ++seen;
    } else if (name == "p") {
      out.position = value;
    } else if (name == "r") {
      number(&out.records);
    } else if (name == "cr") {
      number(&out.cum_records);
    } else if (name == "cb") {
      number(&out.cum_bytes);
    } else if (name == "t") {
      uint64_t t = 0;
      number(&t);
      out.unix_ms = static_cast<int64_t>(t);
    }
  }
  if (seen != 5) return bad(fmt::format("entry {} lacks b, r, t, cr or cb", id));
  return out;
}

// The entries of an XRANGE reply (or of XREAD's one stream).
Result<std::vector<Entry>> parse_entries(const redisReply* r, std::string_view key) {
  std::vector<Entry> out;
  if (!r || r->type == REDIS_REPLY_NIL) return out;
  if (r->type != REDIS_REPLY_ARRAY)
    return Error(Errc::data,
                 fmt::format("redis spool {}: unexpected reply {}", key, reply_text(r)));
  out.reserve(r->elements);
  for (size_t i = 0; i < r->elements; ++i) {
    auto e = parse_entry(r->element[i], key);
    if (!e.ok()) return std::move(e).error();
    out.push_back(e.value());
  }
  return out;
}

}  // namespace

std::string default_spool_key(std::string_view pipeline_id) {
  return fmt::format("sluice:spool:{}", pipeline_id);
}

// ---- reader ---------------------------------------------------------------------------------

class RedisSpool::Reader final : public spool::SpoolReader {
 public:
  Reader(RedisSpool* spool, std::string name, uint64_t after)
      : spool_(spool), name_(std::move(name)), last_(after) {}

  Result<std::optional<spool::SpooledBatch>> next(std::chrono::milliseconds wait,
                                                  std::stop_token stop) override {
    spool_->maintain();
    if (buffered_.empty()) {
      if (Status st = fill(wait, stop); !st.ok()) {
        if (!st.error().retriable()) return std::move(st).error();
        // The server is away (restart, network): the destination side waits, it does not fail.
        spdlog::warn("{} (reader {} retries)", st.error().message(), name_);
        conn_.reset();
        std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(wait, 1000ms));
        return std::optional<spool::SpooledBatch>();
      }
    }
    if (buffered_.empty()) return std::optional<spool::SpooledBatch>();
    spool::SpooledBatch b = std::move(buffered_.front().batch);
    {
      std::lock_guard lock(spool_->mu_);
      read_.push_back(buffered_.front().meta);
    }
    buffered_.pop_front();
    return std::optional<spool::SpooledBatch>(std::move(b));
  }

  void release(uint64_t seq) override {
    std::lock_guard lock(spool_->mu_);
    ReaderState& st = spool_->readers_[name_];
    while (!read_.empty() && read_.front().seq <= seq) {
      st.released_seq = read_.front().seq;
      st.released_records = read_.front().cum_records;
      st.released_bytes = read_.front().cum_bytes;
      read_.pop_front();
    }
    spool_->update_depth_locked();
    spool_->space_cv_.notify_all();
  }

  bool at_end() const override {
    std::lock_guard lock(spool_->mu_);
    return spool_->finished_ && buffered_.empty() && spool_->next_seq_ <= last_ + 1;
  }

 private:
  struct Item {
    spool::SpooledBatch batch;
    Meta meta;
  };

  Status fill(std::chrono::milliseconds wait, std::stop_token stop) {
    if (!conn_ || !conn_->healthy()) {
      auto c = spool_->connect("reader " + name_);
      if (!c.ok()) return std::move(c).error();
      conn_.emplace(std::move(c.value()));
    }
    const std::string key = spool_->options_.key;
    const std::string from = "(" + entry_id(last_);
    // Two batches per call: each entry is a whole batch (up to batch.max_bytes), held twice while
    // it is parsed (hiredis's reply and the copy). With 16 the reader of a 1 M-row PostgreSQL
    // pipeline peaked at 177 MB; one round trip per two batches costs nothing measurable.
    auto r = conn_->command({"XRANGE", key, from, "+", "COUNT", kEntriesPerRead});
    if (!r.ok()) return std::move(r).error();
    // The reply holds the entries' payloads: the batches decoded from them keep it (no copy).
    std::shared_ptr<const redisReply> reply(r.value().release(), ReplyDeleter{});
    auto entries = parse_entries(reply.get(), key);
    if (!entries.ok()) return std::move(entries).error();
    if (entries.value().empty() && wait.count() > 0 && !stop.stop_requested()) {
      // Nothing yet: block for new entries (bounded by `wait`, so a stop is seen soon).
      const std::string ms = std::to_string(std::min<int64_t>(wait.count(), 2000));
      auto x = conn_->command(
          {"XREAD", "COUNT", kEntriesPerRead, "BLOCK", ms, "STREAMS", key, entry_id(last_)});
      if (!x.ok()) return std::move(x).error();
      reply.reset(x.value().release(), ReplyDeleter{});
      const redisReply* streams = reply.get();
      if (streams && streams->type == REDIS_REPLY_ARRAY && streams->elements == 1 &&
          streams->element[0]->type == REDIS_REPLY_ARRAY && streams->element[0]->elements == 2) {
        entries = parse_entries(streams->element[0]->element[1], key);
        if (!entries.ok()) return std::move(entries).error();
      }
    }
    for (const Entry& e : entries.value()) {
      if (e.seq != last_ + 1)
        return Error(Errc::data,
                     fmt::format("{}: reader {} expected batch {} and found {}: batches are "
                                 "missing (the stream was trimmed or replaced); reset the "
                                 "pipeline (sluice cleanup)",
                                 spool_->where(), name_, last_ + 1, e.seq));
      last_ = e.seq;
      Item item;
      item.batch.seq = e.seq;
      item.batch.records = static_cast<uint32_t>(e.records);
      item.batch.appended_unix_ms = e.unix_ms;
      item.batch.payload = e.payload;
      item.batch.owner = reply;
      item.meta = Meta{e.seq, e.records, e.cum_records, e.cum_bytes, e.unix_ms};
      buffered_.push_back(std::move(item));
    }
    return ok_status();
  }

  RedisSpool* spool_;
  std::string name_;
  uint64_t last_;  // the last SEQ read from the stream
  std::optional<RedisConnection> conn_;
  std::deque<Item> buffered_;
  std::deque<Meta> read_;  // returned, not yet released (guarded by the spool's mu_)
};

// ---- spool ----------------------------------------------------------------------------------

RedisSpool::RedisSpool(RedisSpoolOptions options) : options_(std::move(options)) {
  for (const std::string& r : options_.readers) readers_[r];
}

RedisSpool::~RedisSpool() { close(); }

std::string RedisSpool::where() const {
  return fmt::format("redis spool {} on {}", options_.key, url_.redacted());
}

Result<RedisConnection> RedisSpool::connect(std::string_view role) const {
  RedisConnection::Options o;
  o.connect_timeout = 5s;
  o.command_timeout = 30s;
  o.client_name = fmt::format("sluice-spool-{}", role == "appender" ? "appender" : "reader");
  auto c = RedisConnection::connect(url_, o);
  if (!c.ok())
    return Error(c.error().code(), fmt::format("{}: {}", where(), c.error().message()),
                 c.error().retriable());
  return c;
}

Status RedisSpool::check_durability(RedisConnection& c) const {
  auto get = [&](std::string_view name) -> Result<std::string> {
    auto r = c.command({"CONFIG", "GET", name});
    if (!r.ok())
      return Error(Errc::permission,
                   fmt::format("{}: cannot read the server's `{}` ({}): grant the user "
                               "+config|get, or set spool.fsync: false once the server is known "
                               "to run with appendonly yes and appendfsync always",
                               where(), name, r.error().message()));
    const redisReply* a = r.value().get();
    if (a->type != REDIS_REPLY_ARRAY || a->elements != 2) return std::string();
    return std::string(str(a->element[1]));
  };
  auto aof = get("appendonly");
  if (!aof.ok()) return std::move(aof).error();
  auto fsync = get("appendfsync");
  if (!fsync.ok()) return std::move(fsync).error();
  if (aof.value() == "yes" && fsync.value() == "always") return ok_status();
  return Error(Errc::config,
               fmt::format("{}: the server runs with appendonly {} and appendfsync {}, so a batch "
                           "the source was acknowledged for could be lost in a Redis crash: run "
                           "CONFIG SET appendonly yes and CONFIG SET appendfsync always on it, or "
                           "set spool.fsync: false to accept that",
                           where(), aof.value(), fsync.value()));
}

Status RedisSpool::open() {
  auto u = parse_redis_url(options_.url);
  if (!u.ok()) return Error(Errc::config, fmt::format("spool.url: {}", u.error().message()));
  url_ = std::move(u.value());
  std::scoped_lock locks(append_mu_, ctl_mu_);
  auto c = connect("appender");
  if (!c.ok()) return std::move(c).error();
  if (options_.fsync) {
    SLUICE_TRY(check_durability(c.value()));
  } else if (auto aof = c.value().command({"CONFIG", "GET", "appendonly"});
             aof.ok() && aof.value()->type == REDIS_REPLY_ARRAY && aof.value()->elements == 2 &&
             str(aof.value()->element[1]) == "no") {
    spdlog::warn("{}: the server keeps no append-only file: a Redis restart loses what is spooled",
                 where());
  }
  const std::string& key = options_.key;
  auto last = c.value().command({"XREVRANGE", key, "+", "-", "COUNT", "1"});
  if (!last.ok()) return std::move(last).error();
  auto last_entries = parse_entries(last.value().get(), key);
  if (!last_entries.ok()) return std::move(last_entries).error();
  auto first = c.value().command({"XRANGE", key, "-", "+", "COUNT", "1"});
  if (!first.ok()) return std::move(first).error();
  auto first_entries = parse_entries(first.value().get(), key);
  if (!first_entries.ok()) return std::move(first_entries).error();

  auto origin = c.value().command({"GET", key + ":origin"});
  if (!origin.ok()) return std::move(origin).error();

  std::lock_guard lock(mu_);
  origin_.clear();
  origin_readers_.clear();
  if (origin.value()->type == REDIS_REPLY_STRING) {
    std::string_view text = str(origin.value().get());
    bool first = true;
    while (!text.empty()) {
      const size_t nl = text.find('\n');
      const std::string_view line = text.substr(0, nl);
      if (first) origin_ = std::string(line);
      else if (!line.empty()) origin_readers_.emplace_back(line);
      first = false;
      text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    }
  }
  next_seq_ = 1;
  cum_records_ = cum_bytes_ = base_records_ = base_bytes_ = 0;
  last_position_.reset();
  trimmed_below_ = 1;
  if (!last_entries.value().empty()) {
    const Entry& l = last_entries.value().front();
    next_seq_ = l.seq + 1;
    cum_records_ = l.cum_records;
    cum_bytes_ = l.cum_bytes;
    if (!l.position.empty()) last_position_ = std::string(l.position);
    const Entry& f = first_entries.value().front();
    base_records_ = f.cum_records - std::min(f.cum_records, f.records);
    base_bytes_ = f.cum_bytes - std::min(f.cum_bytes, static_cast<uint64_t>(f.payload.size()));
    trimmed_below_ = f.seq;
  }
  for (auto& [name, st] : readers_) st = ReaderState{};
  conn_.emplace(std::move(c.value()));
  finished_ = false;
  open_ = true;
  update_depth_locked();
  return ok_status();
}

Status RedisSpool::append(const Batch& batch, std::stop_token stop) {
  std::string payload;
  spool::encode_batch(batch, payload);
  std::lock_guard append_lock(append_mu_);
  uint64_t seq, cum_records, cum_bytes;
  std::string position;
  {
    std::unique_lock lock(mu_);
    if (!open_) return Error(Errc::internal, "spool: append before open");
    if (options_.max_bytes > 0 && payload.size() > options_.max_bytes)
      return Error(Errc::invalid_argument,
                   fmt::format("{}: a batch of {} bytes does not fit in spool.max_bytes ({} "
                               "bytes): raise spool.max_bytes or lower batch.max_bytes",
                               where(), payload.size(), options_.max_bytes));
    while (options_.max_bytes > 0 && depth_bytes_ > 0 &&
           depth_bytes_ + payload.size() > options_.max_bytes) {
      if (options_.fail_when_full)
        return Error(Errc::io,
                     fmt::format("{} is full: {} bytes wait for the destination, spool.max_bytes "
                                 "is {}: raise spool.max_bytes, or set spool.when_full: block to "
                                 "hold the source back instead",
                                 where(), depth_bytes_.load(), options_.max_bytes));
      // Back-pressure: the source waits until a reader releases batches.
      space_cv_.wait_for(lock, stop, 200ms, [] { return false; });
      if (stop.stop_requested()) return Error(Errc::cancelled, "spool: stop requested while full");
    }
    seq = next_seq_;
    cum_records = cum_records_ + batch.size();
    cum_bytes = cum_bytes_ + payload.size();
    if (batch.has_position()) position = batch.position();
    else if (last_position_) position = *last_position_;
  }
  if (!conn_ || !conn_->healthy()) {
    conn_.reset();
    auto c = connect("appender");
    if (!c.ok()) return std::move(c).error();
    conn_.emplace(std::move(c.value()));
  }
  const std::string id = entry_id(seq), records = std::to_string(batch.size()),
                    t = std::to_string(now_unix_ms()), cr = std::to_string(cum_records),
                    cb = std::to_string(cum_bytes);
  auto r = conn_->command({"XADD", options_.key, id, "b", payload, "r", records, "t", t, "cr", cr,
                           "cb", cb, "p", position});
  if (!r.ok()) {
    // A reply lost after the server added the entry: the retry finds its id already there.
    const std::string& m = r.error().message();
    const bool exists =
        m.find("equal or smaller than the target stream top item") != std::string::npos;
    if (!exists) {
      return Error(r.error().code(), fmt::format("{}: {}", where(), m), r.error().retriable());
    }
    auto top = conn_->command({"XREVRANGE", options_.key, "+", "-", "COUNT", "1"});
    if (!top.ok()) return std::move(top).error();
    auto entries = parse_entries(top.value().get(), options_.key);
    if (!entries.ok()) return std::move(entries).error();
    if (entries.value().empty() || entries.value().front().seq != seq ||
        entries.value().front().payload != payload)
      return Error(Errc::data,
                   fmt::format("{}: batch {} cannot be added: the stream holds a later batch "
                               "another writer added; one pipeline per spool.key",
                               where(), seq));
  }
  {
    std::lock_guard lock(mu_);
    next_seq_ = seq + 1;
    cum_records_ = cum_records;
    cum_bytes_ = cum_bytes;
    if (!position.empty()) last_position_ = position;
    update_depth_locked();
  }
  maintain();
  return ok_status();
}

uint64_t RedisSpool::min_released_locked() const {
  uint64_t m = UINT64_MAX;
  for (const auto& [name, st] : readers_) {
    if (!st.registered) return 0;
    m = std::min(m, st.released_seq);
  }
  return m == UINT64_MAX ? next_seq_ - 1 : m;
}

void RedisSpool::update_depth_locked() {
  uint64_t records = 0, bytes = 0;
  for (const auto& [name, st] : readers_) {
    const uint64_t r = st.registered ? st.released_records : base_records_;
    const uint64_t b = st.registered ? st.released_bytes : base_bytes_;
    records = std::max(records, cum_records_ - std::min(cum_records_, r));
    bytes = std::max(bytes, cum_bytes_ - std::min(cum_bytes_, b));
  }
  if (min_released_locked() + 1 >= next_seq_) {
    records = bytes = 0;
    oldest_ms_ = 0;
  }
  depth_records_ = records;
  depth_bytes_ = bytes;
}

void RedisSpool::maintain() {
  uint64_t released, last;
  {
    std::lock_guard lock(mu_);
    if (!open_) return;
    released = min_released_locked();
    last = next_seq_ - 1;
  }
  std::unique_lock ctl(ctl_mu_, std::try_to_lock);
  if (!ctl.owns_lock()) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_maintained_ < 1s) return;
  last_maintained_ = now;
  if (!ctl_ || !ctl_->healthy()) {
    ctl_.reset();
    auto c = connect("appender");
    if (!c.ok()) return;  // the appender and readers report the server's absence
    ctl_.emplace(std::move(c.value()));
  }
  // Keep the last entry (the next SEQ and the source position survive in it).
  const uint64_t keep_from = std::min(released + 1, last);
  if (keep_from > trimmed_below_) {
    auto r = ctl_->command({"XTRIM", options_.key, "MINID", entry_id(keep_from)});
    if (r.ok()) trimmed_below_ = keep_from;
    else spdlog::warn("{}: trimming: {}", where(), r.error().message());
  }
  // The append time of the batch after `after` (0: none).
  auto time_after = [&](uint64_t after) -> int64_t {
    if (after >= last) return 0;
    auto r = ctl_->command({"XRANGE", options_.key, entry_id(after + 1), "+", "COUNT", "1"});
    if (!r.ok()) return 0;
    auto entries = parse_entries(r.value().get(), options_.key);
    return entries.ok() && !entries.value().empty() ? entries.value().front().unix_ms : 0;
  };
  // The age of the oldest batch some reader still needs, and each reader's.
  const int64_t oldest = time_after(released);
  std::map<std::string, uint64_t> reader_released;
  {
    std::lock_guard lock(mu_);
    for (const auto& [name, st] : readers_)
      reader_released[name] = st.registered ? st.released_seq : trimmed_below_ - 1;
  }
  std::map<std::string, int64_t> reader_oldest;
  for (const auto& [name, after] : reader_released)
    reader_oldest[name] = after == released ? oldest : time_after(after);
  std::lock_guard lock(mu_);
  oldest_ms_ = min_released_locked() + 1 >= next_seq_ ? 0 : oldest;
  for (auto& [name, st] : readers_) st.oldest_ms = reader_oldest[name];
}

spool::SpoolDepth RedisSpool::reader_depth(const std::string& name) const {
  std::lock_guard lock(mu_);
  auto it = readers_.find(name);
  if (it == readers_.end() || !open_) return {};
  const ReaderState& st = it->second;
  const uint64_t r = st.registered ? st.released_records : base_records_;
  const uint64_t b = st.registered ? st.released_bytes : base_bytes_;
  spool::SpoolDepth d{cum_records_ - std::min(cum_records_, r),
                      cum_bytes_ - std::min(cum_bytes_, b), st.oldest_ms};
  const uint64_t after = st.registered ? st.released_seq : trimmed_below_ - 1;
  if (after + 1 >= next_seq_) d = spool::SpoolDepth{};
  return d;
}

bool RedisSpool::covers_beginning(const std::string& name) const {
  std::lock_guard lock(mu_);
  if (trimmed_below_ != 1) return false;  // batch 1 is gone
  if (origin_ == "beginning") return true;
  return origin_ == "resumed" &&
         std::find(origin_readers_.begin(), origin_readers_.end(), name) != origin_readers_.end();
}

Status RedisSpool::mark_origin(bool beginning) {
  std::string text;
  {
    std::lock_guard lock(mu_);
    if (!origin_.empty()) return ok_status();
    // A stream that holds batches already but no origin was made before origins were recorded:
    // whether it covers the beginning is unknown (a new destination is refused).
    if (next_seq_ > 1 || trimmed_below_ != 1) {
      origin_ = "unknown";
      return ok_status();
    }
    text = beginning ? "beginning\n" : "resumed\n";
    for (const auto& [name, st] : readers_) text += name + "\n";
  }
  std::lock_guard ctl(ctl_mu_);
  if (!ctl_ || !ctl_->healthy()) {
    ctl_.reset();
    auto c = connect("appender");
    if (!c.ok()) return std::move(c).error();
    ctl_.emplace(std::move(c.value()));
  }
  auto r = ctl_->command({"SET", options_.key + ":origin", text});
  if (!r.ok()) return std::move(r).error();
  std::lock_guard lock(mu_);
  origin_ = beginning ? "beginning" : "resumed";
  origin_readers_.clear();
  for (const auto& [name, st] : readers_) origin_readers_.push_back(name);
  return ok_status();
}

std::optional<std::string> RedisSpool::last_position() const {
  std::lock_guard lock(mu_);
  return last_position_;
}

Result<std::unique_ptr<spool::SpoolReader>> RedisSpool::open_reader(
    const std::string& name, std::optional<uint64_t> after_seq) {
  std::unique_lock lock(mu_);
  auto it = readers_.find(name);
  if (it == readers_.end())
    return Error(Errc::internal, fmt::format("{}: no reader named '{}'", where(), name));
  const uint64_t last = next_seq_ - 1;
  const uint64_t after = after_seq.value_or(trimmed_below_ - 1);
  if (after > last)
    return Error(Errc::data,
                 fmt::format("{} ends at batch {}, but the {} checkpoint says batch {} was "
                             "delivered: the stream was removed or replaced; reset the pipeline "
                             "(sluice cleanup) to start again",
                             where(), last, name, after));
  lock.unlock();
  // The released point's cumulative counts: from the entry itself (still kept, as the reader has
  // not released it before this run), or the base before the first entry.
  uint64_t rec = 0, bytes = 0;
  bool found = false;
  if (after > 0) {
    std::lock_guard ctl(ctl_mu_);
    if (!ctl_ || !ctl_->healthy()) {
      ctl_.reset();
      auto c = connect("appender");
      if (!c.ok()) return std::move(c).error();
      ctl_.emplace(std::move(c.value()));
    }
    auto r = ctl_->command({"XRANGE", options_.key, entry_id(after), entry_id(after)});
    if (!r.ok()) return std::move(r).error();
    auto entries = parse_entries(r.value().get(), options_.key);
    if (!entries.ok()) return std::move(entries).error();
    if (!entries.value().empty()) {
      rec = entries.value().front().cum_records;
      bytes = entries.value().front().cum_bytes;
      found = true;
    }
  }
  lock.lock();
  if (!found) {
    if (after + 1 < trimmed_below_ && after != last)
      return Error(Errc::data,
                   fmt::format("{} starts at batch {}, but the {} checkpoint is at batch {}: the "
                               "batches between are gone; reset the pipeline (sluice cleanup)",
                               where(), trimmed_below_, name, after));
    rec = base_records_;
    bytes = base_bytes_;
  }
  ReaderState& st = it->second;
  st.registered = true;
  st.released_seq = after;
  st.released_records = rec;
  st.released_bytes = bytes;
  update_depth_locked();
  return std::unique_ptr<spool::SpoolReader>(std::make_unique<Reader>(this, name, after));
}

void RedisSpool::finish() {
  std::lock_guard lock(mu_);
  finished_ = true;
}

spool::SpoolDepth RedisSpool::depth() const {
  return spool::SpoolDepth{depth_records_.load(), depth_bytes_.load(), oldest_ms_.load()};
}

void RedisSpool::close() noexcept {
  std::scoped_lock locks(append_mu_, ctl_mu_, mu_);
  conn_.reset();
  ctl_.reset();
  open_ = false;
}

Status remove_redis_spool(const std::string& url, const std::string& key) {
  auto u = parse_redis_url(url);
  if (!u.ok()) return Error(Errc::config, fmt::format("spool.url: {}", u.error().message()));
  auto c = RedisConnection::connect(u.value(), {});
  if (!c.ok()) return std::move(c).error();
  auto r = c.value().command({"DEL", key, key + ":origin"});
  if (!r.ok()) return std::move(r).error();
  return ok_status();
}

}  // namespace sluice::redis
