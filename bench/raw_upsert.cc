// sluice_raw_upsert: the raw batched upsert ceiling of a destination, for bench/destinations.
//
//   sluice_raw_upsert --target postgres|mysql|sqlite (--url URL | --path FILE) [--rows N]
//                     [--batch 10000] [--seed 1] [--method insert|copy]
//
// A plain, competent client loop: creates the `employees` table (postgres, mysql: the reference
// DDL, PRIMARY KEY id; sqlite: the table the destination creates; dropped first if it exists), then
// writes the rows sluice's generator source produces for count N and that seed (employee_row(seed,
// id, id - 1) for id 1..N) with upserts, one transaction per batch:
//   postgres  one multi-row INSERT ... VALUES (...),(...) ON CONFLICT (id) DO UPDATE SET ... with
//             text literals per batch (libpq, synchronous_commit as the server has it); with
//             --method copy instead: COPY into a temporary staging table, then one
//             INSERT ... SELECT ... ON CONFLICT per batch (informative: sluice's own method)
//   mysql     one multi-row INSERT ... ON DUPLICATE KEY UPDATE per batch (libmariadb, InnoDB)
//   sqlite    a prepared one-row INSERT ... ON CONFLICT (id) DO UPDATE stepped per row inside one
//             transaction per batch (journal_mode WAL, synchronous NORMAL: sluice's defaults), into
//             the table as the sqlite destination creates it (not the reference DDL: "id" INTEGER
//             PRIMARY KEY is SQLite's rowid, INT would be a separate index)
// --rows 0 only creates the table.
// Output (stdout), one JSON object: {"target", "rows", "batch", "seconds", "rows_per_s"}; seconds
// run from before connecting until the last commit returned (sqlite: from after the table was made
// and every row rendered, so that only SQLite's own work is timed).
#include <libpq-fe.h>
#include <mysql.h>
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "connectors/generator/employees.h"

namespace {

using sluice::generator::employee_row;
using sluice::generator::EmployeeRow;

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "sluice_raw_upsert: %s\n", msg.c_str());
  std::exit(1);
}

// Days since 1970-01-01 → "YYYY-MM-DD" (H. Hinnant's civil_from_days).
void append_date(std::string& out, int64_t z) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = unsigned(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t y = int64_t(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned d = doy - (153 * mp + 2) / 5 + 1;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  if (m <= 2) ++y;
  char buf[16];
  int n = std::snprintf(buf, sizeof buf, "%04lld-%02u-%02u", (long long)y, m, d);
  out.append(buf, size_t(n));
}

// Micros since the epoch (UTC) → "YYYY-MM-DD HH:MM:SS.ffffff".
void append_timestamp(std::string& out, int64_t micros) {
  int64_t secs = micros / 1000000, us = micros % 1000000;
  if (us < 0) us += 1000000, --secs;
  int64_t days = secs / 86400, sod = secs % 86400;
  if (sod < 0) sod += 86400, --days;
  append_date(out, days);
  char buf[32];
  int n = std::snprintf(buf, sizeof buf, " %02d:%02d:%02d.%06d", int(sod / 3600),
                        int(sod / 60 % 60), int(sod % 60), int(us));
  out.append(buf, size_t(n));
}

void append_quoted(std::string& out, std::string_view s) {
  out += '\'';
  for (char c : s) {
    if (c == '\'' || c == '\\') out += c;  // '' for SQL; \\ for MariaDB's default escaping
    out += c;
  }
  out += '\'';
}

void append_int(std::string& out, int64_t v) { out += std::to_string(v); }

void append_double(std::string& out, double v) {
  char buf[32];
  int n = std::snprintf(buf, sizeof buf, "%.17g", v);
  out.append(buf, size_t(n));
}

// "(id,'name','email',true,'position','date',salary,'updated','created')"
void append_row(std::string& out, const EmployeeRow& r, bool pg) {
  out += '(';
  append_int(out, r.id);
  out += ',';
  append_quoted(out, r.name());
  out += ',';
  append_quoted(out, r.email());
  out += ',';
  out += r.full_time ? "TRUE" : "FALSE";
  out += ',';
  append_quoted(out, r.position);
  out += ",'";
  append_date(out, r.hire_date);
  out += "',";
  append_double(out, r.salary);
  out += ",'";
  append_timestamp(out, r.updated_at);
  out += pg ? "+00'," : "',";
  out += '\'';
  append_timestamp(out, r.created_at);
  out += pg ? "+00'" : "'";
  out += ')';
}

constexpr const char* kColumns =
    "id, name, email, full_time, position, hire_date, salary, updated_at, created_at";

struct Options {
  std::string target, url, path;
  int64_t rows = 1000000;
  int64_t batch = 10000;
  uint64_t seed = 1;
  std::string method = "insert";  // postgres: insert (multi-row INSERT, the ceiling) or copy
};

// ---- PostgreSQL ------------------------------------------------------------------------------

void pg_exec(PGconn* c, const std::string& sql) {
  PGresult* r = PQexec(c, sql.c_str());
  const auto st = PQresultStatus(r);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    std::string e = PQresultErrorMessage(r);
    PQclear(r);
    die("postgres: " + e + " in: " + sql.substr(0, 200));
  }
  PQclear(r);
}

void run_postgres(const Options& o) {
  PGconn* c = PQconnectdb(o.url.c_str());
  if (PQstatus(c) != CONNECTION_OK) die(std::string("postgres: connect: ") + PQerrorMessage(c));
  pg_exec(c, "SET client_min_messages = warning");
  pg_exec(c, "DROP TABLE IF EXISTS employees");
  pg_exec(
      c,
      "CREATE TABLE employees (id INT NOT NULL, name VARCHAR(255), email VARCHAR(255), "
      "full_time BOOLEAN NOT NULL DEFAULT TRUE, position VARCHAR(100), hire_date DATE NOT NULL, "
      "salary REAL CHECK (salary >= 0), updated_at TIMESTAMPTZ DEFAULT NOW(), "
      "created_at TIMESTAMPTZ DEFAULT NOW(), PRIMARY KEY (id))");
  std::string sql;
  const std::string set =
      " ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, email = EXCLUDED.email, "
      "full_time = EXCLUDED.full_time, position = EXCLUDED.position, hire_date = EXCLUDED.hire_date, "
      "salary = EXCLUDED.salary, updated_at = EXCLUDED.updated_at, created_at = EXCLUDED.created_at";
  if (o.method ==
      "copy") {  // COPY into a temporary staging table, then one INSERT ... SELECT upsert
    pg_exec(c, "CREATE TEMP TABLE stage (LIKE employees INCLUDING DEFAULTS) ON COMMIT DELETE ROWS");
    const std::string copy = std::string("COPY stage (") + kColumns + ") FROM STDIN";
    const std::string merge = std::string("INSERT INTO employees (") + kColumns + ") SELECT " +
                              kColumns + " FROM stage" + set + "; COMMIT";
    for (int64_t a = 1; a <= o.rows; a += o.batch) {
      const int64_t b = std::min(o.rows, a + o.batch - 1);
      sql.clear();
      for (int64_t id = a; id <= b;
           ++id) {  // COPY text format; the generator's strings need no escaping
        const EmployeeRow r = employee_row(o.seed, id, uint64_t(id - 1));
        append_int(sql, r.id);
        sql += '\t';
        sql += r.name();
        sql += '\t';
        sql += r.email();
        sql += r.full_time ? "\tt\t" : "\tf\t";
        sql += r.position;
        sql += '\t';
        append_date(sql, r.hire_date);
        sql += '\t';
        append_double(sql, r.salary);
        sql += '\t';
        append_timestamp(sql, r.updated_at);
        sql += "+00\t";
        append_timestamp(sql, r.created_at);
        sql += "+00\n";
      }
      pg_exec(c, "BEGIN");
      PGresult* res = PQexec(c, copy.c_str());
      if (PQresultStatus(res) != PGRES_COPY_IN)
        die(std::string("postgres: COPY: ") + PQerrorMessage(c));
      PQclear(res);
      if (PQputCopyData(c, sql.data(), int(sql.size())) != 1 || PQputCopyEnd(c, nullptr) != 1)
        die(std::string("postgres: COPY data: ") + PQerrorMessage(c));
      while ((res = PQgetResult(c)) != nullptr) {
        if (PQresultStatus(res) != PGRES_COMMAND_OK)
          die(std::string("postgres: COPY: ") + PQresultErrorMessage(res));
        PQclear(res);
      }
      pg_exec(c, merge);
    }
    PQfinish(c);
    return;
  }
  for (int64_t a = 1; a <= o.rows; a += o.batch) {
    const int64_t b = std::min(o.rows, a + o.batch - 1);
    sql.clear();
    sql += "INSERT INTO employees (";
    sql += kColumns;
    sql += ") VALUES ";
    for (int64_t id = a; id <= b; ++id) {
      if (id != a) sql += ',';
      append_row(sql, employee_row(o.seed, id, uint64_t(id - 1)), true);
    }
    sql +=
        " ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, email = EXCLUDED.email, "
        "full_time = EXCLUDED.full_time, position = EXCLUDED.position, hire_date = EXCLUDED.hire_date, "
        "salary = EXCLUDED.salary, updated_at = EXCLUDED.updated_at, created_at = EXCLUDED.created_at";
    // One batch, one transaction: BEGIN; INSERT; COMMIT sent as one simple-query message.
    pg_exec(c, "BEGIN; " + sql + "; COMMIT");
  }
  PQfinish(c);
}

// ---- MariaDB / MySQL ---------------------------------------------------------------------------

std::string pct_decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out += char(std::strtol(std::string(s.substr(i + 1, 2)).c_str(), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

void my_exec(MYSQL* m, const std::string& sql) {
  if (mysql_real_query(m, sql.data(), sql.size()) != 0)
    die(std::string("mysql: ") + mysql_error(m) + " in: " + sql.substr(0, 200));
}

void run_mysql(const Options& o) {
  // mysql://user:password@host:port/database
  std::string_view u = o.url;
  if (u.substr(0, 8) != "mysql://")
    die("mysql: --url must be mysql://user:password@host:port/database");
  u.remove_prefix(8);
  std::string user, pass, host, db;
  unsigned port = 3306;
  if (auto at = u.rfind('@'); at != std::string_view::npos) {
    std::string_view cred = u.substr(0, at);
    u.remove_prefix(at + 1);
    auto colon = cred.find(':');
    user = pct_decode(cred.substr(0, colon));
    if (colon != std::string_view::npos) pass = pct_decode(cred.substr(colon + 1));
  }
  auto slash = u.find('/');
  std::string_view hp = u.substr(0, slash);
  if (slash != std::string_view::npos)
    db = pct_decode(u.substr(slash + 1, u.find('?', slash) - slash - 1));
  if (auto colon = hp.rfind(':'); colon != std::string_view::npos) {
    port = unsigned(std::stoul(std::string(hp.substr(colon + 1))));
    hp = hp.substr(0, colon);
  }
  host = hp;
  MYSQL* m = mysql_init(nullptr);
  if (!mysql_real_connect(m, host.c_str(), user.c_str(), pass.c_str(),
                          db.empty() ? nullptr : db.c_str(), port, nullptr, 0))
    die(std::string("mysql: connect: ") + mysql_error(m));
  my_exec(m, "SET NAMES utf8mb4");
  my_exec(m, "DROP TABLE IF EXISTS employees");
  my_exec(
      m,
      "CREATE TABLE employees (id INT NOT NULL, name VARCHAR(255), email VARCHAR(255), "
      "full_time BOOLEAN NOT NULL DEFAULT TRUE, position VARCHAR(100), hire_date DATE NOT NULL, "
      "salary FLOAT CHECK (salary >= 0), updated_at DATETIME(6) DEFAULT CURRENT_TIMESTAMP(6), "
      "created_at DATETIME(6) DEFAULT CURRENT_TIMESTAMP(6), PRIMARY KEY (id)) "
      "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4");
  if (mysql_autocommit(m, 0) != 0) die(std::string("mysql: autocommit: ") + mysql_error(m));
  std::string sql;
  for (int64_t a = 1; a <= o.rows; a += o.batch) {
    const int64_t b = std::min(o.rows, a + o.batch - 1);
    sql.clear();
    sql += "INSERT INTO employees (";
    sql += kColumns;
    sql += ") VALUES ";
    for (int64_t id = a; id <= b; ++id) {
      if (id != a) sql += ',';
      append_row(sql, employee_row(o.seed, id, uint64_t(id - 1)), false);
    }
    sql +=
        " ON DUPLICATE KEY UPDATE name = VALUES(name), email = VALUES(email), full_time = VALUES(full_time), "
        "position = VALUES(position), hire_date = VALUES(hire_date), salary = VALUES(salary), "
        "updated_at = VALUES(updated_at), created_at = VALUES(created_at)";
    my_exec(m, sql);
    if (mysql_commit(m) != 0) die(std::string("mysql: commit: ") + mysql_error(m));
  }
  mysql_close(m);
}

// ---- SQLite ----------------------------------------------------------------------------------

void lite_exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string e = err ? err : "?";
    sqlite3_free(err);
    die(std::string("sqlite: ") + e + " in: " + sql);
  }
}

void run_sqlite(const Options& o, std::chrono::steady_clock::time_point* started) {
  sqlite3* db = nullptr;
  if (sqlite3_open(o.path.c_str(), &db) != SQLITE_OK) die("sqlite: open " + o.path);
  lite_exec(db, "PRAGMA journal_mode = WAL");
  lite_exec(db, "PRAGMA synchronous = NORMAL");
  lite_exec(db, "DROP TABLE IF EXISTS employees");
  // The table exactly as the sqlite destination creates it: "id" INTEGER with PRIMARY KEY makes it
  // the rowid (the reference DDL's INT would add a separate index, a slower table than sluice's).
  lite_exec(db,
            "CREATE TABLE \"employees\" (\"id\" INTEGER, \"name\" TEXT, \"email\" TEXT, "
            "\"full_time\" INTEGER, \"position\" TEXT, \"hire_date\" TEXT, \"salary\" REAL, "
            "\"updated_at\" TEXT, \"created_at\" TEXT, PRIMARY KEY (\"id\"))");
  sqlite3_stmt* st = nullptr;
  const std::string sql =
      std::string("INSERT INTO employees (") + kColumns +
      ") VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT (id) DO UPDATE SET name = excluded.name, "
      "email = excluded.email, full_time = excluded.full_time, position = excluded.position, "
      "hire_date = excluded.hire_date, salary = excluded.salary, "
      "updated_at = excluded.updated_at, created_at = excluded.created_at";
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK)
    die(std::string("sqlite: prepare: ") + sqlite3_errmsg(db));
  // The rows are rendered before the clock starts: the ceiling is SQLite's own upsert rate.
  struct Rendered {
    int64_t id;
    bool full_time;
    double salary;
    std::string name, email, position, date, upd, cre;
  };
  std::vector<Rendered> rows;
  rows.reserve(size_t(o.rows));
  for (int64_t id = 1; id <= o.rows; ++id) {
    const EmployeeRow r = employee_row(o.seed, id, uint64_t(id - 1));
    Rendered x{.id = r.id,
               .full_time = r.full_time,
               .salary = r.salary,
               .name = r.name(),
               .email = r.email(),
               .position = std::string(r.position),
               .date = {},
               .upd = {},
               .cre = {}};
    append_date(x.date, r.hire_date);
    append_timestamp(x.upd, r.updated_at);
    x.upd += "Z";
    append_timestamp(x.cre, r.created_at);
    x.cre += "Z";
    rows.push_back(std::move(x));
  }
  *started = std::chrono::steady_clock::now();
  for (int64_t a = 1; a <= o.rows; a += o.batch) {
    const int64_t b = std::min(o.rows, a + o.batch - 1);
    lite_exec(db, "BEGIN");
    for (int64_t id = a; id <= b; ++id) {
      const Rendered& r = rows[size_t(id - 1)];
      sqlite3_bind_int64(st, 1, r.id);
      sqlite3_bind_text(st, 2, r.name.data(), int(r.name.size()), SQLITE_STATIC);
      sqlite3_bind_text(st, 3, r.email.data(), int(r.email.size()), SQLITE_STATIC);
      sqlite3_bind_int(st, 4, r.full_time ? 1 : 0);
      sqlite3_bind_text(st, 5, r.position.data(), int(r.position.size()), SQLITE_STATIC);
      sqlite3_bind_text(st, 6, r.date.data(), int(r.date.size()), SQLITE_STATIC);
      sqlite3_bind_double(st, 7, r.salary);
      sqlite3_bind_text(st, 8, r.upd.data(), int(r.upd.size()), SQLITE_STATIC);
      sqlite3_bind_text(st, 9, r.cre.data(), int(r.cre.size()), SQLITE_STATIC);
      if (sqlite3_step(st) != SQLITE_DONE) die(std::string("sqlite: step: ") + sqlite3_errmsg(db));
      sqlite3_reset(st);
    }
    lite_exec(db, "COMMIT");
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) die(std::string("missing value after ") + argv[i]);
      return argv[++i];
    };
    if (a == "--target") o.target = next();
    else if (a == "--url") o.url = next();
    else if (a == "--path") o.path = next();
    else if (a == "--rows") o.rows = std::stoll(next());
    else if (a == "--batch") o.batch = std::stoll(next());
    else if (a == "--seed") o.seed = std::stoull(next());
    else if (a == "--method") o.method = next();
    else if (a == "-h" || a == "--help") {
      std::puts(
          "usage: sluice_raw_upsert --target postgres|mysql|sqlite (--url URL | --path FILE) "
          "[--rows N] [--batch 10000] [--seed 1] [--method insert|copy]");
      return 0;
    } else {
      die("unknown argument " + std::string(a));
    }
  }
  if (o.batch < 1 || o.rows < 0) die("--batch must be >= 1 and --rows >= 0");
  auto t0 = std::chrono::steady_clock::now();
  if (o.target == "postgres") {
    if (o.url.empty()) die("--url is required for postgres");
    run_postgres(o);
  } else if (o.target == "mysql") {
    if (o.url.empty()) die("--url is required for mysql");
    run_mysql(o);
  } else if (o.target == "sqlite") {
    if (o.path.empty()) die("--path is required for sqlite");
    run_sqlite(o, &t0);
  } else {
    die("--target must be postgres, mysql or sqlite");
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "{\"target\": \"%s\", \"method\": \"%s\", \"rows\": %lld, \"batch\": %lld, \"seconds\": %.3f, \"rows_per_s\": %.0f}\n",
      o.target.c_str(), o.method.c_str(), (long long)o.rows, (long long)o.batch, s,
      s > 0 ? double(o.rows) / s : 0.0);
  return 0;
}
