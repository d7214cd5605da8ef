#include "support/mongodb.h"

#include <gtest/gtest.h>
#include <mongoc/mongoc.h>

#include <algorithm>
#include <mutex>

namespace sluice::test {

namespace {
void init_once() {
  static std::once_flag once;
  std::call_once(once, [] { mongoc_init(); });
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

}  // namespace sluice::test
