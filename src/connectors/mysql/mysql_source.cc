#include "connectors/mysql/mysql_source.h"

#include <errmsg.h>
#include <fmt/format.h>
#include <mysql.h>
// mysql.h first: mariadb_rpl.h relies on its types.
#include <mariadb_rpl.h>
#include <mysqld_error.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <atomic>
#include <charconv>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "connectors/mysql/binlog.h"
#include "connectors/mysql/mysql_url.h"

namespace sluice {

namespace {

namespace bl = mysql::binlog;
using Clock = std::chrono::steady_clock;

constexpr SettingSpec kSourceSettings[] = {
    {"url", SettingType::string, "", true,
     "Server and default database: mysql://user:password@host:port/database (MySQL 8 or MariaDB 10.11, "
     "log_bin with binlog_format=ROW). The user needs SELECT on the tables, REPLICATION SLAVE and "
     "REPLICATION CLIENT (MariaDB: BINLOG MONITOR), and RELOAD on MySQL for the snapshot lock.",
     {}, /*secret=*/true},
    {"tables", SettingType::string_list, "*", false,
     "Tables to capture: database.table, database.* (every table of a database), a bare table name (in "
     "the URL's database), or \"*\" for every table of the URL's database."},
    {"snapshot.mode", SettingType::enumeration, "initial", false,
     "initial: snapshot the tables, then stream changes; never: only stream changes from the current "
     "binlog position; initial_only: snapshot and stop.",
     "initial,never,initial_only"},
    {"snapshot.chunk_size", SettingType::integer, "10000", false,
     "Rows per snapshot query (keyset pagination on the primary key); a restart re-reads at most one "
     "chunk."},
    {"server_id", SettingType::integer, "0", false,
     "Replica server id of the binlog connection; unique among the server's replicas (two connections "
     "with one id disconnect each other). 0: derived from the pipeline id."},
    {"heartbeat.interval", SettingType::duration, "10s", false,
     "Binlog heartbeat period asked of the server while no event arrives; a connection silent for "
     "three periods is considered dead and reopened."},
    {"tls.mode", SettingType::enumeration, "preferred", false,
     "TLS to the server. disabled: never; preferred: when the server offers it; required: always, "
     "without checking the certificate; verify_ca / verify_identity: always, checking the "
     "certificate against tls.ca.",
     "disabled,preferred,required,verify_ca,verify_identity"},
    {"tls.ca", SettingType::string, "", false,
     "PEM file of the certificate authority for tls.mode verify_ca / verify_identity."},
    {"connect_timeout", SettingType::duration, "10s", false, "How long connecting may take."},
};

std::string quote_ident(std::string_view s) {
  std::string out = "`";
  for (char c : s) {
    if (c == '`') out += '`';
    out += c;
  }
  return out + "`";
}

// ── connections ─────────────────────────────────────────────────────────────

struct ConnOptions {
  mysql::MysqlUrl url;
  std::string tls_mode, tls_ca;
  std::chrono::milliseconds connect_timeout{10000};
};

bool connection_errno(unsigned no) {
  return (no >= 2000 && no < 3000) || no == ER_SERVER_SHUTDOWN || no == ER_CONNECTION_KILLED || no == 4031 ||
         no == ER_CON_COUNT_ERROR || no == ER_NET_READ_INTERRUPTED || no == ER_NET_READ_ERROR;
}

Error server_error(MYSQL* c, std::string_view doing) {
  const unsigned no = mysql_errno(c);
  const std::string msg = fmt::format("{}: {} ({})", doing, mysql_error(c), no);
  if (connection_errno(no)) return Error(Errc::connection, msg, true);
  switch (no) {
    case ER_ACCESS_DENIED_ERROR: return Error(Errc::auth, msg + "; check the user and password in `url`");
    case ER_DBACCESS_DENIED_ERROR:
    case ER_TABLEACCESS_DENIED_ERROR:
    case ER_COLUMNACCESS_DENIED_ERROR:
    case ER_SPECIFIC_ACCESS_DENIED_ERROR:
      return Error(Errc::permission, msg);
    case ER_BAD_DB_ERROR:
    case ER_NO_SUCH_TABLE: return Error(Errc::not_found, msg);
    case ER_LOCK_DEADLOCK:
    case ER_LOCK_WAIT_TIMEOUT: return Error(Errc::conflict, msg, true);
    default: return Error(Errc::data, msg);
  }
}

struct MysqlCloser {
  void operator()(MYSQL* m) const noexcept { mysql_close(m); }
};
using MysqlPtr = std::unique_ptr<MYSQL, MysqlCloser>;
struct ResCloser {
  void operator()(MYSQL_RES* r) const noexcept { mysql_free_result(r); }
};
using ResPtr = std::unique_ptr<MYSQL_RES, ResCloser>;

Result<MysqlPtr> connect(const ConnOptions& o, unsigned read_timeout_s = 0) {
  MysqlPtr c(mysql_init(nullptr));
  if (!c) return Error(Errc::internal, "out of memory");
  unsigned timeout = unsigned(std::max<int64_t>(1, o.connect_timeout.count() / 1000));
  mysql_optionsv(c.get(), MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
  if (read_timeout_s) mysql_optionsv(c.get(), MYSQL_OPT_READ_TIMEOUT, &read_timeout_s);
  mysql_optionsv(c.get(), MYSQL_SET_CHARSET_NAME, "utf8mb4");
  my_bool yes = 1, no = 0;
  if (o.tls_mode == "preferred") {
    mysql_ssl_set(c.get(), nullptr, nullptr, nullptr, nullptr, nullptr);
    mysql_optionsv(c.get(), MYSQL_OPT_SSL_ENFORCE, &no);
    mysql_optionsv(c.get(), MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &no);
  } else if (o.tls_mode != "disabled") {
    mysql_ssl_set(c.get(), nullptr, nullptr, nullptr, nullptr, nullptr);
    mysql_optionsv(c.get(), MYSQL_OPT_SSL_ENFORCE, &yes);
    const bool verify = o.tls_mode == "verify_ca" || o.tls_mode == "verify_identity";
    mysql_optionsv(c.get(), MYSQL_OPT_SSL_VERIFY_SERVER_CERT, verify ? &yes : &no);
    if (!o.tls_ca.empty()) mysql_optionsv(c.get(), MYSQL_OPT_SSL_CA, o.tls_ca.c_str());
  }
  if (!mysql_real_connect(c.get(), o.url.host.c_str(), o.url.user.c_str(), o.url.password.c_str(),
                          o.url.database.c_str(), o.url.port, nullptr, 0)) {
    Error e = server_error(c.get(), fmt::format("cannot connect to {}", o.url.redacted()));
    return Error(e.code() == Errc::data ? Errc::connection : e.code(), e.message(), e.retriable() || e.code() == Errc::data);
  }
  if (o.tls_mode != "disabled" && o.tls_mode != "preferred" && mysql_get_ssl_cipher(c.get()) == nullptr)
    return Error(Errc::connection, fmt::format("{} does not offer TLS, which tls.mode {} requires; enable TLS on the "
                                               "server or set tls.mode to preferred", o.url.redacted(), o.tls_mode));
  return c;
}

Status exec(MYSQL* c, std::string_view sql) {
  if (mysql_real_query(c, sql.data(), sql.size()) != 0) return server_error(c, "query failed");
  if (ResPtr r{mysql_store_result(c)}) {
  }
  return ok_status();
}

using Row = std::vector<std::optional<std::string>>;
Result<std::vector<Row>> query(MYSQL* c, std::string_view sql) {
  if (mysql_real_query(c, sql.data(), sql.size()) != 0) return server_error(c, "query failed");
  ResPtr r{mysql_store_result(c)};
  std::vector<Row> out;
  if (!r) {
    if (mysql_errno(c)) return server_error(c, "query failed");
    return out;
  }
  const unsigned n = mysql_num_fields(r.get());
  while (MYSQL_ROW row = mysql_fetch_row(r.get())) {
    unsigned long* lens = mysql_fetch_lengths(r.get());
    Row x(n);
    for (unsigned i = 0; i < n; ++i)
      if (row[i]) x[i] = std::string(row[i], lens[i]);
    out.push_back(std::move(x));
  }
  return out;
}

std::string literal(MYSQL* c, std::string_view s) {
  std::string out(s.size() * 2 + 3, '\0');
  out[0] = '\'';
  const unsigned long n = mysql_real_escape_string(c, out.data() + 1, s.data(), (unsigned long)s.size());
  out.resize(n + 1);
  out += '\'';
  return out;
}

// SHOW MASTER STATUS, or SHOW BINARY LOG STATUS where the former is gone (MySQL 8.4).
Result<std::vector<Row>> binlog_status(MYSQL* c) {
  auto r = query(c, "SHOW MASTER STATUS");
  if (!r.ok() && mysql_errno(c) == ER_PARSE_ERROR) return query(c, "SHOW BINARY LOG STATUS");
  return r;
}

// ── positions ───────────────────────────────────────────────────────────────

struct Position {
  enum class Phase { none, snapshot, cdc, done } phase = Phase::none;
  std::string file;
  uint64_t pos = 0;
  std::string gtid;         // MariaDB gtid list ("" = none)
  size_t table_index = 0;   // snapshot
  std::string resume;       // snapshot: "", "k<hex>,<hex>..." or "o<offset>"
  std::string tx_file;      // cdc: partly written transaction
  uint64_t tx_pos = 0;
  uint64_t tx_n = 0;

  std::string encode() const {
    const std::string g = gtid.empty() ? "-" : gtid;
    switch (phase) {
      case Phase::snapshot:
        return fmt::format("snapshot {} {} {} {} {}", file, pos, g, table_index, resume.empty() ? "-" : resume);
      case Phase::cdc:
        return tx_n ? fmt::format("cdc {} {} {} {} {} {}", file, pos, g, tx_file, tx_pos, tx_n)
                    : fmt::format("cdc {} {} {}", file, pos, g);
      case Phase::done: return fmt::format("done {} {} {}", file, pos, g);
      case Phase::none: break;
    }
    return "";
  }

  static std::optional<Position> parse(std::string_view text) {
    std::vector<std::string_view> parts;
    size_t start = 0;
    while (start <= text.size()) {
      size_t sp = text.find(' ', start);
      if (sp == std::string_view::npos) sp = text.size();
      parts.push_back(text.substr(start, sp - start));
      start = sp + 1;
    }
    auto num = [](std::string_view s, uint64_t* out) {
      auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
      return ec == std::errc() && ptr == s.data() + s.size() && !s.empty();
    };
    Position p;
    if (parts.size() < 4) return std::nullopt;
    p.file = std::string(parts[1]);
    if (!num(parts[2], &p.pos) || p.file.empty()) return std::nullopt;
    p.gtid = parts[3] == "-" ? "" : std::string(parts[3]);
    if (parts[0] == "snapshot" && parts.size() == 6) {
      uint64_t idx;
      if (!num(parts[4], &idx)) return std::nullopt;
      p.phase = Phase::snapshot;
      p.table_index = idx;
      p.resume = parts[5] == "-" ? "" : std::string(parts[5]);
      return p;
    }
    if (parts[0] == "cdc" && (parts.size() == 4 || parts.size() == 7)) {
      p.phase = Phase::cdc;
      if (parts.size() == 7) {
        p.tx_file = std::string(parts[4]);
        if (!num(parts[5], &p.tx_pos) || !num(parts[6], &p.tx_n)) return std::nullopt;
      }
      return p;
    }
    if (parts[0] == "done" && parts.size() == 4) {
      p.phase = Phase::done;
      return p;
    }
    return std::nullopt;
  }
};

// MariaDB GTID state: the last GTID per replication domain, "d-s-n,d-s-n".
std::string gtid_state_apply(const std::string& state, const bl::MariaGtid& g) {
  std::string out;
  bool replaced = false;
  size_t start = 0;
  while (start < state.size()) {
    size_t comma = state.find(',', start);
    if (comma == std::string::npos) comma = state.size();
    std::string_view item(state.data() + start, comma - start);
    const size_t dash = item.find('-');
    uint32_t domain = 0;
    std::from_chars(item.data(), item.data() + (dash == std::string_view::npos ? item.size() : dash), domain);
    if (!out.empty()) out += ',';
    if (domain == g.domain) {
      out += g.to_string();
      replaced = true;
    } else {
      out += item;
    }
    start = comma + 1;
  }
  if (!replaced) out += (out.empty() ? "" : ",") + g.to_string();
  return out;
}

// ── tables ──────────────────────────────────────────────────────────────────

struct TableSchema {
  std::string db, table;
  std::vector<bl::ColumnInfo> cols;
  std::vector<std::string> data_types;  // information_schema DATA_TYPE (snapshot text conversion)
  std::vector<uint32_t> key;            // primary key columns (indexes into cols)
};

struct TableRef {
  std::string db, table;
  int64_t estimate = 0;
};

// Parses "a,b" labels of enum('a','b') / set('a','b') column types.
std::vector<std::string> parse_labels(std::string_view column_type) {
  std::vector<std::string> out;
  size_t open = column_type.find('(');
  if (open == std::string_view::npos) return out;
  size_t i = open + 1;
  while (i < column_type.size() && column_type[i] == '\'') {
    std::string label;
    ++i;
    while (i < column_type.size()) {
      char c = column_type[i];
      if (c == '\'' && i + 1 < column_type.size() && column_type[i + 1] == '\'') { label += '\''; i += 2; continue; }
      if (c == '\\' && i + 1 < column_type.size()) { label += column_type[i + 1]; i += 2; continue; }
      if (c == '\'') { ++i; break; }
      label += c;
      ++i;
    }
    out.push_back(std::move(label));
    if (i < column_type.size() && column_type[i] == ',') ++i;
  }
  return out;
}

bool parse_int(std::string_view s, int64_t* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}
bool parse_uint(std::string_view s, uint64_t* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

bool is_numeric_type(std::string_view t) {
  return t == "tinyint" || t == "smallint" || t == "mediumint" || t == "int" || t == "bigint" || t == "decimal" ||
         t == "float" || t == "double" || t == "year";
}

// Converts a snapshot value (text protocol, session time_zone +00:00) to the same Value the binlog
// decoder produces for the column.
Result<Value> text_to_value(const TableSchema& t, size_t i, std::string_view s, Arena& arena) {
  const std::string& type = t.data_types[i];
  const bl::ColumnInfo& ci = t.cols[i];
  auto bad = [&]() {
    return Error(Errc::data, fmt::format("{}.{}.{}: cannot read {} value '{}'", t.db, t.table, ci.name, type, s));
  };
  if (type == "tinyint" || type == "smallint" || type == "mediumint" || type == "int" || type == "bigint") {
    if (ci.is_unsigned) {
      uint64_t v;
      if (!parse_uint(s, &v)) return bad();
      return Value::uint64(v);
    }
    int64_t v;
    if (!parse_int(s, &v)) return bad();
    return Value::int64(v);
  }
  if (type == "year") {
    int64_t v;
    if (!parse_int(s, &v)) return bad();
    return Value::int64(v);
  }
  if (type == "decimal") return Value::decimal(arena.copy(s));
  if (type == "float") return Value::float64(double(std::strtof(std::string(s).c_str(), nullptr)));
  if (type == "double") return Value::float64(std::strtod(std::string(s).c_str(), nullptr));
  if (type == "bit") {
    uint64_t v = 0;
    for (char c : s) v = (v << 8) | uint8_t(c);
    return Value::uint64(v);
  }
  if (type == "date") {
    if (s.starts_with("0000") || s.find("-00") != std::string_view::npos) return Value::null();
    int32_t d;
    if (!parse_date(s, &d)) return bad();
    return Value::date(d);
  }
  if (type == "datetime" || type == "timestamp") {
    if (s.starts_with("0000-00-00") || s.substr(4, 3) == "-00" || s.substr(7, 3) == "-00") return Value::null();
    int64_t us;
    if (!parse_timestamp(s, &us)) return bad();
    return type == "timestamp" ? Value::timestamptz(us) : Value::timestamp(us);
  }
  if (type == "time") {
    // [-]HHH:MM:SS[.ffffff], possibly beyond 24 hours
    std::string_view x = s;
    int64_t sign = 1;
    if (!x.empty() && x[0] == '-') { sign = -1; x.remove_prefix(1); }
    int64_t h = 0, m = 0, sec = 0, frac = 0;
    size_t c1 = x.find(':'), c2 = x.find(':', c1 + 1);
    if (c1 == std::string_view::npos || c2 == std::string_view::npos) return bad();
    std::string_view fs = x.substr(c2 + 1);
    std::string_view fr;
    if (size_t dot = fs.find('.'); dot != std::string_view::npos) { fr = fs.substr(dot + 1); fs = fs.substr(0, dot); }
    if (!parse_int(x.substr(0, c1), &h) || !parse_int(x.substr(c1 + 1, c2 - c1 - 1), &m) || !parse_int(fs, &sec)) return bad();
    if (!fr.empty()) {
      std::string f(fr);
      f.resize(6, '0');
      if (!parse_int(f, &frac)) return bad();
    }
    return Value::time(sign * ((h * 3600 + m * 60 + sec) * 1000000 + frac));
  }
  if (ci.json) return Value::json(arena.copy(s));
  if (ci.text == bl::ColumnInfo::Text::binary) return Value::bytes(arena.copy(s));
  return Value::string(arena.copy(s));
}

// ── the raw event stream (reader thread) ────────────────────────────────────

// Reads events off the dump connection on its own thread, so that the network and decoding
// overlap; bounded by bytes.
class EventQueue {
 public:
  void push(std::string ev) {
    std::unique_lock lock(mu_);
    not_full_.wait(lock, [&] { return bytes_ < kMaxBytes || stopped_; });
    if (stopped_) return;
    bytes_ += ev.size();
    q_.push_back(std::move(ev));
    not_empty_.notify_one();
  }
  void fail(Error e) {
    std::lock_guard lock(mu_);
    if (!error_) error_ = std::move(e);
    not_empty_.notify_one();
  }
  // Pops into `out`; false on timeout. An error is returned once the queue is drained.
  Result<bool> pop(std::string* out, Clock::time_point deadline) {
    std::unique_lock lock(mu_);
    not_empty_.wait_until(lock, deadline, [&] { return !q_.empty() || error_; });
    if (!q_.empty()) {
      out->swap(q_.front());
      bytes_ -= out->size();
      q_.pop_front();
      not_full_.notify_one();
      return true;
    }
    if (error_) return *error_;
    return false;
  }
  void stop() {
    std::lock_guard lock(mu_);
    stopped_ = true;
    not_full_.notify_all();
    not_empty_.notify_all();
  }

 private:
  static constexpr size_t kMaxBytes = 8u << 20;
  std::mutex mu_;
  std::condition_variable not_full_, not_empty_;
  std::deque<std::string> q_;
  size_t bytes_ = 0;
  bool stopped_ = false;
  std::optional<Error> error_;
};

struct TableMapState {
  bl::TableMap map;
  std::shared_ptr<const TableSchema> schema;  // null: not captured
  std::vector<uint32_t> key;                  // key column indexes valid for this map
  std::vector<std::string_view> names;        // per map column
};

// ── the source ──────────────────────────────────────────────────────────────

class MysqlSource final : public Source {
 public:
  explicit MysqlSource(const Settings& s, mysql::MysqlUrl url)
      : tables_setting_(s.get_list("tables")),
        mode_(s.get_string("snapshot.mode")),
        chunk_size_(std::max<int64_t>(1, s.get_int("snapshot.chunk_size"))),
        server_id_setting_(s.get_int("server_id")),
        heartbeat_(s.get_duration("heartbeat.interval")) {
    opts_.url = std::move(url);
    opts_.tls_mode = s.get_string("tls.mode");
    opts_.tls_ca = s.get_string("tls.ca");
    opts_.connect_timeout = s.get_duration("connect_timeout");
  }
  ~MysqlSource() override { close(); }

  Status open(const ConnectorContext& ctx, const std::optional<std::string>& checkpoint) override;
  Result<ReadStatus> read(Batch& batch, const ReadRequest& req, std::stop_token stop) override;
  void ack(std::string_view) override {}  // a binlog reader holds nothing on the server
  void close() noexcept override;

 private:
  Status check_server();
  Status resolve_tables();
  bool captured(std::string_view db, std::string_view table) const;
  Result<std::shared_ptr<const TableSchema>> load_schema(const std::string& db, const std::string& table);
  Status begin_snapshot(bool fresh);
  Result<ReadStatus> read_snapshot(Batch& batch, const ReadRequest& req, std::stop_token stop);
  Result<ReadStatus> read_cdc(Batch& batch, const ReadRequest& req, std::stop_token stop);
  Status start_stream();
  void stop_stream() noexcept;
  Status handle_event(Batch& batch, std::string_view raw);
  Status handle_rows(Batch& batch, const bl::Event& e);
  void begin_tx(uint32_t start, const bl::Header& h);
  void commit_tx(uint32_t next_pos);
  void on_ddl(Batch& batch, std::string_view db, std::string_view sql, uint32_t event_pos);
  std::string cdc_position() const;
  Value metadata(Batch& batch, const TableSchema& t, uint32_t event_pos, bool cdc);
  Status ensure_catalog();

  // settings
  ConnOptions opts_;
  std::vector<std::string> tables_setting_;
  std::string mode_;
  int64_t chunk_size_;
  int64_t server_id_setting_;
  std::chrono::milliseconds heartbeat_;

  ConnectorContext ctx_;
  uint32_t server_id_ = 0;
  bool mariadb_ = false;
  MysqlPtr conn_;  // catalog queries and the snapshot transaction
  std::vector<TableRef> tables_;
  std::unordered_map<std::string, std::shared_ptr<const TableSchema>> schemas_;  // "db.table"
  std::unordered_map<uint64_t, TableMapState> maps_;                           // by table id

  Position pos_;
  // snapshot
  std::shared_ptr<const TableSchema> snap_table_;
  size_t snap_table_index_ = SIZE_MAX;
  int64_t snapshot_rows_ = 0;
  // cdc
  MysqlPtr rpl_conn_;
  MARIADB_RPL* rpl_ = nullptr;
  EventQueue* queue_ = nullptr;
  std::unique_ptr<EventQueue> queue_owner_;
  std::jthread reader_;
  bool streaming_ = false;
  std::optional<bl::FormatDescription> fd_;
  bool checksum_ = false;  // events carry a CRC32
  std::string cur_file_;
  bool in_tx_ = false;
  bool tx_saw_begin_ = false;
  std::string tx_file_;
  uint64_t tx_pos_ = 0;
  uint64_t tx_n_ = 0;
  uint64_t skip_n_ = 0;
  std::string pending_gtid_;  // gtid state once the current transaction commits
  std::string tx_gtid_text_;  // the current transaction's GTID (metadata)
  uint32_t tx_time_ = 0;
  uint32_t tx_server_id_ = 0;  // the server that wrote the transaction (event header)
  std::string resume_tx_file_;
  uint64_t resume_tx_pos_ = 0;
  uint64_t resume_n_ = 0;
  std::string last_returned_position_;
  std::string event_buf_;
  std::vector<Value> row_before_, row_after_;
  struct TxMeta {
    bool valid = false;
    std::string_view file, gtid, time, server_id;
  } tx_meta_;
  std::vector<const TableSchema*> retained_;
  Clock::time_point next_attempt_{};
  std::chrono::milliseconds reconnect_delay_{200};
};

Status MysqlSource::ensure_catalog() {
  if (conn_ && mysql_ping(conn_.get()) == 0) return ok_status();
  auto c = connect(opts_);
  if (!c.ok()) return std::move(c).error();
  conn_ = std::move(c.value());
  return exec(conn_.get(), "SET SESSION time_zone='+00:00'");
}

Status MysqlSource::check_server() {
  auto v = query(conn_.get(), "SELECT @@version, @@log_bin, @@binlog_format, @@server_id");
  if (!v.ok()) return std::move(v).error();
  const Row& r = v.value().at(0);
  const std::string version = r[0].value_or("");
  mariadb_ = version.find("MariaDB") != std::string::npos;
  if (mode_ == "initial_only") return ok_status();  // a snapshot alone needs no binlog
  if (auto problem = mysql_binlog_config_problem(r[1].value_or("0"), r[2].value_or("unknown"), opts_.url.redacted()))
    return Error(Errc::unsupported, *problem);
  if (r[3] && server_id_ == std::stoul(*r[3]))
    return Error(Errc::config, fmt::format("server_id {} is the server's own id; set a different `server_id`", server_id_));
  // REPLICATION CLIENT (BINLOG MONITOR on MariaDB): reading the binlog position.
  if (auto st = binlog_status(conn_.get()); !st.ok()) {
    Error e = st.error().with_context("cannot read the binlog position: ");
    if (e.code() == Errc::permission || mysql_errno(conn_.get()) == ER_SPECIFIC_ACCESS_DENIED_ERROR)
      return Error(Errc::permission,
                   fmt::format("user '{}' lacks the REPLICATION CLIENT privilege{}: GRANT {} ON *.* TO '{}'",
                               opts_.url.user, mariadb_ ? " (BINLOG MONITOR)" : "",
                               mariadb_ ? "BINLOG MONITOR, REPLICATION SLAVE" : "REPLICATION CLIENT, REPLICATION SLAVE",
                               opts_.url.user));
    return e;
  }
  // REPLICATION SLAVE: reading the binlog itself (checked on the grants; the dump also reports it).
  auto grants = query(conn_.get(), "SHOW GRANTS FOR CURRENT_USER()");
  if (grants.ok()) {
    bool repl = false;
    for (const Row& g : grants.value()) {
      const std::string line = g.empty() ? "" : g[0].value_or("");
      if (line.find(" ON *.*") == std::string::npos) continue;
      if (line.find("ALL PRIVILEGES") != std::string::npos || line.find("REPLICATION SLAVE") != std::string::npos ||
          line.find("REPLICATION REPLICA") != std::string::npos)
        repl = true;
    }
    // Roles may grant it too: only refuse when no role is in play.
    bool roles = false;
    for (const Row& g : grants.value())
      if (!g.empty() && g[0] && g[0]->starts_with("GRANT `")) roles = true;
    if (!repl && !roles)
      return Error(Errc::permission, fmt::format("user '{}' lacks the REPLICATION SLAVE privilege needed to read the "
                                                 "binlog: GRANT REPLICATION SLAVE ON *.* TO '{}'",
                                                 opts_.url.user, opts_.url.user));
  }
  return ok_status();
}

bool MysqlSource::captured(std::string_view db, std::string_view table) const {
  for (const std::string& spec : tables_setting_) {
    if (spec == "*") {
      if (db == opts_.url.database) return true;
      continue;
    }
    const size_t dot = spec.find('.');
    if (dot == std::string::npos) {
      if (db == opts_.url.database && table == spec) return true;
      continue;
    }
    std::string_view sdb(spec.data(), dot), st(spec.data() + dot + 1, spec.size() - dot - 1);
    if (sdb == db && (st == "*" || st == table)) return true;
  }
  return false;
}

Status MysqlSource::resolve_tables() {
  tables_.clear();
  auto rows = query(conn_.get(),
                    "SELECT TABLE_SCHEMA, TABLE_NAME, COALESCE(TABLE_ROWS, 0) FROM information_schema.TABLES WHERE "
                    "TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN ('mysql', 'information_schema', "
                    "'performance_schema', 'sys') ORDER BY 1, 2");
  if (!rows.ok()) return std::move(rows).error();
  for (const Row& r : rows.value())
    if (captured(*r[0], *r[1])) tables_.push_back({*r[0], *r[1], std::stoll(r[2].value_or("0"))});
  // Named tables must exist.
  for (const std::string& spec : tables_setting_) {
    if (spec == "*" || spec.ends_with(".*")) continue;
    const size_t dot = spec.find('.');
    const std::string db = dot == std::string::npos ? opts_.url.database : spec.substr(0, dot);
    const std::string t = dot == std::string::npos ? spec : spec.substr(dot + 1);
    bool found = false;
    for (const TableRef& r : tables_) found |= r.db == db && r.table == t;
    if (!found)
      return Error(Errc::not_found, fmt::format("table {}.{} does not exist on {} (or the user cannot see it: GRANT "
                                                "SELECT ON {}.{} TO '{}'); check `tables`",
                                                quote_ident(db), quote_ident(t), opts_.url.redacted(), quote_ident(db),
                                                quote_ident(t), opts_.url.user));
  }
  for (const TableRef& r : tables_) {
    const std::string sql = fmt::format("SELECT 1 FROM {}.{} LIMIT 0", quote_ident(r.db), quote_ident(r.table));
    if (mysql_real_query(conn_.get(), sql.data(), sql.size()) != 0) {
      Error e = server_error(conn_.get(), "");
      if (e.code() == Errc::permission)
        return Error(Errc::permission, fmt::format("user '{}' cannot read {}.{}: GRANT SELECT ON {}.* TO '{}'",
                                                   opts_.url.user, quote_ident(r.db), quote_ident(r.table),
                                                   quote_ident(r.db), opts_.url.user));
      return e.with_context(fmt::format("cannot read {}.{}", quote_ident(r.db), quote_ident(r.table)));
    }
    if (ResPtr res{mysql_store_result(conn_.get())}) {
    }
  }
  return ok_status();
}

Result<std::shared_ptr<const TableSchema>> MysqlSource::load_schema(const std::string& db, const std::string& table) {
  if (Status st = ensure_catalog(); !st.ok()) return st.error();
  auto t = std::make_shared<TableSchema>();
  t->db = db;
  t->table = table;
  auto cols = query(conn_.get(), fmt::format("SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, COALESCE(CHARACTER_SET_NAME, ''), "
                                             "COLUMN_KEY FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = {} AND "
                                             "TABLE_NAME = {} ORDER BY ORDINAL_POSITION",
                                             literal(conn_.get(), db), literal(conn_.get(), table)));
  if (!cols.ok()) return cols.error().with_context(fmt::format("cannot read the columns of {}.{}: ", db, table));
  auto checks = query(conn_.get(), fmt::format("SELECT CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS WHERE "
                                               "CONSTRAINT_SCHEMA = {} AND TABLE_NAME = {}",
                                               literal(conn_.get(), db), literal(conn_.get(), table)));
  auto pk = query(conn_.get(), fmt::format("SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = {} "
                                           "AND TABLE_NAME = {} AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX",
                                           literal(conn_.get(), db), literal(conn_.get(), table)));
  if (!pk.ok()) return pk.error().with_context("cannot read the primary key: ");
  for (const Row& r : cols.value()) {
    bl::ColumnInfo c;
    c.name = r[0].value_or("");
    std::string data_type = r[1].value_or("");
    const std::string column_type = r[2].value_or("");
    const std::string charset = r[3].value_or("");
    for (auto& ch : data_type) ch = char(std::tolower(uint8_t(ch)));
    c.is_unsigned = column_type.find("unsigned") != std::string::npos;
    if (charset.empty() || charset == "binary") c.text = bl::ColumnInfo::Text::binary;
    else if (charset == "latin1") c.text = bl::ColumnInfo::Text::latin1;
    else c.text = bl::ColumnInfo::Text::utf8;
    if (data_type == "enum" || data_type == "set") {
      c.labels = parse_labels(column_type);
      c.text = bl::ColumnInfo::Text::utf8;
    }
    c.json = data_type == "json";
    if (checks.ok())
      for (const Row& ck : checks.value())
        if (ck[0] && (*ck[0] == "json_valid(`" + c.name + "`)")) c.json = true;
    t->cols.push_back(std::move(c));
    t->data_types.push_back(std::move(data_type));
  }
  for (const Row& r : pk.value())
    for (uint32_t i = 0; i < t->cols.size(); ++i)
      if (t->cols[i].name == r[0].value_or("")) t->key.push_back(i);
  if (t->key.empty() && !t->cols.empty())
    spdlog::warn("pipeline {}: table {}.{} has no primary key: its records carry no key, so destinations cannot upsert "
                 "or delete them by key (add a primary key)", ctx_.pipeline_id, quote_ident(db), quote_ident(table));
  schemas_[db + "." + table] = t;
  return std::shared_ptr<const TableSchema>(t);
}

Status MysqlSource::open(const ConnectorContext& ctx, const std::optional<std::string>& checkpoint) {
  ctx_ = ctx;
  if (server_id_setting_ > 0) {
    server_id_ = uint32_t(server_id_setting_);
  } else {
    uint32_t h = 2166136261u;  // FNV-1a of the pipeline id, kept clear of small hand-picked ids
    for (char c : ctx.pipeline_id) h = (h ^ uint8_t(c)) * 16777619u;
    server_id_ = 0x40000000u | (h & 0x3fffffffu);
  }
  if (checkpoint) {
    auto p = Position::parse(*checkpoint);
    if (!p)
      return Error(Errc::data, fmt::format("checkpoint '{}' is not a mysql position; run `sluice cleanup` to start over",
                                           *checkpoint));
    pos_ = *p;
  }
  auto c = connect(opts_);
  if (!c.ok()) return std::move(c).error();
  conn_ = std::move(c.value());
  if (Status st = exec(conn_.get(), "SET SESSION time_zone='+00:00'"); !st.ok()) return st;
  if (Status st = check_server(); !st.ok()) return st;
  if (Status st = resolve_tables(); !st.ok()) return st;
  if (pos_.phase == Position::Phase::done) {
    spdlog::info("pipeline {}: initial_only snapshot already complete", ctx_.pipeline_id);
    return ok_status();
  }
  if (pos_.phase == Position::Phase::none) {
    if (mode_ == "never") {
      auto m = binlog_status(conn_.get());
      if (!m.ok()) return std::move(m).error();
      if (m.value().empty()) return Error(Errc::unsupported, "SHOW MASTER STATUS returned nothing: is log_bin on?");
      pos_.phase = Position::Phase::cdc;
      pos_.file = *m.value()[0][0];
      pos_.pos = std::stoull(*m.value()[0][1]);
      if (mariadb_) {
        auto g = query(conn_.get(), fmt::format("SELECT BINLOG_GTID_POS({}, {})", literal(conn_.get(), pos_.file), pos_.pos));
        if (g.ok() && !g.value().empty()) pos_.gtid = g.value()[0][0].value_or("");
      }
    } else {
      if (Status st = begin_snapshot(true); !st.ok()) return st;
    }
  } else if (pos_.phase == Position::Phase::snapshot) {
    if (Status st = begin_snapshot(false); !st.ok()) return st;
  }
  if (pos_.phase == Position::Phase::cdc && pos_.tx_n) {
    resume_tx_file_ = pos_.tx_file;
    resume_tx_pos_ = pos_.tx_pos;
    resume_n_ = pos_.tx_n;
  }
  if (pos_.phase == Position::Phase::cdc) {
    // Fail now, not on the first read, when the position is gone or the grant is missing.
    if (Status st = start_stream(); !st.ok()) return st;
  }
  return ok_status();
}

Status MysqlSource::begin_snapshot(bool fresh) {
  MYSQL* c = conn_.get();
  if (Status st = exec(c, "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ"); !st.ok()) return st;
  std::string file;
  uint64_t pos = 0;
  bool locked = false;
  const bool snapshot_only = mode_ == "initial_only";
  if (!mariadb_ && !snapshot_only) {
    // MySQL: the binlog position is only consistent with the snapshot under a global read lock.
    if (mysql_query(c, "FLUSH TABLES WITH READ LOCK") == 0) {
      locked = true;
    } else {
      std::string sql = "LOCK TABLES ";
      for (size_t i = 0; i < tables_.size(); ++i)
        sql += (i ? ", " : "") + quote_ident(tables_[i].db) + "." + quote_ident(tables_[i].table) + " READ";
      if (Status st = exec(c, sql); !st.ok())
        return st.error().with_context("cannot lock the tables for the snapshot (grant RELOAD or LOCK TABLES): ");
      locked = true;
    }
  }
  if (Status st = exec(c, "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"); !st.ok()) return st;
  if (!snapshot_only) {
    if (mariadb_) {
      // MariaDB reports the binlog position matching the consistent snapshot, without a lock.
      auto r = query(c, "SHOW STATUS LIKE 'binlog_snapshot_%'");
      if (!r.ok()) return std::move(r).error();
      for (const Row& row : r.value()) {
        if (row[0] == "Binlog_snapshot_file") file = row[1].value_or("");
        if (row[0] == "Binlog_snapshot_position") pos = std::stoull(row[1].value_or("0"));
      }
    } else {
      auto m = binlog_status(c);
      if (!m.ok()) return std::move(m).error();
      if (!m.value().empty()) {
        file = m.value()[0][0].value_or("");
        pos = std::stoull(m.value()[0][1].value_or("0"));
      }
    }
    if (locked) (void)exec(c, "UNLOCK TABLES");
    if (file.empty()) return Error(Errc::unsupported, "the server reports no binlog position: is log_bin on?");
  }
  if (fresh) {
    pos_ = Position{};
    pos_.phase = Position::Phase::snapshot;
    pos_.file = snapshot_only ? "-" : file;
    pos_.pos = pos;
    if (mariadb_ && !snapshot_only) {
      auto g = query(c, fmt::format("SELECT BINLOG_GTID_POS({}, {})", literal(c, file), pos));
      if (g.ok() && !g.value().empty()) pos_.gtid = g.value()[0][0].value_or("");
    }
  }
  // A resumed snapshot reads under a newer snapshot but keeps the stream's original start: the
  // changes in between come again through the stream, so the end state converges.
  int64_t total = 0;
  for (size_t i = pos_.table_index; i < tables_.size(); ++i) total += tables_[i].estimate;
  snapshot_rows_ = 0;
  if (ctx_.stats) {
    ctx_.stats->snapshot_rows_total = total;
    ctx_.stats->snapshot_rows_done = 0;
  }
  spdlog::info("pipeline {}: snapshot of {} table(s), about {} rows; stream starts at {}:{}{}", ctx_.pipeline_id,
               tables_.size() - std::min(tables_.size(), pos_.table_index), total, pos_.file, pos_.pos,
               pos_.gtid.empty() ? "" : " (gtid " + pos_.gtid + ")");
  return ok_status();
}

Value MysqlSource::metadata(Batch& batch, const TableSchema& t, uint32_t event_pos, bool cdc) {
  ObjectBuilder m = batch.object(cdc ? 9 : 2);
  m.add(meta::kSchema, Value::string(t.db));
  m.add(meta::kTable, Value::string(t.table));
  if (cdc) {
    if (!tx_meta_.valid) {
      tx_meta_.file = batch.copy(cur_file_);
      tx_meta_.gtid = batch.copy(tx_gtid_text_);
      tx_meta_.time = batch.copy(format_timestamptz(int64_t(tx_time_) * 1000000));
      tx_meta_.server_id = batch.copy(std::to_string(tx_server_id_));
      tx_meta_.valid = true;
    }
    m.add("binlog_file", Value::string(tx_meta_.file));
    m.add("binlog_pos", Value::string(batch.copy(std::to_string(event_pos))));
    if (!tx_meta_.gtid.empty()) m.add("gtid", Value::string(tx_meta_.gtid));
    m.add("commit_time", Value::string(tx_meta_.time));
    m.add("server_id", Value::string(tx_meta_.server_id));
  }
  return m.build();
}

Result<ReadStatus> MysqlSource::read_snapshot(Batch& batch, const ReadRequest& req, std::stop_token stop) {
  MYSQL* c = conn_.get();
  while (batch.size() < req.max_records && batch.bytes() < req.max_bytes && !stop.stop_requested()) {
    if (pos_.table_index >= tables_.size()) {
      (void)exec(c, "COMMIT");
      spdlog::info("pipeline {}: snapshot complete ({} rows)", ctx_.pipeline_id, snapshot_rows_);
      Position next;
      next.phase = mode_ == "initial_only" ? Position::Phase::done : Position::Phase::cdc;
      next.file = pos_.file;
      next.pos = pos_.pos;
      next.gtid = pos_.gtid;
      pos_ = next;
      break;
    }
    const TableRef& tr = tables_[pos_.table_index];
    if (snap_table_index_ != pos_.table_index) {
      auto s = load_schema(tr.db, tr.table);
      if (!s.ok()) return std::move(s).error();
      snap_table_ = s.value();
      snap_table_index_ = pos_.table_index;
    }
    const TableSchema& t = *snap_table_;
    const size_t limit = size_t(std::min<int64_t>(chunk_size_, int64_t(req.max_records - batch.size())));
    std::string cols;
    for (const auto& col : t.cols) cols += (cols.empty() ? "" : ", ") + quote_ident(col.name);
    std::string sql = fmt::format("SELECT {} FROM {}.{}", cols.empty() ? "1" : cols, quote_ident(t.db), quote_ident(t.table));
    if (!t.key.empty()) {
      if (pos_.resume.starts_with("k")) {
        // keyset: (k1, k2) > (v1, v2) spelled out so that the primary key index serves it.
        std::vector<std::string> vals;
        std::string_view rest = std::string_view(pos_.resume).substr(1);
        while (true) {
          size_t comma = rest.find(',');
          vals.push_back(bl::from_hex(rest.substr(0, comma)));
          if (comma == std::string_view::npos) break;
          rest.remove_prefix(comma + 1);
        }
        if (vals.size() != t.key.size())
          return Error(Errc::data, fmt::format("snapshot checkpoint of {}.{} does not match its primary key; run `sluice "
                                               "cleanup` and start over", t.db, t.table));
        auto lit = [&](size_t k) {
          const uint32_t ci = t.key[k];
          return is_numeric_type(t.data_types[ci]) ? vals[k] : literal(c, vals[k]);
        };
        std::string where;
        for (size_t k = 0; k < t.key.size(); ++k) {
          std::string term;
          for (size_t j = 0; j < k; ++j) term += quote_ident(t.cols[t.key[j]].name) + " = " + lit(j) + " AND ";
          term += quote_ident(t.cols[t.key[k]].name) + " > " + lit(k);
          where += (where.empty() ? "" : " OR ") + ("(" + term + ")");
        }
        sql += " WHERE " + where;
      }
      std::string order;
      for (uint32_t k : t.key) order += (order.empty() ? "" : ", ") + quote_ident(t.cols[k].name);
      sql += fmt::format(" ORDER BY {} LIMIT {}", order, limit);
    } else {
      uint64_t offset = 0;
      if (pos_.resume.starts_with("o")) parse_uint(std::string_view(pos_.resume).substr(1), &offset);
      sql += fmt::format(" LIMIT {} OFFSET {}", limit, offset);
    }
    if (mysql_real_query(c, sql.data(), sql.size()) != 0)
      return server_error(c, fmt::format("cannot read {}.{}", quote_ident(t.db), quote_ident(t.table)));
    ResPtr res{mysql_use_result(c)};
    if (!res) return server_error(c, fmt::format("cannot read {}.{}", quote_ident(t.db), quote_ident(t.table)));
    batch.retain(snap_table_);
    size_t n = 0;
    MYSQL_ROW row;
    unsigned long* lens = nullptr;
    std::vector<std::string> last_key(t.key.size());
    const uint32_t ncols = uint32_t(t.cols.size());
    while ((row = mysql_fetch_row(res.get()))) {
      lens = mysql_fetch_lengths(res.get());
      Record& r = batch.add();
      r.op = Operation::snapshot;
      r.metadata = metadata(batch, t, 0, false);
      ObjectBuilder after = batch.object(ncols);
      for (uint32_t i = 0; i < ncols; ++i) {
        if (!row[i]) {
          after.add(t.cols[i].name, Value::null());
          continue;
        }
        auto v = text_to_value(t, i, std::string_view(row[i], lens[i]), batch.arena());
        if (!v.ok()) return std::move(v).error();
        after.add(t.cols[i].name, v.value());
      }
      r.after = after.build();
      if (!t.key.empty()) {
        ObjectBuilder k = batch.object(uint32_t(t.key.size()));
        for (size_t j = 0; j < t.key.size(); ++j) {
          const uint32_t i = t.key[j];
          k.add(t.cols[i].name, r.after.fields()[i].value);
          last_key[j].assign(row[i] ? row[i] : "", row[i] ? lens[i] : 0);
        }
        r.key = k.build();
      }
      ++n;
    }
    if (mysql_errno(c)) return server_error(c, fmt::format("snapshot of {}.{} failed", t.db, t.table));
    snapshot_rows_ += int64_t(n);
    if (n < limit) {
      ++pos_.table_index;
      pos_.resume.clear();
    } else if (!t.key.empty()) {
      std::string resume = "k";
      for (size_t j = 0; j < last_key.size(); ++j) resume += (j ? "," : "") + bl::to_hex(last_key[j]);
      pos_.resume = resume;
    } else {
      uint64_t offset = 0;
      if (pos_.resume.starts_with("o")) parse_uint(std::string_view(pos_.resume).substr(1), &offset);
      pos_.resume = "o" + std::to_string(offset + n);
    }
  }
  if (ctx_.stats) ctx_.stats->snapshot_rows_done = snapshot_rows_;
  batch.set_position(pos_.encode());
  if (pos_.phase == Position::Phase::done) return ReadStatus::end;
  return ReadStatus::more;
}

// ── streaming ───────────────────────────────────────────────────────────────

Status MysqlSource::start_stream() {
  stop_stream();
  const unsigned hb_s = unsigned(std::max<int64_t>(1, heartbeat_.count() / 1000));
  auto c = connect(opts_, std::max(30u, hb_s * 3));
  if (!c.ok()) return std::move(c).error();
  rpl_conn_ = std::move(c.value());
  MYSQL* m = rpl_conn_.get();
  const uint64_t hb_ns = uint64_t(heartbeat_.count()) * 1000000ull;
  std::vector<std::string> setup = {
      "SET @master_binlog_checksum = @@global.binlog_checksum",
      "SET @source_binlog_checksum = @@global.binlog_checksum",
      fmt::format("SET @master_heartbeat_period = {}", hb_ns),
  };
  const bool use_gtid = mariadb_ && !pos_.gtid.empty();
  if (mariadb_) {
    setup.push_back("SET @mariadb_slave_capability = 4");
    if (use_gtid) {
      setup.push_back(fmt::format("SET @slave_connect_state = {}", literal(m, pos_.gtid)));
      setup.push_back("SET @slave_gtid_strict_mode = 0");
      setup.push_back("SET @slave_gtid_ignore_duplicates = 0");
    }
  }
  for (const std::string& sql : setup) {
    if (mysql_real_query(m, sql.data(), sql.size()) != 0 && mysql_errno(m) != ER_UNKNOWN_SYSTEM_VARIABLE) {
      Error e = server_error(m, "cannot set up the binlog connection");
      if (e.code() == Errc::connection) return e;
    }
    if (ResPtr r{mysql_store_result(m)}) {
    }
  }
  auto q = query(m, "SELECT @@global.binlog_checksum");
  checksum_ = q.ok() && !q.value().empty() && q.value()[0][0].value_or("") == "CRC32";
  rpl_ = mariadb_rpl_init(m);
  if (!rpl_) return Error(Errc::internal, "cannot initialise libmariadb's replication API");
  const std::string file = use_gtid ? "" : pos_.file;
  mariadb_rpl_optionsv(rpl_, MARIADB_RPL_SERVER_ID, server_id_);
  mariadb_rpl_optionsv(rpl_, MARIADB_RPL_FILENAME, file.c_str(), file.size());
  mariadb_rpl_optionsv(rpl_, MARIADB_RPL_START, (unsigned long)(use_gtid ? 4 : std::max<uint64_t>(4, pos_.pos)));
  mariadb_rpl_optionsv(rpl_, MARIADB_RPL_FLAGS, 0u);
  const std::string where = use_gtid ? "GTID " + pos_.gtid : fmt::format("{}:{}", pos_.file, pos_.pos);
  auto dump_error = [&](unsigned no, const std::string& msg) -> Error {
    if (no == ER_SPECIFIC_ACCESS_DENIED_ERROR || no == ER_ACCESS_DENIED_ERROR || no == 1227)
      return Error(Errc::permission, fmt::format("user '{}' cannot read the binlog ({}): GRANT REPLICATION SLAVE ON *.* "
                                                 "TO '{}'", opts_.url.user, msg, opts_.url.user));
    if (no == 1236)  // ER_MASTER_FATAL_ERROR_READING_BINLOG: purged or unknown position
      return Error(Errc::not_found, fmt::format("binlog position {} is no longer on {} ({}): the changes since then are "
                                                "lost; run `sluice cleanup` and start over with a new snapshot",
                                                where, opts_.url.redacted(), msg));
    if (connection_errno(no)) return Error(Errc::connection, fmt::format("binlog stream: {} ({})", msg, no), true);
    return Error(Errc::data, fmt::format("binlog stream from {}: {} ({})", where, msg, no));
  };
  if (mariadb_rpl_open(rpl_) != 0) return dump_error(mysql_errno(m), mysql_error(m));
  // The first packet tells whether the server accepted the position.
  const unsigned long len = mysql_net_read_packet(m);
  if (len == packet_error || len == 0) return dump_error(mysql_errno(m), mysql_error(m));
  std::string first(reinterpret_cast<const char*>(m->net.read_pos) + 1, len - 1);
  queue_owner_ = std::make_unique<EventQueue>();
  queue_ = queue_owner_.get();
  queue_->push(std::move(first));
  EventQueue* q2 = queue_;
  reader_ = std::jthread([m, q2, dump_error](std::stop_token st) {
    while (!st.stop_requested()) {
      const unsigned long n = mysql_net_read_packet(m);
      if (n == packet_error || n == 0) {
        q2->fail(dump_error(mysql_errno(m), mysql_error(m)));
        return;
      }
      const uint8_t* p = m->net.read_pos;
      if (p[0] == 0xfe && n < 8) {
        q2->fail(Error(Errc::connection, "the server ended the binlog stream", true));
        return;
      }
      q2->push(std::string(reinterpret_cast<const char*>(p) + 1, n - 1));
    }
  });
  streaming_ = true;
  in_tx_ = false;
  tx_n_ = 0;
  skip_n_ = 0;
  fd_.reset();
  cur_file_ = pos_.file;
  reconnect_delay_ = std::chrono::milliseconds(200);
  spdlog::info("pipeline {}: streaming the binlog of {} from {} (server_id {})", ctx_.pipeline_id,
               opts_.url.redacted(), where, server_id_);
  return ok_status();
}

void MysqlSource::stop_stream() noexcept {
  if (reader_.joinable()) {
    reader_.request_stop();
    if (queue_) queue_->stop();
    if (rpl_conn_) {
      const int fd = int(mysql_get_socket(rpl_conn_.get()));
      if (fd >= 0) ::shutdown(fd, SHUT_RDWR);  // unblocks the reader's read
    }
    reader_.join();
  }
  if (rpl_) {
    // mariadb_rpl_close would close the connection too: free only the handle's memory here.
    rpl_->mysql = nullptr;
    mariadb_rpl_close(rpl_);
    rpl_ = nullptr;
  }
  rpl_conn_.reset();
  queue_ = nullptr;
  queue_owner_.reset();
  streaming_ = false;
}

// A transaction starts at binlog position `start` (its GTID or BEGIN event). When it is the one a
// restart interrupted, its first resume_n_ changes were written already: skip them.
void MysqlSource::begin_tx(uint32_t start, const bl::Header& h) {
  in_tx_ = true;
  tx_saw_begin_ = false;
  tx_file_ = cur_file_;
  tx_pos_ = start;
  tx_n_ = 0;
  tx_time_ = h.timestamp;
  tx_server_id_ = h.server_id;
  tx_meta_.valid = false;
  tx_gtid_text_.clear();
  skip_n_ = 0;
  if (resume_n_ && resume_tx_pos_ == start && resume_tx_file_ == cur_file_) skip_n_ = resume_n_;
  resume_n_ = 0;
}

void MysqlSource::commit_tx(uint32_t next_pos) {
  if (next_pos) {
    pos_.file = cur_file_;
    pos_.pos = next_pos;
  }
  if (!pending_gtid_.empty()) pos_.gtid = pending_gtid_;
  pending_gtid_.clear();
  in_tx_ = false;
  tx_saw_begin_ = false;
  tx_n_ = 0;
  skip_n_ = 0;
  if (ctx_.stats && tx_time_)
    ctx_.stats->lag_ms = std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count() -
               int64_t(tx_time_) * 1000);
}

// `name`, `db`.`name` or db.name (quotes optional) → (db, name), from the start of `s`.
std::optional<std::pair<std::string, std::string>> parse_qualified_name(std::string_view s, std::string_view default_db) {
  std::vector<std::string> parts(1);
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t')) ++i;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '`') {
      for (++i; i < s.size(); ++i) {
        if (s[i] == '`') {
          if (i + 1 < s.size() && s[i + 1] == '`') { parts.back() += '`'; ++i; continue; }
          break;
        }
        parts.back() += s[i];
      }
    } else if (c == '.') {
      parts.emplace_back();
    } else if (c == ' ' || c == ';' || c == '\n' || c == '\t') {
      break;
    } else {
      parts.back() += c;
    }
  }
  if (parts.size() > 2 || parts.back().empty()) return std::nullopt;
  if (parts.size() == 1) return std::make_pair(std::string(default_db), parts[0]);
  return std::make_pair(parts[0], parts[1]);
}

void MysqlSource::on_ddl(Batch& batch, std::string_view db, std::string_view sql, uint32_t event_pos) {
  // Any DDL may change a captured table's columns: forget every cached description, so the next
  // TABLE_MAP re-reads information_schema.
  std::string head;
  for (char ch : sql.substr(0, 16)) head += char(std::toupper(uint8_t(ch)));
  bool ddl = false;
  for (const char* kw : {"ALTER", "CREATE", "DROP", "RENAME", "TRUNCATE"}) ddl |= head.starts_with(kw);
  if (!ddl) return;
  schemas_.clear();
  maps_.clear();
  // Account statements (CREATE USER ... IDENTIFIED BY, ALTER USER, GRANT) can carry passwords:
  // never echo them.
  std::string upper;
  for (char ch : sql.substr(0, 4096)) upper += char(std::toupper(uint8_t(ch)));
  bool secret = upper.find("IDENTIFIED") != std::string::npos || upper.find("PASSWORD") != std::string::npos;
  for (const char* kw : {"CREATE USER", "ALTER USER", "DROP USER", "RENAME USER", "CREATE ROLE", "CREATE SERVER",
                         "ALTER SERVER", "CREATE OR REPLACE USER", "CREATE OR REPLACE SERVER"})
    secret |= upper.starts_with(kw);
  if (secret)
    spdlog::debug("pipeline {}: account or server statement in the binlog (not shown)", ctx_.pipeline_id);
  else
    spdlog::info("pipeline {}: DDL in {}: {}", ctx_.pipeline_id, quote_ident(db), quote_user_text(sql.substr(0, 200)));
  if (!head.starts_with("TRUNCATE")) return;
  // TRUNCATE [TABLE] name: one key-less delete marked `truncate`; keyed destinations empty the table.
  std::string_view rest = sql.substr(8);
  while (!rest.empty() && rest[0] == ' ') rest.remove_prefix(1);
  std::string word;
  for (char ch : rest.substr(0, 6)) word += char(std::toupper(uint8_t(ch)));
  if (word == "TABLE " || word == "TABLE\n") rest.remove_prefix(6);
  auto name = parse_qualified_name(rest, db);
  if (!name || !captured(name->first, name->second)) return;
  if (tx_n_ < skip_n_) {  // written before the restart
    ++tx_n_;
    return;
  }
  ++tx_n_;
  auto t = std::make_shared<TableSchema>();
  t->db = name->first;
  t->table = name->second;
  batch.retain(t);
  Record& rec = batch.add();
  rec.op = Operation::remove;
  ObjectBuilder m = batch.object(10);
  for (const Field& f : metadata(batch, *t, event_pos, true).fields()) m.add(f.name, f.value);
  m.add(meta::kTruncate, Value::string("true"));
  rec.metadata = m.build();
}

Status MysqlSource::handle_rows(Batch& batch, const bl::Event& e) {
  auto rows = bl::parse_rows(e, *fd_);
  if (!rows.ok()) return std::move(rows).error();
  auto it = maps_.find(rows->table_id);
  if (it == maps_.end()) return Error(Errc::data, fmt::format("binlog rows event for table id {} without its TABLE_MAP", rows->table_id));
  TableMapState& ms = it->second;
  if (!ms.schema) return ok_status();  // not captured
  const TableSchema& t = *ms.schema;
  if (std::find(retained_.begin(), retained_.end(), &t) == retained_.end()) {
    batch.retain(ms.schema);
    retained_.push_back(&t);
  }
  const size_t n = ms.map.types.size();
  row_before_.resize(n);
  row_after_.resize(n);
  std::string_view data = rows->rows;
  const uint32_t event_pos = e.header.next_pos ? e.header.next_pos - e.header.size : 0;
  auto to_object = [&](const std::vector<Value>& vals) {
    uint32_t cnt = 0;
    for (size_t i = 0; i < n; ++i) cnt += !vals[i].is_absent();
    ObjectBuilder b = batch.object(cnt);
    for (size_t i = 0; i < n; ++i)
      if (!vals[i].is_absent()) b.add(ms.names[i], vals[i]);
    return b.build();
  };
  while (!data.empty()) {
    const bool upd = rows->kind == bl::RowsEvent::Kind::update;
    auto used = bl::decode_row(ms.map, t.cols, rows->present, data, batch.arena(), row_before_.data());
    if (!used.ok()) return used.error().with_context(fmt::format("{}.{}: ", t.db, t.table));
    data.remove_prefix(used.value());
    if (upd) {
      auto used2 = bl::decode_row(ms.map, t.cols, rows->present_after, data, batch.arena(), row_after_.data());
      if (!used2.ok()) return used2.error().with_context(fmt::format("{}.{}: ", t.db, t.table));
      data.remove_prefix(used2.value());
    }
    ++tx_n_;
    if (tx_n_ <= skip_n_) continue;  // written before the restart
    Record& r = batch.add();
    r.position = {};
    r.metadata = metadata(batch, t, event_pos, true);
    switch (rows->kind) {
      case bl::RowsEvent::Kind::write:
        r.op = Operation::create;
        r.after = to_object(row_before_);
        break;
      case bl::RowsEvent::Kind::update:
        r.op = Operation::update;
        r.before = to_object(row_before_);
        r.after = to_object(row_after_);
        break;
      case bl::RowsEvent::Kind::remove:
        r.op = Operation::remove;
        r.before = to_object(row_before_);
        break;
    }
    if (!ms.key.empty()) {
      ObjectBuilder k = batch.object(uint32_t(ms.key.size()));
      for (uint32_t i : ms.key) {
        const Value* v = rows->kind == bl::RowsEvent::Kind::update && !row_after_[i].is_absent() ? &row_after_[i]
                                                                                                   : &row_before_[i];
        if (v->is_absent() && rows->kind == bl::RowsEvent::Kind::update) v = &row_before_[i];
        if (!v->is_absent()) k.add(ms.names[i], *v);
      }
      r.key = k.build();
    }
  }
  return ok_status();
}

Status MysqlSource::handle_event(Batch& batch, std::string_view raw) {
  if (raw.size() < bl::kHeaderSize) return Error(Errc::data, "binlog event shorter than its header");
  const uint8_t type = uint8_t(raw[4]);
  if (type == bl::kFormatDescription) {
    auto fd = bl::parse_format_description(raw);
    if (!fd.ok()) return std::move(fd).error();
    fd_ = std::move(fd.value());
    checksum_ = fd_->crc32;
    return ok_status();
  }
  auto ev = bl::parse_event(raw, checksum_);
  if (!ev.ok()) return std::move(ev).error();
  const bl::Event& e = ev.value();
  const uint32_t start = e.header.next_pos >= e.header.size ? e.header.next_pos - e.header.size : 0;
  if (type != bl::kRotate && type != bl::kHeartbeat && !fd_)
    return Error(Errc::data, fmt::format("binlog event type {} before the FORMAT_DESCRIPTION event", type));
  switch (type) {
    case bl::kRotate: {
      auto r = bl::parse_rotate(e);
      if (!r.ok()) return std::move(r).error();
      cur_file_ = r->file;
      if (!(e.header.flags & bl::kFlagArtificial) && !in_tx_) {
        pos_.file = r->file;
        pos_.pos = r->position;
      }
      if (!in_tx_) maps_.clear();  // table ids are per server run; forget those of older files
      return ok_status();
    }
    case bl::kMariaGtid: {
      auto g = bl::parse_maria_gtid(e);
      if (!g.ok()) return std::move(g).error();
      begin_tx(start, e.header);
      tx_gtid_text_ = g->to_string();
      pending_gtid_ = gtid_state_apply(pos_.gtid, g.value());
      return ok_status();
    }
    case bl::kMysqlGtid:
    case bl::kMysqlAnonymousGtid: {
      begin_tx(start, e.header);
      if (type == bl::kMysqlGtid) {
        auto g = bl::parse_mysql_gtid(e);
        if (g.ok()) tx_gtid_text_ = g->to_string();
      }
      return ok_status();
    }
    case bl::kQuery: {
      auto q = bl::parse_query(e);
      if (!q.ok()) return std::move(q).error();
      if (q->sql == "BEGIN") {
        if (!in_tx_) begin_tx(start, e.header);  // no GTID event before it (old servers)
        tx_saw_begin_ = true;
        return ok_status();
      }
      if (q->sql == "COMMIT" || q->sql == "ROLLBACK") {
        commit_tx(e.header.next_pos);
        return ok_status();
      }
      on_ddl(batch, q->database, q->sql, start);
      if (!in_tx_ || !tx_saw_begin_) commit_tx(e.header.next_pos);  // a statement of its own
      return ok_status();
    }
    case bl::kXid:
      commit_tx(e.header.next_pos);
      return ok_status();
    case bl::kTableMap: {
      auto m = bl::parse_table_map(e, *fd_);
      if (!m.ok()) return std::move(m).error();
      auto it = maps_.find(m->table_id);
      if (it != maps_.end() && it->second.map.same_shape(m.value()) && it->second.map.database == m->database &&
          it->second.map.table == m->table)
        return ok_status();
      TableMapState ms;
      ms.map = std::move(m.value());
      if (captured(ms.map.database, ms.map.table)) {
        auto sit = schemas_.find(ms.map.database + "." + ms.map.table);
        std::shared_ptr<const TableSchema> schema;
        if (sit != schemas_.end() && sit->second->cols.size() == ms.map.types.size()) {
          schema = sit->second;
        } else {
          auto s = load_schema(ms.map.database, ms.map.table);
          if (!s.ok()) return std::move(s).error();
          schema = s.value();
        }
        if (!ms.map.column_names.empty()) {
          // binlog_row_metadata=FULL names the columns as they were when the event was written:
          // exact even when replaying events from before a DDL.
          bool same = schema->cols.size() == ms.map.column_names.size();
          for (size_t i = 0; same && i < schema->cols.size(); ++i) same = schema->cols[i].name == ms.map.column_names[i];
          if (!same || !ms.map.is_unsigned.empty()) {
            auto copy = std::make_shared<TableSchema>();
            copy->db = schema->db;
            copy->table = schema->table;
            for (size_t i = 0; i < ms.map.column_names.size(); ++i) {
              const std::string& name = ms.map.column_names[i];
              bl::ColumnInfo ci;
              std::string data_type;
              for (size_t j = 0; j < schema->cols.size(); ++j)
                if (schema->cols[j].name == name) {
                  ci = schema->cols[j];
                  data_type = schema->data_types[j];
                }
              ci.name = name;
              if (!ms.map.is_unsigned.empty()) ci.is_unsigned = ms.map.is_unsigned[i];
              copy->cols.push_back(std::move(ci));
              copy->data_types.push_back(std::move(data_type));
            }
            for (uint32_t k : schema->key)
              for (uint32_t i = 0; i < copy->cols.size(); ++i)
                if (copy->cols[i].name == schema->cols[k].name) copy->key.push_back(i);
            schema = copy;
          }
        } else if (schema->cols.size() != ms.map.types.size()) {
          // The table changed since this event was written (replay across DDL): the binlog alone
          // does not name the columns; name the extra ones by position.
          spdlog::warn("pipeline {}: {}.{} has {} columns now but {} in the binlog at {}:{}; columns beyond the current "
                       "ones are named col_N", ctx_.pipeline_id, ms.map.database, ms.map.table, schema->cols.size(),
                       ms.map.types.size(), cur_file_, start);
          auto copy = std::make_shared<TableSchema>(*schema);
          copy->cols.resize(ms.map.types.size());
          copy->data_types.resize(ms.map.types.size());
          for (size_t i = schema->cols.size(); i < copy->cols.size(); ++i) copy->cols[i].name = fmt::format("col_{}", i + 1);
          std::erase_if(copy->key, [&](uint32_t k) { return k >= copy->cols.size(); });
          schema = copy;
        }
        ms.schema = schema;
        ms.key = schema->key;
        for (const auto& c : schema->cols) ms.names.push_back(c.name);
      }
      maps_[ms.map.table_id] = std::move(ms);
      return ok_status();
    }
    case bl::kWriteRowsV1: case bl::kUpdateRowsV1: case bl::kDeleteRowsV1:
    case bl::kWriteRowsV2: case bl::kUpdateRowsV2: case bl::kDeleteRowsV2:
      return handle_rows(batch, e);
    case bl::kMysqlPartialUpdateRows:
      return Error(Errc::unsupported, "binlog has PARTIAL_UPDATE_ROWS events: set binlog_row_value_options='' on the server");
    default:
      if (type >= bl::kMariaWriteRowsCompressedV1 && type <= bl::kMariaDeleteRowsCompressed)
        return Error(Errc::unsupported, "binlog has compressed row events: set log_bin_compress=OFF on the server");
      return ok_status();  // heartbeats, GTID lists, annotate rows, checkpoints, intvar, ...
  }
}

std::string MysqlSource::cdc_position() const {
  Position p = pos_;
  p.phase = Position::Phase::cdc;
  p.tx_n = 0;
  if (in_tx_ && std::max(tx_n_, skip_n_) > 0) {
    p.tx_file = tx_file_;
    p.tx_pos = tx_pos_;
    p.tx_n = std::max(tx_n_, skip_n_);
  } else if (!in_tx_ && resume_n_ > 0) {
    p.tx_file = resume_tx_file_;
    p.tx_pos = resume_tx_pos_;
    p.tx_n = resume_n_;
  }
  return p.encode();
}

Result<ReadStatus> MysqlSource::read_cdc(Batch& batch, const ReadRequest& req, std::stop_token stop) {
  const auto started = Clock::now();
  Clock::time_point first{};
  bool idle = false;
  if (!streaming_) {
    // Reconnecting: one attempt per due time, so that read() returns (idle) in between and the
    // runtime keeps seeing stop requests and idleness while the server is away.
    const auto now = Clock::now();
    if (now < next_attempt_) {
      std::mutex mu;
      std::condition_variable_any cv;
      std::unique_lock lock(mu);
      cv.wait_until(lock, stop, std::min(next_attempt_, now + req.poll), [] { return false; });
      return ReadStatus::idle;
    }
    Status st = start_stream();
    if (!st.ok()) {
      if (!st.error().retriable()) return st.error();
      spdlog::warn("pipeline {}: {} (retrying in {} ms)", ctx_.pipeline_id, st.error().message(), reconnect_delay_.count());
      next_attempt_ = Clock::now() + reconnect_delay_;
      reconnect_delay_ = std::min<std::chrono::milliseconds>(reconnect_delay_ * 2, std::chrono::seconds(30));
      return ReadStatus::idle;
    }
  }
  while (batch.size() < req.max_records && batch.bytes() < req.max_bytes && !stop.stop_requested()) {
    const auto deadline = batch.empty() ? started + req.poll : first + req.linger;
    auto got = queue_->pop(&event_buf_, deadline);
    if (!got.ok()) {
      Error e = std::move(got).error();
      if (!e.retriable()) return e;
      spdlog::warn("pipeline {}: binlog connection lost: {} (reconnecting)", ctx_.pipeline_id, e.message());
      // Restart from exactly what this and earlier batches cover.
      const std::string p = cdc_position();
      stop_stream();
      if (auto parsed = Position::parse(p)) {
        pos_ = *parsed;
        if (parsed->tx_n) {
          resume_tx_file_ = parsed->tx_file;
          resume_tx_pos_ = parsed->tx_pos;
          resume_n_ = parsed->tx_n;
        }
        pos_.tx_n = 0;
      }
      in_tx_ = false;
      pending_gtid_.clear();
      break;
    }
    if (!got.value()) {
      idle = true;
      break;
    }
    const size_t before = batch.size();
    if (Status st = handle_event(batch, event_buf_); !st.ok()) return st.error();
    if (before == 0 && batch.size() > 0) first = Clock::now();
  }
  const std::string position = cdc_position();
  if (!batch.empty() || position != last_returned_position_) {
    batch.set_position(position);
    last_returned_position_ = position;
  }
  return idle ? ReadStatus::idle : ReadStatus::more;
}

Result<ReadStatus> MysqlSource::read(Batch& batch, const ReadRequest& req, std::stop_token stop) {
  tx_meta_.valid = false;
  retained_.clear();
  switch (pos_.phase) {
    case Position::Phase::snapshot: return read_snapshot(batch, req, stop);
    case Position::Phase::cdc: return read_cdc(batch, req, stop);
    case Position::Phase::done: batch.set_position(pos_.encode()); return ReadStatus::end;
    case Position::Phase::none: break;
  }
  return Error(Errc::internal, "mysql source read before open");
}

void MysqlSource::close() noexcept {
  stop_stream();
  conn_.reset();
}

}  // namespace

std::span<const SettingSpec> mysql_source_settings() noexcept { return kSourceSettings; }

std::optional<std::string> mysql_binlog_config_problem(std::string_view log_bin, std::string_view format,
                                                       std::string_view target) {
  if (log_bin != "1" && log_bin != "ON")
    return fmt::format("binary logging is off on {}: start the server with log_bin and binlog_format=ROW in its "
                       "configuration (or use snapshot.mode initial_only)", target);
  if (format != "ROW")
    return fmt::format("binlog_format is {} on {}; row-based logging is required: set binlog_format=ROW in the server "
                       "configuration and run SET GLOBAL binlog_format=ROW", format, target);
  return std::nullopt;
}

Result<std::unique_ptr<Source>> make_mysql_source(const Settings& s) {
  auto url = mysql::parse_mysql_url(s.get_string("url"));
  if (!url.ok()) return std::move(url).error();
  for (const std::string& t : s.get_list("tables")) {
    const size_t dot = t.find('.');
    if (t.empty() || (dot != std::string::npos && (dot == 0 || dot + 1 == t.size() || t.find('.', dot + 1) != std::string::npos)) ||
        (t.find('*') != std::string::npos && t != "*" && !t.ends_with(".*")))
      return Error(Errc::config, fmt::format("setting 'tables': {} is not database.table, database.*, a table name or "
                                             "\"*\"", quote_user_text(t)));
  }
  if (s.get_duration("heartbeat.interval").count() < 1000)
    return Error(Errc::config, "setting 'heartbeat.interval' must be at least 1s");
  const int64_t sid = s.get_int("server_id");
  if (sid < 0 || sid > 4294967295LL) return Error(Errc::config, "setting 'server_id' must be from 1 to 4294967295 (0: derived)");
  const std::string mode = s.get_string("tls.mode");
  if ((mode == "verify_ca" || mode == "verify_identity") && s.get_string("tls.ca").empty())
    return Error(Errc::config, fmt::format("setting 'tls.mode' {} needs tls.ca (the CA certificate file)", mode));
  return std::unique_ptr<Source>(std::make_unique<MysqlSource>(s, std::move(url.value())));
}

}  // namespace sluice
