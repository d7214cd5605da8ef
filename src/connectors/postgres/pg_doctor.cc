// `sluice doctor` for the postgres source: what the source needs from the server, checked with
// read-only catalogue queries on one ordinary connection — nothing is created, no slot, no
// publication, no data moved. Each check names its fix; docs/doctor.md lists them.
#include <fmt/format.h>

#include "connectors/postgres/postgres_source_driver.h"

namespace sluice::pg {

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

std::string pretty_bytes(double b) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  return fmt::format("{:.1f} {}", b, units[u]);
}

}  // namespace

Result<std::vector<DoctorCheck>> PostgresDriver::doctor(const ConnectorContext& ctx,
                                                        const std::optional<std::string>&) {
  name_slot_and_publication(ctx);
  ctx_ = ctx;
  std::vector<DoctorCheck> out;
  auto c = PgConn::connect(url_, false, net_);
  if (!c.ok()) {
    out.push_back(fail("the server accepts the connection", c.error().message(),
                       "check `url`, the credentials and that the server is reachable"));
    return out;
  }
  conn_ = std::move(c.value());
  struct Reset {
    PgConn& c;
    ~Reset() { c.reset(); }
  } reset{conn_};
  out.push_back(pass("the server accepts the connection", describe_target(url_)));

  // One row of settings and role attributes.
  SLUICE_TRY_ASSIGN(
      PgResult cfg,
      conn_.exec("SELECT current_setting('server_version_num')::int, current_setting('wal_level'), "
                 "current_setting('max_replication_slots')::int, "
                 "(SELECT count(*) FROM pg_replication_slots)::int, "
                 "current_setting('max_wal_senders')::int, "
                 "current_setting('max_slot_wal_keep_size'), r.rolsuper, r.rolreplication, "
                 "current_user, has_database_privilege(current_database(), 'CREATE') "
                 "FROM pg_roles r WHERE r.rolname = current_user"));
  PGresult* res = cfg.get();
  const int version = std::stoi(PQgetvalue(res, 0, 0));
  const std::string wal_level = PQgetvalue(res, 0, 1);
  const int max_slots = std::stoi(PQgetvalue(res, 0, 2)),
            used_slots = std::stoi(PQgetvalue(res, 0, 3));
  const int max_senders = std::stoi(PQgetvalue(res, 0, 4));
  const std::string keep_size = PQgetvalue(res, 0, 5);
  const bool superuser = std::string_view(PQgetvalue(res, 0, 6)) == "t";
  const bool replication = std::string_view(PQgetvalue(res, 0, 7)) == "t";
  const std::string user = PQgetvalue(res, 0, 8);
  const bool can_create = std::string_view(PQgetvalue(res, 0, 9)) == "t";

  if (version >= 100000)
    out.push_back(
        pass("PostgreSQL 10 or later (pgoutput)", fmt::format("server_version_num = {}", version)));
  else
    out.push_back(
        fail("PostgreSQL 10 or later (pgoutput)", fmt::format("server_version_num = {}", version),
             "upgrade the server: logical replication with pgoutput needs PostgreSQL 10"));
  if (wal_level == "logical") out.push_back(pass("wal_level is logical", "wal_level = logical"));
  else
    out.push_back(fail("wal_level is logical", "wal_level = " + wal_level,
                       "ALTER SYSTEM SET wal_level = logical; then restart the server"));
  if (superuser || replication)
    out.push_back(
        pass("the user may replicate", fmt::format("role {} has {}", quote_identifier(user),
                                                   superuser ? "SUPERUSER" : "REPLICATION")));
  else
    out.push_back(
        fail("the user may replicate",
             fmt::format("role {} has neither REPLICATION nor SUPERUSER", quote_identifier(user)),
             fmt::format("ALTER ROLE {} REPLICATION", quote_identifier(user))));
  if (max_senders > 0)
    out.push_back(pass("max_wal_senders allows a replication connection",
                       fmt::format("max_wal_senders = {}", max_senders)));
  else
    out.push_back(fail("max_wal_senders allows a replication connection", "max_wal_senders = 0",
                       "ALTER SYSTEM SET max_wal_senders = 10; then restart the server"));

  // The pipeline's slot: present (its state), or room to create it.
  SLUICE_TRY_ASSIGN(
      PgResult slot,
      conn_.exec_params(
          "SELECT plugin, database = current_database(), active, coalesce(wal_status, ''), "
          "coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn), 0)::float8, "
          "coalesce(confirmed_flush_lsn::text, '') FROM pg_replication_slots WHERE slot_name = $1",
          {slot_}));
  const std::string slot_name = "replication slot " + quote_identifier(slot_);
  if (PQntuples(slot.get()) == 0) {
    if (used_slots < max_slots)
      out.push_back(pass(slot_name + " can be created",
                         fmt::format("not created yet; {} of max_replication_slots = {} in use",
                                     used_slots, max_slots)));
    else
      out.push_back(fail(slot_name + " can be created",
                         fmt::format("all {} replication slots are in use", max_slots),
                         "drop an unused slot (SELECT pg_drop_replication_slot(name)) or raise "
                         "max_replication_slots and restart the server"));
  } else {
    PGresult* s = slot.get();
    const std::string plugin = PQgetvalue(s, 0, 0), wal_status = PQgetvalue(s, 0, 3);
    const bool same_db = std::string_view(PQgetvalue(s, 0, 1)) == "t";
    const bool active = std::string_view(PQgetvalue(s, 0, 2)) == "t";
    const double retained = std::stod(PQgetvalue(s, 0, 4));
    if (plugin != "pgoutput" || !same_db)
      out.push_back(fail(slot_name + " belongs to this pipeline",
                         !same_db ? "it is a slot of another database"
                                  : fmt::format("it uses the plugin {}, not pgoutput", plugin),
                         "set `slot` to another name, or drop that slot"));
    else if (wal_status == "lost")
      out.push_back(
          fail(slot_name + " still has its WAL",
               "wal_status = lost: the server removed WAL the slot needed",
               "changes were lost on the server: run `sluice cleanup` and snapshot again"));
    else
      out.push_back(pass(slot_name + " still has its WAL",
                         fmt::format("wal_status = {}, confirmed at {}, retains {}{}", wal_status,
                                     PQgetvalue(s, 0, 5), pretty_bytes(retained),
                                     active ? "; in use by a running pipeline" : "")));
  }
  if (keep_size == "-1")
    out.push_back(
        warn("max_slot_wal_keep_size bounds the WAL a slot retains", "max_slot_wal_keep_size = -1",
             "a stopped pipeline's slot retains WAL without bound; set "
             "max_slot_wal_keep_size (e.g. ALTER SYSTEM SET max_slot_wal_keep_size = '50GB')"));
  else
    out.push_back(pass("max_slot_wal_keep_size bounds the WAL a slot retains",
                       "max_slot_wal_keep_size = " + keep_size));

  // Tables: they exist and are plain tables; each can be read and has a replica identity.
  if (Status st = resolve_tables(); !st.ok()) {
    out.push_back(fail("the tables exist", st.error().message(), "fix `tables`"));
    return out;
  }
  if (all_tables_ && !superuser)
    out.push_back(fail("the publication can be FOR ALL TABLES",
                       "`tables: [\"*\"]` needs a superuser",
                       "list the tables in `tables`, or run as a superuser"));
  SLUICE_TRY_ASSIGN(
      PgResult pub,
      conn_.exec_params(
          "SELECT pubinsert AND pubupdate AND pubdelete AND pubtruncate, puballtables "
          "FROM pg_publication WHERE pubname = $1",
          {publication_}));
  const bool pub_exists = PQntuples(pub.get()) == 1;
  const std::string pub_name = "publication " + quote_identifier(publication_);
  if (pub_exists) {
    if (std::string_view(PQgetvalue(pub.get(), 0, 0)) == "t")
      out.push_back(
          pass(pub_name + " publishes every operation", "insert, update, delete, truncate"));
    else
      out.push_back(fail(pub_name + " publishes every operation",
                         "some operations are not published",
                         fmt::format("ALTER PUBLICATION {} SET (publish = 'insert, update, delete, "
                                     "truncate')",
                                     quote_identifier(publication_))));
  } else if (!can_create && !superuser) {
    out.push_back(fail(pub_name + " can be created",
                       fmt::format("role {} lacks CREATE on the database", quote_identifier(user)),
                       fmt::format("GRANT CREATE ON DATABASE current_database TO {}, or create the "
                                   "publication yourself and name it in `publication`",
                                   quote_identifier(user))));
  } else {
    out.push_back(pass(pub_name + " can be created", "not created yet"));
  }
  int not_ok = 0;
  for (const TableRef& t : tables_) {
    const std::string q = quote_identifier(t.schema) + "." + quote_identifier(t.name);
    SLUICE_TRY_ASSIGN(
        PgResult tr,
        conn_.exec_params(
            "SELECT has_table_privilege(c.oid, 'SELECT'), c.relreplident, "
            "EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary), "
            "pg_has_role(c.relowner, 'USAGE'), "
            "EXISTS (SELECT 1 FROM pg_publication_tables p WHERE p.pubname = $2 AND "
            "p.schemaname = n.nspname AND p.tablename = c.relname) "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1",
            {std::to_string(t.oid), publication_}));
    PGresult* r = tr.get();
    if (PQntuples(r) != 1) continue;  // dropped since resolve_tables
    const bool can_select = std::string_view(PQgetvalue(r, 0, 0)) == "t";
    const char ident = PQgetvalue(r, 0, 1)[0];
    const bool has_pk = std::string_view(PQgetvalue(r, 0, 2)) == "t";
    const bool owner = std::string_view(PQgetvalue(r, 0, 3)) == "t";
    const bool in_pub = std::string_view(PQgetvalue(r, 0, 4)) == "t";
    if (!can_select) {
      out.push_back(fail("table " + q + " can be read",
                         "no SELECT privilege (the snapshot reads it)",
                         fmt::format("GRANT SELECT ON {} TO {}", q, quote_identifier(user))));
      ++not_ok;
    }
    // Without a replica identity, PostgreSQL refuses UPDATE and DELETE on a published table.
    if (ident == 'n' || (ident == 'd' && !has_pk)) {
      out.push_back(
          fail("table " + q + " has a replica identity",
               ident == 'n' ? "REPLICA IDENTITY NOTHING"
                            : "no primary key and REPLICA IDENTITY DEFAULT: once "
                              "published, the server refuses its UPDATEs and DELETEs",
               fmt::format("add a primary key, or ALTER TABLE {} REPLICA IDENTITY FULL", q)));
      ++not_ok;
    }
    if (pub_exists && !in_pub && !all_tables_ && !owner && !superuser) {
      out.push_back(fail("table " + q + " can be added to the publication",
                         "it is not in the publication and the user does not own it",
                         fmt::format("ALTER PUBLICATION {} ADD TABLE {} (as its owner)",
                                     quote_identifier(publication_), q)));
      ++not_ok;
    } else if (!pub_exists && !owner && !superuser) {
      out.push_back(fail("table " + q + " can be published",
                         "CREATE PUBLICATION … FOR TABLE needs the table's owner",
                         fmt::format("run as the owner of {}, or create the publication as its "
                                     "owner and name it in `publication`",
                                     q)));
      ++not_ok;
    }
  }
  // The columns and keys, for the destinations' checks.
  doctor_tables_.clear();
  for (const TableRef& t : tables_) {
    SLUICE_TRY_ASSIGN(
        PgResult cr,
        conn_.exec_params(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod), "
            "coalesce(a.attnum = ANY(i.indkey), false) FROM pg_attribute a LEFT JOIN pg_index i "
            "ON i.indrelid = a.attrelid AND i.indisprimary WHERE a.attrelid = $1 AND a.attnum > 0 "
            "AND NOT a.attisdropped ORDER BY a.attnum",
            {std::to_string(t.oid)}));
    SourceTable st{t.schema, t.name};
    for (int i = 0; i < PQntuples(cr.get()); ++i) {
      st.columns.emplace_back(PQgetvalue(cr.get(), i, 0), PQgetvalue(cr.get(), i, 1));
      if (std::string_view(PQgetvalue(cr.get(), i, 2)) == "t")
        st.key.emplace_back(PQgetvalue(cr.get(), i, 0));
    }
    doctor_tables_.push_back(std::move(st));
  }
  if (not_ok == 0)
    out.push_back(pass("the tables can be read, published and replicated",
                       fmt::format("{} table{}", tables_.size(), tables_.size() == 1 ? "" : "s")));
  if (ddl_capture_ && !superuser) {
    SLUICE_TRY_ASSIGN(
        PgResult ev,
        conn_.exec("SELECT count(*) FROM pg_event_trigger WHERE evtname LIKE 'sluice%'"));
    if (std::string_view(PQgetvalue(ev.get(), 0, 0)) == "0")
      out.push_back(fail("ddl.capture can install its event trigger",
                         "CREATE EVENT TRIGGER needs a superuser",
                         "run once as a superuser (it installs sluice.ddl_log and the trigger), or "
                         "turn ddl.capture off"));
  }
  return out;
}

}  // namespace sluice::pg
