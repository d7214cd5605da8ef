#include "connectors/postgres/postgres_destination.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "connectors/postgres/pg_connection.h"
#include "connectors/postgres/postgres_dialect.h"
#include "connectors/record_template.h"
#include "connectors/sql/keyed_sql_destination.h"
#include "sluice/json.h"
#include "sluice/temporal.h"

namespace sluice {

namespace {

using pg::PgConn;
using pg::PgResult;
using pg::PostgresDialect;
using pg::quote_identifier;

// The options the destination runs on; the table below writes their defaults.
struct PostgresDestinationOptions {
  std::string url;  // finalize() folds user/password/password_file into it
  std::string user, password, password_file;
  std::optional<std::string> tls_mode;  // finalize() folds the tls.* settings into url too
  std::string tls_ca, tls_cert, tls_key, tls_key_password;
  std::string table;
  std::string schema;
  bool checkpoint_in_destination = false;
  bool keep_dropped_columns = false;
  std::string reconcile;
  std::chrono::milliseconds query_timeout{};
  std::chrono::milliseconds tcp_user_timeout{};
  // Derived by finalize().
  std::optional<RecordTemplate> table_template, schema_template;
  std::string checkpoint_schema;  // empty: positions are not stored in the destination
};

constexpr auto kDestinationSettings = settings_table<PostgresDestinationOptions>(
    setting<&PostgresDestinationOptions::url>(
        "url",
        "libpq URL or key=value DSN of the database (postgresql://user:password@host:5432/db?sslmode=require); "
        "every libpq option, TLS included, is passed through. The user needs CREATE on the schema for tables "
        "it has to create, and TEMPORARY on the database (staging tables).")
        .mandatory()
        .secret_value(),
    setting<&PostgresDestinationOptions::user>("user", kUserDoc),
    setting<&PostgresDestinationOptions::password>("password", kPasswordDoc).secret_value(),
    setting<&PostgresDestinationOptions::password_file>("password_file", kPasswordFileDoc),
    setting<&PostgresDestinationOptions::tls_mode>(
        "tls.mode",
        "TLS to the server, as libpq's sslmode: disabled (disable), preferred (prefer: TLS when the "
        "server offers it), required (require: TLS without checking the certificate, unless tls.ca is "
        "set: then as verify_ca), verify_ca (verify-ca: the certificate must be signed by tls.ca), "
        "verify_identity (verify-full: and name the host of `url`). Unset: the URL's sslmode, else "
        "prefer.")
        .one_of("disabled,preferred,required,verify_ca,verify_identity"),
    setting<&PostgresDestinationOptions::tls_ca>("tls.ca", kTlsCaDoc).file_path(),
    setting<&PostgresDestinationOptions::tls_cert>("tls.cert", kTlsCertDoc).file_path(),
    setting<&PostgresDestinationOptions::tls_key>("tls.key", kTlsKeyDoc).file_path(),
    setting<&PostgresDestinationOptions::tls_key_password>("tls.key_password", kTlsKeyPasswordDoc)
        .secret_value(),
    setting<&PostgresDestinationOptions::table>(
        "table",
        "Table each record is written to: a template where {{table}} and {{schema}} (or any {{metadata-key}}) "
        "are replaced from the record's metadata. A record without table metadata goes to \"records\". Tables are "
        "created on first use with the record key as PRIMARY KEY and column types from the values (int64 bigint, "
        "uint64 numeric(20,0), float64 double precision, decimal numeric, string text, bytes bytea, json, objects and "
        "mixed arrays jsonb, homogeneous arrays the element type's array, ...); missing columns are added. Existing "
        "tables keep their column types: values are sent as text and cast by PostgreSQL.")
        .with_default("{{table}}"),
    setting<&PostgresDestinationOptions::schema>(
        "schema",
        "Schema of the tables: a template like `table` (e.g. {{schema}} keeps the source's schema); created if "
        "missing.")
        .with_default("public"),
    setting<&PostgresDestinationOptions::keep_dropped_columns>(
        "schema.keep_dropped_columns",
        "What a dropped source column does at the destination (a schema record drop_column): false drops the column too; true keeps it with its values (rows written later read NULL in it, and a column re-added under its name is backfilled with NULL or the source default, never the old values). docs/schema-changes.md.")
        .with_default("false"),
    setting<&PostgresDestinationOptions::reconcile>(
        "snapshot.reconcile",
        "What a re-snapshot of a table (between the markers snapshot_begin and snapshot_end) does to rows the snapshot did not see. sweep: the keys written meanwhile are kept in a side table sluice_sweep_<table>, and at snapshot_end the rows with any other key are deleted (off when the `table` template has no {{table}}: one destination table then holds several source tables' rows); truncate: the table is emptied at snapshot_begin (it is incomplete until the snapshot ends); none: rows stay. docs/schema-changes.md.")
        .one_of("sweep,truncate,none")
        .with_default("sweep"),
    setting<&PostgresDestinationOptions::checkpoint_in_destination>(
        "checkpoint_in_destination",
        "Store the source position in the destination, in the same transaction as each batch (table "
        "sluice_checkpoints); on restart the pipeline resumes exactly after the last batch applied, so no change is "
        "applied twice. The table is created in `schema` (in public when `schema` is a template).")
        .with_default("false"),
    setting<&PostgresDestinationOptions::query_timeout>(
        "query_timeout",
        "How long the destination waits for the server's reply to one statement (or COPY) before it "
        "takes the connection for dead (a partition, a server that stopped answering but keeps TCP "
        "open): it logs it, counts it (sluice_destination_connection_timeouts_total), drops the "
        "connection and the batch is retried on a new one. A statement that legitimately takes "
        "longer (a lock held by another session) is retried the same way: raise it then. 0: wait "
        "forever.")
        .with_default("60s")
        .at_least(0),
    setting<&PostgresDestinationOptions::tcp_user_timeout>(
        "tcp_user_timeout",
        "TCP keepalives and TCP_USER_TIMEOUT of the connection: the kernel drops a connection whose "
        "data or keepalive probes stay unacknowledged this long (a blackholed link). 0: the "
        "system's defaults. The URL's own keepalives*/tcp_user_timeout win.")
        .with_default("30s")
        .at_least(0));

// The checks no single declaration expresses; parses the templates once.
Status finalize(PostgresDestinationOptions& o) {
  if (o.url.empty())
    return Error(Errc::invalid_argument,
                 "postgres destination: `url` is empty; set the database URL");
  if (Status s = pg::apply_credentials(o.url, {o.user, o.password, o.password_file}); !s)
    return s.error().with_context("postgres destination: ");
  if (Status s = pg::apply_tls(
          o.url, {o.tls_mode.value_or(""), o.tls_ca, o.tls_cert, o.tls_key, o.tls_key_password});
      !s)
    return s.error().with_context("postgres destination: ");
  auto table = RecordTemplate::parse(o.table, "table");
  if (!table) return table.error().with_context("postgres destination: ");
  auto schema = RecordTemplate::parse(o.schema, "schema");
  if (!schema) return schema.error().with_context("postgres destination: ");
  o.table_template = std::move(table.value());
  o.schema_template = std::move(schema.value());
  if (o.checkpoint_in_destination) {
    o.checkpoint_schema = o.schema;
    if (o.checkpoint_schema.empty() || o.checkpoint_schema.find("{{") != std::string::npos)
      o.checkpoint_schema = "public";
  }
  return ok_status();
}

const PostgresDialect kDialect;

// ── values as PostgreSQL input text ─────────────────────────────────────────

enum class ColClass : uint8_t { scalar, json, array };

// YYYY-MM-DD; returns true for a year before 1 AD (the caller appends " BC").
bool append_date(std::string& o, int32_t days) {
  const temporal::CivilDate c = temporal::civil_date(days);
  const bool bc = c.year <= 0;
  fmt::format_to(std::back_inserter(o), "{:04}-{:02}-{:02}", bc ? 1 - c.year : c.year, c.month,
                 c.day);
  return bc;
}

void append_timestamp(std::string& o, int64_t micros, bool tz) {
  if (micros == std::numeric_limits<int64_t>::max()) {
    o += "infinity";
    return;
  }
  if (micros == std::numeric_limits<int64_t>::min()) {
    o += "-infinity";
    return;
  }
  const temporal::DayAndTime t = temporal::split_timestamp(micros);
  const bool bc = append_date(o, int32_t(t.days));
  o += ' ';
  temporal::append_time(o, t.micros);
  if (tz) o += "+00";
  if (bc) o += " BC";
}

// The kind's text as PostgreSQL reads it for a scalar column (arrays/objects: see below).
void append_scalar_text(std::string& o, const Value& v) {
  switch (v.kind()) {
    case ValueKind::absent:
    case ValueKind::null: break;
    case ValueKind::boolean: o += v.as_bool() ? 't' : 'f'; break;
    case ValueKind::int64: fmt::format_to(std::back_inserter(o), "{}", v.as_int64()); break;
    case ValueKind::uint64: fmt::format_to(std::back_inserter(o), "{}", v.as_uint64()); break;
    case ValueKind::float64: {
      double d = v.as_double();
      if (std::isnan(d)) o += "NaN";
      else if (std::isinf(d)) o += d > 0 ? "Infinity" : "-Infinity";
      else fmt::format_to(std::back_inserter(o), "{}", d);
      break;
    }
    case ValueKind::decimal:
    case ValueKind::string:
    case ValueKind::json: o += v.as_text(); break;
    case ValueKind::bytes: {
      static const char* hex = "0123456789abcdef";
      o += "\\x";
      for (unsigned char c : v.as_text()) {
        o += hex[c >> 4];
        o += hex[c & 15];
      }
      break;
    }
    case ValueKind::date:
      if (v.as_date() == std::numeric_limits<int32_t>::max()) o += "infinity";
      else if (v.as_date() == std::numeric_limits<int32_t>::min()) o += "-infinity";
      else if (append_date(o, v.as_date())) o += " BC";
      break;
    case ValueKind::time: o += format_time(v.as_micros()); break;
    case ValueKind::timetz: o += format_timetz(v.as_micros(), v.tz_offset_seconds()); break;
    case ValueKind::timestamp: append_timestamp(o, v.as_micros(), false); break;
    case ValueKind::timestamptz: append_timestamp(o, v.as_micros(), true); break;
    case ValueKind::interval: {
      const Interval& iv = v.as_interval();
      fmt::format_to(std::back_inserter(o), "{} months {} days {} microseconds", iv.months, iv.days,
                     iv.micros);
      break;
    }
    case ValueKind::uuid: o += format_uuid(v.uuid_bytes()); break;
    case ValueKind::array:
    case ValueKind::object: encode_value_json(v, o); break;
  }
}

// An array literal {..} with every element double-quoted (nested arrays as sub-literals).
void append_array_literal(std::string& o, const Value& v) {
  o += '{';
  bool first = true;
  for (const Value& item : v.items()) {
    if (!first) o += ',';
    first = false;
    if (item.is_null() || item.is_absent()) {
      o += "NULL";
    } else if (item.kind() == ValueKind::array) {
      append_array_literal(o, item);
    } else {
      std::string text;
      append_scalar_text(text, item);
      o += '"';
      for (char c : text) {
        if (c == '"' || c == '\\') o += '\\';
        o += c;
      }
      o += '"';
    }
  }
  o += '}';
}

// The value's text for a column of class `cls`.
void append_value_text(std::string& o, const Value& v, ColClass cls) {
  if (cls == ColClass::json) {
    if (v.kind() == ValueKind::json) o += v.as_text();
    else encode_value_json(v, o);
  } else if (cls == ColClass::array && v.kind() == ValueKind::array) {
    append_array_literal(o, v);
  } else {
    append_scalar_text(o, v);
  }
}

// COPY text format escaping of one field.
void append_copy_escaped(std::string& o, std::string_view s) {
  for (char c : s) {
    switch (c) {
      case '\\': o += "\\\\"; break;
      case '\t': o += "\\t"; break;
      case '\n': o += "\\n"; break;
      case '\r': o += "\\r"; break;
      default: o += c;
    }
  }
}

// ── the writer ─────────────────────────────────────────────────────────────

struct PgTable final : sql::SqlTable {
  PgTable() : SqlTable(/*fold=*/false) {}
  std::unordered_map<std::string, std::string> stages;  // run shape -> staging table (quoted)
};

// One transaction per batch; each run COPYed into its staging table and applied with one
// statement.
class PostgresDestination final : public sql::KeyedSqlDestination {
 public:
  // `checkpoint_schema` empty: checkpoint_in_destination is off.
  PostgresDestination(std::string url, RecordTemplate table, RecordTemplate schema,
                      std::string checkpoint_schema, bool keep_dropped_columns,
                      std::string_view reconcile, std::chrono::milliseconds query_timeout,
                      std::chrono::milliseconds tcp_user_timeout)
      : KeyedSqlDestination(
            kDialect, keyed_options(std::move(table), std::move(schema), !checkpoint_schema.empty(),
                                    keep_dropped_columns, reconcile)),
        url_(std::move(url)),
        checkpoint_schema_(std::move(checkpoint_schema)),
        net_{tcp_user_timeout},
        deadline_(query_timeout) {}

 private:
  static sql::KeyedSqlOptions keyed_options(RecordTemplate table, RecordTemplate schema,
                                            bool checkpoint, bool keep_dropped_columns,
                                            std::string_view reconcile) {
    sql::KeyedSqlOptions k;
    k.destination = "postgres destination";
    k.table = std::move(table);
    k.schema = std::move(schema);
    k.default_schema = "public";
    k.checkpoint_in_destination = checkpoint;
    k.keep_dropped_columns = keep_dropped_columns;
    (void)sql::parse_reconcile(reconcile, &k.reconcile);  // checked by the settings table
    return k;
  }

  Status connect() override {
    auto c = PgConn::connect(url_, false, net_);
    if (!c) return c.error().with_context("postgres destination: ");
    conn_ = std::move(c.value());
    PQsetNoticeProcessor(
        conn_.get(), [](void*, const char*) {}, nullptr);
    return ok_status();
  }

  bool connected() const noexcept override { return conn_.ok(); }
  void disconnect() noexcept override { conn_.reset(); }

  Status prepare_session() override {
    if (checkpoint_schema_.empty()) return ok_status();
    checkpoint_table_ = kDialect.qualified_table(checkpoint_schema_, sql::kCheckpointTable);
    if (checkpoint_schema_ != "public")
      SLUICE_TRY(exec(kDialect.create_schema(checkpoint_schema_), nullptr));
    return exec(kDialect.checkpoint_table_ddl(checkpoint_table_), nullptr);
  }

  Status begin() override {
    seq_ = 0;
    return exec("BEGIN", nullptr);
  }
  Status commit() override { return exec("COMMIT", nullptr); }
  void abort() noexcept override {
    if (conn_.ok()) {
      auto armed = deadline_.arm(conn_);
      PgResult r(PQexec(conn_.get(), "ROLLBACK"));
    }
    if (!conn_.ok()) conn_.reset();  // reconnect on the next write
  }

  std::unique_ptr<sql::SqlTable> make_table() override { return std::make_unique<PgTable>(); }

  void forget() noexcept override { new_stages_.clear(); }

  // One record of write_isolating in one round trip: SAVEPOINT, its statements with literal
  // values (E'' strings: the same text COPY would send), RELEASE — a simple query, which stops at
  // the first failing statement; then ROLLBACK TO it.
  bool writes_guarded_records() const noexcept override { return true; }
  Status write_guarded_record(size_t first, size_t end) override {
    guarded_ = "SAVEPOINT sluice_record";
    for (size_t k = first; k < end; ++k) {
      const sql::PlannedRow& row = plan().row(k);
      const sql::SqlTable& t = *row.table;
      guarded_ += "; ";
      auto literal = [&](const Value& v, std::string_view column) {
        if (v.is_null() || v.is_absent()) {
          guarded_ += "NULL";
          return;
        }
        auto it = t.columns.find(std::string(column));
        text_.clear();
        append_value_text(text_, v,
                          it == t.columns.end() ? ColClass::scalar : ColClass(it->second));
        guarded_ += "E'";
        for (char c : text_) {
          if (c == '\'' || c == '\\') guarded_ += c;
          guarded_ += c;
        }
        guarded_ += '\'';
      };
      if (row.action == sql::RowAction::remove) {
        guarded_ += "DELETE FROM " + t.quoted + " WHERE ";
        bool first_key = true;
        for (const Field& f : plan().keys(row)) {
          if (!first_key) guarded_ += " AND ";
          first_key = false;
          kDialect.append_identifier(guarded_, f.name);
          guarded_ += " = ";
          literal(f.value, f.name);
        }
        continue;
      }
      cols_.clear();
      for (const Field& f : plan().keys(row)) cols_.push_back({f.name, true});
      for (const Field& f : plan().columns(row))
        if (!plan().is_key(row, f.name)) cols_.push_back({f.name, false});
      kDialect.append_insert_head(guarded_, t.quoted, cols_);
      guarded_ += " VALUES (";
      bool first_value = true;
      for (const Field& f : plan().keys(row)) {
        if (!first_value) guarded_ += ", ";
        first_value = false;
        literal(f.value, f.name);
      }
      for (const Field& f : plan().columns(row)) {
        if (plan().is_key(row, f.name)) continue;
        guarded_ += ", ";
        literal(f.value, f.name);
      }
      guarded_ += ')';
      kDialect.append_upsert_tail(guarded_, cols_);
    }
    guarded_ += "; RELEASE SAVEPOINT sluice_record";
    auto armed = deadline_.arm(conn_);
    PgResult r(PQexec(conn_.get(), guarded_.c_str()));
    if (r && PQresultStatus(r.get()) == PGRES_COMMAND_OK) return ok_status();
    Error e = failure(r.get(), plan().row(first).table, first, first + 1);
    if (!conn_.ok() || e.code() != Errc::data) return e;
    auto armed_back = deadline_.arm(conn_);
    PgResult back(PQexec(conn_.get(),
                         "ROLLBACK TO SAVEPOINT sluice_record; RELEASE SAVEPOINT sluice_record"));
    if (!back || PQresultStatus(back.get()) != PGRES_COMMAND_OK)
      return failure(back.get(), nullptr);
    return e;
  }
  bool supports_savepoints() const noexcept override { return true; }
  Status savepoint(std::string_view sql) override {
    if (sql.starts_with("SAVEPOINT")) new_stages_.clear();
    SLUICE_TRY(exec(std::string(sql), nullptr));
    if (sql.starts_with("ROLLBACK")) {
      // Staging tables created since the savepoint are gone with it.
      for (auto& [t, shape] : new_stages_) t->stages.erase(shape);
      new_stages_.clear();
    }
    return ok_status();
  }

  Status load_columns(sql::SqlTable& t) override {
    static const std::string kSql =
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod), ty.typcategory, ty.typname "
        "FROM pg_attribute a JOIN pg_type ty ON ty.oid = a.atttypid "
        "WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped";
    const char* params[] = {t.quoted.c_str()};
    auto armed = deadline_.arm(conn_);
    PgResult r(PQexecParams(conn_.get(), kSql.c_str(), 1, nullptr, params, nullptr, nullptr, 0));
    if (!r || PQresultStatus(r.get()) != PGRES_TUPLES_OK) return failure(r.get(), &t);
    t.columns.clear();
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      ColClass cls = ColClass::scalar;
      std::string_view cat = PQgetvalue(r.get(), i, 2);
      std::string_view typname = PQgetvalue(r.get(), i, 3);
      if (typname == "json" || typname == "jsonb") cls = ColClass::json;
      else if (cat == "A") cls = ColClass::array;
      t.columns.emplace(PQgetvalue(r.get(), i, 0), uint8_t(cls));
    }
    t.exists = !t.columns.empty();
    return ok_status();
  }

  // `sluice doctor`: the privileges writing `t` needs (CREATE on its schema, or on the database
  // for a new schema; INSERT, UPDATE, DELETE on an existing table, and its ownership to add
  // columns).
  void doctor_table(sql::SqlTable& t, std::vector<DoctorCheck>& out) override {
    using O = DoctorCheck::Outcome;
    const std::string schema = t.schema.empty() ? "public" : t.schema;
    const std::string qs = quote_identifier(schema);
    if (!t.exists) {
      const std::string check = fmt::format("table {} can be created", t.quoted);
      auto r = conn_.exec_params(
          "SELECT n.oid IS NOT NULL, coalesce(has_schema_privilege(n.oid, 'CREATE'), false), "
          "has_database_privilege(current_database(), 'CREATE'), current_user "
          "FROM (SELECT 1) one LEFT JOIN pg_namespace n ON n.nspname = $1",
          {schema});
      if (!r.ok()) {
        out.push_back({O::fail, check, r.error().message(), "see the message"});
        return;
      }
      PGresult* g = r.value().get();
      const bool exists = std::string_view(PQgetvalue(g, 0, 0)) == "t";
      const bool create = std::string_view(PQgetvalue(g, 0, exists ? 1 : 2)) == "t";
      const std::string user = quote_identifier(PQgetvalue(g, 0, 3));
      if (create)
        out.push_back({O::pass,
                       check,
                       exists ? fmt::format("not created yet; CREATE on schema {}", qs)
                              : fmt::format("not created yet, nor schema {}; CREATE on the "
                                            "database",
                                            qs),
                       {}});
      else
        out.push_back({O::fail, check,
                       fmt::format("role {} lacks CREATE on {}", user,
                                   exists ? "schema " + qs : std::string("the database")),
                       exists
                           ? fmt::format("GRANT CREATE ON SCHEMA {} TO {}", qs, user)
                           : fmt::format("GRANT CREATE ON DATABASE <the database> TO {}, or create "
                                         "schema {} beforehand",
                                         user, qs)});
      return;
    }
    const std::string check = fmt::format("table {} can be written", t.quoted);
    auto r = conn_.exec_params(
        "SELECT has_table_privilege(c.oid, 'INSERT'), has_table_privilege(c.oid, 'UPDATE'), "
        "has_table_privilege(c.oid, 'DELETE'), pg_has_role(c.relowner, 'USAGE'), current_user "
        "FROM pg_class c WHERE c.oid = to_regclass($1)",
        {t.quoted});
    if (!r.ok() || PQntuples(r.value().get()) != 1) {
      out.push_back(
          {O::fail, check, r.ok() ? "not found" : r.error().message(), "see the message"});
      return;
    }
    PGresult* g = r.value().get();
    std::string missing;
    for (int i = 0; i < 3; ++i)
      if (std::string_view(PQgetvalue(g, 0, i)) != "t")
        missing += std::string(missing.empty() ? "" : ", ") + (i == 0   ? "INSERT"
                                                               : i == 1 ? "UPDATE"
                                                                        : "DELETE");
    const std::string user = quote_identifier(PQgetvalue(g, 0, 4));
    if (!missing.empty())
      out.push_back({O::fail, check, fmt::format("role {} lacks {} on it", user, missing),
                     fmt::format("GRANT INSERT, UPDATE, DELETE ON {} TO {}", t.quoted, user)});
    else if (std::string_view(PQgetvalue(g, 0, 3)) != "t")
      out.push_back({O::warn, check,
                     fmt::format("role {} may write it but does not own it: a new source column "
                                 "(ALTER TABLE ... ADD COLUMN) would fail",
                                 user),
                     fmt::format("ALTER TABLE {} OWNER TO {}", t.quoted, user)});
    else out.push_back({O::pass, check, "INSERT, UPDATE, DELETE; owner", {}});
  }

  Result<std::vector<std::pair<std::string, std::string>>> column_types(sql::SqlTable& t) override {
    SLUICE_TRY_ASSIGN(
        PgResult r,
        conn_.exec_params("SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM "
                          "pg_attribute a WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 "
                          "AND NOT a.attisdropped ORDER BY a.attnum",
                          {t.quoted}));
    std::vector<std::pair<std::string, std::string>> out;
    for (int i = 0; i < PQntuples(r.get()); ++i)
      out.emplace_back(PQgetvalue(r.get(), i, 0), PQgetvalue(r.get(), i, 1));
    return out;
  }

  Status load_key_columns(sql::SqlTable& t, std::vector<std::string>& out) override {
    static const std::string kSql =
        "SELECT a.attname FROM pg_index i JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, n) "
        "ON true JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum "
        "WHERE i.indrelid = to_regclass($1) AND i.indisprimary ORDER BY k.n";
    const char* params[] = {t.quoted.c_str()};
    auto armed = deadline_.arm(conn_);
    PgResult r(PQexecParams(conn_.get(), kSql.c_str(), 1, nullptr, params, nullptr, nullptr, 0));
    if (!r || PQresultStatus(r.get()) != PGRES_TUPLES_OK) return failure(r.get(), &t);
    out.clear();
    for (int i = 0; i < PQntuples(r.get()); ++i) out.emplace_back(PQgetvalue(r.get(), i, 0));
    return ok_status();
  }

  Result<bool> table_has_rows(sql::SqlTable& t) override {
    const std::string sql = "SELECT 1 FROM " + t.quoted + " LIMIT 1";
    PgResult r(PQexec(conn_.get(), sql.c_str()));
    if (!r || PQresultStatus(r.get()) != PGRES_TUPLES_OK) return failure(r.get(), &t);
    return PQntuples(r.get()) > 0;
  }

  // Staging tables are shaped like the table's columns as they were.
  void forget_table(sql::SqlTable& t) noexcept override { static_cast<PgTable&>(t).stages.clear(); }

  Status before_create_table(sql::SqlTable& t, const Record&) override {
    if (t.schema == "public") return ok_status();
    return exec(kDialect.create_schema(t.schema), &t);
  }

  Status ddl(const std::string& sql, sql::SqlTable& t, const Record&, std::string_view,
             bool) override {
    return exec(sql, &t);
  }

  Status write_run(size_t first, size_t end) override {
    const sql::PlannedRow& head = plan().row(first);
    PgTable& t = static_cast<PgTable&>(*head.table);
    if (head.action == sql::RowAction::truncate) return exec(kDialect.truncate(t.quoted), &t);
    const bool is_delete = head.action == sql::RowAction::remove;

    // The run's columns: the key columns (named as the key names them), then the others.
    cols_.clear();
    value_at_.clear();
    auto keys = plan().keys(head);
    for (size_t k = 0; k < keys.size(); ++k) {
      cols_.push_back({keys[k].name, true});
      value_at_.push_back(-1 - int(k));
    }
    if (!is_delete) {
      auto cols = plan().columns(head);
      for (size_t c = 0; c < cols.size(); ++c) {
        if (plan().is_key(head, cols[c].name)) continue;
        cols_.push_back({cols[c].name, false});
        value_at_.push_back(int(c));
      }
    } else {
      for (const auto& c : cols_)
        if (!t.has_column(c.name))
          return record_error(t, *head.record, Errc::data,
                              fmt::format("the table has no key column \"{}\"", c.name));
    }

    // Staging table for this shape (kept for the session; ON COMMIT DELETE ROWS empties it).
    shape_buf_ = is_delete ? "d" : "u";
    for (const auto& c : cols_) {
      shape_buf_ += '\0';
      shape_buf_ += c.name;
    }
    auto st = t.stages.find(shape_buf_);
    if (st == t.stages.end()) {
      std::string stage =
          kDialect.quote_identifier(fmt::format("sluice_stage_{}", ++stage_counter_));
      SLUICE_TRY(exec(kDialect.create_stage(stage, t.quoted, cols_), &t));
      st = t.stages.emplace(shape_buf_, stage).first;
      new_stages_.emplace_back(&t, shape_buf_);
    }
    const std::string& stage = st->second;
    const int64_t first_seq = seq_;

    col_class_.clear();
    for (const auto& c : cols_) {
      auto it = t.columns.find(c.name);
      col_class_.push_back(it == t.columns.end() ? ColClass::scalar : ColClass(it->second));
    }
    SLUICE_TRY(copy_in(kDialect.copy_into_stage(stage, cols_), t, first, end));
    return exec(is_delete ? kDialect.delete_using_stage(t.quoted, stage, cols_, first_seq)
                          : kDialect.upsert_from_stage(t.quoted, stage, cols_, first_seq),
                &t, first, end);
  }

  Status copy_in(const std::string& sql, const PgTable& t, size_t first, size_t end) {
    // Re-armed at each megabyte sent: the deadline bounds a wait for the server, not the COPY.
    auto armed = deadline_.arm(conn_);
    PgResult r(PQexec(conn_.get(), sql.c_str()));
    if (!r || PQresultStatus(r.get()) != PGRES_COPY_IN) return failure(r.get(), &t);
    r.reset();
    buf_.clear();
    bool send_failed = false;
    for (size_t row = first; row < end; ++row) {
      const sql::PlannedRow& p = plan().row(row);
      auto keys = plan().keys(p);
      auto cols = plan().columns(p);
      fmt::format_to(std::back_inserter(buf_), "{}", seq_++);
      for (size_t c = 0; c < cols_.size(); ++c) {
        buf_ += '\t';
        const int at = value_at_[c];
        const Value& v = at < 0 ? keys[size_t(-1 - at)].value : cols[size_t(at)].value;
        if (v.is_null() || v.is_absent()) {
          buf_ += "\\N";
          continue;
        }
        text_.clear();
        append_value_text(text_, v, col_class_[c]);
        append_copy_escaped(buf_, text_);
      }
      buf_ += '\n';
      if (buf_.size() >= (1u << 20)) {
        deadline_.extend();
        if (PQputCopyData(conn_.get(), buf_.data(), int(buf_.size())) != 1) {
          send_failed = true;
          break;
        }
        buf_.clear();
      }
    }
    if (!send_failed && !buf_.empty() &&
        PQputCopyData(conn_.get(), buf_.data(), int(buf_.size())) != 1)
      send_failed = true;
    deadline_.extend();
    if (PQputCopyEnd(conn_.get(), send_failed ? "send failed" : nullptr) != 1 && !conn_.ok())
      return lost_connection("connection lost during COPY: " + conn_.last_error());
    Status result = ok_status();
    bool have = false;
    while (PGresult* raw = PQgetResult(conn_.get())) {
      PgResult res(raw);
      if (have) continue;
      if (PQresultStatus(raw) != PGRES_COMMAND_OK) {
        result = failure(raw, &t, first, end);
        have = true;
      }
    }
    if (result.ok() && send_failed)
      return lost_connection("connection lost during COPY: " + conn_.last_error());
    return result;
  }

  Status save_position(std::string_view position) override {
    const std::string sql = kDialect.checkpoint_upsert(checkpoint_table_, "$1", "$2");
    const Oid types[] = {25 /* text */, 17 /* bytea */};
    const char* values[] = {pipeline_id_.c_str(), position.data()};
    const int lengths[] = {0, int(position.size())};
    const int formats[] = {0, 1};
    auto armed = deadline_.arm(conn_);
    PgResult r(PQexecParams(conn_.get(), sql.c_str(), 2, types, values, lengths, formats, 0));
    if (r && PQresultStatus(r.get()) == PGRES_COMMAND_OK) return ok_status();
    return failure(r.get(), nullptr);
  }

  Result<std::optional<std::string>> load_position(std::string_view pipeline_id) override {
    const std::string sql = kDialect.checkpoint_select(checkpoint_table_, "$1");
    const std::string id(pipeline_id);
    const char* params[] = {id.c_str()};
    auto armed = deadline_.arm(conn_);
    PgResult r(
        PQexecParams(conn_.get(), sql.c_str(), 1, nullptr, params, nullptr, nullptr, /*binary*/ 1));
    if (!r || PQresultStatus(r.get()) != PGRES_TUPLES_OK) return failure(r.get(), nullptr);
    if (PQntuples(r.get()) == 0) return std::optional<std::string>();
    return std::optional<std::string>(
        std::string(PQgetvalue(r.get(), 0, 0), size_t(PQgetlength(r.get(), 0, 0))));
  }

  Status erase_position(std::string_view pipeline_id) override {
    const std::string sql = kDialect.checkpoint_delete(checkpoint_table_, "$1");
    const std::string id(pipeline_id);
    const char* params[] = {id.c_str()};
    auto armed = deadline_.arm(conn_);
    PgResult r(PQexecParams(conn_.get(), sql.c_str(), 1, nullptr, params, nullptr, nullptr, 0));
    if (r && PQresultStatus(r.get()) == PGRES_COMMAND_OK) return ok_status();
    return failure(r.get(), nullptr);
  }

  // `first`..`end`: the plan rows the statement wrote (to name the failing record).
  Status exec(const std::string& sql, const sql::SqlTable* t, size_t first = 0, size_t end = 0) {
    auto armed = deadline_.arm(conn_);
    PgResult r(PQexec(conn_.get(), sql.c_str()));
    if (r &&
        (PQresultStatus(r.get()) == PGRES_COMMAND_OK || PQresultStatus(r.get()) == PGRES_TUPLES_OK))
      return ok_status();
    return failure(r.get(), t, first, end);
  }

  // A failed statement as an Error: transient server states and a lost connection are retriable;
  // data errors name the table and the record's key.
  Error failure(PGresult* r, const sql::SqlTable* t, size_t first = 0, size_t end = 0) {
    std::string msg = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY)
                              ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY)
                              : PQresultErrorMessage(r)
                        : conn_.last_error();
    if (msg.empty()) msg = conn_.last_error();
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    for (char& c : msg)
      if (c == '\n') c = ' ';
    const char* state_c = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
    std::string_view state = state_c ? state_c : "";
    const std::string where = t ? fmt::format("table {}: ", t->quoted) : std::string();
    const sql::ErrorClass c = PostgresDialect::classify(state, conn_.ok());
    if (!conn_.ok()) return lost_connection(fmt::format("{}connection lost: {}", where, msg));
    if (c.retriable)
      return Error(
          c.code,
          fmt::format("postgres destination: {}{} (SQLSTATE {}; retrying)", where, msg, state),
          true);
    if (c.code == Errc::data && t) {
      const char* detail = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_DETAIL) : nullptr;
      std::string what = msg;
      if (detail && *detail) what += fmt::format(" ({})", detail);
      if (state == "42P10")
        what +=
            "; the table's PRIMARY KEY (or a UNIQUE index) must be exactly the record key columns";
      what += fmt::format(" [SQLSTATE {}]", state);
      const Record* rec = nullptr;
      if (end > first) {
        rec = plan().row(first).record;
        // COPY errors say which line (= row of the run) failed.
        const char* ctx = PQresultErrorField(r, PG_DIAG_CONTEXT);
        if (ctx) {
          if (const char* p = std::strstr(ctx, ", line ")) {
            size_t line = size_t(std::strtoull(p + 7, nullptr, 10));
            if (line >= 1 && line <= end - first) rec = plan().row(first + line - 1).record;
          }
        }
        if (end - first > 1 && !(ctx && std::strstr(ctx, ", line ")))
          what +=
              fmt::format(" (one of {} records of this statement, the first shown)", end - first);
      }
      if (rec) return record_error(*t, *rec, Errc::data, what);
      return Error(Errc::data, fmt::format("postgres destination: {}{}", where, what));
    }
    Error e = pg::classify_error(msg, "");
    return Error(e.code(),
                 fmt::format("postgres destination: {}{}{}", where, e.message(),
                             state.empty() ? "" : fmt::format(" [SQLSTATE {}]", state)),
                 e.retriable());
  }

  // A lost connection; when the deadline cut it, says so and counts it as a timeout.
  Error lost_connection(const std::string& what) {
    if (deadline_.fired()) {
      connection_timed_out();
      return Error(Errc::connection,
                   fmt::format("postgres destination: no reply from {} within query_timeout ({} "
                               "ms): taking the connection for dead and reconnecting",
                               pg::describe_target(url_), deadline_.timeout().count()),
                   true);
    }
    return Error(Errc::connection, "postgres destination: " + what, true);
  }

  std::string url_;
  std::string checkpoint_schema_, checkpoint_table_;
  pg::PgNetOptions net_;
  pg::PgCallDeadline deadline_;  // before conn_: outlives every call on it
  PgConn conn_;
  uint64_t stage_counter_ = 0;
  int64_t seq_ = 0;
  // Working memory reused across runs.
  std::vector<sql::ColumnRef> cols_;
  std::vector<int>
      value_at_;  // per run column: -1-k for key k, else the index in the row's columns
  std::vector<ColClass> col_class_;
  std::string shape_buf_, buf_, text_, guarded_;
  // Staging tables created since the last SAVEPOINT (write_isolating), forgotten on ROLLBACK TO.
  std::vector<std::pair<PgTable*, std::string>> new_stages_;
};

}  // namespace

constinit const std::span<const SettingSpec> kPostgresDestinationSettings = kDestinationSettings;

Result<std::unique_ptr<Destination>> make_postgres_destination(const Settings& settings) {
  SLUICE_TRY_ASSIGN(PostgresDestinationOptions o, bind_settings(kDestinationSettings, settings));
  SLUICE_TRY(finalize(o));
  return std::unique_ptr<Destination>(std::make_unique<PostgresDestination>(
      std::move(o.url), std::move(*o.table_template), std::move(*o.schema_template),
      std::move(o.checkpoint_schema), o.keep_dropped_columns, o.reconcile, o.query_timeout,
      o.tcp_user_timeout));
}

}  // namespace sluice
