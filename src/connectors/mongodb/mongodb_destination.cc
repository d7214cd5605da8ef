// The mongodb destination (mongodb_destination.h).
#include "connectors/mongodb/mongodb_destination.h"

#include <fmt/format.h>

#include <cstring>
#include <deque>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "connectors/mongodb/mongodb_change_event.h"
#include "connectors/mongodb/mongodb_client.h"
#include "connectors/record_key.h"
#include "connectors/record_template.h"
#include "sluice/secrets.h"

namespace sluice {

namespace {

using mongodb::BsonPtr;
using mongodb::make_bson;

constexpr std::string_view kCheckpoints = "sluice_checkpoints";
constexpr std::string_view kWhat = "mongodb destination";

// The value of key field `f` as written: an object key's field is taken from `from` (the after
// image of an upsert, the before image of a moved key's old row) when `from` holds it, else the
// record key's (the SQL destinations' rule, batch_plan.h).
const Value& key_value(const Field& f, const Record& r, const Value* from) {
  if (from && r.key.is_object() && from->is_object()) {
    const Value* v = from->find(f.name);
    if (v && !v->is_absent()) return *v;
  }
  return f.value;
}

// Builds the _id of a record: the key's one field as is, several as an embedded document in key
// order, a scalar key as itself; values from `from` as key_value says.
Status append_id(bson_t* doc, const Record& r, const mongodb::BsonWriteOptions& o,
                 const Value* from) {
  Field slot;
  auto fields = record_key_fields(r, slot);
  if (fields.empty())
    return Error(Errc::data, "the record has no key: the mongodb destination writes by _id");
  for (const Field& f : fields) {
    const Value& v = key_value(f, r, from);
    if (v.is_null() || v.is_absent())
      return Error(Errc::data, fmt::format("key field \"{}\" is null", f.name));
  }
  if (fields.size() == 1)
    return mongodb::append_value(doc, "_id", key_value(fields[0], r, from), o);
  bson_t child;
  bson_append_document_begin(doc, "_id", 3, &child);
  for (const Field& f : fields) {
    Status s = mongodb::append_value(&child, f.name, key_value(f, r, from), o);
    if (!s) {
      bson_append_document_end(doc, &child);
      return s;
    }
  }
  bson_append_document_end(doc, &child);
  return ok_status();
}

bool same_bson(const bson_t* a, const bson_t* b) {
  return a->len == b->len && std::memcmp(bson_get_data(a), bson_get_data(b), a->len) == 0;
}

bool has_absent_field(const Value& after) {
  for (const Field& f : after.fields())
    if (f.value.is_absent()) return true;
  return false;
}

class MongodbDestination final : public Destination {
 public:
  explicit MongodbDestination(MongodbDestinationOptions o, RecordTemplate t)
      : o_(std::move(o)), template_(std::move(t)) {
    bson_o_.sub_millisecond = o_.sub_millisecond;
    bson_o_.decimals = o_.decimals;
  }

  ~MongodbDestination() override { close(); }

  Status open(const ConnectorContext& ctx) override {
    SLUICE_TRY_ASSIGN(conn_, mongodb::connect(o_.url, kWhat));
    pipeline_id_ = ctx.pipeline_id;
    wc_ = mongoc_write_concern_new();
    if (o_.write_concern == "majority") {
      mongoc_write_concern_set_wmajority(wc_, static_cast<int32_t>(o_.write_timeout.count()));
    } else {
      mongoc_write_concern_set_w(wc_, std::stoi(o_.write_concern));
      mongoc_write_concern_set_wtimeout_int64(wc_, o_.write_timeout.count());
    }
    mongoc_write_concern_set_journal(wc_, o_.journal);
    return ok_status();
  }

  // `sluice doctor`: the server accepts the connection and its credentials; nothing is written.
  Result<std::vector<DoctorCheck>> doctor(const ConnectorContext&,
                                          const std::vector<SourceTable>&) override {
    using O = DoctorCheck::Outcome;
    const std::string check = "the server accepts the connection";
    auto c = mongodb::connect(o_.url, kWhat);
    if (!c.ok())
      return std::vector<DoctorCheck>{
          {O::fail, check, c.error().message(),
           "check `url`, the credentials and that the server is reachable"}};
    return std::vector<DoctorCheck>{{O::pass, check, redact(o_.url), {}}};
  }

  void close() noexcept override {
    collections_.clear();
    conn_.client.reset();
    if (wc_) mongoc_write_concern_destroy(wc_);
    wc_ = nullptr;
  }

  bool stores_positions() const noexcept override { return o_.checkpoint_in_destination; }

  Result<std::optional<std::string>> stored_position(std::string_view pipeline_id) override {
    mongoc_collection_t* c = collection(kCheckpoints);
    BsonPtr filter = make_bson();
    bson_append_utf8(filter.get(), "_id", 3, pipeline_id.data(),
                     static_cast<int>(pipeline_id.size()));
    mongodb::CursorPtr cur(mongoc_collection_find_with_opts(c, filter.get(), nullptr, nullptr));
    const bson_t* doc = nullptr;
    std::optional<std::string> out;
    if (mongoc_cursor_next(cur.get(), &doc)) {
      bson_iter_t it;
      if (bson_iter_init_find(&it, doc, "position") && BSON_ITER_HOLDS_BINARY(&it)) {
        bson_subtype_t sub;
        uint32_t n = 0;
        const uint8_t* data = nullptr;
        bson_iter_binary(&it, &sub, &n, &data);
        out = std::string(reinterpret_cast<const char*>(data), n);
      }
    }
    bson_error_t err;
    if (mongoc_cursor_error(cur.get(), &err))
      return mongodb::to_error(err, fmt::format("{}: reading {}", kWhat, kCheckpoints));
    return out;
  }

  Status erase_stored_position(std::string_view pipeline_id) override {
    BsonPtr filter = make_bson();
    bson_append_utf8(filter.get(), "_id", 3, pipeline_id.data(),
                     static_cast<int>(pipeline_id.size()));
    bson_error_t err;
    if (!mongoc_collection_delete_one(collection(kCheckpoints), filter.get(), nullptr, nullptr,
                                      &err))
      return mongodb::to_error(err, fmt::format("{}: erasing the stored position", kWhat));
    return ok_status();
  }

  void write(Batch& batch, WriteDone done) override { done(write_batch(batch)); }

 private:
  // One collection's share of a batch, in record order.
  struct Run {
    std::string name;
    std::vector<size_t> records;
  };

  mongoc_collection_t* collection(std::string_view name) {
    auto it = collections_.find(std::string(name));
    if (it != collections_.end()) return it->second.get();
    std::string n(name);
    mongodb::CollectionPtr c(
        mongoc_client_get_collection(conn_.client.get(), conn_.database.c_str(), n.c_str()));
    return collections_.emplace(std::move(n), std::move(c)).first->second.get();
  }

  Status write_batch(Batch& batch) {
    if (!conn_.client)
      return Error(Errc::connection, fmt::format("{}: not connected", kWhat), true);
    // Group by collection: a bulk write addresses one collection. Records of one key always map
    // to one collection, so their order is kept.
    runs_.clear();
    std::unordered_map<std::string_view, size_t> index;
    for (size_t i = 0; i < batch.records().size(); ++i) {
      const Record& r = batch.records()[i];
      if (is_control(r.op)) continue;
      std::string_view name = template_.render(r);
      auto [it, fresh] = index.try_emplace(name, runs_.size());
      if (fresh) {
        runs_.push_back(Run{std::string(name), {}});
        // `name` may point into the template's scratch buffer; key the map on the run's copy.
        index.erase(it);
        it = index.emplace(runs_.back().name, runs_.size() - 1).first;
      }
      runs_[it->second].records.push_back(i);
    }
    for (const Run& run : runs_) SLUICE_TRY(write_run(batch, run));
    if (o_.checkpoint_in_destination && batch.has_position()) SLUICE_TRY(save_position(batch));
    return ok_status();
  }

  Status write_run(Batch& batch, const Run& run) {
    if (run.name.empty() || run.name.find('\0') != std::string::npos ||
        run.name.find('$') != std::string::npos)
      return Error(Errc::data,
                   fmt::format("{}: \"{}\" is not a valid collection name", kWhat, run.name));
    // Unordered bulks may apply operations of one key out of order: only a run in which every
    // _id appears once, no key moves and no truncate, is sent unordered.
    bool ordered = o_.ordered;
    // Per record: the _id written (an upsert's from its after image: an update that moved the key
    // carries the new key there), and for an update that moved the key the old row's _id (from
    // the record key when the after image differs from it, else from the before image).
    std::vector<BsonPtr> ids, old_ids;
    ids.reserve(run.records.size());
    old_ids.reserve(run.records.size());
    std::unordered_set<std::string_view> seen;
    for (size_t i : run.records) {
      const Record& r = batch.records()[i];
      BsonPtr id = make_bson();
      BsonPtr old;
      // A truncate must stay between the writes before and after it.
      if (is_truncate(r)) ordered = true;
      if (!is_truncate(r)) {
        Status s = append_id(id.get(), r, bson_o_, r.op == Operation::remove ? nullptr : &r.after);
        if (!s) return Error(Errc::data, describe(r, s.error().message()));
        if (r.op == Operation::update) {
          BsonPtr by_key = make_bson();
          if (append_id(by_key.get(), r, bson_o_, nullptr) && !same_bson(by_key.get(), id.get())) {
            old = std::move(by_key);
          } else if (r.before.is_object()) {
            BsonPtr by_before = make_bson();
            if (append_id(by_before.get(), r, bson_o_, &r.before) &&
                !same_bson(by_before.get(), id.get()))
              old = std::move(by_before);
          }
          if (old) ordered = true;
        }
        if (!ordered) {
          std::string_view raw(reinterpret_cast<const char*>(bson_get_data(id.get())), id->len);
          if (!seen.insert(raw).second) ordered = true;
        }
      }
      ids.push_back(std::move(id));
      old_ids.push_back(std::move(old));
    }
    BsonPtr opts = make_bson();
    bson_append_bool(opts.get(), "ordered", 7, ordered);
    mongoc_write_concern_append(wc_, opts.get());
    auto new_bulk = [&] {
      return mongodb::BulkPtr(
          mongoc_collection_create_bulk_operation_with_opts(collection(run.name), opts.get()));
    };
    mongodb::BulkPtr bulk = new_bulk();
    std::vector<size_t> op_record;  // the bulk's operations → the index in run.records
    BsonPtr upsert(BCON_NEW("upsert", BCON_BOOL(true)));
    bson_error_t err;
    // Sends the operations added so far (before a read that must see them).
    auto execute = [&]() -> Status {
      if (op_record.empty()) return ok_status();
      bson_t reply;
      uint32_t server = mongoc_bulk_operation_execute(bulk.get(), &reply, &err);
      Status result = server ? ok_status() : classify(batch, run, op_record, &reply, err);
      bson_destroy(&reply);
      bulk = new_bulk();
      op_record.clear();
      return result;
    };
    for (size_t k = 0; k < run.records.size(); ++k) {
      const Record& r = batch.records()[run.records[k]];
      bool ok = true;
      if (is_truncate(r)) {
        BsonPtr all = make_bson();
        ok = mongoc_bulk_operation_remove_many_with_opts(bulk.get(), all.get(), nullptr, &err);
        op_record.push_back(k);
      } else if (r.op == Operation::remove) {
        ok = mongoc_bulk_operation_remove_one_with_opts(bulk.get(), ids[k].get(), nullptr, &err);
        op_record.push_back(k);
      } else {
        if (!r.after.is_object())
          return Error(Errc::data, describe(r, "the record has no after image (an object)"));
        const bool partial = has_absent_field(r.after) || r.meta(mongodb::kPartialUpdate) == "true";
        BsonPtr moved_from;  // a moved key's stored document (partial after images keep its fields)
        if (old_ids[k]) {
          if (partial) {
            SLUICE_TRY(execute());
            SLUICE_TRY_ASSIGN(moved_from, find_one(run.name, old_ids[k].get()));
          }
          ok = mongoc_bulk_operation_remove_one_with_opts(bulk.get(), old_ids[k].get(), nullptr,
                                                          &err);
          op_record.push_back(k);
          if (!ok) return Error(Errc::data, describe(r, err.message));
        }
        if (partial && !moved_from) {
          // Fields absent from the after image (unchanged, not sent) keep their stored value.
          BsonPtr update = make_bson();
          bson_t set;
          bson_append_document_begin(update.get(), "$set", 4, &set);
          for (const Field& f : r.after.fields()) {
            if (f.name == "_id" || f.value.is_absent()) continue;
            Status s = mongodb::append_value(&set, f.name, f.value, bson_o_);
            if (!s) return Error(Errc::data, describe(r, s.error().message()));
          }
          bson_append_document_end(update.get(), &set);
          ok = mongoc_bulk_operation_update_one_with_opts(bulk.get(), ids[k].get(), update.get(),
                                                          upsert.get(), &err);
        } else {
          BsonPtr doc = make_bson();
          bson_iter_t id_it;
          bson_iter_init(&id_it, ids[k].get());
          bson_iter_next(&id_it);
          bson_append_iter(doc.get(), "_id", 3, &id_it);
          for (const Field& f : r.after.fields()) {
            if (f.name == "_id" || f.value.is_absent()) continue;
            Status s = mongodb::append_value(doc.get(), f.name, f.value, bson_o_);
            if (!s) return Error(Errc::data, describe(r, s.error().message()));
          }
          if (moved_from) {
            // The moved document's fields the after image did not send, as stored.
            bson_iter_t it;
            bson_iter_init(&it, moved_from.get());
            while (bson_iter_next(&it)) {
              std::string_view name = bson_iter_key(&it);
              if (name == "_id") continue;
              const Value* v = r.after.find(name);
              if (v && !v->is_absent()) continue;
              bson_append_iter(doc.get(), nullptr, 0, &it);
            }
          }
          ok = mongoc_bulk_operation_replace_one_with_opts(bulk.get(), ids[k].get(), doc.get(),
                                                           upsert.get(), &err);
        }
        op_record.push_back(k);
      }
      if (!ok) return Error(Errc::data, describe(r, err.message));
      // Bounded commands (bulk.max_operations; FerretDB deadlocks beyond 100 matched updates).
      if (op_record.size() >= static_cast<size_t>(o_.max_operations)) SLUICE_TRY(execute());
    }
    return execute();
  }

  // The stored document with `_id` of `id` (an empty document when there is none).
  Result<BsonPtr> find_one(const std::string& coll, const bson_t* id) {
    mongodb::CursorPtr cur(
        mongoc_collection_find_with_opts(collection(coll), id, nullptr, nullptr));
    const bson_t* doc = nullptr;
    BsonPtr out = make_bson();
    if (mongoc_cursor_next(cur.get(), &doc)) bson_concat(out.get(), doc);
    bson_error_t err;
    if (mongoc_cursor_error(cur.get(), &err)) {
      Error e = mongodb::to_error(err, fmt::format("{}: reading \"{}\"", kWhat, coll));
      return Error(e.code() == Errc::data ? Errc::connection : e.code(), e.message(), true);
    }
    return out;
  }

  // A failed bulk: write errors (duplicate key, validation) concern records (Errc::data, so the
  // runtime isolates them: dead-letter queue or stop); anything else concerns the connection.
  Status classify(Batch& batch, const Run& run, const std::vector<size_t>& op_record,
                  const bson_t* reply, const bson_error_t& err) {
    bson_iter_t it, child;
    if (bson_iter_init_find(&it, reply, "writeErrors") && BSON_ITER_HOLDS_ARRAY(&it) &&
        bson_iter_recurse(&it, &child) && bson_iter_next(&child)) {
      bson_iter_t f;
      int64_t index = -1;
      int64_t code = 0;
      std::string msg;
      if (bson_iter_recurse(&child, &f)) {
        while (bson_iter_next(&f)) {
          std::string_view k = bson_iter_key(&f);
          if (k == "index") index = bson_iter_as_int64(&f);
          else if (k == "code") code = bson_iter_as_int64(&f);
          else if (k == "errmsg" && BSON_ITER_HOLDS_UTF8(&f)) msg = bson_iter_utf8(&f, nullptr);
        }
      }
      std::string what = fmt::format("server refused the write (code {}): {}", code, msg);
      if (index >= 0 && static_cast<size_t>(index) < op_record.size()) {
        const Record& r = batch.records()[run.records[op_record[index]]];
        std::string line = describe(r, what);
        // A duplicate key on an upsert by _id is a race with another writer of the same _id
        // (both found no document, both inserted): a killed sluice's command that the server
        // still runs, as seen with FerretDB under kill -9; MongoDB retries such upserts itself,
        // FerretDB does not. Retried once: the same record refused twice in a row is a real
        // violation (a unique index), isolated to the record.
        if (code == 11000 && r.op != Operation::remove && !is_truncate(r) &&
            line != last_duplicate_) {
          last_duplicate_ = line;
          return Error(Errc::connection, line + " (an upsert raced another writer: retried)", true);
        }
        last_duplicate_.clear();
        return Error(Errc::data, std::move(line));
      }
      return Error(Errc::data, fmt::format("{}: collection \"{}\": {}", kWhat, run.name, what));
    }
    Error e = mongodb::to_error(err, fmt::format("{}: bulk write to \"{}\"", kWhat, run.name));
    // A server error that is not a write error (not primary, shutting down) is worth a retry.
    return Error(e.code() == Errc::data ? Errc::connection : e.code(), e.message(), true);
  }

  Status save_position(const Batch& batch) {
    BsonPtr filter = make_bson();
    std::string_view id = pipeline_id_;
    bson_append_utf8(filter.get(), "_id", 3, id.data(), static_cast<int>(id.size()));
    BsonPtr update = make_bson();
    bson_t set;
    bson_append_document_begin(update.get(), "$set", 4, &set);
    bson_append_binary(&set, "position", 8, BSON_SUBTYPE_BINARY,
                       reinterpret_cast<const uint8_t*>(batch.position().data()),
                       static_cast<uint32_t>(batch.position().size()));
    bson_append_now_utc(&set, "updated", 7);
    bson_append_document_end(update.get(), &set);
    BsonPtr opts(BCON_NEW("upsert", BCON_BOOL(true)));
    mongoc_write_concern_append(wc_, opts.get());
    bson_error_t err;
    if (!mongoc_collection_update_one(collection(kCheckpoints), filter.get(), update.get(),
                                      opts.get(), nullptr, &err)) {
      Error e = mongodb::to_error(err, fmt::format("{}: storing the position", kWhat));
      return Error(Errc::connection, e.message(), true);
    }
    return ok_status();
  }

  std::string describe(const Record& r, std::string_view what) const {
    return redact(fmt::format("{}: record of \"{}\" (key {}): {}", kWhat,
                              RecordTemplate::table_of(r), to_debug_string(r.key), what));
  }

  MongodbDestinationOptions o_;
  RecordTemplate template_;
  mongodb::BsonWriteOptions bson_o_;
  mongodb::Connection conn_;
  mongoc_write_concern_t* wc_ = nullptr;
  std::unordered_map<std::string, mongodb::CollectionPtr> collections_;
  std::deque<Run> runs_;  // a deque: the index keys on the names it holds
  std::string pipeline_id_;
  std::string last_duplicate_;  // the record a duplicate key refused last (retried once)
};

}  // namespace

std::unique_ptr<Destination> make_mongodb_destination(MongodbDestinationOptions options) {
  auto t = RecordTemplate::parse(options.collection, "collection");
  // Options were validated by mongodb_destination_options (finalize parses the template).
  auto d = std::make_unique<MongodbDestination>(std::move(options), std::move(t.value()));
  return d;
}

}  // namespace sluice
