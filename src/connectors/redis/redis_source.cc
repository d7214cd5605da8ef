// The redis source (Redis Streams, consumer group).
//
// Reading. Every stream of `streams` (names, or glob patterns matched with SCAN … TYPE stream and
// re-scanned every `rescan_interval`) gets the consumer group `group` (XGROUP CREATE … MKSTREAM
// at open when missing, from `start`; a stream a pattern finds later from its first entry, 0).
// The consumer `consumer` then reads, in this order within each read():
//   1. its own pending entries (XREADGROUP … STREAMS s 0, paged by id): after a restart or a
//      reconnect, what it read before but never acknowledged comes first, so nothing is lost;
//   2. every `claim.interval`, entries that another consumer of the group has held pending for at
//      least `claim.min_idle` (XAUTOCLAIM): a crashed consumer's entries are taken over;
//   3. new entries (XREADGROUP … BLOCK … STREAMS s1 s2 … > > …).
//
// Acknowledging. Each batch gets a sequence number (its position, see redis_source.h) and the
// ids it holds. ack() — called in order by the runtime once a batch is durable at the destination
// and checkpointed, never past a gap — moves the ids of every batch up to that sequence to a list
// the reader thread XACKs (pipelined) at its next read, and close() XACKs what is left. The
// pending entries list of the group is thus the source's real position: the checkpoint is only
// informative, and a restart resumes from the group (and the consumer's pending entries).
//
// Pipelining. Commands go out with append() and their replies are read in order (settle()):
// XACKs travel with the next command, and while the streams have a backlog up to kRepliesAhead
// XREADGROUP … > without BLOCK stay in flight, so the server serves the next read while this
// thread decodes the last. Replies read ahead wait in ahead_ (their entries are this consumer's
// pending ones: a reconnect reads them again; claim() leaves them to ahead_).
//
// Formats: raw (each field of the entry a string column; the key the fields of `key_fields`, or
// {id: entry id}) and opencdc (field `field` holds one OpenCDC JSON record). An entry that cannot
// be decoded stops the pipeline with an error naming the stream and the id, or goes to the
// dead-letter queue with on_error: dlq.
#include "connectors/redis/redis_source.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "connectors/common/credentials.h"
#include "connectors/common/message_formats.h"
#include "connectors/redis/redis_common.h"
#include "sluice/json.h"

namespace sluice {

namespace {

// Entries asked for in one XREADGROUP / XAUTOCLAIM (the batch fills over several calls).
constexpr size_t kMaxEntriesPerRead = 1000;
// XREADGROUP … > replies waiting or in flight while the streams have a backlog (read_new), as long
// as they stay within kReadAheadBytes, each taken as large as the last.
constexpr size_t kRepliesAhead = 5;
constexpr size_t kReadAheadBytes = 16u << 20;

using Clock = std::chrono::steady_clock;
using redis::Reply;

struct Options {
  std::string url;
  std::string user, password, password_file;
  std::vector<std::string> streams;
  std::string group;
  std::string consumer;
  std::string start;
  std::string format;
  std::string field;
  std::string key_field;
  std::vector<std::string> key_fields;
  std::chrono::milliseconds claim_min_idle{};
  std::chrono::milliseconds claim_interval{};
  std::chrono::milliseconds rescan_interval{};
  std::chrono::milliseconds connect_timeout{};
  std::string mode;
  std::string keyspace_pattern;
  std::string keyspace_table;
  bool keyspace_configure = false;
  redis::RedisUrl parsed;  // derived by finalize
};

constexpr auto kSettings = settings_table<Options>(
    setting<&Options::url>(
        "url",
        "Redis server, redis://[user:password@]host:port[/db]. TLS (rediss://) is "
        "not available: Debian's hiredis 0.14 has none.")
        .mandatory()
        .secret_value(),
    setting<&Options::user>("user", kUserDoc),
    setting<&Options::password>("password", kPasswordDoc).secret_value(),
    setting<&Options::password_file>("password_file", kPasswordFileDoc),
    setting<&Options::mode>(
        "mode",
        "streams: read Redis Streams through a consumer group (at-least-once); keyspace: a "
        "snapshot of the keys matching keyspace.pattern, then their keyspace notifications "
        "(weaker: docs/redis-source.md).")
        .one_of("streams,keyspace")
        .with_default("streams"),
    setting<&Options::streams>(
        "streams",
        "mode streams (needed there): the streams to read. An entry with a glob character (* ? [) "
        "is a pattern: every stream key matching it (SCAN … MATCH … TYPE stream), re-scanned every "
        "rescan_interval. A named stream that does not exist is created empty (XGROUP CREATE … "
        "MKSTREAM)."),
    setting<&Options::keyspace_pattern>(
        "keyspace.pattern",
        "mode keyspace: the keys to capture, a glob (SCAN MATCH, PSUBSCRIBE). Hashes become a row "
        "of their fields, strings a row {key, value}; other types are skipped.")
        .with_default("*"),
    setting<&Options::keyspace_table>("keyspace.table",
                                      "mode keyspace: the table (metadata `table`) of the records.")
        .with_default("redis_keys"),
    setting<&Options::keyspace_configure>(
        "keyspace.configure",
        "mode keyspace: when the server's notify-keyspace-events lacks what the mode needs (K and "
        "g$hxe), add it with CONFIG SET instead of stopping with an error naming the command.")
        .with_default("false"),
    setting<&Options::group>(
        "group",
        "Consumer group. Default: sluice-<pipeline id>. Created on each stream when missing; "
        "entries are acknowledged (XACK) to it only after the destination acknowledged them."),
    setting<&Options::consumer>(
        "consumer",
        "Consumer name within the group. Keep it stable across restarts: a restarted consumer "
        "reads its own pending entries first.")
        .with_default("sluice"),
    setting<&Options::start>(
        "start",
        "Where a group created at open begins: earliest (id 0, the whole stream) or latest ($, "
        "entries added after the group was created). An existing group keeps its position; a "
        "stream a pattern finds after open is read from its first entry.")
        .one_of("earliest,latest")
        .with_default("earliest"),
    setting<&Options::format>(
        "format",
        "How entries become records. raw: each field a string column, table = the stream, key = "
        "key_fields (or {id: entry id}); opencdc: the field named by `field` holds one OpenCDC JSON "
        "record (its own table and key); debezium: the field `field` holds a Debezium change event "
        "(as the kafka source reads it), the field `key_field` its key.")
        .one_of("raw,opencdc,debezium")
        .with_default("raw"),
    setting<&Options::field>(
        "field", "format opencdc, debezium: the entry field holding the JSON record (event).")
        .with_default("value"),
    setting<&Options::key_field>("key_field",
                                 "format debezium: the entry field holding the event's key (JSON, "
                                 "as a Kafka message key); an entry without it has no key.")
        .with_default("key"),
    setting<&Options::key_fields>(
        "key_fields",
        "format raw: the fields that make the record key (an entry without one of them is "
        "malformed). Empty: the key is {id: the entry id}, also stored as column id."),
    setting<&Options::claim_min_idle>(
        "claim.min_idle",
        "Entries another consumer of the group has held pending (read, never acknowledged) at "
        "least this long are claimed (XAUTOCLAIM) and delivered again: a crashed consumer's entries "
        "are not lost. 0: never claim.")
        .with_default("60s"),
    setting<&Options::claim_interval>("claim.interval",
                                      "How often to look for entries to claim (XAUTOCLAIM).")
        .with_default("5s")
        .at_least(10),
    setting<&Options::rescan_interval>(
        "rescan_interval",
        "How often stream patterns are matched again (SCAN) to find new streams.")
        .with_default("10s")
        .at_least(10),
    setting<&Options::connect_timeout>("connect_timeout",
                                       "How long a connection attempt may take before it fails.")
        .with_default("10s"));

Status finalize(Options& o) {
  if (o.mode == "keyspace") {
    if (!o.streams.empty())
      return Error(Errc::config,
                   "setting 'streams' applies to mode streams: remove it (mode keyspace reads the "
                   "keys matching keyspace.pattern)");
    if (o.format != "raw")
      return Error(Errc::config,
                   "setting 'format' applies to mode streams: remove it (mode keyspace makes a "
                   "row of each hash or string)");
    if (o.keyspace_pattern.empty())
      return Error(Errc::config, "setting 'keyspace.pattern' is empty: give a glob such as user:*");
  } else if (o.streams.empty()) {
    return Error(Errc::config, "setting 'streams' lists no stream (mode streams needs it)");
  }
  for (const auto& s : o.streams)
    if (s.empty())
      return Error(Errc::config, "setting 'streams': an empty stream name (remove it)");
  Credentials c{o.user, o.password, o.password_file};
  SLUICE_TRY(resolve_credentials(c));
  SLUICE_TRY_ASSIGN(o.parsed, redis::parse_redis_url(o.url, c));
  if (o.format != "raw" && !o.key_fields.empty())
    return Error(Errc::config,
                 "setting 'key_fields' applies to format raw only (an OpenCDC record or a Debezium "
                 "event has its own key): remove it");
  return ok_status();
}

Value text_or_bytes(Batch& batch, std::string_view s) {
  return kafka::text_or_bytes(batch.arena(), s);
}

std::string_view str(const redisReply* r) {
  return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS)
             ? std::string_view(r->str, r->len)
             : std::string_view();
}

// The bytes of the strings in a reply (its entries' ids, field names and values).
size_t reply_bytes(const redisReply* r) {
  if (r == nullptr) return 0;
  if (r->type != REDIS_REPLY_ARRAY) return r->len;
  size_t n = 0;
  for (size_t i = 0; i < r->elements; ++i) n += reply_bytes(r->element[i]);
  return n;
}

// A server that is starting (LOADING) or a lost connection: reconnect and go on.
bool transient(const Error& e) {
  return e.retriable() || e.message().find("LOADING") != std::string::npos ||
         e.message().find("BUSY ") != std::string::npos;
}

// A stream entry id, <milliseconds>-<sequence>: kept as two numbers, not as text, for the ids in
// flight (one per entry read, hashed, and written back in XACK).
struct EntryId {
  uint64_t ms = 0, seq = 0;
  bool operator==(const EntryId&) const = default;
  static std::optional<EntryId> parse(std::string_view text) {
    EntryId id;
    const char* end = text.data() + text.size();
    auto [p, ec] = std::from_chars(text.data(), end, id.ms);
    if (ec != std::errc() || p == end || *p != '-') return std::nullopt;
    auto [q, ec2] = std::from_chars(p + 1, end, id.seq);
    if (ec2 != std::errc() || q != end) return std::nullopt;
    return id;
  }
  void append_to(std::string& out) const {
    char buf[42];
    char* p = std::to_chars(buf, buf + 20, ms).ptr;
    *p++ = '-';
    p = std::to_chars(p, buf + sizeof buf, seq).ptr;
    out.append(buf, size_t(p - buf));
  }
};
struct EntryIdHash {
  size_t operator()(const EntryId& e) const noexcept {
    return std::hash<uint64_t>{}(e.ms * 0x9E3779B97F4A7C15ULL ^ e.seq);
  }
};
struct StreamEntry {
  uint32_t stream;  // index in streams_
  EntryId id;
};

class RedisSource final : public Source {
 public:
  explicit RedisSource(Options o) : o_(std::move(o)) {}
  ~RedisSource() override { close(); }

  Status open(const ConnectorContext& ctx, const std::optional<std::string>& checkpoint) override;
  Result<ReadStatus> read(Batch& batch, const ReadRequest& req, std::stop_token stop) override;
  void ack(std::string_view position) override;
  void close() noexcept override;
  Status cleanup(const ConnectorContext& ctx) override;
  std::string server_state() const override {
    if (!has_group_.load()) return {};
    return fmt::format("consumer group '{}' on the stream(s)", group_);
  }

 private:
  struct Stream {
    std::string name;
    std::string pending_cursor = "0";  // own pending entries read up to (exclusive of nothing)
    bool pending_done = false;
    std::string claim_cursor = "0-0";
    std::string last_id = {};                                // last id put in a batch
    std::unordered_set<EntryId, EntryIdHash> inflight = {};  // read, not yet XACKed (reader thread)
  };
  struct Sent {
    uint64_t seq;
    std::vector<StreamEntry> ids;
  };

  // A command sent on conn_ whose reply is not read yet: an XACK of `ids`, or an XREADGROUP … >
  // asking `read_count` entries a stream.
  struct Due {
    size_t read_count = 0;         // 0: an XACK
    std::vector<StreamEntry> ids;  // the XACK's
  };

  Status connect();
  // Reads the replies of the commands in due_, in order — all of them, or up to the first
  // XREADGROUP's with `one_read`: an XACK's takes its ids out of `inflight`, an XREADGROUP's goes
  // to ahead_.
  Status settle(bool one_read = false);
  // One command on conn_, after settle().
  Result<Reply> command(std::initializer_list<std::string_view> args);
  Status ensure_group(const std::string& stream, std::string_view start_id);
  Status discover(bool at_open);
  Status flush_acks();
  Status read_pending(Stream& s, uint32_t index, Batch& batch, size_t room);
  Status claim(Stream& s, uint32_t index, Batch& batch, size_t room);
  // Whether entry `id` of stream `index` waits in ahead_, not yet decoded.
  bool read_ahead_holds(uint32_t index, std::string_view id) const;
  Status read_new(Batch& batch, size_t room, std::chrono::milliseconds block);
  // Appends the entry `e` ([id, [field, value, …]]) of stream `index`; false when the entry was
  // skipped (already in flight, or deleted — then acknowledged at once).
  Status add_entry(uint32_t index, const redisReply* e, Batch& batch);
  Status decode(uint32_t index, std::string_view id, const redisReply* fields, Batch& batch);
  // Stream `index`'s name copied into the batch being read (once a batch).
  std::string_view name_in(Batch& batch, uint32_t index);
  void lost_connection(const Error& e);

  Options o_;
  kafka::MessageDecoder debezium_{kafka::Format::debezium};
  ConnectorContext ctx_;
  std::string group_;
  std::optional<redis::RedisConnection> conn_;
  std::vector<Stream> streams_;
  std::vector<std::string> patterns_;
  Clock::time_point next_claim_{}, next_rescan_{};
  std::chrono::milliseconds backoff_{200};
  std::vector<StreamEntry> batch_ids_;            // ids of the batch being read
  std::vector<std::string_view> names_in_batch_;  // see name_in()
  uint64_t seq_ = 0;
  // Pipelining on conn_ (reader thread): the commands sent whose replies are due, in order, and
  // the XREADGROUP … > replies received but not yet put in batches — entries already delivered to
  // this consumer (pending in the group: a reconnect or a restart reads them again). The front
  // reply is taken from its stream ahead_stream_, entry ahead_entry_.
  std::deque<Due> due_;
  std::deque<Reply> ahead_;
  size_t ahead_stream_ = 0, ahead_entry_ = 0;
  bool last_read_full_ = false;  // the last XREADGROUP … > returned all it asked for
  size_t last_read_bytes_ = 0;   // and the bytes of its ids, field names and values
  bool regroup_ = false;         // it found a stream without its group (NOGROUP)

  // Shared with the acker thread.
  std::mutex mu_;
  std::deque<Sent> sent_;            // batches handed out, not acked
  std::vector<StreamEntry> to_ack_;  // acked by the runtime, XACK due
  bool closed_ = false;
  std::atomic<bool> has_group_{false};  // a group exists (created or found) on a stream
};

Status RedisSource::connect() {
  redis::RedisConnection::Options co;
  co.connect_timeout = o_.connect_timeout;
  co.command_timeout = std::chrono::milliseconds(30'000);
  co.client_name = "sluice-" + ctx_.pipeline_id;
  SLUICE_TRY_ASSIGN(redis::RedisConnection c, redis::RedisConnection::connect(o_.parsed, co));
  conn_.emplace(std::move(c));
  return ok_status();
}

Status RedisSource::settle(bool one_read) {
  while (!due_.empty()) {
    const Due& d = due_.front();
    const bool read = d.read_count > 0;
    // On an error the command stays due: lost_connection() acknowledges its ids again.
    auto reply = conn_->read_reply_of(read ? "XREADGROUP" : "XACK");
    // NOGROUP: a stream (and its group) was deleted while sluice read it; read_new() makes both.
    const bool nogroup =
        !reply.ok() && read && reply.error().message().find("NOGROUP") != std::string::npos;
    if (!reply.ok() && !nogroup) return std::move(reply).error();
    const redisReply* r = reply.ok() ? reply->get() : nullptr;
    if (nogroup) {
      regroup_ = true;
      last_read_full_ = false;
    } else if (!read) {
      for (const StreamEntry& e : d.ids) streams_[e.stream].inflight.erase(e.id);
    } else if (r->type == REDIS_REPLY_ARRAY) {
      size_t most = 0;
      for (size_t k = 0; k < r->elements; ++k)
        if (r->element[k]->type == REDIS_REPLY_ARRAY && r->element[k]->elements == 2)
          most = std::max(most, r->element[k]->element[1]->elements);
      last_read_full_ = most >= d.read_count;
      last_read_bytes_ = reply_bytes(r);
      ahead_.push_back(std::move(reply).value());
    } else {
      last_read_full_ = false;  // nil: nothing new within BLOCK
    }
    due_.pop_front();
    if (read && one_read) break;
  }
  return ok_status();
}

Result<Reply> RedisSource::command(std::initializer_list<std::string_view> args) {
  SLUICE_TRY(settle());
  return conn_->command(args);
}

Status RedisSource::ensure_group(const std::string& stream, std::string_view start_id) {
  auto r = command({"XGROUP", "CREATE", stream, group_, start_id, "MKSTREAM"});
  if (r.ok() || r.error().message().find("BUSYGROUP") != std::string::npos) has_group_ = true;
  if (r.ok()) {
    spdlog::info("pipeline {}: created consumer group '{}' on stream '{}' (from {})",
                 ctx_.pipeline_id, group_, stream, start_id);
    return ok_status();
  }
  if (r.error().message().find("BUSYGROUP") != std::string::npos) return ok_status();
  if (r.error().message().find("WRONGTYPE") != std::string::npos)
    return Error(
        Errc::config,
        fmt::format("key '{}' is not a stream: fix `streams` (or delete the key)", stream));
  return std::move(r).error();
}

Status RedisSource::discover(bool at_open) {
  for (const std::string& pat : patterns_) {
    std::string cursor = "0";
    do {
      SLUICE_TRY_ASSIGN(Reply r,
                        command({"SCAN", cursor, "MATCH", pat, "COUNT", "1000", "TYPE", "stream"}));
      if (r->type != REDIS_REPLY_ARRAY || r->elements != 2)
        return Error(Errc::internal, "redis: unexpected SCAN reply " + redis::reply_text(r.get()));
      cursor.assign(str(r->element[0]));
      const redisReply* keys = r->element[1];
      for (size_t i = 0; i < keys->elements; ++i) {
        std::string name(str(keys->element[i]));
        bool known = false;
        for (const Stream& s : streams_) known = known || s.name == name;
        if (known) continue;
        SLUICE_TRY(ensure_group(name, at_open ? (o_.start == "latest" ? "$" : "0") : "0"));
        if (!at_open)
          spdlog::info("pipeline {}: stream '{}' matches '{}': reading it", ctx_.pipeline_id, name,
                       pat);
        streams_.push_back(Stream{.name = std::move(name)});
      }
    } while (cursor != "0");
  }
  return ok_status();
}

Status RedisSource::open(const ConnectorContext& ctx, const std::optional<std::string>&) {
  ctx_ = ctx;
  group_ = o_.group.empty() ? "sluice-" + ctx.pipeline_id : o_.group;
  SLUICE_TRY(connect());
  for (const std::string& s : o_.streams) {
    if (redis::is_stream_pattern(s)) {
      patterns_.push_back(s);
      continue;
    }
    SLUICE_TRY(ensure_group(s, o_.start == "latest" ? "$" : "0"));
    streams_.push_back(Stream{.name = s});
  }
  SLUICE_TRY(discover(/*at_open=*/true));
  next_rescan_ = Clock::now() + o_.rescan_interval;
  next_claim_ = Clock::now();
  std::string names;
  for (const Stream& s : streams_) names += (names.empty() ? "'" : ", '") + s.name + "'";
  spdlog::info("pipeline {}: reading stream(s) {} as consumer '{}' of group '{}' on {}",
               ctx_.pipeline_id, names.empty() ? "(none yet)" : names, o_.consumer, group_,
               o_.parsed.redacted());
  return ok_status();
}

void RedisSource::lost_connection(const Error& e) {
  spdlog::warn("pipeline {}: {} (reconnecting; pending entries are read again)", ctx_.pipeline_id,
               e.message());
  conn_.reset();
  {
    // XACKs whose replies never came are sent again (XACK is idempotent); replies read ahead are
    // dropped: their entries are this consumer's pending ones, read again below.
    std::lock_guard lk(mu_);
    for (const Due& d : due_) to_ack_.insert(to_ack_.end(), d.ids.begin(), d.ids.end());
  }
  due_.clear();
  ahead_.clear();
  ahead_stream_ = ahead_entry_ = 0;
  last_read_full_ = regroup_ = false;
  last_read_bytes_ = 0;
  for (Stream& s : streams_) {
    s.pending_done = false;
    s.pending_cursor = "0";
  }
}

Status RedisSource::flush_acks() {
  std::vector<StreamEntry> ids;
  {
    std::lock_guard lk(mu_);
    ids.swap(to_ack_);
  }
  // One XACK per stream and up to 1000 ids, pipelined: their replies are read with the next
  // command's (settle()), so acknowledging costs no round trip of its own.
  std::vector<std::string_view> args;
  std::string text;
  std::vector<size_t> ends;
  for (size_t i = 0; i < ids.size();) {
    const uint32_t si = ids[i].stream;
    const size_t from = i;
    text.clear();
    ends.clear();
    for (; i < ids.size() && ids[i].stream == si && i - from < 1000; ++i) {
      ids[i].id.append_to(text);
      ends.push_back(text.size());
    }
    args.assign({"XACK", streams_[si].name, group_});
    for (size_t k = 0, begin = 0; k < ends.size(); begin = ends[k++])
      args.emplace_back(text.data() + begin, ends[k] - begin);
    conn_->append(args);  // formats the command: args may dangle after
    due_.push_back(
        Due{.read_count = 0,
            .ids = {ids.begin() + std::ptrdiff_t(from), ids.begin() + std::ptrdiff_t(i)}});
  }
  return ok_status();
}

std::string_view RedisSource::name_in(Batch& batch, uint32_t index) {
  if (names_in_batch_.size() < streams_.size()) names_in_batch_.resize(streams_.size());
  std::string_view& v = names_in_batch_[index];
  if (v.empty()) v = batch.copy(streams_[index].name);
  return v;
}

Status RedisSource::decode(uint32_t index, std::string_view id, const redisReply* fields,
                           Batch& batch) {
  const Stream& s = streams_[index];
  const size_t n = fields->elements / 2;
  auto field_value = [&](std::string_view name) -> const redisReply* {
    for (size_t i = 0; i + 1 < fields->elements; i += 2)
      if (str(fields->element[i]) == name) return fields->element[i + 1];
    return nullptr;
  };
  std::string problem;
  if (o_.format == "debezium") {
    const redisReply* v = field_value(o_.field);
    if (v == nullptr) {
      problem = fmt::format("has no field '{}' (setting `field`)", o_.field);
    } else {
      const redisReply* k = field_value(o_.key_field);
      const std::string where = fmt::format("stream '{}' entry {}", s.name, id);
      const std::pair<std::string_view, std::string_view> meta[] = {{"redis.stream", s.name},
                                                                    {"redis.id", id}};
      kafka::MessageView m{.topic = s.name,
                           .key = k ? std::optional<std::string_view>(str(k)) : std::nullopt,
                           .value = str(v),
                           .headers = meta,
                           .kafka_metadata = false,
                           .where = where};
      Status st = debezium_.decode(m, batch);
      if (st.ok()) return ok_status();  // a tombstone (null payload) gives no record
      if (!ctx_.dead_letters) return std::move(st).error();
      problem = st.error().message();
    }
  } else if (o_.format == "opencdc") {
    const redisReply* v = field_value(o_.field);
    if (v == nullptr) {
      problem = fmt::format("has no field '{}' (setting `field`)", o_.field);
    } else {
      const size_t before = batch.size();
      Status st = decode_record_json(str(v), batch);
      if (st.ok()) {
        if (batch.size() == before + 1) {
          Record& r = batch.records().back();
          const uint32_t m = r.metadata.is_object() ? r.metadata.size() : 0;
          ObjectBuilder meta = batch.object(m + 2);
          if (m)
            for (const Field& f : r.metadata.fields()) meta.add(f.name, f.value);
          meta.add("redis.stream", Value::string(batch.copy(s.name)));
          meta.add("redis.id", Value::string(batch.copy(id)));
          r.metadata = meta.build();
          r.position = {};
        }
        return ok_status();
      }
      problem = st.error().message();
    }
  } else {
    // The row first; the key takes its fields' names and values from it.
    ObjectBuilder after_builder = batch.object(uint32_t(n + 1));
    if (o_.key_fields.empty()) after_builder.add("id", Value::string(batch.copy(id)));
    for (size_t i = 0; i + 1 < fields->elements; i += 2)
      after_builder.add(batch.copy(str(fields->element[i])),
                        text_or_bytes(batch, str(fields->element[i + 1])));
    const Value after = after_builder.build();
    ObjectBuilder key = batch.object(uint32_t(std::max<size_t>(1, o_.key_fields.size())));
    if (o_.key_fields.empty()) {
      key.add("id", after.fields()[0].value);
      if (field_value("id") != nullptr)
        problem =
            "has a field 'id', the column the entry id takes when key_fields is empty (set "
            "key_fields: [id] to key by that field)";
    } else {
      for (const std::string& k : o_.key_fields) {
        const Field* f = nullptr;
        for (const Field& c : after.fields())
          if (c.name == k) {
            f = &c;
            break;
          }
        if (f == nullptr) {
          problem = fmt::format("has no field '{}' (setting `key_fields`)", k);
          break;
        }
        key.add(f->name, f->value);
      }
    }
    if (problem.empty()) {
      const std::string_view name = name_in(batch, index);
      ObjectBuilder meta = batch.object(3);
      meta.add(meta::kTable, Value::string(name));
      meta.add("redis.stream", Value::string(name));
      meta.add("redis.id", Value::string(batch.copy(id)));
      Record& r = batch.add();
      r.op = Operation::create;
      r.key = key.build();
      r.after = after;
      r.metadata = meta.build();
      return ok_status();
    }
  }
  const std::string why = fmt::format("stream '{}' entry {}: {}", s.name, id, problem);
  if (!ctx_.dead_letters)
    return Error(Errc::data,
                 why +
                     " (fix the producer, or set on_error: dlq to send such entries to the "
                     "dead-letter queue)");
  // To the dead-letter queue: the entry's fields as they are, and why.
  ObjectBuilder after = batch.object(uint32_t(n));
  for (size_t i = 0; i + 1 < fields->elements; i += 2)
    after.add(batch.copy(str(fields->element[i])),
              text_or_bytes(batch, str(fields->element[i + 1])));
  ObjectBuilder key = batch.object(1);
  key.add("id", Value::string(batch.copy(id)));
  ObjectBuilder meta = batch.object(4);
  meta.add(meta::kTable, Value::string(batch.copy(s.name)));
  meta.add("redis.stream", Value::string(batch.copy(s.name)));
  meta.add("redis.id", Value::string(batch.copy(id)));
  meta.add(meta::kError, Value::string(batch.copy(why)));
  Record& r = batch.add();
  r.op = Operation::create;
  r.key = key.build();
  r.after = after.build();
  r.metadata = meta.build();
  batch.add_source_reject();
  return ok_status();
}

Status RedisSource::add_entry(uint32_t index, const redisReply* e, Batch& batch) {
  Stream& s = streams_[index];
  if (e == nullptr || e->type != REDIS_REPLY_ARRAY || e->elements < 2)
    return Error(Errc::internal, "redis: unexpected stream entry " + redis::reply_text(e));
  const std::string_view id = str(e->element[0]);
  const std::optional<EntryId> eid = EntryId::parse(id);
  if (!eid)
    return Error(Errc::internal,
                 fmt::format("redis: unexpected entry id '{}' in stream '{}'", id, s.name));
  const redisReply* fields = e->element[1];
  if (fields->type != REDIS_REPLY_ARRAY) {
    if (s.inflight.count(*eid)) return ok_status();
    // A pending entry whose data was deleted (XDEL, or trimmed): nothing to deliver.
    std::lock_guard lk(mu_);
    to_ack_.push_back(StreamEntry{index, *eid});
    return ok_status();
  }
  const auto [it, fresh] = s.inflight.insert(*eid);
  if (!fresh) return ok_status();  // already read, not yet acknowledged
  if (Status st = decode(index, id, fields, batch); !st.ok()) {
    s.inflight.erase(it);
    return st;
  }
  s.last_id.assign(id);
  batch_ids_.push_back(StreamEntry{index, *eid});
  return ok_status();
}

Status RedisSource::read_pending(Stream& s, uint32_t index, Batch& batch, size_t room) {
  const std::string count = std::to_string(std::clamp<size_t>(room, 1, kMaxEntriesPerRead));
  SLUICE_TRY_ASSIGN(Reply r, command({"XREADGROUP", "GROUP", group_, o_.consumer, "COUNT", count,
                                      "STREAMS", s.name, s.pending_cursor}));
  const redisReply* entries = nullptr;
  if (r->type == REDIS_REPLY_ARRAY && r->elements == 1 && r->element[0]->elements == 2)
    entries = r->element[0]->element[1];
  if (entries == nullptr || entries->elements == 0) {
    s.pending_done = true;
    return ok_status();
  }
  for (size_t i = 0; i < entries->elements; ++i) {
    SLUICE_TRY(add_entry(index, entries->element[i], batch));
    s.pending_cursor.assign(str(entries->element[i]->element[0]));
  }
  return ok_status();
}

bool RedisSource::read_ahead_holds(uint32_t index, std::string_view id) const {
  for (size_t k = 0; k < ahead_.size(); ++k) {
    const redisReply* r = ahead_[k].get();
    for (size_t si = k == 0 ? ahead_stream_ : 0; si < r->elements; ++si) {
      const redisReply* sr = r->element[si];
      if (sr->type != REDIS_REPLY_ARRAY || sr->elements != 2 ||
          str(sr->element[0]) != streams_[index].name)
        continue;
      const redisReply* entries = sr->element[1];
      for (size_t i = k == 0 && si == ahead_stream_ ? ahead_entry_ : 0; i < entries->elements; ++i)
        if (str(entries->element[i]->element[0]) == id) return true;
    }
  }
  return false;
}

Status RedisSource::claim(Stream& s, uint32_t index, Batch& batch, size_t room) {
  const std::string idle = std::to_string(o_.claim_min_idle.count());
  const std::string count = std::to_string(std::clamp<size_t>(room, 1, kMaxEntriesPerRead));
  SLUICE_TRY_ASSIGN(Reply r, command({"XAUTOCLAIM", s.name, group_, o_.consumer, idle,
                                      s.claim_cursor, "COUNT", count}));
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 2)
    return Error(Errc::internal,
                 "redis: unexpected XAUTOCLAIM reply " + redis::reply_text(r.get()));
  s.claim_cursor.assign(str(r->element[0]));
  const redisReply* entries = r->element[1];
  size_t claimed = 0;
  for (size_t i = 0; i < entries->elements; ++i) {
    const redisReply* e = entries->element[i];
    // An entry this consumer read ahead and has not decoded yet, idle that long because the
    // destination held the pipeline: it comes from ahead_, in its place in the stream.
    if (e->type == REDIS_REPLY_ARRAY && e->elements >= 1 &&
        read_ahead_holds(index, str(e->element[0])))
      continue;
    const size_t before = batch_ids_.size();
    SLUICE_TRY(add_entry(index, e, batch));
    claimed += batch_ids_.size() - before;
  }
  if (claimed > 0)
    spdlog::info("pipeline {}: claimed {} entr{} of stream '{}' left pending by another consumer",
                 ctx_.pipeline_id, claimed, claimed == 1 ? "y" : "ies", s.name);
  return ok_status();
}

Status RedisSource::read_new(Batch& batch, size_t room, std::chrono::milliseconds block) {
  if (streams_.empty()) {
    std::this_thread::sleep_for(block);
    return ok_status();
  }
  // XREADGROUP … COUNT n [BLOCK ms] STREAMS s1 s2 … > > …
  auto send_read = [&](size_t count, std::optional<std::chrono::milliseconds> blocking) {
    const std::string n = std::to_string(count);
    std::string ms;
    std::vector<std::string_view> args = {"XREADGROUP", "GROUP", group_, o_.consumer, "COUNT", n};
    if (blocking) {
      ms = std::to_string(std::max<int64_t>(1, blocking->count()));
      args.push_back("BLOCK");
      args.push_back(ms);
    }
    args.push_back("STREAMS");
    for (const Stream& s : streams_) args.push_back(s.name);
    for (size_t i = 0; i < streams_.size(); ++i) args.push_back(">");
    conn_->append(args);
    due_.push_back(Due{.read_count = count, .ids = {}});
  };
  size_t reads = size_t(
      std::count_if(due_.begin(), due_.end(), [](const Due& d) { return d.read_count > 0; }));
  // Read ahead: while the streams have a backlog (the last read returned all it asked for), reads
  // stay out — up to kRepliesAhead with those waiting, fewer when replies are large — so the server
  // serves the next one while this side parses and decodes the last. Without BLOCK: they come back
  // at once, empty when the backlog is gone.
  auto read_ahead = [&]() -> Status {
    const size_t most =
        std::min(kRepliesAhead,
                 std::max<size_t>(1, kReadAheadBytes / std::max<size_t>(1, last_read_bytes_)));
    if (!last_read_full_ || ahead_.size() + reads >= most) return ok_status();
    for (; ahead_.size() + reads < most; ++reads) send_read(kMaxEntriesPerRead, {});
    return conn_->flush();  // now, not when the next reply is awaited: after the decoding
  };
  if (ahead_.empty()) {
    // At most 1,000 entries a call: hiredis allocates an object per entry and field, and freeing
    // a 10,000-entry reply at once sent a third of the reader's time into malloc consolidation.
    if (reads == 0) {
      send_read(std::clamp<size_t>(room, 1, kMaxEntriesPerRead), block);
      ++reads;
    }
    SLUICE_TRY(read_ahead());
    SLUICE_TRY(settle(/*one_read=*/true));  // the XACK replies before it, then the read's
    --reads;
  }
  if (regroup_) {
    regroup_ = false;
    for (const Stream& s : streams_) SLUICE_TRY(ensure_group(s.name, "0"));
    return ok_status();
  }
  SLUICE_TRY(read_ahead());
  size_t taken = 0;
  uint32_t index = 0;
  while (!ahead_.empty() && taken < room) {
    const redisReply* r = ahead_.front().get();
    if (ahead_stream_ >= r->elements) {
      ahead_.pop_front();
      ahead_stream_ = ahead_entry_ = 0;
      continue;
    }
    const redisReply* sr = r->element[ahead_stream_];
    const redisReply* entries =
        sr->type == REDIS_REPLY_ARRAY && sr->elements == 2 ? sr->element[1] : nullptr;
    if (entries == nullptr || ahead_entry_ >= entries->elements) {
      ++ahead_stream_;
      ahead_entry_ = 0;
      continue;
    }
    if (ahead_entry_ == 0 || taken == 0) {
      const std::string_view name = str(sr->element[0]);
      index = 0;
      while (index < streams_.size() && streams_[index].name != name) ++index;
      if (index == streams_.size())
        return Error(Errc::internal, fmt::format("redis: a reply for unknown stream '{}'", name));
    }
    SLUICE_TRY(add_entry(index, entries->element[ahead_entry_], batch));
    ++ahead_entry_;
    ++taken;
  }
  return ok_status();
}

Result<ReadStatus> RedisSource::read(Batch& batch, const ReadRequest& req, std::stop_token stop) {
  const auto started = Clock::now();
  Clock::time_point first{}, last{};
  bool idle = false;
  batch_ids_.clear();
  names_in_batch_.clear();
  Status st = ok_status();
  while (batch.size() < req.max_records && batch.bytes() < req.max_bytes &&
         !stop.stop_requested()) {
    if (!conn_) {
      st = connect();
      if (st.ok()) {
        spdlog::info("pipeline {}: reconnected to {}", ctx_.pipeline_id, o_.parsed.redacted());
        backoff_ = std::chrono::milliseconds(200);
        for (const Stream& s : streams_) {
          st = ensure_group(s.name, "0");
          if (!st.ok()) break;
        }
      }
      if (!st.ok()) {
        if (!transient(st.error())) return st.error();
        conn_.reset();
        std::this_thread::sleep_for(backoff_);
        backoff_ = std::min(backoff_ * 2, std::chrono::milliseconds(5000));
        st = ok_status();
        break;
      }
    }
    const size_t room = req.max_records - batch.size();
    const size_t before = batch.size();
    st = flush_acks();
    const auto now = Clock::now();
    if (st.ok() && !patterns_.empty() && now >= next_rescan_) {
      st = discover(/*at_open=*/false);
      next_rescan_ = now + o_.rescan_interval;
    }
    bool pending = false;
    for (uint32_t i = 0; st.ok() && i < streams_.size() && batch.size() < req.max_records; ++i)
      if (!streams_[i].pending_done) {
        pending = true;
        st = read_pending(streams_[i], i, batch, req.max_records - batch.size());
      }
    if (st.ok() && !pending && o_.claim_min_idle.count() > 0 && now >= next_claim_) {
      for (uint32_t i = 0; st.ok() && i < streams_.size() && batch.size() < req.max_records; ++i)
        st = claim(streams_[i], i, batch, req.max_records - batch.size());
      next_claim_ = now + o_.claim_interval;
    }
    if (st.ok() && !pending && batch.size() < req.max_records) {
      const auto deadline = batch.empty() ? started + req.poll : req.linger_deadline(first, last);
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) {
        idle = true;
        break;
      }
      const size_t was = batch.size();
      st = read_new(batch, std::min(room, req.max_records - batch.size()),
                    std::min(left, std::chrono::milliseconds(100)));
      if (st.ok() && batch.size() == was && Clock::now() >= deadline) idle = true;
    }
    if (!st.ok()) {
      if (!transient(st.error())) return st.error();
      lost_connection(st.error());
      st = ok_status();
      break;
    }
    if (before == 0 && batch.size() > 0) first = Clock::now();
    if (batch.size() > before) last = Clock::now();
    if (idle) break;
  }
  if (!batch_ids_.empty()) {
    const uint64_t seq = ++seq_;
    std::string position = std::to_string(seq);
    for (const Stream& s : streams_)
      if (!s.last_id.empty())
        fmt::format_to(std::back_inserter(position), ";{}={}", s.name, s.last_id);
    batch.set_position(position);
    std::lock_guard lk(mu_);
    sent_.push_back(Sent{seq, std::move(batch_ids_)});
    batch_ids_.clear();
  }
  return idle ? ReadStatus::idle : ReadStatus::more;
}

void RedisSource::ack(std::string_view position) {
  auto seq = redis::position_sequence(position);
  if (!seq) return;
  std::lock_guard lk(mu_);
  while (!sent_.empty() && sent_.front().seq <= *seq) {
    to_ack_.insert(to_ack_.end(), sent_.front().ids.begin(), sent_.front().ids.end());
    sent_.pop_front();
  }
}

void RedisSource::close() noexcept {
  {
    std::lock_guard lk(mu_);
    if (closed_) return;
    closed_ = true;
  }
  if (conn_) {
    Status st = flush_acks();
    if (st.ok()) st = settle();
    if (!st.ok())
      spdlog::warn(
          "pipeline {}: final XACK failed: {} (the entries stay pending and are read "
          "again by the next run)",
          ctx_.pipeline_id, st.error().message());
  }
  conn_.reset();
}

// Removes the consumer group that sluice named (sluice-<pipeline id>) from the named streams and
// the streams the patterns match; a group given in `group` may be shared and is kept.
Status RedisSource::cleanup(const ConnectorContext& ctx) {
  ctx_ = ctx;
  if (!o_.group.empty()) {
    spdlog::info("kept consumer group '{}': it was given in `group`", o_.group);
    return ok_status();
  }
  group_ = "sluice-" + ctx.pipeline_id;
  SLUICE_TRY(connect());
  std::vector<std::string> names;
  for (const std::string& s : o_.streams) {
    if (redis::is_stream_pattern(s)) {
      patterns_.push_back(s);
      continue;
    }
    names.push_back(s);
  }
  for (const std::string& pat : patterns_) {
    std::string cursor = "0";
    do {
      SLUICE_TRY_ASSIGN(Reply r, conn_->command({"SCAN", cursor, "MATCH", pat, "COUNT", "1000",
                                                 "TYPE", "stream"}));
      if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) break;
      cursor.assign(str(r->element[0]));
      for (size_t i = 0; i < r->element[1]->elements; ++i)
        names.emplace_back(str(r->element[1]->element[i]));
    } while (cursor != "0");
  }
  for (const std::string& n : names) {
    auto r = conn_->command({"XGROUP", "DESTROY", n, group_});
    if (!r.ok() && r.error().message().find("no such key") == std::string::npos &&
        r.error().message().find("requires the key to exist") == std::string::npos)
      return std::move(r).error();
    if (r.ok() && (*r)->type == REDIS_REPLY_INTEGER && (*r)->integer == 1)
      spdlog::info("deleted consumer group '{}' of stream '{}'", group_, n);
  }
  conn_.reset();
  return ok_status();
}

// ── keyspace mode ──
//
// A snapshot of the keys matching `keyspace.pattern` (SCAN … MATCH, then TYPE and HGETALL / GET of
// each round's keys, pipelined), between the markers snapshot_begin and snapshot_end of the table
// `keyspace.table` (keyed SQL destinations then delete the rows of keys the snapshot did not see),
// then the keyspace notifications of those keys (PSUBSCRIBE __keyspace@<db>__:<pattern>, on a
// second connection opened before the snapshot starts, so that no change after the SCAN began is
// missed). Each notification marks its key; the marked keys are read again (coalesced: a key
// changed many times between two reads is read once) and become an upsert of the key's current
// value, or a delete when the key is gone (del, expired, evicted, …). A change that can remove a
// hash field (anything but hset, hsetnx, hincrby, hincrbyfloat on a hash) is a delete followed by
// the upsert, so that a removed field does not keep its last value at the destination.
//
// Pub/sub is at-most-once: when the subscription is lost (reconnect, the server dropping a slow
// subscriber at client-output-buffer-limit pubsub, a restart of sluice) the notifications sent
// meanwhile are gone, so the source subscribes again and takes a new snapshot (with its markers).
class RedisKeyspaceSource final : public Source {
 public:
  explicit RedisKeyspaceSource(Options o) : o_(std::move(o)) {}
  ~RedisKeyspaceSource() override { close(); }

  Status open(const ConnectorContext& ctx, const std::optional<std::string>&) override {
    ctx_ = ctx;
    SLUICE_TRY(start());
    spdlog::info("pipeline {}: keyspace mode: keys matching '{}' on {} as table '{}'",
                 ctx_.pipeline_id, o_.keyspace_pattern, o_.parsed.redacted(), o_.keyspace_table);
    return ok_status();
  }
  Result<ReadStatus> read(Batch& batch, const ReadRequest& req, std::stop_token stop) override;
  void ack(std::string_view) override {}  // nothing to acknowledge: a restart takes a snapshot
  void close() noexcept override {
    sub_.reset();
    conn_.reset();
  }

 private:
  // Connects both connections, checks (or sets) notify-keyspace-events, subscribes, and starts a
  // snapshot.
  Status start();
  Status check_notifications();
  // Moves the notifications received (waiting at most `timeout` for the first) into marked_.
  Status drain(std::chrono::milliseconds timeout);
  // Reads `keys` and appends their records (op snapshot or create; a vanished key is a delete).
  Status read_keys(const std::vector<std::string>& keys, const std::vector<bool>& replace,
                   Operation op, Batch& batch);
  void marker(Batch& batch, bool begin);
  Status connect(std::optional<redis::RedisConnection>& c, std::chrono::milliseconds timeout);

  Options o_;
  ConnectorContext ctx_;
  std::optional<redis::RedisConnection> conn_, sub_;
  std::string channel_prefix_;  // "__keyspace@<db>__:"
  bool snapshotting_ = false;
  bool snapshot_begun_ = false;
  std::string cursor_ = "0";
  // Keys to read again, in the order first marked; whether to replace (delete first).
  std::vector<std::string> marked_order_;
  std::unordered_map<std::string, bool> marked_;
  uint64_t seq_ = 0;
  std::chrono::milliseconds backoff_{200};
  bool warned_type_ = false;
};

Status RedisKeyspaceSource::connect(std::optional<redis::RedisConnection>& c,
                                    std::chrono::milliseconds timeout) {
  redis::RedisConnection::Options co;
  co.connect_timeout = o_.connect_timeout;
  co.command_timeout = timeout;
  co.client_name = "sluice-" + ctx_.pipeline_id;
  SLUICE_TRY_ASSIGN(redis::RedisConnection x, redis::RedisConnection::connect(o_.parsed, co));
  c.emplace(std::move(x));
  return ok_status();
}

Status RedisKeyspaceSource::check_notifications() {
  auto r = conn_->command({"CONFIG", "GET", "notify-keyspace-events"});
  if (!r.ok())
    return Error(r.error().code(),
                 fmt::format("redis source: cannot read notify-keyspace-events ({}): keyspace mode "
                             "needs it to hold K and g$hxe (or A); allow CONFIG GET to the user, "
                             "or check it on the server",
                             r.error().message()));
  std::string flags;
  if ((*r)->type == REDIS_REPLY_ARRAY && (*r)->elements == 2) flags = str((*r)->element[1]);
  const bool all = flags.find('A') != std::string::npos;
  std::string missing;
  for (char c : std::string_view("Kg$hxe"))
    if (flags.find(c) == std::string::npos && (c == 'K' || !all)) missing += c;
  if (missing.empty()) return ok_status();
  if (!o_.keyspace_configure)
    return Error(Errc::config,
                 fmt::format("redis source: keyspace mode needs keyspace notifications, but the "
                             "server's notify-keyspace-events is '{}' (lacks {}): run CONFIG SET "
                             "notify-keyspace-events {}{} on it, or set keyspace.configure: true",
                             flags, missing, flags, missing));
  auto set = conn_->command({"CONFIG", "SET", "notify-keyspace-events", flags + missing});
  if (!set.ok())
    return Error(set.error().code(),
                 fmt::format("redis source: cannot set notify-keyspace-events ({}): run CONFIG SET "
                             "notify-keyspace-events {}{} as an administrator",
                             set.error().message(), flags, missing));
  spdlog::info("pipeline {}: set notify-keyspace-events to '{}{}' (keyspace.configure)",
               ctx_.pipeline_id, flags, missing);
  return ok_status();
}

Status RedisKeyspaceSource::start() {
  sub_.reset();
  conn_.reset();
  SLUICE_TRY(connect(conn_, std::chrono::milliseconds(30'000)));
  SLUICE_TRY(check_notifications());
  SLUICE_TRY(connect(sub_, std::chrono::milliseconds(0)));
  channel_prefix_ = fmt::format("__keyspace@{}__:", o_.parsed.db);
  SLUICE_TRY_ASSIGN(Reply r, sub_->command({"PSUBSCRIBE", channel_prefix_ + o_.keyspace_pattern}));
  snapshotting_ = true;
  snapshot_begun_ = false;
  cursor_ = "0";
  marked_.clear();
  marked_order_.clear();
  return ok_status();
}

Status RedisKeyspaceSource::drain(std::chrono::milliseconds timeout) {
  for (;;) {
    SLUICE_TRY_ASSIGN(std::optional<Reply> m, sub_->poll_reply(timeout));
    if (!m) return ok_status();
    timeout = std::chrono::milliseconds(0);
    const redisReply* x = m->get();
    // ["pmessage", pattern, "__keyspace@0__:<key>", "<event>"]
    if (x->type != REDIS_REPLY_ARRAY || x->elements != 4 || str(x->element[0]) != "pmessage")
      continue;
    std::string_view channel = str(x->element[2]);
    if (!channel.starts_with(channel_prefix_)) continue;
    std::string key(channel.substr(channel_prefix_.size()));
    const std::string_view event = str(x->element[3]);
    const bool additive =
        event == "hset" || event == "hsetnx" || event == "hincrby" || event == "hincrbyfloat";
    auto [it, fresh] = marked_.try_emplace(key, !additive);
    if (fresh) marked_order_.push_back(std::move(key));
    else if (!additive) it->second = true;
  }
}

void RedisKeyspaceSource::marker(Batch& batch, bool begin) {
  Record& r = batch.add();
  r.op = Operation::marker;
  r.metadata =
      batch.object(2)
          .add(meta::kTable, Value::string(batch.copy(o_.keyspace_table)))
          .add(meta::kMarker, Value::string(begin ? meta::kSnapshotBegin : meta::kSnapshotEnd))
          .build();
}

Status RedisKeyspaceSource::read_keys(const std::vector<std::string>& keys,
                                      const std::vector<bool>& replace, Operation op,
                                      Batch& batch) {
  if (keys.empty()) return ok_status();
  for (const std::string& k : keys) conn_->append({"TYPE", k});
  std::vector<std::string> types;
  for (size_t i = 0; i < keys.size(); ++i) {
    SLUICE_TRY_ASSIGN(Reply t, conn_->read_reply());
    types.emplace_back(str(t.get()));
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    if (types[i] == "hash") conn_->append({"HGETALL", keys[i]});
    else if (types[i] == "string") conn_->append({"GET", keys[i]});
  }
  const Value table = Value::string(batch.copy(o_.keyspace_table));
  for (size_t i = 0; i < keys.size(); ++i) {
    const bool known = types[i] == "hash" || types[i] == "string";
    Reply v;
    if (known) {
      SLUICE_TRY_ASSIGN(v, conn_->read_reply());
    }
    if (!known && types[i] != "none") {
      if (!warned_type_)
        spdlog::warn(
            "pipeline {}: key '{}' is a {}: keyspace mode reads hashes and strings only "
            "(such keys are skipped)",
            ctx_.pipeline_id, keys[i], types[i]);
      warned_type_ = true;
      continue;
    }
    // Gone (or replaced by another type, or emptied, between TYPE and the read): a delete; the
    // notification of what happened next marks the key again.
    const bool gone = !known || v->type == REDIS_REPLY_NIL || v->type == REDIS_REPLY_ERROR ||
                      (types[i] == "hash" && v->type == REDIS_REPLY_ARRAY && v->elements == 0);
    auto key_value = [&] {
      ObjectBuilder k = batch.object(1);
      k.add("key", text_or_bytes(batch, keys[i]));
      return k.build();
    };
    auto metadata = [&] {
      ObjectBuilder m = batch.object(2);
      m.add(meta::kTable, table);
      m.add("redis.type", Value::string(batch.copy(types[i])));
      return m.build();
    };
    if (gone || (op != Operation::snapshot && replace[i])) {
      if (op == Operation::snapshot && gone) continue;  // the snapshot just does not see it
      Record& d = batch.add();
      d.op = Operation::remove;
      d.key = key_value();
      d.metadata = metadata();
      if (gone) continue;
    }
    const size_t n = v->type == REDIS_REPLY_ARRAY ? v->elements / 2 : 1;
    ObjectBuilder after = batch.object(uint32_t(n + 1));
    after.add("key", text_or_bytes(batch, keys[i]));
    if (types[i] == "hash") {
      for (size_t f = 0; f + 1 < v->elements; f += 2) {
        const std::string_view name = str(v->element[f]);
        if (name == "key")
          return Error(Errc::data,
                       fmt::format("redis source: key '{}' is a hash with a field 'key', the "
                                   "column keyspace mode gives the Redis key: rename the field",
                                   keys[i]));
        after.add(batch.copy(name), text_or_bytes(batch, str(v->element[f + 1])));
      }
    } else {
      after.add("value", text_or_bytes(batch, str(v.get())));
    }
    Record& r = batch.add();
    r.op = op;
    r.key = key_value();
    r.after = after.build();
    r.metadata = metadata();
  }
  return ok_status();
}

Result<ReadStatus> RedisKeyspaceSource::read(Batch& batch, const ReadRequest& req,
                                             std::stop_token stop) {
  const auto started = Clock::now();
  Clock::time_point first{};
  bool idle = false;
  while (batch.size() < req.max_records && batch.bytes() < req.max_bytes &&
         !stop.stop_requested()) {
    Status st = ok_status();
    if (!conn_ || !sub_) {
      st = start();
      if (st.ok()) {
        spdlog::info(
            "pipeline {}: subscribed again to {}: taking a new snapshot (notifications "
            "sent while unsubscribed are lost)",
            ctx_.pipeline_id, o_.parsed.redacted());
        backoff_ = std::chrono::milliseconds(200);
      } else {
        if (!transient(st.error())) return st.error();
        spdlog::warn("pipeline {}: {} (retrying)", ctx_.pipeline_id, st.error().message());
        conn_.reset();
        sub_.reset();
        std::this_thread::sleep_for(backoff_);
        backoff_ = std::min(backoff_ * 2, std::chrono::milliseconds(5000));
        break;
      }
    }
    const size_t before = batch.size();
    const size_t room = std::max<size_t>(1, req.max_records - batch.size());
    if (snapshotting_) {
      if (!snapshot_begun_) {
        marker(batch, true);
        snapshot_begun_ = true;
      }
      auto scan = conn_->command({"SCAN", cursor_, "MATCH", o_.keyspace_pattern, "COUNT",
                                  std::to_string(std::min<size_t>(room, 1000))});
      if (scan.ok()) {
        const redisReply* r = scan->get();
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2)
          return Error(Errc::internal, "redis: unexpected SCAN reply " + redis::reply_text(r));
        cursor_.assign(str(r->element[0]));
        std::vector<std::string> keys;
        for (size_t i = 0; i < r->element[1]->elements; ++i)
          keys.emplace_back(str(r->element[1]->element[i]));
        st = read_keys(keys, std::vector<bool>(keys.size(), false), Operation::snapshot, batch);
        if (st.ok() && cursor_ == "0") {
          marker(batch, false);
          snapshotting_ = false;
          spdlog::info("pipeline {}: keyspace snapshot complete; following notifications",
                       ctx_.pipeline_id);
        }
        // Keep the subscription's socket drained, so that a long snapshot does not make the
        // server drop a slow subscriber.
        if (st.ok()) st = drain(std::chrono::milliseconds(0));
      } else {
        st = std::move(scan).error();
      }
    } else {
      if (marked_order_.empty()) {
        const auto deadline = batch.empty() ? started + req.poll : first + req.linger;
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) {
          idle = true;
          break;
        }
        st = drain(std::min(left, std::chrono::milliseconds(100)));
      }
      if (st.ok() && !marked_order_.empty()) {
        const size_t n = std::min(room, marked_order_.size());
        std::vector<std::string> keys(std::make_move_iterator(marked_order_.begin()),
                                      std::make_move_iterator(marked_order_.begin() + long(n)));
        marked_order_.erase(marked_order_.begin(), marked_order_.begin() + long(n));
        std::vector<bool> replace;
        for (const std::string& k : keys) {
          replace.push_back(marked_[k]);
          marked_.erase(k);
        }
        st = read_keys(keys, replace, Operation::create, batch);
      }
    }
    if (!st.ok()) {
      if (!transient(st.error())) return st.error();
      spdlog::warn(
          "pipeline {}: {} (reconnecting, then a new snapshot: notifications are not "
          "replayed)",
          ctx_.pipeline_id, st.error().message());
      conn_.reset();
      sub_.reset();
      break;
    }
    if (before == 0 && batch.size() > 0) first = Clock::now();
  }
  if (!batch.empty()) batch.set_position(std::to_string(++seq_));
  return idle ? ReadStatus::idle : ReadStatus::more;
}

}  // namespace

namespace redis {

std::optional<uint64_t> position_sequence(std::string_view position) {
  const size_t end = std::min(position.find(';'), position.size());
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(position.data(), position.data() + end, v);
  if (ec != std::errc() || p != position.data() + end || end == 0) return std::nullopt;
  return v;
}

bool is_stream_pattern(std::string_view entry) noexcept {
  return entry.find_first_of("*?[") != std::string_view::npos;
}

}  // namespace redis

std::span<const SettingSpec> redis_source_settings() noexcept { return kSettings; }

Result<std::unique_ptr<Source>> make_redis_source(const Settings& settings) {
  SLUICE_TRY_ASSIGN(Options o, bind_settings(kSettings, settings));
  SLUICE_TRY(finalize(o));
  if (o.mode == "keyspace")
    return std::unique_ptr<Source>(std::make_unique<RedisKeyspaceSource>(std::move(o)));
  return std::unique_ptr<Source>(std::make_unique<RedisSource>(std::move(o)));
}

}  // namespace sluice
