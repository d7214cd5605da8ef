#include "connectors/postgres/postgres_source.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <filesystem>
#include <thread>

#include "connectors/postgres/postgres_source_driver.h"

namespace sluice {
namespace pg {

namespace {

constexpr auto kPostgresSourceSettings = settings_table<PostgresSourceOptions>(
    setting<&PostgresSourceOptions::url>(
        "url",
        "libpq URL or key=value DSN of the database (postgresql://user:password@host:5432/db?sslmode=require); "
        "every libpq option, TLS included, is passed through. The user needs the REPLICATION attribute.")
        .mandatory()
        .secret_value(),
    setting<&PostgresSourceOptions::user>("user", kUserDoc),
    setting<&PostgresSourceOptions::password>("password", kPasswordDoc).secret_value(),
    setting<&PostgresSourceOptions::password_file>("password_file", kPasswordFileDoc),
    setting<&PostgresSourceOptions::tls_mode>(
        "tls.mode",
        "TLS to the server, as libpq's sslmode: disabled (disable), preferred (prefer: TLS when the "
        "server offers it), required (require: TLS without checking the certificate, unless tls.ca is "
        "set: then as verify_ca), verify_ca (verify-ca: the certificate must be signed by tls.ca), "
        "verify_identity (verify-full: and name the host of `url`). Unset: the URL's sslmode, else "
        "prefer.")
        .one_of("disabled,preferred,required,verify_ca,verify_identity"),
    setting<&PostgresSourceOptions::tls_ca>("tls.ca", kTlsCaDoc).file_path(),
    setting<&PostgresSourceOptions::tls_cert>("tls.cert", kTlsCertDoc).file_path(),
    setting<&PostgresSourceOptions::tls_key>("tls.key", kTlsKeyDoc).file_path(),
    setting<&PostgresSourceOptions::tls_key_password>("tls.key_password", kTlsKeyPasswordDoc)
        .secret_value(),
    setting<&PostgresSourceOptions::tables>(
        "tables",
        "Tables to capture: schema-qualified names (public.employees, sales.\"Order Items\"; no schema = public), "
        "or \"*\" for every table (publication FOR ALL TABLES, needs superuser).")
        .with_default("*"),
    setting<&PostgresSourceOptions::slot>(
        "slot",
        "Logical replication slot; created if missing (pgoutput). Default: sluice_<pipeline id>."),
    setting<&PostgresSourceOptions::publication>(
        "publication",
        "Publication; created if missing, and then kept to `tables` (a table taken out of `tables` "
        "leaves it). A publication of yours is left as it is: the stream delivers only the tables in "
        "`tables`. Default: sluice_<pipeline id>."),
    setting<&PostgresSourceOptions::snapshot_mode>(
        "snapshot.mode",
        "initial: snapshot the tables, then stream changes; never: only stream changes; initial_only: snapshot "
        "and stop.")
        .one_of("initial,never,initial_only")
        .with_default("initial"),
    setting<&PostgresSourceOptions::heartbeat_interval>(
        "heartbeat.interval",
        "How often, while no change arrives, the slot is advanced to the server's WAL position and a status "
        "update is sent, so an idle publication does not pin WAL.")
        .with_default("10s")
        .at_least(1),
    setting<&PostgresSourceOptions::stream_timeout>(
        "stream.timeout",
        "How long the replication stream may stay silent before it is taken for dead (a partition, "
        "a proxy holding TCP open): after half of it sluice asks the server for a keepalive, and "
        "when none arrives either it logs a warning, counts it "
        "(sluice_source_connection_timeouts_total), closes the connection and reconnects with "
        "backoff. Default: the server's wal_sender_timeout (60s when that is 0).")
        .at_least(100),
    setting<&PostgresSourceOptions::stream_in_progress>(
        "stream.in_progress",
        "On PostgreSQL 14 and later, receive a large transaction while it is still in progress "
        "(pgoutput protocol 2, `streaming on`: the server sends it once it holds more than its "
        "logical_decoding_work_mem, instead of spilling it to its own disk and sending it at "
        "commit). sluice holds it, within stream.in_progress_memory and then in "
        "stream.spill_directory, until its commit, and forwards it then as one transaction; an "
        "aborted one, or a subtransaction rolled back, never reaches a destination.")
        .with_default("true"),
    setting<&PostgresSourceOptions::stream_in_progress_memory>(
        "stream.in_progress_memory",
        "Memory that in-progress transactions (stream.in_progress) may take in sluice; beyond it "
        "the largest one's changes are written to a file in stream.spill_directory and read back "
        "at its commit.")
        .with_default("8MiB")
        .at_least(64 << 10),
    setting<&PostgresSourceOptions::stream_spill_directory>(
        "stream.spill_directory",
        "Where in-progress transactions beyond stream.in_progress_memory are written: unnamed "
        "files (mode 0600) that disappear when sluice closes them or exits, even by kill -9. "
        "Default: the system's temporary directory ($TMPDIR, else /tmp)."),
    setting<&PostgresSourceOptions::query_timeout>(
        "query_timeout",
        "How long the source waits for the server's reply to one catalogue query, or for the next "
        "rows of a snapshot COPY, before it takes the connection for dead (a partition, a server "
        "that stopped answering but keeps TCP open): it logs it, counts it "
        "(sluice_source_connection_timeouts_total), and in the snapshot reconnects with backoff "
        "and goes on from the last chunk read; elsewhere the pipeline stops with that error. A "
        "query that legitimately takes longer (a lock held by another session) is cut the same "
        "way: raise it then. 0: wait forever. The replication stream has stream.timeout.")
        .with_default("60s")
        .at_least(0),
    setting<&PostgresSourceOptions::tcp_user_timeout>(
        "tcp_user_timeout",
        "TCP keepalives and TCP_USER_TIMEOUT of every connection: the kernel drops a connection "
        "whose data or keepalive probes stay unacknowledged this long (a blackholed link), instead "
        "of waiting for minutes. 0: the system's defaults. The URL's own keepalives*/tcp_user_timeout "
        "win.")
        .with_default("30s")
        .at_least(0),
    setting<&PostgresSourceOptions::reconnect_initial_backoff>(
        "reconnect.initial_backoff",
        "First delay before reconnecting after the stream broke (later ones double, jittered).")
        .with_default("200ms")
        .at_least(1),
    setting<&PostgresSourceOptions::reconnect_max_backoff>(
        "reconnect.max_backoff",
        "Longest delay between two reconnect attempts: a server back after an outage is "
        "reconnected at most this long later.")
        .with_default("5s")
        .at_least(1),
    setting<&PostgresSourceOptions::heartbeat_emit_message>(
        "heartbeat.emit_message",
        "While the slot lags the server's WAL and its confirmed position has not moved for "
        "heartbeat.interval (the captured tables are idle, other WAL grows), write a transactional "
        "pg_logical_emit_message(true, 'sluice.heartbeat', '') so the slot advances; counted in "
        "sluice_source_heartbeats_total, never a record. Off on a standby.")
        .with_default("true"),
    setting<&PostgresSourceOptions::slot_lag_warning>(
        "slot_lag_warning",
        "Log a warning (at most every 5 minutes) while the replication slot's lag "
        "(sluice_source_slot_lag_bytes: the server's WAL position minus the slot's "
        "confirmed_flush_lsn) is above this size; 0 never warns.")
        .with_default("1GiB")
        .at_least(0),
    setting<&PostgresSourceOptions::binary>(
        "binary",
        "Read values in PostgreSQL's binary form where sluice decodes it (numbers, text, bytea, "
        "dates and times, intervals, uuid, json, jsonb, bit strings, macaddr, enums, and domains "
        "and arrays of them): the snapshot's COPY (FORMAT binary), each other column as its text, "
        "and the stream's pgoutput `binary` on PostgreSQL 14 and later, in text while a captured "
        "table has a column of another type. The records are the same either way; binary costs "
        "the server and sluice less per value. false: text everywhere.")
        .with_default("true"),
    setting<&PostgresSourceOptions::logical_messages>(
        "logical_messages",
        "Emit pg_logical_emit_message() messages as records (metadata message.prefix; after.content).")
        .with_default("false"),
    setting<&PostgresSourceOptions::ddl_capture>(
        "ddl.capture",
        "Capture schema changes exactly: sluice installs (idempotently, in schema `sluice`) an event trigger "
        "that logs each ALTER TABLE of a captured table to sluice.ddl_log, a table of the publication, so "
        "renames, drops, added columns and their defaults arrive in order with the rows as schema records. "
        "Needs superuser to install (or the SQL in docs/schema-changes.md run by one). Without it, only "
        "changes a Relation message tells apart are forwarded; the others stop the pipeline.")
        .with_default("false"),
    setting<&PostgresSourceOptions::signal_table>(
        "signal.table",
        "Signal table (schema.table, columns id, type, data: Debezium's shape): a row of type "
        "execute-snapshot starts an incremental snapshot of the tables it names; `sluice snapshot` "
        "writes one. sluice adds it to the publication. Default: none."),
    setting<&PostgresSourceOptions::snapshot_parallel>(
        "snapshot.parallel",
        "Connections that read the initial snapshot together: each reads the next range of heap "
        "pages of the table in the same MVCC snapshot (exported by the first and imported by the "
        "others), so the result is the one a single connection reads, consistent with the slot. "
        "Ranges are taken in page order, so the checkpoint and a resume are as with one. Helps "
        "when the server's COPY is the bottleneck and it has cores to spare.")
        .with_default("1")
        .at_least(1),
    setting<&PostgresSourceOptions::snapshot_chunk_size>(
        "snapshot.chunk_size",
        "Most rows per chunk of an incremental snapshot (a table added to `tables` on restart, or named "
        "in a signal), read in primary-key order between two watermarks while changes stream; fewer when "
        "the batch's bytes (`batch.max_bytes`) hold fewer of the table's rows.")
        .with_default("1024")
        .at_least(1),
    setting<&PostgresSourceOptions::message_key_columns>(
        "message.key.columns",
        "Record key of tables without a primary key, per table: a map of schema.table to a comma-separated "
        "list of its columns (`message.key.columns: {public.events: \"device, ts\"}`; Debezium's setting of "
        "the same name). Without it such records carry no key. A listed table must be captured and have no "
        "primary key; give it REPLICA IDENTITY FULL so updates and deletes carry the old values."));

// The checks no single declaration expresses.
Status finalize(PostgresSourceOptions& o) {
  if (o.tables.empty())
    return Error(Errc::config,
                 "setting 'tables' lists no table (list schema.table names, or \"*\" for every "
                 "table)");
  SLUICE_TRY(apply_credentials(o.url, {o.user, o.password, o.password_file}));
  if (o.reconnect_max_backoff < o.reconnect_initial_backoff)
    return Error(Errc::config,
                 "setting 'reconnect.max_backoff' is below 'reconnect.initial_backoff' (raise it, "
                 "or lower the initial backoff)");
  SLUICE_TRY(apply_tls(
      o.url, {o.tls_mode.value_or(""), o.tls_ca, o.tls_cert, o.tls_key, o.tls_key_password}));
  for (const std::string& t : o.tables)
    if (t != "*" && !parse_table_name(t))
      return Error(Errc::config,
                   fmt::format("setting 'tables': '{}' is not a table name (schema.table)", t));
  for (const auto& [table, columns] : o.message_key_columns) {
    auto name = parse_table_name(table);
    if (!name)
      return Error(Errc::config, fmt::format("setting 'message.key.columns': '{}' is not a table "
                                             "name (schema.table)",
                                             table));
    SLUICE_TRY_ASSIGN(std::vector<std::string> list, parse_key_column_list(table, columns));
    o.key_columns_by_table[*name] = std::move(list);
  }
  return ok_status();
}

std::string default_name(std::string_view pipeline_id) {
  std::string out = "sluice_";
  for (char c : pipeline_id) {
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_') out += c;
    else if (c >= 'A' && c <= 'Z') out += char(c - 'A' + 'a');
    else out += '_';
  }
  return out.substr(0, 63);
}

}  // namespace

// Splits `schema.table` honouring double quotes: sales."Order Items" → {sales, Order Items}.
std::optional<std::pair<std::string, std::string>> parse_table_name(std::string_view s) {
  std::vector<std::string> parts(1);
  bool quoted = false, was_quoted = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < s.size() && s[i + 1] == '"') {
          parts.back() += '"';
          ++i;
        } else quoted = false;
      } else {
        parts.back() += c;
      }
    } else if (c == '"') {
      quoted = was_quoted = true;
    } else if (c == '.') {
      parts.emplace_back();
    } else {
      parts.back() += was_quoted ? c
                                 : char(c >= 'A' && c <= 'Z' ? c - 'A' + 'a'
                                                             : c);  // unquoted folds to lower case
    }
  }
  if (quoted || parts.size() > 2) return std::nullopt;
  for (auto& p : parts)
    if (p.empty()) return std::nullopt;
  if (parts.size() == 1) return std::make_pair(std::string("public"), parts[0]);
  return std::make_pair(parts[0], parts[1]);
}

PostgresDriver::PostgresDriver(PostgresSourceOptions o)
    : url_(std::move(o.url)),
      tables_setting_(std::move(o.tables)),
      slot_setting_(std::move(o.slot)),
      publication_setting_(std::move(o.publication)),
      mode_(std::move(o.snapshot_mode)),
      heartbeat_(o.heartbeat_interval),
      stream_timeout_setting_(o.stream_timeout),
      deadline_(o.query_timeout),
      net_{o.tcp_user_timeout, &deadline_},
      reconnect_{o.reconnect_initial_backoff, o.reconnect_max_backoff},
      heartbeat_emit_message_(o.heartbeat_emit_message),
      slot_lag_warning_(o.slot_lag_warning),
      logical_messages_(o.logical_messages),
      binary_values_(o.binary),
      stream_in_progress_(o.stream_in_progress),
      ddl_capture_(o.ddl_capture),
      signal_table_setting_(std::move(o.signal_table)),
      chunk_size_(o.snapshot_chunk_size),
      message_key_columns_(std::move(o.key_columns_by_table)),
      parallel_(int(std::min<int64_t>(o.snapshot_parallel, 64))),
      spool_(o.stream_in_progress_memory, o.stream_spill_directory.empty()
                                              ? std::filesystem::temp_directory_path().string()
                                              : o.stream_spill_directory) {}

void PostgresDriver::name_slot_and_publication(const ConnectorContext& ctx) {
  ctx_ = ctx;
  slot_ = slot_setting_.empty() ? default_name(ctx.pipeline_id) : slot_setting_;
  publication_ =
      publication_setting_.empty() ? default_name(ctx.pipeline_id) : publication_setting_;
}

Status PostgresDriver::connect_and_check() {
  auto c = PgConn::connect(url_, false, net_);
  if (!c.ok()) return std::move(c).error();
  conn_ = std::move(c.value());
  auto wal = conn_.exec("SHOW wal_level");
  if (!wal.ok()) return std::move(wal).error();
  const std::string level = PQgetvalue(wal.value().get(), 0, 0);
  if (level != "logical")
    return Error(Errc::unsupported,
                 fmt::format("wal_level is '{}' on {}; set wal_level = logical in postgresql.conf "
                             "and restart PostgreSQL",
                             level, describe_target(url_)));
  // The walsender's own timeout: the default silence after which the stream is taken for dead.
  auto wst =
      conn_.exec("SELECT setting::bigint FROM pg_settings WHERE name = 'wal_sender_timeout'");
  if (!wst.ok()) return std::move(wst).error();
  if (PQntuples(wst.value().get()) == 1)
    wal_sender_timeout_ =
        std::chrono::milliseconds(std::strtoll(PQgetvalue(wst.value().get(), 0, 0), nullptr, 10));
  stream_timeout_ = stream_timeout_setting_.value_or(
      wal_sender_timeout_.count() > 0 ? wal_sender_timeout_ : std::chrono::milliseconds(60000));
  auto role = conn_.exec(
      "SELECT current_user, rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user");
  if (!role.ok()) return std::move(role).error();
  if (PQntuples(role.value().get()) == 1 &&
      std::string_view(PQgetvalue(role.value().get(), 0, 1)) != "t") {
    const std::string user = PQgetvalue(role.value().get(), 0, 0);
    return Error(
        Errc::permission,
        fmt::format("role {} lacks the REPLICATION attribute; grant it: ALTER ROLE {} WITH "
                    "REPLICATION",
                    quote_identifier(user), quote_identifier(user)));
  }
  return ok_status();
}

Status PostgresDriver::connect(State& s) {
  st_ = &s;
  name_slot_and_publication(s.ctx);
  SLUICE_TRY(connect_and_check());
  SLUICE_TRY(resolve_tables());
  if (tables_.empty() && !all_tables_)
    return Error(Errc::config, "setting 'tables' lists no table");
  std::vector<std::pair<std::string, std::string>> captured;
  for (const TableRef& t : tables_) captured.emplace_back(t.schema, t.name);
  SLUICE_TRY(check_key_columns_captured(message_key_columns_, captured, quote_identifier));
  if (ddl_capture_ && mode_ != "initial_only") SLUICE_TRY(install_ddl_capture());
  return ok_status();
}

// The slot exists (found or created): a failed run names it, with `sluice cleanup`.
void PostgresDriver::note_slot_held() {
  std::lock_guard lock(server_state_mu_);
  server_state_ = fmt::format(
      "replication slot {} (it retains WAL on the server while the "
      "pipeline is stopped)",
      quote_identifier(slot_));
}

std::string PostgresDriver::server_state() const {
  std::lock_guard lock(server_state_mu_);
  return server_state_;
}

// Where the pipeline starts: the checkpoint's position when the slot still serves it; else a new
// slot, created with an exported snapshot when a snapshot is due, so that snapshot and stream meet.
Status PostgresDriver::plan_start(State& s) {
  SourcePosition& pos = s.position;
  const bool resumed_stream = pos.phase == LogPhase::stream;
  const bool snapshot_only = mode_ == "initial_only";
  std::string exported;
  bool baseline_read = false;  // the tables' shapes at a fresh slot's point
  if (!snapshot_only) {
    if (Status st = ensure_publication(); !st.ok()) return st;
    const std::string slot_query =
        "SELECT active, coalesce(active_pid, 0), coalesce(confirmed_flush_lsn::text, ''), plugin FROM "
        "pg_replication_slots WHERE slot_name = $1 AND database = current_database()";
    auto slot = conn_.exec_params(slot_query, {slot_});
    if (!slot.ok()) return std::move(slot).error();
    // Right after a crash of a previous run, its walsender may still be on its way out: give it a
    // few seconds to release the slot before calling the slot taken.
    for (int i = 0; i < 50 && PQntuples(slot.value().get()) == 1 &&
                    std::string_view(PQgetvalue(slot.value().get(), 0, 0)) == "t";
         ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      slot = conn_.exec_params(slot_query, {slot_});
      if (!slot.ok()) return std::move(slot).error();
    }
    PGresult* res = slot.value().get();
    if (PQntuples(res) == 1) {
      if (std::string_view(PQgetvalue(res, 0, 0)) == "t")
        return Error(
            Errc::conflict,
            fmt::format("replication slot {} is in use by another process (pid {}): stop it, or "
                        "set a different `slot`",
                        slot_, PQgetvalue(res, 0, 1)));
      if (std::string_view(PQgetvalue(res, 0, 3)) != "pgoutput")
        return Error(
            Errc::conflict,
            fmt::format("replication slot {} uses plugin {}, not pgoutput: drop it or set a "
                        "different `slot`",
                        slot_, PQgetvalue(res, 0, 3)));
      auto confirmed = Lsn::parse(PQgetvalue(res, 0, 2));
      note_slot_held();
      // The slot only moves forward on our acknowledgements, sent after the checkpoint (or the
      // destination's stored position) is durable: a slot ahead of the checkpoint was dropped and
      // re-created, or advanced by someone else, and the changes in between are gone.
      if (pos.phase != LogPhase::none && confirmed && *confirmed > pos.point)
        return Error(
            Errc::conflict,
            fmt::format("replication slot {} has confirmed changes up to {} but the pipeline's "
                        "checkpoint is at {}: the changes between {} and {} are lost (the slot "
                        "was re-created or advanced by another client); run `sluice cleanup` and "
                        "start again to re-snapshot",
                        slot_, confirmed->to_string(), pos.point.to_string(), pos.point.to_string(),
                        confirmed->to_string()));
      if (pos.phase == LogPhase::none) {
        // A previous run created the slot but never checkpointed: nothing was acknowledged, so the
        // stream from the slot's position covers everything a fresh snapshot could miss.
        if (mode_ == "initial") {
          pos.phase = LogPhase::snapshot;
          pos.point = confirmed.value_or(Lsn{});
        } else {
          pos.phase = LogPhase::stream;
          pos.point = confirmed.value_or(Lsn{});
        }
      }
    } else {
      if (pos.phase == LogPhase::stream)
        return Error(
            Errc::not_found,
            fmt::format("replication slot {} is gone but the pipeline has a checkpoint at {}: "
                        "the changes since {} are lost; run `sluice cleanup` and start again to "
                        "re-snapshot",
                        slot_, pos.point.to_string(), pos.point.to_string()));
      auto repl = PgConn::connect(url_, true, net_);
      if (!repl.ok()) return std::move(repl).error();
      repl_ = std::move(repl.value());
      const bool want_snapshot = mode_ == "initial" && pos.phase != LogPhase::stream;
      // Without a snapshot, the exported one still gives the tables' shapes at the slot's point
      // (the baseline of the first Relation messages, when DDL is not captured).
      const bool want_export = want_snapshot || !ddl_capture_;
      auto created =
          repl_.exec(fmt::format("CREATE_REPLICATION_SLOT {} LOGICAL pgoutput (SNAPSHOT '{}')",
                                 quote_identifier(slot_), want_export ? "export" : "nothing"));
      if (!created.ok())
        return created.error().with_context(
            fmt::format("cannot create replication slot {}: ", slot_));
      auto point = Lsn::parse(PQgetvalue(created.value().get(), 0, 1));
      if (want_export && !PQgetisnull(created.value().get(), 0, 2))
        exported = PQgetvalue(created.value().get(), 0, 2);
      spdlog::info("pipeline {}: created replication slot {} at {}", ctx_.pipeline_id, slot_,
                   point.value_or(Lsn{}).to_string());
      note_slot_held();
      if (pos.phase == LogPhase::none || pos.phase == LogPhase::snapshot) {
        // A snapshot resumed without its slot (slot dropped mid-snapshot) restarts from scratch.
        pos = SourcePosition{};
        pos.phase = want_snapshot ? LogPhase::snapshot : LogPhase::stream;
        pos.point = point.value_or(Lsn{});
      }
      if (!want_snapshot && !ddl_capture_ && !exported.empty()) {
        SLUICE_TRY(shapes_in_exported_snapshot(exported, point.value_or(Lsn{})));
        exported.clear();
        baseline_read = true;
      }
    }
  } else if (pos.phase == LogPhase::none) {
    pos.phase = LogPhase::snapshot;
  }
  if (pos.phase == LogPhase::none) pos.phase = LogPhase::stream;
  if (mode_ == "never" && pos.phase == LogPhase::snapshot) pos.phase = LogPhase::stream;

  // Before the snapshot transaction (read only): it may add the signal table to the publication.
  if (!snapshot_only) SLUICE_TRY(plan_incremental(s, resumed_stream));
  if (pos.phase == LogPhase::snapshot) SLUICE_TRY(begin_snapshot(exported));
  // Streaming without a snapshot in this run: tables no earlier run stored a shape of (a slot
  // created by a run that stopped before, a table that was never snapshotted) get one now.
  if (!snapshot_only && !ddl_capture_ && pos.phase == LogPhase::stream && !baseline_read)
    SLUICE_TRY(record_catalog_shapes(std::nullopt));
  return ok_status();
}

void PostgresDriver::opened(State& s) {
  acked_flush_ = s.position.phase == LogPhase::stream ? s.position.point.value : 0;
  sent_flush_ = acked_flush_;
  status_thread_ = std::jthread([this](std::stop_token st) { status_loop(st); });
  if (!snapshot_only())
    slot_health_.start(ctx_, {url_, slot_, heartbeat_, heartbeat_emit_message_, slot_lag_warning_});
}

void PostgresDriver::close() noexcept {
  slot_health_.stop();
  if (status_thread_.joinable()) {
    status_thread_.request_stop();
    status_thread_.join();
  }
  {
    std::lock_guard lock(repl_mu_);
    if (streaming_ && repl_.ok()) {
      send_status_locked(true);  // report the final acknowledged position before leaving
      PQputCopyEnd(repl_.get(), nullptr);
      PQflush(repl_.get());
    }
    streaming_ = false;
    repl_.reset();
  }
  conn_.reset();
}

Status PostgresDriver::cleanup(const ConnectorContext& ctx) {
  name_slot_and_publication(ctx);
  auto c = PgConn::connect(url_, false, net_);
  if (!c.ok()) return std::move(c).error();
  conn_ = std::move(c.value());
  auto slot = conn_.exec_params(
      "SELECT active, coalesce(active_pid, 0) FROM pg_replication_slots WHERE slot_name = $1",
      {slot_});
  if (!slot.ok()) return std::move(slot).error();
  if (PQntuples(slot.value().get()) == 1) {
    if (std::string_view(PQgetvalue(slot.value().get(), 0, 0)) == "t")
      return Error(Errc::conflict,
                   fmt::format("replication slot {} is in use (pid {}): stop the pipeline first",
                               slot_, PQgetvalue(slot.value().get(), 0, 1)));
    if (auto d = conn_.exec_params("SELECT pg_drop_replication_slot($1)", {slot_}); !d.ok())
      return d.error().with_context("cannot drop the replication slot: ");
    spdlog::info("dropped replication slot {}", slot_);
  }
  auto pub = conn_.exec_params(
      "SELECT coalesce(obj_description(oid, 'pg_publication'), '') FROM pg_publication WHERE pubname = $1",
      {publication_});
  if (!pub.ok()) return std::move(pub).error();
  if (PQntuples(pub.value().get()) == 1) {
    const std::string comment = PQgetvalue(pub.value().get(), 0, 0);
    if (comment == "created by sluice pipeline " + ctx.pipeline_id) {
      if (auto d =
              conn_.exec("DROP PUBLICATION " + quote_identifier(publication_), PGRES_COMMAND_OK);
          !d.ok())
        return d.error().with_context("cannot drop the publication: ");
      spdlog::info("dropped publication {}", publication_);
    } else {
      spdlog::info("kept publication {}: sluice did not create it", publication_);
    }
  }
  if (ddl_capture_) SLUICE_TRY(uninstall_ddl_capture());
  conn_.reset();
  return ok_status();
}

namespace {

Result<std::unique_ptr<Source>> make_postgres_source(const Settings& s) {
  SLUICE_TRY_ASSIGN(PostgresSourceOptions o, bind_settings(kPostgresSourceSettings, s));
  SLUICE_TRY(finalize(o));
  return std::unique_ptr<Source>(
      std::make_unique<LogSource<PositionTraits>>(std::make_unique<PostgresDriver>(std::move(o))));
}

}  // namespace
}  // namespace pg

namespace {
constexpr std::string_view kPostgresTemplateSettings[] = {"table", "schema"};
constexpr std::string_view kPostgresSourceMetadata[] = {
    "schema", "table", "lsn", "commit_lsn", "commit_time", "xid", "truncate", "message.prefix"};
}  // namespace

ConnectorSpec postgres_connector() {
  // The destination (postgres_destination.h), declared here to keep this file's includes untouched.
  extern const std::span<const SettingSpec> kPostgresDestinationSettings;
  Result<std::unique_ptr<Destination>> make_postgres_destination(const Settings& settings);
  return ConnectorSpec{
      .name = "postgres",
      .summary =
          "PostgreSQL: consistent snapshot, then logical replication (pgoutput) with acknowledgement of "
          "durably written changes only.",
      .source_settings = pg::kPostgresSourceSettings,
      .destination_settings = kPostgresDestinationSettings,
      .make_source = &pg::make_postgres_source,
      .make_destination = &make_postgres_destination,
      .template_settings = kPostgresTemplateSettings,
      .source_metadata = kPostgresSourceMetadata,
  };
}

}  // namespace sluice
