// The `mysql` connector: its settings table and factory. The destination is in
// mysql_destination.cc (its value/column type mapping is documented in mysql_destination.h).
#include "connectors/builtin.h"
#include "connectors/common/credentials.h"
#include "connectors/common/tls_settings.h"
#include "connectors/mysql/mysql_destination.h"
#include "connectors/mysql/mysql_source.h"

namespace sluice {

namespace {

// Bound to the public options struct (mysql_destination.h), whose initializers serve code that
// builds options directly; `MysqlSettings.DestinationDefaultsMatchTheOptionsStruct` keeps both
// equal. The floor of max_statement_size is applied by make_mysql_destination (a smaller value is
// raised, not refused), so the declaration has no range.
constexpr auto kDestinationSettings = settings_table<MysqlDestinationOptions>(
    setting<&MysqlDestinationOptions::url>(
        "url",
        "Server and database: mysql://user:password@host:port/database (MySQL 8 or MariaDB 10.11). "
        "User, password and database are percent-decoded; the port defaults to 3306.")
        .mandatory()
        .secret_value(),
    setting<&MysqlDestinationOptions::user>("user", kUserDoc),
    setting<&MysqlDestinationOptions::password>("password", kPasswordDoc).secret_value(),
    setting<&MysqlDestinationOptions::password_file>("password_file", kPasswordFileDoc),
    setting<&MysqlDestinationOptions::table>(
        "table",
        "Table each record is written to: a template where {{table}} and {{schema}} (or any "
        "{{metadata-key}}) are replaced from the record's metadata. A record without table metadata "
        "goes to \"records\". Tables are created on first use (InnoDB, utf8mb4) with the record key as "
        "PRIMARY KEY; missing columns are added.")
        .with_default("{{table}}"),
    setting<&MysqlDestinationOptions::tls_mode>(
        "tls.mode",
        "TLS to the server. disabled: never; preferred: when the server offers it; required: always, "
        "without checking the certificate; verify_ca / verify_identity: always, checking the "
        "certificate against tls.ca (libmariadb checks the host name in both).")
        .one_of("disabled,preferred,required,verify_ca,verify_identity")
        .with_default("preferred"),
    setting<&MysqlDestinationOptions::tls_ca>(
        "tls.ca", "PEM file of the certificate authority for tls.mode verify_ca / verify_identity.")
        .file_path(),
    setting<&MysqlDestinationOptions::tls_cert>("tls.cert", kTlsCertDoc).file_path(),
    setting<&MysqlDestinationOptions::tls_key>("tls.key", kTlsKeyDoc).file_path(),
    setting<&MysqlDestinationOptions::tls_key_password>("tls.key_password", kTlsKeyPasswordDoc)
        .secret_value(),
    setting<&MysqlDestinationOptions::max_statement_size>(
        "max_statement_size",
        "Largest multi-row INSERT/DELETE statement sent; keep it below the server's "
        "max_allowed_packet.")
        .with_default("4MiB"),
    setting<&MysqlDestinationOptions::connect_timeout>("connect_timeout",
                                                       "How long connecting may take.")
        .with_default("10s"),
    setting<&MysqlDestinationOptions::query_timeout>(
        "query_timeout",
        "How long the destination waits for the server to answer (or accept) one statement before "
        "it takes the connection for dead (a partition, a server that stopped answering but keeps "
        "TCP open): libmariadb's read and write timeouts, whole seconds. The batch is then retried "
        "on a new connection, and the timeout counted "
        "(sluice_destination_connection_timeouts_total). A statement that legitimately takes "
        "longer (a lock held by another session) is retried the same way: raise it then. 0: wait "
        "forever.")
        .with_default("60s")
        .at_least(0),
    setting<&MysqlDestinationOptions::tcp_user_timeout>(
        "tcp_user_timeout",
        "TCP keepalives and TCP_USER_TIMEOUT of the connection: the kernel drops a connection whose "
        "data or keepalive probes stay unacknowledged this long (a blackholed link). 0: the "
        "system's defaults.")
        .with_default("30s")
        .at_least(0),
    setting<&MysqlDestinationOptions::keep_dropped_columns>(
        "schema.keep_dropped_columns",
        "What a dropped source column does at the destination (a schema record drop_column): false drops the column too; true keeps it with its values (rows written later read NULL in it, and a column re-added under its name is backfilled with NULL or the source default, never the old values). docs/schema-changes.md.")
        .with_default("false"),
    setting<&MysqlDestinationOptions::reconcile>(
        "snapshot.reconcile",
        "What a re-snapshot of a table (between the markers snapshot_begin and snapshot_end) does to rows the snapshot did not see. sweep: the keys written meanwhile are kept in a side table sluice_sweep_<table>, and at snapshot_end the rows with any other key are deleted (off when the `table` template has no {{table}}: one destination table then holds several source tables' rows); truncate: the table is emptied at snapshot_begin (it is incomplete until the snapshot ends); none: rows stay. docs/schema-changes.md.")
        .one_of("sweep,truncate,none")
        .with_default("sweep"),
    setting<&MysqlDestinationOptions::checkpoint_in_destination>(
        "checkpoint_in_destination",
        "Store the source position in the destination, in the same transaction as each batch (table "
        "sluice_checkpoints, in the URL's database); on restart the pipeline resumes exactly after the "
        "last batch applied, so no change is applied twice.")
        .with_default("false"),
    setting<&MysqlDestinationOptions::unrepresentable_values>(
        "unrepresentable_values",
        "What happens to a value MySQL cannot store: NaN or ±Infinity (DOUBLE), a date or "
        "timestamp outside the years 0000 to 9999 (PostgreSQL's infinity among them), a time "
        "beyond ±838:59:59. reject: the record is rejected, so it goes to the dead-letter queue "
        "with on_error: dlq and stops the pipeline, naming the record and field, otherwise; null: "
        "the column is set to NULL.")
        .one_of("reject,null")
        .with_default("reject"));

Result<std::unique_ptr<Destination>> make_destination(const Settings& settings) {
  auto options = mysql_destination_options(settings);
  if (!options) return std::move(options).error();
  return make_mysql_destination(std::move(options.value()));
}

}  // namespace

std::span<const SettingSpec> mysql_destination_settings() noexcept { return kDestinationSettings; }

// The destination's cross-setting checks (tls.mode verify_* needs tls.ca) are made by
// make_mysql_destination, where options built directly are checked too.
Result<MysqlDestinationOptions> mysql_destination_options(const Settings& settings) {
  return bind_settings(kDestinationSettings, settings);
}

namespace {
constexpr std::string_view kMysqlTemplateSettings[] = {"table"};
constexpr std::string_view kMysqlSourceMetadata[] = {
    "schema", "table", "binlog_file", "binlog_pos", "gtid", "commit_time", "server_id", "truncate"};
}  // namespace

ConnectorSpec mysql_connector() {
  return ConnectorSpec{
      .name = "mysql",
      .summary =
          "MySQL/MariaDB: consistent snapshot, then row-based binlog CDC (GTID positions on MariaDB); "
          "writes records as idempotent multi-row upserts and deletes by key.",
      .source_settings = mysql_source_settings(),
      .destination_settings = kDestinationSettings,
      .make_source = &make_mysql_source,
      .make_destination = &make_destination,
      .template_settings = kMysqlTemplateSettings,
      .source_metadata = kMysqlSourceMetadata,
  };
}

}  // namespace sluice
