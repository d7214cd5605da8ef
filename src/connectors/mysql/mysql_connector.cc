// The `mysql` connector: its settings table and factory. The destination is in
// mysql_destination.cc (its value/column type mapping is documented in mysql_destination.h).
#include "connectors/builtin.h"
#include "connectors/mysql/mysql_destination.h"
#include "connectors/mysql/mysql_source.h"

namespace sluice {

namespace {

constexpr SettingSpec kDestinationSettings[] = {
    {"url", SettingType::string, "", true,
     "Server and database: mysql://user:password@host:port/database (MySQL 8 or MariaDB 10.11). "
     "User, password and database are percent-decoded; the port defaults to 3306.",
     {}, /*secret=*/true},
    {"table", SettingType::string, "{{table}}", false,
     "Table each record is written to: a template where {{table}} and {{schema}} (or any "
     "{{metadata-key}}) are replaced from the record's metadata. A record without table metadata "
     "goes to \"records\". Tables are created on first use (InnoDB, utf8mb4) with the record key as "
     "PRIMARY KEY; missing columns are added."},
    {"tls.mode", SettingType::enumeration, "preferred", false,
     "TLS to the server. disabled: never; preferred: when the server offers it; required: always, "
     "without checking the certificate; verify_ca / verify_identity: always, checking the "
     "certificate against tls.ca (libmariadb checks the host name in both).",
     "disabled,preferred,required,verify_ca,verify_identity"},
    {"tls.ca", SettingType::string, "", false,
     "PEM file of the certificate authority for tls.mode verify_ca / verify_identity."},
    {"max_statement_size", SettingType::size, "4MiB", false,
     "Largest multi-row INSERT/DELETE statement sent; keep it below the server's "
     "max_allowed_packet."},
    {"connect_timeout", SettingType::duration, "10s", false, "How long connecting may take."},
    {"checkpoint_in_destination", SettingType::boolean, "false", false,
     "Store the source position in the destination, in the same transaction as each batch (table "
     "sluice_checkpoints, in the URL's database); on restart the pipeline resumes exactly after the "
     "last batch applied, so no change is applied twice."},
};

Result<std::unique_ptr<Destination>> make_destination(const Settings& settings) {
  auto options = mysql_destination_options(settings);
  if (!options) return std::move(options).error();
  return make_mysql_destination(std::move(options.value()));
}

}  // namespace

std::span<const SettingSpec> mysql_destination_settings() noexcept { return kDestinationSettings; }

Result<MysqlDestinationOptions> mysql_destination_options(const Settings& settings) {
  MysqlDestinationOptions o;
  o.url = settings.get_string("url");
  if (settings.has("table")) o.table = settings.get_string("table");
  if (settings.has("tls.mode")) o.tls_mode = settings.get_string("tls.mode");
  if (settings.has("tls.ca")) o.tls_ca = settings.get_string("tls.ca");
  if (settings.has("max_statement_size")) o.max_statement_size = settings.get_size("max_statement_size");
  if (settings.has("connect_timeout")) o.connect_timeout = settings.get_duration("connect_timeout");
  if (settings.has("checkpoint_in_destination"))
    o.checkpoint_in_destination = settings.get_bool("checkpoint_in_destination");
  return o;
}

ConnectorSpec mysql_connector() {
  return ConnectorSpec{
      .name = "mysql",
      .summary = "MySQL/MariaDB: consistent snapshot, then row-based binlog CDC (GTID positions on MariaDB); "
                 "writes records as idempotent multi-row upserts and deletes by key.",
      .source_settings = mysql_source_settings(),
      .destination_settings = kDestinationSettings,
      .make_source = &make_mysql_source,
      .make_destination = &make_destination,
  };
}

}  // namespace sluice
