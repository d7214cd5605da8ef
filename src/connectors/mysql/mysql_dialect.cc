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
      return decimal_fits(v.as_text()) ? "DECIMAL(65,30)"
             : key                     ? kKeyText
                                       : "LONGTEXT CHARACTER SET utf8mb4";
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

}  // namespace

// `name` quoted with backticks, embedded backticks doubled.
void MysqlDialect::append_identifier(std::string& out, std::string_view name) const {
  append_delimited(out, name, '`');
}

// The column type of a field, from its first value (see the table in mysql_destination.h).
std::string MysqlDialect::column_type(const Value& sample, bool key) const {
  return std::string(type_for(sample, key));
}

void MysqlDialect::append_upsert_tail(std::string& out,
                                      std::span<const sql::ColumnRef> columns) const {
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
  append_column_list(out, keys, false);
  out += composite ? ") IN (" : " IN (";
}

std::string MysqlDialect::alter_column_type(std::string_view table, std::string_view column,
                                            std::string_view type) const {
  std::string sql = "ALTER TABLE " + std::string(table) + " MODIFY COLUMN ";
  append_identifier(sql, column);
  sql += ' ';
  sql += type;
  sql += nullable_constraint();
  return sql;
}

std::string MysqlDialect::move_row(std::string_view table, std::span<const Field> old_key,
                                   std::span<const Field> new_key) const {
  std::string sql = "UPDATE IGNORE " + std::string(table) + " SET ";
  for (size_t i = 0; i < new_key.size(); ++i) {
    if (i) sql += ", ";
    append_identifier(sql, new_key[i].name);
    sql += " = ";
    append_literal(sql, new_key[i].value);
  }
  sql += " WHERE ";
  for (size_t i = 0; i < old_key.size(); ++i) {
    if (i) sql += " AND ";
    append_identifier(sql, old_key[i].name);
    sql += " = ";
    append_literal(sql, old_key[i].value);
  }
  return sql;
}

void MysqlDialect::append_string_literal(std::string& out, std::string_view text) const {
  out += '\'';
  for (char c : text) {
    if (c == '\'' || c == '\\') out += c;
    out += c;
  }
  out += '\'';
}

std::string MysqlDialect::checkpoint_table_ddl(std::string_view table) const {
  return "CREATE TABLE IF NOT EXISTS " + std::string(table) +
         " (`pipeline` VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY, `position` "
         "LONGBLOB NOT NULL, `updated_at` DATETIME(6) NOT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4";
}

sql::ErrorClass MysqlDialect::classify(unsigned errno_value) noexcept {
  const ErrnoClass c = classify_errno(errno_value);
  return {c.code, c.retriable, c.connection_lost};
}

}  // namespace sluice::mysql
