#include "support/mongodb.h"

#include <gtest/gtest.h>
#include <mongoc/mongoc.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <set>

namespace sluice::test {

namespace {
void init_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    mongoc_init();
    // libmongoc's warnings ("Couldn't send endSessions": FerretDB has no sessions) stay out of the
    // tests' output; errors come back through bson_error_t.
    mongoc_log_set_handler(
        [](mongoc_log_level_t level, const char* domain, const char* message, void*) {
          if (level <= MONGOC_LOG_LEVEL_ERROR) std::fprintf(stderr, "%s: %s\n", domain, message);
        },
        nullptr);
  });
}

bson_t* from_json(const std::string& json) {
  bson_error_t err;
  bson_t* b = bson_new_from_json(reinterpret_cast<const uint8_t*>(json.data()),
                                 static_cast<ssize_t>(json.size()), &err);
  if (!b) ADD_FAILURE() << "not Extended JSON (" << err.message << "): " << json;
  return b;
}
}  // namespace

std::string mongodb_url_with_database(const std::string& url, const std::string& db) {
  size_t scheme = url.find("://");
  size_t slash = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  size_t q = url.find('?');
  std::string base = slash == std::string::npos ? url.substr(0, q) : url.substr(0, slash);
  std::string query = q == std::string::npos ? "" : url.substr(q);
  return base + "/" + db + query;
}

MongoTestDb::MongoTestDb(const std::string& prefix, std::string url)
    : base_url_(std::move(url)), db_(unique_name(prefix, 60)) {
  if (base_url_.empty()) return;
  init_once();
  client_ = mongoc_client_new(this->url().c_str());
  if (!client_) ADD_FAILURE() << "cannot create a MongoDB client for " << base_url_;
}

MongoTestDb::~MongoTestDb() {
  if (!client_) return;
  mongoc_database_t* d = mongoc_client_get_database(client_, db_.c_str());
  mongoc_database_drop(d, nullptr);
  mongoc_database_destroy(d);
  mongoc_client_destroy(client_);
}

std::string MongoTestDb::url() const { return mongodb_url_with_database(base_url_, db_); }

bool MongoTestDb::insert(const std::string& collection, const std::vector<std::string>& docs) {
  if (!client_) return false;
  mongoc_collection_t* c = mongoc_client_get_collection(client_, db_.c_str(), collection.c_str());
  bool ok = true;
  for (const std::string& json : docs) {
    bson_t* d = from_json(json);
    if (!d) {
      ok = false;
      break;
    }
    bson_error_t err;
    if (!mongoc_collection_insert_one(c, d, nullptr, nullptr, &err)) {
      ADD_FAILURE() << "insert into " << collection << ": " << err.message;
      ok = false;
    }
    bson_destroy(d);
    if (!ok) break;
  }
  mongoc_collection_destroy(c);
  return ok;
}

bool MongoTestDb::insert_many(const std::string& collection, const std::vector<std::string>& docs) {
  if (!client_) return false;
  mongoc_collection_t* c = mongoc_client_get_collection(client_, db_.c_str(), collection.c_str());
  bool ok = true;
  for (size_t at = 0; ok && at < docs.size(); at += 1000) {
    // A plain array: std::vector<bson_t*> drops bson_t's alignment attribute (GCC warns).
    const bson_t* batch[1000];
    size_t n = 0;
    for (size_t i = at; i < std::min(docs.size(), at + 1000); ++i) {
      bson_t* d = from_json(docs[i]);
      if (!d) {
        ok = false;
        break;
      }
      batch[n++] = d;
    }
    bson_error_t err;
    if (ok && !mongoc_collection_insert_many(c, batch, n, nullptr, nullptr, &err)) {
      ADD_FAILURE() << "insertMany into " << collection << ": " << err.message;
      ok = false;
    }
    for (size_t i = 0; i < n; ++i) bson_destroy(const_cast<bson_t*>(batch[i]));
  }
  mongoc_collection_destroy(c);
  return ok;
}

std::optional<std::vector<std::string>> MongoTestDb::documents(const std::string& collection) {
  if (!client_) return std::nullopt;
  mongoc_collection_t* c = mongoc_client_get_collection(client_, db_.c_str(), collection.c_str());
  bson_t filter = BSON_INITIALIZER;
  bson_t* opts = BCON_NEW("sort", "{", "_id", BCON_INT32(1), "}");
  mongoc_cursor_t* cur = mongoc_collection_find_with_opts(c, &filter, opts, nullptr);
  std::vector<std::string> out;
  const bson_t* doc = nullptr;
  while (mongoc_cursor_next(cur, &doc)) {
    char* s = bson_as_canonical_extended_json(doc, nullptr);
    out.emplace_back(s);
    bson_free(s);
  }
  bson_error_t err;
  bool failed = mongoc_cursor_error(cur, &err);
  mongoc_cursor_destroy(cur);
  bson_destroy(opts);
  mongoc_collection_destroy(c);
  if (failed) {
    ADD_FAILURE() << "reading " << collection << ": " << err.message;
    return std::nullopt;
  }
  return out;
}

int64_t MongoTestDb::count(const std::string& collection) {
  if (!client_) return -1;
  mongoc_collection_t* c = mongoc_client_get_collection(client_, db_.c_str(), collection.c_str());
  bson_t filter = BSON_INITIALIZER;
  bson_error_t err;
  int64_t n = mongoc_collection_count_documents(c, &filter, nullptr, nullptr, nullptr, &err);
  mongoc_collection_destroy(c);
  return n;
}

bool MongoTestDb::command(const std::string& json) {
  if (!client_) return false;
  bson_t* cmd = from_json(json);
  if (!cmd) return false;
  bson_t reply;
  bson_error_t err;
  bool ok = mongoc_client_command_simple(client_, db_.c_str(), cmd, nullptr, &reply, &err);
  if (!ok) ADD_FAILURE() << "command " << json << ": " << err.message;
  bson_destroy(&reply);
  bson_destroy(cmd);
  return ok;
}

bool MongoTestDb::exists(const std::string& collection) {
  mongoc_database_t* d = mongoc_client_get_database(client_, db_.c_str());
  bson_error_t err;
  char** names = mongoc_database_get_collection_names_with_opts(d, nullptr, &err);
  bool found = false;
  for (char** n = names; n && *n; ++n) found |= collection == *n;
  bson_strfreev(names);
  mongoc_database_destroy(d);
  return found;
}

std::optional<std::vector<std::vector<std::optional<std::string>>>> MongoTestDb::fields(
    const std::string& collection, const std::vector<std::string>& names) {
  if (!client_ || !exists(collection)) return std::nullopt;
  mongoc_collection_t* c = mongoc_client_get_collection(client_, db_.c_str(), collection.c_str());
  bson_t filter = BSON_INITIALIZER;
  mongoc_cursor_t* cur = mongoc_collection_find_with_opts(c, &filter, nullptr, nullptr);
  std::vector<std::vector<std::optional<std::string>>> out;
  const bson_t* doc = nullptr;
  while (mongoc_cursor_next(cur, &doc)) {
    std::vector<std::optional<std::string>> row;
    for (const std::string& name : names) {
      bson_iter_t it;
      if (!bson_iter_init_find(&it, doc, name.c_str())) {
        row.push_back(std::nullopt);
        continue;
      }
      switch (bson_iter_type(&it)) {
        case BSON_TYPE_NULL: row.push_back(std::nullopt); break;
        case BSON_TYPE_INT32:
        case BSON_TYPE_INT64: row.push_back(std::to_string(bson_iter_as_int64(&it))); break;
        case BSON_TYPE_UTF8: row.push_back(std::string(bson_iter_utf8(&it, nullptr))); break;
        default: {
          bson_t wrap = BSON_INITIALIZER;
          bson_append_iter(&wrap, "v", 1, &it);
          char* s = bson_as_relaxed_extended_json(&wrap, nullptr);
          row.push_back(std::string(s));
          bson_free(s);
          bson_destroy(&wrap);
        }
      }
    }
    out.push_back(std::move(row));
  }
  bson_error_t err;
  const bool failed = mongoc_cursor_error(cur, &err);
  mongoc_cursor_destroy(cur);
  mongoc_collection_destroy(c);
  if (failed) {
    ADD_FAILURE() << "reading " << collection << ": " << err.message;
    return std::nullopt;
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string MongoTestDb::field_names(const std::string& collection) {
  if (!client_) return "";
  mongoc_collection_t* c = mongoc_client_get_collection(client_, db_.c_str(), collection.c_str());
  bson_t filter = BSON_INITIALIZER;
  mongoc_cursor_t* cur = mongoc_collection_find_with_opts(c, &filter, nullptr, nullptr);
  std::set<std::string> names;
  const bson_t* doc = nullptr;
  while (mongoc_cursor_next(cur, &doc)) {
    bson_iter_t it;
    if (!bson_iter_init(&it, doc)) continue;
    while (bson_iter_next(&it))
      if (std::string(bson_iter_key(&it)) != "_id") names.insert(bson_iter_key(&it));
  }
  mongoc_cursor_destroy(cur);
  mongoc_collection_destroy(c);
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

bool MongoTestDb::set_string(const std::string& collection, int64_t id, const std::string& field,
                             const std::string& value) {
  if (!client_) return false;
  mongoc_collection_t* c = mongoc_client_get_collection(client_, db_.c_str(), collection.c_str());
  bson_t* filter = BCON_NEW("id", BCON_INT64(id));
  bson_t* update = BCON_NEW("$set", "{", field.c_str(), BCON_UTF8(value.c_str()), "}");
  bson_error_t err;
  const bool ok = mongoc_collection_update_one(c, filter, update, nullptr, nullptr, &err);
  if (!ok) ADD_FAILURE() << "update of " << collection << ": " << err.message;
  bson_destroy(update);
  bson_destroy(filter);
  mongoc_collection_destroy(c);
  return ok;
}

std::string MongoTestDb::stored_position(const std::string& pipeline) {
  if (!client_) return "";
  mongoc_collection_t* c = mongoc_client_get_collection(client_, db_.c_str(), "sluice_checkpoints");
  bson_t* filter = BCON_NEW("_id", BCON_UTF8(pipeline.c_str()));
  mongoc_cursor_t* cur = mongoc_collection_find_with_opts(c, filter, nullptr, nullptr);
  const bson_t* doc = nullptr;
  std::string out;
  bson_iter_t it;
  if (mongoc_cursor_next(cur, &doc) && bson_iter_init_find(&it, doc, "position") &&
      BSON_ITER_HOLDS_BINARY(&it)) {
    bson_subtype_t sub;
    uint32_t n = 0;
    const uint8_t* data = nullptr;
    bson_iter_binary(&it, &sub, &n, &data);
    out.assign(reinterpret_cast<const char*>(data), n);
  }
  mongoc_cursor_destroy(cur);
  bson_destroy(filter);
  mongoc_collection_destroy(c);
  return out;
}

}  // namespace sluice::test
