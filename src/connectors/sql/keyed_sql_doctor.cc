// `sluice doctor` for the keyed SQL destinations: reachability, the writer's privilege checks per
// table, and the tables that already exist checked against the source's (key and column types).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "connectors/sql/keyed_sql_destination.h"
#include "sluice/batch.h"

namespace sluice::sql {

namespace {

enum class Kind { unknown, integer, number, boolean, text, temporal, json, binary };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::integer: return "integer";
    case Kind::number: return "number";
    case Kind::boolean: return "boolean";
    case Kind::text: return "text";
    case Kind::temporal: return "date/time";
    case Kind::json: return "JSON";
    case Kind::binary: return "binary";
    case Kind::unknown: break;
  }
  return "unknown";
}

// The kind of a PostgreSQL, MySQL/MariaDB or SQLite type name, by its first word.
Kind kind_of(std::string_view type) {
  std::string t;
  for (char c : type) {
    if (c == '(' || c == ' ' || c == '[') break;
    t += char(std::tolower(static_cast<unsigned char>(c)));
  }
  if (type.find('[') != std::string_view::npos) return Kind::unknown;  // arrays: not judged
  auto any = [&](std::initializer_list<std::string_view> names) {
    return std::find(names.begin(), names.end(), t) != names.end();
  };
  if (any({"smallint", "integer", "int", "bigint", "tinyint", "mediumint", "int2", "int4", "int8",
           "serial", "bigserial", "smallserial"}))
    return Kind::integer;
  if (any({"numeric", "decimal", "real", "double", "float", "float4", "float8", "money"}))
    return Kind::number;
  if (any({"boolean", "bool", "bit"})) return Kind::boolean;
  if (any({"text", "varchar", "char", "character", "tinytext", "mediumtext", "longtext", "enum",
           "set", "uuid", "citext", "name", "string", "clob"}))
    return Kind::text;
  if (any({"date", "time", "timestamp", "timestamptz", "timetz", "datetime", "year", "interval"}))
    return Kind::temporal;
  if (any({"json", "jsonb"})) return Kind::json;
  if (any({"bytea", "blob", "tinyblob", "mediumblob", "longblob", "binary", "varbinary"}))
    return Kind::binary;
  return Kind::unknown;
}

bool holds(Kind dest, Kind src) {
  if (dest == src || dest == Kind::text) return true;  // text holds every value's text
  if (dest == Kind::number) return src == Kind::integer || src == Kind::boolean;
  if (dest == Kind::integer) return src == Kind::boolean;
  if (dest == Kind::json) return src != Kind::binary;  // any scalar is a JSON value
  return false;
}

}  // namespace

std::optional<std::string> column_type_conflict(std::string_view source_type,
                                                std::string_view destination_type) {
  const Kind s = kind_of(source_type), d = kind_of(destination_type);
  if (s == Kind::unknown || d == Kind::unknown || holds(d, s)) return std::nullopt;
  return fmt::format("{} values ({}) do not fit a {} column ({})", kind_name(s), source_type,
                     kind_name(d), destination_type);
}

Result<std::vector<DoctorCheck>> KeyedSqlDestination::doctor(
    const ConnectorContext& ctx, const std::vector<SourceTable>& tables) {
  using O = DoctorCheck::Outcome;
  pipeline_id_ = ctx.pipeline_id;
  dead_letter_queue_ = ctx.is_dead_letter_queue;
  std::vector<DoctorCheck> out;
  const std::string reach =
      has_server_connection() ? "the server accepts the connection" : "the database opens";
  if (Status st = connect(); !st.ok()) {
    out.push_back({O::fail, reach, st.error().message(),
                   "check `url` (or `path`), the credentials and that the server is reachable"});
    return out;
  }
  struct Disconnect {
    KeyedSqlDestination* d;
    ~Disconnect() {
      d->forget_tables();
      d->disconnect();
    }
  } guard{this};
  out.push_back({O::pass, reach, options_.destination, {}});
  doctor_session(out);
  if (Status st = check_routing(tables); !st.ok())
    out.push_back({O::fail, "each source table has a destination table of its own",
                   st.error().message(), "see the message"});
  // Tables are named from record metadata: only a template of {{schema}}/{{table}} (and text)
  // names them before records arrive.
  auto renders = [](const RecordTemplate& t) {
    for (std::string_view p : t.placeholders())
      if (p != "table" && p != "schema") return false;
    return true;
  };
  if (!renders(options_.table) || (options_.schema && !renders(*options_.schema))) {
    out.push_back({O::warn, "the destination tables are known",
                   "`table` or `schema` names record metadata: the tables are known only once "
                   "records arrive (not checked)",
                   "check the tables by hand"});
    return out;
  }
  std::vector<std::string> seen;
  for (const SourceTable& src : tables) {
    Batch scratch;
    Record r;
    r.metadata = scratch.object(2)
                     .add(meta::kSchema, Value::string(src.schema))
                     .add(meta::kTable, Value::string(src.table))
                     .build();
    std::string schema, name;
    if (options_.schema) {
      options_.schema->render(r, schema, options_.default_schema);
      options_.table.render(r, name, kDefaultTableName);
    } else {
      name = std::string(options_.table.render(r));
    }
    SLUICE_TRY_ASSIGN(SqlTable * t, find_table(schema, name));
    if (std::find(seen.begin(), seen.end(), t->quoted) != seen.end()) continue;
    seen.push_back(t->quoted);
    doctor_table(*t, out);
    if (!t->exists) continue;
    const std::string from = src.schema.empty() ? src.table : src.schema + "." + src.table;
    // The key: upserts and deletes go by the source's key, which must be the table's.
    if (!src.key.empty()) {
      std::vector<std::string> key;
      SLUICE_TRY(load_key_columns(*t, key));
      auto same = [&](const std::vector<std::string>& a, const std::vector<std::string>& b) {
        if (a.size() != b.size()) return false;
        for (const std::string& x : a) {
          bool found = false;
          for (const std::string& y : b) found |= dialect_.folds_case() ? iequals(x, y) : x == y;
          if (!found) return false;
        }
        return true;
      };
      const std::string check = fmt::format("table {} is keyed like {}", t->quoted, from);
      auto join = [](const std::vector<std::string>& v) {
        std::string s;
        for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
        return s;
      };
      if (same(key, src.key))
        out.push_back({O::pass, check, "primary key (" + join(key) + ")", {}});
      else
        out.push_back(
            {O::fail, check,
             fmt::format("its primary key is ({}), the source's key is ({}): upserts by the key "
                         "would fail or merge rows",
                         key.empty() ? std::string("none") : join(key), join(src.key)),
             fmt::format("give {} the primary key ({}), drop it (the pipeline creates it), or "
                         "route to another table (`table`)",
                         t->quoted, join(src.key))});
    }
    // The columns of both sides with the same name: the destination's type must hold the values.
    SLUICE_TRY_ASSIGN(auto types, column_types(*t));
    std::vector<std::string> conflicts;
    for (const auto& [col, src_type] : src.columns)
      for (const auto& [dcol, dtype] : types)
        if (dialect_.folds_case() ? iequals(col, dcol) : col == dcol)
          if (auto why = column_type_conflict(src_type, dtype))
            conflicts.push_back(fmt::format("column {}: {}", col, *why));
    if (types.empty() || src.columns.empty()) continue;
    const std::string check = fmt::format("table {} can hold the columns of {}", t->quoted, from);
    if (conflicts.empty()) {
      out.push_back({O::pass, check, fmt::format("{} columns compared", src.columns.size()), {}});
    } else {
      std::string detail;
      for (const std::string& c : conflicts) detail += (detail.empty() ? "" : "; ") + c;
      out.push_back({O::fail, check, detail,
                     fmt::format("change those columns' types (ALTER TABLE {} ...), drop the "
                                 "table (the pipeline creates it), or route to another table",
                                 t->quoted)});
    }
  }
  return out;
}

}  // namespace sluice::sql
