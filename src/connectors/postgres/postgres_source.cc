#include "connectors/postgres/postgres_source.h"

#include <fmt/format.h>
#include <poll.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <charconv>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "connectors/postgres/pg_connection.h"
#include "connectors/postgres/pg_types.h"
#include "connectors/postgres/pgoutput.h"
#include "support/backoff.h"

namespace sluice {

namespace {

using pg::Lsn;
using pg::PgConn;
using pg::PgResult;
using Clock = std::chrono::steady_clock;

constexpr SettingSpec kPostgresSourceSettings[] = {
    {"url", SettingType::string, "", true,
     "libpq URL or key=value DSN of the database (postgresql://user:password@host:5432/db?sslmode=require); "
     "every libpq option, TLS included, is passed through. The user needs the REPLICATION attribute.",
     {}, true},
    {"tables", SettingType::string_list, "*", false,
     "Tables to capture: schema-qualified names (public.employees, sales.\"Order Items\"; no schema = public), "
     "or \"*\" for every table (publication FOR ALL TABLES, needs superuser)."},
    {"slot", SettingType::string, "", false,
     "Logical replication slot; created if missing (pgoutput). Default: sluice_<pipeline id>."},
    {"publication", SettingType::string, "", false,
     "Publication; created if missing. Default: sluice_<pipeline id>."},
    {"snapshot.mode", SettingType::enumeration, "initial", false,
     "initial: snapshot the tables, then stream changes; never: only stream changes; initial_only: snapshot "
     "and stop.",
     "initial,never,initial_only"},
    {"heartbeat.interval", SettingType::duration, "10s", false,
     "How often, while no change arrives, the slot is advanced to the server's WAL position and a status "
     "update is sent, so an idle publication does not pin WAL."},
    {"logical_messages", SettingType::boolean, "false", false,
     "Emit pg_logical_emit_message() messages as records (metadata message.prefix; after.content)."},
};

// ── positions ───────────────────────────────────────────────────────────────

struct Position {
  enum class Phase { none, snapshot, cdc, done } phase = Phase::none;
  Lsn lsn;                 // snapshot: stream start; cdc: flush; done: slot point
  size_t table_index = 0;  // snapshot
  uint64_t page = 0;       // snapshot: first heap page of the chunk being read
  Lsn tx_lsn;              // cdc: transaction partly written
  uint64_t tx_n = 0;

  std::string encode() const {
    switch (phase) {
      case Phase::snapshot: return fmt::format("snapshot {} {} {}", lsn.to_string(), table_index, page);
      case Phase::cdc:
        return tx_n ? fmt::format("cdc {} {} {}", lsn.to_string(), tx_lsn.to_string(), tx_n)
                    : fmt::format("cdc {}", lsn.to_string());
      case Phase::done: return fmt::format("done {}", lsn.to_string());
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
    Position p;
    auto lsn = [](std::string_view s) { return Lsn::parse(s); };
    auto num = [](std::string_view s, uint64_t* out) {
      auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
      return ec == std::errc() && ptr == s.data() + s.size();
    };
    if (parts.size() == 4 && parts[0] == "snapshot") {
      auto l = lsn(parts[1]);
      uint64_t idx;
      if (!l || !num(parts[2], &idx) || !num(parts[3], &p.page)) return std::nullopt;
      p.phase = Phase::snapshot;
      p.lsn = *l;
      p.table_index = idx;
      return p;
    }
    if ((parts.size() == 2 || parts.size() == 4) && parts[0] == "cdc") {
      auto l = lsn(parts[1]);
      if (!l) return std::nullopt;
      p.phase = Phase::cdc;
      p.lsn = *l;
      if (parts.size() == 4) {
        auto t = lsn(parts[2]);
        if (!t || !num(parts[3], &p.tx_n)) return std::nullopt;
        p.tx_lsn = *t;
      }
      return p;
    }
    if (parts.size() == 2 && parts[0] == "done") {
      auto l = lsn(parts[1]);
      if (!l) return std::nullopt;
      p.phase = Phase::done;
      p.lsn = *l;
      return p;
    }
    return std::nullopt;
  }
};

// ── helpers ─────────────────────────────────────────────────────────────────

std::string default_name(std::string_view pipeline_id) {
  std::string out = "sluice_";
  for (char c : pipeline_id) {
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_') out += c;
    else if (c >= 'A' && c <= 'Z') out += char(c - 'A' + 'a');
    else out += '_';
  }
  return out.substr(0, 63);
}

// Splits `schema.table` honouring double quotes: sales."Order Items" → {sales, Order Items}.
std::optional<std::pair<std::string, std::string>> parse_table_name(std::string_view s) {
  std::vector<std::string> parts(1);
  bool quoted = false, was_quoted = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < s.size() && s[i + 1] == '"') { parts.back() += '"'; ++i; }
        else quoted = false;
      } else {
        parts.back() += c;
      }
    } else if (c == '"') {
      quoted = was_quoted = true;
    } else if (c == '.') {
      parts.emplace_back();
    } else {
      parts.back() += was_quoted ? c : char(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);  // unquoted folds to lower case
    }
  }
  if (quoted || parts.size() > 2) return std::nullopt;
  for (auto& p : parts)
    if (p.empty()) return std::nullopt;
  if (parts.size() == 1) return std::make_pair(std::string("public"), parts[0]);
  return std::make_pair(parts[0], parts[1]);
}

uint64_t be64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | uint8_t(p[i]);
  return v;
}
void put_be64(char* p, uint64_t v) {
  for (int i = 7; i >= 0; --i) { p[i] = char(v & 0xff); v >>= 8; }
}

int64_t now_pg_micros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch()).count() -
         pg::kPgEpochOffsetMicros;
}
int64_t now_unix_micros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

struct TableRef {
  std::string schema, name;
  uint32_t oid = 0;
  int64_t estimate = 0;
};

// A relation as sluice uses it: pgoutput's (or the catalog's) description plus the record key.
struct TableState {
  std::shared_ptr<const pg::Relation> rel;
  std::vector<uint32_t> key_columns;  // indexes into rel->columns
  bool warned_no_key = false;
};

// ── the source ──────────────────────────────────────────────────────────────

class PostgresSource final : public Source {
 public:
  explicit PostgresSource(const Settings& s)
      : url_(s.get_string("url")),
        tables_setting_(s.get_list("tables")),
        slot_setting_(s.get_string("slot")),
        publication_setting_(s.get_string("publication")),
        mode_(s.get_string("snapshot.mode")),
        heartbeat_(s.get_duration("heartbeat.interval")),
        logical_messages_(s.get_bool("logical_messages")) {}

  ~PostgresSource() override { close(); }

  Status open(const ConnectorContext& ctx, const std::optional<std::string>& checkpoint) override;
  Result<ReadStatus> read(Batch& batch, const ReadRequest& req, std::stop_token stop) override;
  void ack(std::string_view position) override;
  void close() noexcept override;
  Status cleanup(const ConnectorContext& ctx) override;

 private:
  Status connect_and_check();
  Status resolve_tables();
  Status ensure_publication();
  Status resolve_types(const std::vector<uint32_t>& oids);
  Result<TableState*> table_from_catalog(const TableRef& t);
  Result<TableState*> table_from_relation(std::shared_ptr<const pg::Relation> rel);
  Status begin_snapshot(const std::string& exported);
  Status start_copy();
  Status finish_snapshot();
  Result<ReadStatus> read_snapshot(Batch& batch, const ReadRequest& req, std::stop_token stop);
  Result<ReadStatus> read_cdc(Batch& batch, const ReadRequest& req, std::stop_token stop);
  Status start_replication();
  Status handle_xlog(Batch& batch, const char* buf, int len);
  Status emit_change(Batch& batch, TableState& t, Operation op, const pg::Tuple* old_tuple, char old_kind,
                     const pg::Tuple* new_tuple, Lsn lsn);
  void emit_logical_message(Batch& batch, const pg::LogicalMsg& m, Lsn lsn);
  Status tuple_to_object(Batch& batch, const TableState& t, const pg::Tuple& tuple, bool key_only, Value* out);
  Value metadata(Batch& batch, const TableState& t, std::string_view lsn, bool cdc);
  void send_status_locked(bool force);
  void status_loop(std::stop_token stop);
  std::string cdc_position() const;

  // settings
  std::string url_;
  std::vector<std::string> tables_setting_;
  std::string slot_setting_, publication_setting_, mode_;
  std::chrono::milliseconds heartbeat_;
  bool logical_messages_;

  ConnectorContext ctx_;
  std::string slot_, publication_;
  std::vector<TableRef> tables_;
  bool all_tables_ = false;

  PgConn conn_;   // catalog queries and the snapshot transaction
  PgConn repl_;   // replication protocol
  std::mutex repl_mu_;
  pg::TypeRegistry types_;
  std::unordered_map<uint32_t, TableState> table_states_;

  Position pos_;  // what has been read so far (the next batch's position)
  // snapshot
  bool copy_active_ = false;
  bool copy_last_chunk_ = false;
  size_t copy_table_index_ = SIZE_MAX;  // table whose description copy_table_ holds
  uint64_t copy_table_pages_ = 0;
  TableState* copy_table_ = nullptr;
  std::string copy_scratch_;
  std::vector<std::string> field_scratch_;
  int64_t snapshot_rows_ = 0;
  // cdc
  bool streaming_ = false;
  bool in_tx_ = false;
  Lsn tx_final_;
  uint64_t tx_n_ = 0;
  uint64_t skip_n_ = 0;
  Lsn resume_tx_;
  uint64_t resume_n_ = 0;
  int64_t tx_commit_time_ = 0;
  uint32_t tx_xid_ = 0;
  Lsn received_;
  std::atomic<uint64_t> acked_flush_{0};
  uint64_t sent_flush_ = 0;
  Clock::time_point last_status_{};
  Clock::time_point last_heartbeat_ = Clock::now();
  std::string last_returned_position_;
  pg::Message msg_;
  // Per-batch caches (reset by read()): transaction metadata already copied into this batch's
  // arena, and relations already retained by it.
  struct TxMeta {
    bool valid = false;
    std::string_view commit_lsn, commit_time, xid;
  } tx_meta_;
  std::vector<const pg::Relation*> retained_;
  Backoff reconnect_backoff_{std::chrono::milliseconds(200), std::chrono::seconds(30)};
  // Whether this source has streamed before (a start is then a reconnect), and how many times in
  // a row a reconnect found the slot still held (by its own previous walsender, still exiting).
  bool streamed_before_ = false;
  int slot_busy_retries_ = 0;
  std::jthread status_thread_;
};

Status PostgresSource::connect_and_check() {
  auto c = PgConn::connect(url_, false);
  if (!c.ok()) return std::move(c).error();
  conn_ = std::move(c.value());
  auto wal = conn_.exec("SHOW wal_level");
  if (!wal.ok()) return std::move(wal).error();
  const std::string level = PQgetvalue(wal.value().get(), 0, 0);
  if (level != "logical")
    return Error(Errc::unsupported, fmt::format("wal_level is '{}' on {}; set wal_level = logical in postgresql.conf "
                                                "and restart PostgreSQL", level, pg::describe_target(url_)));
  auto role = conn_.exec("SELECT current_user, rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user");
  if (!role.ok()) return std::move(role).error();
  if (PQntuples(role.value().get()) == 1 && std::string_view(PQgetvalue(role.value().get(), 0, 1)) != "t") {
    const std::string user = PQgetvalue(role.value().get(), 0, 0);
    return Error(Errc::permission, fmt::format("role {} lacks the REPLICATION attribute; grant it: ALTER ROLE {} WITH "
                                               "REPLICATION", pg::quote_identifier(user), pg::quote_identifier(user)));
  }
  return ok_status();
}

Status PostgresSource::resolve_tables() {
  tables_.clear();
  all_tables_ = tables_setting_.size() == 1 && tables_setting_[0] == "*";
  if (all_tables_) {
    // Estimated rows (progress only): reltuples, or ~120 bytes a row if never analysed.
    auto r = conn_.exec(
        "SELECT n.nspname, c.relname, c.oid, (CASE WHEN c.reltuples >= 0 THEN c.reltuples ELSE pg_relation_size(c.oid) / 120 END)::bigint FROM pg_class c JOIN pg_namespace n ON "
        "n.oid = c.relnamespace WHERE c.relkind = 'r' AND NOT c.relispartition AND n.nspname NOT IN "
        "('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%' AND n.nspname NOT LIKE 'pg_temp%' "
        "ORDER BY 1, 2");
    if (!r.ok()) return std::move(r).error();
    PGresult* res = r.value().get();
    for (int i = 0; i < PQntuples(res); ++i)
      tables_.push_back({PQgetvalue(res, i, 0), PQgetvalue(res, i, 1), uint32_t(std::stoul(PQgetvalue(res, i, 2))),
                         std::stoll(PQgetvalue(res, i, 3))});
    return ok_status();
  }
  for (const std::string& spec : tables_setting_) {
    auto name = parse_table_name(spec);
    if (!name)
      return Error(Errc::config, fmt::format("setting 'tables': '{}' is not a table name (schema.table, quote names "
                                             "with spaces: sales.\"Order Items\")", spec));
    auto r = conn_.exec_params(
        "SELECT c.oid, c.relkind, (CASE WHEN c.reltuples >= 0 THEN c.reltuples ELSE pg_relation_size(c.oid) / 120 END)::bigint FROM pg_class c JOIN pg_namespace n ON n.oid = "
        "c.relnamespace WHERE n.nspname = $1 AND c.relname = $2",
        {name->first, name->second});
    if (!r.ok()) return std::move(r).error();
    PGresult* res = r.value().get();
    const std::string qualified = pg::quote_identifier(name->first) + "." + pg::quote_identifier(name->second);
    if (PQntuples(res) == 0)
      return Error(Errc::not_found, fmt::format("table {} does not exist in {}; check `tables` (names are case-sensitive "
                                                "when quoted)", qualified, pg::describe_target(url_)));
    if (std::string_view(PQgetvalue(res, 0, 1)) != "r")
      return Error(Errc::unsupported, fmt::format("{} is not a plain table (relkind '{}'); list its partitions or "
                                                  "tables instead", qualified, PQgetvalue(res, 0, 1)));
    tables_.push_back({name->first, name->second, uint32_t(std::stoul(PQgetvalue(res, 0, 0))), std::stoll(PQgetvalue(res, 0, 2))});
  }
  return ok_status();
}

Status PostgresSource::ensure_publication() {
  auto r = conn_.exec_params("SELECT puballtables FROM pg_publication WHERE pubname = $1", {publication_});
  if (!r.ok()) return std::move(r).error();
  const std::string marker = "created by sluice pipeline " + ctx_.pipeline_id;
  if (PQntuples(r.value().get()) == 0) {
    std::string sql = "CREATE PUBLICATION " + pg::quote_identifier(publication_);
    if (all_tables_) {
      sql += " FOR ALL TABLES";
    } else {
      sql += " FOR TABLE ";
      for (size_t i = 0; i < tables_.size(); ++i)
        sql += (i ? ", " : "") + pg::quote_identifier(tables_[i].schema) + "." + pg::quote_identifier(tables_[i].name);
    }
    if (auto c = conn_.exec(sql, PGRES_COMMAND_OK); !c.ok())
      return c.error().with_context(fmt::format("cannot create publication {}: ", pg::quote_identifier(publication_)));
    (void)conn_.exec("COMMENT ON PUBLICATION " + pg::quote_identifier(publication_) + " IS " + conn_.quote_literal(marker),
                     PGRES_COMMAND_OK);
    spdlog::info("pipeline {}: created publication {}", ctx_.pipeline_id, publication_);
    return ok_status();
  }
  if (all_tables_ || std::string_view(PQgetvalue(r.value().get(), 0, 0)) == "t") return ok_status();
  // Reused publication: add tables the pipeline now lists but the publication lacks.
  for (const TableRef& t : tables_) {
    auto has = conn_.exec_params("SELECT 1 FROM pg_publication_tables WHERE pubname = $1 AND schemaname = $2 AND tablename = $3",
                                 {publication_, t.schema, t.name});
    if (!has.ok()) return std::move(has).error();
    if (PQntuples(has.value().get()) == 0) {
      auto a = conn_.exec("ALTER PUBLICATION " + pg::quote_identifier(publication_) + " ADD TABLE " +
                              pg::quote_identifier(t.schema) + "." + pg::quote_identifier(t.name),
                          PGRES_COMMAND_OK);
      if (!a.ok()) return a.error().with_context("cannot add a table to the publication: ");
      spdlog::info("pipeline {}: added {}.{} to publication {}", ctx_.pipeline_id, t.schema, t.name, publication_);
    }
  }
  return ok_status();
}

Status PostgresSource::resolve_types(const std::vector<uint32_t>& oids) {
  std::vector<uint32_t> pending;
  for (uint32_t o : oids)
    if (!types_.known(o)) pending.push_back(o);
  for (int round = 0; round < 4 && !pending.empty(); ++round) {
    std::string list = "{";
    for (size_t i = 0; i < pending.size(); ++i) list += (i ? "," : "") + std::to_string(pending[i]);
    list += "}";
    auto r = conn_.exec_params(
        "SELECT t.oid, t.typtype, t.typelem, t.typbasetype, coalesce(e.typdelim, ','), t.typcategory "
        "FROM pg_type t LEFT JOIN pg_type e ON e.oid = t.typelem WHERE t.oid = ANY($1::oid[])",
        {list});
    if (!r.ok()) return r.error().with_context("cannot read type information: ");
    pending.clear();
    PGresult* res = r.value().get();
    for (int i = 0; i < PQntuples(res); ++i) {
      const uint32_t type_oid = uint32_t(std::stoul(PQgetvalue(res, i, 0)));
      const char typtype = PQgetvalue(res, i, 1)[0];
      const uint32_t elem = uint32_t(std::stoul(PQgetvalue(res, i, 2)));
      const uint32_t base = uint32_t(std::stoul(PQgetvalue(res, i, 3)));
      const char delim = PQgetvalue(res, i, 4)[0];
      const char category = PQgetvalue(res, i, 5)[0];
      pg::TypeInfo info;
      if (typtype == 'e') {
        info.kind = pg::TypeInfo::Kind::enumeration;
      } else if (typtype == 'd') {
        info.kind = pg::TypeInfo::Kind::domain;
        info.element_oid = base;
        if (!types_.known(base)) pending.push_back(base);
      } else if (category == 'A' && elem != 0) {
        info.kind = pg::TypeInfo::Kind::array;
        info.element_oid = elem;
        info.delimiter = delim;
        if (!types_.known(elem)) pending.push_back(elem);
      } else if (typtype == 'c') {
        info.kind = pg::TypeInfo::Kind::composite;
      } else {
        info.kind = pg::TypeInfo::Kind::other;
      }
      types_.add(type_oid, info);
    }
  }
  return ok_status();
}

// Primary-key column names of a table (the record key); empty if it has none.
Result<TableState*> PostgresSource::table_from_relation(std::shared_ptr<const pg::Relation> rel) {
  // While streaming, the catalog connection may have dropped with the replication one.
  if (pos_.phase == Position::Phase::cdc && (!conn_.ok() || !conn_.exec("SELECT 1").ok())) {
    auto c = PgConn::connect(url_, false);
    if (!c.ok()) return std::move(c).error();
    conn_ = std::move(c.value());
  }
  TableState& t = table_states_[rel->oid];
  std::vector<uint32_t> oids;
  for (const auto& c : rel->columns) oids.push_back(c.type_oid);
  if (Status st = resolve_types(oids); !st.ok()) return st.error();
  auto r = conn_.exec_params(
      "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
      "WHERE i.indrelid = $1::oid AND i.indisprimary",
      {std::to_string(rel->oid)});
  if (!r.ok()) return r.error().with_context("cannot read the primary key: ");
  std::vector<std::string> pk;
  for (int i = 0; i < PQntuples(r.value().get()); ++i) pk.emplace_back(PQgetvalue(r.value().get(), i, 0));
  t.key_columns.clear();
  for (uint32_t i = 0; i < rel->columns.size(); ++i) {
    const auto& c = rel->columns[i];
    const bool in_pk = std::find(pk.begin(), pk.end(), c.name) != pk.end();
    if (pk.empty() ? (c.key && rel->replica_identity != 'f') : in_pk) t.key_columns.push_back(i);
  }
  if (t.key_columns.empty() && !t.warned_no_key) {
    spdlog::warn("pipeline {}: table {}.{} has no primary key: its records carry no key, so destinations cannot "
                 "upsert or delete them by key (add a primary key)", ctx_.pipeline_id, rel->schema, rel->name);
    t.warned_no_key = true;
  }
  t.rel = std::move(rel);
  return &t;
}

// The snapshot's columns: those pgoutput sends (generated columns never are), so snapshot and
// stream records of one row have the same fields.
Result<TableState*> PostgresSource::table_from_catalog(const TableRef& tr) {
  auto r = conn_.exec_params(
      "SELECT a.attname, a.atttypid, a.atttypmod, c.relreplident FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
      "WHERE a.attrelid = $1::oid AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = '' ORDER BY a.attnum",
      {std::to_string(tr.oid)});
  if (!r.ok()) return r.error().with_context(fmt::format("cannot read the columns of {}.{}: ", tr.schema, tr.name));
  auto rel = std::make_shared<pg::Relation>();
  rel->oid = tr.oid;
  rel->schema = tr.schema;
  rel->name = tr.name;
  PGresult* res = r.value().get();
  for (int i = 0; i < PQntuples(res); ++i) {
    pg::Column c;
    c.name = PQgetvalue(res, i, 0);
    c.type_oid = uint32_t(std::stoul(PQgetvalue(res, i, 1)));
    c.type_mod = std::stoi(PQgetvalue(res, i, 2));
    rel->replica_identity = PQgetvalue(res, i, 3)[0];
    rel->columns.push_back(std::move(c));
  }
  // Keep a relation already learnt from the stream (same oid) out of the way: the snapshot uses
  // its own description, the stream replaces it on its next Relation message.
  return table_from_relation(std::move(rel));
}

Status PostgresSource::open(const ConnectorContext& ctx, const std::optional<std::string>& checkpoint) {
  ctx_ = ctx;
  slot_ = slot_setting_.empty() ? default_name(ctx.pipeline_id) : slot_setting_;
  publication_ = publication_setting_.empty() ? default_name(ctx.pipeline_id) : publication_setting_;
  if (checkpoint) {
    auto p = Position::parse(*checkpoint);
    if (!p)
      return Error(Errc::data, fmt::format("checkpoint '{}' is not a postgres position; run `sluice cleanup` to start "
                                           "over", *checkpoint));
    pos_ = *p;
  }
  if (Status st = connect_and_check(); !st.ok()) return st;
  if (Status st = resolve_tables(); !st.ok()) return st;
  if (tables_.empty() && !all_tables_) return Error(Errc::config, "setting 'tables' lists no table");

  if (pos_.phase == Position::Phase::done) {
    spdlog::info("pipeline {}: initial_only snapshot already complete", ctx_.pipeline_id);
    return ok_status();
  }
  const bool snapshot_only = mode_ == "initial_only";
  std::string exported;
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
        return Error(Errc::conflict, fmt::format("replication slot {} is in use by another process (pid {}): stop it, or "
                                                 "set a different `slot`", slot_, PQgetvalue(res, 0, 1)));
      if (std::string_view(PQgetvalue(res, 0, 3)) != "pgoutput")
        return Error(Errc::conflict, fmt::format("replication slot {} uses plugin {}, not pgoutput: drop it or set a "
                                                 "different `slot`", slot_, PQgetvalue(res, 0, 3)));
      auto confirmed = Lsn::parse(PQgetvalue(res, 0, 2));
      if (pos_.phase == Position::Phase::none) {
        // A previous run created the slot but never checkpointed: nothing was acknowledged, so the
        // stream from the slot's position covers everything a fresh snapshot could miss.
        if (mode_ == "initial") {
          pos_.phase = Position::Phase::snapshot;
          pos_.lsn = confirmed.value_or(Lsn{});
        } else {
          pos_.phase = Position::Phase::cdc;
          pos_.lsn = confirmed.value_or(Lsn{});
        }
      }
    } else {
      if (pos_.phase == Position::Phase::cdc)
        return Error(Errc::not_found, fmt::format("replication slot {} is gone but the pipeline has a checkpoint: changes "
                                                  "since then are lost; run `sluice cleanup` and start over with a new "
                                                  "snapshot", slot_));
      auto repl = PgConn::connect(url_, true);
      if (!repl.ok()) return std::move(repl).error();
      repl_ = std::move(repl.value());
      const bool want_snapshot = mode_ == "initial" && pos_.phase != Position::Phase::cdc;
      auto created = repl_.exec(fmt::format("CREATE_REPLICATION_SLOT {} LOGICAL pgoutput (SNAPSHOT '{}')",
                                            pg::quote_identifier(slot_), want_snapshot ? "export" : "nothing"));
      if (!created.ok()) return created.error().with_context(fmt::format("cannot create replication slot {}: ", slot_));
      auto point = Lsn::parse(PQgetvalue(created.value().get(), 0, 1));
      if (want_snapshot && !PQgetisnull(created.value().get(), 0, 2)) exported = PQgetvalue(created.value().get(), 0, 2);
      spdlog::info("pipeline {}: created replication slot {} at {}", ctx_.pipeline_id, slot_,
                   point.value_or(Lsn{}).to_string());
      if (pos_.phase == Position::Phase::none || pos_.phase == Position::Phase::snapshot) {
        // A snapshot resumed without its slot (slot dropped mid-snapshot) restarts from scratch.
        pos_ = Position{};
        pos_.phase = want_snapshot ? Position::Phase::snapshot : Position::Phase::cdc;
        pos_.lsn = point.value_or(Lsn{});
      }
    }
  } else if (pos_.phase == Position::Phase::none) {
    pos_.phase = Position::Phase::snapshot;
  }
  if (pos_.phase == Position::Phase::none) pos_.phase = Position::Phase::cdc;
  if (mode_ == "never" && pos_.phase == Position::Phase::snapshot) pos_.phase = Position::Phase::cdc;

  acked_flush_ = pos_.phase == Position::Phase::cdc ? pos_.lsn.value : 0;
  sent_flush_ = acked_flush_;
  if (pos_.phase == Position::Phase::cdc && pos_.tx_n) {
    resume_tx_ = pos_.tx_lsn;
    resume_n_ = pos_.tx_n;
  }
  if (pos_.phase == Position::Phase::snapshot) {
    if (Status st = begin_snapshot(exported); !st.ok()) return st;
  }
  status_thread_ = std::jthread([this](std::stop_token st) { status_loop(st); });
  return ok_status();
}

Status PostgresSource::begin_snapshot(const std::string& exported) {
  if (auto b = conn_.exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", PGRES_COMMAND_OK); !b.ok()) return b.error();
  if (!exported.empty()) {
    if (auto s = conn_.exec("SET TRANSACTION SNAPSHOT " + conn_.quote_literal(exported), PGRES_COMMAND_OK); !s.ok())
      return s.error().with_context("cannot import the slot's snapshot: ");
  }
  int64_t total = 0;
  for (size_t i = pos_.table_index; i < tables_.size(); ++i) total += tables_[i].estimate;
  snapshot_rows_ = 0;
  if (ctx_.stats) {
    ctx_.stats->snapshot_rows_total = total;
    ctx_.stats->snapshot_rows_done = 0;
  }
  spdlog::info("pipeline {}: snapshot of {} table(s), about {} rows{}", ctx_.pipeline_id, tables_.size() - pos_.table_index,
               total, exported.empty() ? "" : " (in the slot's exported snapshot)");
  return ok_status();
}

// Heap pages per snapshot chunk (32 MiB): a restart re-reads at most one chunk of a table.
constexpr uint64_t kChunkPages = 4096;

Status PostgresSource::start_copy() {
  const TableRef& t = tables_[pos_.table_index];
  if (copy_table_index_ != pos_.table_index) {
    auto st = table_from_catalog(t);
    if (!st.ok()) return std::move(st).error();
    copy_table_ = st.value();
    // Not MVCC, so at least the size the snapshot saw: every visible row lies below it.
    auto size = conn_.exec_params("SELECT pg_relation_size($1::oid) / current_setting('block_size')::bigint",
                                  {std::to_string(t.oid)});
    if (!size.ok()) return size.error().with_context(fmt::format("cannot size {}.{}: ", t.schema, t.name));
    copy_table_pages_ = std::stoull(PQgetvalue(size.value().get(), 0, 0));
    copy_table_index_ = pos_.table_index;
  }
  std::string cols;
  for (const auto& c : copy_table_->rel->columns) cols += (cols.empty() ? "" : ", ") + pg::quote_identifier(c.name);
  if (cols.empty()) cols = "NULL";  // a table without columns still has rows
  // Chunks of physical pages read by TID range scans: as fast as a plain COPY, and resumable at a
  // chunk boundary. Rows that changed after the snapshot come again through the stream, which
  // starts at the snapshot's LSN, so a resume under a newer snapshot still converges.
  copy_last_chunk_ = pos_.page + kChunkPages >= copy_table_pages_;
  std::string where = fmt::format("ctid >= '({},0)'::tid", pos_.page);
  if (!copy_last_chunk_) where += fmt::format(" AND ctid < '({},0)'::tid", pos_.page + kChunkPages);
  const std::string sql = fmt::format("COPY (SELECT {} FROM {}.{} WHERE {}) TO STDOUT", cols,
                                      pg::quote_identifier(t.schema), pg::quote_identifier(t.name), where);
  PgResult r(PQexec(conn_.get(), sql.c_str()));
  if (!r || PQresultStatus(r.get()) != PGRES_COPY_OUT)
    return pg::classify_error(r ? PQresultErrorMessage(r.get()) : conn_.last_error(),
                              fmt::format("cannot read {}.{}", t.schema, t.name));
  copy_active_ = true;
  spdlog::debug("pipeline {}: snapshot of {}.{} from page {}", ctx_.pipeline_id, t.schema, t.name, pos_.page);
  return ok_status();
}

Status PostgresSource::finish_snapshot() {
  if (auto c = conn_.exec("COMMIT", PGRES_COMMAND_OK); !c.ok()) return c.error();
  spdlog::info("pipeline {}: snapshot complete ({} rows)", ctx_.pipeline_id, snapshot_rows_);
  const Lsn start = pos_.lsn;
  pos_ = Position{};
  if (mode_ == "initial_only") {
    pos_.phase = Position::Phase::done;
    pos_.lsn = start;
  } else {
    pos_.phase = Position::Phase::cdc;
    pos_.lsn = start;
  }
  return ok_status();
}

Result<ReadStatus> PostgresSource::read_snapshot(Batch& batch, const ReadRequest& req, std::stop_token stop) {
  pg::Tuple tuple;
  while (batch.size() < req.max_records && batch.bytes() < req.max_bytes && !stop.stop_requested()) {
    if (!copy_active_) {
      if (pos_.table_index >= tables_.size()) {
        if (Status st = finish_snapshot(); !st.ok()) return st.error();
        break;
      }
      if (Status st = start_copy(); !st.ok()) return st.error();
    }
    char* buf = nullptr;
    const int n = PQgetCopyData(conn_.get(), &buf, 0);
    if (n > 0) {
      std::string_view line(buf, size_t(n));
      if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
      // Split on tabs; unescape fields that contain a backslash.
      const auto& cols = copy_table_->rel->columns;
      tuple.resize(cols.size());
      if (field_scratch_.size() < cols.size()) field_scratch_.resize(cols.size());
      size_t start = 0;
      for (size_t i = 0; i < cols.size(); ++i) {
        size_t tab = line.find('\t', start);
        if (tab == std::string_view::npos) tab = line.size();
        std::string_view f = line.substr(start, tab - start);
        start = tab + 1;
        pg::TupleValue& v = tuple[i];
        if (f == "\\N") {
          v.kind = 'n';
          v.data = {};
        } else if (f.find('\\') != std::string_view::npos) {
          pg::copy_unescape(f, &field_scratch_[i]);
          v.kind = 't';
          v.data = field_scratch_[i];
        } else {
          v.kind = 't';
          v.data = f;
        }
      }
      if (std::find(retained_.begin(), retained_.end(), copy_table_->rel.get()) == retained_.end()) {
        batch.retain(copy_table_->rel);
        retained_.push_back(copy_table_->rel.get());
      }
      Record& r = batch.add();
      r.op = Operation::snapshot;
      r.metadata = metadata(batch, *copy_table_, {}, false);
      Status st = tuple_to_object(batch, *copy_table_, tuple, false, &r.after);
      if (st.ok() && !copy_table_->key_columns.empty()) st = tuple_to_object(batch, *copy_table_, tuple, true, &r.key);
      PQfreemem(buf);
      if (!st.ok()) return st.error();
      ++snapshot_rows_;
      continue;
    }
    if (n == -1) {  // this table is done
      PgResult res(PQgetResult(conn_.get()));
      if (!res || PQresultStatus(res.get()) != PGRES_COMMAND_OK)
        return pg::classify_error(res ? PQresultErrorMessage(res.get()) : conn_.last_error(), "snapshot COPY failed");
      while (PgResult more{PQgetResult(conn_.get())}) {
      }
      copy_active_ = false;
      if (copy_last_chunk_) {
        ++pos_.table_index;
        pos_.page = 0;
      } else {
        pos_.page += kChunkPages;
      }
      continue;
    }
    return pg::classify_error(conn_.last_error(), "snapshot read failed");
  }
  if (ctx_.stats) ctx_.stats->snapshot_rows_done = snapshot_rows_;
  batch.set_position(pos_.encode());
  if (pos_.phase == Position::Phase::done) return ReadStatus::end;
  return ReadStatus::more;
}

Value PostgresSource::metadata(Batch& batch, const TableState& t, std::string_view lsn, bool cdc) {
  ObjectBuilder m = batch.object(cdc ? 6 : 2);
  m.add(meta::kSchema, Value::string(t.rel->schema));
  m.add(meta::kTable, Value::string(t.rel->name));
  if (cdc) {
    if (!tx_meta_.valid) {
      tx_meta_.commit_lsn = batch.copy(tx_final_.to_string());
      tx_meta_.commit_time = batch.copy(format_timestamptz(tx_commit_time_));
      tx_meta_.xid = batch.copy(std::to_string(tx_xid_));
      tx_meta_.valid = true;
    }
    m.add("lsn", Value::string(lsn));
    m.add("commit_lsn", Value::string(tx_meta_.commit_lsn));
    m.add("commit_time", Value::string(tx_meta_.commit_time));
    m.add("xid", Value::string(tx_meta_.xid));
  }
  return m.build();
}

Status PostgresSource::tuple_to_object(Batch& batch, const TableState& t, const pg::Tuple& tuple, bool key_only, Value* out) {
  const auto& cols = t.rel->columns;
  if (tuple.size() != cols.size())
    return Error(Errc::data, fmt::format("{}.{}: tuple has {} columns, relation {}", t.rel->schema, t.rel->name,
                                         tuple.size(), cols.size()));
  const uint32_t n = key_only ? uint32_t(t.key_columns.size()) : uint32_t(cols.size());
  ObjectBuilder b = batch.object(n);
  for (uint32_t k = 0; k < n; ++k) {
    const uint32_t i = key_only ? t.key_columns[k] : k;
    const pg::TupleValue& tv = tuple[i];
    if (tv.kind == 'u') continue;  // unchanged TOAST: absent, so destinations keep the stored value
    if (tv.kind == 'n') {
      b.add(cols[i].name, Value::null());
      continue;
    }
    if (tv.kind == 'b')
      return Error(Errc::data, "pgoutput sent a binary value; sluice requests text format");
    auto v = pg::text_to_value(types_, cols[i].type_oid, tv.data, batch.arena());
    if (!v.ok()) return v.error().with_context(fmt::format("{}.{}.{}: ", t.rel->schema, t.rel->name, cols[i].name));
    b.add(cols[i].name, v.value());
  }
  *out = b.build();
  return ok_status();
}

Status PostgresSource::emit_change(Batch& batch, TableState& t, Operation op, const pg::Tuple* old_tuple, char old_kind,
                                   const pg::Tuple* new_tuple, Lsn lsn) {
  if (std::find(retained_.begin(), retained_.end(), t.rel.get()) == retained_.end()) {
    batch.retain(t.rel);  // column names and schema/table strings live in the relation
    retained_.push_back(t.rel.get());
  }
  Record& r = batch.add();
  r.op = op;
  r.position = batch.copy(lsn.to_string());
  r.metadata = metadata(batch, t, r.position, true);
  if (new_tuple) {
    if (Status st = tuple_to_object(batch, t, *new_tuple, false, &r.after); !st.ok()) return st;
  }
  if (old_tuple) {
    if (Status st = tuple_to_object(batch, t, *old_tuple, old_kind == 'K', &r.before); !st.ok()) return st;
    if (old_kind == 'K') {
      // Key-only old tuples: keep the key columns only (the others come as nulls).
      ObjectBuilder b = batch.object(uint32_t(t.key_columns.size()));
      for (uint32_t i : t.key_columns)
        if (const Value* v = r.before.find(t.rel->columns[i].name)) b.add(t.rel->columns[i].name, *v);
      r.before = b.build();
    }
  }
  if (!t.key_columns.empty()) {
    // The key comes from the new row, or the old one for deletes (and for key columns whose new
    // value was an unchanged TOAST datum).
    ObjectBuilder k = batch.object(uint32_t(t.key_columns.size()));
    for (uint32_t i : t.key_columns) {
      const std::string& name = t.rel->columns[i].name;
      const Value* v = r.after.is_object() ? r.after.find(name) : nullptr;
      if (!v && r.before.is_object()) v = r.before.find(name);
      if (v) k.add(name, *v);
    }
    r.key = k.build();
  }
  return ok_status();
}

Status PostgresSource::start_replication() {
  if (!repl_.ok()) {
    repl_.reset();
    auto repl = PgConn::connect(url_, true);
    if (!repl.ok()) return std::move(repl).error();
    repl_ = std::move(repl.value());
  }
  if (!conn_.ok()) {
    auto c = PgConn::connect(url_, false);
    if (!c.ok()) return std::move(c).error();
    conn_ = std::move(c.value());
  }
  const std::string sql = fmt::format(
      "START_REPLICATION SLOT {} LOGICAL {} (proto_version '1', publication_names {}, messages '{}')",
      pg::quote_identifier(slot_), pos_.lsn.to_string(), repl_.quote_literal(pg::quote_identifier(publication_)),
      logical_messages_ ? "true" : "false");
  PgResult r(PQexec(repl_.get(), sql.c_str()));
  if (!r || PQresultStatus(r.get()) != PGRES_COPY_BOTH) {
    Error e = pg::classify_error(r ? PQresultErrorMessage(r.get()) : repl_.last_error(),
                                 fmt::format("cannot stream from slot {}", slot_));
    repl_.reset();
    return e;
  }
  streaming_ = true;
  streamed_before_ = true;
  slot_busy_retries_ = 0;
  in_tx_ = false;
  tx_n_ = 0;
  if (pos_.tx_n) {  // resume inside a transaction: skip the changes already written
    resume_tx_ = pos_.tx_lsn;
    resume_n_ = pos_.tx_n;
  }
  pos_.tx_n = 0;
  reconnect_backoff_.reset();
  spdlog::info("pipeline {}: streaming changes from slot {} at {}", ctx_.pipeline_id, slot_, pos_.lsn.to_string());
  return ok_status();
}

void PostgresSource::send_status_locked(bool force) {
  if (!streaming_ || !repl_.ok()) return;
  const uint64_t flush = acked_flush_.load();
  const auto now = Clock::now();
  // Well inside wal_sender_timeout (60 s by default), whatever the heartbeat interval.
  const auto interval = std::min<std::chrono::milliseconds>(heartbeat_, std::chrono::seconds(10));
  if (!force && flush == sent_flush_ && now - last_status_ < interval) return;
  char msg[34];
  msg[0] = 'r';
  put_be64(msg + 1, std::max(received_.value, flush));  // received
  put_be64(msg + 9, flush);                              // flushed = durable at the destination
  put_be64(msg + 17, flush);                             // applied
  put_be64(msg + 25, uint64_t(now_pg_micros()));
  msg[33] = 0;
  if (PQputCopyData(repl_.get(), msg, sizeof(msg)) == 1 && PQflush(repl_.get()) == 0) {
    sent_flush_ = flush;
    last_status_ = now;
  }
}

// Keeps the walsender from timing out while the reader is blocked on a slow destination, and
// reports acknowledgements promptly.
void PostgresSource::status_loop(std::stop_token stop) {
  std::mutex mu;
  std::condition_variable_any cv;
  while (!stop.stop_requested()) {
    {
      std::unique_lock wait_lock(mu);
      if (cv.wait_for(wait_lock, stop, std::chrono::milliseconds(200), [] { return false; })) break;
    }
    if (stop.stop_requested()) break;
    std::unique_lock lock(repl_mu_, std::try_to_lock);
    if (lock.owns_lock()) send_status_locked(false);
  }
}

void PostgresSource::ack(std::string_view position) {
  auto p = Position::parse(position);
  if (!p || p->phase != Position::Phase::cdc) return;
  uint64_t cur = acked_flush_.load();
  while (p->lsn.value > cur && !acked_flush_.compare_exchange_weak(cur, p->lsn.value)) {
  }
}

Status PostgresSource::handle_xlog(Batch& batch, const char* buf, int len) {
  if (len < 1) return ok_status();
  if (buf[0] == 'k') {
    if (len < 18) return Error(Errc::data, "replication keepalive message is truncated");
    const Lsn wal_end{be64(buf + 1)};
    if (wal_end > received_) received_ = wal_end;
    if (buf[17]) send_status_locked(true);
    // Idle heartbeat: between transactions everything before wal_end has been received, so the
    // position may advance there (once durable, the slot stops pinning WAL for us).
    if (!in_tx_ && resume_n_ == 0 && wal_end > pos_.lsn && Clock::now() - last_heartbeat_ >= heartbeat_) {
      pos_.lsn = wal_end;
      last_heartbeat_ = Clock::now();
    }
    return ok_status();
  }
  if (buf[0] != 'w') return ok_status();
  if (len < 25) return Error(Errc::data, "replication XLogData message is truncated");
  const Lsn lsn{be64(buf + 1)};
  if (lsn > received_) received_ = lsn;
  if (Status st = pg::decode_pgoutput(std::string_view(buf + 25, size_t(len - 25)), &msg_); !st.ok()) return st;

  if (auto* b = std::get_if<pg::BeginMsg>(&msg_)) {
    in_tx_ = true;
    tx_meta_.valid = false;
    tx_final_ = b->final_lsn;
    tx_commit_time_ = b->commit_time;
    tx_xid_ = b->xid;
    tx_n_ = 0;
    skip_n_ = 0;
    if (resume_n_ && resume_tx_ == b->final_lsn) skip_n_ = resume_n_;
    resume_n_ = 0;
    return ok_status();
  }
  if (auto* c = std::get_if<pg::CommitMsg>(&msg_)) {
    in_tx_ = false;
    tx_n_ = 0;
    skip_n_ = 0;
    if (c->end_lsn > pos_.lsn) pos_.lsn = c->end_lsn;
    if (ctx_.stats) ctx_.stats->lag_ms = std::max<int64_t>(0, (now_unix_micros() - c->commit_time) / 1000);
    last_heartbeat_ = Clock::now();
    return ok_status();
  }
  if (auto* r = std::get_if<pg::RelationMsg>(&msg_)) {
    auto t = table_from_relation(r->relation);
    return t.ok() ? ok_status() : Status(std::move(t).error());
  }
  const bool change = std::holds_alternative<pg::InsertMsg>(msg_) || std::holds_alternative<pg::UpdateMsg>(msg_) ||
                      std::holds_alternative<pg::DeleteMsg>(msg_) || std::holds_alternative<pg::TruncateMsg>(msg_) ||
                      (std::holds_alternative<pg::LogicalMsg>(msg_) && std::get<pg::LogicalMsg>(msg_).transactional);
  if (!change) {
    // A non-transactional message: outside any transaction.
    if (auto* m = std::get_if<pg::LogicalMsg>(&msg_); m && logical_messages_) emit_logical_message(batch, *m, lsn);
    return ok_status();
  }
  ++tx_n_;
  if (tx_n_ <= skip_n_) return ok_status();  // written before the restart
  auto lookup = [&](uint32_t oid) -> TableState* {
    auto it = table_states_.find(oid);
    return it == table_states_.end() || !it->second.rel ? nullptr : &it->second;
  };
  if (auto* ins = std::get_if<pg::InsertMsg>(&msg_)) {
    TableState* t = lookup(ins->relation_oid);
    if (!t) return Error(Errc::data, fmt::format("change for relation {} before its Relation message", ins->relation_oid));
    return emit_change(batch, *t, Operation::create, nullptr, 0, &ins->new_tuple, lsn);
  }
  if (auto* up = std::get_if<pg::UpdateMsg>(&msg_)) {
    TableState* t = lookup(up->relation_oid);
    if (!t) return Error(Errc::data, fmt::format("change for relation {} before its Relation message", up->relation_oid));
    return emit_change(batch, *t, Operation::update, up->old_kind ? &up->old_tuple : nullptr, up->old_kind,
                       &up->new_tuple, lsn);
  }
  if (auto* del = std::get_if<pg::DeleteMsg>(&msg_)) {
    TableState* t = lookup(del->relation_oid);
    if (!t) return Error(Errc::data, fmt::format("change for relation {} before its Relation message", del->relation_oid));
    return emit_change(batch, *t, Operation::remove, &del->old_tuple, del->old_kind, nullptr, lsn);
  }
  if (auto* tr = std::get_if<pg::TruncateMsg>(&msg_)) {
    // A truncate becomes one key-less delete per table, marked `truncate`; keyed destinations
    // empty the table.
    for (uint32_t oid : tr->relation_oids) {
      TableState* t = lookup(oid);
      if (!t) continue;
      if (std::find(retained_.begin(), retained_.end(), t->rel.get()) == retained_.end()) {
        batch.retain(t->rel);
        retained_.push_back(t->rel.get());
      }
      Record& rec = batch.add();
      rec.op = Operation::remove;
      rec.position = batch.copy(lsn.to_string());
      ObjectBuilder m = batch.object(7);
      for (const Field& f : metadata(batch, *t, rec.position, true).fields()) m.add(f.name, f.value);
      m.add(meta::kTruncate, Value::string("true"));
      rec.metadata = m.build();
    }
    return ok_status();
  }
  if (auto* m = std::get_if<pg::LogicalMsg>(&msg_); m && logical_messages_) emit_logical_message(batch, *m, lsn);
  return ok_status();
}

void PostgresSource::emit_logical_message(Batch& batch, const pg::LogicalMsg& m, Lsn lsn) {
  Record& rec = batch.add();
  rec.op = Operation::create;
  rec.position = batch.copy(lsn.to_string());
  rec.metadata = batch.object(2).add("message.prefix", Value::string(batch.copy(m.prefix)))
                     .add("lsn", Value::string(rec.position)).build();
  rec.after = batch.object(1).add("content", Value::bytes(batch.copy(m.content))).build();
}

std::string PostgresSource::cdc_position() const {
  Position p = pos_;
  p.phase = Position::Phase::cdc;
  if (in_tx_ && std::max(tx_n_, skip_n_) > 0) {
    p.tx_lsn = tx_final_;
    p.tx_n = std::max(tx_n_, skip_n_);  // changes still being skipped were written before
  } else if (!in_tx_ && resume_n_ > 0) {
    p.tx_lsn = resume_tx_;  // the partly written transaction has not come again yet
    p.tx_n = resume_n_;
  } else {
    p.tx_n = 0;
  }
  return p.encode();
}

Result<ReadStatus> PostgresSource::read_cdc(Batch& batch, const ReadRequest& req, std::stop_token stop) {
  std::unique_lock lock(repl_mu_);
  const auto started = Clock::now();
  Clock::time_point first{};
  bool idle = false;
  while (!streaming_) {
    Status st = start_replication();
    if (st.ok()) break;
    // The server ends a dropped walsender asynchronously (pg_terminate_backend, a lost
    // connection): a reconnect may find the slot still "active for PID" of this source's own
    // previous connection for a moment. Retry that a few times; on the first start it means
    // another process holds the slot, which stays an error.
    const bool own_walsender_exiting =
        streamed_before_ && st.error().code() == Errc::conflict && slot_busy_retries_++ < 8;
    if (!st.error().retriable() && !own_walsender_exiting) return st.error();
    spdlog::warn("pipeline {}: {} (retrying)", ctx_.pipeline_id, st.error().message());
    lock.unlock();
    if (!reconnect_backoff_.wait(stop)) return Error(Errc::cancelled, "stopped");
    lock.lock();
  }
  while (batch.size() < req.max_records && batch.bytes() < req.max_bytes && !stop.stop_requested()) {
    send_status_locked(false);
    char* buf = nullptr;
    const int n = PQgetCopyData(repl_.get(), &buf, 1);
    if (n > 0) {
      const size_t before = batch.size();
      Status st = handle_xlog(batch, buf, n);
      PQfreemem(buf);
      if (!st.ok()) return st.error();
      if (before == 0 && batch.size() > 0) first = Clock::now();
      continue;
    }
    if (n == 0) {
      const auto deadline = batch.empty() ? started + req.poll : first + req.linger;
      const auto now = Clock::now();
      if (now >= deadline) {
        idle = true;
        break;
      }
      pollfd pfd{PQsocket(repl_.get()), POLLIN, 0};
      const int wait_ms = int(std::min<int64_t>(
          100, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1));
      ::poll(&pfd, 1, wait_ms);
      if (PQconsumeInput(repl_.get()) == 0) {
        streaming_ = false;
        spdlog::warn("pipeline {}: replication connection lost: {} (reconnecting)", ctx_.pipeline_id, repl_.last_error());
        repl_.reset();
        break;
      }
      continue;
    }
    // -1: the server ended the stream; -2: error. Either way reconnect from what was read.
    std::string why = repl_.last_error();
    if (n == -1) {
      PgResult r(PQgetResult(repl_.get()));
      if (r && PQresultStatus(r.get()) == PGRES_FATAL_ERROR) why = PQresultErrorMessage(r.get());
    }
    Error e = pg::classify_error(why, "replication stream");
    streaming_ = false;
    repl_.reset();
    if (!e.retriable() && e.code() != Errc::internal) return e;
    spdlog::warn("pipeline {}: {} (reconnecting)", ctx_.pipeline_id, e.message());
    break;
  }
  if (!streaming_) {
    // Restart from exactly what this and earlier batches cover.
    const auto p = Position::parse(cdc_position());
    if (p) pos_ = *p;
    if (p && p->tx_n) {
      resume_tx_ = p->tx_lsn;
      resume_n_ = p->tx_n;
    }
    in_tx_ = false;
  }
  const std::string position = cdc_position();
  if (!batch.empty() || position != last_returned_position_) {
    batch.set_position(position);
    last_returned_position_ = position;
  }
  return idle ? ReadStatus::idle : ReadStatus::more;
}

Result<ReadStatus> PostgresSource::read(Batch& batch, const ReadRequest& req, std::stop_token stop) {
  tx_meta_.valid = false;
  retained_.clear();
  switch (pos_.phase) {
    case Position::Phase::snapshot: return read_snapshot(batch, req, stop);
    case Position::Phase::cdc: return read_cdc(batch, req, stop);
    case Position::Phase::done: batch.set_position(pos_.encode()); return ReadStatus::end;
    case Position::Phase::none: break;
  }
  return Error(Errc::internal, "postgres source read before open");
}

void PostgresSource::close() noexcept {
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

Status PostgresSource::cleanup(const ConnectorContext& ctx) {
  ctx_ = ctx;
  slot_ = slot_setting_.empty() ? default_name(ctx.pipeline_id) : slot_setting_;
  publication_ = publication_setting_.empty() ? default_name(ctx.pipeline_id) : publication_setting_;
  auto c = PgConn::connect(url_, false);
  if (!c.ok()) return std::move(c).error();
  conn_ = std::move(c.value());
  auto slot = conn_.exec_params("SELECT active, coalesce(active_pid, 0) FROM pg_replication_slots WHERE slot_name = $1", {slot_});
  if (!slot.ok()) return std::move(slot).error();
  if (PQntuples(slot.value().get()) == 1) {
    if (std::string_view(PQgetvalue(slot.value().get(), 0, 0)) == "t")
      return Error(Errc::conflict, fmt::format("replication slot {} is in use (pid {}): stop the pipeline first", slot_,
                                               PQgetvalue(slot.value().get(), 0, 1)));
    if (auto d = conn_.exec_params("SELECT pg_drop_replication_slot($1)", {slot_}); !d.ok())
      return d.error().with_context("cannot drop the replication slot: ");
    spdlog::info("dropped replication slot {}", slot_);
  }
  auto pub = conn_.exec_params("SELECT coalesce(obj_description(oid, 'pg_publication'), '') FROM pg_publication WHERE pubname = $1",
                               {publication_});
  if (!pub.ok()) return std::move(pub).error();
  if (PQntuples(pub.value().get()) == 1) {
    const std::string comment = PQgetvalue(pub.value().get(), 0, 0);
    if (comment == "created by sluice pipeline " + ctx.pipeline_id) {
      if (auto d = conn_.exec("DROP PUBLICATION " + pg::quote_identifier(publication_), PGRES_COMMAND_OK); !d.ok())
        return d.error().with_context("cannot drop the publication: ");
      spdlog::info("dropped publication {}", publication_);
    } else {
      spdlog::info("kept publication {}: sluice did not create it", publication_);
    }
  }
  conn_.reset();
  return ok_status();
}

Result<std::unique_ptr<Source>> make_postgres_source(const Settings& s) {
  for (const std::string& t : s.get_list("tables"))
    if (t != "*" && !parse_table_name(t))
      return Error(Errc::config, fmt::format("setting 'tables': '{}' is not a table name (schema.table)", t));
  if (s.get_duration("heartbeat.interval").count() <= 0)
    return Error(Errc::config, "setting 'heartbeat.interval' must be positive");
  return std::unique_ptr<Source>(std::make_unique<PostgresSource>(s));
}

}  // namespace

ConnectorSpec postgres_connector() {
  // The destination (postgres_destination.h), declared here to keep this file's includes untouched.
  extern const std::span<const SettingSpec> kPostgresDestinationSettings;
  Result<std::unique_ptr<Destination>> make_postgres_destination(const Settings& settings);
  return ConnectorSpec{
      .name = "postgres",
      .summary = "PostgreSQL: consistent snapshot, then logical replication (pgoutput) with acknowledgement of "
                 "durably written changes only.",
      .source_settings = kPostgresSourceSettings,
      .destination_settings = kPostgresDestinationSettings,
      .make_source = &make_postgres_source,
      .make_destination = &make_postgres_destination,
  };
}

}  // namespace sluice
