#include "connectors/mysql/mysql_destination.h"

#include <fmt/format.h>
#include <mysqld_error.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "connectors/mysql/mysql_connection.h"
#include "connectors/mysql/mysql_dialect.h"
#include "connectors/mysql/mysql_url.h"
#include "connectors/sql/keyed_sql_destination.h"
#include "sluice/json.h"
#include "sluice/temporal.h"

namespace sluice {

namespace {

const mysql::MysqlDialect kDialect;

// What DATE/DATETIME hold: the years 0000 to 9999; TIME: ±838:59:59.999999.
const int32_t kMinDay = days_from_civil(0, 1, 1);
const int32_t kMaxDay = days_from_civil(9999, 12, 31);
constexpr int64_t kMaxTime = (838 * 3600 + 59 * 60 + 59) * temporal::kMicrosPerSecond + 999999;

// The writer: DDL before the batch's transaction, then each run as multi-row statements of
// literals up to `max_statement_size`.
class MysqlDestination final : public sql::KeyedSqlDestination {
 public:
  MysqlDestination(MysqlDestinationOptions options, mysql::MysqlUrl url, RecordTemplate table)
      : KeyedSqlDestination(kDialect, keyed_options(options, std::move(table))),
        settings_(std::move(options)),
        url_(std::move(url)) {}

 private:
  static sql::KeyedSqlOptions keyed_options(const MysqlDestinationOptions& o,
                                            RecordTemplate table) {
    sql::KeyedSqlOptions k;
    k.destination = "mysql destination";
    k.table = std::move(table);
    k.checkpoint_in_destination = o.checkpoint_in_destination;
    k.isolate_rejected_rows = true;
    k.keep_dropped_columns = o.keep_dropped_columns;
    (void)sql::parse_reconcile(o.reconcile, &k.reconcile);  // checked by the settings table
    return k;
  }

  // ---- connection ----------------------------------------------------------------------------

  Status connect() override {
    conn_.reset();
    mysql::ConnectOptions o;
    o.url = url_;
    o.tls_mode = settings_.tls_mode;
    o.tls_ca = settings_.tls_ca;
    o.tls_cert = settings_.tls_cert;
    o.tls_key = settings_.tls_key;
    o.tls_key_password = settings_.tls_key_password;
    o.connect_timeout = settings_.connect_timeout;
    if (settings_.query_timeout.count() > 0) {
      o.read_timeout_s =
          unsigned(std::max<int64_t>(1, (settings_.query_timeout.count() + 999) / 1000));
      o.write_timeout_s = o.read_timeout_s;
    }
    o.tcp_user_timeout = settings_.tcp_user_timeout;
    auto c = mysql::MysqlConn::connect(o);
    if (!c) return c.error().with_context("mysql destination: ");
    conn_ = std::move(c.value());
    // UTC for timestamptz, strict mode so that rejected values fail instead of being truncated.
    for (const char* sql : {"SET SESSION time_zone='+00:00'",
                            "SET SESSION sql_mode='STRICT_ALL_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,"
                            "ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION'",
                            "SET SESSION autocommit=1"}) {
      if (Status s = exec_plain(sql, "configure the session"); !s) {
        conn_.reset();
        return s;
      }
    }
    return ok_status();
  }

  bool connected() const noexcept override { return bool(conn_); }
  void disconnect() noexcept override { conn_.reset(); }

  // DDL commits implicitly: it runs here, never inside a batch's transaction.
  Status prepare_session() override {
    if (!settings_.checkpoint_in_destination) return ok_status();
    return exec_plain(
        kDialect.checkpoint_table_ddl(kDialect.quote_identifier(sql::kCheckpointTable)),
        "cannot create table sluice_checkpoints");
  }

  Status begin() override { return exec_plain("START TRANSACTION", "cannot begin a transaction"); }
  Status commit() override { return exec_plain("COMMIT", "cannot commit"); }
  void abort() noexcept override {
    if (conn_ && mysql_real_query(sending(), "ROLLBACK", 8) != 0 &&
        mysql::classify_errno(conn_.last_errno()).connection_lost)
      conn_.reset();
  }

  bool supports_savepoints() const noexcept override { return true; }
  Status savepoint(std::string_view sql) override { return exec_plain(sql, "savepoint"); }

  // Runs a statement that returns no rows; on failure an error naming `what`.
  Status exec_plain(std::string_view sql, std::string_view what) {
    if (mysql_real_query(sending(), sql.data(), sql.size()) == 0) return ok_status();
    return server_error(what);
  }

  Error server_error(std::string_view what) {
    Error e = mysql::server_error(conn_.get(),
                                  fmt::format("mysql destination {}: {}", url_.redacted(), what));
    if (mysql::classify_errno(conn_.last_errno()).connection_lost) return lost(std::move(e));
    return e;
  }

  // The statement about to be sent: when it started (a lost connection after query_timeout was
  // the read/write timeout).
  MYSQL* sending() {
    sent_at_ = std::chrono::steady_clock::now();
    return conn_.get();
  }

  // The connection is lost (dropped here); when that came after query_timeout, it was the read
  // or write timeout: said so, and counted.
  Error lost(Error e) {
    conn_.reset();
    const auto timeout = settings_.query_timeout;
    if (timeout.count() <= 0 ||
        std::chrono::steady_clock::now() - sent_at_ < timeout - std::chrono::milliseconds(100))
      return e;
    connection_timed_out();
    return Error(Errc::connection,
                 fmt::format("mysql destination {}: no reply within query_timeout ({} ms): taking "
                             "the connection for dead and reconnecting",
                             url_.redacted(), timeout.count()),
                 true);
  }

  // ---- schema --------------------------------------------------------------------------------

  Status load_columns(sql::SqlTable& t) override {
    t.columns.clear();
    t.exists = false;
    sending();
    auto rows = conn_.query("SHOW COLUMNS FROM " + t.quoted, "");
    if (!rows) {
      if (conn_.last_errno() == ER_NO_SUCH_TABLE) return ok_status();
      return server_error(fmt::format("cannot read the columns of table `{}`", t.name));
    }
    for (const mysql::MysqlRow& row : rows.value())
      if (!row.empty() && row[0]) t.columns.emplace(*row[0], 0);
    t.exists = true;
    return ok_status();
  }

  Status ddl(const std::string& sql, sql::SqlTable& t, const Record& r, std::string_view what,
             bool adding_column) override {
    if (mysql_real_query(sending(), sql.data(), sql.size()) == 0) return ok_status();
    const unsigned no = conn_.last_errno();
    if (adding_column && no == ER_DUP_FIELDNAME)
      return ok_status();  // another writer added it meanwhile
    const sql::ErrorClass c = mysql::MysqlDialect::classify(no);
    Error e = record_error(t, r, c.code,
                           fmt::format("cannot {}: {} ({})", what, mysql_error(conn_.get()), no),
                           c.retriable);
    if (c.connection_lost) return lost(std::move(e));
    return e;
  }

  Status load_key_columns(sql::SqlTable& t, std::vector<std::string>& out) override {
    out.clear();
    sending();
    auto rows = conn_.query("SHOW KEYS FROM " + t.quoted + " WHERE Key_name = 'PRIMARY'", "");
    if (!rows) return server_error(fmt::format("cannot read the key of table `{}`", t.name));
    // Columns: Table, Non_unique, Key_name, Seq_in_index, Column_name, ... in key order.
    for (const mysql::MysqlRow& row : rows.value())
      if (row.size() > 4 && row[4]) out.emplace_back(*row[4]);
    return ok_status();
  }

  // `sluice doctor`: the privileges writing `t` needs (CREATE for a new table; INSERT, UPDATE,
  // DELETE, and ALTER to add columns, on an existing one), granted globally, on the database or
  // on the table (roles are not followed).
  void doctor_table(sql::SqlTable& t, std::vector<DoctorCheck>& out) override {
    using O = DoctorCheck::Outcome;
    // information_schema names the grantee 'user'@'host'; CURRENT_USER() says user@host.
    const std::string grantee =
        "CONCAT('''', SUBSTRING_INDEX(CURRENT_USER(), '@', 1), '''@''', "
        "SUBSTRING_INDEX(CURRENT_USER(), '@', -1), '''')";
    const std::string db = conn_.quoted(url_.database), name = conn_.quoted(t.name);
    auto rows = conn_.query(
        fmt::format("SELECT PRIVILEGE_TYPE FROM information_schema.USER_PRIVILEGES WHERE GRANTEE "
                    "= {0} UNION SELECT PRIVILEGE_TYPE FROM information_schema.SCHEMA_PRIVILEGES "
                    "WHERE GRANTEE = {0} AND TABLE_SCHEMA = {1} UNION SELECT PRIVILEGE_TYPE FROM "
                    "information_schema.TABLE_PRIVILEGES WHERE GRANTEE = {0} AND TABLE_SCHEMA = "
                    "{1} AND TABLE_NAME = {2}",
                    grantee, db, name),
        "cannot read the privileges");
    const std::string check =
        fmt::format("table {} can be {}", t.quoted, t.exists ? "written" : "created");
    if (!rows.ok()) {
      out.push_back({O::fail, check, rows.error().message(), "see the message"});
      return;
    }
    std::vector<std::string> have;
    for (const mysql::MysqlRow& r : rows.value())
      if (!r.empty() && r[0]) have.push_back(*r[0]);
    auto has = [&](std::string_view p) {
      return std::find(have.begin(), have.end(), p) != have.end() ||
             std::find(have.begin(), have.end(), "ALL PRIVILEGES") != have.end();
    };
    std::vector<const char*> needed = {"INSERT", "UPDATE", "DELETE"};
    if (!t.exists) needed.insert(needed.begin(), "CREATE");
    std::string missing;
    for (const char* p : needed)
      if (!has(p)) missing += std::string(missing.empty() ? "" : ", ") + p;
    const std::string user = "'" + url_.user + "'";
    const std::string on = mysql::quote_identifier(url_.database) + ".*";
    if (!missing.empty())
      out.push_back({O::fail, check,
                     fmt::format("user {} lacks {} on {}", user, missing,
                                 t.exists ? t.quoted : "the database"),
                     fmt::format("GRANT {}INSERT, UPDATE, DELETE, ALTER ON {} TO {}",
                                 t.exists ? "" : "CREATE, ", on, user)});
    else if (t.exists && !has("ALTER"))
      out.push_back({O::warn, check,
                     fmt::format("user {} lacks ALTER: a new source column would fail", user),
                     fmt::format("GRANT ALTER ON {} TO {}", on, user)});
    else
      out.push_back(
          {O::pass,
           check,
           t.exists ? "INSERT, UPDATE, DELETE, ALTER" : "not created yet; CREATE on the database",
           {}});
  }

  Result<std::vector<std::pair<std::string, std::string>>> column_types(sql::SqlTable& t) override {
    auto rows = conn_.query(
        fmt::format("SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS WHERE "
                    "TABLE_SCHEMA = DATABASE() AND TABLE_NAME = {} ORDER BY ORDINAL_POSITION",
                    conn_.quoted(t.name)),
        "cannot read the column types");
    if (!rows) return std::move(rows).error();
    std::vector<std::pair<std::string, std::string>> out;
    for (const mysql::MysqlRow& r : rows.value())
      if (r.size() > 1 && r[0]) out.emplace_back(*r[0], r[1].value_or(""));
    return out;
  }

  Result<bool> table_has_rows(sql::SqlTable& t) override {
    auto rows = conn_.query("SELECT 1 FROM " + t.quoted + " LIMIT 1", "");
    if (!rows) return server_error(fmt::format("cannot read table `{}`", t.name));
    return !rows.value().empty();
  }

  // ---- rows ----------------------------------------------------------------------------------

  Status write_run(size_t first, size_t end) override {
    const sql::PlannedRow& head = plan().row(first);
    const sql::SqlTable& t = *head.table;
    if (head.action == sql::RowAction::truncate) {
      sql_ = kDialect.truncate(t.quoted);
      if (mysql_real_query(sending(), sql_.data(), sql_.size()) != 0)
        return statement_error(first, first + 1);
      return ok_status();
    }
    refs_.clear();
    if (head.action == sql::RowAction::remove) {
      for (const Field& k : plan().keys(head)) refs_.push_back({k.name, true});
    } else {
      for (const Field& c : plan().columns(head))
        refs_.push_back({c.name, plan().is_key(head, c.name)});
    }
    for (size_t i = first; i < end;) {
      SLUICE_TRY_ASSIGN(size_t next, build(i, end));
      if (mysql_real_query(sending(), sql_.data(), sql_.size()) != 0)
        return statement_error(i, next);
      i = next;
    }
    return ok_status();
  }

  // Builds into sql_ the statement for rows [first, end) of one run, stopping early once it
  // reaches max_statement_size. Returns the index after the last row included.
  Result<size_t> build(size_t first, size_t end) {
    sql_.clear();
    const sql::PlannedRow& head = plan().row(first);
    const sql::SqlTable& t = *head.table;
    const bool is_delete = head.action == sql::RowAction::remove;
    const bool composite = is_delete && refs_.size() > 1;
    if (is_delete) {
      kDialect.append_delete_head(sql_, t.quoted, refs_);
    } else {
      kDialect.append_insert_head(sql_, t.quoted, refs_);
      sql_ += " VALUES ";
    }
    size_t i = first;
    for (; i < end && (i == first || sql_.size() < settings_.max_statement_size); ++i) {
      const sql::PlannedRow& row = plan().row(i);
      if (i != first) sql_ += ',';
      if (!is_delete || composite) sql_ += '(';
      bool first_value = true;
      for (const Field& f : is_delete ? plan().keys(row) : plan().columns(row)) {
        if (!first_value) sql_ += ',';
        first_value = false;
        SLUICE_TRY(append_literal(f.value, t, *row.record, f.name));
      }
      if (!is_delete || composite) sql_ += ')';
    }
    if (is_delete) sql_ += ')';
    else kDialect.append_upsert_tail(sql_, refs_);
    return i;
  }

  // DATETIME literal: the canonical timestamp with a space for the 'T', written without a copy.
  void append_datetime(int64_t micros) {
    const temporal::DayAndTime t = temporal::split_timestamp(micros);
    char buf[temporal::kMaxTimestampChars];
    char* p = temporal::write_date(buf, int32_t(t.days));
    *p++ = ' ';
    p = temporal::write_time(p, t.micros);
    conn_.append_quoted(sql_, std::string_view(buf, size_t(p - buf)));
  }

  Status append_literal(const Value& v, const sql::SqlTable& t, const Record& r,
                        std::string_view field) {
    switch (v.kind()) {
      case ValueKind::absent:
      case ValueKind::null: sql_ += "NULL"; break;
      case ValueKind::boolean: sql_ += v.as_bool() ? '1' : '0'; break;
      case ValueKind::int64: fmt::format_to(std::back_inserter(sql_), "{}", v.as_int64()); break;
      case ValueKind::uint64: fmt::format_to(std::back_inserter(sql_), "{}", v.as_uint64()); break;
      case ValueKind::float64: {
        double d = v.as_double();
        if (!std::isfinite(d))  // MySQL's DOUBLE has no NaN or infinities
          return unrepresentable(t, r, field,
                                 std::isnan(d) ? "NaN"
                                 : d > 0       ? "Infinity"
                                               : "-Infinity");
        size_t at = sql_.size();
        fmt::format_to(std::back_inserter(sql_), "{}", d);
        // An exponent makes it a DOUBLE literal (a plain "0.1" would be parsed as DECIMAL).
        if (sql_.find_first_of("eE", at) == std::string::npos) sql_ += "e0";
        break;
      }
      case ValueKind::decimal:
      case ValueKind::string:
      case ValueKind::json: conn_.append_quoted(sql_, v.as_text()); break;
      case ValueKind::bytes: {
        static constexpr char kHex[] = "0123456789ABCDEF";
        sql_ += "X'";
        for (unsigned char c : v.as_text()) {
          sql_ += kHex[c >> 4];
          sql_ += kHex[c & 15];
        }
        sql_ += '\'';
        break;
      }
      case ValueKind::date:
        if (v.as_date() < kMinDay || v.as_date() > kMaxDay)
          return unrepresentable(t, r, field, "date " + format_date(v.as_date()));
        conn_.append_quoted(sql_, format_date(v.as_date()));
        break;
      case ValueKind::time:
        if (v.as_micros() > kMaxTime || v.as_micros() < -kMaxTime)
          return unrepresentable(t, r, field, "time " + format_time(v.as_micros()));
        conn_.append_quoted(sql_, format_time(v.as_micros()));
        break;
      case ValueKind::timestamp:
      case ValueKind::timestamptz: {
        const int64_t day = temporal::split_timestamp(v.as_micros()).days;
        if (day < kMinDay || day > kMaxDay)
          return unrepresentable(t, r, field, "timestamp " + format_timestamp(v.as_micros()));
        append_datetime(v.as_micros());
        break;
      }
      case ValueKind::timetz:
        conn_.append_quoted(sql_, format_timetz(v.as_micros(), v.tz_offset_seconds()));
        break;
      case ValueKind::interval: conn_.append_quoted(sql_, format_interval(v.as_interval())); break;
      case ValueKind::uuid: conn_.append_quoted(sql_, format_uuid(v.uuid_bytes())); break;
      case ValueKind::array:
      case ValueKind::object: {
        json_.clear();
        encode_value_json(v, json_);
        conn_.append_quoted(sql_, json_);
        break;
      }
      default:
        return record_error(t, r, Errc::data,
                            fmt::format("field \"{}\" has an unsupported value kind", field));
    }
    return ok_status();
  }

  // A value MySQL cannot store: NULL when the settings say so, else the record is rejected.
  Status unrepresentable(const sql::SqlTable& t, const Record& r, std::string_view field,
                         const std::string& what) {
    if (settings_.unrepresentable_values == "null") {
      sql_ += "NULL";
      return ok_status();
    }
    return record_error(
        t, r, Errc::data,
        fmt::format("field \"{}\": MySQL cannot store {} (set unrepresentable_values: null to "
                    "write NULL instead, or on_error: dlq to send such records to the dead-letter "
                    "queue)",
                    field, what));
  }

  Error statement_error(size_t first, size_t end) {
    const unsigned no = conn_.last_errno();
    const sql::ErrorClass c = mysql::MysqlDialect::classify(no);
    const std::string msg = fmt::format("{} ({})", mysql_error(conn_.get()), no);
    const sql::PlannedRow& row = plan().row(first);
    Error e = end - first == 1
                  ? record_error(*row.table, *row.record, c.code, msg, c.retriable)
                  : Error(c.code,
                          fmt::format("mysql destination: table {}, {} records from key {}: {}",
                                      row.table->quoted, end - first,
                                      sql::record_key_text(*row.record), msg),
                          c.retriable);
    if (c.connection_lost) return lost(std::move(e));
    return e;
  }

  // ---- checkpoint_in_destination -------------------------------------------------------------

  Status save_position(std::string_view position) override {
    static const char* hex = "0123456789abcdef";
    std::string pipeline, position_hex = "X'";
    conn_.append_quoted(pipeline, pipeline_id_);
    for (unsigned char c : position) {
      position_hex += hex[c >> 4];
      position_hex += hex[c & 15];
    }
    position_hex += '\'';
    return exec_plain(kDialect.checkpoint_upsert(kDialect.quote_identifier(sql::kCheckpointTable),
                                                 pipeline, position_hex),
                      "cannot store the position in sluice_checkpoints");
  }

  Result<std::optional<std::string>> load_position(std::string_view pipeline_id) override {
    std::string pipeline;
    conn_.append_quoted(pipeline, pipeline_id);
    sending();
    auto rows = conn_.query(
        kDialect.checkpoint_select(kDialect.quote_identifier(sql::kCheckpointTable), pipeline), "");
    if (!rows) return server_error("cannot read the stored position");
    if (rows.value().empty() || rows.value()[0].empty()) return std::optional<std::string>();
    return std::optional<std::string>(rows.value()[0][0].value_or(std::string()));
  }

  Status erase_position(std::string_view pipeline_id) override {
    std::string pipeline;
    conn_.append_quoted(pipeline, pipeline_id);
    sending();
    if (Status s = conn_.exec(
            kDialect.checkpoint_delete(kDialect.quote_identifier(sql::kCheckpointTable), pipeline),
            "");
        !s)
      return server_error("cannot erase the stored position");
    return ok_status();
  }

  MysqlDestinationOptions settings_;
  mysql::MysqlUrl url_;
  mysql::MysqlConn conn_;
  std::chrono::steady_clock::time_point sent_at_{};  // the last statement sent (sending())
  // Per-run working memory, reused across batches.
  std::vector<sql::ColumnRef> refs_;
  std::string sql_;
  std::string json_;
};

}  // namespace

Result<std::unique_ptr<Destination>> make_mysql_destination(MysqlDestinationOptions options) {
  auto url =
      mysql::parse_mysql_url(options.url, {options.user, options.password, options.password_file});
  if (!url) return url.error().with_context("mysql destination: ");
  auto table = RecordTemplate::parse(options.table);
  if (!table) return table.error().with_context("mysql destination: ");
  if (Status s = mysql::validate_tls_options({options.tls_mode, options.tls_ca, options.tls_cert,
                                              options.tls_key, options.tls_key_password});
      !s)
    return s.error().with_context("mysql destination: ");
  if (options.max_statement_size < 1024) options.max_statement_size = 1024;
  return std::unique_ptr<Destination>(std::make_unique<MysqlDestination>(
      std::move(options), std::move(url.value()), std::move(table.value())));
}

}  // namespace sluice
