#include "connectors/mysql/mysql_destination.h"

#include <errmsg.h>
#include <fmt/format.h>
#include <mysql.h>
#include <mysqld_error.h>

#include <cmath>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "connectors/mysql/mysql_url.h"
#include "sluice/json.h"
#include "connectors/folded_identifiers.h"
#include "connectors/record_key.h"
#include "connectors/record_template.h"

namespace sluice {

namespace {

using mysql::MysqlUrl;


// `name` quoted with backticks, embedded backticks doubled.
void append_identifier(std::string& out, std::string_view name) {
  out += '`';
  for (char c : name) {
    if (c == '`') out += '`';
    out += c;
  }
  out += '`';
}

std::string quote_identifier(std::string_view name) {
  std::string out;
  append_identifier(out, name);
  return out;
}

using TableTemplate = RecordTemplate;

// True when the exact decimal text fits DECIMAL(65,30): ≤ 35 integer and ≤ 30 fraction digits.
bool decimal_fits(std::string_view s) noexcept {
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  size_t int_digits = 0, frac_digits = 0;
  bool seen_point = false, leading = true, any = false;
  for (char c : s) {
    if (c == '.') {
      if (seen_point) return false;
      seen_point = true;
      continue;
    }
    if (c < '0' || c > '9') return false;
    any = true;
    if (seen_point) {
      ++frac_digits;
    } else {
      if (leading && c == '0') continue;
      leading = false;
      ++int_digits;
    }
  }
  return any && int_digits <= 35 && frac_digits <= 30;
}

constexpr std::string_view kKeyText = "VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin";

// The column type of a field, from its first value (see the table in mysql_destination.h).
std::string_view column_type(const Value& v, bool key) {
  switch (v.kind()) {
    case ValueKind::boolean: return "TINYINT(1)";
    case ValueKind::int64: return "BIGINT";
    case ValueKind::uint64: return "BIGINT UNSIGNED";
    case ValueKind::float64: return "DOUBLE";
    case ValueKind::decimal:
      return decimal_fits(v.as_text()) ? "DECIMAL(65,30)" : key ? kKeyText : "LONGTEXT CHARACTER SET utf8mb4";
    case ValueKind::string: return key ? kKeyText : "LONGTEXT CHARACTER SET utf8mb4";
    case ValueKind::bytes: return key ? "VARBINARY(255)" : "LONGBLOB";
    case ValueKind::date: return "DATE";
    case ValueKind::time: return "TIME(6)";
    case ValueKind::timestamp:
    case ValueKind::timestamptz: return "DATETIME(6)";
    case ValueKind::timetz: return "VARCHAR(32)";
    case ValueKind::interval: return "VARCHAR(255)";
    case ValueKind::uuid: return "CHAR(36)";
    case ValueKind::json:
    case ValueKind::array:
    case ValueKind::object: return key ? kKeyText : "JSON";
    case ValueKind::null:
    case ValueKind::absent: break;
  }
  return key ? kKeyText : "LONGTEXT CHARACTER SET utf8mb4";
}

// How a server or client error number is handled.
struct ErrorClass {
  Errc code;
  bool retriable;
  bool connection_lost;  // the connection is unusable: reconnect before the next write
};

ErrorClass classify(unsigned no) noexcept {
  switch (no) {
    case ER_LOCK_DEADLOCK:      // 1213
    case ER_LOCK_WAIT_TIMEOUT:  // 1205
      return {Errc::conflict, true, false};
    case CR_SERVER_GONE_ERROR:  // 2006
    case CR_SERVER_LOST:        // 2013
    case CR_CONNECTION_ERROR:   // 2002
    case CR_CONN_HOST_ERROR:    // 2003
    case CR_UNKNOWN_HOST:       // 2005
    case CR_SERVER_LOST_EXTENDED:  // 2055
    case ER_SERVER_SHUTDOWN:    // 1053
    case ER_CONNECTION_KILLED:  // 1927 (MariaDB)
    case 4031:                  // MySQL 8: disconnected by the server (inactivity)
    case ER_CON_COUNT_ERROR:    // 1040 too many connections
      return {Errc::connection, true, true};
    case ER_ACCESS_DENIED_ERROR:  // 1045
      return {Errc::auth, false, true};
    case ER_DBACCESS_DENIED_ERROR:  // 1044
    case ER_TABLEACCESS_DENIED_ERROR:
    case ER_COLUMNACCESS_DENIED_ERROR:
    case ER_SPECIFIC_ACCESS_DENIED_ERROR:
      return {Errc::permission, false, false};
    case ER_BAD_DB_ERROR:  // 1049
    case ER_NO_SUCH_TABLE:
      return {Errc::not_found, false, false};
    default: break;
  }
  if (no >= 2000 && no < 3000) return {Errc::connection, true, true};  // client-side errors
  // Everything else the server rejects is about the data or statement: duplicate entries,
  // constraint and foreign-key failures, out-of-range values, data too long, invalid JSON...
  return {Errc::data, false, false};
}

// One row-producing unit of a batch: an upsert, a delete by key, or a truncate of a table.
enum class Action : uint8_t { upsert, remove, truncate };

struct TableState {
  std::string name;  // as rendered
  std::string quoted;
  bool exists = false;
  std::unordered_set<std::string, FoldedHash, FoldedEqual> columns;
};

struct Item {
  Action action;
  TableState* table;
  const Record* record;
  // Ranges in the batch's field list: key columns, then (upserts) the columns written, which
  // include the key columns.
  uint32_t key_begin, key_end;
  uint32_t col_begin, col_end;
};

class MysqlDestination final : public Destination {
 public:
  MysqlDestination(MysqlDestinationOptions options, MysqlUrl url, TableTemplate table)
      : options_(std::move(options)), url_(std::move(url)), template_(std::move(table)) {}
  ~MysqlDestination() override { disconnect(); }

  Status open(const ConnectorContext& ctx) override {
    pipeline_id_ = ctx.pipeline_id;
    if (Status s = connect(); !s) return s;
    if (!options_.checkpoint_in_destination) return ok_status();
    // DDL commits implicitly: it runs here, never inside a batch's transaction.
    return exec_plain(
        "CREATE TABLE IF NOT EXISTS `sluice_checkpoints` (`pipeline` VARCHAR(255) CHARACTER SET utf8mb4 COLLATE "
        "utf8mb4_bin NOT NULL PRIMARY KEY, `position` LONGBLOB NOT NULL, `updated_at` DATETIME(6) NOT NULL) "
        "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
        "cannot create table sluice_checkpoints");
  }

  bool stores_positions() const noexcept override { return options_.checkpoint_in_destination; }

  Result<std::optional<std::string>> stored_position(std::string_view pipeline_id) override {
    if (!options_.checkpoint_in_destination) return std::optional<std::string>();
    if (!conn_) {
      if (Status s = connect(); !s) return std::move(s).error();
    }
    sql_ = "SELECT `position` FROM `sluice_checkpoints` WHERE `pipeline` = ";
    append_quoted(pipeline_id);
    if (mysql_real_query(conn_, sql_.data(), sql_.size()) != 0)
      return server_error("cannot read the stored position");
    MYSQL_RES* res = mysql_store_result(conn_);
    if (!res) return server_error("cannot read the stored position");
    std::optional<std::string> out;
    if (MYSQL_ROW row = mysql_fetch_row(res)) {
      unsigned long* lengths = mysql_fetch_lengths(res);
      out = std::string(row[0] ? row[0] : "", row[0] ? lengths[0] : 0);
    }
    mysql_free_result(res);
    return out;
  }

  void write(Batch& batch, WriteDone done) override {
    Status s = write_batch(batch, /*one_row_per_statement=*/false);
    if (!s && s.error().code() == Errc::data && !s.error().retriable() && conn_) {
      // A multi-row statement failed (and was rolled back): replay the batch one row per
      // statement to name the record the server rejects. Should that succeed (the multi-row
      // statement itself was the problem), the batch is written.
      s = write_batch(batch, /*one_row_per_statement=*/true);
    }
    done(std::move(s));
  }

  void close() noexcept override { disconnect(); }

 private:
  // ---- connection ----------------------------------------------------------------------------

  Status connect() {
    disconnect();
    conn_ = mysql_init(nullptr);
    if (!conn_) return Error(Errc::internal, "mysql destination: out of memory");
    unsigned timeout = unsigned(std::max<int64_t>(1, options_.connect_timeout.count() / 1000));
    mysql_optionsv(conn_, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
    mysql_optionsv(conn_, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    my_bool yes = 1, no = 0;
    const std::string& mode = options_.tls_mode;
    if (mode == "preferred") {
      // Use TLS when the server offers it; do not insist and do not verify.
      mysql_ssl_set(conn_, nullptr, nullptr, nullptr, nullptr, nullptr);
      mysql_optionsv(conn_, MYSQL_OPT_SSL_ENFORCE, &no);
      mysql_optionsv(conn_, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &no);
    } else if (mode != "disabled") {
      mysql_ssl_set(conn_, nullptr, nullptr, nullptr, nullptr, nullptr);
      mysql_optionsv(conn_, MYSQL_OPT_SSL_ENFORCE, &yes);
      bool verify = mode == "verify_ca" || mode == "verify_identity";
      mysql_optionsv(conn_, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, verify ? &yes : &no);
      if (!options_.tls_ca.empty()) mysql_optionsv(conn_, MYSQL_OPT_SSL_CA, options_.tls_ca.c_str());
    }
    if (!mysql_real_connect(conn_, url_.host.c_str(), url_.user.c_str(), url_.password.c_str(),
                            url_.database.c_str(), url_.port, nullptr, 0)) {
      unsigned no_ = mysql_errno(conn_);
      ErrorClass c = classify(no_);
      Error e(c.code == Errc::data ? Errc::connection : c.code,
              fmt::format("mysql destination: cannot connect to {}: {} ({})", url_.redacted(),
                          mysql_error(conn_), no_),
              c.retriable);
      disconnect();
      return e;
    }
    // Some libmariadb versions fall back to plain text when the server lacks TLS even when
    // enforced: check the outcome rather than trust the option.
    if (mode != "disabled" && mode != "preferred" && mysql_get_ssl_cipher(conn_) == nullptr) {
      disconnect();
      return Error(Errc::connection,
                   fmt::format("mysql destination: {} does not offer TLS, which tls.mode {} requires; enable TLS "
                               "on the server or set tls.mode to preferred",
                               url_.redacted(), mode));
    }
    // UTC for timestamptz, strict mode so that rejected values fail instead of being truncated.
    for (const char* sql :
         {"SET SESSION time_zone='+00:00'",
          "SET SESSION sql_mode='STRICT_ALL_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,"
          "ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION'",
          "SET SESSION autocommit=1"}) {
      if (Status s = exec_plain(sql, "configure the session"); !s) {
        disconnect();
        return s;
      }
    }
    return ok_status();
  }

  void disconnect() noexcept {
    if (conn_) mysql_close(conn_);
    conn_ = nullptr;
    forget_tables();
  }

  void forget_tables() noexcept { tables_.clear(); }

  // Runs a statement that returns no rows; on failure an error naming `what`.
  Status exec_plain(std::string_view sql, std::string_view what) {
    if (mysql_real_query(conn_, sql.data(), sql.size()) == 0) return ok_status();
    return server_error(what);
  }

  Error server_error(std::string_view what) {
    unsigned no = mysql_errno(conn_);
    ErrorClass c = classify(no);
    Error e(c.code, fmt::format("mysql destination {}: {}: {} ({})", url_.redacted(), what, mysql_error(conn_), no),
            c.retriable);
    if (c.connection_lost) disconnect();
    return e;
  }

  // ---- batch ---------------------------------------------------------------------------------

  Status write_batch(const Batch& batch, bool one_row_per_statement) {
    if (batch.empty()) return ok_status();
    if (!conn_) {
      if (Status s = connect(); !s) return s;
    }
    if (Status s = plan(batch); !s) return s;
    if (Status s = exec_plain("START TRANSACTION", "cannot begin a transaction"); !s) return s;
    size_t max_rows = one_row_per_statement ? 1 : SIZE_MAX;
    size_t i = 0;
    while (i < items_.size()) {
      size_t end = i + 1;
      if (items_[i].action != Action::truncate) {
        while (end < items_.size() && end - i < max_rows && sql_.size() < options_.max_statement_size &&
               same_run(items_[i], items_[end]))
          ++end;
      }
      // `end` is provisional: build() stops early when the statement is full.
      auto built = build(i, std::min(end, items_.size()));
      if (!built) return rollback_and(std::move(built).error());
      size_t next = built.value();
      if (!sql_.empty() && mysql_real_query(conn_, sql_.data(), sql_.size()) != 0)
        return rollback_and(statement_error(i, next));
      i = next;
    }
    if (options_.checkpoint_in_destination && !batch.position().empty()) {
      // Inside the batch's transaction: the position commits (or rolls back) with the rows.
      static const char* hex = "0123456789abcdef";
      sql_ = "INSERT INTO `sluice_checkpoints` (`pipeline`, `position`, `updated_at`) VALUES (";
      append_quoted(pipeline_id_);
      sql_ += ", X'";
      for (unsigned char c : batch.position()) {
        sql_ += hex[c >> 4];
        sql_ += hex[c & 15];
      }
      sql_ += "', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE `position` = VALUES(`position`), `updated_at` = "
              "VALUES(`updated_at`)";
      if (Status s = exec_plain(sql_, "cannot store the position in sluice_checkpoints"); !s)
        return rollback_and(std::move(s).error());
    }
    if (Status s = exec_plain("COMMIT", "cannot commit"); !s) return rollback_and(std::move(s).error());
    return ok_status();
  }

  Status rollback_and(Error e) {
    if (conn_) {
      if (mysql_real_query(conn_, "ROLLBACK", 8) != 0 && classify(mysql_errno(conn_)).connection_lost)
        disconnect();
    }
    return e;
  }

  // Resolves every record to an item and brings the tables' columns up to date (DDL commits
  // implicitly in MySQL, so this happens before the batch's transaction).
  Status plan(const Batch& batch) {
    items_.clear();
    fields_.clear();
    for (const Record& r : batch.records()) {
      auto table = table_for(template_.render(r));
      if (!table) return std::move(table).error();
      TableState* t = table.value();

      if (is_truncate(r)) {
        items_.push_back(Item{Action::truncate, t, &r, 0, 0, 0, 0});
        continue;
      }
      uint32_t key_begin = uint32_t(fields_.size());
      Field scalar_key;
      for (const Field& f : record_key_fields(r, scalar_key)) fields_.push_back(f);
      uint32_t key_end = uint32_t(fields_.size());
      if (key_begin == key_end)
        return record_error(Errc::data, *t, r,
                            "record has no key; this destination upserts and deletes by key (give the "
                            "source table a primary key, or set the key with a processor)");

      if (r.op == Operation::remove) {
        for (uint32_t k = key_begin; k < key_end; ++k)
          if (fields_[k].value.is_null() || fields_[k].value.is_absent())
            return null_key(*t, r, fields_[k].name);
        items_.push_back(Item{Action::remove, t, &r, key_begin, key_end, 0, 0});
        continue;
      }

      // Columns: the present fields of `after`, then key fields `after` lacks. A key field's
      // value is taken from `after` when present there.
      uint32_t col_begin = uint32_t(fields_.size());
      if (r.after.is_object()) {
        for (const Field& f : r.after.fields())
          if (!f.value.is_absent()) fields_.push_back(f);
      } else if (!r.after.is_absent() && !r.after.is_null()) {
        fields_.push_back(Field{"value", r.after});  // a scalar payload (e.g. a message body)
      }
      uint32_t after_end = uint32_t(fields_.size());
      for (uint32_t k = key_begin; k < key_end; ++k) {
        bool in_after = false;
        for (uint32_t c = col_begin; c < after_end; ++c)
          if (iequals(fields_[c].name, fields_[k].name)) {
            fields_[k].value = fields_[c].value;  // the key as written
            in_after = true;
            break;
          }
        if (!in_after) fields_.push_back(fields_[k]);
        if (fields_[k].value.is_null() || fields_[k].value.is_absent()) return null_key(*t, r, fields_[k].name);
      }
      uint32_t col_end = uint32_t(fields_.size());

      // An update that changed the key: the row under the old key goes first.
      if (r.op == Operation::update && r.before.is_object()) {
        uint32_t old_begin = uint32_t(fields_.size());
        bool usable = true, differs = false;
        for (uint32_t k = key_begin; k < key_end; ++k) {
          const Value* old = r.before.find(fields_[k].name);
          if (!old || old->is_absent() || old->is_null()) {
            usable = false;
            break;
          }
          if (!(*old == fields_[k].value)) differs = true;
          fields_.push_back(Field{fields_[k].name, *old});
        }
        if (usable && differs)
          items_.push_back(Item{Action::remove, t, &r, old_begin, uint32_t(fields_.size()), 0, 0});
      }

      if (Status s = ensure_columns(*t, r, key_begin, key_end, col_begin, col_end); !s) return s;
      items_.push_back(Item{Action::upsert, t, &r, key_begin, key_end, col_begin, col_end});
    }
    return ok_status();
  }

  Error null_key(const TableState& t, const Record& r, std::string_view name) const {
    return record_error(Errc::data, t, r, fmt::format("key field \"{}\" is null; key values must not be null", name));
  }

  bool same_names(uint32_t a_begin, uint32_t a_end, uint32_t b_begin, uint32_t b_end) const noexcept {
    if (a_end - a_begin != b_end - b_begin) return false;
    for (uint32_t i = 0; i < a_end - a_begin; ++i)
      if (fields_[a_begin + i].name != fields_[b_begin + i].name) return false;
    return true;
  }

  bool same_run(const Item& a, const Item& b) const noexcept {
    if (a.action != b.action || a.table != b.table || b.action == Action::truncate) return false;
    if (!same_names(a.key_begin, a.key_end, b.key_begin, b.key_end)) return false;
    return a.action != Action::upsert || same_names(a.col_begin, a.col_end, b.col_begin, b.col_end);
  }

  bool is_key(const Item& it, std::string_view name) const noexcept {
    for (uint32_t k = it.key_begin; k < it.key_end; ++k)
      if (iequals(fields_[k].name, name)) return true;
    return false;
  }

  // Builds into sql_ the statement for items [first, end) (all of one run), stopping early once
  // it reaches max_statement_size. Returns the index after the last item included; an empty sql_
  // means nothing to run (a delete from a table that does not exist).
  Result<size_t> build(size_t first, size_t end) {
    sql_.clear();
    const Item& head = items_[first];
    TableState& t = *head.table;
    if (head.action != Action::upsert && !t.exists) {
      // Re-checked: another writer may have created it since.
      if (Status s = load_columns(t); !s) return std::move(s).error();
      if (!t.exists) return end;
    }
    if (head.action == Action::truncate) {
      sql_ = "DELETE FROM " + t.quoted;
      return first + 1;
    }
    size_t i = first;
    if (head.action == Action::remove) {
      sql_ = "DELETE FROM " + t.quoted + " WHERE ";
      bool composite = head.key_end - head.key_begin > 1;
      if (composite) sql_ += '(';
      for (uint32_t k = head.key_begin; k < head.key_end; ++k) {
        if (k != head.key_begin) sql_ += ',';
        append_identifier(sql_, fields_[k].name);
      }
      sql_ += composite ? ") IN (" : " IN (";
      for (; i < end && (i == first || sql_.size() < options_.max_statement_size); ++i) {
        const Item& it = items_[i];
        if (i != first) sql_ += ',';
        if (composite) sql_ += '(';
        for (uint32_t k = it.key_begin; k < it.key_end; ++k) {
          if (k != it.key_begin) sql_ += ',';
          if (Status s = append_literal(fields_[k].value, t, *it.record, fields_[k].name); !s)
            return std::move(s).error();
        }
        if (composite) sql_ += ')';
      }
      sql_ += ')';
      return i;
    }

    sql_ = "INSERT INTO " + t.quoted + " (";
    for (uint32_t c = head.col_begin; c < head.col_end; ++c) {
      if (c != head.col_begin) sql_ += ',';
      append_identifier(sql_, fields_[c].name);
    }
    sql_ += ") VALUES ";
    for (; i < end && (i == first || sql_.size() < options_.max_statement_size); ++i) {
      const Item& it = items_[i];
      if (i != first) sql_ += ',';
      sql_ += '(';
      for (uint32_t c = it.col_begin; c < it.col_end; ++c) {
        if (c != it.col_begin) sql_ += ',';
        if (Status s = append_literal(fields_[c].value, t, *it.record, fields_[c].name); !s)
          return std::move(s).error();
      }
      sql_ += ')';
    }
    sql_ += " ON DUPLICATE KEY UPDATE ";
    bool any = false;
    for (uint32_t c = head.col_begin; c < head.col_end; ++c) {
      if (is_key(head, fields_[c].name)) continue;
      if (any) sql_ += ',';
      any = true;
      append_identifier(sql_, fields_[c].name);
      sql_ += "=VALUES(";
      append_identifier(sql_, fields_[c].name);
      sql_ += ')';
    }
    if (!any) {  // only key columns: the row existing is all there is to it
      append_identifier(sql_, fields_[head.key_begin].name);
      sql_ += '=';
      append_identifier(sql_, fields_[head.key_begin].name);
    }
    return i;
  }

  void append_quoted(std::string_view text) {
    size_t at = sql_.size();
    sql_.resize(at + 2 * text.size() + 3);
    sql_[at] = '\'';
    unsigned long n = mysql_real_escape_string(conn_, sql_.data() + at + 1, text.data(), text.size());
    sql_.resize(at + 1 + n);
    sql_ += '\'';
  }

  void append_datetime(int64_t micros) {
    std::string s = format_timestamp(micros);
    for (char& c : s)
      if (c == 'T') c = ' ';
    append_quoted(s);
  }

  Status append_literal(const Value& v, const TableState& t, const Record& r, std::string_view field) {
    switch (v.kind()) {
      case ValueKind::absent:
      case ValueKind::null: sql_ += "NULL"; break;
      case ValueKind::boolean: sql_ += v.as_bool() ? '1' : '0'; break;
      case ValueKind::int64: fmt::format_to(std::back_inserter(sql_), "{}", v.as_int64()); break;
      case ValueKind::uint64: fmt::format_to(std::back_inserter(sql_), "{}", v.as_uint64()); break;
      case ValueKind::float64: {
        double d = v.as_double();
        if (!std::isfinite(d)) {
          sql_ += "NULL";  // MySQL's DOUBLE has no NaN or infinities
          break;
        }
        size_t at = sql_.size();
        fmt::format_to(std::back_inserter(sql_), "{}", d);
        // An exponent makes it a DOUBLE literal (a plain "0.1" would be parsed as DECIMAL).
        if (sql_.find_first_of("eE", at) == std::string::npos) sql_ += "e0";
        break;
      }
      case ValueKind::decimal:
      case ValueKind::string:
      case ValueKind::json: append_quoted(v.as_text()); break;
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
      case ValueKind::date: append_quoted(format_date(v.as_date())); break;
      case ValueKind::time: append_quoted(format_time(v.as_micros())); break;
      case ValueKind::timestamp:
      case ValueKind::timestamptz: append_datetime(v.as_micros()); break;
      case ValueKind::timetz: append_quoted(format_timetz(v.as_micros(), v.tz_offset_seconds())); break;
      case ValueKind::interval: append_quoted(format_interval(v.as_interval())); break;
      case ValueKind::uuid: append_quoted(format_uuid(v.uuid_bytes())); break;
      case ValueKind::array:
      case ValueKind::object: {
        json_.clear();
        encode_value_json(v, json_);
        append_quoted(json_);
        break;
      }
      default:
        return record_error(Errc::data, t, r, fmt::format("field \"{}\" has an unsupported value kind", field));
    }
    return ok_status();
  }

  Error statement_error(size_t first, size_t end) {
    unsigned no = mysql_errno(conn_);
    ErrorClass c = classify(no);
    std::string msg = fmt::format("{} ({})", mysql_error(conn_), no);
    const Item& it = items_[first];
    Error e = end - first == 1
                  ? record_error(c.code, *it.table, *it.record, msg, c.retriable)
                  : Error(c.code,
                          fmt::format("mysql destination: table `{}`, {} records from key {}: {}", it.table->name,
                                      end - first, key_text(*it.record), msg),
                          c.retriable);
    if (c.connection_lost) disconnect();
    return e;
  }

  // ---- schema --------------------------------------------------------------------------------

  Result<TableState*> table_for(std::string_view name) {
    auto it = tables_.find(name);
    if (it == tables_.end()) {
      auto t = std::make_unique<TableState>();
      t->name = std::string(name);
      t->quoted = quote_identifier(name);
      if (Status s = load_columns(*t); !s) return std::move(s).error();
      it = tables_.emplace(t->name, std::move(t)).first;
    }
    return it->second.get();
  }

  // Reads the table's columns; `exists` is false if there is no such table.
  Status load_columns(TableState& t) {
    std::string sql = "SHOW COLUMNS FROM " + t.quoted;
    t.columns.clear();
    t.exists = false;
    if (mysql_real_query(conn_, sql.data(), sql.size()) != 0) {
      if (mysql_errno(conn_) == ER_NO_SUCH_TABLE) return ok_status();
      return server_error(fmt::format("cannot read the columns of table `{}`", t.name));
    }
    MYSQL_RES* res = mysql_store_result(conn_);
    if (!res) return server_error(fmt::format("cannot read the columns of table `{}`", t.name));
    while (MYSQL_ROW row = mysql_fetch_row(res)) {
      unsigned long* len = mysql_fetch_lengths(res);
      if (row[0]) t.columns.emplace(row[0], len[0]);
    }
    mysql_free_result(res);
    t.exists = true;
    return ok_status();
  }

  void column_def(std::string& sql, const Field& f, bool key) {
    append_identifier(sql, f.name);
    sql += ' ';
    sql += column_type(f.value, key);
    sql += key ? " NOT NULL" : " NULL";
  }

  Status ensure_columns(TableState& t, const Record& r, uint32_t key_begin, uint32_t key_end, uint32_t col_begin,
                        uint32_t col_end) {
    const Item probe{Action::upsert, &t, &r, key_begin, key_end, col_begin, col_end};
    if (!t.exists) {
      std::string sql = "CREATE TABLE IF NOT EXISTS " + t.quoted + " (";
      for (uint32_t c = col_begin; c < col_end; ++c) {
        column_def(sql, fields_[c], is_key(probe, fields_[c].name));
        sql += ", ";
      }
      sql += "PRIMARY KEY (";
      for (uint32_t k = key_begin; k < key_end; ++k) {
        if (k != key_begin) sql += ',';
        append_identifier(sql, fields_[k].name);
      }
      sql += ")) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4";
      if (Status s = ddl(sql, t, r, "create the table"); !s) return s;
      // Re-read rather than assume: another writer may have created it first (IF NOT EXISTS).
      if (Status s = load_columns(t); !s) return s;
    }
    for (uint32_t c = col_begin; c < col_end; ++c) {
      if (t.columns.find(fields_[c].name) != t.columns.end()) continue;
      std::string sql = "ALTER TABLE " + t.quoted + " ADD COLUMN ";
      column_def(sql, fields_[c], is_key(probe, fields_[c].name));
      if (Status s = ddl(sql, t, r, fmt::format("add column `{}`", fields_[c].name)); !s) {
        // Another writer may have added it meanwhile.
        if (mysql_errno(conn_) != ER_DUP_FIELDNAME) return s;
      }
      t.columns.emplace(fields_[c].name);
    }
    return ok_status();
  }

  Status ddl(const std::string& sql, const TableState& t, const Record& r, std::string_view what) {
    if (mysql_real_query(conn_, sql.data(), sql.size()) == 0) return ok_status();
    unsigned no = mysql_errno(conn_);
    ErrorClass c = classify(no);
    Error e = record_error(c.code, t, r, fmt::format("cannot {}: {} ({})", what, mysql_error(conn_), no), c.retriable);
    if (c.connection_lost) disconnect();
    return e;
  }

  // ---- errors --------------------------------------------------------------------------------

  static std::string key_text(const Record& r) {
    std::string key = r.key.is_absent() ? "(none)" : to_debug_string(r.key);
    if (key.size() > 200) key = key.substr(0, 200) + "...";
    return key;
  }

  // One line naming the table and the record key (never the password).
  Error record_error(Errc code, const TableState& t, const Record& r, std::string_view what,
                     bool retriable = false) const {
    return Error(code,
                 fmt::format("mysql destination: table `{}`, {} key {}: {}", t.name, operation_name(r.op),
                             key_text(r), what),
                 retriable);
  }

  MysqlDestinationOptions options_;
  MysqlUrl url_;
  TableTemplate template_;
  MYSQL* conn_ = nullptr;
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, std::unique_ptr<TableState>, NameHash, std::equal_to<>> tables_;
  // Per-batch working memory, reused across batches.
  std::vector<Item> items_;
  std::vector<Field> fields_;
  std::string sql_;
  std::string json_;
  std::string pipeline_id_;
};

}  // namespace

Result<std::unique_ptr<Destination>> make_mysql_destination(MysqlDestinationOptions options) {
  auto url = mysql::parse_mysql_url(options.url);
  if (!url) return url.error().with_context("mysql destination: ");
  auto table = TableTemplate::parse(options.table);
  if (!table) return table.error().with_context("mysql destination: ");
  static constexpr std::string_view kModes[] = {"disabled", "preferred", "required", "verify_ca", "verify_identity"};
  bool known = false;
  for (auto m : kModes) known |= m == options.tls_mode;
  if (!known)
    return Error(Errc::invalid_argument,
                 fmt::format("mysql destination: tls.mode \"{}\" is not one of disabled, preferred, required, "
                             "verify_ca, verify_identity",
                             options.tls_mode));
  if ((options.tls_mode == "verify_ca" || options.tls_mode == "verify_identity") && options.tls_ca.empty())
    return Error(Errc::invalid_argument,
                 fmt::format("mysql destination: tls.mode {} needs tls.ca (the CA certificate file)", options.tls_mode));
  if (options.max_statement_size < 1024) options.max_statement_size = 1024;
  return std::unique_ptr<Destination>(std::make_unique<MysqlDestination>(
      std::move(options), std::move(url.value()), std::move(table.value())));
}

}  // namespace sluice
