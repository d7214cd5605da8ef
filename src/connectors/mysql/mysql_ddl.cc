// DDL in the binlog: any statement that may change a captured table's columns drops the cached
// schemas (the next TABLE_MAP re-reads information_schema); TRUNCATE becomes a record; account
// statements, which can carry passwords, are never echoed.
#include <spdlog/spdlog.h>

#include "connectors/mysql/mysql_source_driver.h"

namespace sluice::mysql {

// `name`, `db`.`name` or db.name (quotes optional) → (db, name), from the start of `s`.
std::optional<std::pair<std::string, std::string>> parse_qualified_name(
    std::string_view s, std::string_view default_db) {
  std::vector<std::string> parts(1);
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t')) ++i;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '`') {
      for (++i; i < s.size(); ++i) {
        if (s[i] == '`') {
          if (i + 1 < s.size() && s[i + 1] == '`') {
            parts.back() += '`';
            ++i;
            continue;
          }
          break;
        }
        parts.back() += s[i];
      }
    } else if (c == '.') {
      parts.emplace_back();
    } else if (c == ' ' || c == ';' || c == '\n' || c == '\t') {
      break;
    } else {
      parts.back() += c;
    }
  }
  if (parts.size() > 2 || parts.back().empty()) return std::nullopt;
  if (parts.size() == 1) return std::make_pair(std::string(default_db), parts[0]);
  return std::make_pair(parts[0], parts[1]);
}

void MysqlDriver::on_ddl(Batch& batch, std::string_view db, std::string_view sql,
                         uint32_t event_pos) {
  // Any DDL may change a captured table's columns: forget every cached description, so the next
  // TABLE_MAP re-reads information_schema.
  std::string head;
  for (char ch : sql.substr(0, 16)) head += char(std::toupper(uint8_t(ch)));
  bool ddl = false;
  for (const char* kw : {"ALTER", "CREATE", "DROP", "RENAME", "TRUNCATE"})
    ddl |= head.starts_with(kw);
  if (!ddl) return;
  schemas_.clear();
  maps_.clear();
  // Account statements (CREATE USER ... IDENTIFIED BY, ALTER USER, GRANT) can carry passwords:
  // never echo them.
  std::string upper;
  for (char ch : sql.substr(0, 4096)) upper += char(std::toupper(uint8_t(ch)));
  bool secret =
      upper.find("IDENTIFIED") != std::string::npos || upper.find("PASSWORD") != std::string::npos;
  for (const char* kw :
       {"CREATE USER", "ALTER USER", "DROP USER", "RENAME USER", "CREATE ROLE", "CREATE SERVER",
        "ALTER SERVER", "CREATE OR REPLACE USER", "CREATE OR REPLACE SERVER"})
    secret |= upper.starts_with(kw);
  if (secret)
    spdlog::debug("pipeline {}: account or server statement in the binlog (not shown)",
                  ctx_.pipeline_id);
  else
    spdlog::info("pipeline {}: DDL in {}: {}", ctx_.pipeline_id, quote_identifier(db),
                 quote_user_text(sql.substr(0, 200)));
  if (!head.starts_with("TRUNCATE")) return;
  // TRUNCATE [TABLE] name: one key-less delete marked `truncate`; keyed destinations empty the
  // table.
  std::string_view rest = sql.substr(8);
  while (!rest.empty() && rest[0] == ' ') rest.remove_prefix(1);
  std::string word;
  for (char ch : rest.substr(0, 6)) word += char(std::toupper(uint8_t(ch)));
  if (word == "TABLE " || word == "TABLE\n") rest.remove_prefix(6);
  auto name = parse_qualified_name(rest, db);
  if (!name || !captured(name->first, name->second)) return;
  if (!st_->tx.next_change()) return;  // written before the restart
  auto t = std::make_shared<TableSchema>();
  t->db = name->first;
  t->table = name->second;
  batch.retain(t);
  Record& rec = batch.add();
  rec.op = Operation::remove;
  ObjectBuilder m = batch.object(10);
  for (const Field& f : metadata(batch, *t, event_pos, true).fields()) m.add(f.name, f.value);
  m.add(meta::kTruncate, Value::string("true"));
  rec.metadata = m.build();
}

}  // namespace sluice::mysql
