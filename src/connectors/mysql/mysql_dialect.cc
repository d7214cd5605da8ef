#include "connectors/mysql/mysql_dialect.h"

#include "connectors/mysql/mysql_connection.h"

namespace sluice::mysql {

bool decimal_fits(std::string_view s) noexcept {
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  size_t int_digits = 0, frac_digits = 0;
  bool seen_point = false, leading = true, any = false;
  for (char c : s) {
    if (c == '.') {
      if (seen_point) return false;
      seen_point = true;
      continue;
    }
    if (c < '0' || c > '9') return false;
    any = true;
    if (seen_point) {
      ++frac_digits;
    } else {
      if (leading && c == '0') continue;
      leading = false;
      ++int_digits;
    }
  }
  return any && int_digits <= 35 && frac_digits <= 30;
}

namespace {

constexpr std::string_view kKeyText = "VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin";

std::string_view type_for(const Value& v, bool key) {
  switch (v.kind()) {
    case ValueKind::boolean: return "TINYINT(1)";
    case ValueKind::int64: return "BIGINT";
    case ValueKind::uint64: return "BIGINT UNSIGNED";
    case ValueKind::float64: return "DOUBLE";
    case ValueKind::decimal:
      return decimal_fits(v.as_text()) ? "DECIMAL(65,30)" : key ? kKeyText : "LONGTEXT CHARACTER SET utf8mb4";
    case ValueKind::string: return key ? kKeyText : "LONGTEXT CHARACTER SET utf8mb4";
    case ValueKind::bytes: return key ? "VARBINARY(255)" : "LONGBLOB";
    case ValueKind::date: return "DATE";
    case ValueKind::time: return "TIME(6)";
    case ValueKind::timestamp:
    case ValueKind::timestamptz: return "DATETIME(6)";
    case ValueKind::timetz: return "VARCHAR(32)";
    case ValueKind::interval: return "VARCHAR(255)";
    case ValueKind::uuid: return "CHAR(36)";
    case ValueKind::json:
    case ValueKind::array:
    case ValueKind::object: return key ? kKeyText : "JSON";
    case ValueKind::null:
    case ValueKind::absent: break;
  }
  return key ? kKeyText : "LONGTEXT CHARACTER SET utf8mb4";
}

void append_column_def(const MysqlDialect& d, std::string& sql, const sql::ColumnDef& c) {
  d.append_identifier(sql, c.name);
  sql += ' ';
  sql += type_for(*c.sample, c.key);
  sql += c.key ? " NOT NULL" : " NULL";
}

}  // namespace

// `name` quoted with backticks, embedded backticks doubled.
void MysqlDialect::append_identifier(std::string& out, std::string_view name) const {
  out += '`';
  for (char c : name) {
    if (c == '`') out += '`';
    out += c;
  }
  out += '`';
}

// The column type of a field, from its first value (see the table in mysql_destination.h).
std::string MysqlDialect::column_type(const Value& sample, bool key) const {
  return std::string(type_for(sample, key));
}

std::string MysqlDialect::create_table(std::string_view table, std::span<const sql::ColumnDef> columns) const {
  std::string sql = "CREATE TABLE IF NOT EXISTS " + std::string(table) + " (";
  for (const sql::ColumnDef& c : columns) {
    append_column_def(*this, sql, c);
    sql += ", ";
  }
  sql += "PRIMARY KEY (";
  bool first = true;
  for (const sql::ColumnDef& c : columns) {
    if (!c.key) continue;
    if (!first) sql += ',';
    first = false;
    append_identifier(sql, c.name);
  }
  sql += ")) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4";
  return sql;
}

std::string MysqlDialect::add_column(std::string_view table, const sql::ColumnDef& column) const {
  std::string sql = "ALTER TABLE " + std::string(table) + " ADD COLUMN ";
  append_column_def(*this, sql, column);
  return sql;
}

void MysqlDialect::append_upsert_tail(std::string& out, std::span<const sql::ColumnRef> columns) const {
  out += " ON DUPLICATE KEY UPDATE ";
  bool any = false;
  for (const sql::ColumnRef& c : columns) {
    if (c.key) continue;
    if (any) out += ',';
    any = true;
    append_identifier(out, c.name);
    out += "=VALUES(";
    append_identifier(out, c.name);
    out += ')';
  }
  if (any) return;
  // Only key columns: the row existing is all there is to it.
  for (const sql::ColumnRef& c : columns) {
    if (!c.key) continue;
    append_identifier(out, c.name);
    out += '=';
    append_identifier(out, c.name);
    return;
  }
}

void MysqlDialect::append_delete_head(std::string& out, std::string_view table,
                                      std::span<const sql::ColumnRef> keys) const {
  out += "DELETE FROM ";
  out += table;
  out += " WHERE ";
  const bool composite = keys.size() > 1;
  if (composite) out += '(';
  for (size_t k = 0; k < keys.size(); ++k) {
    if (k) out += ',';
    append_identifier(out, keys[k].name);
  }
  out += composite ? ") IN (" : " IN (";
}

std::string MysqlDialect::checkpoint_table_ddl(std::string_view table) const {
  return "CREATE TABLE IF NOT EXISTS " + std::string(table) +
         " (`pipeline` VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY, `position` "
         "LONGBLOB NOT NULL, `updated_at` DATETIME(6) NOT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4";
}

std::string MysqlDialect::checkpoint_upsert(std::string_view table, std::string_view pipeline,
                                            std::string_view position_hex) const {
  return "INSERT INTO " + std::string(table) + " (`pipeline`, `position`, `updated_at`) VALUES (" +
         std::string(pipeline) + ", X'" + std::string(position_hex) +
         "', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE `position` = VALUES(`position`), `updated_at` = "
         "VALUES(`updated_at`)";
}

std::string MysqlDialect::checkpoint_select(std::string_view table, std::string_view pipeline) const {
  return "SELECT `position` FROM " + std::string(table) + " WHERE `pipeline` = " + std::string(pipeline);
}

sql::ErrorClass MysqlDialect::classify(unsigned errno_value) noexcept {
  const ErrnoClass c = classify_errno(errno_value);
  return {c.code, c.retriable, c.connection_lost};
}

}  // namespace sluice::mysql
