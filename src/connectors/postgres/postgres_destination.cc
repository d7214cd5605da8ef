#include "connectors/postgres/postgres_destination.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "connectors/postgres/pg_connection.h"
#include "sluice/json.h"
#include "connectors/record_key.h"
#include "connectors/record_template.h"

namespace sluice {

namespace {

using pg::PgConn;
using pg::PgResult;

constexpr SettingSpec kDestinationSettings[] = {
    {"url", SettingType::string, "", true,
     "libpq URL or key=value DSN of the database (postgresql://user:password@host:5432/db?sslmode=require); "
     "every libpq option, TLS included, is passed through. The user needs CREATE on the schema for tables "
     "it has to create, and TEMPORARY on the database (staging tables).",
     {}, true},
    {"table", SettingType::string, "{{table}}", false,
     "Table each record is written to: a template where {{table}} and {{schema}} (or any {{metadata-key}}) "
     "are replaced from the record's metadata. A record without table metadata goes to \"records\". Tables are "
     "created on first use with the record key as PRIMARY KEY and column types from the values (int64 bigint, "
     "uint64 numeric(20,0), float64 double precision, decimal numeric, string text, bytes bytea, json, objects and "
     "mixed arrays jsonb, homogeneous arrays the element type's array, ...); missing columns are added. Existing "
     "tables keep their column types: values are sent as text and cast by PostgreSQL."},
    {"schema", SettingType::string, "public", false,
     "Schema of the tables: a template like `table` (e.g. {{schema}} keeps the source's schema); created if "
     "missing."},
    {"checkpoint_in_destination", SettingType::boolean, "false", false,
     "Store the source position in the destination, in the same transaction as each batch (table "
     "sluice_checkpoints); on restart the pipeline resumes exactly after the last batch applied, so no change is "
     "applied twice. The table is created in `schema` (in public when `schema` is a template)."},
};

using Template = RecordTemplate;
constexpr std::string_view kDefaultTable = kDefaultTableName;

// ── values as PostgreSQL input text ─────────────────────────────────────────

enum class ColClass : uint8_t { scalar, json, array };

struct Column {
  std::string type;  // format_type()
  ColClass cls = ColClass::scalar;
};

constexpr int64_t kMicrosPerDay = 86400000000LL;

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// YYYY-MM-DD; returns true for a year before 1 AD (the caller appends " BC").
bool append_date(std::string& o, int32_t days) {
  int64_t y;
  unsigned m, d;
  civil_from_days(days, &y, &m, &d);
  bool bc = y <= 0;
  if (bc) y = 1 - y;
  fmt::format_to(std::back_inserter(o), "{:04}-{:02}-{:02}", y, m, d);
  return bc;
}

void append_timestamp(std::string& o, int64_t micros, bool tz) {
  if (micros == std::numeric_limits<int64_t>::max()) {
    o += "infinity";
    return;
  }
  if (micros == std::numeric_limits<int64_t>::min()) {
    o += "-infinity";
    return;
  }
  int64_t days = floor_div(micros, kMicrosPerDay);
  bool bc = append_date(o, int32_t(days));
  o += ' ';
  o += format_time(micros - days * kMicrosPerDay);
  if (tz) o += "+00";
  if (bc) o += " BC";
}

// The kind's text as PostgreSQL reads it for a scalar column (arrays/objects: see below).
void append_scalar_text(std::string& o, const Value& v) {
  switch (v.kind()) {
    case ValueKind::absent:
    case ValueKind::null: break;
    case ValueKind::boolean: o += v.as_bool() ? 't' : 'f'; break;
    case ValueKind::int64: fmt::format_to(std::back_inserter(o), "{}", v.as_int64()); break;
    case ValueKind::uint64: fmt::format_to(std::back_inserter(o), "{}", v.as_uint64()); break;
    case ValueKind::float64: {
      double d = v.as_double();
      if (std::isnan(d)) o += "NaN";
      else if (std::isinf(d)) o += d > 0 ? "Infinity" : "-Infinity";
      else fmt::format_to(std::back_inserter(o), "{}", d);
      break;
    }
    case ValueKind::decimal:
    case ValueKind::string:
    case ValueKind::json: o += v.as_text(); break;
    case ValueKind::bytes: {
      static const char* hex = "0123456789abcdef";
      o += "\\x";
      for (unsigned char c : v.as_text()) {
        o += hex[c >> 4];
        o += hex[c & 15];
      }
      break;
    }
    case ValueKind::date:
      if (v.as_date() == std::numeric_limits<int32_t>::max()) o += "infinity";
      else if (v.as_date() == std::numeric_limits<int32_t>::min()) o += "-infinity";
      else if (append_date(o, v.as_date())) o += " BC";
      break;
    case ValueKind::time: o += format_time(v.as_micros()); break;
    case ValueKind::timetz: o += format_timetz(v.as_micros(), v.tz_offset_seconds()); break;
    case ValueKind::timestamp: append_timestamp(o, v.as_micros(), false); break;
    case ValueKind::timestamptz: append_timestamp(o, v.as_micros(), true); break;
    case ValueKind::interval: {
      const Interval& iv = v.as_interval();
      fmt::format_to(std::back_inserter(o), "{} months {} days {} microseconds", iv.months, iv.days, iv.micros);
      break;
    }
    case ValueKind::uuid: o += format_uuid(v.uuid_bytes()); break;
    case ValueKind::array:
    case ValueKind::object: encode_value_json(v, o); break;
  }
}

// An array literal {..} with every element double-quoted (nested arrays as sub-literals).
void append_array_literal(std::string& o, const Value& v) {
  o += '{';
  bool first = true;
  for (const Value& item : v.items()) {
    if (!first) o += ',';
    first = false;
    if (item.is_null() || item.is_absent()) {
      o += "NULL";
    } else if (item.kind() == ValueKind::array) {
      append_array_literal(o, item);
    } else {
      std::string text;
      append_scalar_text(text, item);
      o += '"';
      for (char c : text) {
        if (c == '"' || c == '\\') o += '\\';
        o += c;
      }
      o += '"';
    }
  }
  o += '}';
}

// The value's text for a column of class `cls`.
void append_value_text(std::string& o, const Value& v, ColClass cls) {
  if (cls == ColClass::json) {
    if (v.kind() == ValueKind::json) o += v.as_text();
    else encode_value_json(v, o);
  } else if (cls == ColClass::array && v.kind() == ValueKind::array) {
    append_array_literal(o, v);
  } else {
    append_scalar_text(o, v);
  }
}

// COPY text format escaping of one field.
void append_copy_escaped(std::string& o, std::string_view s) {
  for (char c : s) {
    switch (c) {
      case '\\': o += "\\\\"; break;
      case '\t': o += "\\t"; break;
      case '\n': o += "\\n"; break;
      case '\r': o += "\\r"; break;
      default: o += c;
    }
  }
}

std::string_view scalar_type_for(ValueKind k) {
  switch (k) {
    case ValueKind::boolean: return "boolean";
    case ValueKind::int64: return "bigint";
    case ValueKind::uint64: return "numeric(20,0)";
    case ValueKind::float64: return "double precision";
    case ValueKind::decimal: return "numeric";
    case ValueKind::string: return "text";
    case ValueKind::bytes: return "bytea";
    case ValueKind::date: return "date";
    case ValueKind::time: return "time";
    case ValueKind::timetz: return "timetz";
    case ValueKind::timestamp: return "timestamp";
    case ValueKind::timestamptz: return "timestamptz";
    case ValueKind::interval: return "interval";
    case ValueKind::uuid: return "uuid";
    case ValueKind::json: return "jsonb";
    case ValueKind::object: return "jsonb";
    default: return "";
  }
}

// Column type for a new column from a sample value (null/absent: text).
std::string column_type_for(const Value& v) {
  if (v.kind() == ValueKind::array) {
    ValueKind elem = ValueKind::absent;
    for (const Value& item : v.items()) {
      if (item.is_null() || item.is_absent()) continue;
      if (item.kind() == ValueKind::array || item.kind() == ValueKind::object) return "jsonb";
      if (elem != ValueKind::absent && elem != item.kind()) return "jsonb";
      elem = item.kind();
    }
    if (elem == ValueKind::absent) return "jsonb";
    return std::string(scalar_type_for(elem)) + "[]";
  }
  std::string_view t = scalar_type_for(v.kind());
  return t.empty() ? "text" : std::string(t);
}

// ── state ──────────────────────────────────────────────────────────────────

struct TableState {
  std::string schema, name;
  std::string quoted;  // "schema"."name"
  bool exists = false;
  std::unordered_map<std::string, Column> columns;
  std::unordered_map<std::string, std::string> stages;  // run shape -> staging table (quoted)
};

// Consecutive records of one table, one kind, one column set.
struct Run {
  TableState* t = nullptr;
  bool is_delete = false;
  std::vector<std::string_view> cols;  // key columns first
  size_t nkeys = 0;
  std::vector<Value> vals;  // rows, cols.size() each
  std::vector<const Record*> recs;
  void clear() {
    t = nullptr;
    cols.clear();
    vals.clear();
    recs.clear();
  }
};

bool is_retriable_state(std::string_view s) {
  return s == "40P01" || s == "40001" || s == "57P01" || s == "57P02" || s == "57P03" || s == "53300" ||
         s == "55P03" || s == "53400" || (s.size() == 5 && s.substr(0, 2) == "08");
}

bool is_data_state(std::string_view s) {
  return s.size() == 5 && (s.substr(0, 2) == "22" || s.substr(0, 2) == "23" || s == "42P10" || s == "42804" ||
                           s == "42703" || s == "42P16");
}

class PostgresDestination final : public Destination {
 public:
  PostgresDestination(std::string url, Template table, Template schema, std::string checkpoint_schema)
      : url_(std::move(url)), table_(std::move(table)), schema_(std::move(schema)),
        checkpoint_schema_(std::move(checkpoint_schema)) {}

  // `checkpoint_schema` empty: checkpoint_in_destination is off.
  Status open(const ConnectorContext& ctx) override {
    pipeline_id_ = ctx.pipeline_id;
    if (Status s = connect(); !s) return s;
    if (checkpoint_schema_.empty()) return ok_status();
    checkpoint_table_ = pg::quote_identifier(checkpoint_schema_) + ".\"sluice_checkpoints\"";
    if (checkpoint_schema_ != "public") {
      if (Status s = exec("CREATE SCHEMA IF NOT EXISTS " + pg::quote_identifier(checkpoint_schema_), nullptr); !s)
        return s;
    }
    return exec("CREATE TABLE IF NOT EXISTS " + checkpoint_table_ +
                    " (pipeline text PRIMARY KEY, position bytea NOT NULL, updated_at timestamptz NOT NULL "
                    "DEFAULT now())",
                nullptr);
  }

  bool stores_positions() const noexcept override { return !checkpoint_schema_.empty(); }

  Result<std::optional<std::string>> stored_position(std::string_view pipeline_id) override {
    if (checkpoint_schema_.empty()) return std::optional<std::string>();
    if (!conn_.ok()) {
      conn_.reset();
      if (Status s = connect(); !s) return std::move(s).error();
    }
    const std::string sql = "SELECT position FROM " + checkpoint_table_ + " WHERE pipeline = $1";
    const std::string id(pipeline_id);
    const char* params[] = {id.c_str()};
    PgResult r(PQexecParams(conn_.get(), sql.c_str(), 1, nullptr, params, nullptr, nullptr, /*binary*/ 1));
    if (!r || PQresultStatus(r.get()) != PGRES_TUPLES_OK) return failure(r.get(), nullptr, nullptr);
    if (PQntuples(r.get()) == 0) return std::optional<std::string>();
    return std::optional<std::string>(std::string(PQgetvalue(r.get(), 0, 0), size_t(PQgetlength(r.get(), 0, 0))));
  }

  void write(Batch& batch, WriteDone done) override {
    Status s = write_batch(batch);
    if (!s.ok()) {
      if (conn_.ok()) {
        PgResult r(PQexec(conn_.get(), "ROLLBACK"));
      }
      if (!conn_.ok()) conn_.reset();  // reconnect on the next write
      forget();
    }
    done(std::move(s));
  }

  void close() noexcept override {
    forget();
    conn_.reset();
  }

 private:
  Status connect() {
    auto c = PgConn::connect(url_, false);
    if (!c) return c.error().with_context("postgres destination: ");
    conn_ = std::move(c.value());
    PQsetNoticeProcessor(conn_.get(), [](void*, const char*) {}, nullptr);
    return ok_status();
  }

  void forget() noexcept {
    tables_.clear();
    last_table_ = nullptr;
  }

  Status write_batch(const Batch& batch) {
    // An empty batch still commits its position (the runtime contract, sluice/connector.h).
    if (batch.empty() && (checkpoint_schema_.empty() || batch.position().empty())) return ok_status();
    if (!conn_.ok()) {
      conn_.reset();
      if (Status s = connect(); !s) return s;
    }
    if (Status s = exec("BEGIN", nullptr); !s) return s;
    seq_ = 0;
    run_.clear();
    for (const Record& r : batch.records())
      if (Status s = add_record(r); !s) return s;
    if (Status s = flush_run(); !s) return s;
    if (!checkpoint_schema_.empty() && !batch.position().empty()) {
      if (Status s = save_position(batch.position()); !s) return s;
    }
    return exec("COMMIT", nullptr);
  }

  // Inside the batch's transaction: the position commits (or rolls back) with the rows.
  Status save_position(const std::string& position) {
    const std::string sql = "INSERT INTO " + checkpoint_table_ +
                            " (pipeline, position, updated_at) VALUES ($1, $2, now()) ON CONFLICT (pipeline) DO "
                            "UPDATE SET position = EXCLUDED.position, updated_at = EXCLUDED.updated_at";
    const Oid types[] = {25 /* text */, 17 /* bytea */};
    const char* values[] = {pipeline_id_.c_str(), position.data()};
    const int lengths[] = {0, int(position.size())};
    const int formats[] = {0, 1};
    PgResult r(PQexecParams(conn_.get(), sql.c_str(), 2, types, values, lengths, formats, 0));
    if (r && PQresultStatus(r.get()) == PGRES_COMMAND_OK) return ok_status();
    return failure(r.get(), nullptr, nullptr);
  }

  Result<TableState*> table_for(const Record& r) {
    schema_.render(r, schema_buf_, "public");
    table_.render(r, table_buf_, kDefaultTable);
    key_buf_ = schema_buf_;
    key_buf_ += '\0';
    key_buf_ += table_buf_;
    if (last_table_ && last_key_ == key_buf_) return last_table_;
    auto it = tables_.find(key_buf_);
    if (it == tables_.end()) {
      auto t = std::make_unique<TableState>();
      t->schema = schema_buf_;
      t->name = table_buf_;
      t->quoted = pg::quote_identifier(t->schema) + "." + pg::quote_identifier(t->name);
      if (Status s = load_columns(*t); !s) return std::move(s).error();
      it = tables_.emplace(key_buf_, std::move(t)).first;
    }
    last_key_ = key_buf_;
    last_table_ = it->second.get();
    return last_table_;
  }

  Status add_record(const Record& r) {
    auto tr = table_for(r);
    if (!tr) return std::move(tr).error();
    TableState* t = tr.value();

    if (is_truncate(r)) {
      if (Status s = flush_run(); !s) return s;
      if (!t->exists) {
        if (Status s = load_columns(*t); !s) return s;
        if (!t->exists) return ok_status();
      }
      return exec("TRUNCATE " + t->quoted, nullptr, t);
    }

    std::span<const Field> key = record_key_fields(r, scalar_key_);
    if (key.empty())
      return record_error(Errc::data, *t, r,
                          "record has no key; this destination upserts and deletes by key (give the source table "
                          "a primary key, or set the key with a processor)");

    if (r.op == Operation::remove) {
      row_cols_.clear();
      row_vals_.clear();
      for (const Field& f : key) {
        if (f.value.is_null() || f.value.is_absent())
          return record_error(Errc::data, *t, r, fmt::format("key field \"{}\" is null", f.name));
        row_cols_.push_back(f.name);
        row_vals_.push_back(f.value);
      }
      return append_row(t, true, key.size(), r);
    }

    // Present fields only: an absent one (unchanged TOAST) keeps the stored value.
    present_.clear();
    if (r.after.is_object()) {
      for (const Field& f : r.after.fields())
        if (!f.value.is_absent()) present_.push_back(&f);
    } else if (!r.after.is_absent() && !r.after.is_null()) {
      scalar_after_ = Field{"value", r.after};
      present_.push_back(&scalar_after_);
    }

    row_cols_.clear();
    row_vals_.clear();
    bool moved = false;
    for (const Field& k : key) {
      const Value* v = &k.value;
      for (const Field* f : present_)
        if (f->name == k.name) {
          if (r.op == Operation::update && !(f->value == k.value)) moved = true;
          v = &f->value;
          break;
        }
      if (v->is_null() || v->is_absent())
        return record_error(Errc::data, *t, r, fmt::format("key field \"{}\" is null", k.name));
      row_cols_.push_back(k.name);
      row_vals_.push_back(*v);
    }

    // An update that changes the key moves the row: delete the old key first.
    if (r.op == Operation::update) {
      old_vals_.clear();
      if (moved) {
        for (const Field& k : key) old_vals_.push_back(k.value);
      } else if (r.before.is_object()) {
        bool differs = false, usable = true;
        for (size_t i = 0; i < key.size(); ++i) {
          const Value* old = r.before.find(key[i].name);
          if (!old || old->is_absent() || old->is_null()) {
            usable = false;
            break;
          }
          if (!(*old == row_vals_[i])) differs = true;
          old_vals_.push_back(*old);
        }
        if (!usable || !differs) old_vals_.clear();
      }
      if (!old_vals_.empty()) {
        std::vector<std::string_view> cols(row_cols_.begin(), row_cols_.end());
        std::vector<Value> vals(row_vals_.begin(), row_vals_.end());
        row_vals_.assign(old_vals_.begin(), old_vals_.end());
        if (Status s = append_row(t, true, key.size(), r); !s) return s;
        row_cols_ = std::move(cols);
        row_vals_ = std::move(vals);
      }
    }

    for (const Field* f : present_) {
      bool is_key = false;
      for (const Field& k : key) is_key |= k.name == f->name;
      if (is_key) continue;
      row_cols_.push_back(f->name);
      row_vals_.push_back(f->value);
    }
    return append_row(t, false, key.size(), r);
  }

  // Adds row_cols_/row_vals_ to the current run, or flushes it and starts another.
  Status append_row(TableState* t, bool is_delete, size_t nkeys, const Record& r) {
    if (run_.t != t || run_.is_delete != is_delete || run_.nkeys != nkeys || run_.cols != row_cols_) {
      if (Status s = flush_run(); !s) return s;
      run_.t = t;
      run_.is_delete = is_delete;
      run_.nkeys = nkeys;
      run_.cols = row_cols_;
    }
    run_.vals.insert(run_.vals.end(), row_vals_.begin(), row_vals_.end());
    run_.recs.push_back(&r);
    return ok_status();
  }

  // The first non-null value of column `c` in the run (for its type).
  const Value& sample(size_t c) const {
    const size_t w = run_.cols.size();
    for (size_t i = c; i < run_.vals.size(); i += w)
      if (!run_.vals[i].is_null() && !run_.vals[i].is_absent()) return run_.vals[i];
    return run_.vals[c];
  }

  Status ensure_columns() {
    TableState& t = *run_.t;
    const Record& r0 = *run_.recs.front();
    if (!t.exists) {
      if (Status s = load_columns(t); !s) return s;
    }
    if (!t.exists) {
      if (t.schema != "public") {
        if (Status s = exec("CREATE SCHEMA IF NOT EXISTS " + pg::quote_identifier(t.schema), nullptr, &t); !s) return s;
      }
      std::string sql = "CREATE TABLE IF NOT EXISTS " + t.quoted + " (";
      for (size_t c = 0; c < run_.cols.size(); ++c) {
        sql += pg::quote_identifier(run_.cols[c]);
        sql += ' ';
        sql += column_type_for(sample(c));
        if (c < run_.nkeys) sql += " NOT NULL";
        sql += ", ";
      }
      sql += "PRIMARY KEY (";
      for (size_t c = 0; c < run_.nkeys; ++c) {
        if (c) sql += ", ";
        sql += pg::quote_identifier(run_.cols[c]);
      }
      sql += "))";
      if (Status s = exec(sql, nullptr, &t); !s) return s;
      if (Status s = load_columns(t); !s) return s;
      if (!t.exists) return record_error(Errc::internal, t, r0, "the table is missing right after CREATE TABLE");
    }
    bool added = false;
    for (size_t c = 0; c < run_.cols.size(); ++c) {
      if (t.columns.count(std::string(run_.cols[c]))) continue;
      std::string sql = "ALTER TABLE " + t.quoted + " ADD COLUMN IF NOT EXISTS " + pg::quote_identifier(run_.cols[c]) +
                        " " + column_type_for(sample(c));
      if (Status s = exec(sql, nullptr, &t); !s) return s;
      added = true;
    }
    if (added) return load_columns(t);
    return ok_status();
  }

  Status flush_run() {
    if (!run_.t || run_.recs.empty()) {
      run_.clear();
      return ok_status();
    }
    TableState& t = *run_.t;
    if (run_.is_delete) {
      if (!t.exists) {
        if (Status s = load_columns(t); !s) return s;
        if (!t.exists) {  // nothing to delete from a table never created
          run_.clear();
          return ok_status();
        }
      }
      for (size_t c = 0; c < run_.cols.size(); ++c)
        if (!t.columns.count(std::string(run_.cols[c])))
          return record_error(Errc::data, t, *run_.recs.front(),
                              fmt::format("the table has no key column \"{}\"", run_.cols[c]));
    } else {
      if (Status s = ensure_columns(); !s) return s;
    }

    // Staging table for this shape (kept for the session; ON COMMIT DELETE ROWS empties it).
    shape_buf_ = run_.is_delete ? "d" : "u";
    for (auto c : run_.cols) {
      shape_buf_ += '\0';
      shape_buf_ += c;
    }
    auto st = t.stages.find(shape_buf_);
    if (st == t.stages.end()) {
      std::string stage = pg::quote_identifier(fmt::format("sluice_stage_{}", ++stage_counter_));
      std::string sql = "CREATE TEMP TABLE " + stage + " ON COMMIT DELETE ROWS AS SELECT 0::bigint AS \"__sluice_seq\"";
      for (auto c : run_.cols) sql += ", " + pg::quote_identifier(c);
      sql += " FROM " + t.quoted + " WITH NO DATA";
      if (Status s = exec(sql, nullptr, &t); !s) return s;
      st = t.stages.emplace(shape_buf_, stage).first;
    }
    const std::string& stage = st->second;
    const int64_t first_seq = seq_;

    // COPY the rows.
    std::string cols_sql;
    for (size_t c = 0; c < run_.cols.size(); ++c) {
      if (c) cols_sql += ", ";
      cols_sql += pg::quote_identifier(run_.cols[c]);
    }
    col_class_.clear();
    for (auto c : run_.cols) {
      auto it = t.columns.find(std::string(c));
      col_class_.push_back(it == t.columns.end() ? ColClass::scalar : it->second.cls);
    }
    if (Status s = copy_in("COPY " + stage + " (\"__sluice_seq\", " + cols_sql + ") FROM STDIN"); !s) return s;

    std::string sql;
    if (run_.is_delete) {
      sql = "DELETE FROM " + t.quoted + " AS t USING " + stage + " AS s WHERE s.\"__sluice_seq\" >= " +
            std::to_string(first_seq);
      for (size_t c = 0; c < run_.cols.size(); ++c) {
        std::string q = pg::quote_identifier(run_.cols[c]);
        sql += " AND t." + q + " = s." + q;
      }
    } else {
      std::string keys;
      for (size_t c = 0; c < run_.nkeys; ++c) {
        if (c) keys += ", ";
        keys += pg::quote_identifier(run_.cols[c]);
      }
      sql = "INSERT INTO " + t.quoted + " (" + cols_sql + ") SELECT DISTINCT ON (" + keys + ") " + cols_sql + " FROM " +
            stage + " WHERE \"__sluice_seq\" >= " + std::to_string(first_seq) + " ORDER BY " + keys +
            ", \"__sluice_seq\" DESC ON CONFLICT (" + keys + ") DO ";
      if (run_.cols.size() == run_.nkeys) {
        sql += "NOTHING";
      } else {
        sql += "UPDATE SET ";
        for (size_t c = run_.nkeys; c < run_.cols.size(); ++c) {
          if (c > run_.nkeys) sql += ", ";
          std::string q = pg::quote_identifier(run_.cols[c]);
          sql += q + " = EXCLUDED." + q;
        }
      }
    }
    Status s = exec(sql, &run_, &t);
    run_.clear();
    return s;
  }

  Status copy_in(const std::string& sql) {
    TableState& t = *run_.t;
    PgResult r(PQexec(conn_.get(), sql.c_str()));
    if (!r || PQresultStatus(r.get()) != PGRES_COPY_IN) return failure(r.get(), nullptr, &t);
    r.reset();
    const size_t w = run_.cols.size();
    buf_.clear();
    bool send_failed = false;
    for (size_t row = 0; row < run_.recs.size(); ++row) {
      fmt::format_to(std::back_inserter(buf_), "{}", seq_++);
      for (size_t c = 0; c < w; ++c) {
        buf_ += '\t';
        const Value& v = run_.vals[row * w + c];
        if (v.is_null() || v.is_absent()) {
          buf_ += "\\N";
          continue;
        }
        text_.clear();
        append_value_text(text_, v, col_class_[c]);
        append_copy_escaped(buf_, text_);
      }
      buf_ += '\n';
      if (buf_.size() >= (1u << 20)) {
        if (PQputCopyData(conn_.get(), buf_.data(), int(buf_.size())) != 1) {
          send_failed = true;
          break;
        }
        buf_.clear();
      }
    }
    if (!send_failed && !buf_.empty() && PQputCopyData(conn_.get(), buf_.data(), int(buf_.size())) != 1)
      send_failed = true;
    if (PQputCopyEnd(conn_.get(), send_failed ? "send failed" : nullptr) != 1 && !conn_.ok())
      return Error(Errc::connection, "postgres destination: connection lost during COPY: " + conn_.last_error(), true);
    Status result = ok_status();
    bool have = false;
    while (PGresult* raw = PQgetResult(conn_.get())) {
      PgResult res(raw);
      if (have) continue;
      if (PQresultStatus(raw) != PGRES_COMMAND_OK) {
        result = failure(raw, &run_, &t);
        have = true;
      }
    }
    if (result.ok() && send_failed)
      return Error(Errc::connection, "postgres destination: connection lost during COPY: " + conn_.last_error(), true);
    return result;
  }

  Status exec(const std::string& sql, const Run* run, const TableState* t = nullptr) {
    PgResult r(PQexec(conn_.get(), sql.c_str()));
    if (r && (PQresultStatus(r.get()) == PGRES_COMMAND_OK || PQresultStatus(r.get()) == PGRES_TUPLES_OK))
      return ok_status();
    return failure(r.get(), run, t);
  }

  // A failed statement as an Error: transient server states and a lost connection are retriable;
  // data errors name the table and the record's key.
  Error failure(PGresult* r, const Run* run, const TableState* t) {
    std::string msg = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY)
                                                                        : PQresultErrorMessage(r)
                        : conn_.last_error();
    if (msg.empty()) msg = conn_.last_error();
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    for (char& c : msg)
      if (c == '\n') c = ' ';
    const char* state_c = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
    std::string_view state = state_c ? state_c : "";
    const std::string where = t ? fmt::format("table {}: ", t->quoted) : std::string();
    if (!conn_.ok())
      return Error(Errc::connection, fmt::format("postgres destination: {}connection lost: {}", where, msg), true);
    if (is_retriable_state(state))
      return Error(state.substr(0, 2) == "40" || state == "55P03" ? Errc::conflict : Errc::connection,
                   fmt::format("postgres destination: {}{} (SQLSTATE {}; retrying)", where, msg, state), true);
    if (is_data_state(state) && t) {
      const char* detail = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_DETAIL) : nullptr;
      std::string what = msg;
      if (detail && *detail) what += fmt::format(" ({})", detail);
      if (state == "42P10")
        what += "; the table's PRIMARY KEY (or a UNIQUE index) must be exactly the record key columns";
      what += fmt::format(" [SQLSTATE {}]", state);
      const Record* rec = nullptr;
      if (run && !run->recs.empty()) {
        rec = run->recs.front();
        // COPY errors say which line (= row of the run) failed.
        const char* ctx = PQresultErrorField(r, PG_DIAG_CONTEXT);
        if (ctx) {
          if (const char* p = std::strstr(ctx, ", line ")) {
            size_t line = size_t(std::strtoull(p + 7, nullptr, 10));
            if (line >= 1 && line <= run->recs.size()) rec = run->recs[line - 1];
          }
        }
        if (run->recs.size() > 1 && !(ctx && std::strstr(ctx, ", line ")))
          what += fmt::format(" (one of {} records of this statement, the first shown)", run->recs.size());
      }
      if (rec) return record_error(Errc::data, *t, *rec, what);
      return Error(Errc::data, fmt::format("postgres destination: {}{}", where, what));
    }
    Error e = pg::classify_error(msg, "");
    return Error(e.code(), fmt::format("postgres destination: {}{}{}", where, e.message(),
                                       state.empty() ? "" : fmt::format(" [SQLSTATE {}]", state)),
                 e.retriable());
  }

  Error record_error(Errc code, const TableState& t, const Record& r, std::string_view what) const {
    std::string key = r.key.is_absent() ? "(none)" : to_debug_string(r.key);
    if (key.size() > 200) key = key.substr(0, 200) + "...";
    std::string line = fmt::format("postgres destination: table {}, {} key {}: {}", t.quoted, operation_name(r.op), key,
                                   what);
    for (char& c : line)
      if (c == '\n') c = ' ';
    return Error(code, std::move(line));
  }

  Status load_columns(TableState& t) {
    static const std::string kSql =
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod), ty.typcategory, ty.typname "
        "FROM pg_attribute a JOIN pg_type ty ON ty.oid = a.atttypid "
        "WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped";
    const char* params[] = {t.quoted.c_str()};
    PgResult r(PQexecParams(conn_.get(), kSql.c_str(), 1, nullptr, params, nullptr, nullptr, 0));
    if (!r || PQresultStatus(r.get()) != PGRES_TUPLES_OK) return failure(r.get(), nullptr, &t);
    t.columns.clear();
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      Column c;
      c.type = PQgetvalue(r.get(), i, 1);
      std::string_view cat = PQgetvalue(r.get(), i, 2);
      std::string_view typname = PQgetvalue(r.get(), i, 3);
      if (typname == "json" || typname == "jsonb") c.cls = ColClass::json;
      else if (cat == "A") c.cls = ColClass::array;
      t.columns.emplace(PQgetvalue(r.get(), i, 0), std::move(c));
    }
    t.exists = !t.columns.empty();
    return ok_status();
  }

  std::string url_;
  Template table_, schema_;
  std::string checkpoint_schema_, checkpoint_table_, pipeline_id_;
  PgConn conn_;
  std::unordered_map<std::string, std::unique_ptr<TableState>> tables_;
  TableState* last_table_ = nullptr;
  std::string last_key_;
  uint64_t stage_counter_ = 0;
  int64_t seq_ = 0;
  Run run_;
  // Working memory reused across records.
  std::string schema_buf_, table_buf_, key_buf_, shape_buf_, buf_, text_;
  std::vector<const Field*> present_;
  std::vector<std::string_view> row_cols_;
  std::vector<Value> row_vals_, old_vals_;
  std::vector<ColClass> col_class_;
  Field scalar_key_, scalar_after_;
};

}  // namespace

constinit const std::span<const SettingSpec> kPostgresDestinationSettings = kDestinationSettings;

Result<std::unique_ptr<Destination>> make_postgres_destination(const Settings& settings) {
  std::string url = settings.get_string("url");
  if (url.empty()) return Error(Errc::invalid_argument, "postgres destination: `url` is empty; set the database URL");
  auto table = Template::parse(settings.has("table") ? settings.get_string("table") : "{{table}}", "table");
  if (!table) return table.error().with_context("postgres destination: ");
  auto schema = Template::parse(settings.has("schema") ? settings.get_string("schema") : "public", "schema");
  if (!schema) return schema.error().with_context("postgres destination: ");
  std::string checkpoint_schema;
  if (settings.has("checkpoint_in_destination") && settings.get_bool("checkpoint_in_destination")) {
    checkpoint_schema = settings.has("schema") ? settings.get_string("schema") : "public";
    if (checkpoint_schema.empty() || checkpoint_schema.find("{{") != std::string::npos) checkpoint_schema = "public";
  }
  return std::unique_ptr<Destination>(std::make_unique<PostgresDestination>(
      std::move(url), std::move(table.value()), std::move(schema.value()), std::move(checkpoint_schema)));
}

}  // namespace sluice
