// Change-stream events → records (mongodb_change_event.h).
#include "connectors/mongodb/mongodb_change_event.h"

#include <fmt/format.h>

#include "connectors/mongodb/mongodb_bson.h"
#include "sluice/record.h"

namespace sluice::mongodb {

namespace {

std::string canonical_json(const bson_t* doc) {
  size_t n = 0;
  char* s = bson_as_canonical_extended_json(doc, &n);
  std::string out(s ? s : "", s ? n : 0);
  bson_free(s);
  return out;
}

// The sub-document at `key` of `doc` (false when missing or not a document).
bool sub_document(const bson_t* doc, const char* key, bson_t* out) {
  bson_iter_t it;
  if (!bson_iter_init_find(&it, doc, key) || !BSON_ITER_HOLDS_DOCUMENT(&it)) return false;
  uint32_t len = 0;
  const uint8_t* data = nullptr;
  bson_iter_document(&it, &len, &data);
  return bson_init_static(out, data, len);
}

std::string utf8_at(const bson_t* doc, const char* key) {
  bson_iter_t it;
  if (!bson_iter_init_find(&it, doc, key) || !BSON_ITER_HOLDS_UTF8(&it)) return {};
  uint32_t n = 0;
  const char* s = bson_iter_utf8(&it, &n);
  return std::string(s, n);
}

Error refused(std::string what) {
  return Error(Errc::unsupported, "mongodb change stream: " + what);
}

}  // namespace

namespace {

// The $changeStream stage's fields (and libmongoc's watch options of the same names).
Status append_stream_fields(bson_t* cs, const ChangeStreamOptions& o) {
  switch (o.full_document) {
    case FullDocument::none: break;
    case FullDocument::update_lookup: BSON_APPEND_UTF8(cs, "fullDocument", "updateLookup"); break;
    case FullDocument::when_available: BSON_APPEND_UTF8(cs, "fullDocument", "whenAvailable"); break;
    case FullDocument::required: BSON_APPEND_UTF8(cs, "fullDocument", "required"); break;
  }
  switch (o.pre_images) {
    case PreImages::off: break;
    case PreImages::when_available:
      BSON_APPEND_UTF8(cs, "fullDocumentBeforeChange", "whenAvailable");
      break;
    case PreImages::required: BSON_APPEND_UTF8(cs, "fullDocumentBeforeChange", "required"); break;
  }
  if (!o.resume_after.empty()) {
    bson_error_t err;
    bson_t* token = bson_new_from_json(reinterpret_cast<const uint8_t*>(o.resume_after.data()),
                                       static_cast<ssize_t>(o.resume_after.size()), &err);
    if (!token) {
      return Error(Errc::data, fmt::format("mongodb change stream: the stored resume token is "
                                           "not Extended JSON ({}); run `sluice cleanup`",
                                           err.message));
    }
    BSON_APPEND_DOCUMENT(cs, "resumeAfter", token);
    bson_destroy(token);
  } else if (o.start_at_seconds != 0) {
    BSON_APPEND_TIMESTAMP(cs, "startAtOperationTime", o.start_at_seconds, o.start_at_increment);
  }
  return ok_status();
}

}  // namespace

Result<BsonPtr> change_stream_command(std::string_view collection, const ChangeStreamOptions& o) {
  BsonPtr owned = make_bson();
  bson_t* cmd = owned.get();
  if (collection.empty()) BSON_APPEND_INT32(cmd, "aggregate", 1);
  else
    bson_append_utf8(cmd, "aggregate", 9, collection.data(), static_cast<int>(collection.size()));
  bson_t pipeline, stage, cs;
  bson_append_array_begin(cmd, "pipeline", 8, &pipeline);
  bson_append_document_begin(&pipeline, "0", 1, &stage);
  bson_append_document_begin(&stage, "$changeStream", 13, &cs);
  SLUICE_TRY(append_stream_fields(&cs, o));
  bson_append_document_end(&stage, &cs);
  bson_append_document_end(&pipeline, &stage);
  bson_append_array_end(cmd, &pipeline);
  bson_t cursor;
  bson_append_document_begin(cmd, "cursor", 6, &cursor);
  bson_append_document_end(cmd, &cursor);
  return owned;
}

Result<BsonPtr> change_stream_watch_options(const ChangeStreamOptions& o, int64_t max_await_ms,
                                            int64_t batch_size) {
  BsonPtr opts = make_bson();
  SLUICE_TRY(append_stream_fields(opts.get(), o));
  BSON_APPEND_INT64(opts.get(), "maxAwaitTimeMS", max_await_ms);
  if (batch_size > 0) BSON_APPEND_INT32(opts.get(), "batchSize", static_cast<int32_t>(batch_size));
  return opts;
}

Result<EventKind> decode_change_event(const bson_t* event, Batch& batch) {
  bson_t id;
  if (!sub_document(event, "_id", &id))
    return Error(Errc::data,
                 "mongodb change stream: an event has no resume token (_id); do not "
                 "project _id away in the pipeline");
  std::string type = utf8_at(event, "operationType");
  bson_t ns;
  std::string db, coll;
  if (sub_document(event, "ns", &ns)) {
    db = utf8_at(&ns, "db");
    coll = utf8_at(&ns, "coll");
  }
  if (type == "invalidate")
    return refused(
        "the stream was invalidated (its collection was dropped or renamed, or its "
        "database dropped); run `sluice cleanup` and snapshot again");
  if (type == "rename") {
    bson_t to;
    std::string target = sub_document(event, "to", &to)
                             ? utf8_at(&to, "db") + "." + utf8_at(&to, "coll")
                             : std::string("?");
    return refused(
        fmt::format("collection \"{}.{}\" was renamed to \"{}\"; sluice does not "
                    "follow renames: update `collections` and snapshot again",
                    db, coll, target));
  }
  if (type == "dropDatabase")
    return refused(fmt::format("database \"{}\" was dropped; update `collections`", db));
  bool is_data = type == "insert" || type == "update" || type == "replace" || type == "delete";
  if (!is_data && type != "drop") return EventKind::ignored;  // createIndexes, …

  Arena& arena = batch.arena();
  std::string position = canonical_json(&id);
  Record& r = batch.add();
  r.position = batch.copy(position);
  bool partial = false;
  bson_t doc;
  if (type == "drop") {
    // The collection is gone: keyed destinations empty its table (a truncate record).
    r.op = Operation::remove;
  } else {
    bson_t key;
    if (!sub_document(event, "documentKey", &key)) {
      batch.records().pop_back();
      return Error(Errc::data, fmt::format("mongodb change stream: a {} event of \"{}.{}\" has no "
                                           "documentKey",
                                           type, db, coll));
    }
    r.key = read_document(&key, arena);
    if (sub_document(event, "fullDocumentBeforeChange", &doc))
      r.before = read_document(&doc, arena);
    if (type == "insert") r.op = Operation::create;
    else if (type == "delete") r.op = Operation::remove;
    else r.op = Operation::update;
    if (type != "delete") {
      if (sub_document(event, "fullDocument", &doc)) {
        r.after = read_document(&doc, arena);
      } else if (type == "update") {
        // No full document: the update description. Updated fields carry their new value,
        // removed fields become null; fields not named are unchanged (absent).
        bson_t desc, updated;
        if (!sub_document(event, "updateDescription", &desc)) {
          batch.records().pop_back();
          return Error(Errc::data,
                       "mongodb change stream: an update event has neither "
                       "fullDocument nor updateDescription");
        }
        bson_iter_t it;
        uint32_t n = 0;
        if (sub_document(&desc, "updatedFields", &updated)) n += bson_count_keys(&updated);
        bson_iter_t removed;
        bool has_removed = bson_iter_init_find(&removed, &desc, "removedFields") &&
                           BSON_ITER_HOLDS_ARRAY(&removed);
        bson_iter_t rm;
        if (has_removed && bson_iter_recurse(&removed, &rm))
          while (bson_iter_next(&rm)) ++n;
        bson_iter_t trunc, tr;
        bool truncated = bson_iter_init_find(&trunc, &desc, "truncatedArrays") &&
                         BSON_ITER_HOLDS_ARRAY(&trunc) && bson_iter_recurse(&trunc, &tr) &&
                         bson_iter_next(&tr);
        auto nested = [&](std::string_view field) {
          batch.records().pop_back();
          return Error(Errc::unsupported,
                       fmt::format("mongodb change stream: an update of \"{}.{}\" changes the "
                                   "nested field \"{}\", which a record cannot state without the "
                                   "whole document; set stream.full_document: update_lookup",
                                   db, coll, field));
        };
        if (truncated) {
          // truncatedArrays: [{field, newSize}]
          std::string field = "?";
          bson_iter_t f;
          if (BSON_ITER_HOLDS_DOCUMENT(&tr) && bson_iter_recurse(&tr, &f) &&
              bson_iter_find(&f, "field") && BSON_ITER_HOLDS_UTF8(&f))
            field = bson_iter_utf8(&f, nullptr);
          return nested(field);
        }
        Field* fields = arena.allocate_array<Field>(n);
        uint32_t i = 0;
        if (n > 0 && bson_iter_init(&it, &updated)) {
          while (i < n && bson_iter_next(&it)) {
            std::string_view k(bson_iter_key(&it), bson_iter_key_len(&it));
            if (k.find('.') != std::string_view::npos) return nested(k);
            fields[i++] = Field{arena.copy(k), read_value(&it, arena)};
          }
        }
        if (has_removed && bson_iter_recurse(&removed, &rm)) {
          while (i < n && bson_iter_next(&rm)) {
            if (!BSON_ITER_HOLDS_UTF8(&rm)) continue;
            uint32_t len = 0;
            const char* name = bson_iter_utf8(&rm, &len);
            std::string_view k(name, len);
            if (k.find('.') != std::string_view::npos) return nested(k);
            fields[i++] = Field{arena.copy(k), Value::null()};
          }
        }
        r.after = Value::object(fields, i);
        partial = true;
      } else {
        batch.records().pop_back();
        return Error(Errc::data, fmt::format("mongodb change stream: a {} event of \"{}.{}\" has "
                                             "no fullDocument",
                                             type, db, coll));
      }
    }
  }
  uint32_t nmeta = 3 + (partial ? 1 : 0) + (type == "drop" ? 1 : 0);
  auto meta = batch.object(nmeta);
  meta.add(meta::kSchema, Value::string(batch.copy(db)));
  meta.add(meta::kTable, Value::string(batch.copy(coll)));
  bson_iter_t ct;
  std::string when;
  if (bson_iter_init_find(&ct, event, "clusterTime") && BSON_ITER_HOLDS_TIMESTAMP(&ct)) {
    uint32_t t = 0, inc = 0;
    bson_iter_timestamp(&ct, &t, &inc);
    when = fmt::format("{}.{}", t, inc);
  }
  meta.add("mongodb.cluster_time", Value::string(batch.copy(when)));
  if (partial) meta.add(kPartialUpdate, Value::string("true"));
  if (type == "drop") meta.add(meta::kTruncate, Value::string("true"));
  r.metadata = meta.build();
  return type == "drop" ? EventKind::truncate : EventKind::record;
}

Result<ChangeStreamBatch> decode_change_stream_reply(const bson_t* reply, Batch& batch) {
  bson_iter_t it;
  if (bson_iter_init_find(&it, reply, "ok") && !bson_iter_as_bool(&it)) {
    int64_t code = 0;
    if (bson_iter_init_find(&it, reply, "code")) code = bson_iter_as_int64(&it);
    return change_stream_error(code, utf8_at(reply, "errmsg"));
  }
  bson_t cursor;
  if (!sub_document(reply, "cursor", &cursor))
    return Error(Errc::data, "mongodb change stream: the reply has no cursor");
  ChangeStreamBatch out;
  if (bson_iter_init_find(&it, &cursor, "id")) out.cursor_id = bson_iter_as_int64(&it);
  bson_iter_t events;
  if ((bson_iter_init_find(&events, &cursor, "firstBatch") ||
       bson_iter_init_find(&events, &cursor, "nextBatch")) &&
      BSON_ITER_HOLDS_ARRAY(&events)) {
    bson_iter_t e;
    bson_iter_recurse(&events, &e);
    while (bson_iter_next(&e)) {
      if (!BSON_ITER_HOLDS_DOCUMENT(&e)) continue;
      uint32_t len = 0;
      const uint8_t* data = nullptr;
      bson_iter_document(&e, &len, &data);
      bson_t event;
      if (!bson_init_static(&event, data, len)) continue;
      SLUICE_TRY(decode_change_event(&event, batch));
      ++out.events;
      bson_t id;
      if (sub_document(&event, "_id", &id)) out.resume_token = canonical_json(&id);
    }
  }
  bson_t pbrt;
  if (sub_document(&cursor, "postBatchResumeToken", &pbrt))
    out.resume_token = canonical_json(&pbrt);
  if (!out.resume_token.empty()) batch.set_position(out.resume_token);
  return out;
}

Error change_stream_error(int64_t code, std::string_view message) {
  if (code == 286 || code == 280)
    return Error(Errc::data,
                 fmt::format("mongodb change stream: the resume token is no longer in the oplog "
                             "(code {}: {}); changes were lost: run `sluice cleanup` and snapshot "
                             "again, and size the oplog for the longest pause",
                             code, message));
  return Error(Errc::connection,
               fmt::format("mongodb change stream: server error {}: {}", code, message), true);
}

}  // namespace sluice::mongodb
