#include "support/readers.h"

#include <algorithm>

#include "support/kafka.h"
#include "support/process.h"
#include "support/sqlite.h"

namespace sluice::test {

Rows sorted(Rows rows) {
  std::sort(rows.begin(), rows.end());
  return rows;
}

namespace {
std::string select_list(const std::vector<std::string>& columns,
                        std::string (*quote)(const std::string&), const std::string& cast) {
  std::string s;
  for (const auto& c : columns) s += (s.empty() ? "" : ", ") + quote(c) + cast;
  return s;
}
std::string sqlite_ident(const std::string& s) { return pg_ident(s); }
}  // namespace

std::optional<Rows> read_pg_table(PgClient& c, const std::string& schema, const std::string& table,
                                  const std::vector<std::string>& columns) {
  const std::string exists =
      c.scalar("SELECT to_regclass(" + sql_literal(pg_ident(schema) + "." + pg_ident(table)) +
               ") IS NOT NULL");
  if (exists != "t") return std::nullopt;
  return sorted(c.query("SELECT " + select_list(columns, pg_ident, "::text") + " FROM " +
                        pg_ident(schema) + "." + pg_ident(table)));
}

std::optional<Rows> read_mysql_table(MysqlClient& c, const std::string& table,
                                     const std::vector<std::string>& columns) {
  const std::string n = c.scalar(
      "SELECT count(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = " +
      sql_literal(table));
  if (n != "1") return std::nullopt;
  return sorted(
      c.query("SELECT " + select_list(columns, my_ident, "") + " FROM " + my_ident(table)));
}

std::optional<Rows> read_sqlite_table(const std::filesystem::path& file, const std::string& table,
                                      const std::vector<std::string>& columns) {
  if (!std::filesystem::exists(file)) return std::nullopt;
  try {
    SqliteFile db(file);
    if (db.scalar("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = " +
                  sql_literal(table)) != 1)
      return std::nullopt;
    auto rows = db.rows("SELECT " + select_list(columns, sqlite_ident, "") + " FROM " +
                        sqlite_ident(table));
    if (!rows) return std::nullopt;
    return sorted(std::move(*rows));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

Rows read_jsonl_file(const std::filesystem::path& file) {
  Rows rows;
  for (const auto& line : lines_of(read_file(file)))
    if (!line.empty()) rows.push_back({line});
  return sorted(std::move(rows));
}

Rows read_kafka_topic(const std::string& topic, size_t expect, std::chrono::milliseconds timeout) {
  Rows rows;
  for (const auto& m : consume_all(topic, expect, timeout)) rows.push_back({m.key, m.value});
  return sorted(std::move(rows));
}

std::string show(const Rows& rows) {
  std::string s;
  for (const auto& r : rows) s += "  " + joined(r) + "\n";
  return s.empty() ? "  (no rows)\n" : s;
}

}  // namespace sluice::test
