// A MongoDB-wire test client (libmongoc) for the FerretDB test server (scripts/services start
// mongodb, SLUICE_TEST_MONGODB_URL): a database per test, documents in and out as canonical
// Extended JSON, so a test compares exact BSON types and values.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "support/env.h"

typedef struct _mongoc_client_t mongoc_client_t;

namespace sluice::test {

inline std::string mongodb_url() { return required_env("SLUICE_TEST_MONGODB_URL", "mongodb"); }
// `url` with its database replaced by `db`.
std::string mongodb_url_with_database(const std::string& url, const std::string& db);

// A database unique to this test, dropped at the end.
class MongoTestDb {
 public:
  explicit MongoTestDb(const std::string& prefix, std::string url = mongodb_url());
  ~MongoTestDb();
  MongoTestDb(const MongoTestDb&) = delete;
  MongoTestDb& operator=(const MongoTestDb&) = delete;

  bool ok() const { return client_ != nullptr; }
  const std::string& name() const { return db_; }
  std::string url() const;
  // Inserts documents given as (relaxed or canonical) Extended JSON; false after ADD_FAILURE.
  bool insert(const std::string& collection, const std::vector<std::string>& documents);
  // The same in one insertMany per 1,000 documents.
  bool insert_many(const std::string& collection, const std::vector<std::string>& documents);
  // Every document of `collection` sorted by _id, as canonical Extended JSON; nullopt after a
  // failure.
  std::optional<std::vector<std::string>> documents(const std::string& collection);
  int64_t count(const std::string& collection);
  // Runs a database command given as Extended JSON; false after ADD_FAILURE.
  bool command(const std::string& json);
  // `fields` of every document of `collection`, as text (integers as digits, strings as
  // themselves, null or missing as nullopt, anything else as relaxed Extended JSON), rows sorted;
  // nullopt when the collection does not exist.
  std::optional<std::vector<std::vector<std::optional<std::string>>>> fields(
      const std::string& collection, const std::vector<std::string>& fields);
  // The field names of `collection`'s documents but _id, sorted, comma-separated ("" when none).
  std::string field_names(const std::string& collection);
  // Sets string field `field` of the document whose `id` field is `id`; false after ADD_FAILURE.
  bool set_string(const std::string& collection, int64_t id, const std::string& field,
                  const std::string& value);
  // The binary field `position` of the sluice_checkpoints document of `pipeline` ("" if none).
  std::string stored_position(const std::string& pipeline);

 private:
  bool exists(const std::string& collection);
  std::string base_url_;
  std::string db_;
  mongoc_client_t* client_ = nullptr;
};

}  // namespace sluice::test
