// QUERY events in the binlog: DDL on a captured table moves its entry in the schema history
// (mysql_schema_history.h) and becomes schema records (include/sluice/schema_change.h); TRUNCATE
// becomes a record; DML (a session writing with binlog_format STATEMENT or MIXED) on a captured
// table stops the source, since those changes carry no row images. Account statements, which can
// carry passwords, are never echoed (the parser sees them as `other`).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "sluice/schema_change.h"

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

Status MysqlDriver::emit_changes(Batch& batch, const TableSchema& t,
                                 const std::vector<ColumnChange>& changes, uint32_t event_pos) {
  for (const ColumnChange& ch : changes) {
    if (!st_->tx.next_change()) continue;  // written before the restart
    SchemaChange sc;
    sc.kind = ch.kind;
    sc.column = batch.copy(ch.column);
    sc.to = batch.copy(ch.to);
    sc.type = batch.copy(ch.type);
    sc.from = batch.copy(ch.from);
    if (ch.has_default) {
      // Read as the added column (later clauses of the statement may move or rename it); enum
      // values point into its labels: the column description lives as long as the batch.
      auto one = std::make_shared<TableSchema>();
      one->db = t.db;
      one->table = t.table;
      one->cols.push_back(ch.info);
      one->data_types.push_back(ch.data_type);
      batch.retain(one);
      auto v = text_to_value(*one, 0, ch.default_text, batch.arena(), zero_dates_null_);
      if (!v.ok())
        return Error(Errc::unsupported,
                     fmt::format("{}.{}: added column {} has DEFAULT {} that sluice cannot read as "
                                 "{} ({}); run `sluice cleanup` and start over with a new "
                                 "snapshot after the change",
                                 quote_identifier(t.db), quote_identifier(t.table),
                                 quote_identifier(ch.column), quote_user_text(ch.default_text),
                                 ch.type, v.error().message()));
      sc.default_value = v.value();
    }
    Record& rec = batch.add();
    rec.position = {};
    rec.metadata = metadata(batch, t, event_pos, true);
    set_schema_change(batch, rec, sc);
  }
  return ok_status();
}

// A QUERY event (not BEGIN / COMMIT): DDL keeps the schema history and becomes schema records,
// TRUNCATE a record; DML here means a statement-based change of a captured table, which the
// source cannot read.
namespace {

// The statement as it may appear in a log line or an error: quoted and cut, or not at all when it
// may carry a password (a CONNECTION string, IDENTIFIED BY, PASSWORD).
std::string shown(std::string_view sql, size_t max) {
  std::string upper;
  for (char ch : sql.substr(0, 4096)) upper += char(std::toupper(uint8_t(ch)));
  for (const char* kw : {"IDENTIFIED", "PASSWORD", "CONNECTION"})
    if (upper.find(kw) != std::string::npos)
      return "(a statement not shown: it may carry a secret)";
  return quote_user_text(sql.substr(0, max));
}

}  // namespace

Status MysqlDriver::on_query(Batch& batch, std::string_view db, std::string_view sql,
                             uint32_t event_pos, uint32_t next_pos) {
  const ddl::Statement st = ddl::parse_statement(sql, db);
  const BinlogCoord after{cur_file_, next_pos};
  const std::string where = fmt::format("{}:{}", cur_file_, event_pos);
  auto name_of = [](const ddl::QualifiedName& n) {
    return quote_identifier(n.db) + "." + quote_identifier(n.table);
  };
  auto key_of = [](const ddl::QualifiedName& n) { return n.db + "." + n.table; };
  if (st.kind == ddl::Statement::Kind::dml) {
    for (const ddl::QualifiedName& n : st.tables)
      if (captured(n.db, n.table))
        return Error(
            Errc::unsupported,
            fmt::format("statement-based change of {} in the binlog at {} ({}): sluice reads row "
                        "events only, so this change would be lost. Set binlog_format = ROW for "
                        "every writer (SET GLOBAL binlog_format = ROW and in the server "
                        "configuration; no session may SET SESSION binlog_format = STATEMENT or "
                        "MIXED), then run `sluice cleanup` and start over with a new snapshot",
                        name_of(n), where, shown(sql, 120)));
    return ok_status();
  }
  if (st.kind == ddl::Statement::Kind::other) return ok_status();
  // Account statements never reach here (they are `other`), so the statement may be logged.
  spdlog::info("pipeline {}: DDL in {}: {}", ctx_.pipeline_id, quote_identifier(db),
               shown(sql, 200));
  if (st.temporary) return ok_status();  // temporary tables are not in the row stream
  auto cannot = [&](const ddl::QualifiedName& n, std::string_view why) {
    return Error(Errc::unsupported,
                 fmt::format("cannot follow {} on {} at {}: {}. The schema history cannot tell "
                             "the columns of the rows after it; run `sluice cleanup` and start "
                             "over with a new snapshot after the change",
                             shown(sql, 200), name_of(n), where, why));
  };
  // A table renamed from or into the captured set: the rows after it would go to a table the
  // destination does not know (while the old one goes stale), or a table's existing rows would
  // never be copied — stop instead.
  auto renamed = [&](const ddl::QualifiedName& from, const ddl::QualifiedName& to) {
    return Error(Errc::unsupported,
                 fmt::format("{} was renamed to {} in the binlog at {}: sluice does not follow "
                             "table renames (the rows after it would go to a new table while the "
                             "old one goes stale): name the new table in `tables`, then run "
                             "`sluice cleanup` and start over with a new snapshot",
                             name_of(from), name_of(to), where));
  };
  if (st.kind == ddl::Statement::Kind::alter_table && !st.tables.empty() && st.error.empty())
    for (const ddl::AlterClause& a : st.clauses)
      if (a.kind == ddl::AlterClause::Kind::rename_table && !(a.new_table == st.tables[0]) &&
          (captured(st.tables[0].db, st.tables[0].table) ||
           captured(a.new_table.db, a.new_table.table)))
        return renamed(st.tables[0], a.new_table);
  if (st.kind == ddl::Statement::Kind::rename_table && st.error.empty())
    for (size_t i = 0; i + 1 < st.tables.size(); i += 2)
      if (captured(st.tables[i].db, st.tables[i].table) ||
          captured(st.tables[i + 1].db, st.tables[i + 1].table))
        return renamed(st.tables[i], st.tables[i + 1]);
  bool changed = false;
  switch (st.kind) {
    case ddl::Statement::Kind::alter_table: {
      if (st.tables.empty()) return ok_status();
      const ddl::QualifiedName& n = st.tables[0];
      if (!captured(n.db, n.table)) {
        // Renamed into the captured set: its columns come from the catalogue at its first
        // TABLE_MAP (checked against it).
        break;
      }
      if (!st.error.empty()) return cannot(n, st.error);
      auto it = schemas_.find(key_of(n));
      if (it == schemas_.end() || !it->second)
        return cannot(n, "the table has no entry in the schema history here");
      std::vector<ColumnChange> changes;
      auto next = apply_alter(*it->second, st, &changes);
      if (!next.ok()) return cannot(n, next.error().message());
      std::shared_ptr<const TableSchema> t = std::move(next.value());
      // A column whose old rows read what only the server knows: the table is read again by an
      // incremental snapshot (it needs the signal table for its watermarks and a primary key to
      // read in key order); otherwise the stop, naming the way out.
      std::string reread;
      for (const ColumnChange& ch : changes)
        if (!ch.reread.empty() && reread.empty()) reread = ch.reread;
      if (!reread.empty() && signal_name_.empty())
        return cannot(n, reread +
                             " (with `signal.table` set, sluice reads the table again "
                             "instead: docs/incremental-snapshots.md)");
      if (!reread.empty() && (t->key.empty() || t->key_from_setting))
        return cannot(n, reread + " (the table has no primary key to read it again by)");
      batch.retain(t);
      SLUICE_TRY(emit_changes(batch, *t, changes, event_pos));
      if (!reread.empty()) {
        const std::string name = qualified_name(t->db, t->table);
        const size_t queued = st_->incremental.add_tables(st_->position.incremental, {name});
        spdlog::warn("pipeline {}: {}: {}; reading the table again (incremental snapshot{})",
                     ctx_.pipeline_id, name, reread, queued ? "" : " already queued");
      }
      const ddl::QualifiedName to{t->db, t->table};
      if (!(to == n)) {
        schemas_.erase(key_of(n));
        history_.record(key_of(n), after, nullptr);
        spdlog::warn("pipeline {}: table {} renamed to {}{}", ctx_.pipeline_id, name_of(n),
                     name_of(to),
                     captured(to.db, to.table) ? ": its rows come under the new name"
                                               : ", which is not captured");
      }
      if (captured(to.db, to.table)) {
        schemas_[key_of(to)] = t;
        history_.record(key_of(to), after, t);
      }
      changed = true;
      break;
    }
    case ddl::Statement::Kind::create_table: {
      if (st.tables.empty() || !captured(st.tables[0].db, st.tables[0].table)) break;
      const ddl::QualifiedName& n = st.tables[0];
      if (!st.error.empty()) {
        // LIKE / AS SELECT: the columns come from the catalogue at the first TABLE_MAP.
        schemas_.erase(key_of(n));
        history_.record(key_of(n), after, nullptr);
      } else {
        auto t = schema_from_create(st);
        schemas_[key_of(n)] = t;
        history_.record(key_of(n), after, t);
      }
      changed = true;
      break;
    }
    case ddl::Statement::Kind::drop_table:
      if (!st.error.empty()) {
        return Error(Errc::unsupported,
                     fmt::format("cannot read {} at {}: {}; run `sluice cleanup` and start over "
                                 "with a new snapshot",
                                 shown(sql, 200), where, st.error));
      }
      for (const ddl::QualifiedName& n : st.tables)
        if (captured(n.db, n.table)) {
          schemas_.erase(key_of(n));
          history_.record(key_of(n), after, nullptr);
          changed = true;
        }
      break;
    case ddl::Statement::Kind::rename_table:
      if (!st.error.empty()) {
        return Error(Errc::unsupported,
                     fmt::format("cannot read {} at {}: {}; run `sluice cleanup` and start over "
                                 "with a new snapshot",
                                 shown(sql, 200), where, st.error));
      }
      for (size_t i = 0; i + 1 < st.tables.size(); i += 2) {
        const ddl::QualifiedName& from = st.tables[i];
        const ddl::QualifiedName& to = st.tables[i + 1];
        std::shared_ptr<const TableSchema> t;
        if (auto it = schemas_.find(key_of(from)); it != schemas_.end()) t = it->second;
        if (captured(from.db, from.table)) {
          schemas_.erase(key_of(from));
          history_.record(key_of(from), after, nullptr);
          changed = true;
        }
        if (captured(to.db, to.table)) {
          std::shared_ptr<TableSchema> moved;
          if (t) {
            moved = std::make_shared<TableSchema>(*t);
            moved->db = to.db;
            moved->table = to.table;
            schemas_[key_of(to)] = moved;
          } else {
            schemas_.erase(key_of(to));  // from the catalogue at its first TABLE_MAP
          }
          history_.record(key_of(to), after, moved);
          changed = true;
        }
        if (captured(from.db, from.table) || captured(to.db, to.table))
          spdlog::warn("pipeline {}: table {} renamed to {}", ctx_.pipeline_id, name_of(from),
                       name_of(to));
      }
      break;
    case ddl::Statement::Kind::truncate: {
      if (st.tables.empty() || !captured(st.tables[0].db, st.tables[0].table)) break;
      // TRUNCATE [TABLE] name: one key-less delete marked `truncate`; keyed destinations empty
      // the table.
      incremental_truncate(st.tables[0].db, st.tables[0].table);  // the chunk read is stale
      if (!st_->tx.next_change()) break;                          // written before the restart
      auto t = std::make_shared<TableSchema>();
      t->db = st.tables[0].db;
      t->table = st.tables[0].table;
      batch.retain(t);
      Record& rec = batch.add();
      rec.op = Operation::remove;
      ObjectBuilder m = batch.object(10);
      for (const Field& f : metadata(batch, *t, event_pos, true).fields()) m.add(f.name, f.value);
      m.add(meta::kTruncate, Value::string("true"));
      rec.metadata = m.build();
      break;
    }
    default: break;
  }
  // Table ids are re-resolved against the new state at the next TABLE_MAP.
  maps_.clear();
  if (changed) return save_history();
  return ok_status();
}

}  // namespace sluice::mysql
