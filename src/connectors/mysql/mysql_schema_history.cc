// The schema history (see mysql_schema_history.h): applying ALTER TABLE to a table's columns, the
// TABLE_MAP check, and the history's stored form.
#include "connectors/mysql/mysql_schema_history.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdint>

#include "connectors/mysql/mysql_source_driver.h"

namespace sluice::mysql {

namespace {

bool is_text_type(std::string_view t) {
  return t == "char" || t == "varchar" || t == "tinytext" || t == "text" || t == "mediumtext" ||
         t == "longtext" || t == "enum" || t == "set" || t == "json";
}

int find_column(const TableSchema& t, std::string_view name) {
  for (size_t i = 0; i < t.cols.size(); ++i) {
    const std::string& n = t.cols[i].name;
    if (n.size() == name.size() && std::equal(n.begin(), n.end(), name.begin(), [](char a, char b) {
          return std::tolower(uint8_t(a)) == std::tolower(uint8_t(b));
        }))
      return int(i);
  }
  return -1;
}

// The value every existing row reads for an added NOT NULL column without a DEFAULT.
std::optional<std::string> implicit_default(const ddl::ColumnDef& d) {
  const std::string& t = d.data_type;
  if (t == "tinyint" || t == "smallint" || t == "mediumint" || t == "int" || t == "bigint" ||
      t == "decimal" || t == "float" || t == "double" || t == "bit")
    return std::string("0");
  if (t == "char" || t == "varchar" || t == "tinytext" || t == "text" || t == "mediumtext" ||
      t == "longtext" || t == "binary" || t == "varbinary" || t == "tinyblob" || t == "blob" ||
      t == "mediumblob" || t == "longblob" || t == "set")
    return std::string();
  if (t == "enum" && !d.labels.empty()) return d.labels[0];
  return std::nullopt;  // dates and times read zero dates, JSON reads '' or null: not as a value
}

void put(std::string& out, std::string_view s) {
  out += std::to_string(s.size());
  out += ':';
  out += s;
}

class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}
  bool get(std::string* out) {
    const size_t colon = s_.find(':');
    if (colon == std::string_view::npos) return false;
    size_t n = 0;
    auto [p, ec] = std::from_chars(s_.data(), s_.data() + colon, n);
    if (ec != std::errc() || p != s_.data() + colon || n > s_.size() - colon - 1) return false;
    *out = std::string(s_.substr(colon + 1, n));
    s_.remove_prefix(colon + 1 + n);
    return true;
  }
  bool get(uint64_t* out) {
    std::string s;
    if (!get(&s)) return false;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
    return ec == std::errc() && p == s.data() + s.size();
  }
  std::string_view rest() const { return s_; }

 private:
  std::string_view s_;
};

}  // namespace

bl::ColumnInfo column_info(const std::string& name, const std::string& data_type,
                           const std::string& column_type, const std::string& charset,
                           const std::string& table_charset) {
  bl::ColumnInfo c;
  c.name = name;
  c.is_unsigned = column_type.find("unsigned") != std::string::npos;
  std::string cs = charset;
  if (cs.empty() && is_text_type(data_type)) cs = table_charset.empty() ? "utf8mb4" : table_charset;
  if (cs.empty() || cs == "binary") c.text = bl::ColumnInfo::Text::binary;
  else if (cs == "latin1") c.text = bl::ColumnInfo::Text::latin1;
  else c.text = bl::ColumnInfo::Text::utf8;
  if (data_type == "enum" || data_type == "set") {
    c.labels = parse_labels(column_type);
    c.text = bl::ColumnInfo::Text::utf8;
  }
  c.json = data_type == "json";
  return c;
}

bool coord_before_or_at(const BinlogCoord& a, const BinlogCoord& b) {
  // Binlog files of one server are numbered in order (name.000001, name.000002, ...); a longer
  // number is a later file.
  if (a.file != b.file) {
    if (a.file.size() != b.file.size()) return a.file.size() < b.file.size();
    return a.file < b.file;
  }
  return a.pos <= b.pos;
}

Result<std::shared_ptr<TableSchema>> apply_alter(const TableSchema& old, const ddl::Statement& st,
                                                 std::vector<ColumnChange>* changes) {
  using K = ddl::AlterClause::Kind;
  auto t = std::make_shared<TableSchema>(old);
  std::vector<std::string> key_names;
  for (uint32_t k : t->key) key_names.push_back(t->cols[k].name);
  auto place = [&](const ddl::AlterClause& a, size_t from_index) -> Result<size_t> {
    // Moves the column at `from_index` (appended or retyped) to where the clause puts it.
    size_t to = t->cols.size() - 1;
    if (a.place == ddl::Place::last) {
      if (from_index == t->cols.size() - 1 || a.kind != K::add_column) return from_index;
    } else if (a.place == ddl::Place::first) {
      to = 0;
    } else {
      const int after = find_column(*t, a.after);
      if (after < 0)
        return Error(Errc::unsupported, fmt::format("AFTER {}: no such column", a.after));
      to = size_t(after) + (size_t(after) < from_index ? 1 : 0);
    }
    auto move = [&](auto& v) {
      auto item = std::move(v[from_index]);
      v.erase(v.begin() + long(from_index));
      v.insert(v.begin() + long(to), std::move(item));
    };
    move(t->cols);
    move(t->data_types);
    move(t->column_types);
    return to;
  };
  for (const ddl::AlterClause& a : st.clauses) {
    switch (a.kind) {
      case K::add_column: {
        const ddl::ColumnDef& d = a.def;
        if (find_column(*t, d.name) >= 0) break;  // ADD COLUMN IF NOT EXISTS of an existing one
        ColumnChange ch;
        ch.kind = SchemaChangeKind::add_column;
        ch.column = d.name;
        ch.type = d.type;
        if (d.generated)
          ch.reread = fmt::format(
              "added column {} is generated: existing rows read values the "
              "server computes",
              quote_identifier(d.name));
        else if (d.auto_increment)
          ch.reread = fmt::format(
              "added column {} is AUTO_INCREMENT: existing rows read numbers "
              "the server assigns",
              quote_identifier(d.name));
        else if (d.default_kind == ddl::ColumnDef::Default::expression)
          ch.reread = fmt::format(
              "added column {} has an expression DEFAULT (such as "
              "CURRENT_TIMESTAMP): existing rows read a value the server "
              "computes",
              quote_identifier(d.name));
        if (!ch.reread.empty()) {
          // No default to send: the re-read brings the old rows' values.
        } else if (d.default_kind == ddl::ColumnDef::Default::literal) {
          ch.has_default = true;
          ch.default_text = d.default_text;
        } else if (d.default_kind == ddl::ColumnDef::Default::none && d.not_null) {
          auto v = implicit_default(d);
          if (!v)
            return Error(Errc::unsupported,
                         fmt::format("added column {} {} NOT NULL has no DEFAULT: existing rows "
                                     "read the server's zero value",
                                     quote_identifier(d.name), d.type));
          ch.has_default = true;
          ch.default_text = *v;
        }
        t->cols.push_back(column_info(d.name, d.data_type, d.type, d.charset, t->charset));
        t->data_types.push_back(d.data_type);
        t->column_types.push_back(d.type);
        ch.info = t->cols.back();
        ch.data_type = d.data_type;
        auto placed = place(a, t->cols.size() - 1);
        if (!placed.ok()) return std::move(placed).error();
        changes->push_back(std::move(ch));
        break;
      }
      case K::drop_column: {
        const int i = find_column(*t, a.column);
        if (i < 0) break;  // DROP COLUMN IF EXISTS of a missing one
        ColumnChange ch;
        ch.kind = SchemaChangeKind::drop_column;
        ch.column = t->cols[size_t(i)].name;
        std::erase(key_names, ch.column);
        t->cols.erase(t->cols.begin() + i);
        t->data_types.erase(t->data_types.begin() + i);
        t->column_types.erase(t->column_types.begin() + i);
        changes->push_back(std::move(ch));
        break;
      }
      case K::rename_column:
      case K::change_column:
      case K::modify_column: {
        const int i = find_column(*t, a.column);
        if (i < 0)
          return Error(Errc::unsupported, fmt::format("column {} is not in the table's history",
                                                      quote_identifier(a.column)));
        const std::string old_name = t->cols[size_t(i)].name;
        const std::string new_name = a.kind == K::rename_column   ? a.to
                                     : a.kind == K::change_column ? a.def.name
                                                                  : old_name;
        if (new_name != old_name) {
          if (find_column(*t, new_name) >= 0 &&
              !std::equal(new_name.begin(), new_name.end(), old_name.begin(), old_name.end(),
                          [](char x, char y) {
                            return std::tolower(uint8_t(x)) == std::tolower(uint8_t(y));
                          }))
            return Error(Errc::unsupported,
                         fmt::format("column {} already exists", quote_identifier(new_name)));
          ColumnChange ch;
          ch.kind = SchemaChangeKind::rename_column;
          ch.column = old_name;
          ch.to = new_name;
          for (std::string& k : key_names)
            if (k == old_name) k = new_name;
          t->cols[size_t(i)].name = new_name;
          changes->push_back(std::move(ch));
        }
        if (a.kind == K::rename_column) break;
        const ddl::ColumnDef& d = a.def;
        const ddl::ColumnDef from = ddl::parse_column_type(t->column_types[size_t(i)]);
        if (d.generated)
          return Error(Errc::unsupported,
                       fmt::format("column {} becomes generated", quote_identifier(new_name)));
        if (!ddl::same_type(from, d)) {
          std::string why;
          if (!ddl::is_widening(from, d, &why))
            return Error(
                Errc::unsupported,
                fmt::format("column {} changes type from {} to {}, which is not a "
                            "widening ({}): existing values may not survive",
                            quote_identifier(new_name), t->column_types[size_t(i)], d.type, why));
          ColumnChange ch;
          ch.kind = SchemaChangeKind::alter_column_type;
          ch.column = new_name;
          ch.type = d.type;
          ch.from = t->column_types[size_t(i)];
          changes->push_back(std::move(ch));
        }
        t->cols[size_t(i)] = column_info(new_name, d.data_type, d.type, d.charset, t->charset);
        t->data_types[size_t(i)] = d.data_type;
        t->column_types[size_t(i)] = d.type;
        if (a.place != ddl::Place::last) {
          auto moved = place(a, size_t(i));
          if (!moved.ok()) return std::move(moved).error();
        }
        break;
      }
      case K::add_primary_key: key_names = a.key; break;
      case K::drop_primary_key: key_names.clear(); break;
      case K::rename_table:
        t->db = a.new_table.db;
        t->table = a.new_table.table;
        break;
      case K::convert_charset:
        t->charset = a.charset;
        for (size_t i = 0; i < t->cols.size(); ++i)
          if (is_text_type(t->data_types[i]) && t->data_types[i] != "enum" &&
              t->data_types[i] != "set")
            t->cols[i] = column_info(t->cols[i].name, t->data_types[i], t->column_types[i],
                                     a.charset, a.charset);
        break;
      case K::default_charset: t->charset = a.charset; break;
      case K::no_column_change: break;
    }
  }
  t->key.clear();
  for (const std::string& k : key_names) {
    const int i = find_column(*t, k);
    if (i >= 0) t->key.push_back(uint32_t(i));
  }
  return t;
}

std::shared_ptr<TableSchema> schema_from_create(const ddl::Statement& st) {
  auto t = std::make_shared<TableSchema>();
  t->db = st.tables.at(0).db;
  t->table = st.tables.at(0).table;
  t->charset = st.charset;
  for (const ddl::ColumnDef& d : st.columns) {
    t->cols.push_back(column_info(d.name, d.data_type, d.type, d.charset, t->charset));
    t->data_types.push_back(d.data_type);
    t->column_types.push_back(d.type);
  }
  for (const std::string& k : st.key) {
    const int i = find_column(*t, k);
    if (i >= 0) t->key.push_back(uint32_t(i));
  }
  return t;
}

bool map_type_fits(uint8_t m, std::string_view t) {
  if (t.empty()) return true;
  switch (m) {
    case bl::kTypeTiny: return t == "tinyint";
    case bl::kTypeShort: return t == "smallint";
    case bl::kTypeInt24: return t == "mediumint";
    case bl::kTypeLong: return t == "int";
    case bl::kTypeLonglong: return t == "bigint";
    case bl::kTypeFloat: return t == "float";
    case bl::kTypeDouble: return t == "double";
    case bl::kTypeDecimal:
    case bl::kTypeNewDecimal: return t == "decimal";
    case bl::kTypeVarchar:
    case bl::kTypeVarString: return t == "varchar" || t == "varbinary";
    case bl::kTypeString: return t == "char" || t == "binary" || t == "enum" || t == "set";
    case bl::kTypeEnum: return t == "enum";
    case bl::kTypeSet: return t == "set";
    case bl::kTypeTinyBlob:
    case bl::kTypeMediumBlob:
    case bl::kTypeLongBlob:
    case bl::kTypeBlob: return t.ends_with("text") || t.ends_with("blob") || t == "json";
    case bl::kTypeJson: return t == "json" || t == "longtext";
    case bl::kTypeDate:
    case bl::kTypeNewDate: return t == "date";
    case bl::kTypeTime:
    case bl::kTypeTime2: return t == "time";
    case bl::kTypeDatetime:
    case bl::kTypeDatetime2: return t == "datetime";
    case bl::kTypeTimestamp:
    case bl::kTypeTimestamp2: return t == "timestamp";
    case bl::kTypeYear: return t == "year";
    case bl::kTypeBit: return t == "bit";
    default: return true;  // geometry and the rest: not checked
  }
}

std::optional<std::shared_ptr<const TableSchema>> SchemaHistory::at(const std::string& table_key,
                                                                    const BinlogCoord& at) const {
  auto it = tables_.find(table_key);
  if (it == tables_.end()) return std::nullopt;
  std::optional<std::shared_ptr<const TableSchema>> best;
  for (const Entry& e : it->second)
    if (coord_before_or_at(e.at, at)) best = e.schema;
  return best;
}

void SchemaHistory::record(const std::string& table_key, const BinlogCoord& at,
                           std::shared_ptr<const TableSchema> schema) {
  std::vector<Entry>& v = tables_[table_key];
  for (Entry& e : v)
    if (e.at == at) {
      e.schema = std::move(schema);
      return;
    }
  auto pos = std::find_if(v.begin(), v.end(),
                          [&](const Entry& e) { return !coord_before_or_at(e.at, at); });
  v.insert(pos, Entry{at, std::move(schema)});
}

bool SchemaHistory::prune_before(const BinlogCoord& at) {
  bool removed = false;
  for (auto& [key, v] : tables_) {
    size_t latest = SIZE_MAX;
    for (size_t i = 0; i < v.size(); ++i)
      if (coord_before_or_at(v[i].at, at)) latest = i;
    if (latest != SIZE_MAX && latest > 0) {
      v.erase(v.begin(), v.begin() + long(latest));
      removed = true;
    }
  }
  return removed;
}

bool SchemaHistory::forget_after(const std::string& table_key, const BinlogCoord& at) {
  auto it = tables_.find(table_key);
  if (it == tables_.end()) return false;
  std::vector<Entry>& v = it->second;
  const size_t before = v.size();
  std::erase_if(v, [&](const Entry& e) { return !coord_before_or_at(e.at, at); });
  const bool removed = v.size() != before;
  if (v.empty()) tables_.erase(it);
  return removed;
}

std::vector<std::string> SchemaHistory::tables() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : tables_) out.push_back(k);
  return out;
}

bool SchemaHistory::set_copy_pending(const std::string& table_key, bool pending) {
  return pending ? copy_pending_.insert(table_key).second : copy_pending_.erase(table_key) != 0;
}

// "mysql-schema-history 1\n" then per entry: key, file, pos, present (0 dropped / 1), and for a
// schema: db, table, charset, column count, per column name, data type, column type, text kind
// (b/l/u), json (0/1), unsigned (0/1); key count and indexes. Every field is <length>:<bytes>.
// While a table's copy is pending the header is "mysql-schema-history 2\n", followed by one line:
// the count of such tables and their keys.
std::string SchemaHistory::encode() const {
  // Version 2 only while a copy is pending: its first line lists those tables.
  std::string out = copy_pending_.empty() ? "mysql-schema-history 1\n" : "mysql-schema-history 2\n";
  if (!copy_pending_.empty()) {
    put(out, std::to_string(copy_pending_.size()));
    for (const std::string& key : copy_pending_) put(out, key);
    out += '\n';
  }
  for (const auto& [key, entries] : tables_)
    for (const Entry& e : entries) {
      put(out, key);
      put(out, e.at.file);
      put(out, std::to_string(e.at.pos));
      put(out, e.schema ? "1" : "0");
      if (e.schema) {
        const TableSchema& t = *e.schema;
        put(out, t.db);
        put(out, t.table);
        put(out, t.charset);
        put(out, std::to_string(t.cols.size()));
        for (size_t i = 0; i < t.cols.size(); ++i) {
          const bl::ColumnInfo& c = t.cols[i];
          put(out, c.name);
          put(out, i < t.data_types.size() ? t.data_types[i] : "");
          put(out, i < t.column_types.size() ? t.column_types[i] : "");
          put(out, c.text == bl::ColumnInfo::Text::binary   ? "b"
                   : c.text == bl::ColumnInfo::Text::latin1 ? "l"
                                                            : "u");
          put(out, c.json ? "1" : "0");
          put(out, c.is_unsigned ? "1" : "0");
        }
        put(out, std::to_string(t.key.size()));
        for (uint32_t k : t.key) put(out, std::to_string(k));
      }
      out += '\n';
    }
  return out;
}

Result<SchemaHistory> SchemaHistory::decode(std::string_view text) {
  constexpr std::string_view kHead = "mysql-schema-history 1\n";
  constexpr std::string_view kHeadPending = "mysql-schema-history 2\n";
  auto bad = [] {
    return Error(Errc::data,
                 "the mysql schema history in the checkpoint store is damaged: run `sluice "
                 "cleanup` and start over with a new snapshot");
  };
  // The rest of a line the reader consumed fields of: it must be the line's end.
  auto end_line = [](std::string_view& text, const Reader& r) {
    text.remove_prefix(text.size() - r.rest().size());
    if (text.empty() || text[0] != '\n') return false;
    text.remove_prefix(1);
    return true;
  };
  SchemaHistory h;
  if (text.starts_with(kHeadPending)) {
    text.remove_prefix(kHeadPending.size());
    Reader r(text);
    uint64_t n = 0;
    if (!r.get(&n) || n == 0 || n > 100000) return bad();
    for (uint64_t i = 0; i < n; ++i) {
      std::string key;
      if (!r.get(&key)) return bad();
      h.copy_pending_.insert(std::move(key));
    }
    if (!end_line(text, r)) return bad();
  } else if (text.starts_with(kHead)) {
    text.remove_prefix(kHead.size());
  } else {
    return bad();
  }
  while (!text.empty()) {
    Reader r(text);
    std::string key, file, present;
    uint64_t pos = 0;
    if (!r.get(&key) || !r.get(&file) || !r.get(&pos) || !r.get(&present)) return bad();
    std::shared_ptr<TableSchema> t;
    if (present == "1") {
      t = std::make_shared<TableSchema>();
      uint64_t n = 0;
      if (!r.get(&t->db) || !r.get(&t->table) || !r.get(&t->charset) || !r.get(&n) || n > 100000)
        return bad();
      for (uint64_t i = 0; i < n; ++i) {
        std::string name, data_type, column_type, text_kind, json, uns;
        if (!r.get(&name) || !r.get(&data_type) || !r.get(&column_type) || !r.get(&text_kind) ||
            !r.get(&json) || !r.get(&uns))
          return bad();
        bl::ColumnInfo c;
        c.name = std::move(name);
        c.text = text_kind == "b"   ? bl::ColumnInfo::Text::binary
                 : text_kind == "l" ? bl::ColumnInfo::Text::latin1
                                    : bl::ColumnInfo::Text::utf8;
        c.json = json == "1";
        c.is_unsigned = uns == "1";
        if (data_type == "enum" || data_type == "set") c.labels = parse_labels(column_type);
        t->cols.push_back(std::move(c));
        t->data_types.push_back(std::move(data_type));
        t->column_types.push_back(std::move(column_type));
      }
      uint64_t nk = 0;
      if (!r.get(&nk) || nk > n) return bad();
      for (uint64_t i = 0; i < nk; ++i) {
        uint64_t k = 0;
        if (!r.get(&k) || k >= n) return bad();
        t->key.push_back(uint32_t(k));
      }
    } else if (present != "0") {
      return bad();
    }
    h.record(key, BinlogCoord{file, pos}, std::move(t));
    if (!end_line(text, r)) return bad();
  }
  return h;
}

}  // namespace sluice::mysql
