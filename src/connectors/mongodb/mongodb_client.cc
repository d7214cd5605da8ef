// Connecting with libmongoc and classifying its errors (mongodb_client.h).
#include "connectors/mongodb/mongodb_client.h"

#include <fmt/format.h>

#include <spdlog/spdlog.h>

#include <sys/mman.h>
#include <unistd.h>

#include <mutex>

#include "sluice/secrets.h"

namespace sluice::mongodb {

namespace {
void init_driver() {
  static std::once_flag once;
  // mongoc_init is process-wide; mongoc_cleanup is left to process exit (other threads may still
  // hold clients while the process ends).
  std::call_once(once, [] {
    mongoc_init();
    // libmongoc's own log lines (warnings a server without endSessions causes, …) go to the debug
    // log, not raw to stderr: the errors that matter come back through bson_error_t.
    mongoc_log_set_handler([](mongoc_log_level_t, const char* domain, const char* message,
                              void*) { spdlog::debug("libmongoc {}: {}", domain, message); },
                           nullptr);
  });
}

// libmongoc, as Debian builds it, initialises itself when the library is loaded and keeps its
// performance counters in a shared-memory file, /dev/shm/mongoc-<pid>, that only a clean exit
// removes. Every sluice killed (kill -9, the OOM killer) left one behind, and a later process given
// the same pid could not create its own: libmongoc then printed "Falling back to malloc for
// counters." raw on stderr, before main, in front of our one-line errors. The mapping outlives its
// name, so the name is removed as soon as this process starts (after every library's constructors,
// before main): a crash leaves nothing behind to collide with.
const struct ForgetCounterFile {
  ForgetCounterFile() { shm_unlink(fmt::format("/mongoc-{}", getpid()).c_str()); }
} forget_counter_file;

struct UriFree {
  void operator()(mongoc_uri_t* u) const noexcept { mongoc_uri_destroy(u); }
};
}  // namespace

Error to_error(const bson_error_t& e, std::string_view context) {
  bool retriable = e.domain == MONGOC_ERROR_STREAM || e.domain == MONGOC_ERROR_SERVER_SELECTION ||
                   e.domain == MONGOC_ERROR_PROTOCOL || (e.domain == MONGOC_ERROR_WRITE_CONCERN) ||
                   (e.domain == MONGOC_ERROR_CLIENT && e.code == MONGOC_ERROR_CLIENT_AUTHENTICATE);
  Errc code = retriable ? Errc::connection : Errc::data;
  if (e.domain == MONGOC_ERROR_CLIENT && e.code == MONGOC_ERROR_CLIENT_AUTHENTICATE) {
    code = Errc::auth;
    retriable = false;
  }
  return Error(
      code,
      redact(fmt::format("{}: {} (domain {}, code {})", context, e.message, e.domain, e.code)),
      retriable);
}

Result<Connection> connect(const std::string& url, std::string_view what) {
  init_driver();
  register_url_secret(url);
  bson_error_t err;
  std::unique_ptr<mongoc_uri_t, UriFree> uri(mongoc_uri_new_with_error(url.c_str(), &err));
  if (!uri)
    return Error(Errc::config, redact(fmt::format("{}: `url` is not a MongoDB URL ({}); write "
                                                  "mongodb://[user:password@]host:port/database",
                                                  what, err.message)));
  const char* db = mongoc_uri_get_database(uri.get());
  if (db == nullptr || *db == '\0')
    return Error(
        Errc::config,
        fmt::format("{}: `url` names no database; write mongodb://host:port/database", what));
  // Fail fast rather than wait libmongoc's default 30 s to select a server: the runtime retries.
  if (!mongoc_uri_has_option(uri.get(), MONGOC_URI_SERVERSELECTIONTIMEOUTMS))
    mongoc_uri_set_option_as_int32(uri.get(), MONGOC_URI_SERVERSELECTIONTIMEOUTMS, 5000);
  if (!mongoc_uri_has_option(uri.get(), MONGOC_URI_CONNECTTIMEOUTMS))
    mongoc_uri_set_option_as_int32(uri.get(), MONGOC_URI_CONNECTTIMEOUTMS, 5000);
  // A server that accepted a command and never answers (seen with FerretDB after a restart) must
  // not hold the pipeline forever: a socket timeout fails the operation, which is retried on a
  // new connection. libmongoc's default is 5 minutes.
  if (!mongoc_uri_has_option(uri.get(), MONGOC_URI_SOCKETTIMEOUTMS))
    mongoc_uri_set_option_as_int32(uri.get(), MONGOC_URI_SOCKETTIMEOUTMS, 60000);
  Connection c;
  c.database = db;
  c.socket_timeout = std::chrono::milliseconds(
      mongoc_uri_get_option_as_int32(uri.get(), MONGOC_URI_SOCKETTIMEOUTMS, 0));
  c.client.reset(mongoc_client_new_from_uri_with_error(uri.get(), &err));
  if (!c.client) return to_error(err, std::string(what) + ": cannot create a client");
  mongoc_client_set_error_api(c.client.get(), MONGOC_ERROR_API_VERSION_2);
  mongoc_client_set_appname(c.client.get(), "sluice");
  BsonPtr ping(BCON_NEW("ping", BCON_INT32(1)));
  bson_t reply;
  bool ok =
      mongoc_client_command_simple(c.client.get(), "admin", ping.get(), nullptr, &reply, &err);
  bson_destroy(&reply);
  if (!ok) {
    Error e = to_error(err, fmt::format("{}: cannot reach the server", what));
    return Error(e.code() == Errc::data ? Errc::connection : e.code(), e.message(),
                 e.code() != Errc::auth);
  }
  return c;
}

std::pair<std::string, std::string> split_namespace(std::string_view ns,
                                                    std::string_view default_db) {
  size_t dot = ns.find('.');
  if (dot == std::string_view::npos) return {std::string(default_db), std::string(ns)};
  return {std::string(ns.substr(0, dot)), std::string(ns.substr(dot + 1))};
}

}  // namespace sluice::mongodb
