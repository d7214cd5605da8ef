// The ceilings of the mongodb connector, and the bench's MongoDB helper: the thinnest libmongoc
// loops doing what the mongodb destination and the mongodb snapshot source do, so the matrix can
// compare them (target >= 80 %). On this machine the server is FerretDB 1.24 (SQLite backend), not
// MongoDB: FerretDB, not MongoDB, sets these ceilings.
//
//   sluice_mongodb_ceiling upsert URL COLLECTION ROWS [BATCH] [SEED]
//       Drops COLLECTION, then writes the rows sluice's generator produces for count ROWS and SEED
//       (employee_row(seed, id, id - 1), id 1..ROWS) as the mongodb destination writes them: a
//       document {_id: id, id, name, email, full_time, position, hire_date (date), salary (double),
//       updated_at, created_at (dates, or ISO 8601 text with microseconds when they have a
//       sub-millisecond part: the destination's default)}, one ordered bulk write of replaceOne
//       {_id} upsert: true per BATCH (default 10,000, sluice's batch) with the destination's
//       default write concern (w: majority, j: true). Prints {"rows","seconds"}: seconds from
//       before connecting until the last bulk returned.
//   sluice_mongodb_ceiling insert URL COLLECTION ROWS [BATCH] [SEED]
//       The same documents as plain inserts (the matrix loads a source collection so).
//   sluice_mongodb_ceiling read URL COLLECTION [BATCH]
//       One cursor, find({}).sort({_id: 1}) with batchSize BATCH (default 10,000: the source's
//       snapshot.batch_size), each document iterated (bson_iter over its fields) and discarded.
//       Prints {"rows","seconds"}.
//   sluice_mongodb_ceiling drop URL
//       Drops the URL's database (absent is fine).
//   sluice_mongodb_ceiling dump URL COLLECTION
//       Every document as `id<TAB>name<TAB>email<TAB>position<TAB>hire_date` (a date as
//       YYYY-MM-DD...), for the matrix's per-row checksum.
#include <mongoc/mongoc.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

#include "connectors/generator/employees.h"

namespace {

using sluice::generator::employee_row;
using sluice::generator::EmployeeRow;

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "sluice_mongodb_ceiling: %s\n", msg.c_str());
  std::exit(1);
}

mongoc_client_t* connect(const char* url, std::string& db) {
  bson_error_t err;
  mongoc_uri_t* uri = mongoc_uri_new_with_error(url, &err);
  if (!uri) die(std::string("bad URL: ") + err.message);
  const char* d = mongoc_uri_get_database(uri);
  if (!d || !*d) die("the URL names no database");
  db = d;
  mongoc_client_t* c = mongoc_client_new_from_uri_with_error(uri, &err);
  mongoc_uri_destroy(uri);
  if (!c) die(std::string("cannot create a client: ") + err.message);
  mongoc_client_set_error_api(c, MONGOC_ERROR_API_VERSION_2);
  return c;
}

// Microseconds since the epoch as the destination writes a timestamp: a date when exact to the
// millisecond, else its ISO 8601 text with microseconds.
void append_time(bson_t* doc, const char* key, int64_t micros) {
  if (micros % 1000 == 0) {
    BSON_APPEND_DATE_TIME(doc, key, micros / 1000);
    return;
  }
  int64_t secs = micros >= 0 ? micros / 1000000 : (micros - 999999) / 1000000;
  const int64_t frac = micros - secs * 1000000;
  time_t t = static_cast<time_t>(secs);
  struct tm tm;
  gmtime_r(&t, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long long)frac);
  BSON_APPEND_UTF8(doc, key, buf);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// insert: plain inserts (the matrix's loader of a source collection); else replaceOne upserts.
int write(const char* url, const char* coll_name, long long rows, long long batch, uint64_t seed,
          bool insert) {
  const auto t0 = std::chrono::steady_clock::now();
  mongoc_init();
  std::string db;
  mongoc_client_t* client = connect(url, db);
  mongoc_collection_t* coll = mongoc_client_get_collection(client, db.c_str(), coll_name);
  bson_error_t err;
  if (!mongoc_collection_drop(coll, &err) && err.code != 26 &&  // 26: NamespaceNotFound
      std::string(err.message).find("ns not found") == std::string::npos)
    die(std::string("dropping the collection: ") + err.message);
  mongoc_write_concern_t* wc = mongoc_write_concern_new();
  mongoc_write_concern_set_wmajority(wc, 30000);
  mongoc_write_concern_set_journal(wc, true);
  bson_t opts = BSON_INITIALIZER;
  mongoc_write_concern_append(wc, &opts);
  BSON_APPEND_BOOL(&opts, "ordered", true);
  bson_t upsert_opts = BSON_INITIALIZER;
  BSON_APPEND_BOOL(&upsert_opts, "upsert", true);
  for (long long first = 1; first <= rows; first += batch) {
    mongoc_bulk_operation_t* bulk = mongoc_collection_create_bulk_operation_with_opts(coll, &opts);
    const long long last = std::min(rows, first + batch - 1);
    for (long long id = first; id <= last; ++id) {
      const EmployeeRow r = employee_row(seed, id, uint64_t(id - 1));
      bson_t sel = BSON_INITIALIZER, doc = BSON_INITIALIZER;
      BSON_APPEND_INT64(&sel, "_id", id);
      BSON_APPEND_INT64(&doc, "_id", id);
      BSON_APPEND_INT64(&doc, "id", id);
      const std::string name = r.name(), email = r.email();
      BSON_APPEND_UTF8(&doc, "name", name.c_str());
      BSON_APPEND_UTF8(&doc, "email", email.c_str());
      BSON_APPEND_BOOL(&doc, "full_time", r.full_time);
      bson_append_utf8(&doc, "position", -1, r.position.data(),
                       static_cast<int>(r.position.size()));
      BSON_APPEND_DATE_TIME(&doc, "hire_date", int64_t{r.hire_date} * 86400000);
      BSON_APPEND_DOUBLE(&doc, "salary", r.salary);
      append_time(&doc, "updated_at", r.updated_at);
      append_time(&doc, "created_at", r.created_at);
      if (insert
              ? !mongoc_bulk_operation_insert_with_opts(bulk, &doc, nullptr, &err)
              : !mongoc_bulk_operation_replace_one_with_opts(bulk, &sel, &doc, &upsert_opts, &err))
        die(std::string(insert ? "insert: " : "replaceOne: ") + err.message);
      bson_destroy(&sel);
      bson_destroy(&doc);
    }
    bson_t reply;
    if (!mongoc_bulk_operation_execute(bulk, &reply, &err))
      die(std::string("bulk write: ") + err.message);
    bson_destroy(&reply);
    mongoc_bulk_operation_destroy(bulk);
  }
  const double secs = seconds_since(t0);
  std::printf("{\"rows\":%lld,\"seconds\":%.3f}\n", rows, secs);
  bson_destroy(&upsert_opts);
  bson_destroy(&opts);
  mongoc_write_concern_destroy(wc);
  mongoc_collection_destroy(coll);
  mongoc_client_destroy(client);
  return 0;
}

template <class Each>
long long scan(const char* url, const char* coll_name, long long batch, Each each) {
  std::string db;
  mongoc_client_t* client = connect(url, db);
  mongoc_collection_t* coll = mongoc_client_get_collection(client, db.c_str(), coll_name);
  bson_t filter = BSON_INITIALIZER;
  bson_t* opts = BCON_NEW("sort", "{", "_id", BCON_INT32(1), "}", "batchSize", BCON_INT64(batch));
  mongoc_cursor_t* cur = mongoc_collection_find_with_opts(coll, &filter, opts, nullptr);
  const bson_t* doc = nullptr;
  long long n = 0;
  while (mongoc_cursor_next(cur, &doc)) {
    each(doc);
    ++n;
  }
  bson_error_t err;
  if (mongoc_cursor_error(cur, &err)) die(std::string("find: ") + err.message);
  mongoc_cursor_destroy(cur);
  bson_destroy(opts);
  bson_destroy(&filter);
  mongoc_collection_destroy(coll);
  mongoc_client_destroy(client);
  return n;
}

int read(const char* url, const char* coll_name, long long batch) {
  const auto t0 = std::chrono::steady_clock::now();
  mongoc_init();
  uint64_t fields = 0;
  long long n = scan(url, coll_name, batch, [&](const bson_t* doc) {
    bson_iter_t it;
    if (bson_iter_init(&it, doc))
      while (bson_iter_next(&it)) ++fields;
  });
  const double secs = seconds_since(t0);
  std::printf("{\"rows\":%lld,\"fields\":%llu,\"seconds\":%.3f}\n", n, (unsigned long long)fields,
              secs);
  return 0;
}

std::string text(const bson_t* doc, const char* key) {
  bson_iter_t it;
  if (!bson_iter_init_find(&it, doc, key)) return "";
  if (BSON_ITER_HOLDS_UTF8(&it)) return bson_iter_utf8(&it, nullptr);
  if (BSON_ITER_HOLDS_INT32(&it) || BSON_ITER_HOLDS_INT64(&it) || BSON_ITER_HOLDS_DOUBLE(&it))
    return std::to_string(bson_iter_as_int64(&it));
  if (BSON_ITER_HOLDS_DATE_TIME(&it)) {
    const int64_t ms = bson_iter_date_time(&it);
    time_t t = static_cast<time_t>(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    char buf[48];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
    return buf;
  }
  return "";
}

int dump(const char* url, const char* coll_name) {
  mongoc_init();
  scan(url, coll_name, 10000, [&](const bson_t* doc) {
    std::printf("%s\t%s\t%s\t%s\t%s\n", text(doc, "id").c_str(), text(doc, "name").c_str(),
                text(doc, "email").c_str(), text(doc, "position").c_str(),
                text(doc, "hire_date").c_str());
  });
  return 0;
}

int drop(const char* url) {
  mongoc_init();
  std::string db;
  mongoc_client_t* client = connect(url, db);
  mongoc_database_t* d = mongoc_client_get_database(client, db.c_str());
  bson_error_t err;
  if (!mongoc_database_drop(d, &err) && err.code != 26)
    die(std::string("dropping the database: ") + err.message);
  mongoc_database_destroy(d);
  mongoc_client_destroy(client);
  std::printf("{}\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  if ((cmd == "upsert" || cmd == "insert") && argc >= 5)
    return write(argv[2], argv[3], std::atoll(argv[4]), argc > 5 ? std::atoll(argv[5]) : 10000,
                 argc > 6 ? std::strtoull(argv[6], nullptr, 10) : 1, cmd == "insert");
  if (cmd == "read" && argc >= 4)
    return read(argv[2], argv[3], argc > 4 ? std::atoll(argv[4]) : 10000);
  if (cmd == "dump" && argc == 4) return dump(argv[2], argv[3]);
  if (cmd == "drop" && argc == 3) return drop(argv[2]);
  std::fprintf(
      stderr,
      "usage: sluice_mongodb_ceiling upsert|insert URL COLLECTION ROWS [BATCH] [SEED] | read URL "
      "COLLECTION [BATCH] | dump URL COLLECTION | drop URL\n");
  return 2;
}
