// One libmongoc client per connector (a mongoc_client_t is not thread-safe; each connector uses
// its own from one thread), with RAII handles and the error classification both directions share.
#pragma once

#include <mongoc/mongoc.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "connectors/mongodb/mongodb_bson.h"
#include "sluice/result.h"

namespace sluice::mongodb {

struct ClientFree {
  void operator()(mongoc_client_t* c) const noexcept { mongoc_client_destroy(c); }
};
struct CollectionFree {
  void operator()(mongoc_collection_t* c) const noexcept { mongoc_collection_destroy(c); }
};
struct CursorFree {
  void operator()(mongoc_cursor_t* c) const noexcept { mongoc_cursor_destroy(c); }
};
struct BulkFree {
  void operator()(mongoc_bulk_operation_t* b) const noexcept { mongoc_bulk_operation_destroy(b); }
};
using ClientPtr = std::unique_ptr<mongoc_client_t, ClientFree>;
using CollectionPtr = std::unique_ptr<mongoc_collection_t, CollectionFree>;
using CursorPtr = std::unique_ptr<mongoc_cursor_t, CursorFree>;
using BulkPtr = std::unique_ptr<mongoc_bulk_operation_t, BulkFree>;

// A connected client and the database its URL names.
struct Connection {
  ClientPtr client;
  std::string database;
  // The URL's socketTimeoutMS (sluice's default unless the URL sets it); zero: none.
  std::chrono::milliseconds socket_timeout{0};
};

// Parses `url` (mongodb://[user:password@]host:port/database), connects and pings the server.
// `what` prefixes errors ("mongodb destination"). The password is never in a message.
Result<Connection> connect(const std::string& url, std::string_view what);

// A libmongoc error as a sluice error: lost connections and server selection are retriable;
// `context` says what was being done.
Error to_error(const bson_error_t& e, std::string_view context);

// Splits "db.coll" at its first dot; a name without a dot is a collection of `default_db`.
std::pair<std::string, std::string> split_namespace(std::string_view ns,
                                                    std::string_view default_db);

}  // namespace sluice::mongodb
