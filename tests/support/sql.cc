#include "support/sql.h"

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "support/env.h"

namespace sluice::test {

std::string joined(const Row& row, std::string_view null_text) {
  std::string line;
  for (size_t i = 0; i < row.size(); ++i) {
    if (i) line += '|';
    line += row[i] ? *row[i] : std::string(null_text);
  }
  return line;
}

std::vector<std::string> joined(const Rows& rows, std::string_view null_text) {
  std::vector<std::string> out;
  out.reserve(rows.size());
  for (const Row& r : rows) out.push_back(joined(r, null_text));
  return out;
}

// ── PostgreSQL ──────────────────────────────────────────────────────────────

PgUrl PgUrl::parse(const std::string& url) {
  PgUrl u;
  size_t p = url.find("://");
  if (p == std::string::npos) throw std::runtime_error("not a postgresql:// URL: " + url);
  u.scheme = url.substr(0, p);
  std::string rest = url.substr(p + 3);
  if (size_t q = rest.find('?'); q != std::string::npos) {
    u.query = rest.substr(q);
    rest.resize(q);
  }
  if (size_t at = rest.rfind('@'); at != std::string::npos) {
    u.userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
  }
  if (size_t slash = rest.find('/'); slash != std::string::npos) {
    u.db = rest.substr(slash + 1);
    rest.resize(slash);
  }
  u.hostport = rest;
  return u;
}

std::string PgUrl::str() const {
  return scheme + "://" + (userinfo.empty() ? "" : userinfo + "@") + hostport + "/" + db + query;
}

std::string pg_url_with_database(const std::string& url, const std::string& db) {
  PgUrl u = PgUrl::parse(url);
  u.db = db;
  return u.str();
}
std::string pg_url_with_credentials(const std::string& url, const std::string& user,
                                    const std::string& password) {
  PgUrl u = PgUrl::parse(url);
  u.userinfo = user + ":" + password;
  return u.str();
}
std::string pg_url_with_port(const std::string& url, int port) {
  PgUrl u = PgUrl::parse(url);
  u.hostport = u.hostport.substr(0, u.hostport.rfind(':')) + ":" + std::to_string(port);
  return u.str();
}

namespace {
std::string quoted(const std::string& s, char q) {
  std::string out(1, q);
  for (char c : s) {
    if (c == q) out += q;
    out += c;
  }
  return out + q;
}
}  // namespace

std::string sql_literal(const std::string& s) { return quoted(s, '\''); }
std::string pg_ident(const std::string& s) { return quoted(s, '"'); }
std::string my_ident(const std::string& s) { return quoted(s, '`'); }

PgClient::~PgClient() {
  if (c_) PQfinish(c_);
}

bool PgClient::connect(const std::string& url) {
  if (c_) PQfinish(c_);
  c_ = PQconnectdb(url.c_str());
  if (PQstatus(c_) != CONNECTION_OK) {
    ADD_FAILURE() << "cannot connect to PostgreSQL: " << PQerrorMessage(c_);
    PQfinish(c_);
    c_ = nullptr;
    return false;
  }
  PQsetNoticeProcessor(
      c_, [](void*, const char*) {}, nullptr);  // e.g. terminating an exited backend
  return true;
}

bool PgClient::exec(const std::string& sql, bool quiet) {
  if (!c_) return false;
  PGresult* r = PQexec(c_, sql.c_str());
  const auto st = PQresultStatus(r);
  const bool good = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
  if (!good && !quiet)
    ADD_FAILURE() << "SQL failed: " << PQresultErrorMessage(r) << "  in: " << sql.substr(0, 300);
  PQclear(r);
  return good;
}

Rows PgClient::query(const std::string& sql, bool quiet) {
  Rows rows;
  if (!c_) return rows;
  PGresult* r = PQexec(c_, sql.c_str());
  if (PQresultStatus(r) != PGRES_TUPLES_OK) {
    if (!quiet)
      ADD_FAILURE() << "query failed: " << PQresultErrorMessage(r)
                    << "  in: " << sql.substr(0, 300);
    PQclear(r);
    return rows;
  }
  const int n = PQntuples(r), m = PQnfields(r);
  rows.reserve(size_t(n));
  for (int i = 0; i < n; ++i) {
    Row row;
    row.reserve(size_t(m));
    for (int j = 0; j < m; ++j)
      row.push_back(PQgetisnull(r, i, j) ? std::nullopt
                                         : std::optional<std::string>(PQgetvalue(r, i, j)));
    rows.push_back(std::move(row));
  }
  PQclear(r);
  return rows;
}

std::string PgClient::scalar(const std::string& sql) {
  auto rows = query(sql);
  return rows.empty() || rows[0].empty() || !rows[0][0] ? std::string() : *rows[0][0];
}

std::string wait_for_walsender(PgClient& admin, const std::string& slot,
                               std::chrono::milliseconds timeout, const std::string& other_than) {
  const std::string sql =
      "SELECT active_pid FROM pg_replication_slots WHERE slot_name = '" + slot + "' AND active";
  for (const auto until = std::chrono::steady_clock::now() + timeout;;) {
    const std::string pid = admin.scalar(sql);
    if (!pid.empty() && pid != other_than) return pid;
    if (std::chrono::steady_clock::now() >= until) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

bool terminate_pg_backend(PgClient& admin, const std::string& pid) {
  return !pid.empty() && admin.scalar("SELECT pg_terminate_backend(" + pid + ")") == "t";
}

std::vector<std::string> drop_pg_slots(PgClient& admin, const std::string& db) {
  using namespace std::chrono_literals;
  std::vector<std::string> left;
  for (int attempt = 0; attempt < 100; ++attempt) {
    left.clear();
    auto slots = admin.query(
        "SELECT slot_name, coalesce(active_pid, 0) FROM pg_replication_slots WHERE database = " +
        sql_literal(db));
    for (const Row& s : slots) {
      if (*s[1] != "0") admin.exec("SELECT pg_terminate_backend(" + *s[1] + ")", true);
      if (!admin.exec("SELECT pg_drop_replication_slot(" + sql_literal(*s[0]) + ")", true))
        left.push_back(*s[0]);
    }
    if (left.empty()) break;
    std::this_thread::sleep_for(100ms);
  }
  return left;
}

PgDatabase::PgDatabase(std::string name, const char* var, const char* service)
    : name_(std::move(name)) {
  admin_url_ = required_env(var, service);
  if (admin_url_.empty()) return;
  if (!admin_.connect(admin_url_)) return;
  cleanup();
  if (!admin_.exec("CREATE DATABASE " + pg_ident(name_))) return;
  url_ = pg_url_with_database(admin_url_, name_);
  ok_ = conn_.connect(url_);
}

PgDatabase::~PgDatabase() {
  conn_ = PgClient();
  if (admin_.ok()) {
    const auto left = cleanup();
    EXPECT_TRUE(left.empty()) << "could not drop replication slot " << left.front();
  }
}

std::vector<std::string> PgDatabase::cleanup() {
  auto left = drop_pg_slots(admin_, name_);
  admin_.exec("DROP DATABASE IF EXISTS " + pg_ident(name_) + " WITH (FORCE)");
  return left;
}

// ── MySQL / MariaDB ─────────────────────────────────────────────────────────

MyUrl MyUrl::parse(const std::string& url) {
  MyUrl u;
  std::string rest = url.substr(url.find("://") + 3);
  const size_t at = rest.rfind('@');
  const std::string userinfo = rest.substr(0, at);
  rest = rest.substr(at + 1);
  u.user = userinfo.substr(0, userinfo.find(':'));
  u.password =
      userinfo.find(':') == std::string::npos ? "" : userinfo.substr(userinfo.find(':') + 1);
  const size_t slash = rest.find('/');
  u.db = slash == std::string::npos ? "" : rest.substr(slash + 1);
  rest = rest.substr(0, slash);
  u.host = rest.substr(0, rest.find(':'));
  if (rest.find(':') != std::string::npos) u.port = std::stoi(rest.substr(rest.find(':') + 1));
  return u;
}

std::string MyUrl::str() const {
  return "mysql://" + user + (password.empty() ? "" : ":" + password) + "@" + host + ":" +
         std::to_string(port) + "/" + db;
}

MysqlClient::~MysqlClient() { close(); }

void MysqlClient::close() {
  if (c_) mysql_close(c_);
  c_ = nullptr;
}

bool MysqlClient::connect(const std::string& url, const std::optional<std::string>& database) {
  close();
  const MyUrl u = MyUrl::parse(url);
  const std::string db = database ? *database : u.db;
  c_ = mysql_init(nullptr);
  mysql_optionsv(c_, MYSQL_SET_CHARSET_NAME, "utf8mb4");
  if (!mysql_real_connect(c_, u.host.c_str(), u.user.c_str(), u.password.c_str(),
                          db.empty() ? nullptr : db.c_str(), unsigned(u.port), nullptr,
                          CLIENT_MULTI_STATEMENTS)) {
    ADD_FAILURE() << "cannot connect to MariaDB: " << mysql_error(c_);
    close();
    return false;
  }
  return true;
}

bool MysqlClient::exec(const std::string& sql, bool quiet) {
  if (!c_) return false;
  if (mysql_real_query(c_, sql.data(), sql.size()) != 0) {
    if (!quiet) ADD_FAILURE() << "SQL failed: " << sql.substr(0, 300) << ": " << mysql_error(c_);
    return false;
  }
  // Every result of a multi-statement text; an error in a later statement fails too.
  for (;;) {
    if (MYSQL_RES* r = mysql_store_result(c_)) mysql_free_result(r);
    const int next = mysql_next_result(c_);
    if (next < 0) break;
    if (next > 0) {
      if (!quiet) ADD_FAILURE() << "SQL failed: " << sql.substr(0, 300) << ": " << mysql_error(c_);
      return false;
    }
  }
  return true;
}

Rows MysqlClient::query(const std::string& sql, bool quiet) {
  Rows out;
  if (!c_ || mysql_real_query(c_, sql.data(), sql.size()) != 0) {
    if (!quiet)
      ADD_FAILURE() << "SQL failed: " << sql.substr(0, 300) << ": "
                    << (c_ ? mysql_error(c_) : "not connected");
    return out;
  }
  MYSQL_RES* r = mysql_store_result(c_);
  if (!r) return out;
  const unsigned n = mysql_num_fields(r);
  while (MYSQL_ROW row = mysql_fetch_row(r)) {
    unsigned long* lens = mysql_fetch_lengths(r);
    Row x;
    for (unsigned i = 0; i < n; ++i)
      x.push_back(row[i] ? std::optional<std::string>(std::string(row[i], lens[i])) : std::nullopt);
    out.push_back(std::move(x));
  }
  mysql_free_result(r);
  while (mysql_next_result(c_) == 0) {
    if (MYSQL_RES* more = mysql_store_result(c_)) mysql_free_result(more);
  }
  return out;
}

std::string MysqlClient::scalar(const std::string& sql) {
  auto rows = query(sql);
  return rows.empty() || rows[0].empty() || !rows[0][0] ? "" : *rows[0][0];
}

MysqlDatabase::MysqlDatabase(std::string name, const char* var, const char* service)
    : base_(required_env(var, service)), name_(std::move(name)) {
  if (base_.empty()) return;
  if (!admin_.connect(base_, std::string())) return;
  admin_.exec("DROP DATABASE IF EXISTS " + my_ident(name_));
  if (!admin_.exec("CREATE DATABASE " + my_ident(name_) + " CHARACTER SET utf8mb4")) return;
  MyUrl u = MyUrl::parse(base_);
  u.db = name_;
  url_ = u.str();
  ok_ = sql_.connect(url_);
}

MysqlDatabase::~MysqlDatabase() {
  if (admin_.ok()) {
    admin_.exec("DROP DATABASE IF EXISTS " + my_ident(name_), true);
    for (const auto& user : users_) admin_.exec("DROP USER IF EXISTS '" + user + "'@'%'", true);
  }
}

std::string MysqlDatabase::user_url(const std::string& user_prefix,
                                    const std::vector<std::string>& grants) {
  const std::string user = unique_name(user_prefix, 32);
  users_.push_back(user);
  admin_.exec("CREATE USER '" + user + "'@'%' IDENTIFIED BY 'pw'");
  for (std::string g : grants) {
    for (size_t p; (p = g.find("{user}")) != std::string::npos;)
      g.replace(p, 6, "'" + user + "'@'%'");
    for (size_t p; (p = g.find("{db}")) != std::string::npos;) g.replace(p, 4, my_ident(name_));
    admin_.exec(g);
  }
  MyUrl u = MyUrl::parse(url_);
  u.user = user;
  u.password = "pw";
  return u.str();
}

}  // namespace sluice::test
