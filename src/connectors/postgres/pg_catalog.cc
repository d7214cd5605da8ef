// The catalogue side of the postgres source: which tables it captures, the publication that
// carries them, the types of their columns and each relation's record key.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "connectors/postgres/postgres_source_driver.h"

namespace sluice::pg {

Status PostgresDriver::resolve_tables() {
  tables_.clear();
  all_tables_ = tables_setting_.size() == 1 && tables_setting_[0] == "*";
  if (all_tables_) {
    // Estimated rows (progress only): reltuples, or ~120 bytes a row if never analysed.
    auto r = conn_.exec(
        "SELECT n.nspname, c.relname, c.oid, (CASE WHEN c.reltuples >= 0 THEN c.reltuples ELSE pg_relation_size(c.oid) / 120 END)::bigint FROM pg_class c JOIN pg_namespace n ON "
        "n.oid = c.relnamespace WHERE c.relkind = 'r' AND NOT c.relispartition AND n.nspname NOT IN "
        "('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%' AND n.nspname NOT LIKE 'pg_temp%' "
        "AND (n.nspname <> 'sluice' OR c.relname NOT IN ('ddl_log', 'ddl_state')) "
        "ORDER BY 1, 2");
    if (!r.ok()) return std::move(r).error();
    PGresult* res = r.value().get();
    for (int i = 0; i < PQntuples(res); ++i)
      tables_.push_back({PQgetvalue(res, i, 0), PQgetvalue(res, i, 1),
                         uint32_t(std::stoul(PQgetvalue(res, i, 2))),
                         std::stoll(PQgetvalue(res, i, 3))});
    return ok_status();
  }
  for (const std::string& spec : tables_setting_) {
    auto name = parse_table_name(spec);
    if (!name)
      return Error(
          Errc::config,
          fmt::format("setting 'tables': '{}' is not a table name (schema.table, quote names "
                      "with spaces: sales.\"Order Items\")",
                      spec));
    auto r = conn_.exec_params(
        "SELECT c.oid, c.relkind, (CASE WHEN c.reltuples >= 0 THEN c.reltuples ELSE pg_relation_size(c.oid) / 120 END)::bigint FROM pg_class c JOIN pg_namespace n ON n.oid = "
        "c.relnamespace WHERE n.nspname = $1 AND c.relname = $2",
        {name->first, name->second});
    if (!r.ok()) return std::move(r).error();
    PGresult* res = r.value().get();
    const std::string qualified =
        quote_identifier(name->first) + "." + quote_identifier(name->second);
    if (PQntuples(res) == 0)
      return Error(
          Errc::not_found,
          fmt::format("table {} does not exist in {}; check `tables` (names are case-sensitive "
                      "when quoted)",
                      qualified, describe_target(url_)));
    if (std::string_view(PQgetvalue(res, 0, 1)) != "r")
      return Error(Errc::unsupported,
                   fmt::format("{} is not a plain table (relkind '{}'); list its partitions or "
                               "tables instead",
                               qualified, PQgetvalue(res, 0, 1)));
    tables_.push_back({name->first, name->second, uint32_t(std::stoul(PQgetvalue(res, 0, 0))),
                       std::stoll(PQgetvalue(res, 0, 2))});
  }
  return ok_status();
}

Status PostgresDriver::ensure_publication() {
  auto r = conn_.exec_params(
      "SELECT puballtables, coalesce(obj_description(oid, 'pg_publication'), '') FROM pg_publication "
      "WHERE pubname = $1",
      {publication_});
  if (!r.ok()) return std::move(r).error();
  const std::string marker = "created by sluice pipeline " + ctx_.pipeline_id;
  if (PQntuples(r.value().get()) == 0) {
    std::string sql = "CREATE PUBLICATION " + quote_identifier(publication_);
    if (all_tables_) {
      sql += " FOR ALL TABLES";
    } else {
      sql += " FOR TABLE ";
      for (size_t i = 0; i < tables_.size(); ++i)
        sql += (i ? ", " : "") + quote_identifier(tables_[i].schema) + "." +
               quote_identifier(tables_[i].name);
      if (ddl_capture_) sql += ", sluice.ddl_log";  // schema changes arrive in order with rows
    }
    if (auto c = conn_.exec(sql, PGRES_COMMAND_OK); !c.ok())
      return c.error().with_context(
          fmt::format("cannot create publication {}: ", quote_identifier(publication_)));
    (void)conn_.exec("COMMENT ON PUBLICATION " + quote_identifier(publication_) + " IS " +
                         conn_.quote_literal(marker),
                     PGRES_COMMAND_OK);
    spdlog::info("pipeline {}: created publication {}", ctx_.pipeline_id, publication_);
    return ok_status();
  }
  if (all_tables_ || std::string_view(PQgetvalue(r.value().get(), 0, 0)) == "t") return ok_status();
  // Reused publication: add tables the pipeline now lists but the publication lacks.
  std::vector<TableRef> wanted = tables_;
  if (ddl_capture_) wanted.push_back({"sluice", "ddl_log", ddl_log_oid_, 0});
  for (const TableRef& t : wanted) {
    auto has = conn_.exec_params(
        "SELECT 1 FROM pg_publication_tables WHERE pubname = $1 AND schemaname = $2 AND tablename = $3",
        {publication_, t.schema, t.name});
    if (!has.ok()) return std::move(has).error();
    if (PQntuples(has.value().get()) == 0) {
      auto a = conn_.exec("ALTER PUBLICATION " + quote_identifier(publication_) + " ADD TABLE " +
                              quote_identifier(t.schema) + "." + quote_identifier(t.name),
                          PGRES_COMMAND_OK);
      if (!a.ok()) return a.error().with_context("cannot add a table to the publication: ");
      added_to_publication_.push_back(t);
      spdlog::info("pipeline {}: added {}.{} to publication {}", ctx_.pipeline_id, t.schema, t.name,
                   publication_);
    }
  }
  // A publication this pipeline created follows `tables`: a table taken out of it leaves the
  // publication (the server stops decoding its changes for us), so listed again later it is added
  // back, and copied. A user's publication is left as it is; the stream skips what is not listed.
  if (std::string_view(PQgetvalue(r.value().get(), 0, 1)) != marker) return ok_status();
  auto in_pub = conn_.exec_params(
      "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = $1", {publication_});
  if (!in_pub.ok()) return std::move(in_pub).error();
  const auto signal = parse_table_name(signal_table_setting_);
  for (int i = 0; i < PQntuples(in_pub.value().get()); ++i) {
    const std::string schema = PQgetvalue(in_pub.value().get(), i, 0);
    const std::string name = PQgetvalue(in_pub.value().get(), i, 1);
    const bool keep = (schema == "sluice" && name == "ddl_log") ||
                      (signal && signal->first == schema && signal->second == name) ||
                      std::any_of(wanted.begin(), wanted.end(), [&](const TableRef& t) {
                        return t.schema == schema && t.name == name;
                      });
    if (keep) continue;
    const std::string q = quote_identifier(schema) + "." + quote_identifier(name);
    if (auto d =
            conn_.exec("ALTER PUBLICATION " + quote_identifier(publication_) + " DROP TABLE " + q,
                       PGRES_COMMAND_OK);
        !d.ok())
      return d.error().with_context(
          fmt::format("cannot take {} (no longer in `tables`) out of publication {}: ", q,
                      quote_identifier(publication_)));
    spdlog::info("pipeline {}: took {} out of publication {}: it is no longer in `tables`",
                 ctx_.pipeline_id, q, publication_);
  }
  return ok_status();
}

Status PostgresDriver::resolve_types(const std::vector<uint32_t>& oids) {
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
      TypeInfo info;
      if (typtype == 'e') {
        info.kind = TypeInfo::Kind::enumeration;
      } else if (typtype == 'd') {
        info.kind = TypeInfo::Kind::domain;
        info.element_oid = base;
        if (!types_.known(base)) pending.push_back(base);
      } else if (category == 'A' && elem != 0) {
        info.kind = TypeInfo::Kind::array;
        info.element_oid = elem;
        info.delimiter = delim;
        if (!types_.known(elem)) pending.push_back(elem);
      } else if (typtype == 'c') {
        info.kind = TypeInfo::Kind::composite;
      } else {
        info.kind = TypeInfo::Kind::other;
      }
      types_.add(type_oid, info);
    }
  }
  return ok_status();
}

Status PostgresDriver::ensure_catalog_connection() {
  // While streaming, the catalog connection may have dropped with the replication one.
  if (st_->position.phase == LogPhase::stream && (!conn_.ok() || !conn_.exec("SELECT 1").ok())) {
    auto c = PgConn::connect(url_, false, net_);
    if (!c.ok()) return std::move(c).error();
    conn_ = std::move(c.value());
  }
  return ok_status();
}

// A relation and its record key: the primary key, else the replica identity (unless FULL).
Result<TableState*> PostgresDriver::table_from_relation(std::shared_ptr<const Relation> rel) {
  SLUICE_TRY(ensure_catalog_connection());
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
  for (int i = 0; i < PQntuples(r.value().get()); ++i)
    pk.emplace_back(PQgetvalue(r.value().get(), i, 0));
  t.key_columns.clear();
  auto configured = message_key_columns_.find({rel->schema, rel->name});
  if (configured != message_key_columns_.end()) {
    // message.key.columns: the key of a table that has none of its own.
    if (!pk.empty())
      return Error(Errc::config,
                   fmt::format("setting 'message.key.columns': {}.{} has a primary key ({}), which "
                               "is its records' key; remove the table from message.key.columns",
                               quote_identifier(rel->schema), quote_identifier(rel->name),
                               fmt::join(pk, ", ")));
    for (const std::string& name : configured->second) {
      uint32_t i = 0;
      while (i < rel->columns.size() && rel->columns[i].name != name) ++i;
      if (i == rel->columns.size())
        return Error(Errc::config,
                     fmt::format("setting 'message.key.columns': {}.{} has no column {} (names are "
                                 "case-sensitive)",
                                 quote_identifier(rel->schema), quote_identifier(rel->name),
                                 quote_identifier(name)));
      t.key_columns.push_back(i);
    }
  }
  for (uint32_t i = 0; configured == message_key_columns_.end() && i < rel->columns.size(); ++i) {
    const auto& c = rel->columns[i];
    const bool in_pk = std::find(pk.begin(), pk.end(), c.name) != pk.end();
    if (pk.empty() ? (c.key && rel->replica_identity != 'f') : in_pk) t.key_columns.push_back(i);
  }
  if (t.key_columns.empty() && !t.warned_no_key) {
    spdlog::warn(
        "pipeline {}: table {}.{} has no primary key: its records carry no key, so destinations cannot "
        "upsert or delete them by key (add a primary key)",
        ctx_.pipeline_id, rel->schema, rel->name);
    t.warned_no_key = true;
  }
  t.rel = std::move(rel);
  return &t;
}

// The snapshot's columns: those pgoutput sends (generated columns never are), so snapshot and
// stream records of one row have the same fields.
Result<TableState*> PostgresDriver::table_from_catalog(const TableRef& tr) {
  auto r = conn_.exec_params(
      "SELECT a.attname, a.atttypid, a.atttypmod, c.relreplident FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
      "WHERE a.attrelid = $1::oid AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = '' ORDER BY a.attnum",
      {std::to_string(tr.oid)});
  if (!r.ok())
    return r.error().with_context(
        fmt::format("cannot read the columns of {}.{}: ", tr.schema, tr.name));
  auto rel = std::make_shared<Relation>();
  rel->oid = tr.oid;
  rel->schema = tr.schema;
  rel->name = tr.name;
  PGresult* res = r.value().get();
  for (int i = 0; i < PQntuples(res); ++i) {
    Column c;
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

}  // namespace sluice::pg
