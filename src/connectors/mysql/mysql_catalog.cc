// The catalogue side of the mysql source: which tables it captures, their columns and keys from
// information_schema, and the binlog's TABLE_MAP events matched to them.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "connectors/mysql/mysql_source_driver.h"

namespace sluice::mysql {

Status MysqlDriver::ensure_catalog() {
  if (conn_ && mysql_ping(conn_.get()) == 0) return ok_status();
  auto c = MysqlConn::connect(opts_);
  if (!c.ok()) return std::move(c).error();
  conn_ = std::move(c.value());
  return conn_.exec("SET SESSION time_zone='+00:00'", "query failed");
}

bool MysqlDriver::captured(std::string_view db, std::string_view table) const {
  if (is_signal_table(db, table)) return false;  // its rows are signals and watermarks, not data
  for (const std::string& spec : tables_setting_) {
    if (spec == "*") {
      if (db == opts_.url.database) return true;
      continue;
    }
    const size_t dot = spec.find('.');
    if (dot == std::string::npos) {
      if (db == opts_.url.database && table == spec) return true;
      continue;
    }
    std::string_view sdb(spec.data(), dot), st(spec.data() + dot + 1, spec.size() - dot - 1);
    if (sdb == db && (st == "*" || st == table)) return true;
  }
  return false;
}

Status MysqlDriver::resolve_tables() {
  tables_.clear();
  auto rows = conn_.query(
      "SELECT TABLE_SCHEMA, TABLE_NAME, COALESCE(TABLE_ROWS, 0) FROM information_schema.TABLES WHERE "
      "TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN ('mysql', 'information_schema', "
      "'performance_schema', 'sys') ORDER BY 1, 2",
      "query failed");
  if (!rows.ok()) return std::move(rows).error();
  for (const MysqlRow& r : rows.value())
    if (captured(*r[0], *r[1])) tables_.push_back({*r[0], *r[1], std::stoll(r[2].value_or("0"))});
  // Named tables must exist.
  for (const std::string& spec : tables_setting_) {
    if (spec == "*" || spec.ends_with(".*")) continue;
    const size_t dot = spec.find('.');
    const std::string db = dot == std::string::npos ? opts_.url.database : spec.substr(0, dot);
    const std::string t = dot == std::string::npos ? spec : spec.substr(dot + 1);
    bool found = is_signal_table(db, t);  // listed, but consumed rather than captured
    for (const TableRef& r : tables_) found |= r.db == db && r.table == t;
    if (!found)
      return Error(Errc::not_found,
                   fmt::format("table {}.{} does not exist on {} (or the user cannot see it: GRANT "
                               "SELECT ON {}.{} TO '{}'); check `tables`",
                               quote_identifier(db), quote_identifier(t), opts_.url.redacted(),
                               quote_identifier(db), quote_identifier(t), opts_.url.user));
  }
  for (const TableRef& r : tables_) {
    const std::string sql = fmt::format("SELECT 1 FROM {}.{} LIMIT 0", quote_identifier(r.db),
                                        quote_identifier(r.table));
    if (mysql_real_query(conn_.get(), sql.data(), sql.size()) != 0) {
      Error e = server_error(conn_.get(), "");
      if (e.code() == Errc::permission)
        return Error(Errc::permission,
                     fmt::format("user '{}' cannot read {}.{}: GRANT SELECT ON {}.* TO '{}'",
                                 opts_.url.user, quote_identifier(r.db), quote_identifier(r.table),
                                 quote_identifier(r.db), opts_.url.user));
      return e.with_context(
          fmt::format("cannot read {}.{}", quote_identifier(r.db), quote_identifier(r.table)));
    }
    if (MysqlResult res{mysql_store_result(conn_.get())}) {
    }
  }
  std::vector<std::pair<std::string, std::string>> captured;
  for (const TableRef& r : tables_) captured.emplace_back(r.db, r.table);
  SLUICE_TRY(check_key_columns_captured(message_key_columns_, captured, quote_identifier));
  return ok_status();
}

Result<std::shared_ptr<const TableSchema>> MysqlDriver::load_schema(const std::string& db,
                                                                    const std::string& table) {
  if (Status st = ensure_catalog(); !st.ok()) return st.error();
  auto t = std::make_shared<TableSchema>();
  t->db = db;
  t->table = table;
  auto cols = conn_.query(
      fmt::format("SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, COALESCE(CHARACTER_SET_NAME, ''), "
                  "COLUMN_KEY FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = {} AND "
                  "TABLE_NAME = {} ORDER BY ORDINAL_POSITION",
                  conn_.quoted(db), conn_.quoted(table)),
      "query failed");
  if (!cols.ok())
    return cols.error().with_context(fmt::format("cannot read the columns of {}.{}: ", db, table));
  auto checks =
      conn_.query(fmt::format("SELECT CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS WHERE "
                              "CONSTRAINT_SCHEMA = {} AND TABLE_NAME = {}",
                              conn_.quoted(db), conn_.quoted(table)),
                  "query failed");
  auto pk = conn_.query(
      fmt::format("SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = {} "
                  "AND TABLE_NAME = {} AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX",
                  conn_.quoted(db), conn_.quoted(table)),
      "query failed");
  if (!pk.ok()) return pk.error().with_context("cannot read the primary key: ");
  auto coll = conn_.query(
      fmt::format("SELECT COALESCE(TABLE_COLLATION, '') FROM information_schema.TABLES WHERE "
                  "TABLE_SCHEMA = {} AND TABLE_NAME = {}",
                  conn_.quoted(db), conn_.quoted(table)),
      "query failed");
  if (coll.ok() && !coll.value().empty()) {
    const std::string c = coll.value()[0][0].value_or("");
    t->charset = c.substr(0, c.find('_'));
  }
  for (const MysqlRow& r : cols.value()) {
    std::string data_type = r[1].value_or("");
    std::string column_type = r[2].value_or("");
    for (auto& ch : data_type) ch = char(std::tolower(uint8_t(ch)));
    bl::ColumnInfo c =
        column_info(r[0].value_or(""), data_type, column_type, r[3].value_or(""), std::string());
    // A text column always has a character set here; one without is binary (or not text).
    if (!r[3] || r[3]->empty()) {
      c.text = bl::ColumnInfo::Text::binary;
      if (data_type == "enum" || data_type == "set") c.text = bl::ColumnInfo::Text::utf8;
    }
    if (checks.ok())
      for (const MysqlRow& ck : checks.value())
        if (ck[0] && (*ck[0] == "json_valid(`" + c.name + "`)")) c.json = true;
    t->cols.push_back(std::move(c));
    t->data_types.push_back(std::move(data_type));
    t->column_types.push_back(std::move(column_type));
  }
  for (const MysqlRow& r : pk.value())
    for (uint32_t i = 0; i < t->cols.size(); ++i)
      if (t->cols[i].name == r[0].value_or("")) t->key.push_back(i);
  if (auto configured = message_key_columns_.find({db, table});
      configured != message_key_columns_.end()) {
    // message.key.columns: the key of a table that has none of its own.
    if (!t->key.empty())
      return Error(Errc::config,
                   fmt::format("setting 'message.key.columns': {}.{} has a primary key, which is "
                               "its records' key; remove the table from message.key.columns",
                               quote_identifier(db), quote_identifier(table)));
    for (const std::string& name : configured->second) {
      uint32_t i = 0;
      // MySQL column names compare case-insensitively.
      auto same = [](std::string_view a, std::string_view b) {
        if (a.size() != b.size()) return false;
        for (size_t k = 0; k < a.size(); ++k)
          if (std::tolower(uint8_t(a[k])) != std::tolower(uint8_t(b[k]))) return false;
        return true;
      };
      while (i < t->cols.size() && !same(t->cols[i].name, name)) ++i;
      if (i == t->cols.size())
        return Error(
            Errc::config,
            fmt::format("setting 'message.key.columns': {}.{} has no column {}",
                        quote_identifier(db), quote_identifier(table), quote_identifier(name)));
      t->key.push_back(i);
    }
    t->key_from_setting = true;
  }
  if (t->key.empty() && !t->cols.empty())
    spdlog::warn(
        "pipeline {}: table {}.{} has no primary key: its records carry no key, so destinations cannot upsert "
        "or delete them by key (add a primary key)",
        ctx_.pipeline_id, quote_identifier(db), quote_identifier(table));
  return std::shared_ptr<const TableSchema>(t);
}

Status MysqlDriver::save_history() {
  if (!ctx_.history) return ok_status();
  if (Status st = ctx_.history->save(history_.encode()); !st.ok())
    return st.error().with_context("cannot save the mysql schema history: ");
  return ok_status();
}

// Seeds the history with the catalogue's columns at `at` for every captured table (`all`: a new
// snapshot starts there) or for those that have no entry at or before it.
Status MysqlDriver::seed_history(const BinlogCoord& at, bool all) {
  if (all) history_.clear();
  bool changed = all;
  for (const TableRef& r : tables_) {
    const std::string key = r.db + "." + r.table;
    if (!all && history_.at(key, at)) continue;
    auto s = load_schema(r.db, r.table);
    if (!s.ok()) return std::move(s).error();
    if (!all)
      spdlog::info(
          "pipeline {}: schema history of {}.{} starts at {}:{} with the catalogue's columns",
          ctx_.pipeline_id, quote_identifier(r.db), quote_identifier(r.table), at.file, at.pos);
    history_.record(key, at, s.value());
    changed = true;
  }
  return changed ? save_history() : ok_status();
}

Status MysqlDriver::rewind_schemas(const BinlogCoord& at) {
  SLUICE_TRY(seed_history(at, false));
  // The first stream start of this run is at the checkpoint (later ones, after a lost
  // connection, may be ahead of what is durable): what lies before it is never read again.
  if (!history_pruned_) {
    history_pruned_ = true;
    if (history_.prune_before(at)) SLUICE_TRY(save_history());
  }
  schemas_.clear();
  maps_.clear();
  for (const std::string& key : history_.tables())
    if (auto s = history_.at(key, at); s && *s) schemas_[key] = *s;
  return ok_status();
}

// A TABLE_MAP names the table of the rows events after it: its columns are the schema history's
// at this point (or, with binlog_row_metadata=FULL, the names the event carries), checked against
// the event's column count and types, so that values never land in the wrong columns.
Status MysqlDriver::on_table_map(bl::TableMap map, uint32_t event_pos) {
  auto it = maps_.find(map.table_id);
  if (it != maps_.end() && it->second.map.same_shape(map) &&
      it->second.map.database == map.database && it->second.map.table == map.table)
    return ok_status();
  TableMapState ms;
  ms.map = std::move(map);
  ms.generation = ++map_generation_;
  if (is_signal_table(ms.map.database, ms.map.table)) {
    // Watermarks and signals: decoded with the catalogue's columns, never recorded in the schema
    // history, never emitted.
    auto s = load_schema(ms.map.database, ms.map.table);
    if (!s.ok()) return std::move(s).error();
    ms.signal = true;
    ms.schema = s.value();
    for (const auto& c : ms.schema->cols) ms.names.push_back(c.name);
    if (ms.names.size() != ms.map.types.size())
      return Error(Errc::unsupported,
                   fmt::format("signal table {}.{}: the row events at {}:{} have {} columns, the "
                               "table {}; keep it as id, type, data",
                               quote_identifier(ms.map.database), quote_identifier(ms.map.table),
                               cur_file_, event_pos, ms.map.types.size(), ms.names.size()));
    maps_[ms.map.table_id] = std::move(ms);
    return ok_status();
  }
  if (captured(ms.map.database, ms.map.table)) {
    const std::string key = ms.map.database + "." + ms.map.table;
    auto sit = schemas_.find(key);
    std::shared_ptr<const TableSchema> schema;
    bool seeded = false;
    if (sit != schemas_.end()) {
      schema = sit->second;
    } else {
      // A table created (LIKE / AS SELECT) or renamed in since the history began: the catalogue.
      auto s = load_schema(ms.map.database, ms.map.table);
      if (!s.ok()) return std::move(s).error();
      schema = s.value();
      seeded = true;
    }
    if (!ms.map.column_names.empty()) {
      // binlog_row_metadata=FULL names the columns as they were when the event was written:
      // exact even when replaying events from before a DDL.
      bool same = schema->cols.size() == ms.map.column_names.size();
      for (size_t i = 0; same && i < schema->cols.size(); ++i)
        same = schema->cols[i].name == ms.map.column_names[i];
      if (!same || !ms.map.is_unsigned.empty()) {
        auto copy = std::make_shared<TableSchema>();
        copy->db = schema->db;
        copy->table = schema->table;
        copy->charset = schema->charset;
        for (size_t i = 0; i < ms.map.column_names.size(); ++i) {
          const std::string& name = ms.map.column_names[i];
          bl::ColumnInfo ci;
          std::string data_type, column_type;
          for (size_t j = 0; j < schema->cols.size(); ++j)
            if (schema->cols[j].name == name) {
              ci = schema->cols[j];
              data_type = schema->data_types[j];
              column_type = j < schema->column_types.size() ? schema->column_types[j] : "";
            }
          ci.name = name;
          if (!ms.map.is_unsigned.empty()) ci.is_unsigned = ms.map.is_unsigned[i];
          copy->cols.push_back(std::move(ci));
          copy->data_types.push_back(std::move(data_type));
          copy->column_types.push_back(std::move(column_type));
        }
        for (uint32_t k : schema->key)
          for (uint32_t i = 0; i < copy->cols.size(); ++i)
            if (copy->cols[i].name == schema->cols[k].name) copy->key.push_back(i);
        copy->key_from_setting = schema->key_from_setting;
        schema = copy;
      }
    } else {
      std::string mismatch;
      if (schema->cols.size() != ms.map.types.size()) {
        mismatch = fmt::format("{} columns in the binlog, {} in the {}", ms.map.types.size(),
                               schema->cols.size(),
                               seeded ? "catalogue now" : "schema history at that point");
      } else {
        for (size_t i = 0; i < schema->cols.size() && mismatch.empty(); ++i)
          if (!map_type_fits(ms.map.types[i], schema->data_types[i]))
            mismatch = fmt::format("column {} ({}) is {} but the binlog has type code {}", i + 1,
                                   quote_identifier(schema->cols[i].name), schema->data_types[i],
                                   ms.map.types[i]);
      }
      if (!mismatch.empty())
        return Error(Errc::unsupported,
                     fmt::format("{}.{}: the row events at {}:{} do not match the table's "
                                 "columns ({}); sluice will not guess which value belongs to "
                                 "which column. Run `sluice cleanup` and start over with a new "
                                 "snapshot (with binlog_row_metadata = FULL on the server the "
                                 "events name their columns)",
                                 quote_identifier(ms.map.database), quote_identifier(ms.map.table),
                                 cur_file_, event_pos, mismatch));
    }
    if (seeded) {
      schemas_[key] = schema;
      history_.record(key, BinlogCoord{cur_file_, event_pos}, schema);
      if (Status st = save_history(); !st.ok()) return st;
    }
    ms.schema = schema;
    ms.key = schema->key;
    for (const auto& c : schema->cols) ms.names.push_back(c.name);
  }
  maps_[ms.map.table_id] = std::move(ms);
  return ok_status();
}

}  // namespace sluice::mysql
