// The `mysql` destination (MySQL 8, MariaDB 10.11): keyed, idempotent writes through libmariadb.
//
//   write(batch) ──▶ schema pass: per table, CREATE TABLE IF NOT EXISTS / ALTER TABLE ADD COLUMN
//                    (DDL commits implicitly in MySQL, so it runs before the batch's transaction)
//                ──▶ START TRANSACTION
//                    runs of consecutive records with the same table and column set:
//                      upserts ─▶ INSERT INTO t(cols) VALUES (..),(..) ON DUPLICATE KEY UPDATE
//                      c=VALUES(c) deletes ─▶ DELETE FROM t WHERE (k1,k2) IN ((..),(..)) truncate
//                      (key-less delete, metadata truncate=true) ─▶ DELETE FROM t
//                    (statements up to `max_statement_size`, literals escaped by the client
//                    library) COMMIT ──▶ done(ok)        any error: ROLLBACK ──▶ done(error)
//
// Runs keep record order, so a delete after an upsert of the same key wins and vice versa; within
// one INSERT, MySQL applies rows in order, so the latest record of a key wins. Only the fields
// present in `after` are written: an absent field keeps the stored value, a null one sets NULL.
// Deadlocks, lock wait timeouts and lost connections are retriable (the next write reconnects);
// rejected values are Errc::data, naming the table and the record key (the failing batch is
// replayed one row per statement to find the record).
//
// Column types, chosen from the first value seen of a field (the table is created from the first
// record; a new field adds a column):
//
//   value kind   column type                        written as
//   ──────────   ─────────────────────────────────  ─────────────────────────────────────────────
//   bool         TINYINT(1)                         0 / 1
//   int64        BIGINT                             decimal digits
//   uint64       BIGINT UNSIGNED                    decimal digits
//   float64      DOUBLE                             shortest round-trip form (NaN/±Inf: below)
//   decimal      DECIMAL(65,30) if it fits (≤ 35    quoted exact text; a decimal that does not fit
//                integer and ≤ 30 fraction digits), (more digits, NaN, ±Infinity) creates LONGTEXT
//                else LONGTEXT                      holding the exact text
//   string       LONGTEXT (utf8mb4)                 escaped literal
//   bytes        LONGBLOB                           hex literal X'..'
//   date         DATE                               'YYYY-MM-DD'
//   time         TIME(6)                            'hh:mm:ss.ffffff'
//   timestamp    DATETIME(6)                        'YYYY-MM-DD hh:mm:ss.ffffff'
//   timestamptz  DATETIME(6), in UTC                the UTC wall time (session time_zone '+00:00')
//   timetz       VARCHAR(32)                        '13:45:00+02:00'
//   interval     VARCHAR(255)                       ISO 8601 duration 'P1Y2M3DT4H5M6.5S'
//   uuid         CHAR(36)                           8-4-4-4-12 lowercase hex
//   json         JSON (MariaDB: LONGTEXT + JSON_VALID check, which MariaDB's JSON alias is)
//   array/object JSON                               the value encoded as JSON
//   null         LONGTEXT when a column is created from a null
//
// Values MySQL cannot store — NaN and ±Infinity, a date or timestamp outside the years 0..9999
// (PostgreSQL's ±infinity among them), a time beyond ±838:59:59.999999 — reject the record
// (Errc::data, naming table, key and field: the dead-letter queue with on_error: dlq, else a stop),
// or with `unrepresentable_values: null` set the column to NULL. Never an invented value.
//
// Key columns (PRIMARY KEY) need a bounded type: string → VARCHAR(255) utf8mb4_bin (exact,
// case-sensitive comparison), bytes → VARBINARY(255), json/array/object → VARCHAR(255)
// utf8mb4_bin; other kinds as above. Tables are ENGINE=InnoDB DEFAULT CHARSET=utf8mb4.
//
// Built on the keyed SQL layer (src/connectors/sql/, docs/development/sql-destinations.md): the
// planning, runs, schema evolution and transaction flow are shared; this file's dialect and
// writer supply the SQL text and the fast path.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "sluice/connector.h"
#include "sluice/settings.h"

namespace sluice {

struct MysqlDestinationOptions {
  std::string url;                            // mysql://user:password@host:port/database
  std::string user, password, password_file;  // override the URL's user and password
  std::string table = "{{table}}";  // template: {{table}}, {{schema}}, any {{metadata-key}}
  std::string tls_mode =
      "preferred";     // disabled | preferred | required | verify_ca | verify_identity
  std::string tls_ca;  // CA file for verify_ca / verify_identity
  std::string tls_cert, tls_key, tls_key_password;  // client certificate, key, its passphrase
  uint64_t max_statement_size = 4u << 20;
  std::chrono::milliseconds connect_timeout{10000};
  // A statement's reply (or a send) that takes longer: the connection is taken for dead.
  std::chrono::milliseconds query_timeout{60000};
  std::chrono::milliseconds tcp_user_timeout{30000};  // TCP keepalives + TCP_USER_TIMEOUT
  // Commit each batch's source position into table sluice_checkpoints (in the URL's database) in
  // the batch's transaction; stored_position() reads it back.
  bool checkpoint_in_destination = false;
  // A value MySQL cannot store (NaN, ±Infinity, a year beyond 0..9999, a time beyond ±838 h):
  // "reject" the record (Errc::data: the dead-letter queue or a stop) or write "null".
  std::string unrepresentable_values = "reject";
  bool keep_dropped_columns = false;  // schema.keep_dropped_columns
  std::string reconcile = "sweep";    // snapshot.reconcile: sweep | truncate | none
};

// The destination's settings table (see mysql_connector.cc).
std::span<const SettingSpec> mysql_destination_settings() noexcept;

Result<MysqlDestinationOptions> mysql_destination_options(const Settings& settings);

// Fails (invalid_argument) on a malformed URL or table template; connects in open().
Result<std::unique_ptr<Destination>> make_mysql_destination(MysqlDestinationOptions options);

}  // namespace sluice
