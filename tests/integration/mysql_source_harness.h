// Helpers for tests of the mysql source against the real MariaDB test server (scripts/services
// start mariadb): SLUICE_TEST_MYSQL_URL (missing fails the test), one database per test (created at
// start, dropped at the end), libmariadb for SQL, the source in-process (the Reader of
// pg_harness.h) and pipeline files for the sluice binary.
#pragma once

#include <mysql.h>

#include <random>

#include "integration/pg_harness.h"

namespace sluice::mytest {

using namespace std::chrono_literals;
using pgtest::Reader;

struct MyUrl {
  std::string user, password, host, db;
  int port = 3306;
  static MyUrl parse(const std::string& url) {
    MyUrl u;
    std::string rest = url.substr(url.find("://") + 3);
    const size_t at = rest.rfind('@');
    const std::string userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    u.user = userinfo.substr(0, userinfo.find(':'));
    u.password = userinfo.find(':') == std::string::npos ? "" : userinfo.substr(userinfo.find(':') + 1);
    const size_t slash = rest.find('/');
    u.db = slash == std::string::npos ? "" : rest.substr(slash + 1);
    rest = rest.substr(0, slash);
    u.host = rest.substr(0, rest.find(':'));
    if (rest.find(':') != std::string::npos) u.port = std::stoi(rest.substr(rest.find(':') + 1));
    return u;
  }
  std::string str() const {
    return "mysql://" + user + (password.empty() ? "" : ":" + password) + "@" + host + ":" + std::to_string(port) + "/" + db;
  }
};

class MyConn {
 public:
  MyConn() = default;
  explicit MyConn(const std::string& url) { connect(url); }
  MyConn(const MyConn&) = delete;
  MyConn& operator=(const MyConn&) = delete;
  ~MyConn() {
    if (c_) mysql_close(c_);
  }
  bool connect(const std::string& url) {
    const MyUrl u = MyUrl::parse(url);
    c_ = mysql_init(nullptr);
    mysql_optionsv(c_, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    if (!mysql_real_connect(c_, u.host.c_str(), u.user.c_str(), u.password.c_str(), u.db.empty() ? nullptr : u.db.c_str(),
                            unsigned(u.port), nullptr, CLIENT_MULTI_STATEMENTS)) {
      ADD_FAILURE() << "cannot connect to MariaDB: " << mysql_error(c_);
      mysql_close(c_);
      c_ = nullptr;
      return false;
    }
    return true;
  }
  bool ok() const { return c_ != nullptr; }
  MYSQL* get() const { return c_; }
  bool exec(const std::string& sql, bool quiet = false) {
    if (!c_) return false;
    if (mysql_real_query(c_, sql.data(), sql.size()) != 0) {
      if (!quiet) ADD_FAILURE() << "SQL failed: " << sql.substr(0, 300) << ": " << mysql_error(c_);
      return false;
    }
    do {
      if (MYSQL_RES* r = mysql_store_result(c_)) mysql_free_result(r);
    } while (mysql_next_result(c_) == 0);
    return true;
  }
  std::vector<pgtest::Row> query(const std::string& sql) {
    std::vector<pgtest::Row> out;
    if (!c_ || mysql_real_query(c_, sql.data(), sql.size()) != 0) {
      ADD_FAILURE() << "SQL failed: " << sql << ": " << (c_ ? mysql_error(c_) : "not connected");
      return out;
    }
    MYSQL_RES* r = mysql_store_result(c_);
    if (!r) return out;
    const unsigned n = mysql_num_fields(r);
    while (MYSQL_ROW row = mysql_fetch_row(r)) {
      unsigned long* lens = mysql_fetch_lengths(r);
      pgtest::Row x;
      for (unsigned i = 0; i < n; ++i)
        x.push_back(row[i] ? std::optional<std::string>(std::string(row[i], lens[i])) : std::nullopt);
      out.push_back(std::move(x));
    }
    mysql_free_result(r);
    return out;
  }
  std::string scalar(const std::string& sql) {
    auto rows = query(sql);
    return rows.empty() || rows[0].empty() || !rows[0][0] ? "" : *rows[0][0];
  }

 private:
  MYSQL* c_ = nullptr;
};

inline std::string env_url() { return pgtest::env_url("SLUICE_TEST_MYSQL_URL", "mariadb"); }

inline std::string unique_name(const std::string& prefix) {
  std::random_device rd;
  return prefix + "_" + std::to_string(getpid()) + "_" + std::to_string(rd() % 1000000);
}

// A database of its own, dropped (with the users the test created) at the end.
class TestDb {
 public:
  explicit TestDb(const std::string& name) : base_(env_url()) {
    if (base_.empty()) return;
    name_ = unique_name("sl_" + name);
    admin_.connect(base_);
    admin_.exec("CREATE DATABASE `" + name_ + "` CHARACTER SET utf8mb4");
    MyUrl u = MyUrl::parse(base_);
    u.db = name_;
    url_ = u.str();
    sql_.connect(url_);
  }
  ~TestDb() {
    if (admin_.ok()) {
      admin_.exec("DROP DATABASE IF EXISTS `" + name_ + "`", true);
      for (const auto& user : users_) admin_.exec("DROP USER IF EXISTS '" + user + "'@'%'", true);
    }
  }
  const std::string& name() const { return name_; }
  const std::string& url() const { return url_; }
  MyConn& sql() { return sql_; }
  MyConn& admin() { return admin_; }
  // Creates a user with `grants` (statements with {user}); returns its URL on this database.
  std::string user_url(const std::string& user_prefix, const std::vector<std::string>& grants) {
    const std::string user = unique_name(user_prefix).substr(0, 32);
    users_.push_back(user);
    admin_.exec("CREATE USER '" + user + "'@'%' IDENTIFIED BY 'pw'");
    for (std::string g : grants) {
      for (size_t p; (p = g.find("{user}")) != std::string::npos;) g.replace(p, 6, "'" + user + "'@'%'");
      for (size_t p; (p = g.find("{db}")) != std::string::npos;) g.replace(p, 4, "`" + name_ + "`");
      admin_.exec(g);
    }
    MyUrl u = MyUrl::parse(url_);
    u.user = user;
    u.password = "pw";
    return u.str();
  }

 private:
  std::string base_, name_, url_;
  MyConn admin_, sql_;
  std::vector<std::string> users_;
};

inline std::unique_ptr<Source> make_source(const std::map<std::string, std::string>& text) {
  const ConnectorSpec* spec = Registry::builtin().connector("mysql");
  if (spec == nullptr || spec->make_source == nullptr) {
    ADD_FAILURE() << "no mysql source in the registry";
    return nullptr;
  }
  Settings s(spec->source_settings);
  if (auto err = settings_from_text(spec->source_settings, text, &s)) {
    ADD_FAILURE() << "settings: " << *err;
    return nullptr;
  }
  auto src = spec->make_source(s);
  if (!src.ok()) {
    ADD_FAILURE() << "make_source: " << src.error().message();
    return nullptr;
  }
  return std::move(src.value());
}

inline ConnectorContext context(const std::string& pipeline, ConnectorStats* stats = nullptr) {
  ConnectorContext ctx;
  ctx.pipeline_id = pipeline;
  ctx.connector = "mysql";
  ctx.stats = stats;
  return ctx;
}

// Field of a record's after/before image; absent Value when missing.
inline Value field(const Value& obj, std::string_view name) {
  const Value* v = obj.is_object() ? obj.find(name) : nullptr;
  return v ? *v : Value();
}

// A pipeline file: mysql source → `destination` (YAML flow map of the destination).
inline std::string pipeline_yaml(const std::string& id, const std::string& url, const std::string& tables,
                                 const std::string& destination, const std::string& extra_source = "",
                                 size_t max_records = 1000) {
  return "version: 1\n"
         "pipelines:\n"
         "  - id: " + id + "\n"
         "    source:\n"
         "      connector: mysql\n"
         "      settings:\n"
         "        url: \"" + url + "\"\n"
         "        tables: [" + tables + "]\n" + extra_source +
         "    destination: " + destination + "\n"
         "    batch: {max_records: " + std::to_string(max_records) + ", linger_ms: 20}\n"
         "checkpoints: {path: state/checkpoints.db}\n"
         "http: {enabled: false}\n";
}

}  // namespace sluice::mytest

namespace sluice::mytest {

// Rows of `mysql_sql` and of `sqlite_sql` on the SQLite file, as text; the number of differences.
inline int diff_mysql_sqlite(MyConn& my, const std::string& mysql_sql, const std::filesystem::path& sqlite_path,
                             const std::string& sqlite_sql, bool report = true) {
  const auto want = my.query(mysql_sql);
  std::vector<pgtest::Row> got;
  try {
    if (!std::filesystem::exists(sqlite_path)) return int(want.size()) + 1;
    e2e::Db db(sqlite_path);
    if (!db.query(sqlite_sql, [&](sqlite3_stmt* st) {
          pgtest::Row r;
          for (int i = 0; i < sqlite3_column_count(st); ++i) {
            if (sqlite3_column_type(st, i) == SQLITE_NULL) r.push_back(std::nullopt);
            else r.push_back(e2e::column_text(st, i));
          }
          got.push_back(std::move(r));
        }))
      return int(want.size()) + 1;
  } catch (const std::exception&) {
    return int(want.size()) + 1;
  }
  int bad = std::abs(int(want.size()) - int(got.size()));
  for (size_t i = 0; i < std::min(want.size(), got.size()); ++i) {
    if (want[i] != got[i]) {
      if (report && bad < 3)
        ADD_FAILURE() << "row " << i << " differs: mysql " << (want[i][0] ? *want[i][0] : "NULL") << " vs sqlite "
                      << (got[i][0] ? *got[i][0] : "NULL");
      ++bad;
    }
  }
  if (report && want.size() != got.size()) ADD_FAILURE() << "mysql has " << want.size() << " rows, sqlite " << got.size();
  return bad;
}

// Keeps inserting, updating and deleting rows of `table` (id INT PRIMARY KEY, v INT, note
// VARCHAR) in small transactions until stopped.
class Writer {
 public:
  Writer(const std::string& url, const std::string& table, int first_id, int max_steps = 1 << 30)
      : url_(url), table_(table), next_(first_id), max_steps_(max_steps) {
    thread_ = std::thread([this] { run(); });
  }
  ~Writer() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int steps() const { return steps_.load(); }
  bool failed() const { return failed_.load(); }

 private:
  void run() {
    MyConn c(url_);
    std::mt19937 rng(42);
    while (!stop_ && steps_ < max_steps_) {
      std::string sql = "BEGIN; INSERT INTO " + table_ + " VALUES (" + std::to_string(next_) + ", " +
                        std::to_string(rng() % 1000) + ", 'w'), (" + std::to_string(next_ + 1) + ", 1, 'w'); UPDATE " +
                        table_ + " SET v = v + 1, note = 'u' WHERE id = " + std::to_string(rng() % next_) +
                        "; DELETE FROM " + table_ + " WHERE id = " + std::to_string(rng() % next_) + "; COMMIT";
      next_ += 2;
      if (!c.exec(sql, true)) {
        failed_ = true;
        return;
      }
      ++steps_;
    }
  }
  std::string url_, table_;
  int next_;
  int max_steps_;
  std::atomic<bool> stop_{false}, failed_{false};
  std::atomic<int> steps_{0};
  std::thread thread_;
};

}  // namespace sluice::mytest
