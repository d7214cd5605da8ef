#include "connectors/mysql/mysql_source.h"

#include <fmt/format.h>
#include <mysqld_error.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

#include "connectors/mysql/mysql_source_driver.h"

namespace sluice {
namespace mysql {

namespace {

constexpr auto kSourceSettings = settings_table<MysqlSourceOptions>(
    setting<&MysqlSourceOptions::url>(
        "url",
        "Server and default database: mysql://user:password@host:port/database (MySQL 8 or MariaDB 10.11, "
        "log_bin with binlog_format=ROW). The user needs SELECT on the tables, REPLICATION SLAVE and "
        "REPLICATION CLIENT (MariaDB: BINLOG MONITOR), and RELOAD on MySQL for the snapshot lock.")
        .mandatory()
        .secret_value(),
    setting<&MysqlSourceOptions::user>("user", kUserDoc),
    setting<&MysqlSourceOptions::password>("password", kPasswordDoc).secret_value(),
    setting<&MysqlSourceOptions::password_file>("password_file", kPasswordFileDoc),
    setting<&MysqlSourceOptions::tables>(
        "tables",
        "Tables to capture: database.table, database.* (every table of a database), a bare table name (in "
        "the URL's database), or \"*\" for every table of the URL's database.")
        .with_default("*"),
    setting<&MysqlSourceOptions::snapshot_mode>(
        "snapshot.mode",
        "initial: snapshot the tables, then stream changes; never: only stream changes from the current "
        "binlog position; initial_only: snapshot and stop.")
        .one_of("initial,never,initial_only")
        .with_default("initial"),
    setting<&MysqlSourceOptions::zero_dates>(
        "zero_dates",
        "What a zero date becomes (a DATE, DATETIME or TIMESTAMP with a zero month or day, "
        "`0000-00-00`, `2024-00-15`, stored under a permissive sql_mode; it is no date). reject: the "
        "record goes to the dead-letter queue with on_error: dlq (the value as text, `sluice.error` "
        "saying why), otherwise the pipeline stops with an error naming the column; null: NULL, as "
        "Debezium writes zero dates.")
        .one_of("reject,null")
        .with_default("reject"),
    // A value below 1 is raised to 1 by finalize() (accepted since the first release), so no range.
    setting<&MysqlSourceOptions::snapshot_chunk_size>(
        "snapshot.chunk_size",
        "Most rows per snapshot query (keyset pagination on the primary key), and per chunk of an "
        "incremental snapshot; fewer when the batch's bytes (`batch.max_bytes`) hold fewer of the "
        "table's rows. A restart re-reads at most one chunk.")
        .with_default("10000"),
    setting<&MysqlSourceOptions::signal_table>(
        "signal.table",
        "Signal table (database.table, or a table of the URL's database) with Debezium's columns `id "
        "VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, data TEXT`; the user needs INSERT on it. A row "
        "of type execute-snapshot starts an incremental snapshot of the tables it names (`sluice snapshot` "
        "inserts one); sluice writes its chunk watermarks (snapshot-window-open / -close rows) into it, so "
        "incremental snapshots — of a table added to `tables` on restart too — need it."),
    setting<&MysqlSourceOptions::server_id>(
        "server_id",
        "Replica server id of the binlog connection; unique among the server's replicas (two connections "
        "with one id disconnect each other). 0: derived from the pipeline id.")
        .with_default("0")
        .at_least(0)
        .at_most(4294967295.0),
    setting<&MysqlSourceOptions::heartbeat_interval>(
        "heartbeat.interval",
        "Binlog heartbeat period asked of the server while no event arrives; a connection silent for "
        "three periods is considered dead and reopened.")
        .with_default("10s")
        .at_least(1000),
    setting<&MysqlSourceOptions::verify_checksum>(
        "binlog.verify_checksum",
        "Verify each binlog event's CRC32 (when the server writes them: binlog_checksum=CRC32), on "
        "the thread that reads the connection. false: only strip them, which saves sluice that "
        "work; allowed only on a checked transport (tls.mode required, verify_ca or "
        "verify_identity: TLS detects corruption in transit), and nothing then detects an event "
        "the server read corrupt from its own binlog file.")
        .with_default("true"),
    setting<&MysqlSourceOptions::decode_threads>(
        "binlog.decode_threads",
        "Threads that decode the row images of rows events, the source's own among them. Beyond "
        "it, threads decode the rows events that follow the one being handled while the source "
        "builds records; records keep the binlog's order. 0: 2 when the machine has at least four "
        "cores (one free beside the source's, the connection reader's and the server's), else 1; "
        "1: the source's thread alone.")
        .with_default("0")
        .at_least(0)
        .at_most(16),
    setting<&MysqlSourceOptions::tls_mode>(
        "tls.mode",
        "TLS to the server. disabled: never; preferred: when the server offers it; required: always, "
        "without checking the certificate; verify_ca / verify_identity: always, checking the "
        "certificate against tls.ca.")
        .one_of("disabled,preferred,required,verify_ca,verify_identity")
        .with_default("preferred"),
    setting<&MysqlSourceOptions::tls_ca>(
        "tls.ca", "PEM file of the certificate authority for tls.mode verify_ca / verify_identity.")
        .file_path(),
    setting<&MysqlSourceOptions::tls_cert>("tls.cert", kTlsCertDoc).file_path(),
    setting<&MysqlSourceOptions::tls_key>("tls.key", kTlsKeyDoc).file_path(),
    setting<&MysqlSourceOptions::tls_key_password>("tls.key_password", kTlsKeyPasswordDoc)
        .secret_value(),
    setting<&MysqlSourceOptions::connect_timeout>("connect_timeout",
                                                  "How long connecting may take.")
        .with_default("10s"),
    setting<&MysqlSourceOptions::tcp_user_timeout>(
        "tcp_user_timeout",
        "TCP keepalives and TCP_USER_TIMEOUT of every connection: the kernel drops a connection "
        "whose data or keepalive probes stay unacknowledged this long (a blackholed link). A "
        "silent binlog stream is taken for dead after 3 x heartbeat.interval (at least 30s) "
        "either way. 0: the system's defaults.")
        .with_default("30s")
        .at_least(0),
    setting<&MysqlSourceOptions::reconnect_initial_backoff>(
        "reconnect.initial_backoff",
        "First delay before reconnecting after the binlog stream broke (later ones double, "
        "jittered).")
        .with_default("200ms")
        .at_least(1),
    setting<&MysqlSourceOptions::reconnect_max_backoff>(
        "reconnect.max_backoff",
        "Longest delay between two reconnect attempts: a server back after an outage is "
        "reconnected at most this long later.")
        .with_default("5s")
        .at_least(1),
    setting<&MysqlSourceOptions::message_key_columns>(
        "message.key.columns",
        "Record key of tables without a primary key, per table: a map of database.table to a comma-separated "
        "list of its columns (`message.key.columns: {shop.events: \"device, ts\"}`; Debezium's setting of the "
        "same name). Without it such records carry no key. A listed table must be captured and have no primary "
        "key; its snapshot then pages by offset, as for any table without a primary key."));

// The checks no single declaration expresses; parses the URL once.
Status finalize(MysqlSourceOptions& o) {
  auto url = mysql::parse_mysql_url(o.url, {o.user, o.password, o.password_file});
  if (!url.ok()) return std::move(url).error();
  if (o.reconnect_max_backoff < o.reconnect_initial_backoff)
    return Error(Errc::config,
                 "setting 'reconnect.max_backoff' is below 'reconnect.initial_backoff' (raise it, "
                 "or lower the initial backoff)");
  if (o.tables.empty())
    return Error(Errc::config,
                 "setting 'tables' lists no table (list database.table names, or \"*\" for every "
                 "table of the URL's database)");
  for (const std::string& t : o.tables) {
    const size_t dot = t.find('.');
    if (t.empty() ||
        (dot != std::string::npos &&
         (dot == 0 || dot + 1 == t.size() || t.find('.', dot + 1) != std::string::npos)) ||
        (t.find('*') != std::string::npos && t != "*" && !t.ends_with(".*")))
      return Error(
          Errc::config,
          fmt::format("setting 'tables': {} is not database.table, database.*, a table name or "
                      "\"*\"",
                      quote_user_text(t)));
  }
  SLUICE_TRY(check_tls_settings({o.tls_mode, o.tls_ca, o.tls_cert, o.tls_key, o.tls_key_password}));
  if (!o.verify_checksum && (o.tls_mode == "disabled" || o.tls_mode == "preferred"))
    return Error(Errc::config,
                 fmt::format("setting 'binlog.verify_checksum: false' needs a checked transport: "
                             "tls.mode is {}, which may carry the binlog in plain text (set "
                             "tls.mode to required, verify_ca or verify_identity, or verify "
                             "the checksums)",
                             o.tls_mode));
  for (const auto& [table, columns] : o.message_key_columns) {
    const size_t dot = table.find('.');
    if (dot == std::string::npos || dot == 0 || dot + 1 == table.size() ||
        table.find('.', dot + 1) != std::string::npos || table.find('*') != std::string::npos)
      return Error(Errc::config,
                   fmt::format("setting 'message.key.columns': {} is not database.table",
                               quote_user_text(table)));
    SLUICE_TRY_ASSIGN(std::vector<std::string> list, parse_key_column_list(table, columns));
    o.key_columns_by_table[{table.substr(0, dot), table.substr(dot + 1)}] = std::move(list);
  }
  if (!o.signal_table.empty()) {
    auto name = parse_qualified_name(o.signal_table, "");
    if (!name || name->second.empty() || o.signal_table.find('*') != std::string::npos)
      return Error(Errc::config,
                   fmt::format("setting 'signal.table': {} is not database.table or a table name",
                               quote_user_text(o.signal_table)));
    o.signal_db = name->first.empty() ? url.value().database : name->first;
    o.signal_name = name->second;
  }
  o.snapshot_chunk_size = std::max<int64_t>(1, o.snapshot_chunk_size);
  o.parsed_url = std::move(url.value());
  return ok_status();
}

}  // namespace

MysqlDriver::MysqlDriver(MysqlSourceOptions o)
    : tables_setting_(std::move(o.tables)),
      zero_dates_null_(o.zero_dates == "null"),
      verify_checksum_(o.verify_checksum),
      decode_threads_(o.decode_threads > 0                       ? unsigned(o.decode_threads)
                      : std::thread::hardware_concurrency() >= 4 ? 2u
                                                                 : 1u),
      message_key_columns_(std::move(o.key_columns_by_table)),
      mode_(std::move(o.snapshot_mode)),
      chunk_size_(o.snapshot_chunk_size),
      server_id_setting_(o.server_id),
      heartbeat_(o.heartbeat_interval),
      reconnect_{o.reconnect_initial_backoff, o.reconnect_max_backoff},
      signal_setting_(std::move(o.signal_table)),
      signal_db_(std::move(o.signal_db)),
      signal_name_(std::move(o.signal_name)) {
  opts_.url = std::move(o.parsed_url);
  opts_.tcp_user_timeout = o.tcp_user_timeout;
  opts_.tls_mode = std::move(o.tls_mode);
  opts_.tls_ca = std::move(o.tls_ca);
  opts_.tls_cert = std::move(o.tls_cert);
  opts_.tls_key = std::move(o.tls_key);
  opts_.tls_key_password = std::move(o.tls_key_password);
  opts_.connect_timeout = o.connect_timeout;
}

Result<GtidSet> gtid_at(MysqlConn& c, const BinlogCoord& at) {
  auto g = c.query(fmt::format("SELECT BINLOG_GTID_POS({}, {})", c.quoted(at.file), at.pos),
                   "query failed");
  if (!g.ok() || g.value().empty()) return GtidSet{};  // no GTID there: the stream goes by file:pos
  const std::string text = g.value()[0][0].value_or("");
  auto set = GtidSet::parse(text);
  if (!set)
    return Error(Errc::data,
                 fmt::format("the server reports GTID position '{}' at {}:{}, not a GTID list",
                             text, at.file, at.pos));
  return std::move(*set);
}

Status MysqlDriver::check_server() {
  auto v = conn_.query("SELECT @@version, @@log_bin, @@binlog_format, @@server_id", "query failed");
  if (!v.ok()) return std::move(v).error();
  const MysqlRow& r = v.value().at(0);
  const std::string version = r[0].value_or("");
  mariadb_ = version.find("MariaDB") != std::string::npos;
  if (mode_ == "initial_only") return ok_status();  // a snapshot alone needs no binlog
  if (auto problem = mysql_binlog_config_problem(r[1].value_or("0"), r[2].value_or("unknown"),
                                                 opts_.url.redacted()))
    return Error(Errc::unsupported, *problem);
  if (r[3] && server_id_ == std::stoul(*r[3]))
    return Error(Errc::config,
                 fmt::format("server_id {} is the server's own id; set a different `server_id`",
                             server_id_));
  // REPLICATION CLIENT (BINLOG MONITOR on MariaDB): reading the binlog position.
  if (auto st = binlog_status(conn_); !st.ok()) {
    Error e = st.error().with_context("cannot read the binlog position: ");
    if (e.code() == Errc::permission || conn_.last_errno() == ER_SPECIFIC_ACCESS_DENIED_ERROR)
      return Error(
          Errc::permission,
          fmt::format("user '{}' lacks the REPLICATION CLIENT privilege{}: GRANT {} ON *.* TO '{}'",
                      opts_.url.user, mariadb_ ? " (BINLOG MONITOR)" : "",
                      mariadb_ ? "BINLOG MONITOR, REPLICATION SLAVE"
                               : "REPLICATION CLIENT, REPLICATION SLAVE",
                      opts_.url.user));
    return e;
  }
  // REPLICATION SLAVE: reading the binlog itself (checked on the grants; the dump also reports it).
  auto grants = conn_.query("SHOW GRANTS FOR CURRENT_USER()", "query failed");
  if (grants.ok()) {
    bool repl = false;
    for (const MysqlRow& g : grants.value()) {
      const std::string line = g.empty() ? "" : g[0].value_or("");
      if (line.find(" ON *.*") == std::string::npos) continue;
      if (line.find("ALL PRIVILEGES") != std::string::npos ||
          line.find("REPLICATION SLAVE") != std::string::npos ||
          line.find("REPLICATION REPLICA") != std::string::npos)
        repl = true;
    }
    // Roles may grant it too: only refuse when no role is in play.
    bool roles = false;
    for (const MysqlRow& g : grants.value())
      if (!g.empty() && g[0] && g[0]->starts_with("GRANT `")) roles = true;
    if (!repl && !roles)
      return Error(Errc::permission,
                   fmt::format("user '{}' lacks the REPLICATION SLAVE privilege needed to read the "
                               "binlog: GRANT REPLICATION SLAVE ON *.* TO '{}'",
                               opts_.url.user, opts_.url.user));
  }
  return ok_status();
}

Status MysqlDriver::connect(State& s) {
  st_ = &s;
  ctx_ = s.ctx;
  const ConnectorContext& ctx = s.ctx;
  if (server_id_setting_ > 0) {
    server_id_ = uint32_t(server_id_setting_);
  } else {
    uint32_t h = 2166136261u;  // FNV-1a of the pipeline id, kept clear of small hand-picked ids
    for (char c : ctx.pipeline_id) h = (h ^ uint8_t(c)) * 16777619u;
    server_id_ = 0x40000000u | (h & 0x3fffffffu);
  }
  auto c = MysqlConn::connect(opts_);
  if (!c.ok()) return std::move(c).error();
  conn_ = std::move(c.value());
  if (Status st = conn_.exec("SET SESSION time_zone='+00:00'", "query failed"); !st.ok()) return st;
  if (Status st = check_server(); !st.ok()) return st;
  if (Status st = resolve_tables(); !st.ok()) return st;
  if (!signal_name_.empty() && mode_ != "initial_only") SLUICE_TRY(check_signal_table());
  history_.clear();
  if (ctx_.history) {
    auto stored = ctx_.history->load();
    if (!stored.ok()) return stored.error().with_context("cannot read the mysql schema history: ");
    if (stored.value()) {
      SLUICE_TRY_ASSIGN(history_, SchemaHistory::decode(*stored.value()));
    }
  }
  return ok_status();
}

Status MysqlDriver::check_start_available() {
  const BinlogPoint& p = st_->position.point;
  if (Status st = ensure_catalog(); !st.ok()) return st;
  auto logs = conn_.query("SHOW BINARY LOGS", "query failed");
  if (!logs.ok() || logs.value().empty()) return ok_status();  // the dump reports it then
  std::vector<std::string> files;
  for (const MysqlRow& r : logs.value())
    if (!r.empty() && r[0]) files.push_back(*r[0]);
  if (files.empty()) return ok_status();
  const bool by_gtid = mariadb_ && !p.gtid.empty();
  if (!by_gtid) {
    if (p.coord.file.empty() || std::find(files.begin(), files.end(), p.coord.file) != files.end())
      return ok_status();
    return Error(
        Errc::not_found,
        fmt::format("the checkpoint's binlog file {} is no longer on {} (its oldest is "
                    "{}: purged by PURGE BINARY LOGS or binlog expiry, or the binlog was "
                    "reset): the changes since {}:{} are lost; run `sluice cleanup` and "
                    "start over with a new snapshot",
                    p.coord.file, opts_.url.redacted(), files.front(), p.coord.file, p.coord.pos));
  }
  auto state = conn_.query("SELECT @@global.gtid_binlog_state", "query failed");
  if (!state.ok() || state.value().empty()) return ok_status();
  auto server = GtidSet::parse(state.value()[0][0].value_or(""));
  auto oldest = gtid_at(conn_, BinlogCoord{files.front(), 4});
  auto max_seq = [](const GtidSet& g, uint32_t domain) -> std::optional<uint64_t> {
    std::optional<uint64_t> best;
    for (const MariaGtidPoint& x : g.items())
      if (x.domain == domain && (!best || x.seq > *best)) best = x.seq;
    return best;
  };
  for (const MariaGtidPoint& g : p.gtid.items()) {
    const std::string text = fmt::format("{}-{}-{}", g.domain, g.server_id, g.seq);
    if (server) {
      auto have = max_seq(*server, g.domain);
      if (!have || *have < g.seq)
        return Error(Errc::not_found,
                     fmt::format("the checkpoint's GTID {} is not in the binlog of {} (its GTID "
                                 "state is '{}': the binlog was reset, or this is another "
                                 "server): the changes since then are lost; run `sluice cleanup` "
                                 "and start over with a new snapshot",
                                 text, opts_.url.redacted(), server->to_string()));
    }
    if (oldest.ok()) {
      auto first = max_seq(oldest.value(), g.domain);
      if (first && *first > g.seq)
        return Error(Errc::not_found,
                     fmt::format("the binlog after the checkpoint's GTID {} is no longer on {} "
                                 "(the oldest binlog file {} starts after {}-…-{}: purged by PURGE "
                                 "BINARY LOGS or binlog expiry): the changes since then are lost; "
                                 "run `sluice cleanup` and start over with a new snapshot",
                                 text, opts_.url.redacted(), files.front(), g.domain, *first));
    }
  }
  return ok_status();
}

// Where the pipeline starts: the checkpoint's position; without one a new snapshot, or (never)
// the server's current binlog position.
Status MysqlDriver::plan_start(State& s) {
  SourcePosition& pos = s.position;
  if (pos.phase == LogPhase::none) {
    if (mode_ == "never") {
      auto m = binlog_status(conn_);
      if (!m.ok()) return std::move(m).error();
      if (m.value().empty())
        return Error(Errc::unsupported, "SHOW MASTER STATUS returned nothing: is log_bin on?");
      pos.phase = LogPhase::stream;
      pos.point.coord.file = *m.value()[0][0];
      pos.point.coord.pos = std::stoull(*m.value()[0][1]);
      if (mariadb_) {
        SLUICE_TRY_ASSIGN(pos.point.gtid, gtid_at(conn_, pos.point.coord));
      }
      SLUICE_TRY(seed_history(pos.point.coord, true));  // a history left by an earlier run
    } else {
      if (Status st = begin_snapshot(true); !st.ok()) return st;
    }
  } else if (pos.phase == LogPhase::snapshot) {
    if (Status st = begin_snapshot(false); !st.ok()) return st;
  } else if (pos.phase == LogPhase::stream) {
    SLUICE_TRY(plan_incremental(s));
  }
  return ok_status();
}

void MysqlDriver::close() noexcept {
  close_stream();
  pool_.reset();
  conn_.reset();
}

}  // namespace mysql

std::span<const SettingSpec> mysql_source_settings() noexcept { return mysql::kSourceSettings; }

std::optional<std::string> mysql_binlog_config_problem(std::string_view log_bin,
                                                       std::string_view format,
                                                       std::string_view target) {
  if (log_bin != "1" && log_bin != "ON")
    return fmt::format(
        "binary logging is off on {}: start the server with log_bin and binlog_format=ROW in its "
        "configuration (or use snapshot.mode initial_only)",
        target);
  if (format != "ROW")
    return fmt::format(
        "binlog_format is {} on {}; row-based logging is required: set binlog_format=ROW in the server "
        "configuration and run SET GLOBAL binlog_format=ROW",
        format, target);
  return std::nullopt;
}

Result<std::unique_ptr<Source>> make_mysql_source(const Settings& s) {
  SLUICE_TRY_ASSIGN(mysql::MysqlSourceOptions o, bind_settings(mysql::kSourceSettings, s));
  SLUICE_TRY(mysql::finalize(o));
  return std::unique_ptr<Source>(std::make_unique<LogSource<mysql::PositionTraits>>(
      std::make_unique<mysql::MysqlDriver>(std::move(o))));
}

}  // namespace sluice
