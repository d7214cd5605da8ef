// The `redis` destination.
//
//   batch ──▶ commands per record ──▶ one pipeline: MULTI, cmd…, [HSET positions pipeline pos],
//   EXEC
//                                                 └─ replies read once, after the whole batch was
//                                                 sent
//
// A row is written under `<prefix><table>:<key>` (`table` is a record template, default
// `{{schema}}.{{table}}`; the key is render_key()). Hash format: HSET of the non-null columns and
// HDEL of the null ones; an absent value (PostgreSQL's unchanged TOAST) touches no field. JSON
// format: SET of the whole row as JSON. A delete is DEL; a truncate is a SCAN MATCH of the
// table's keys with UNLINK in rounds of `truncate_batch` keys (no key index is kept, so a write
// costs nothing extra; a truncate walks the database once).
//
// Redis does not roll a transaction back: a command failing at EXEC time (WRONGTYPE: the key
// holds another type) leaves the others applied, the position included. The destination then
// writes the previous position back at once and fails the batch with a data error (dead-letter
// queue or stop), so the failed batch is replayed from its start; its writes are idempotent.
// A command refused when queued (OOM under maxmemory) aborts the whole EXEC: nothing applied.
//
// Stream mode (`mode: stream`): each change — truncates included, control records skipped — is
// one `XADD <prefix><table> [MAXLEN ~ n] * key <key JSON> value <record>` (the record as OpenCDC
// JSON or as a Debezium envelope, with the kafka destination's encoders), in the same one
// MULTI/EXEC per batch, the position too. XADD is not idempotent: only the position in the same
// EXEC (checkpoint_in_destination) keeps a replayed batch from adding its entries twice. The type
// of each stream key is checked once (TYPE) before its first XADD, so that a key of another type
// fails the batch before anything is sent rather than half-way through an EXEC.
#include "connectors/redis/redis_destination.h"

#include <fmt/format.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "connectors/common/credentials.h"
#include "connectors/common/debezium_json.h"
#include "connectors/record_key.h"
#include "connectors/record_template.h"
#include "connectors/redis/redis_common.h"
#include "sluice/json.h"
#include "sluice/temporal.h"

namespace sluice::redis {

namespace {

#ifndef SLUICE_VERSION_TEXT
#define SLUICE_VERSION_TEXT "sluice"
#endif

struct Options {
  std::string url;
  std::string user;
  std::string password;
  std::string password_file;
  std::string prefix;
  std::string table;
  std::string format;
  std::string mode;
  std::string stream_format;
  int64_t stream_maxlen = 0;
  bool checkpoint_in_destination = false;
  std::string checkpoint_key;
  int64_t truncate_batch = 0;
  std::chrono::milliseconds connect_timeout{};
  std::chrono::milliseconds command_timeout{};
  // derived by finalize()
  bool json = false;
  bool stream = false;
  bool debezium = false;
};

constexpr auto kSettings = settings_table<Options>(
    setting<&Options::url>("url",
                           "Redis server: redis://[user:password@]host:port[/db] (db: the database "
                           "number, default 0). TLS (rediss://) is not available: Debian's hiredis "
                           "0.14 has no TLS support.")
        .mandatory()
        .secret_value(),
    setting<&Options::user>("user", kUserDoc),
    setting<&Options::password>("password", kPasswordDoc).secret_value(),
    setting<&Options::password_file>("password_file", kPasswordFileDoc).file_path(),
    setting<&Options::prefix>("prefix",
                              "Text put before every key this destination writes (its rows and "
                              "its checkpoint hash), e.g. `cdc:`.")
        .with_default(""),
    setting<&Options::table>(
        "table",
        "Record template of the table part of a row's key `<prefix><table>:<key>` ({{schema}}, "
        "{{table}} or any metadata key). The key part is the key columns' values in key order "
        "joined by ':', a ':' or '\\' inside a value escaped with '\\'. docs/redis.md.")
        .with_default("{{schema}}.{{table}}"),
    setting<&Options::format>("format",
                              "How a row is stored. hash: a field per column (values rendered as "
                              "in docs/redis.md; a NULL column has no field); json: one string "
                              "holding the row as a JSON object.")
        .one_of("hash,json")
        .with_default("hash"),
    setting<&Options::mode>(
        "mode",
        "rows: each row under its key (format hash or json); stream: each change appended (XADD) "
        "as one entry to the stream `<prefix><table>`, fields `key` (the key as JSON) and `value` "
        "(the change in stream.format). Exactly once in stream mode only with "
        "checkpoint_in_destination: true (docs/redis.md).")
        .one_of("rows,stream")
        .with_default("rows"),
    setting<&Options::stream_format>("stream.format",
                                     "mode stream: the entry's `value`, an OpenCDC JSON record or "
                                     "a Debezium change event (as the kafka destination writes "
                                     "them).")
        .one_of("opencdc,debezium")
        .with_default("opencdc"),
    setting<&Options::stream_maxlen>(
        "stream.maxlen",
        "mode stream: trim each stream to about this many entries (XADD MAXLEN ~ n: Redis trims "
        "whole nodes, so a stream may hold somewhat more). 0: never trim.",
        SettingType::integer)
        .with_default("0")
        .at_least(0),
    setting<&Options::checkpoint_in_destination>(
        "checkpoint_in_destination",
        "Store the source position in Redis, in the same MULTI/EXEC as each batch (hash "
        "`<prefix><checkpoint_key>`, a field per pipeline); on restart the pipeline resumes exactly "
        "after the last batch applied.")
        .with_default("false"),
    setting<&Options::checkpoint_key>(
        "checkpoint_key",
        "Hash holding the positions (after `prefix`), with checkpoint_in_destination.")
        .with_default("sluice:checkpoints"),
    setting<&Options::truncate_batch>(
        "truncate_batch",
        "Keys a source TRUNCATE finds (SCAN COUNT) and removes (UNLINK) per round.",
        SettingType::integer)
        .with_default("1000")
        .at_least(1),
    setting<&Options::connect_timeout>("connect_timeout",
                                       "Timeout of connecting and authenticating.")
        .with_default("10s")
        .at_least(1),
    setting<&Options::command_timeout>(
        "command_timeout",
        "Read/write timeout of a batch's round trip; then the batch is retried on a new connection.")
        .with_default("60s")
        .at_least(1));

Status finalize(Options& o) {
  if (o.url.starts_with("rediss://"))
    return Error(Errc::unsupported,
                 "rediss:// (TLS) is not supported: Debian's hiredis 0.14 has no TLS; use "
                 "redis:// on a trusted network or a TLS tunnel (stunnel)");
  o.json = o.format == "json";
  o.stream = o.mode == "stream";
  o.debezium = o.stream_format == "debezium";
  return ok_status();
}

// A Redis error reply as an Error: OOM and a loading or read-only server are not the record's
// fault (OOM stops the pipeline, naming the fix; LOADING/READONLY/MASTERDOWN are retried).
Error reply_error(const RedisUrl& url, std::string_view what, std::string_view text) {
  if (text.starts_with("LOADING") || text.starts_with("READONLY") ||
      text.starts_with("MASTERDOWN") || text.starts_with("TRYAGAIN") || text.starts_with("BUSY"))
    return Error(Errc::connection, fmt::format("redis {}: {}: {}", url.redacted(), what, text),
                 /*retriable=*/true);
  if (text.starts_with("OOM"))
    return Error(Errc::unsupported,
                 fmt::format("redis {}: {}: {} (raise maxmemory, or set a maxmemory-policy that "
                             "evicts, on the server)",
                             url.redacted(), what, text));
  if (text.starts_with("NOPERM"))
    return Error(Errc::permission,
                 fmt::format("redis {}: {}: {} (grant the ACL user the commands and keys)",
                             url.redacted(), what, text));
  return Error(Errc::data, fmt::format("redis {}: {}: {}", url.redacted(), what, text));
}

void append_escaped_key_part(std::string_view s, std::string& out) {
  for (char c : s) {
    if (c == ':' || c == '\\') out += '\\';
    out += c;
  }
}

// Escapes the glob characters of SCAN MATCH.
void append_glob_literal(std::string_view s, std::string& out) {
  for (char c : s) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
}

class RedisDestination final : public Destination {
 public:
  RedisDestination(Options o, RedisUrl url, RecordTemplate table)
      : o_(std::move(o)), url_(std::move(url)), table_(std::move(table)) {
    positions_key_ = o_.prefix + o_.checkpoint_key;
    maxlen_text_ = std::to_string(o_.stream_maxlen);
  }

  Status open(const ConnectorContext& ctx) override {
    pipeline_id_ = ctx.pipeline_id;
    return ensure_connected();
  }

  // `sluice doctor`: the server accepts the connection (and its AUTH) and answers PING; nothing
  // is written.
  Result<std::vector<DoctorCheck>> doctor(const ConnectorContext& ctx,
                                          const std::vector<SourceTable>&) override {
    using O = DoctorCheck::Outcome;
    pipeline_id_ = ctx.pipeline_id;
    const std::string check = "the server accepts the connection";
    Status st = ensure_connected();
    if (st.ok()) {
      auto r = run({"PING"});
      if (!r) st = std::move(r).error();
    }
    conn_.reset();
    if (!st.ok())
      return std::vector<DoctorCheck>{
          {O::fail, check, st.error().message(),
           "check `url`, the credentials and that the server is reachable"}};
    return std::vector<DoctorCheck>{{O::pass, check, "PING answered", {}}};
  }

  bool stores_positions() const noexcept override { return o_.checkpoint_in_destination; }

  Result<std::optional<std::string>> stored_position(std::string_view pipeline_id) override {
    if (!o_.checkpoint_in_destination) return std::optional<std::string>();
    SLUICE_TRY(ensure_connected());
    auto r = run({"HGET", positions_key_, pipeline_id});
    if (!r) return std::move(r).error();
    if ((*r)->type != REDIS_REPLY_STRING) return std::optional<std::string>();
    return std::optional<std::string>(std::string((*r)->str, (*r)->len));
  }

  Status erase_stored_position(std::string_view pipeline_id) override {
    if (!o_.checkpoint_in_destination) return ok_status();
    SLUICE_TRY(ensure_connected());
    auto r = run({"HDEL", positions_key_, pipeline_id});
    if (!r) return std::move(r).error();
    return ok_status();
  }

  void write(Batch& batch, WriteDone done) override {
    Status s = write_batch(batch);
    if (!s && s.error().retriable()) conn_.reset();  // reconnect on the retry
    done(std::move(s));
  }

  void close() noexcept override {
    conn_.reset();
    known_streams_.clear();
  }

 private:
  Status ensure_connected() {
    if (conn_ && conn_->healthy()) return ok_status();
    conn_.reset();
    known_streams_.clear();
    auto c = RedisConnection::connect(url_, {.connect_timeout = o_.connect_timeout,
                                             .command_timeout = o_.command_timeout,
                                             .client_name = "sluice-" + pipeline_id_});
    if (!c) return std::move(c).error();
    conn_.emplace(std::move(c).value());
    return ok_status();
  }

  Result<Reply> run(std::initializer_list<std::string_view> args) {
    conn_->append(args);
    SLUICE_TRY_ASSIGN(Reply r, conn_->read_reply());
    if (r->type == REDIS_REPLY_ERROR)
      return reply_error(url_, std::string(*args.begin()), std::string_view(r->str, r->len));
    return r;
  }

  Status write_batch(const Batch& batch) {
    const bool with_position = o_.checkpoint_in_destination && batch.has_position();
    if (batch.empty() && !with_position) return ok_status();
    SLUICE_TRY(ensure_connected());
    // Segments between truncates: each is one MULTI/EXEC; the last carries the position.
    const auto& records = batch.records();
    size_t begin = 0;
    if (o_.stream) SLUICE_TRY(check_stream_types(batch));
    for (size_t i = 0; i < records.size() && !o_.stream; ++i) {
      if (!is_truncate(records[i])) continue;
      SLUICE_TRY(exec_segment(batch, begin, i, false));
      SLUICE_TRY(truncate(records[i]));
      begin = i + 1;
    }
    return exec_segment(batch, begin, records.size(), with_position);
  }

  // Builds the commands of one record into cmds_ (a command is a run of arguments ended by an
  // empty marker in cmd_ends_).
  Status plan(const Record& r, size_t index) {
    if (is_control(r.op)) return ok_status();
    if (o_.stream) return plan_entry(r, index);
    key_.clear();
    table_.render(r, key_, kDefaultTableName);
    const std::string table_part = o_.prefix + key_;
    auto key_for = [&](const Value& key, std::string& out) -> bool {
      out = table_part;
      out += ':';
      return render_key(key, out);
    };
    if (!key_for(r.key, key_))
      return Error(Errc::data,
                   fmt::format("redis destination: a record of {} has no key (or a NULL key "
                               "column): a Redis key needs one; give the source table a primary "
                               "key, or set `key` with a processor",
                               table_part));
    if (r.op == Operation::remove) {
      command(index, {"DEL", key_});
      return ok_status();
    }
    if (!r.after.is_object())
      return Error(Errc::data, fmt::format("redis destination: record for {} has no row", key_));
    // A key change (UPDATE of a key column): the row moves, the old key goes.
    if (r.op == Operation::update && r.before.is_object() && r.key.is_object()) {
      old_key_ = table_part;
      old_key_ += ':';
      bool complete = true;
      for (size_t i = 0; i < r.key.fields().size() && complete; ++i) {
        const Value* v = r.before.find(r.key.fields()[i].name);
        if (!v || v->is_null() || v->is_absent()) {
          complete = false;
          break;
        }
        if (i > 0) old_key_ += ':';
        value_.clear();
        render_field_value(*v, value_);
        append_escaped_key_part(value_, old_key_);
      }
      if (complete && old_key_ != key_) command(index, {"DEL", old_key_});
    }
    if (o_.json) {
      for (const Field& f : r.after.fields())
        if (f.value.is_absent())
          return Error(Errc::data,
                       fmt::format("redis destination: {}: column \"{}\" is unchanged and not "
                                   "sent (TOAST): format json stores whole rows; use format: "
                                   "hash, or REPLICA IDENTITY FULL on the source table",
                                   key_, f.name));
      value_.clear();
      encode_value_json(r.after, value_);
      command(index, {"SET", key_, value_});
      return ok_status();
    }
    // hash: HSET the values, HDEL the nulls.
    args_.assign({"HSET", key_});
    nulls_.assign({"HDEL", key_});
    for (const Field& f : r.after.fields()) {
      if (f.value.is_absent()) continue;
      if (f.value.is_null()) {
        nulls_.emplace_back(f.name);
        continue;
      }
      args_.emplace_back(f.name);
      std::string& v = args_.emplace_back();
      render_field_value(f.value, v);
    }
    if (args_.size() > 2) command_vec(index, args_);
    if (nulls_.size() > 2) command_vec(index, nulls_);
    return ok_status();
  }

  // The stream of a record: <prefix><table>.
  void stream_name(const Record& r, std::string& out) {
    table_.render(r, out, kDefaultTableName);  // replaces `out`
    out.insert(0, o_.prefix);
  }

  // mode stream: TYPE of every stream key not seen yet on this connection; one of another type is
  // a data error before anything is sent.
  Status check_stream_types(const Batch& batch) {
    std::vector<std::string> fresh;
    for (const Record& r : batch.records()) {
      if (is_control(r.op)) continue;
      stream_name(r, key_);
      if (known_streams_.count(key_)) continue;
      bool queued = false;
      for (const std::string& f : fresh) queued = queued || f == key_;
      if (!queued) fresh.push_back(key_);
    }
    for (const std::string& name : fresh) conn_->append({"TYPE", name});
    Status result = ok_status();
    for (const std::string& name : fresh) {
      SLUICE_TRY_ASSIGN(Reply t, conn_->read_reply());
      const std::string type = reply_text(t.get());
      if (type == "stream" || type == "none") known_streams_.insert(name);
      else if (result)
        result = Error(Errc::data, fmt::format("redis {}: key '{}' holds a {}, not a stream: "
                                               "remove it, or change `prefix`/`table`",
                                               url_.redacted(), name, type));
    }
    return result;
  }

  Status plan_entry(const Record& r, size_t index) {
    stream_name(r, key_);
    key_json_.clear();
    const bool keyed = kafka::encode_key(r, o_.debezium, key_json_);
    value_.clear();
    if (o_.debezium) {
      const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
      kafka::encode_debezium_envelope(
          r, kafka::DebeziumSource{pipeline_id_, SLUICE_VERSION_TEXT, now_ms}, value_);
    } else {
      encode_record_json(r, value_);
    }
    views_.assign({"XADD", key_});
    if (o_.stream_maxlen > 0) {
      views_.insert(views_.end(), {"MAXLEN", "~", maxlen_text_});
    }
    views_.push_back("*");
    if (keyed) views_.insert(views_.end(), {"key", key_json_});
    views_.insert(views_.end(), {"value", value_});
    conn_->append(std::span<const std::string_view>(views_));
    cmd_records_.push_back(index);
    return ok_status();
  }

  void command(size_t index, std::initializer_list<std::string_view> args) {
    conn_->append(args);
    cmd_records_.push_back(index);
  }
  void command_vec(size_t index, const std::vector<std::string>& args) {
    views_.assign(args.begin(), args.end());
    conn_->append(std::span<const std::string_view>(views_));
    cmd_records_.push_back(index);
  }

  Status exec_segment(const Batch& batch, size_t begin, size_t end, bool with_position) {
    if (begin == end && !with_position) return ok_status();
    cmd_records_.clear();
    conn_->append({"MULTI"});
    Status planned = ok_status();
    for (size_t i = begin; i < end && planned; ++i) planned = plan(batch.records()[i], i);
    const size_t kPosition = SIZE_MAX;
    if (planned && with_position) {
      conn_->append({"HSET", positions_key_, pipeline_id_, batch.position()});
      cmd_records_.push_back(kPosition);
    }
    // A record that cannot be planned: the queued commands are discarded.
    conn_->append({planned ? "EXEC" : "DISCARD"});
    // Replies: MULTI's, one per queued command, EXEC's (or DISCARD's).
    SLUICE_TRY_ASSIGN(Reply multi, conn_->read_reply());
    std::optional<Error> queue_error;
    for (size_t c = 0; c < cmd_records_.size(); ++c) {
      SLUICE_TRY_ASSIGN(Reply q, conn_->read_reply());
      if (q->type == REDIS_REPLY_ERROR && !queue_error)
        queue_error = reply_error(url_, "writing a batch", std::string_view(q->str, q->len));
    }
    SLUICE_TRY_ASSIGN(Reply exec, conn_->read_reply());
    if (!planned) return planned;
    if (multi->type == REDIS_REPLY_ERROR)
      return reply_error(url_, "MULTI", std::string_view(multi->str, multi->len));
    if (queue_error) return *queue_error;  // EXECABORT: nothing was applied
    if (exec->type == REDIS_REPLY_ERROR)
      return reply_error(url_, "EXEC", std::string_view(exec->str, exec->len));
    if (exec->type != REDIS_REPLY_ARRAY)
      return Error(Errc::connection, "redis destination: EXEC returned no results", true);
    for (size_t c = 0; c < exec->elements && c < cmd_records_.size(); ++c) {
      const redisReply* e = exec->element[c];
      if (e->type != REDIS_REPLY_ERROR) continue;
      // Applied but the failing command: put the previous position back so that a stop replays
      // this batch from its start.
      if (with_position) SLUICE_TRY(restore_position());
      const size_t idx = cmd_records_[c];
      std::string_view text(e->str, e->len);
      std::string what = idx == kPosition ? std::string("storing the position")
                                          : fmt::format("record {} of the batch", idx + 1);
      if (text.starts_with("WRONGTYPE"))
        return Error(Errc::data,
                     fmt::format("redis {}: {}: {} (a key of this table holds another type: "
                                 "remove it, or change `prefix`/`table`)",
                                 url_.redacted(), what, text));
      return reply_error(url_, what, text);
    }
    if (with_position) last_position_ = batch.position();
    return ok_status();
  }

  Status restore_position() {
    if (last_position_) {
      auto r = run({"HSET", positions_key_, pipeline_id_, *last_position_});
      if (!r) return std::move(r).error();
    } else {
      auto stored = run({"HDEL", positions_key_, pipeline_id_});
      if (!stored) return std::move(stored).error();
    }
    return ok_status();
  }

  Status truncate(const Record& r) {
    std::string pattern;
    key_.clear();
    table_.render(r, key_, kDefaultTableName);
    append_glob_literal(o_.prefix + key_ + ":", pattern);
    pattern += '*';
    const std::string count = std::to_string(o_.truncate_batch);
    std::string cursor = "0";
    do {
      SLUICE_TRY_ASSIGN(Reply scan, run({"SCAN", cursor, "MATCH", pattern, "COUNT", count}));
      if (scan->type != REDIS_REPLY_ARRAY || scan->elements != 2)
        return Error(Errc::data, "redis destination: unexpected SCAN reply");
      cursor.assign(scan->element[0]->str, scan->element[0]->len);
      const redisReply* keys = scan->element[1];
      if (keys->elements > 0) {
        views_.assign({"UNLINK"});
        for (size_t k = 0; k < keys->elements; ++k)
          views_.emplace_back(keys->element[k]->str, keys->element[k]->len);
        conn_->append(std::span<const std::string_view>(views_));
        SLUICE_TRY_ASSIGN(Reply del, conn_->read_reply());
        if (del->type == REDIS_REPLY_ERROR)
          return reply_error(url_, "UNLINK", std::string_view(del->str, del->len));
      }
    } while (cursor != "0");
    return ok_status();
  }

  Options o_;
  RedisUrl url_;
  RecordTemplate table_;
  std::string positions_key_;
  std::string pipeline_id_;
  std::optional<RedisConnection> conn_;
  std::optional<std::string> last_position_;
  // Reused per record.
  std::string key_;
  std::string old_key_;
  std::string key_json_;
  std::string maxlen_text_;
  std::unordered_set<std::string> known_streams_;
  std::string value_;
  std::vector<std::string> args_;
  std::vector<std::string> nulls_;
  std::vector<std::string_view> views_;
  std::vector<size_t> cmd_records_;
};

}  // namespace

void render_field_value(const Value& v, std::string& out) {
  switch (v.kind()) {
    case ValueKind::absent:
    case ValueKind::null: return;
    case ValueKind::boolean: out += v.as_bool() ? "true" : "false"; return;
    case ValueKind::int64: fmt::format_to(std::back_inserter(out), "{}", v.as_int64()); return;
    case ValueKind::uint64: fmt::format_to(std::back_inserter(out), "{}", v.as_uint64()); return;
    case ValueKind::string:
    case ValueKind::decimal:
    case ValueKind::bytes:
    case ValueKind::json: out += v.as_text(); return;
    case ValueKind::date: out += format_date(v.as_date()); return;
    case ValueKind::time: out += format_time(v.as_micros()); return;
    case ValueKind::timetz: out += format_timetz(v.as_micros(), v.tz_offset_seconds()); return;
    case ValueKind::timestamp: out += format_timestamp(v.as_micros()); return;
    case ValueKind::timestamptz: out += format_timestamptz(v.as_micros()); return;
    case ValueKind::interval: out += format_interval(v.as_interval()); return;
    case ValueKind::float64:
    case ValueKind::uuid:
    case ValueKind::array:
    case ValueKind::object: {
      std::string json;
      encode_value_json(v, json);
      // A double or uuid JSON cannot write bare ("NaN", the uuid) is quoted without escapes.
      if ((v.kind() == ValueKind::float64 || v.kind() == ValueKind::uuid) && json.size() >= 2 &&
          json.front() == '"')
        out.append(json, 1, json.size() - 2);
      else out += json;
      return;
    }
  }
}

bool render_key(const Value& key, std::string& out) {
  Field slot;
  Record r;
  r.key = key;
  std::span<const Field> cols = record_key_fields(r, slot);
  if (cols.empty()) return false;
  std::string v;
  for (size_t i = 0; i < cols.size(); ++i) {
    if (cols[i].value.is_null() || cols[i].value.is_absent()) return false;
    if (i > 0) out += ':';
    v.clear();
    render_field_value(cols[i].value, v);
    append_escaped_key_part(v, out);
  }
  return true;
}

std::span<const SettingSpec> redis_destination_settings() noexcept { return kSettings; }

Result<std::unique_ptr<Destination>> make_redis_destination(const Settings& settings) {
  SLUICE_TRY_ASSIGN(Options o, bind_settings(kSettings, settings, "redis destination"));
  SLUICE_TRY(finalize(o));
  Credentials creds{o.user, o.password, o.password_file};
  SLUICE_TRY(resolve_credentials(creds));
  SLUICE_TRY_ASSIGN(RedisUrl url, parse_redis_url(o.url, creds));
  SLUICE_TRY_ASSIGN(RecordTemplate table, RecordTemplate::parse(o.table, "table"));
  return std::unique_ptr<Destination>(
      std::make_unique<RedisDestination>(std::move(o), std::move(url), std::move(table)));
}

}  // namespace sluice::redis
