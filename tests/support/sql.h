// SQL clients of the test servers, one each: PostgreSQL (libpq) and MySQL/MariaDB (libmariadb),
// and a database of its own per test on each (created at start, dropped at the end), so tests run
// in parallel. Errors fail the current test (ADD_FAILURE) and return false or nothing.
#pragma once

#include <libpq-fe.h>
#include <mysql.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace sluice::test {

// A row of text values (nullopt = NULL), and rows.
using Row = std::vector<std::optional<std::string>>;
using Rows = std::vector<Row>;

// A row as "v1|v2|..." (NULL for nulls), for short expectations.
std::string joined(const Row& row, std::string_view null_text = "NULL");
std::vector<std::string> joined(const Rows& rows, std::string_view null_text = "NULL");

// ── PostgreSQL ──────────────────────────────────────────────────────────────

// postgresql://user:password@host:port/db?params, with parts replaced.
struct PgUrl {
  std::string scheme, userinfo, hostport, db, query;
  static PgUrl parse(const std::string& url);  // throws std::runtime_error on a non-URL
  std::string str() const;
};
std::string pg_url_with_database(const std::string& url, const std::string& db);
std::string pg_url_with_credentials(const std::string& url, const std::string& user,
                                    const std::string& password);
std::string pg_url_with_port(const std::string& url, int port);

// '...' with quotes doubled; "..." with quotes doubled.
std::string sql_literal(const std::string& s);
std::string pg_ident(const std::string& s);

class PgClient {
 public:
  PgClient() = default;
  explicit PgClient(const std::string& url) { connect(url); }
  PgClient(PgClient&& o) noexcept : c_(o.c_) { o.c_ = nullptr; }
  PgClient& operator=(PgClient&& o) noexcept {
    std::swap(c_, o.c_);
    return *this;
  }
  PgClient(const PgClient&) = delete;
  PgClient& operator=(const PgClient&) = delete;
  ~PgClient();

  bool connect(const std::string& url);
  bool ok() const { return c_ != nullptr && PQstatus(c_) == CONNECTION_OK; }
  PGconn* get() const { return c_; }

  // Runs one or more statements; false (and a test failure unless `quiet`) on error.
  bool exec(const std::string& sql, bool quiet = false);
  Rows query(const std::string& sql, bool quiet = false);
  // First column of the first row ("" if none or NULL).
  std::string scalar(const std::string& sql);
  // The backend's process id (for pg_terminate_backend).
  int backend_pid() const { return c_ ? PQbackendPID(c_) : 0; }

 private:
  PGconn* c_ = nullptr;
};

// Drops the replication slots of database `db` (terminating whoever holds them), retrying while a
// just-stopped walsender still holds one. Returns the slots it could not drop.
std::vector<std::string> drop_pg_slots(PgClient& admin, const std::string& db);

// The pid of the walsender streaming from replication slot `slot`, waiting at most `timeout` for
// the slot to be active under a pid other than `other_than` (after a reconnect: the new
// walsender); "" when it was not.
std::string wait_for_walsender(PgClient& admin, const std::string& slot,
                               std::chrono::milliseconds timeout,
                               const std::string& other_than = "");

// pg_terminate_backend(pid); true when the server signalled it.
bool terminate_pg_backend(PgClient& admin, const std::string& pid);

// A PostgreSQL database of its own for one test, named exactly `name` (dropped first if it exists),
// dropped with its replication slots at the end. `var`/`service`: which server.
class PgDatabase {
 public:
  explicit PgDatabase(std::string name, const char* var = "SLUICE_TEST_PG_URL",
                      const char* service = "postgres");
  ~PgDatabase();
  PgDatabase(const PgDatabase&) = delete;
  PgDatabase& operator=(const PgDatabase&) = delete;

  bool ok() const { return ok_; }
  const std::string& name() const { return name_; }
  const std::string& url() const { return url_; }              // this test's database
  const std::string& admin_url() const { return admin_url_; }  // the server's `postgres` database
  PgClient& sql() { return conn_; }
  PgClient& admin() { return admin_; }

 private:
  std::vector<std::string> cleanup();

  std::string name_, admin_url_, url_;
  PgClient admin_, conn_;
  bool ok_ = false;
};

// ── MySQL / MariaDB ─────────────────────────────────────────────────────────

// mysql://user:password@host:port/db (no percent-decoding: the test servers' URLs need none).
struct MyUrl {
  std::string user, password, host, db;
  int port = 3306;
  static MyUrl parse(const std::string& url);
  std::string str() const;
};

// `a`: backticks doubled.
std::string my_ident(const std::string& s);

class MysqlClient {
 public:
  MysqlClient() = default;
  // `database`: overrides the URL's (empty string: none).
  explicit MysqlClient(const std::string& url) { connect(url); }
  MysqlClient(const MysqlClient&) = delete;
  MysqlClient& operator=(const MysqlClient&) = delete;
  ~MysqlClient();

  // utf8mb4, multi-statements; the URL's database (or `database` when given).
  bool connect(const std::string& url, const std::optional<std::string>& database = std::nullopt);
  bool ok() const { return c_ != nullptr; }
  MYSQL* get() const { return c_; }
  void close();

  // Runs one or more statements (results discarded); false (and a test failure unless `quiet`).
  bool exec(const std::string& sql, bool quiet = false);
  Rows query(const std::string& sql, bool quiet = false);
  std::string scalar(const std::string& sql);
  unsigned long thread_id() const { return c_ ? mysql_thread_id(c_) : 0; }

 private:
  MYSQL* c_ = nullptr;
};

// A MySQL database of its own for one test, named exactly `name` (dropped first if it exists),
// dropped at the end with the users created through user_url().
class MysqlDatabase {
 public:
  explicit MysqlDatabase(std::string name, const char* var = "SLUICE_TEST_MYSQL_URL",
                         const char* service = "mariadb");
  ~MysqlDatabase();
  MysqlDatabase(const MysqlDatabase&) = delete;
  MysqlDatabase& operator=(const MysqlDatabase&) = delete;

  bool ok() const { return ok_; }
  const std::string& name() const { return name_; }
  const std::string& url() const { return url_; }
  const std::string& server_url() const { return base_; }
  MysqlClient& sql() { return sql_; }
  MysqlClient& admin() { return admin_; }
  // Creates a user with `grants` (statements where {user} and {db} are replaced); its URL on this
  // database.
  std::string user_url(const std::string& user_prefix, const std::vector<std::string>& grants);

 private:
  std::string base_, name_, url_;
  MysqlClient admin_, sql_;
  std::vector<std::string> users_;
  bool ok_ = false;
};

}  // namespace sluice::test
