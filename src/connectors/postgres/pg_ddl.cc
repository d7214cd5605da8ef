// Schema changes of the postgres source, turned into schema records (sluice/schema_change.h).
//
// pgoutput carries no DDL: a Relation message only says what a table looks like now. Two ways in:
//
//   ddl.capture: true                                   ddl.capture: false (default)
//   ─────────────────                                   ───────────────────────────
//   ALTER TABLE t …  (the user's transaction)           Relation(t) before t's next change
//     └▶ event trigger sluice_ddl_command_end             └▶ diff with the previous Relation
//        sluice.ddl_state (columns before) ─┐                of t (after a restart: the shape
//        pg_attribute (columns after) ──────┼▶ INSERT        stored beside the checkpoint):
//                                           │                appended names → add_column
//        sluice.ddl_log (in the publication)┘                vanished names → drop_column
//   WAL: rows before ▸ ddl_log insert ▸ rows after           same name, wider → alter_column_type
//     └▶ the source diffs by attnum: rename_column,          anything it cannot tell apart
//        drop_column, add_column (+ default from             (rename vs drop+add, a default
//        attmissingval), alter_column_type;                  old rows read) → stop, naming
//        values rewritten (volatile default, USING,          `ddl.capture: true`
//        a non-widening type) → the table is read again
//        by an incremental snapshot; a table rename → stop
// Never a guess: what neither way can map exactly stops the pipeline with an error naming the
// table, the column and the recovery.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <deque>
#include <map>

#include "connectors/postgres/postgres_source_driver.h"

namespace sluice::pg {

namespace {

constexpr int32_t kVarHeader = 4;  // typmods of varchar/numeric carry a 4-byte header

// numeric's typmod: ((precision << 16) | scale) + 4; -1 = unconstrained.
std::pair<int32_t, int32_t> numeric_precision_scale(int32_t mod) {
  const int32_t m = mod - kVarHeader;
  return {(m >> 16) & 0xffff, m & 0xffff};
}

bool integer_oid(uint32_t o) { return o == oid::kInt2 || o == oid::kInt4 || o == oid::kInt8; }
int integer_rank(uint32_t o) { return o == oid::kInt2 ? 2 : o == oid::kInt4 ? 4 : 8; }

constexpr const char* kInstallSql = R"sql(
SELECT pg_advisory_xact_lock(hashtext('sluice.ddl_capture'));
CREATE SCHEMA IF NOT EXISTS sluice;
CREATE TABLE IF NOT EXISTS sluice.ddl_state (
  relid oid PRIMARY KEY, schema_name text NOT NULL, table_name text NOT NULL,
  attnum int2[] NOT NULL, name text[] NOT NULL, typid oid[] NOT NULL, typmod int4[] NOT NULL,
  type text[] NOT NULL);
CREATE TABLE IF NOT EXISTS sluice.ddl_log (
  id bigserial PRIMARY KEY, relid oid NOT NULL, schema_name text NOT NULL, table_name text NOT NULL,
  command text NOT NULL, logged_at timestamptz NOT NULL DEFAULT now(),
  before_attnum int2[] NOT NULL, before_name text[] NOT NULL, before_typid oid[] NOT NULL,
  before_typmod int4[] NOT NULL, before_type text[] NOT NULL,
  after_attnum int2[] NOT NULL, after_name text[] NOT NULL, after_typid oid[] NOT NULL,
  after_typmod int4[] NOT NULL, after_type text[] NOT NULL, after_hasdef bool[] NOT NULL,
  after_hasmissing bool[] NOT NULL, after_missing text[] NOT NULL, after_default text[] NOT NULL);
ALTER TABLE sluice.ddl_log ADD COLUMN IF NOT EXISTS before_schema_name text,
  ADD COLUMN IF NOT EXISTS before_table_name text, ADD COLUMN IF NOT EXISTS has_using bool;
CREATE OR REPLACE FUNCTION sluice.ddl_columns(rel oid, OUT attnum int2[], OUT name text[],
    OUT typid oid[], OUT typmod int4[], OUT type text[], OUT hasdef bool[], OUT hasmissing bool[],
    OUT missing text[], OUT dflt text[])
  LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $f$
  SELECT coalesce(array_agg(a.attnum ORDER BY a.attnum), '{}'),
         coalesce(array_agg(a.attname::text ORDER BY a.attnum), '{}'),
         coalesce(array_agg(a.atttypid ORDER BY a.attnum), '{}'),
         coalesce(array_agg(a.atttypmod ORDER BY a.attnum), '{}'),
         coalesce(array_agg(format_type(a.atttypid, a.atttypmod) ORDER BY a.attnum), '{}'),
         coalesce(array_agg(a.atthasdef OR a.attidentity <> '' ORDER BY a.attnum), '{}'),
         coalesce(array_agg(a.atthasmissing ORDER BY a.attnum), '{}'),
         coalesce(array_agg((a.attmissingval::text::text[])[1] ORDER BY a.attnum), '{}'),
         coalesce(array_agg(coalesce(pg_get_expr(d.adbin, d.adrelid),
                                     CASE WHEN a.attidentity <> '' THEN 'an identity' END)
                            ORDER BY a.attnum), '{}')
  FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
  WHERE a.attrelid = rel AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
$f$;
CREATE OR REPLACE FUNCTION sluice.on_ddl_command_end() RETURNS event_trigger
  LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE
  r record; st sluice.ddl_state; c record; nsp text; rel text;
BEGIN
  FOR r IN SELECT DISTINCT e.objid, e.command_tag FROM pg_event_trigger_ddl_commands() e
           WHERE e.classid = 'pg_class'::regclass
             AND e.object_type IN ('table', 'table column') LOOP
    SELECT * INTO st FROM sluice.ddl_state s WHERE s.relid = r.objid;
    CONTINUE WHEN NOT FOUND;
    SELECT n.nspname, cl.relname INTO nsp, rel
      FROM pg_class cl JOIN pg_namespace n ON n.oid = cl.relnamespace WHERE cl.oid = r.objid;
    SELECT * INTO c FROM sluice.ddl_columns(r.objid);
    IF c.attnum IS DISTINCT FROM st.attnum OR c.name IS DISTINCT FROM st.name
       OR c.typid IS DISTINCT FROM st.typid OR c.typmod IS DISTINCT FROM st.typmod
       OR nsp IS DISTINCT FROM st.schema_name OR rel IS DISTINCT FROM st.table_name THEN
      INSERT INTO sluice.ddl_log (relid, schema_name, table_name, command, before_attnum,
          before_name, before_typid, before_typmod, before_type, after_attnum, after_name,
          after_typid, after_typmod, after_type, after_hasdef, after_hasmissing, after_missing,
          after_default, before_schema_name, before_table_name, has_using)
        VALUES (r.objid, nsp, rel, r.command_tag, st.attnum, st.name, st.typid, st.typmod,
          st.type, c.attnum, c.name, c.typid, c.typmod, c.type, c.hasdef, c.hasmissing,
          c.missing, c.dflt, st.schema_name, st.table_name,
          current_query() ~* '\mUSING\M');
    END IF;
    UPDATE sluice.ddl_state s SET schema_name = nsp, table_name = rel, attnum = c.attnum,
        name = c.name, typid = c.typid, typmod = c.typmod, type = c.type
      WHERE s.relid = r.objid;
  END LOOP;
END $f$;
CREATE OR REPLACE FUNCTION sluice.on_sql_drop() RETURNS event_trigger
  LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
  DELETE FROM sluice.ddl_state s USING pg_event_trigger_dropped_objects() d
    WHERE d.classid = 'pg_class'::regclass AND d.object_type = 'table' AND s.relid = d.objid;
END $f$;
DO $d$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_event_trigger WHERE evtname = 'sluice_ddl_command_end') THEN
    CREATE EVENT TRIGGER sluice_ddl_command_end ON ddl_command_end WHEN TAG IN ('ALTER TABLE')
      EXECUTE FUNCTION sluice.on_ddl_command_end();
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_event_trigger WHERE evtname = 'sluice_sql_drop') THEN
    CREATE EVENT TRIGGER sluice_sql_drop ON sql_drop EXECUTE FUNCTION sluice.on_sql_drop();
  END IF;
END $d$;
)sql";

// The elements of an array value (absent or not an array: none).
std::vector<Value> elements(const Value* v) {
  std::vector<Value> out;
  if (v && v->kind() == ValueKind::array)
    for (const Value& e : v->items()) out.push_back(e);
  return out;
}
std::string text_of(const Value& v) {
  return v.kind() == ValueKind::string ? std::string(v.as_text()) : std::string();
}

}  // namespace

std::string_view ddl_capture_install_sql() { return kInstallSql; }

bool is_widening(uint32_t from_oid, int32_t from_mod, uint32_t to_oid, int32_t to_mod) {
  if (from_oid == to_oid && from_mod == to_mod) return true;
  if (integer_oid(from_oid) && integer_oid(to_oid))
    return integer_rank(to_oid) >= integer_rank(from_oid);
  if (integer_oid(from_oid) && to_oid == oid::kNumeric) {
    if (to_mod < 0) return true;
    const auto [p, s] = numeric_precision_scale(to_mod);
    return p - s >= (from_oid == oid::kInt2 ? 5 : from_oid == oid::kInt4 ? 10 : 19);
  }
  if (from_oid == oid::kFloat4 && to_oid == oid::kFloat8) return true;
  const bool from_text = from_oid == oid::kVarchar || from_oid == oid::kText;
  if (from_text && to_oid == oid::kText) return true;
  if (from_text && to_oid == oid::kVarchar) {
    if (to_mod < 0) return true;
    return from_oid == oid::kVarchar && from_mod >= 0 && to_mod >= from_mod;
  }
  if (from_oid == oid::kNumeric && to_oid == oid::kNumeric) {
    if (to_mod < 0) return true;
    if (from_mod < 0) return false;
    const auto [p, s] = numeric_precision_scale(from_mod);
    const auto [p2, s2] = numeric_precision_scale(to_mod);
    return s2 == s && p2 >= p;
  }
  const bool temporal = from_oid == oid::kTimestamp || from_oid == oid::kTimestamptz ||
                        from_oid == oid::kTime || from_oid == oid::kTimetz;
  if (temporal && to_oid == from_oid)  // fractional-second precision; -1 is the maximum (6)
    return to_mod < 0 || (from_mod >= 0 && to_mod >= from_mod);
  return false;
}

void PostgresDriver::emit_schema(Batch& batch, std::string_view schema, std::string_view table,
                                 const SchemaChange& c, Lsn lsn) {
  Record& r = batch.add();
  r.position = batch.copy(lsn.to_string());
  ObjectBuilder m = batch.object(6);
  m.add(meta::kSchema, Value::string(batch.copy(schema)));
  m.add(meta::kTable, Value::string(batch.copy(table)));
  const auto* tx = st_->caches.tx_metadata();
  if (!tx)
    tx = &st_->caches.set_tx_metadata({batch.copy(tx_final_.to_string()),
                                       batch.copy(format_timestamptz(tx_commit_time_)),
                                       batch.copy(std::to_string(tx_xid_)),
                                       {}});
  m.add("lsn", Value::string(r.position));
  m.add("commit_lsn", Value::string((*tx)[0]));
  m.add("commit_time", Value::string((*tx)[1]));
  m.add("xid", Value::string((*tx)[2]));
  r.metadata = m.build();
  set_schema_change(batch, r, c);
}

// ── ddl.capture: install, track, uninstall ──────────────────────────────────

Status PostgresDriver::install_ddl_capture() {
  auto role = conn_.exec(
      "SELECT current_user, rolsuper, EXISTS (SELECT 1 FROM pg_event_trigger WHERE evtname = "
      "'sluice_ddl_command_end') AND EXISTS (SELECT 1 FROM pg_event_trigger WHERE evtname = "
      "'sluice_sql_drop') AND to_regclass('sluice.ddl_log') IS NOT NULL AND "
      "to_regclass('sluice.ddl_state') IS NOT NULL FROM pg_roles WHERE rolname = current_user");
  if (!role.ok()) return std::move(role).error();
  PGresult* res = role.value().get();
  const bool super = PQntuples(res) == 1 && std::string_view(PQgetvalue(res, 0, 1)) == "t";
  const bool installed = PQntuples(res) == 1 && std::string_view(PQgetvalue(res, 0, 2)) == "t";
  if (super) {
    if (auto r = conn_.exec(std::string("BEGIN; SET LOCAL client_min_messages = warning;") +
                                kInstallSql + "COMMIT;",
                            PGRES_COMMAND_OK);
        !r.ok()) {
      (void)conn_.exec("ROLLBACK", PGRES_COMMAND_OK);
      return r.error().with_context(
          "ddl.capture: cannot install the DDL capture in schema sluice: ");
    }
  } else if (!installed) {
    const std::string user = PQntuples(res) == 1 ? PQgetvalue(res, 0, 0) : "?";
    return Error(Errc::permission,
                 fmt::format("ddl.capture: role {} cannot create event triggers (PostgreSQL needs "
                             "a superuser): have a superuser run the installation SQL of "
                             "docs/schema-changes.md once, or set ddl.capture: false",
                             quote_identifier(user)));
  }
  auto oids =
      conn_.exec("SELECT 'sluice.ddl_log'::regclass::oid, 'sluice.ddl_state'::regclass::oid");
  if (!oids.ok()) return std::move(oids).error();
  ddl_log_oid_ = uint32_t(std::stoul(PQgetvalue(oids.value().get(), 0, 0)));
  ddl_state_oid_ = uint32_t(std::stoul(PQgetvalue(oids.value().get(), 0, 1)));
  return track_ddl_tables();
}

// Each captured table's columns as of now, unless the trigger already tracks it (then its state
// is the one the log's next row diffs against, DDL while sluice was away included).
Status PostgresDriver::track_ddl_tables() {
  for (const TableRef& t : tables_) {
    auto r = conn_.exec_params(
        "INSERT INTO sluice.ddl_state SELECT $1::oid, $2, $3, c.attnum, c.name, c.typid, "
        "c.typmod, c.type FROM sluice.ddl_columns($1::oid) c ON CONFLICT (relid) DO NOTHING",
        {std::to_string(t.oid), t.schema, t.name}, PGRES_COMMAND_OK);
    if (!r.ok())
      return r.error().with_context(
          fmt::format("ddl.capture: cannot record the columns of {}.{} in sluice.ddl_state: ",
                      quote_identifier(t.schema), quote_identifier(t.name)));
  }
  return ok_status();
}

// Removes what install_ddl_capture() created, unless another publication still carries the log
// (another pipeline on this database captures DDL too).
Status PostgresDriver::uninstall_ddl_capture() {
  auto users = conn_.exec_params(
      "SELECT string_agg(pubname, ', ') FROM pg_publication_tables WHERE schemaname = 'sluice' "
      "AND tablename = 'ddl_log' AND pubname <> $1",
      {publication_});
  if (!users.ok()) return std::move(users).error();
  if (!PQgetisnull(users.value().get(), 0, 0)) {
    spdlog::info(
        "kept the DDL capture (schema sluice): publication(s) {} still carry sluice.ddl_log",
        PQgetvalue(users.value().get(), 0, 0));
    if (!tables_.empty() || !tables_setting_.empty()) {
      // Forget this pipeline's tables only when no other publication captures them.
      (void)conn_.exec_params(
          "DELETE FROM sluice.ddl_state s WHERE NOT EXISTS (SELECT 1 FROM pg_publication_tables p "
          "JOIN pg_class c ON c.relname = p.tablename JOIN pg_namespace n ON n.oid = c.relnamespace "
          "AND n.nspname = p.schemaname WHERE c.oid = s.relid AND p.pubname <> $1)",
          {publication_}, PGRES_COMMAND_OK);
    }
    return ok_status();
  }
  auto d = conn_.exec(
      "SET client_min_messages = warning; DROP EVENT TRIGGER IF EXISTS sluice_ddl_command_end; "
      "DROP EVENT TRIGGER IF EXISTS "
      "sluice_sql_drop; DROP SCHEMA IF EXISTS sluice CASCADE",
      PGRES_COMMAND_OK);
  if (!d.ok())
    return d.error().with_context(
        "cannot remove the DDL capture (have a superuser run: DROP EVENT TRIGGER "
        "sluice_ddl_command_end; DROP EVENT TRIGGER sluice_sql_drop; DROP SCHEMA sluice "
        "CASCADE): ");
  spdlog::info(
      "removed the DDL capture (event triggers sluice_ddl_command_end, sluice_sql_drop; "
      "schema sluice)");
  return ok_status();
}

// ── ddl.capture: one sluice.ddl_log row → schema records ────────────────────

Status PostgresDriver::emit_ddl_log(Batch& batch, TableState& log, const Tuple& tuple, Lsn lsn) {
  Value row;
  SLUICE_TRY(tuple_to_object(batch, log, tuple, false, &row));
  auto field = [&](std::string_view name) { return row.find(name); };
  const Value* relid = field("relid");
  if (!relid || relid->kind() != ValueKind::int64)
    return Error(Errc::data, "sluice.ddl_log row without relid");
  const uint32_t oid = uint32_t(relid->as_int64());
  if (!all_tables_ &&
      std::none_of(tables_.begin(), tables_.end(), [&](const TableRef& t) { return t.oid == oid; }))
    return ok_status();  // another pipeline's table
  const Value* schema_v = field("schema_name");
  const Value* table_v = field("table_name");
  if (!schema_v || !table_v)
    return Error(Errc::data, "sluice.ddl_log row without its table's name");
  const std::string schema = text_of(*schema_v);
  const std::string table = text_of(*table_v);
  const std::string qualified = quote_identifier(schema) + "." + quote_identifier(table);
  // A table renamed (or moved to another schema): the rows after it arrive under a name the
  // destination does not know, while the old table would go stale — stop instead.
  const Value* before_schema_v = field("before_schema_name");
  const Value* before_table_v = field("before_table_name");
  if (before_schema_v && before_table_v && before_schema_v->kind() == ValueKind::string &&
      before_table_v->kind() == ValueKind::string &&
      (text_of(*before_schema_v) != schema || text_of(*before_table_v) != table))
    return Error(
        Errc::unsupported,
        fmt::format("{}.{} was renamed to {}: sluice does not follow table renames (the rows "
                    "after it would go to a new table while the old one goes stale): name the "
                    "new table in `tables`, then run `sluice cleanup` and start again to "
                    "re-snapshot",
                    quote_identifier(text_of(*before_schema_v)),
                    quote_identifier(text_of(*before_table_v)), qualified));
  // The statement's text held USING (ALTER COLUMN … TYPE … USING expr): the values may have been
  // rewritten. A false positive (USING elsewhere in the text) only costs a re-read.
  const Value* using_v = field("has_using");
  const bool has_using = using_v && using_v->kind() == ValueKind::boolean && using_v->as_bool();
  bool rewrite = false;  // old rows now read values the WAL never carried
  std::string rewrite_why;

  struct Col {
    int64_t attnum = 0;
    std::string name, type, default_expr;
    uint32_t type_oid = 0;
    int32_t type_mod = -1;
    bool has_default = false, has_missing = false;
    std::optional<std::string> missing;
  };
  auto columns = [&](std::string_view side, bool after) {
    const std::string p(side);
    auto attnum = elements(field(p + "_attnum"));
    auto name = elements(field(p + "_name"));
    auto typid = elements(field(p + "_typid"));
    auto typmod = elements(field(p + "_typmod"));
    auto type = elements(field(p + "_type"));
    std::vector<Value> hasdef, hasmissing, missing, dflt;
    if (after) {
      hasdef = elements(field("after_hasdef"));
      hasmissing = elements(field("after_hasmissing"));
      missing = elements(field("after_missing"));
      dflt = elements(field("after_default"));
    }
    std::map<int64_t, Col> out;
    for (size_t i = 0; i < attnum.size() && i < name.size() && i < typid.size() &&
                       i < typmod.size() && i < type.size();
         ++i) {
      Col c;
      c.attnum = attnum[i].as_int64();
      c.name = text_of(name[i]);
      c.type_oid = uint32_t(typid[i].as_int64());
      c.type_mod = int32_t(typmod[i].as_int64());
      c.type = text_of(type[i]);
      if (after && i < hasdef.size() && i < hasmissing.size() && i < missing.size() &&
          i < dflt.size()) {
        c.has_default = hasdef[i].kind() == ValueKind::boolean && hasdef[i].as_bool();
        c.has_missing = hasmissing[i].kind() == ValueKind::boolean && hasmissing[i].as_bool();
        if (missing[i].kind() == ValueKind::string) c.missing = text_of(missing[i]);
        c.default_expr = text_of(dflt[i]);
      }
      out.emplace(c.attnum, std::move(c));
    }
    return out;
  };
  const auto before = columns("before", false);
  const auto after = columns("after", true);

  // Check everything first: a change that stops the pipeline emits nothing of its statement.
  std::vector<SchemaChange> changes;
  std::deque<std::string> keep;  // storage for the changes' views (stable references)
  auto hold = [&](std::string s) -> std::string_view { return keep.emplace_back(std::move(s)); };
  for (const auto& [attnum, b] : before)
    if (!after.count(attnum)) {
      SchemaChange c;
      c.kind = SchemaChangeKind::drop_column;
      c.column = hold(b.name);
      changes.push_back(c);
    }
  for (const auto& [attnum, b] : before) {
    auto it = after.find(attnum);
    if (it == after.end() || it->second.name == b.name) continue;
    SchemaChange c;
    c.kind = SchemaChangeKind::rename_column;
    c.column = hold(b.name);
    c.to = hold(it->second.name);
    changes.push_back(c);
  }
  std::vector<std::string> keys;  // the primary key's columns, read once when needed
  bool keys_read = false;
  for (const auto& [attnum, b] : before) {
    auto it = after.find(attnum);
    if (it == after.end() ||
        (it->second.type_oid == b.type_oid && it->second.type_mod == b.type_mod))
      continue;
    const bool widening =
        is_widening(b.type_oid, b.type_mod, it->second.type_oid, it->second.type_mod);
    if (!widening || has_using) {
      // The values were converted (a USING expression, or a cast to a type of another kind):
      // only the table knows them now. A non-key column is made anew at the destination (its
      // old values never survive in a column of the wrong type) and the table is read again.
      if (!keys_read) {
        SLUICE_TRY_ASSIGN(keys, primary_key_columns(oid));
        keys_read = true;
      }
      const bool key = std::find(keys.begin(), keys.end(), it->second.name) != keys.end();
      if (key && !widening)
        return Error(
            Errc::unsupported,
            fmt::format("{}: key column {} changed type from {} to {}, which not every "
                        "old value survives; sluice forwards widenings of key columns "
                        "only: revert the change, or run `sluice cleanup` and start "
                        "again to re-snapshot",
                        qualified, quote_identifier(it->second.name), b.type, it->second.type));
      rewrite = true;
      if (rewrite_why.empty())
        rewrite_why =
            fmt::format("column {} changed type from {} to {}{}", quote_identifier(it->second.name),
                        b.type, it->second.type, has_using ? " with USING" : "");
      if (!widening) {
        SchemaChange d;
        d.kind = SchemaChangeKind::drop_column;
        d.column = hold(it->second.name);
        changes.push_back(d);
        SchemaChange a;
        a.kind = SchemaChangeKind::add_column;
        a.column = hold(it->second.name);
        a.type = hold(it->second.type);
        changes.push_back(a);
        continue;
      }
    }
    SchemaChange c;
    c.kind = SchemaChangeKind::alter_column_type;
    c.column = hold(it->second.name);
    c.type = hold(it->second.type);
    c.from = hold(b.type);
    changes.push_back(c);
  }
  for (const auto& [attnum, a] : after) {
    if (before.count(attnum)) continue;
    SchemaChange c;
    c.kind = SchemaChangeKind::add_column;
    c.column = hold(a.name);
    c.type = hold(a.type);
    if (a.has_missing && a.missing) {
      SLUICE_TRY(resolve_types({a.type_oid}));
      auto v = text_to_value(types_, a.type_oid, *a.missing, batch.arena());
      if (!v.ok())
        return v.error().with_context(fmt::format("{}: the default of added column {}: ", qualified,
                                                  quote_identifier(a.name)));
      c.default_value = v.value();
    } else if (a.has_default) {
      // A volatile default (clock_timestamp(), random(), a sequence): the table was rewritten
      // and each old row holds a value only PostgreSQL knows. The column is added empty and the
      // table read again.
      rewrite = true;
      if (rewrite_why.empty())
        rewrite_why = fmt::format("column {} was added with a volatile default ({})",
                                  quote_identifier(a.name), a.default_expr);
    }
    changes.push_back(c);
  }
  for (const SchemaChange& c : changes) emit_schema(batch, schema, table, c, lsn);
  if (rewrite) return resnapshot_after_ddl(schema, table, rewrite_why);
  if (!changes.empty()) restart_incremental_of(schema, table);
  return ok_status();
}

Result<std::vector<std::string>> PostgresDriver::primary_key_columns(uint32_t rel) {
  auto r = conn_.exec_params(
      "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND "
      "a.attnum = ANY (i.indkey) WHERE i.indrelid = $1::oid AND i.indisprimary",
      {std::to_string(rel)});
  if (!r.ok()) return std::move(r).error();
  std::vector<std::string> out;
  for (int i = 0; i < PQntuples(r.value().get()); ++i)
    out.emplace_back(PQgetvalue(r.value().get(), i, 0));
  return out;
}

// ── without ddl.capture: what two Relation messages tell apart ──────────────

Status PostgresDriver::emit_relation_changes(Batch& batch, const Relation* before,
                                             const Relation& after, Lsn lsn) {
  if (!before) return ok_status();
  const std::string qualified = quote_identifier(after.schema) + "." + quote_identifier(after.name);
  auto find = [](const Relation& r, const std::string& name) -> const Column* {
    for (const Column& c : r.columns)
      if (c.name == name) return &c;
    return nullptr;
  };
  std::vector<const Column*> added, dropped;
  for (const Column& c : after.columns)
    if (!find(*before, c.name)) added.push_back(&c);
  for (const Column& c : before->columns)
    if (!find(after, c.name)) dropped.push_back(&c);
  if (!added.empty() && !dropped.empty())
    return Error(Errc::unsupported,
                 fmt::format("{}: column {} is gone and column {} is new: a rename and a drop "
                             "plus add look the same in the replication stream; set "
                             "`ddl.capture: true` to capture DDL exactly (then run `sluice "
                             "cleanup` and start again to re-snapshot)",
                             qualified, quote_identifier(dropped[0]->name),
                             quote_identifier(added[0]->name)));
  auto type_name = [&](const Column& c) -> Result<std::string> {
    auto r = conn_.exec_params("SELECT format_type($1::oid, $2::int)",
                               {std::to_string(c.type_oid), std::to_string(c.type_mod)});
    if (!r.ok()) return std::move(r).error();
    return std::string(PQgetvalue(r.value().get(), 0, 0));
  };
  std::vector<SchemaChange> changes;
  std::deque<std::string> keep;
  auto hold = [&](std::string s) -> std::string_view { return keep.emplace_back(std::move(s)); };
  for (const Column* c : dropped) {
    SchemaChange ch;
    ch.kind = SchemaChangeKind::drop_column;
    ch.column = hold(c->name);
    changes.push_back(ch);
  }
  for (const Column& c : after.columns) {
    const Column* b = find(*before, c.name);
    if (!b || (b->type_oid == c.type_oid && b->type_mod == c.type_mod)) continue;
    SLUICE_TRY_ASSIGN(std::string from, type_name(*b));
    SLUICE_TRY_ASSIGN(std::string to, type_name(c));
    if (!is_widening(b->type_oid, b->type_mod, c.type_oid, c.type_mod))
      return Error(
          Errc::unsupported,
          fmt::format("{}: column {} changed type from {} to {}, which not every old value "
                      "survives; sluice forwards widenings only: revert the change, or "
                      "run `sluice cleanup` and start again to re-snapshot",
                      qualified, quote_identifier(c.name), from, to));
    SchemaChange ch;
    ch.kind = SchemaChangeKind::alter_column_type;
    ch.column = hold(c.name);
    ch.type = hold(std::move(to));
    ch.from = hold(std::move(from));
    changes.push_back(ch);
  }
  for (const Column* c : added) {
    // The catalog as of now: a default (or a missing value) means old rows may read a value the
    // stream never carried.
    auto r = conn_.exec_params(
        "SELECT atthasdef OR atthasmissing OR attidentity <> '' FROM pg_attribute WHERE "
        "attrelid = $1::oid AND "
        "attname = $2 AND NOT attisdropped",
        {std::to_string(after.oid), c->name});
    if (!r.ok()) return std::move(r).error();
    if (PQntuples(r.value().get()) != 1 ||
        std::string_view(PQgetvalue(r.value().get(), 0, 0)) != "f")
      return Error(Errc::unsupported,
                   fmt::format("{}: column {} was added with a default (or changed since), so "
                               "rows that existed may read a value the replication stream does "
                               "not carry; set `ddl.capture: true` to capture DDL exactly (then "
                               "run `sluice cleanup` and start again to re-snapshot)",
                               qualified, quote_identifier(c->name)));
    SchemaChange ch;
    ch.kind = SchemaChangeKind::add_column;
    ch.column = hold(c->name);
    SLUICE_TRY_ASSIGN(std::string type, type_name(*c));
    ch.type = hold(std::move(type));
    changes.push_back(ch);
  }
  for (const SchemaChange& c : changes) emit_schema(batch, after.schema, after.name, c, lsn);
  return ok_status();
}

// ── without ddl.capture: the Relation baseline kept across restarts ─────────
//
// Each table's column shapes as the stream saw them, with the LSN each took effect at, persisted
// beside the checkpoint (`<pipeline>/source_history`): the first Relation message of a table after
// a restart is diffed against the shape in effect just before it, so a DDL made while sluice was
// stopped is seen like one made while it streamed. Versions the checkpoint has passed are pruned
// (the newest of them stays: it is the baseline of a replay from the checkpoint).
//
//   ["pgslot <lsn> <mvcc>\n"] "pgshapes 1\n", then per version "<oid> <lsn> <ncols>\n" and per
//   column "<type oid> <type mod> <name length> <name>\n"
//
// The optional first line is the MVCC snapshot the slot exported when sluice created it at <lsn>
// (pg_snapshot.cc): a run that crashed before its first checkpoint leaves no position, and the
// next one reads the snapshot again under a newer MVCC snapshot; with this line it can still skip
// the row versions the stream delivers.

namespace {
constexpr std::string_view kShapesHeader = "pgshapes 1\n";
}  // namespace

Status PostgresDriver::load_shapes() {
  if (shapes_loaded_) return ok_status();
  shapes_loaded_ = true;
  if (!ctx_.history) return ok_status();
  auto stored = ctx_.history->load();
  if (!stored.ok()) return stored.error().with_context("cannot read the table shapes: ");
  if (!stored.value()) return ok_status();
  std::string_view in = *stored.value();
  if (in.starts_with("pgslot ")) {
    const size_t nl = in.find('\n');
    const std::string_view line = in.substr(7, nl == std::string_view::npos ? nl : nl - 7);
    const size_t sp = line.find(' ');
    uint64_t lsn = 0;
    auto [p, ec] = std::from_chars(line.data(), line.data() + line.size(), lsn);
    if (nl != std::string_view::npos && sp != std::string_view::npos && ec == std::errc() &&
        p == line.data() + sp) {
      slot_snapshot_lsn_ = Lsn{lsn};
      slot_snapshot_mvcc_ = std::string(line.substr(sp + 1));
    }
    in.remove_prefix(nl == std::string_view::npos ? in.size() : nl + 1);
    if (in.empty()) return ok_status();
  }
  auto bad = [] {
    return Error(Errc::data,
                 "the stored table shapes (checkpoint entry <pipeline>/source_history) are "
                 "malformed; run `sluice cleanup` and start again");
  };
  if (in.substr(0, kShapesHeader.size()) != kShapesHeader) return bad();
  in.remove_prefix(kShapesHeader.size());
  auto number = [&](auto* out, char end) {
    const char* first = in.data();
    auto [p, ec] = std::from_chars(first, in.data() + in.size(), *out);
    if (ec != std::errc() || p == in.data() + in.size() || *p != end) return false;
    in.remove_prefix(size_t(p - first) + 1);
    return true;
  };
  while (!in.empty()) {
    uint32_t rel = 0;
    uint64_t lsn = 0;
    size_t n = 0;
    if (!number(&rel, ' ') || !number(&lsn, ' ') || !number(&n, '\n') || n > 1600) return bad();
    ShapeVersion v;
    v.lsn = Lsn{lsn};
    for (size_t i = 0; i < n; ++i) {
      Column c;
      size_t len = 0;
      if (!number(&c.type_oid, ' ') || !number(&c.type_mod, ' ') || !number(&len, ' ') ||
          len + 1 > in.size() || in[len] != '\n')
        return bad();
      c.name = std::string(in.substr(0, len));
      in.remove_prefix(len + 1);
      v.columns.push_back(std::move(c));
    }
    shapes_[rel].push_back(std::move(v));
  }
  return ok_status();
}

std::optional<Relation> PostgresDriver::shape_before(const Relation& now, Lsn lsn) const {
  auto it = shapes_.find(now.oid);
  if (it == shapes_.end()) return std::nullopt;
  const ShapeVersion* found = nullptr;
  for (const ShapeVersion& v : it->second)
    if (v.lsn < lsn) found = &v;
  if (!found) return std::nullopt;
  Relation r;
  r.oid = now.oid;
  r.schema = now.schema;
  r.name = now.name;
  r.replica_identity = now.replica_identity;
  r.columns = found->columns;
  return r;
}

Status PostgresDriver::record_shape(const Relation& r, Lsn lsn) {
  SLUICE_TRY(load_shapes());
  if (!add_shape(r, lsn)) return ok_status();
  return save_history();
}

bool PostgresDriver::add_shape(const Relation& r, Lsn lsn) {
  auto same = [&](const ShapeVersion& v) {
    if (v.columns.size() != r.columns.size()) return false;
    for (size_t i = 0; i < v.columns.size(); ++i)
      if (v.columns[i].name != r.columns[i].name ||
          v.columns[i].type_oid != r.columns[i].type_oid ||
          v.columns[i].type_mod != r.columns[i].type_mod)
        return false;
    return true;
  };
  std::vector<ShapeVersion>& versions = shapes_[r.oid];
  // The shape in effect at lsn: nothing to store when it is this one already.
  const ShapeVersion* current = nullptr;
  for (const ShapeVersion& v : versions)
    if (!(lsn < v.lsn)) current = &v;
  if (current && same(*current)) return false;
  ShapeVersion v;
  v.lsn = lsn;
  for (const Column& c : r.columns)
    v.columns.push_back(Column{c.name, c.type_oid, c.type_mod, false});
  auto pos = std::find_if(versions.begin(), versions.end(),
                          [&](const ShapeVersion& o) { return lsn < o.lsn; });
  // A replay re-sees an older shape: what followed it is re-learnt from the stream.
  versions.erase(pos, versions.end());
  versions.push_back(std::move(v));
  const Lsn acked{acked_flush_.load()};
  for (auto& [rel, vs] : shapes_) {
    size_t keep_from = 0;
    for (size_t i = 0; i < vs.size(); ++i)
      if (vs[i].lsn < acked) keep_from = i;
    vs.erase(vs.begin(), vs.begin() + std::ptrdiff_t(keep_from));
  }
  return true;
}

Status PostgresDriver::save_history() {
  if (!ctx_.history) return ok_status();
  std::string out;
  if (!slot_snapshot_mvcc_.empty())
    out = fmt::format("pgslot {} {}\n", slot_snapshot_lsn_.value, slot_snapshot_mvcc_);
  out += kShapesHeader;
  for (const auto& [rel, vs] : shapes_)
    for (const ShapeVersion& sv : vs) {
      out += fmt::format("{} {} {}\n", rel, sv.lsn.value, sv.columns.size());
      for (const Column& c : sv.columns)
        out += fmt::format("{} {} {} {}\n", c.type_oid, c.type_mod, c.name.size(), c.name);
    }
  if (Status st = ctx_.history->save(out); !st.ok())
    return st.error().with_context("cannot store the table shapes: ");
  return ok_status();
}

// The baseline when no snapshot gave one: the captured tables' shapes read from the catalogue at
// stream start, so that a DDL made before a table's first Relation message (a rename right after
// the start, before any change; or while sluice was stopped) is still diffed, never taken as the
// baseline. A fresh slot's are read in the snapshot it exported, at its consistent point (`at`);
// otherwise the tables without a stored shape are read as of now, at the server's WAL position
// then: a Relation message of a transaction committed before it has no baseline (as before),
// later ones do. One statement: the WAL position is read after its snapshot was taken, so a DDL
// the catalogue does not show yet commits before that position, and its Relation message (in a
// transaction after it) is diffed against the shape that really preceded it.
Status PostgresDriver::record_catalog_shapes(std::optional<Lsn> at) {
  SLUICE_TRY(load_shapes());
  std::string oids;
  for (const TableRef& t : tables_) {
    // A fresh slot: every table, at its point (older stored shapes are of an earlier slot).
    if (!at && shapes_.count(t.oid)) continue;
    oids += fmt::format("{}{}", oids.empty() ? "" : ",", t.oid);
  }
  if (oids.empty()) return ok_status();
  auto r = conn_.exec_params(
      "SELECT w.lsn::text, c.oid, a.attname, a.atttypid, a.atttypmod "
      "FROM unnest($1::oid[]) WITH ORDINALITY c(oid, n) "
      "CROSS JOIN (SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() "
      "ELSE pg_current_wal_lsn() END AS lsn) w "
      "LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped "
      "AND a.attgenerated = '' ORDER BY c.n, a.attnum",
      {"{" + oids + "}"});
  if (!r.ok()) return r.error().with_context("cannot read the captured tables' columns: ");
  PGresult* res = r.value().get();
  // A plain value and a flag, not std::optional<Relation>: GCC -O1 (the TSan build) warns of the
  // optional's vector as maybe-uninitialized.
  Relation rel;
  bool have_rel = false, changed = false;
  Lsn lsn = at.value_or(Lsn{});
  auto flush = [&] {
    if (have_rel) changed |= add_shape(rel, lsn);
    rel = Relation{};
    have_rel = false;
  };
  for (int i = 0; i < PQntuples(res); ++i) {
    if (!at) lsn = Lsn::parse(PQgetvalue(res, i, 0)).value_or(Lsn{});
    const auto oid = uint32_t(std::stoul(PQgetvalue(res, i, 1)));
    if (!have_rel || rel.oid != oid) {
      flush();
      have_rel = true;
      rel.oid = oid;
    }
    if (PQgetisnull(res, i, 2)) continue;  // a table without columns
    Column c;
    c.name = PQgetvalue(res, i, 2);
    c.type_oid = uint32_t(std::stoul(PQgetvalue(res, i, 3)));
    c.type_mod = std::stoi(PQgetvalue(res, i, 4));
    rel.columns.push_back(std::move(c));
  }
  flush();
  if (!changed) return ok_status();
  spdlog::debug("pipeline {}: table shapes from the catalogue at {} (the stream's baseline)",
                ctx_.pipeline_id, lsn.to_string());
  return save_history();
}

Status PostgresDriver::shapes_in_exported_snapshot(const std::string& exported, Lsn point) {
  if (auto b = conn_.exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", PGRES_COMMAND_OK);
      !b.ok())
    return b.error();
  Status st = ok_status();
  if (auto s =
          conn_.exec("SET TRANSACTION SNAPSHOT " + conn_.quote_literal(exported), PGRES_COMMAND_OK);
      !s.ok())
    st = s.error().with_context("cannot import the slot's snapshot: ");
  if (st.ok()) st = record_catalog_shapes(point);
  auto end = conn_.exec(st.ok() ? "COMMIT" : "ROLLBACK", PGRES_COMMAND_OK);
  if (st.ok() && !end.ok()) return end.error();
  return st;
}

}  // namespace sluice::pg
