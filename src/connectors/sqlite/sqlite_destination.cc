#include "connectors/sqlite/sqlite_destination.h"

#include <fmt/format.h>

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include <vector>

#include "connectors/sql/keyed_sql_destination.h"
#include "connectors/sqlite/sqlite_dialect.h"
#include "connectors/sqlite/sqlite_value_mapping.h"
#include "support/sqlite_handles.h"

namespace sluice {

namespace {

const sqlite::SqliteDialect kDialect;

// One cached statement: the upsert of one column list, or the delete by one key.
struct Shape {
  bool is_delete = false;
  size_t hash = 0;
  std::vector<std::string> key_names;
  std::vector<std::string> column_names;  // upserts: the columns written, in parameter order
  sqlite::Stmt stmt;
};

struct SqliteTable final : sql::SqlTable {
  SqliteTable() : SqlTable(/*fold=*/true) {}
  std::vector<std::unique_ptr<Shape>> shapes;
  Shape* last_upsert = nullptr;
  Shape* last_delete = nullptr;
};

// Enough for any realistic mix of TOAST-omitted columns; a runaway mix is dropped and re-prepared.
constexpr size_t kMaxShapesPerTable = 256;

size_t shape_hash(bool is_delete, std::span<const Field> key, std::span<const Field> columns) {
  size_t h = is_delete ? 0x9e3779b97f4a7c15ULL : 0;
  auto mix = [&h](std::string_view s) {
    h ^= std::hash<std::string_view>{}(s) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  };
  for (const Field& f : key) mix(f.name);
  mix("\x01");  // separates key names from column names
  for (const Field& f : columns) mix(f.name);
  return h;
}

bool same_shape(const Shape& s, std::span<const Field> key, std::span<const Field> columns) {
  if (s.key_names.size() != key.size() || s.column_names.size() != columns.size()) return false;
  for (size_t i = 0; i < key.size(); ++i)
    if (s.key_names[i] != key[i].name) return false;
  for (size_t i = 0; i < columns.size(); ++i)
    if (s.column_names[i] != columns[i].name) return false;
  return true;
}

// The writer: one connection, BEGIN IMMEDIATE .. COMMIT per batch, one prepared statement per
// shape stepped once per row.
class SqliteDestination final : public sql::KeyedSqlDestination {
 public:
  SqliteDestination(SqliteDestinationOptions options, RecordTemplate table)
      : KeyedSqlDestination(kDialect, keyed_options(options, std::move(table))),
        settings_(std::move(options)) {}
  // The cached statements live in the catalogue (the base): finalized before db_ closes.
  ~SqliteDestination() override { forget_tables(); }

  // `sluice doctor`: a database file that does not exist yet is not created (its directory must
  // be writable); an existing one must be writable, then the SQL layer's checks.
  Result<std::vector<DoctorCheck>> doctor(const ConnectorContext& ctx,
                                          const std::vector<SourceTable>& tables) override {
    using O = DoctorCheck::Outcome;
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path path(settings_.path);
    if (!fs::exists(path, ec)) {
      const fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
      const std::string check = "the database file can be created";
      if (::access(dir.c_str(), W_OK) == 0)
        return std::vector<DoctorCheck>{
            {O::pass, check, fmt::format("not created yet; {} is writable", dir.string()), {}}};
      return std::vector<DoctorCheck>{
          {O::fail, check,
           fmt::format("directory {} does not exist or is not writable: {}", dir.string(),
                       std::strerror(errno)),
           "create the directory, make it writable by sluice, or fix `path`"}};
    }
    if (::access(path.c_str(), R_OK | W_OK) != 0)
      return std::vector<DoctorCheck>{
          {O::fail, "the database file is writable",
           fmt::format("{}: {}", path.string(), std::strerror(errno)),
           "make the file readable and writable by sluice, or fix `path`"}};
    return KeyedSqlDestination::doctor(ctx, tables);
  }

 private:
  static sql::KeyedSqlOptions keyed_options(const SqliteDestinationOptions& o,
                                            RecordTemplate table) {
    sql::KeyedSqlOptions k;
    k.destination = fmt::format("sqlite destination \"{}\"", o.path);
    k.table = std::move(table);
    k.checkpoint_in_destination = o.checkpoint_in_destination;
    k.keep_dropped_columns = o.keep_dropped_columns;
    (void)sql::parse_reconcile(o.reconcile, &k.reconcile);  // checked by the settings table
    return k;
  }

  Status connect() override {
    sqlite::OpenOptions o;
    o.journal_mode = settings_.journal_mode;
    o.synchronous = settings_.synchronous;
    o.busy_timeout = settings_.busy_timeout;
    auto db = sqlite::Db::open(settings_.path, o);
    if (!db) return db.error().with_context("sqlite destination: ");
    db_ = std::move(db.value());
    for (auto [stmt, sql] : {std::pair{&begin_, "BEGIN IMMEDIATE"}, std::pair{&commit_, "COMMIT"},
                             std::pair{&rollback_, "ROLLBACK"},
                             std::pair{&table_info_, "SELECT name FROM pragma_table_info(?1)"}}) {
      auto s = db_.prepare(sql, "prepare a statement");
      if (!s) return s.error().with_context("sqlite destination: ");
      *stmt = std::move(s.value());
    }
    return ok_status();
  }

  Status prepare_session() override {
    if (!settings_.checkpoint_in_destination) return ok_status();
    const std::string table = kDialect.quote_identifier(sql::kCheckpointTable);
    if (Status s =
            db_.exec(kDialect.checkpoint_table_ddl(table), "create table sluice_checkpoints");
        !s)
      return s.error().with_context("sqlite destination: ");
    for (auto [stmt, sql] :
         {std::pair{&save_position_, kDialect.checkpoint_upsert(table, "?1", "?2")},
          std::pair{&load_position_, kDialect.checkpoint_select(table, "?1")}}) {
      auto s = db_.prepare(sql, "prepare a statement");
      if (!s) return s.error().with_context("sqlite destination: ");
      *stmt = std::move(s.value());
    }
    return ok_status();
  }

  bool connected() const noexcept override { return db_.get() != nullptr; }
  // An embedded file opened in this process: there is no server connection to lose, so no
  // sluice_destination_connected series (a failed write is a file or lock error, seen as such).
  bool has_server_connection() const noexcept override { return false; }

  void disconnect() noexcept override {
    begin_ = sqlite::Stmt();
    commit_ = sqlite::Stmt();
    rollback_ = sqlite::Stmt();
    table_info_ = sqlite::Stmt();
    save_position_ = sqlite::Stmt();
    load_position_ = sqlite::Stmt();
    db_ = sqlite::Db();
  }

  Status begin() override {
    if (int rc = step_once(begin_.get()); rc != SQLITE_DONE)
      return db_failure(rc, "cannot begin a transaction");
    return ok_status();
  }

  Status commit() override {
    if (int rc = step_once(commit_.get()); rc != SQLITE_DONE)
      return db_failure(rc, "cannot commit");
    return ok_status();
  }

  bool supports_savepoints() const noexcept override { return true; }
  Status savepoint(std::string_view sql) override {
    return db_.exec(std::string(sql), "savepoint");
  }

  void abort() noexcept override {
    if (db_.get() && !sqlite3_get_autocommit(db_.get())) step_once(rollback_.get());
  }

  std::unique_ptr<sql::SqlTable> make_table() override { return std::make_unique<SqliteTable>(); }

  Status load_columns(sql::SqlTable& t) override {
    sqlite3_stmt* st = table_info_.get();
    sqlite::ResetOnExit reset(st);
    sqlite3_bind_text64(st, 1, t.name.c_str(), t.name.size(), SQLITE_STATIC, SQLITE_UTF8);
    t.columns.clear();
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      const char* name = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
      t.columns.emplace(name ? name : "", 0);
    }
    if (rc != SQLITE_DONE)
      return db_failure(rc, fmt::format("cannot read the columns of table \"{}\"", t.name));
    t.exists = !t.columns.empty();
    return ok_status();
  }

  Status load_key_columns(sql::SqlTable& t, std::vector<std::string>& out) override {
    out.clear();
    auto st = db_.prepare("SELECT name FROM pragma_table_info(?1) WHERE pk > 0 ORDER BY pk",
                          "prepare a statement");
    if (!st) return st.error().with_context(options_.destination + ": ");
    sqlite3_stmt* s = st.value().get();
    sqlite3_bind_text64(s, 1, t.name.c_str(), t.name.size(), SQLITE_STATIC, SQLITE_UTF8);
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      const char* name = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
      out.emplace_back(name ? name : "");
    }
    if (rc != SQLITE_DONE)
      return db_failure(rc, fmt::format("cannot read the key of table \"{}\"", t.name));
    return ok_status();
  }

  Result<bool> table_has_rows(sql::SqlTable& t) override {
    auto st = db_.prepare("SELECT 1 FROM " + t.quoted + " LIMIT 1", "prepare a statement");
    if (!st) return st.error().with_context(options_.destination + ": ");
    const int rc = sqlite3_step(st.value().get());
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
      return db_failure(rc, fmt::format("cannot read table \"{}\"", t.name));
    return rc == SQLITE_ROW;
  }

  // Its statements name columns that may be gone.
  void forget_table(sql::SqlTable& t) noexcept override {
    SqliteTable& st = static_cast<SqliteTable&>(t);
    st.last_upsert = st.last_delete = nullptr;
    st.shapes.clear();
  }

  // Runs inside the batch's transaction: a rollback undoes it (and the catalogue is dropped).
  Status ddl(const std::string& sql, sql::SqlTable& t, const Record& r, std::string_view what,
             bool) override {
    char* err = nullptr;
    int rc = sqlite3_exec(db_.get(), sql.c_str(), nullptr, nullptr, &err);
    if (rc == SQLITE_OK) return ok_status();
    std::string msg = err ? err : db_.errmsg();
    sqlite3_free(err);
    sql::ErrorClass c = sqlite::SqliteDialect::classify(rc);
    return record_error(t, r, c.code == Errc::io ? Errc::data : c.code,
                        fmt::format("cannot {}: {}", what, msg), c.retriable);
  }

  Status write_run(size_t first, size_t end) override {
    const sql::PlannedRow& head = plan().row(first);
    SqliteTable& t = static_cast<SqliteTable&>(*head.table);
    if (head.action == sql::RowAction::truncate)
      return db_.exec(kDialect.truncate(t.quoted), "cannot truncate " + t.name);
    const bool is_delete = head.action == sql::RowAction::remove;
    auto found = shape_for(t, head, is_delete);
    if (!found) return std::move(found).error();
    sqlite3_stmt* st = found.value()->stmt.get();
    for (size_t i = first; i < end; ++i) {
      const sql::PlannedRow& row = plan().row(i);
      std::span<const Field> values = is_delete ? plan().keys(row) : plan().columns(row);
      if (scratch_.size() < values.size()) scratch_.resize(values.size());
      for (size_t p = 0; p < values.size(); ++p) {
        const Value& v = values[p].value;
        if (v.kind() == ValueKind::float64 && std::isnan(v.as_double())) {
          // SQLite's REAL has no NaN (it stores NULL for one); ±Infinity it keeps.
          if (settings_.unrepresentable_values == "null") {
            sqlite3_bind_null(st, int(p) + 1);
            continue;
          }
          return record_error(
              t, *row.record, Errc::data,
              fmt::format("field \"{}\": SQLite cannot store NaN (set unrepresentable_values: null "
                          "to write NULL instead, or on_error: dlq to send such records to the "
                          "dead-letter queue)",
                          values[p].name));
        }
        if (int rc = sqlite_destination::bind_value(st, int(p) + 1, v, scratch_[p]);
            rc != SQLITE_OK)
          return record_error(
              t, *row.record, Errc::data,
              fmt::format("cannot bind field \"{}\": {}", values[p].name, sqlite3_errstr(rc)));
      }
      int rc = sqlite3_step(st);
      if (rc == SQLITE_DONE) {
        sqlite3_reset(st);
        continue;
      }
      std::string msg = db_.errmsg();  // read before reset, which may replace it
      sqlite3_reset(st);
      Error e = sqlite::make_error(rc, msg);
      return record_error(t, *row.record, e.code(), e.message(), e.retriable());
    }
    return ok_status();
  }

  // The run's statement: the last one of its kind, a cached one, or prepared now.
  Result<Shape*> shape_for(SqliteTable& t, const sql::PlannedRow& head, bool is_delete) {
    std::span<const Field> key = plan().keys(head);
    std::span<const Field> columns = is_delete ? std::span<const Field>() : plan().columns(head);
    Shape*& last = is_delete ? t.last_delete : t.last_upsert;
    if (last && same_shape(*last, key, columns)) return last;
    const size_t hash = shape_hash(is_delete, key, columns);
    for (const auto& s : t.shapes)
      if (s->hash == hash && s->is_delete == is_delete && same_shape(*s, key, columns))
        return last = s.get();

    auto shape = std::make_unique<Shape>();
    shape->is_delete = is_delete;
    shape->hash = hash;
    refs_.clear();
    for (const Field& f : key) shape->key_names.emplace_back(f.name);
    for (const Field& f : columns) shape->column_names.emplace_back(f.name);
    if (is_delete) {
      for (const Field& f : key) refs_.push_back({f.name, true});
    } else {
      for (const Field& f : columns) refs_.push_back({f.name, plan().is_key(head, f.name)});
    }
    std::string sql =
        is_delete ? kDialect.delete_by_key(t.quoted, refs_) : kDialect.upsert(t.quoted, refs_);
    auto stmt = db_.prepare(sql, "prepare");
    if (!stmt) {
      std::string hint;
      if (db_.errmsg().find("ON CONFLICT") != std::string::npos)
        hint =
            "; the table's PRIMARY KEY (or a UNIQUE index) must be exactly the record key columns";
      return record_error(t, *head.record, Errc::data,
                          fmt::format("cannot prepare {}: {}{}",
                                      is_delete ? "the delete" : "the upsert", db_.errmsg(), hint));
    }
    shape->stmt = std::move(stmt.value());
    size_t same_kind = 0;
    for (const auto& x : t.shapes) same_kind += x->is_delete == is_delete ? 1 : 0;
    if (same_kind >= kMaxShapesPerTable) {
      std::erase_if(t.shapes, [&](const auto& x) { return x->is_delete == is_delete; });
      t.last_upsert = is_delete ? t.last_upsert : nullptr;
      t.last_delete = is_delete ? nullptr : t.last_delete;
    }
    t.shapes.push_back(std::move(shape));
    return last = t.shapes.back().get();
  }

  Status save_position(std::string_view position) override {
    sqlite3_stmt* st = save_position_.get();
    sqlite3_bind_text64(st, 1, pipeline_id_.data(), pipeline_id_.size(), SQLITE_STATIC,
                        SQLITE_UTF8);
    sqlite3_bind_blob64(st, 2, position.data(), position.size(), SQLITE_STATIC);
    int rc = step_once(st);
    sqlite3_clear_bindings(st);
    if (rc != SQLITE_DONE) return db_failure(rc, "cannot store the position in sluice_checkpoints");
    return ok_status();
  }

  Result<std::optional<std::string>> load_position(std::string_view pipeline_id) override {
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

  Status erase_position(std::string_view pipeline_id) override {
    const std::string sql =
        kDialect.checkpoint_delete(kDialect.quote_identifier(sql::kCheckpointTable), "?1");
    auto stmt = db_.prepare(sql, "prepare the position delete");
    if (!stmt) return stmt.error().with_context("sqlite destination: ");
    sqlite3_stmt* st = stmt.value().get();
    sqlite3_bind_text64(st, 1, pipeline_id.data(), pipeline_id.size(), SQLITE_STATIC, SQLITE_UTF8);
    if (int rc = sqlite3_step(st); rc != SQLITE_DONE)
      return db_failure(rc, "cannot erase the stored position");
    return ok_status();
  }

  Error db_failure(int rc, std::string_view what) const {
    return sqlite::make_error(rc,
                              fmt::format("{}: {}: {}", options_.destination, what, db_.errmsg()));
  }

  static int step_once(sqlite3_stmt* st) {
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc;
  }

  SqliteDestinationOptions settings_;
  sqlite::Db db_;
  sqlite::Stmt begin_, commit_, rollback_, table_info_;
  sqlite::Stmt save_position_, load_position_;  // checkpoint_in_destination
  std::vector<std::string> scratch_;  // bind buffers, reused so the hot path does not allocate
  std::vector<sql::ColumnRef> refs_;
};

}  // namespace

Result<std::unique_ptr<Destination>> make_sqlite_destination(SqliteDestinationOptions options) {
  if (options.path.empty())
    return Error(Errc::invalid_argument,
                 "sqlite destination: `path` is empty; set the database file path");
  auto table = RecordTemplate::parse(options.table);
  if (!table) return table.error().with_context("sqlite destination: ");
  return std::unique_ptr<Destination>(
      std::make_unique<SqliteDestination>(std::move(options), std::move(table.value())));
}

}  // namespace sluice
