// `sluice doctor` for the mysql source: what the source needs from the server, checked with
// read-only queries on one ordinary connection — no binlog dump is opened, nothing is written.
// Each check names its fix; docs/doctor.md lists them.
#include <fmt/format.h>

#include <algorithm>

#include "connectors/mysql/mysql_source_driver.h"

namespace sluice::mysql {

namespace {

using Outcome = DoctorCheck::Outcome;

DoctorCheck pass(std::string name, std::string detail) {
  return {Outcome::pass, std::move(name), std::move(detail), {}};
}
DoctorCheck fail(std::string name, std::string detail, std::string fix) {
  return {Outcome::fail, std::move(name), std::move(detail), std::move(fix)};
}
DoctorCheck warn(std::string name, std::string detail, std::string fix) {
  return {Outcome::warn, std::move(name), std::move(detail), std::move(fix)};
}

}  // namespace

Result<std::vector<DoctorCheck>> MysqlDriver::doctor(const ConnectorContext& ctx,
                                                     const std::optional<std::string>& checkpoint) {
  ctx_ = ctx;
  std::vector<DoctorCheck> out;
  // The server_id the stream would use (connect() derives it the same way).
  if (server_id_setting_ > 0) {
    server_id_ = uint32_t(server_id_setting_);
  } else {
    uint32_t h = 2166136261u;
    for (char c : ctx.pipeline_id) h = (h ^ uint8_t(c)) * 16777619u;
    server_id_ = 0x40000000u | (h & 0x3fffffffu);
  }
  ConnectOptions once = opts_;
  once.retry_unclassified_connect_errors = false;
  auto c = MysqlConn::connect(once);
  if (!c.ok()) {
    out.push_back(fail("the server accepts the connection", c.error().message(),
                       "check `url`, the credentials and that the server is reachable"));
    return out;
  }
  conn_ = std::move(c.value());
  struct Reset {
    MysqlConn& c;
    ~Reset() { c.reset(); }
  } reset{conn_};
  out.push_back(pass("the server accepts the connection", opts_.url.redacted()));

  SLUICE_TRY_ASSIGN(std::vector<MysqlRow> vars,
                    conn_.query("SELECT @@version, @@log_bin, @@binlog_format, @@server_id, "
                                "@@binlog_row_image, @@binlog_row_metadata",
                                "query failed"));
  const MysqlRow& v = vars.at(0);
  const std::string version = v[0].value_or("");
  mariadb_ = version.find("MariaDB") != std::string::npos;
  const std::string log_bin = v[1].value_or("0"), format = v[2].value_or("unknown");
  const std::string row_image = v[4].value_or("unknown"), row_metadata = v[5].value_or("NO_LOG");
  const bool needs_binlog = mode_ != "initial_only";
  auto binlog_check = [&](DoctorCheck failed) {
    if (!needs_binlog) failed.outcome = Outcome::warn;
    out.push_back(std::move(failed));
  };
  const std::string only = needs_binlog ? "" : " (snapshot.mode initial_only reads no binlog)";
  if (log_bin == "1" || log_bin == "ON") out.push_back(pass("log_bin is on", "log_bin = ON"));
  else
    binlog_check(fail("log_bin is on", "log_bin = OFF: the server keeps no binary log" + only,
                      "start the server with log_bin = binlog (and binlog_format = ROW) in its "
                      "configuration; log_bin cannot be set at run time"));
  if (format == "ROW") out.push_back(pass("binlog_format is ROW", "binlog_format = ROW"));
  else
    binlog_check(fail("binlog_format is ROW", "binlog_format = " + format + only,
                      "SET GLOBAL binlog_format = 'ROW', and binlog_format = ROW in the server "
                      "configuration (sessions opened before keep the old format)"));
  if (row_image == "FULL")
    out.push_back(pass("binlog_row_image is FULL", "binlog_row_image = FULL"));
  else
    out.push_back(warn("binlog_row_image is FULL",
                       "binlog_row_image = " + row_image +
                           ": `before` holds only the key and updates "
                           "only the changed columns",
                       "SET GLOBAL binlog_row_image = 'FULL' (and in the server configuration) "
                       "for whole rows"));
  if (row_metadata == "FULL")
    out.push_back(pass("binlog_row_metadata is FULL", "binlog_row_metadata = FULL"));
  else
    out.push_back(warn("binlog_row_metadata is FULL",
                       "binlog_row_metadata = " + row_metadata +
                           ": row events carry no column names; the source relies on its schema "
                           "history alone to place the values",
                       "SET GLOBAL binlog_row_metadata = 'FULL' (and in the server "
                       "configuration) so that each event names its columns"));

  // server_id: neither the server's own nor a registered replica's (a second binlog reader with
  // the same id makes the server drop the first one's connection).
  const std::string id_name = fmt::format("server_id {} is not used by another", server_id_);
  std::optional<std::string> clash;
  if (v[3] && server_id_ == std::stoul(*v[3])) clash = "it is the server's own server_id";
  if (!clash) {
    auto hosts = conn_.query(mariadb_ ? "SHOW SLAVE HOSTS" : "SHOW REPLICAS", "query failed");
    if (hosts.ok())
      for (const MysqlRow& r : hosts.value())
        if (!r.empty() && r[0] && *r[0] == std::to_string(server_id_))
          clash = fmt::format("a replica registered as {} uses it",
                              r.size() > 1 ? r[1].value_or("?") : "?");
  }
  if (clash)
    out.push_back(fail(id_name, *clash,
                       "set `server_id` to a number no server or replica of this server uses"));
  else
    out.push_back(pass(
        id_name, server_id_setting_ > 0 ? "from `server_id`" : "derived from the pipeline id"));

  // Privileges: the binlog position (REPLICATION CLIENT / BINLOG MONITOR) and the binlog itself
  // (REPLICATION SLAVE), as check_server() refuses them at start.
  const std::string user = "'" + opts_.url.user + "'";
  const std::string monitor = mariadb_ ? "BINLOG MONITOR" : "REPLICATION CLIENT";
  if (needs_binlog) {
    auto st = binlog_status(conn_);
    if (st.ok()) out.push_back(pass("the user may read the binlog position", monitor));
    else
      out.push_back(fail("the user may read the binlog position", st.error().message(),
                         fmt::format("GRANT {} ON *.* TO {}", monitor, user)));
    auto grants = conn_.query("SHOW GRANTS FOR CURRENT_USER()", "query failed");
    bool repl = false, roles = false;
    if (grants.ok())
      for (const MysqlRow& g : grants.value()) {
        const std::string line = g.empty() ? "" : g[0].value_or("");
        if (line.starts_with("GRANT `")) roles = true;
        if (line.find(" ON *.*") == std::string::npos) continue;
        if (line.find("ALL PRIVILEGES") != std::string::npos ||
            line.find("REPLICATION SLAVE") != std::string::npos ||
            line.find("REPLICATION REPLICA") != std::string::npos)
          repl = true;
      }
    if (repl) out.push_back(pass("the user may read the binlog", "REPLICATION SLAVE"));
    else if (roles)
      out.push_back(warn("the user may read the binlog",
                         "no REPLICATION SLAVE granted directly; a role may grant it",
                         fmt::format("GRANT REPLICATION SLAVE ON *.* TO {}", user)));
    else
      out.push_back(fail("the user may read the binlog",
                         fmt::format("user {} lacks REPLICATION SLAVE", user),
                         fmt::format("GRANT REPLICATION SLAVE ON *.* TO {}", user)));
  }

  // The tables exist and can be read.
  if (Status st = resolve_tables(); !st.ok())
    out.push_back(fail("the tables exist and can be read", st.error().message(),
                       st.error().code() == Errc::permission
                           ? fmt::format("GRANT SELECT ON the tables' databases TO {}", user)
                           : "fix `tables`, or GRANT SELECT on them"));
  else
    out.push_back(pass("the tables exist and can be read",
                       fmt::format("{} table{}", tables_.size(), tables_.size() == 1 ? "" : "s")));

  // The columns and keys, for the destinations' checks.
  doctor_tables_.clear();
  for (const TableRef& t : tables_) {
    SourceTable st{t.db, t.table};
    auto cols = conn_.query(
        fmt::format("SELECT COLUMN_NAME, COLUMN_TYPE, COLUMN_KEY FROM information_schema.COLUMNS "
                    "WHERE TABLE_SCHEMA = {} AND TABLE_NAME = {} ORDER BY ORDINAL_POSITION",
                    conn_.quoted(t.db), conn_.quoted(t.table)),
        "query failed");
    if (!cols.ok()) break;
    for (const MysqlRow& r : cols.value()) {
      if (r.size() < 3 || !r[0]) continue;
      st.columns.emplace_back(*r[0], r[1].value_or(""));
      if (r[2].value_or("") == "PRI") st.key.push_back(*r[0]);
    }
    doctor_tables_.push_back(std::move(st));
  }

  // The checkpoint's binlog is still on the server.
  if (checkpoint && needs_binlog) {
    auto p = SourcePosition::decode(*checkpoint);
    const std::string name = "the checkpoint's binlog is still on the server";
    if (!p) {
      out.push_back(fail(name, "the stored checkpoint is not a mysql position",
                         "run `sluice cleanup` and start over"));
    } else if (p->phase != LogPhase::stream && p->point.coord.file.empty()) {
      out.push_back(pass(name, "no streaming position stored yet"));
    } else {
      State s;
      s.ctx = ctx;
      s.position = *p;
      st_ = &s;
      Status st = check_start_available();
      st_ = nullptr;
      if (st.ok())
        out.push_back(pass(
            name, fmt::format("{}:{} is on the server", p->point.coord.file, p->point.coord.pos)));
      else
        out.push_back(
            fail(name, st.error().message(),
                 "the changes since the checkpoint are lost: run `sluice cleanup` and snapshot "
                 "again; keep binlogs longer (binlog_expire_logs_seconds / expire_logs_days)"));
    }
  } else if (needs_binlog) {
    out.push_back(pass("the checkpoint's binlog is still on the server",
                       "no checkpoint yet: the pipeline starts with a snapshot"));
  }
  return out;
}

}  // namespace sluice::mysql
