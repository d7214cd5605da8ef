#include "connectors/sqlite/sqlite_destination.h"

#include <fmt/format.h>

#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "connectors/sqlite/sqlite_value_mapping.h"
#include "support/sqlite_handles.h"
#include "connectors/folded_identifiers.h"
#include "connectors/record_key.h"
#include "connectors/record_template.h"

namespace sluice {

namespace {

using sqlite::append_quoted_identifier;
using sqlite::Db;
using sqlite::Stmt;


using TableTemplate = RecordTemplate;

// One cached statement: an upsert for one set of present fields, or the delete of a table.
struct Shape {
  bool is_delete = false;
  size_t hash = 0;
  std::vector<std::string> key_names;    // as in record.key
  std::vector<std::string> value_names;  // present fields of `after`, in order (upserts)
  // Per key field: its index in value_names, or -1 if it is bound after the values (parameter
  // value_names.size() + 1, ...).
  std::vector<int> key_pos;
  int params = 0;
  Stmt stmt;
};

struct TableState {
  std::string name;  // as rendered
  std::string quoted;
  bool exists = false;
  std::unordered_set<std::string, FoldedHash, FoldedEqual> columns;
  std::vector<std::unique_ptr<Shape>> shapes;
  Shape* last_upsert = nullptr;
  Shape* last_delete = nullptr;
};

// Enough for any realistic mix of TOAST-omitted columns; a runaway mix is dropped and re-prepared.
constexpr size_t kMaxShapesPerTable = 256;

size_t shape_hash(bool is_delete, std::span<const Field> key, std::span<const Field* const> values) {
  size_t h = is_delete ? 0x9e3779b97f4a7c15ULL : 0;
  auto mix = [&h](std::string_view s) {
    h ^= std::hash<std::string_view>{}(s) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  };
  for (const Field& f : key) mix(f.name);
  mix("\x01");  // separates key names from value names
  for (const Field* f : values) mix(f->name);
  return h;
}

bool same_shape(const Shape& s, std::span<const Field> key, std::span<const Field* const> values) {
  if (s.key_names.size() != key.size() || s.value_names.size() != values.size()) return false;
  for (size_t i = 0; i < key.size(); ++i)
    if (s.key_names[i] != key[i].name) return false;
  for (size_t i = 0; i < values.size(); ++i)
    if (s.value_names[i] != values[i]->name) return false;
  return true;
}

class SqliteDestination final : public Destination {
 public:
  SqliteDestination(SqliteDestinationOptions options, TableTemplate table)
      : options_(std::move(options)), template_(std::move(table)) {}

  Status open(const ConnectorContext& ctx) override {
    pipeline_id_ = ctx.pipeline_id;
    sqlite::OpenOptions o;
    o.journal_mode = options_.journal_mode;
    o.synchronous = options_.synchronous;
    o.busy_timeout = options_.busy_timeout;
    auto db = Db::open(options_.path, o);
    if (!db) return db.error().with_context("sqlite destination: ");
    db_ = std::move(db.value());
    for (auto [stmt, sql] : {std::pair{&begin_, "BEGIN IMMEDIATE"}, std::pair{&commit_, "COMMIT"},
                             std::pair{&rollback_, "ROLLBACK"},
                             std::pair{&table_info_, "SELECT name FROM pragma_table_info(?1)"}}) {
      auto s = db_.prepare(sql, "prepare a statement");
      if (!s) return s.error().with_context("sqlite destination: ");
      *stmt = std::move(s.value());
    }
    if (options_.checkpoint_in_destination) {
      if (Status s = db_.exec(
              "CREATE TABLE IF NOT EXISTS sluice_checkpoints (pipeline TEXT PRIMARY KEY NOT NULL, "
              "position BLOB NOT NULL, updated_at TEXT NOT NULL)",
              "create table sluice_checkpoints");
          !s)
        return s.error().with_context("sqlite destination: ");
      for (auto [stmt, sql] :
           {std::pair{&save_position_,
                      "INSERT INTO sluice_checkpoints(pipeline, position, updated_at) VALUES(?1, ?2, "
                      "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) ON CONFLICT(pipeline) DO UPDATE SET "
                      "position = excluded.position, updated_at = excluded.updated_at"},
            std::pair{&load_position_, "SELECT position FROM sluice_checkpoints WHERE pipeline = ?1"}}) {
        auto s = db_.prepare(sql, "prepare a statement");
        if (!s) return s.error().with_context("sqlite destination: ");
        *stmt = std::move(s.value());
      }
    }
    return ok_status();
  }

  void write(Batch& batch, WriteDone done) override { done(write_batch(batch)); }

  bool stores_positions() const noexcept override { return options_.checkpoint_in_destination; }

  Result<std::optional<std::string>> stored_position(std::string_view pipeline_id) override {
    if (!options_.checkpoint_in_destination) return std::optional<std::string>();
    if (!db_.get()) return Error(Errc::internal, "sqlite destination: stored_position before open");
    sqlite3_stmt* st = load_position_.get();
    sqlite::ResetOnExit reset(st);
    sqlite3_bind_text64(st, 1, pipeline_id.data(), pipeline_id.size(), SQLITE_STATIC, SQLITE_UTF8);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) return std::optional<std::string>();
    if (rc != SQLITE_ROW) return db_failure(rc, "cannot read the stored position");
    const void* p = sqlite3_column_blob(st, 0);
    const int n = sqlite3_column_bytes(st, 0);
    return std::optional<std::string>(std::string(static_cast<const char*>(p), p ? size_t(n) : 0));
  }

  void close() noexcept override {
    forget_tables();
    begin_ = Stmt();
    commit_ = Stmt();
    rollback_ = Stmt();
    table_info_ = Stmt();
    save_position_ = Stmt();
    load_position_ = Stmt();
    db_ = Db();
  }

 private:
  Status write_batch(const Batch& batch) {
    if (batch.empty()) return ok_status();
    if (!db_.get()) return Error(Errc::internal, "sqlite destination: write before open");
    if (int rc = step_once(begin_.get()); rc != SQLITE_DONE)
      return db_failure(rc, "cannot begin a transaction");
    for (const Record& r : batch.records()) {
      if (Status s = write_record(r); !s) {
        rollback();
        return s;
      }
    }
    if (options_.checkpoint_in_destination && batch.has_position() && !batch.position().empty()) {
      if (Status s = save_position(batch.position()); !s) {
        rollback();
        return s;
      }
    }
    if (int rc = step_once(commit_.get()); rc != SQLITE_DONE) {
      Error e = db_failure(rc, "cannot commit");
      rollback();
      return e;
    }
    return ok_status();
  }

  // Inside the batch's transaction: the position commits (or rolls back) with the rows.
  Status save_position(std::string_view position) {
    sqlite3_stmt* st = save_position_.get();
    sqlite3_bind_text64(st, 1, pipeline_id_.data(), pipeline_id_.size(), SQLITE_STATIC, SQLITE_UTF8);
    sqlite3_bind_blob64(st, 2, position.data(), position.size(), SQLITE_STATIC);
    int rc = step_once(st);
    sqlite3_clear_bindings(st);
    if (rc != SQLITE_DONE) return db_failure(rc, "cannot store the position in sluice_checkpoints");
    return ok_status();
  }

  Status write_record(const Record& r) {
    auto table = table_for(template_.render(r));
    if (!table) return std::move(table).error();
    TableState& t = *table.value();

    // A source-side TRUNCATE (a key-less delete marked `truncate`) empties the table.
    if (is_truncate(r)) {
      if (!t.exists) return ok_status();
      return db_.exec("DELETE FROM " + t.quoted, "cannot truncate " + t.name);
    }

    std::span<const Field> key = record_key_fields(r, scalar_key_);
    if (key.empty())
      return record_error(Errc::data, t, r,
                          "record has no key; this destination upserts and deletes by key (give the "
                          "source table a primary key, or set the key with a processor)");

    if (r.op == Operation::remove) {
      key_values_.clear();
      for (const Field& f : key) key_values_.push_back(f.value);
      return delete_row(t, r, key, key_values_);
    }

    // Present fields only: an absent one (e.g. unchanged TOAST) keeps the stored value.
    values_.clear();
    if (r.after.is_object()) {
      for (const Field& f : r.after.fields())
        if (!f.value.is_absent()) values_.push_back(&f);
    } else if (!r.after.is_absent() && !r.after.is_null()) {
      scalar_after_ = Field{"value", r.after};  // a scalar payload (e.g. a message body)
      values_.push_back(&scalar_after_);
    }

    auto shape = upsert_shape(t, r, key);
    if (!shape) return std::move(shape).error();
    Shape& s = *shape.value();

    // Key values as bound (from `after` when present there), and whether the row's key changed.
    bool moved = false;
    for (size_t i = 0; i < key.size(); ++i) {
      const Value& bound = s.key_pos[i] >= 0 ? values_[size_t(s.key_pos[i])]->value : key[i].value;
      if (bound.is_null() || bound.is_absent())
        return record_error(Errc::data, t, r,
                            fmt::format("key field \"{}\" is null; key values must not be null", key[i].name));
      if (r.op == Operation::update && s.key_pos[i] >= 0 && !(bound == key[i].value)) moved = true;
    }
    if (r.op == Operation::update) {
      if (Status st = delete_moved_row(t, r, key, s, moved); !st) return st;
    }

    sqlite3_stmt* st = s.stmt.get();
    if (scratch_.size() < size_t(s.params)) scratch_.resize(size_t(s.params));
    int p = 0;
    for (const Field* f : values_) {
      if (int rc = sqlite_destination::bind_value(st, p + 1, f->value, scratch_[size_t(p)]); rc != SQLITE_OK)
        return bind_failure(rc, t, r, f->name);
      ++p;
    }
    for (size_t i = 0; i < key.size(); ++i) {
      if (s.key_pos[i] >= 0) continue;
      if (int rc = sqlite_destination::bind_value(st, p + 1, key[i].value, scratch_[size_t(p)]); rc != SQLITE_OK)
        return bind_failure(rc, t, r, key[i].name);
      ++p;
    }
    return step_record(st, t, r);
  }

  // An update whose key differs from the stored row's (record.key, or the key fields of `before`,
  // differ from `after`) moves the row: the old one is deleted before the upsert.
  Status delete_moved_row(TableState& t, const Record& r, std::span<const Field> key, const Shape& s,
                          bool moved_from_key) {
    key_values_.clear();
    if (moved_from_key) {
      for (const Field& f : key) key_values_.push_back(f.value);
      return delete_row(t, r, key, key_values_);
    }
    if (!r.before.is_object()) return ok_status();
    bool differs = false;
    for (size_t i = 0; i < key.size(); ++i) {
      const Value* old = r.before.find(key[i].name);
      if (!old || old->is_absent() || old->is_null()) return ok_status();  // no usable old key
      const Value& now = s.key_pos[i] >= 0 ? values_[size_t(s.key_pos[i])]->value : key[i].value;
      if (!(*old == now)) differs = true;
      key_values_.push_back(*old);
    }
    return differs ? delete_row(t, r, key, key_values_) : ok_status();
  }

  Status delete_row(TableState& t, const Record& r, std::span<const Field> key, std::span<const Value> values) {
    if (!t.exists) {
      // Nothing to delete from a table that was never created (re-checked: another writer may
      // have created it since).
      if (Status s = load_columns(t); !s) return s;
      if (!t.exists) return ok_status();
    }
    Shape* s = t.last_delete;
    if (!s || !same_shape(*s, key, {})) {
      auto found = find_or_prepare(t, r, key, /*is_delete=*/true);
      if (!found) return std::move(found).error();
      s = found.value();
      t.last_delete = s;
    }
    sqlite3_stmt* st = s->stmt.get();
    if (scratch_.size() < values.size()) scratch_.resize(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      if (values[i].is_null() || values[i].is_absent())
        return record_error(Errc::data, t, r,
                            fmt::format("key field \"{}\" is null; key values must not be null", key[i].name));
      if (int rc = sqlite_destination::bind_value(st, int(i) + 1, values[i], scratch_[i]); rc != SQLITE_OK)
        return bind_failure(rc, t, r, key[i].name);
    }
    return step_record(st, t, r);
  }

  Result<Shape*> upsert_shape(TableState& t, const Record& r, std::span<const Field> key) {
    if (t.last_upsert && same_shape(*t.last_upsert, key, values_)) return t.last_upsert;
    auto s = find_or_prepare(t, r, key, /*is_delete=*/false);
    if (s) t.last_upsert = s.value();
    return s;
  }

  Result<Shape*> find_or_prepare(TableState& t, const Record& r, std::span<const Field> key, bool is_delete) {
    auto values = is_delete ? std::span<const Field* const>() : std::span<const Field* const>(values_);
    size_t hash = shape_hash(is_delete, key, values);
    for (const auto& s : t.shapes)
      if (s->hash == hash && s->is_delete == is_delete && same_shape(*s, key, values)) return s.get();

    if (!is_delete) {
      if (Status st = ensure_columns(t, r, key); !st) return std::move(st).error();
    }
    auto shape = std::make_unique<Shape>();
    shape->is_delete = is_delete;
    shape->hash = hash;
    for (const Field& f : key) shape->key_names.emplace_back(f.name);
    for (const Field* f : values) shape->value_names.emplace_back(f->name);
    shape->key_pos.assign(key.size(), -1);
    for (size_t i = 0; i < key.size(); ++i)
      for (size_t j = 0; j < values.size(); ++j)
        if (iequals(key[i].name, values[j]->name)) {
          shape->key_pos[i] = int(j);
          break;
        }

    std::string sql = is_delete ? delete_sql(t, *shape) : upsert_sql(t, *shape);
    auto stmt = db_.prepare(sql, "prepare");
    if (!stmt) {
      std::string hint;
      if (db_.errmsg().find("ON CONFLICT") != std::string::npos)
        hint = "; the table's PRIMARY KEY (or a UNIQUE index) must be exactly the record key columns";
      return record_error(Errc::data, t, r,
                          fmt::format("cannot prepare {}: {}{}", is_delete ? "the delete" : "the upsert",
                                      db_.errmsg(), hint));
    }
    shape->stmt = std::move(stmt.value());

    // Drops only shapes of the same kind: the caller may hold the other kind's (an update
    // deleting its moved row holds its upsert shape).
    size_t same_kind = 0;
    for (const auto& x : t.shapes) same_kind += x->is_delete == is_delete ? 1 : 0;
    if (same_kind >= kMaxShapesPerTable) {
      std::erase_if(t.shapes, [&](const auto& x) { return x->is_delete == is_delete; });
      (is_delete ? t.last_delete : t.last_upsert) = nullptr;
    }
    t.shapes.push_back(std::move(shape));
    return t.shapes.back().get();
  }

  static std::string upsert_sql(const TableState& t, Shape& s) {
    std::string sql = "INSERT INTO " + t.quoted + "(";
    bool first = true;
    auto column = [&](std::string_view name) {
      if (!first) sql += ',';
      first = false;
      append_quoted_identifier(sql, name);
    };
    for (const auto& n : s.value_names) column(n);
    for (size_t i = 0; i < s.key_names.size(); ++i)
      if (s.key_pos[i] < 0) column(s.key_names[i]);
    sql += ") VALUES(";
    size_t n = s.value_names.size();
    for (int k : s.key_pos) n += k < 0 ? 1 : 0;
    for (size_t i = 0; i < n; ++i) sql += i ? ",?" : "?";
    s.params = int(n);
    sql += ") ON CONFLICT(";
    for (size_t i = 0; i < s.key_names.size(); ++i) {
      if (i) sql += ',';
      append_quoted_identifier(sql, s.key_names[i]);
    }
    sql += ") DO ";
    bool any = false;
    for (size_t j = 0; j < s.value_names.size(); ++j) {
      bool is_key = false;
      for (int k : s.key_pos) is_key |= k == int(j);
      if (is_key) continue;
      sql += any ? "," : "UPDATE SET ";
      any = true;
      append_quoted_identifier(sql, s.value_names[j]);
      sql += "=excluded.";
      append_quoted_identifier(sql, s.value_names[j]);
    }
    if (!any) sql += "NOTHING";  // only key columns: the row existing is all there is to it
    return sql;
  }

  static std::string delete_sql(const TableState& t, Shape& s) {
    std::string sql = "DELETE FROM " + t.quoted + " WHERE ";
    for (size_t i = 0; i < s.key_names.size(); ++i) {
      if (i) sql += " AND ";
      append_quoted_identifier(sql, s.key_names[i]);
      sql += "=?";
    }
    s.params = int(s.key_names.size());
    return sql;
  }

  // Creates the table from this record, or adds the columns it lacks. Runs inside the batch's
  // transaction: a rollback undoes it, and forget_tables() drops what this cache believed.
  Status ensure_columns(TableState& t, const Record& r, std::span<const Field> key) {
    if (!t.exists) {
      if (Status s = load_columns(t); !s) return s;
    }
    // Column type of a key field: from its value in `after` when present there.
    auto key_value = [&](const Field& k) -> const Value& {
      for (const Field* f : values_)
        if (iequals(f->name, k.name)) return f->value;
      return k.value;
    };
    auto is_key = [&](std::string_view name) {
      for (const Field& k : key)
        if (iequals(k.name, name)) return true;
      return false;
    };
    auto column_def = [](std::string& sql, std::string_view name, const Value& v) {
      append_quoted_identifier(sql, name);
      std::string_view type = sqlite_destination::column_type_for(v.kind());
      if (!type.empty()) {
        sql += ' ';
        sql += type;
      }
    };

    if (!t.exists) {
      std::string sql = "CREATE TABLE IF NOT EXISTS " + t.quoted + " (";
      for (const Field& k : key) {
        column_def(sql, k.name, key_value(k));
        sql += ", ";
      }
      for (const Field* f : values_) {
        if (is_key(f->name)) continue;
        column_def(sql, f->name, f->value);
        sql += ", ";
      }
      sql += "PRIMARY KEY(";
      for (size_t i = 0; i < key.size(); ++i) {
        if (i) sql += ',';
        append_quoted_identifier(sql, key[i].name);
      }
      sql += "))";
      if (Status s = ddl(sql, t, r, "create the table"); !s) return s;
      // Re-read rather than assume: another writer may have created it first (IF NOT EXISTS).
      if (Status s = load_columns(t); !s) return s;
    }

    auto add_if_missing = [&](std::string_view name, const Value& v) -> Status {
      if (t.columns.find(name) != t.columns.end()) return ok_status();
      std::string sql = "ALTER TABLE " + t.quoted + " ADD COLUMN ";
      column_def(sql, name, v);
      if (Status s = ddl(sql, t, r, fmt::format("add column \"{}\"", name)); !s) return s;
      t.columns.emplace(name);
      return ok_status();
    };
    for (const Field& k : key)
      if (Status s = add_if_missing(k.name, key_value(k)); !s) return s;
    for (const Field* f : values_)
      if (Status s = add_if_missing(f->name, f->value); !s) return s;
    return ok_status();
  }

  Status ddl(const std::string& sql, const TableState& t, const Record& r, std::string_view what) {
    char* err = nullptr;
    int rc = sqlite3_exec(db_.get(), sql.c_str(), nullptr, nullptr, &err);
    if (rc == SQLITE_OK) return ok_status();
    std::string msg = err ? err : db_.errmsg();
    sqlite3_free(err);
    Error e = sqlite::make_error(rc, "");
    return record_error(e.code() == Errc::io ? Errc::data : e.code(), t, r,
                        fmt::format("cannot {}: {}", what, msg), e.retriable());
  }

  // Reads the table's columns; `exists` is false if there is no such table.
  Status load_columns(TableState& t) {
    sqlite3_stmt* st = table_info_.get();
    sqlite::ResetOnExit reset(st);
    sqlite3_bind_text64(st, 1, t.name.c_str(), t.name.size(), SQLITE_STATIC, SQLITE_UTF8);
    t.columns.clear();
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      const char* name = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
      t.columns.emplace(name ? name : "");
    }
    if (rc != SQLITE_DONE)
      return db_failure(rc, fmt::format("cannot read the columns of table \"{}\"", t.name));
    t.exists = !t.columns.empty();
    return ok_status();
  }

  Result<TableState*> table_for(std::string_view name) {
    if (last_table_ && last_table_->name == name) return last_table_;
    auto it = tables_.find(name);
    if (it == tables_.end()) {
      auto t = std::make_unique<TableState>();
      t->name = std::string(name);
      t->quoted = sqlite::quote_identifier(name);
      if (Status s = load_columns(*t); !s) return std::move(s).error();
      it = tables_.emplace(t->name, std::move(t)).first;
    }
    last_table_ = it->second.get();
    return last_table_;
  }

  Status step_record(sqlite3_stmt* st, const TableState& t, const Record& r) {
    int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) {
      sqlite3_reset(st);
      return ok_status();
    }
    std::string msg = db_.errmsg();  // read before reset, which may replace it
    sqlite3_reset(st);
    Error e = sqlite::make_error(rc, msg);
    return record_error(e.code(), t, r, e.message(), e.retriable());
  }

  Status bind_failure(int rc, const TableState& t, const Record& r, std::string_view field) {
    return record_error(Errc::data, t, r, fmt::format("cannot bind field \"{}\": {}", field, sqlite3_errstr(rc)));
  }

  // One line naming the table and the record key.
  Error record_error(Errc code, const TableState& t, const Record& r, std::string_view what,
                     bool retriable = false) const {
    std::string key = r.key.is_absent() ? "(none)" : to_debug_string(r.key);
    if (key.size() > 200) key = key.substr(0, 200) + "...";
    return Error(code,
                 fmt::format("sqlite destination \"{}\": table \"{}\", {} key {}: {}", options_.path, t.name,
                             operation_name(r.op), key, what),
                 retriable);
  }

  Error db_failure(int rc, std::string_view what) const {
    return sqlite::make_error(rc, fmt::format("sqlite destination \"{}\": {}: {}", options_.path, what, db_.errmsg()));
  }

  int step_once(sqlite3_stmt* st) {
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc;
  }

  void rollback() noexcept {
    if (!sqlite3_get_autocommit(db_.get())) step_once(rollback_.get());
    // DDL of the failed batch is undone too: forget what the cache learnt from it.
    forget_tables();
  }

  void forget_tables() noexcept {
    last_table_ = nullptr;
    tables_.clear();
  }

  SqliteDestinationOptions options_;
  TableTemplate template_;
  Db db_;
  Stmt begin_, commit_, rollback_, table_info_;
  Stmt save_position_, load_position_;  // checkpoint_in_destination
  std::string pipeline_id_;
  std::unordered_map<std::string, std::unique_ptr<TableState>, FoldedHash, FoldedEqual> tables_;
  TableState* last_table_ = nullptr;
  // Per-record working memory, reused so that the hot path does not allocate.
  std::vector<const Field*> values_;
  std::vector<Value> key_values_;
  std::vector<std::string> scratch_;
  Field scalar_key_;
  Field scalar_after_;
};

}  // namespace

Result<std::unique_ptr<Destination>> make_sqlite_destination(SqliteDestinationOptions options) {
  if (options.path.empty())
    return Error(Errc::invalid_argument, "sqlite destination: `path` is empty; set the database file path");
  auto table = TableTemplate::parse(options.table);
  if (!table) return table.error().with_context("sqlite destination: ");
  return std::unique_ptr<Destination>(
      std::make_unique<SqliteDestination>(std::move(options), std::move(table.value())));
}

}  // namespace sluice
