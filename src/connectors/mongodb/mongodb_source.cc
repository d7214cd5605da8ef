// The mongodb snapshot source (mongodb_source.h).
#include "connectors/mongodb/mongodb_source.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "connectors/mongodb/mongodb_bson.h"
#include "connectors/mongodb/mongodb_client.h"
#include "sluice/record.h"
#include "support/backoff.h"

namespace sluice {

namespace {

using mongodb::BsonPtr;
using mongodb::make_bson;

constexpr std::string_view kWhat = "mongodb source";

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
    estimate_total();
    return ok_status();
  }

  std::vector<SourceTable> captured_tables() const override {
    std::vector<SourceTable> out;
    for (const Namespace& n : list_) out.push_back(SourceTable{n.db, n.coll});
    return out;
  }

  Result<ReadStatus> read(Batch& batch, const ReadRequest& req, std::stop_token stop) override {
    while (index_ < list_.size()) {
      if (stop.stop_requested()) break;
      if (!cursor_) open_cursor();
      const bson_t* doc = nullptr;
      while (mongoc_cursor_next(cursor_.get(), &doc)) {
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
    }
    batch.set_position(encode_position());
    return index_ >= list_.size() ? ReadStatus::end : ReadStatus::idle;
  }

  void ack(std::string_view) override {}

  void close() noexcept override {
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

  void estimate_total() {
    if (!stats_) return;
    int64_t total = 0;
    for (const Namespace& n : list_) {
      mongodb::CollectionPtr c(
          mongoc_client_get_collection(conn_.client.get(), n.db.c_str(), n.coll.c_str()));
      bson_error_t err;
      int64_t count =
          mongoc_collection_estimated_document_count(c.get(), nullptr, nullptr, nullptr, &err);
      if (count > 0) total += count;
    }
    stats_->snapshot_rows_total.store(total);
    if (stats_->snapshot_rows_done.load() < 0) stats_->snapshot_rows_done.store(0);
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
    if (bson_iter_init_find(&it, pos.get(), "i"))
      index_ = static_cast<size_t>(bson_iter_as_int64(&it));
    if (bson_iter_init_find(&it, pos.get(), "after")) {
      last_id_ = make_bson();
      bson_append_iter(last_id_.get(), "_id", 3, &it);
    }
    return ok_status();
  }

  std::string encode_position() const {
    BsonPtr pos = make_bson();
    BSON_APPEND_INT32(pos.get(), "v", 1);
    BSON_APPEND_UTF8(pos.get(), "fp", fp_.c_str());
    BSON_APPEND_INT64(pos.get(), "i", static_cast<int64_t>(index_));
    if (last_id_) {
      bson_iter_t it;
      if (bson_iter_init_find(&it, last_id_.get(), "_id"))
        bson_append_iter(pos.get(), "after", 5, &it);
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

  MongodbSourceOptions o_;
  ConnectorStats* stats_ = nullptr;
  mongodb::Connection conn_;
  std::vector<Namespace> list_;
  std::string fp_;
  size_t index_ = 0;
  BsonPtr last_id_;
  mongodb::CollectionPtr collection_;
  mongodb::CursorPtr cursor_;
  Namespace table_meta_;
  Backoff backoff_;
};

}  // namespace

std::unique_ptr<Source> make_mongodb_source(MongodbSourceOptions options) {
  return std::make_unique<MongodbSource>(std::move(options));
}

}  // namespace sluice
