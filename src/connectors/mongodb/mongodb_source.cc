// The mongodb source: snapshot, then change stream (mongodb_source.h).
#include "connectors/mongodb/mongodb_source.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <thread>

#include "connectors/mongodb/mongodb_bson.h"
#include "connectors/mongodb/mongodb_change_event.h"
#include "connectors/mongodb/mongodb_client.h"
#include "sluice/record.h"
#include "support/backoff.h"

namespace sluice {

namespace {

using mongodb::BsonPtr;
using mongodb::make_bson;

constexpr std::string_view kWhat = "mongodb source";

struct StreamFree {
  void operator()(mongoc_change_stream_t* s) const noexcept { mongoc_change_stream_destroy(s); }
};
using StreamPtr = std::unique_ptr<mongoc_change_stream_t, StreamFree>;

// startAtOperationTime: the cluster time taken before the snapshot reads anything.
struct StartTime {
  uint32_t t = 0, i = 0;
  bool set() const { return t != 0 || i != 0; }
};

// The one-line error for a server that refuses to open a change stream (FerretDB, a standalone
// mongod, missing privileges).
Error refused_stream(const bson_error_t& err) {
  if (err.code == 13)
    return Error(Errc::auth,
                 fmt::format("{}: the server refused a change stream: {}; grant the user the "
                             "changeStream and find actions on the collections, or set "
                             "`stream: false` to read a snapshot only",
                             kWhat, err.message));
  return Error(Errc::config,
               fmt::format("{}: the server refused a change stream ({}, code {}): it needs a "
                           "replica set or sharded cluster (FerretDB and a standalone mongod have "
                           "none); set `stream: false` to read a snapshot only",
                           kWhat, err.message, err.code));
}

struct Namespace {
  std::string db;
  std::string coll;
};

// FNV-1a of the ordered collection list: a position taken over another list is not resumed.
std::string fingerprint(const std::vector<Namespace>& list) {
  uint64_t h = 1469598103934665603ull;
  for (const Namespace& n : list) {
    for (char c : n.db + "." + n.coll + "\n") {
      h ^= static_cast<unsigned char>(c);
      h *= 1099511628211ull;
    }
  }
  return fmt::format("{:016x}", h);
}

class MongodbSource final : public Source {
 public:
  explicit MongodbSource(MongodbSourceOptions o) : o_(std::move(o)) {}
  ~MongodbSource() override { close(); }

  Status open(const ConnectorContext& ctx, const std::optional<std::string>& checkpoint) override {
    stats_ = ctx.stats;
    SLUICE_TRY_ASSIGN(conn_, mongodb::connect(o_.url, kWhat));
    SLUICE_TRY(resolve_collections());
    fp_ = fingerprint(list_);
    if (checkpoint && !checkpoint->empty()) SLUICE_TRY(resume_from(*checkpoint));
    if (o_.stream) {
      if (streaming_) {
        // Fail now, not on the first read, when the resume token is gone or streams are refused.
        SLUICE_TRY(open_stream(/*at_open=*/true));
      } else {
        if (!at_.set() && (index_ > 0 || last_id_)) {
          // A snapshot begun with `stream: false` has no start time: what changed in the
          // collections already read would be lost, so the snapshot starts over.
          spdlog::warn(
              "{}: `stream` was turned on during a snapshot taken without it; the "
              "snapshot starts again from the first collection",
              kWhat);
          index_ = 0;
          last_id_.reset();
        }
        SLUICE_TRY(probe_stream());
        if (!at_.set()) SLUICE_TRY(take_start_time());
      }
    }
    if (!streaming_) estimate_total();
    return ok_status();
  }

  std::vector<SourceTable> captured_tables() const override {
    std::vector<SourceTable> out;
    for (const Namespace& n : list_) out.push_back(SourceTable{n.db, n.coll});
    return out;
  }

  Result<ReadStatus> read(Batch& batch, const ReadRequest& req, std::stop_token stop) override {
    if (streaming_) {
      if (!o_.stream) {
        batch.set_position(encode_position());
        return ReadStatus::end;
      }
      return read_stream(batch, req, stop);
    }
    while (index_ < list_.size()) {
      if (stop.stop_requested()) break;
      if (!cursor_) open_cursor();
      const bson_t* doc = nullptr;
      while (mongoc_cursor_next(cursor_.get(), &doc)) {
        cursor_answered_ = true;
        SLUICE_TRY(add_record(batch, doc));
        if (batch.size() >= req.max_records || batch.bytes() >= req.max_bytes) {
          batch.set_position(encode_position());
          return ReadStatus::more;
        }
      }
      bson_error_t err;
      if (mongoc_cursor_error(cursor_.get(), &err)) {
        cursor_.reset();
        Error e = mongodb::to_error(
            err, fmt::format("{}: reading \"{}.{}\"", kWhat, list_[index_].db, list_[index_].coll));
        if (!e.retriable()) return e;
        SLUICE_TRY(count_silent_timeout());
        // The server went away: reconnect with backoff and go on after the last _id read (the
        // records already in `batch` stay there).
        spdlog::warn("{}; reconnecting", e.message());
        SLUICE_TRY(reconnect(stop));
        continue;
      }
      cursor_.reset();
      ++index_;
      last_id_.reset();
      backoff_.reset();
      silent_timeouts_ = 0;
    }
    if (index_ >= list_.size() && o_.stream) {
      // The snapshot is read: the stream starts at the time taken before it (the position says
      // so from this batch on; events of documents the snapshot already holds come again and
      // are idempotent at keyed destinations).
      spdlog::info("{}: snapshot complete; change stream from cluster time {}.{}", kWhat, at_.t,
                   at_.i);
      streaming_ = true;
      collection_.reset();
      batch.set_position(encode_position());
      return ReadStatus::more;
    }
    batch.set_position(encode_position());
    return index_ >= list_.size() ? ReadStatus::end : ReadStatus::idle;
  }

  // Resume tokens need no acknowledgement at the server (a change stream holds nothing there):
  // the position the runtime stores once the destination is durable is what a restart resumes
  // after.
  void ack(std::string_view) override {}

  void close() noexcept override {
    if (estimator_.joinable()) {
      estimator_.request_stop();
      estimator_.join();
    }
    stream_.reset();
    cursor_.reset();
    collection_.reset();
    conn_.client.reset();
  }

 private:
  Status resolve_collections() {
    std::vector<std::string> wanted = o_.collections;
    if (wanted.empty()) wanted.push_back(conn_.database + ".*");
    for (const std::string& w : wanted) {
      auto [db, coll] = mongodb::split_namespace(w, conn_.database);
      if (coll != "*") {
        list_.push_back(Namespace{db, coll});
        continue;
      }
      mongoc_database_t* d = mongoc_client_get_database(conn_.client.get(), db.c_str());
      bson_error_t err;
      char** names = mongoc_database_get_collection_names_with_opts(d, nullptr, &err);
      mongoc_database_destroy(d);
      if (names == nullptr)
        return mongodb::to_error(err,
                                 fmt::format("{}: listing the collections of \"{}\"", kWhat, db));
      for (char** n = names; *n; ++n)
        if (std::string_view(*n).substr(0, 7) != "system." &&
            std::string_view(*n) != "sluice_checkpoints")
          list_.push_back(Namespace{db, *n});
      bson_strfreev(names);
    }
    std::sort(list_.begin(), list_.end(), [](const Namespace& a, const Namespace& b) {
      return std::tie(a.db, a.coll) < std::tie(b.db, b.coll);
    });
    list_.erase(std::unique(list_.begin(), list_.end(),
                            [](const Namespace& a, const Namespace& b) {
                              return a.db == b.db && a.coll == b.coll;
                            }),
                list_.end());
    for (const Namespace& n : list_) {
      mongoc_database_t* d = mongoc_client_get_database(conn_.client.get(), n.db.c_str());
      bool exists = false;
      bson_error_t err;
      exists = mongoc_database_has_collection(d, n.coll.c_str(), &err);
      mongoc_database_destroy(d);
      if (!exists && err.code != 0)
        return mongodb::to_error(err, fmt::format("{}: looking up \"{}.{}\"", kWhat, n.db, n.coll));
      if (!exists)
        return Error(Errc::not_found,
                     fmt::format("{}: collection \"{}.{}\" does not exist; fix `collections`",
                                 kWhat, n.db, n.coll));
    }
    return ok_status();
  }

  // The snapshot's size for progress and ETA, on a connection and thread of its own, so the
  // snapshot never waits for it: collStats' count, else estimatedDocumentCount (which a server
  // without collection metadata answers by counting every document).
  void estimate_total() {
    if (!stats_) return;
    if (stats_->snapshot_rows_done.load() < 0) stats_->snapshot_rows_done.store(0);
    estimator_ = std::jthread([this, url = o_.url, list = list_](std::stop_token stop) {
      auto c = mongodb::connect(url, kWhat);
      if (!c) return;
      int64_t total = 0;
      for (const Namespace& n : list) {
        if (stop.stop_requested()) return;
        mongodb::CollectionPtr coll(
            mongoc_client_get_collection(c->client.get(), n.db.c_str(), n.coll.c_str()));
        // collStats' count first: FerretDB answers it from its storage's metadata (0.05 s for
        // 50,000 documents) but counts every document for estimatedDocumentCount (2 s).
        int64_t count = -1;
        bson_error_t err;
        BsonPtr cmd(BCON_NEW("collStats", BCON_UTF8(n.coll.c_str())));
        bson_t reply;
        if (mongoc_collection_command_simple(coll.get(), cmd.get(), nullptr, &reply, &err)) {
          bson_iter_t it;
          if (bson_iter_init_find(&it, &reply, "count") && BSON_ITER_HOLDS_NUMBER(&it))
            count = bson_iter_as_int64(&it);
        }
        bson_destroy(&reply);
        if (count < 0)
          count = mongoc_collection_estimated_document_count(coll.get(), nullptr, nullptr, nullptr,
                                                             &err);
        if (count > 0) total += count;
      }
      stats_->snapshot_rows_total.store(total);
    });
  }

  Status resume_from(const std::string& checkpoint) {
    bson_error_t err;
    BsonPtr pos(bson_new_from_json(reinterpret_cast<const uint8_t*>(checkpoint.data()),
                                   static_cast<ssize_t>(checkpoint.size()), &err));
    if (!pos)
      return Error(Errc::data, fmt::format("{}: the checkpoint is not a mongodb source position "
                                           "({}); run `sluice cleanup` to start afresh",
                                           kWhat, err.message));
    bson_iter_t it;
    if (bson_iter_init_find(&it, pos.get(), "fp") && BSON_ITER_HOLDS_UTF8(&it) &&
        bson_iter_utf8(&it, nullptr) != fp_) {
      spdlog::warn(
          "{}: `collections` changed since the checkpoint; the snapshot starts again "
          "from the first collection",
          kWhat);
      return ok_status();
    }
    if (bson_iter_init_find(&it, pos.get(), "at") && BSON_ITER_HOLDS_TIMESTAMP(&it))
      bson_iter_timestamp(&it, &at_.t, &at_.i);
    if (bson_iter_init_find(&it, pos.get(), "stream")) {
      streaming_ = true;
      if (bson_iter_init_find(&it, pos.get(), "token") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        uint32_t len = 0;
        const uint8_t* data = nullptr;
        bson_iter_document(&it, &len, &data);
        token_.reset(bson_new_from_data(data, len));
      }
      if (!token_ && !at_.set())
        return Error(Errc::data, fmt::format("{}: the checkpoint is a stream position with neither "
                                             "a resume token nor a start time; run `sluice "
                                             "cleanup` to start afresh",
                                             kWhat));
      index_ = list_.size();
      return ok_status();
    }
    if (bson_iter_init_find(&it, pos.get(), "i"))
      index_ = static_cast<size_t>(bson_iter_as_int64(&it));
    if (bson_iter_init_find(&it, pos.get(), "after")) {
      last_id_ = make_bson();
      bson_append_iter(last_id_.get(), "_id", 3, &it);
    }
    return ok_status();
  }

  // The position: while streaming, after `token` (default: the last resume token).
  std::string encode_position(const bson_t* token = nullptr) const {
    BsonPtr pos = make_bson();
    BSON_APPEND_INT32(pos.get(), "v", 1);
    BSON_APPEND_UTF8(pos.get(), "fp", fp_.c_str());
    if (streaming_) {
      BSON_APPEND_INT32(pos.get(), "stream", 1);
      if (!token && token_) token = token_.get();
      if (token) BSON_APPEND_DOCUMENT(pos.get(), "token", token);
      else BSON_APPEND_TIMESTAMP(pos.get(), "at", at_.t, at_.i);
    } else {
      BSON_APPEND_INT64(pos.get(), "i", static_cast<int64_t>(index_));
      if (last_id_) {
        bson_iter_t it;
        if (bson_iter_init_find(&it, last_id_.get(), "_id"))
          bson_append_iter(pos.get(), "after", 5, &it);
      }
      if (at_.set()) BSON_APPEND_TIMESTAMP(pos.get(), "at", at_.t, at_.i);
    }
    size_t n = 0;
    char* json = bson_as_canonical_extended_json(pos.get(), &n);
    std::string out(json, n);
    bson_free(json);
    return out;
  }

  void open_cursor() {
    const Namespace& n = list_[index_];
    collection_.reset(
        mongoc_client_get_collection(conn_.client.get(), n.db.c_str(), n.coll.c_str()));
    BsonPtr filter = make_bson();
    if (last_id_) {
      bson_iter_t it;
      bson_iter_init_find(&it, last_id_.get(), "_id");
      bson_t id, gt;
      bson_append_document_begin(filter.get(), "_id", 3, &id);
      (void)gt;
      bson_append_iter(&id, "$gt", 3, &it);
      bson_append_document_end(filter.get(), &id);
    }
    BsonPtr opts(
        BCON_NEW("sort", "{", "_id", BCON_INT32(1), "}", "batchSize", BCON_INT64(o_.batch_size)));
    cursor_.reset(
        mongoc_collection_find_with_opts(collection_.get(), filter.get(), opts.get(), nullptr));
    table_meta_ = n;
    cursor_opened_ = std::chrono::steady_clock::now();
    cursor_answered_ = false;
  }

  // A cursor that failed without a document after waiting the whole socket timeout: the server
  // is slower than the timeout, not gone. A server that must sort the whole collection before
  // its first batch (FerretDB: no index behind the sort) starts over on every retry, so after
  // kMaxSilentTimeouts such failures in a row the snapshot stops with the fix instead of
  // retrying forever. Failures that come sooner (a restart, a reset) are retried as before.
  Status count_silent_timeout() {
    const auto waited = std::chrono::steady_clock::now() - cursor_opened_;
    if (cursor_answered_ || conn_.socket_timeout.count() <= 0 ||
        waited < conn_.socket_timeout * 9 / 10) {
      silent_timeouts_ = 0;
      return ok_status();
    }
    if (++silent_timeouts_ < kMaxSilentTimeouts) return ok_status();
    return Error(Errc::connection,
                 fmt::format("{}: reading \"{}.{}\": the server did not answer the snapshot's "
                             "query within socketTimeoutMS ({} ms), {} times in a row at the same "
                             "position; a server that sorts the whole collection before answering "
                             "(FerretDB) needs longer: add socketTimeoutMS=600000 (or more) to "
                             "`url`",
                             kWhat, list_[index_].db, list_[index_].coll,
                             conn_.socket_timeout.count(), silent_timeouts_));
  }

  Status add_record(Batch& batch, const bson_t* doc) {
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, "_id"))
      return Error(Errc::data, fmt::format("{}: a document of \"{}.{}\" has no _id", kWhat,
                                           table_meta_.db, table_meta_.coll));
    Arena& arena = batch.arena();
    Record& r = batch.add();
    r.op = Operation::snapshot;
    auto meta = batch.object(2);
    meta.add(meta::kSchema, Value::string(batch.copy(table_meta_.db)));
    meta.add(meta::kTable, Value::string(batch.copy(table_meta_.coll)));
    r.metadata = meta.build();
    auto key = batch.object(1);
    key.add("_id", mongodb::read_value(&it, arena));
    r.key = key.build();
    r.after = mongodb::read_document(doc, arena);
    if (!last_id_) last_id_ = make_bson();
    else bson_reinit(last_id_.get());
    bson_append_iter(last_id_.get(), "_id", 3, &it);
    if (stats_) stats_->snapshot_rows_done.fetch_add(1);
    return ok_status();
  }

  Status reconnect(std::stop_token stop) {
    for (;;) {
      if (!backoff_.wait(stop)) return Error(Errc::cancelled, fmt::format("{}: stopped", kWhat));
      stream_.reset();
      collection_.reset();
      conn_.client.reset();
      auto c = mongodb::connect(o_.url, kWhat);
      if (c) {
        conn_ = std::move(c.value());
        return ok_status();
      }
      if (!c.error().retriable()) return c.error();
      spdlog::warn("{}; retrying", c.error().message());
    }
  }

  // Opens a change stream with no start point and closes it: a server without change streams
  // (FerretDB, a standalone mongod) refuses before the snapshot, not after it.
  Status probe_stream() {
    mongodb::ChangeStreamOptions o;
    o.full_document = o_.full_document;
    o.pre_images = o_.pre_images;
    SLUICE_TRY_ASSIGN(BsonPtr opts, mongodb::change_stream_watch_options(o, 1, 1));
    SLUICE_TRY_ASSIGN(BsonPtr pipeline, stream_pipeline());
    StreamPtr probe = watch(pipeline.get(), opts.get());
    bson_error_t err;
    const bson_t* reply = nullptr;
    if (mongoc_change_stream_error_document(probe.get(), &err, &reply)) {
      if (err.domain == MONGOC_ERROR_SERVER || err.domain == MONGOC_ERROR_QUERY)
        return refused_stream(err);
      return mongodb::to_error(err, fmt::format("{}: opening a change stream", kWhat));
    }
    return ok_status();
  }

  // The cluster time the stream starts at: the operationTime of a command's reply, taken before
  // the snapshot's first read, so that every change after it is streamed.
  Status take_start_time() {
    BsonPtr ping(BCON_NEW("ping", BCON_INT32(1)));
    bson_t reply;
    bson_error_t err;
    bool ok = mongoc_client_command_simple(conn_.client.get(), "admin", ping.get(), nullptr, &reply,
                                           &err);
    bson_iter_t it;
    bool found =
        ok && bson_iter_init_find(&it, &reply, "operationTime") && BSON_ITER_HOLDS_TIMESTAMP(&it);
    if (found) bson_iter_timestamp(&it, &at_.t, &at_.i);
    bson_destroy(&reply);
    if (!ok) return mongodb::to_error(err, fmt::format("{}: reading the cluster time", kWhat));
    if (!found || !at_.set())
      return Error(Errc::config,
                   fmt::format("{}: the server reports no operationTime, so a change stream "
                               "cannot start where the snapshot does (it needs a replica set or "
                               "sharded cluster); set `stream: false` to read a snapshot only",
                               kWhat));
    return ok_status();
  }

  // The pipeline after $changeStream: only the listed collections' events (and the database
  // events that end them).
  Result<BsonPtr> stream_pipeline() const {
    BsonPtr p = make_bson();
    bson_t stages;
    bson_append_array_begin(p.get(), "pipeline", 8, &stages);
    if (list_.size() > 1) {
      bson_t stage, match, any;
      bson_append_document_begin(&stages, "0", 1, &stage);
      bson_append_document_begin(&stage, "$match", 6, &match);
      bson_append_array_begin(&match, "$or", 3, &any);
      std::vector<std::string> dbs;
      for (size_t k = 0; k < list_.size(); ++k) {
        std::string idx = std::to_string(k);
        bson_t one;
        bson_append_document_begin(&any, idx.c_str(), -1, &one);
        BSON_APPEND_UTF8(&one, "ns.db", list_[k].db.c_str());
        BSON_APPEND_UTF8(&one, "ns.coll", list_[k].coll.c_str());
        bson_append_document_end(&any, &one);
        if (std::find(dbs.begin(), dbs.end(), list_[k].db) == dbs.end()) dbs.push_back(list_[k].db);
      }
      for (size_t k = 0; k < dbs.size(); ++k) {
        std::string idx = std::to_string(list_.size() + k);
        bson_t one;
        bson_append_document_begin(&any, idx.c_str(), -1, &one);
        BSON_APPEND_UTF8(&one, "operationType", "dropDatabase");
        BSON_APPEND_UTF8(&one, "ns.db", dbs[k].c_str());
        bson_append_document_end(&any, &one);
      }
      std::string idx = std::to_string(list_.size() + dbs.size());
      bson_t one;
      bson_append_document_begin(&any, idx.c_str(), -1, &one);
      BSON_APPEND_UTF8(&one, "operationType", "invalidate");
      bson_append_document_end(&any, &one);
      bson_append_array_end(&match, &any);
      bson_append_document_end(&stage, &match);
      bson_append_document_end(&stages, &stage);
    }
    bson_append_array_end(p.get(), &stages);
    return p;
  }

  // A change stream on the one collection, else on its database, else on the whole deployment
  // (the pipeline's $match keeps the listed collections).
  StreamPtr watch(const bson_t* pipeline, const bson_t* opts) {
    bool one_db = std::all_of(list_.begin(), list_.end(),
                              [&](const Namespace& n) { return n.db == list_.front().db; });
    if (list_.size() == 1) {
      mongodb::CollectionPtr c(mongoc_client_get_collection(conn_.client.get(), list_[0].db.c_str(),
                                                            list_[0].coll.c_str()));
      return StreamPtr(mongoc_collection_watch(c.get(), pipeline, opts));
    }
    if (one_db) {
      mongoc_database_t* d = mongoc_client_get_database(conn_.client.get(), list_[0].db.c_str());
      StreamPtr s(mongoc_database_watch(d, pipeline, opts));
      mongoc_database_destroy(d);
      return s;
    }
    return StreamPtr(mongoc_client_watch(conn_.client.get(), pipeline, opts));
  }

  // Opens the change stream after the last resume token, or at the start time.
  Status open_stream(bool at_open) {
    mongodb::ChangeStreamOptions o;
    o.full_document = o_.full_document;
    o.pre_images = o_.pre_images;
    if (token_) {
      size_t n = 0;
      char* json = bson_as_canonical_extended_json(token_.get(), &n);
      o.resume_after.assign(json, n);
      bson_free(json);
    } else {
      o.start_at_seconds = at_.t;
      o.start_at_increment = at_.i;
    }
    SLUICE_TRY_ASSIGN(BsonPtr opts,
                      mongodb::change_stream_watch_options(o, o_.max_await.count(), 0));
    SLUICE_TRY_ASSIGN(BsonPtr pipeline, stream_pipeline());
    StreamPtr s = watch(pipeline.get(), opts.get());
    bson_error_t err;
    const bson_t* reply = nullptr;
    if (mongoc_change_stream_error_document(s.get(), &err, &reply)) {
      Error e = stream_error(err);
      if (at_open && e.retriable() && err.domain == MONGOC_ERROR_SERVER) return refused_stream(err);
      return e;
    }
    stream_ = std::move(s);
    return ok_status();
  }

  Error stream_error(const bson_error_t& err) const {
    if (err.domain == MONGOC_ERROR_SERVER || err.domain == MONGOC_ERROR_QUERY) {
      Error e = mongodb::change_stream_error(err.code, err.message);
      return Error(e.code(), fmt::format("{}: {}", kWhat, e.message()), e.retriable());
    }
    return mongodb::to_error(err, fmt::format("{}: reading the change stream", kWhat));
  }

  Result<ReadStatus> read_stream(Batch& batch, const ReadRequest& req, std::stop_token stop) {
    if (pending_) {
      Error e = std::move(*pending_);
      pending_.reset();
      return e;
    }
    if (!stream_) {
      // The stream broke: reconnect with backoff and resume after the last token read.
      if (stream_down_) SLUICE_TRY(reconnect(stop));
      if (Status st = open_stream(false); !st.ok()) {
        if (!st.error().retriable()) return st.error();
        spdlog::warn("{}; retrying", st.error().message());
        stream_down_ = true;
        batch.set_position(encode_position());
        return ReadStatus::idle;
      }
      stream_down_ = false;
      backoff_.reset();
    }
    bool full = false;
    while (!stop.stop_requested()) {
      const bson_t* event = nullptr;
      if (mongoc_change_stream_next(stream_.get(), &event)) {
        const size_t before = batch.size();
        auto kind = mongodb::decode_change_event(event, batch);
        if (!kind) {
          // Records read before the event are returned first; the error ends the next read.
          if (batch.size() == 0) return kind.error();
          pending_ = kind.error();
          break;
        }
        bson_iter_t it;
        if (batch.size() > before && bson_iter_init_find(&it, event, "_id") &&
            BSON_ITER_HOLDS_DOCUMENT(&it)) {
          uint32_t len = 0;
          const uint8_t* data = nullptr;
          bson_iter_document(&it, &len, &data);
          bson_t id;
          if (bson_init_static(&id, data, len))
            batch.records().back().position = batch.copy(encode_position(&id));
        }
        if (bson_iter_init_find(&it, event, "clusterTime") && BSON_ITER_HOLDS_TIMESTAMP(&it) &&
            stats_) {
          uint32_t t = 0, inc = 0;
          bson_iter_timestamp(&it, &t, &inc);
          const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
          stats_->lag_ms.store(std::max<int64_t>(0, (now - int64_t{t}) * 1000));
        }
        keep_resume_token();
        if (batch.size() >= req.max_records || batch.bytes() >= req.max_bytes) {
          full = true;
          break;
        }
        continue;
      }
      bson_error_t err;
      const bson_t* reply = nullptr;
      if (mongoc_change_stream_error_document(stream_.get(), &err, &reply)) {
        Error e = stream_error(err);
        stream_.reset();
        if (!e.retriable()) {
          if (batch.size() == 0) return e;
          pending_ = std::move(e);
          break;
        }
        spdlog::warn("{}; reconnecting", e.message());
        stream_down_ = true;
        break;
      }
      // Nothing more within maxAwaitTimeMS: the postBatchResumeToken moves the position on.
      keep_resume_token();
      break;
    }
    batch.set_position(encode_position());
    return full ? ReadStatus::more : ReadStatus::idle;
  }

  void keep_resume_token() {
    if (!stream_) return;
    const bson_t* t = mongoc_change_stream_get_resume_token(stream_.get());
    if (t && !bson_empty(t)) token_.reset(bson_copy(t));
  }

  MongodbSourceOptions o_;
  ConnectorStats* stats_ = nullptr;
  std::jthread estimator_;  // estimate_total()
  mongodb::Connection conn_;
  std::vector<Namespace> list_;
  std::string fp_;
  size_t index_ = 0;
  BsonPtr last_id_;
  mongodb::CollectionPtr collection_;
  mongodb::CursorPtr cursor_;
  Namespace table_meta_;
  Backoff backoff_;
  static constexpr int kMaxSilentTimeouts = 3;
  std::chrono::steady_clock::time_point cursor_opened_{};
  bool cursor_answered_ = false;  // the open cursor has returned a document
  int silent_timeouts_ = 0;       // cursors in a row that timed out before their first document
  bool streaming_ = false;        // the snapshot is read (or was, before the checkpoint)
  StartTime at_;
  BsonPtr token_;  // the last resume token read
  StreamPtr stream_;
  bool stream_down_ = false;
  std::optional<Error> pending_;  // an error to return after the batch that preceded it
};

}  // namespace

std::unique_ptr<Source> make_mongodb_source(MongodbSourceOptions options) {
  return std::make_unique<MongodbSource>(std::move(options));
}

}  // namespace sluice
