// Incremental snapshots of the postgres source (the algorithm: connectors/common/
// incremental_snapshot.h). PostgreSQL's part:
//
//   watermarks   transactional logical messages, pg_logical_emit_message(true, 'sluice.watermark',
//                'low <id>' | 'high <id>'), written on the catalogue connection; they arrive in
//                the replication stream in commit order (START_REPLICATION asks for messages), so
//                no table has to exist for them
//   chunks       SELECT <columns> FROM t WHERE (k1, k2) > ($1, $2) ORDER BY k1, k2 LIMIT n on the
//                same connection (autocommit, READ COMMITTED: it sees everything committed before
//                the low watermark); values in the text form pgoutput also uses, so a chunk row's
//                key and a streamed change's key compare as text, and one decoder serves both
//   triggers     a table listed in `tables` that the stream did not deliver at the checkpoint (the
//                position's captured oids) or that the publication gained in this run, while the
//                pipeline resumes streaming (added to `tables`), a row of type execute-snapshot in
//                `signal.table` (which sluice adds to the publication; its rows are consumed, never
//                emitted), and `sluice snapshot`, which inserts such a row
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "connectors/postgres/postgres_source_driver.h"

namespace sluice::pg {

namespace {

// The rows of a table's first incremental chunk, read before its bytes per row are known.
constexpr int64_t kIncrementalProbeRows = 16;

constexpr std::string_view kWatermarkPrefix = "sluice.watermark";

// schema.table as a user writes it: quoted only where parse_table_name() needs quotes.
std::string qualified_name(std::string_view schema, std::string_view name) {
  auto part = [](std::string_view p) {
    bool plain = !p.empty() && !(p[0] >= '0' && p[0] <= '9');
    for (char c : p)
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) plain = false;
    return plain ? std::string(p) : quote_identifier(p);
  };
  return part(schema) + "." + part(name);
}

std::string signal_setup_sql(const std::string& qualified) {
  return fmt::format(
      "CREATE TABLE {} (id varchar(42) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048))",
      qualified);
}

}  // namespace

const TableRef* PostgresDriver::find_table(std::string_view spec) const {
  auto name = parse_table_name(spec);
  if (!name) return nullptr;
  for (const TableRef& t : tables_)
    if (t.schema == name->first && t.name == name->second) return &t;
  return nullptr;
}

bool PostgresDriver::delivers(uint32_t oid) const {
  return all_tables_ || oid == signal_oid_ ||
         (ddl_log_oid_ != 0 && (oid == ddl_log_oid_ || oid == ddl_state_oid_)) ||
         std::binary_search(listed_oids_.begin(), listed_oids_.end(), oid);
}

Status PostgresDriver::plan_incremental(State& s, bool resumed_stream) {
  if (!signal_table_setting_.empty()) {
    auto name = parse_table_name(signal_table_setting_);
    if (!name)
      return Error(Errc::config,
                   fmt::format("setting 'signal.table': '{}' is not a table name (schema.table)",
                               signal_table_setting_));
    const std::string q = qualified_name(name->first, name->second);
    auto r = conn_.exec_params(
        "SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 "
        "AND c.relname = $2 AND c.relkind = 'r'",
        {name->first, name->second});
    if (!r.ok()) return std::move(r).error();
    if (PQntuples(r.value().get()) == 0)
      return Error(
          Errc::not_found,
          fmt::format("signal table {} (setting 'signal.table') does not exist; create it: {}", q,
                      signal_setup_sql(q)));
    signal_oid_ = uint32_t(std::stoul(PQgetvalue(r.value().get(), 0, 0)));
    if (!all_tables_) {
      auto has = conn_.exec_params(
          "SELECT puballtables OR EXISTS (SELECT 1 FROM pg_publication_tables t WHERE t.pubname = p.pubname "
          "AND t.schemaname = $2 AND t.tablename = $3) FROM pg_publication p WHERE p.pubname = $1",
          {publication_, name->first, name->second});
      if (!has.ok()) return std::move(has).error();
      if (PQntuples(has.value().get()) == 1 &&
          std::string_view(PQgetvalue(has.value().get(), 0, 0)) != "t") {
        if (auto a = conn_.exec(
                "ALTER PUBLICATION " + quote_identifier(publication_) + " ADD TABLE " + q,
                PGRES_COMMAND_OK);
            !a.ok())
          return a.error().with_context("cannot add the signal table to the publication: ");
        spdlog::info("pipeline {}: added signal table {} to publication {}", ctx_.pipeline_id, q,
                     publication_);
      }
    }
  }
  // The tables the stream delivers from here on, recorded in the position: a later run tells a
  // table listed again from one captured all along by it, whatever the publication holds.
  listed_oids_.clear();
  if (!all_tables_)
    for (const TableRef& t : tables_) listed_oids_.push_back(t.oid);
  std::sort(listed_oids_.begin(), listed_oids_.end());
  listed_oids_.erase(std::unique(listed_oids_.begin(), listed_oids_.end()), listed_oids_.end());
  const std::vector<uint64_t> captured_before = std::move(s.position.captured);
  s.position.captured.assign(listed_oids_.begin(), listed_oids_.end());
  // A table added to `tables` since the checkpoint (not among the tables it delivered, or missing
  // from the publication): the stream only carries its changes from now on, so its existing rows
  // are read incrementally.
  if (resumed_stream && mode_ != "never" && s.position.phase == LogPhase::stream) {
    std::vector<std::string> added;
    bool shapes_forgotten = false;
    for (const TableRef& t : tables_) {
      const bool new_to_stream =
          !all_tables_ && !captured_before.empty() &&
          !std::binary_search(captured_before.begin(), captured_before.end(), uint64_t(t.oid));
      const bool new_to_publication =
          std::any_of(added_to_publication_.begin(), added_to_publication_.end(),
                      [&](const TableRef& a) { return a.oid == t.oid; });
      if (t.oid == signal_oid_ || !(new_to_stream || new_to_publication)) continue;
      std::string name = qualified_name(t.schema, t.name);
      const auto& pending = s.position.incremental.tables;
      // Copied anew from here on, every row with the columns it has now: a shape stored before
      // the table left `tables` is no baseline (a column added with a default meanwhile would stop
      // the stream, as if old rows could read a value the stream never carried). Its shape is
      // read from the catalogue at this start instead (record_catalog_shapes), as for a table
      // never captured.
      if (!ddl_capture_ && std::find(pending.begin(), pending.end(), name) == pending.end()) {
        SLUICE_TRY(load_shapes());
        shapes_forgotten |= shapes_.erase(t.oid) > 0;
      }
      added.push_back(std::move(name));
    }
    if (shapes_forgotten) SLUICE_TRY(save_history());
    if (s.incremental.add_tables(s.position.incremental, added) > 0)
      spdlog::info("pipeline {}: incremental snapshot of the table(s) added to `tables`: {}",
                   ctx_.pipeline_id, fmt::join(added, ", "));
  }
  if (!s.position.incremental.empty())
    spdlog::info("pipeline {}: incremental snapshot pending: {}", ctx_.pipeline_id,
                 fmt::join(s.position.incremental.tables, ", "));
  return ok_status();
}

Status PostgresDriver::start_chunk_if_due(Batch& batch, size_t max_bytes) {
  IncrementalState& inc = st_->position.incremental;
  IncrementalSnapshot& engine = st_->incremental;
  if (!engine.chunk_due(inc)) return ok_status();
  const std::string table(IncrementalSnapshot::current(inc));
  const TableRef* ref = find_table(table);
  if (!ref)
    return Error(
        Errc::config,
        fmt::format("incremental snapshot of {}: the table is not in `tables` (or no longer "
                    "exists); add it to `tables`, or run `sluice cleanup` and start over",
                    table));
  if (!conn_.ok() || !conn_.exec("SELECT 1").ok()) {
    auto c = PgConn::connect(url_, false, net_);
    if (!c.ok()) return std::move(c).error();
    conn_ = std::move(c.value());
  }
  if (inc_name_ != table || !inc_table_) {
    // The catalogue's description, kept apart from the stream's (which pgoutput's Relation
    // messages own).
    std::optional<TableState> saved;
    if (auto it = table_states_.find(ref->oid); it != table_states_.end()) saved = it->second;
    auto t = table_from_catalog(*ref);
    if (!t.ok()) return std::move(t).error();
    inc_table_ = *t.value();
    if (saved) table_states_[ref->oid] = *saved;
    else table_states_.erase(ref->oid);
    if (inc_table_->key_columns.empty())
      return Error(Errc::unsupported,
                   fmt::format("incremental snapshot of {}: the table has no primary key, so it "
                               "cannot be read in key order; add a primary key",
                               table));
    inc_name_ = table;
    inc_oid_ = ref->oid;
    inc_row_bytes_ = 0;
    if (st_->ctx.stats && inc.cursor.kind == KeysetCursor::Kind::start) {
      st_->ctx.stats->snapshot_rows_total = ref->estimate;
      st_->ctx.stats->snapshot_rows_done = 0;
    }
  }
  const TableState& ts = *inc_table_;
  const auto& cols = ts.rel->columns;
  std::string select, order, params;
  for (const auto& c : cols) select += (select.empty() ? "" : ", ") + quote_identifier(c.name);
  for (size_t k = 0; k < ts.key_columns.size(); ++k) {
    order += (k ? ", " : "") + quote_identifier(cols[ts.key_columns[k]].name);
    params += fmt::format("{}${}", k ? ", " : "", k + 1);
  }
  std::vector<std::string> args;
  std::string where;
  if (inc.cursor.kind == KeysetCursor::Kind::after_key) {
    if (inc.cursor.key.size() != ts.key_columns.size())
      return Error(Errc::data,
                   fmt::format("incremental snapshot of {}: the checkpoint's cursor has {} key "
                               "values, the primary key {} columns; run `sluice snapshot` again",
                               table, inc.cursor.key.size(), ts.key_columns.size()));
    where = fmt::format(" WHERE ({}) > ({})", order, params);
    args = inc.cursor.key;
  }
  // The chunk is held until its window closes, then its kept rows go into one batch: as many rows
  // as the batch's bytes hold at the largest bytes per row seen in the table; before any, a few
  // (the read below also stops at the bytes; the limit keeps what it reads and drops small).
  const int64_t limit =
      inc_row_bytes_ > 0
          ? std::min(chunk_size_, std::max<int64_t>(1, int64_t(double(max_bytes) / inc_row_bytes_)))
          : std::min<int64_t>(chunk_size_, kIncrementalProbeRows);
  const std::string sql = fmt::format("SELECT {} FROM {}.{}{} ORDER BY {} LIMIT {}", select,
                                      quote_identifier(ts.rel->schema),
                                      quote_identifier(ts.rel->name), where, order, limit);
  // The table's first chunk: snapshot_begin goes first, before any streamed change can drop a
  // key from the chunk, so that a keyed destination's reconcile counts those changes as seen (a
  // change before the marker that left the chunk would be swept at snapshot_end).
  if (engine.table_started(inc)) add_snapshot_marker(batch, ts.rel->schema, ts.rel->name, true);
  const std::string id = engine.begin_chunk();
  auto emit = [&](std::string_view kind) {
    return conn_.exec_params("SELECT pg_logical_emit_message(true, $1, $2)",
                             {std::string(kWatermarkPrefix), fmt::format("{} {}", kind, id)});
  };
  if (auto low = emit("low"); !low.ok())
    return low.error().with_context("cannot write the low watermark: ");
  // Rows are taken as they arrive and the read stops at the batch's bytes (a row far larger
  // than the ones before it would otherwise bring a chunk of up to `limit` such rows).
  std::vector<ChunkRow> rows;
  Arena scratch(4096);
  size_t bytes = 0;
  bool cut = false;
  const size_t ncols = cols.size();
  Status read = conn_.exec_params_rows(sql, args, [&](const PGresult* res, int i) {
    ChunkRow& row = rows.emplace_back();
    row.row.resize(ncols);
    bytes += sizeof(Record) + ncols * sizeof(Value);
    for (size_t c = 0; c < ncols; ++c) {
      if (PQgetisnull(res, i, int(c))) continue;
      const size_t len = size_t(PQgetlength(res, i, int(c)));
      row.row[c] = std::string(PQgetvalue(res, i, int(c)), len);
      bytes += len;
    }
    for (uint32_t k : ts.key_columns) {
      const std::string text = row.row[k].value_or(std::string());
      row.key.push_back(key_part(cols[k].type_oid, text, false, scratch));
      row.cursor_key.push_back(text);
    }
    cut = max_bytes > 0 && bytes >= max_bytes;
    return !cut;
  });
  if (!read.ok())
    return read.error().with_context(fmt::format("cannot read a chunk of {}: ", table));
  const int64_t n = int64_t(rows.size());
  if (n > 0) inc_row_bytes_ = std::max(inc_row_bytes_, double(bytes) / double(n));
  engine.chunk_read(std::move(rows), !cut && n < limit);
  if (auto high = emit("high"); !high.ok())
    return high.error().with_context("cannot write the high watermark: ");
  spdlog::debug(
      "pipeline {}: incremental snapshot of {}: chunk of {} rows ({} bytes) read (window {})",
      ctx_.pipeline_id, table, n, bytes, id);
  return ok_status();
}

Result<bool> PostgresDriver::incremental_message(Batch& batch, const LogicalMsg& m) {
  if (m.prefix == kHeartbeatPrefix) return true;  // pg_slot_health.cc: moves the slot, no record
  if (m.prefix != kWatermarkPrefix) return false;
  IncrementalSnapshot& engine = st_->incremental;
  const size_t sp = m.content.find(' ');
  if (sp == std::string_view::npos) return true;
  const std::string_view kind = m.content.substr(0, sp), id = m.content.substr(sp + 1);
  if (kind == "low") engine.low_seen(id);
  else if (kind == "high") engine.high_seen(id);
  if (engine.emit_ready()) SLUICE_TRY(emit_chunk(batch));
  return true;
}

Status PostgresDriver::emit_chunk(Batch& batch) {
  IncrementalState& inc = st_->position.incremental;
  IncrementalSnapshot& engine = st_->incremental;
  const TableState& ts = *inc_table_;
  st_->caches.retain(batch, ts.rel);  // (snapshot_begin went out with the first chunk's read)
  Tuple tuple;
  int64_t emitted = 0;
  const auto& rows = engine.rows();
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!engine.kept(i)) continue;
    tuple.assign(rows[i].row.size(), TupleValue{});
    for (size_t c = 0; c < rows[i].row.size(); ++c) {
      if (rows[i].row[c]) tuple[c] = TupleValue{'t', *rows[i].row[c]};
      else tuple[c] = TupleValue{'n', {}};
    }
    Record& r = batch.add();
    r.op = Operation::snapshot;
    r.metadata = metadata(batch, ts, {}, false);
    if (Status st = tuple_to_object(batch, ts, tuple, false, &r.after); !st.ok()) return st;
    if (Status st = tuple_to_object(batch, ts, tuple, true, &r.key); !st.ok()) return st;
    ++emitted;
  }
  const bool last = engine.last_chunk() || rows.empty();
  const uint64_t dropped = engine.rows_dropped();
  const uint64_t total = engine.rows_emitted() + uint64_t(emitted);
  if (last) add_snapshot_marker(batch, ts.rel->schema, ts.rel->name, false);
  if (st_->ctx.stats) st_->ctx.stats->snapshot_rows_done = int64_t(total);
  if (auto done = engine.finish(inc)) {
    spdlog::info(
        "pipeline {}: incremental snapshot of {} complete ({} rows; {} left to newer streamed "
        "changes)",
        ctx_.pipeline_id, *done, total, dropped);
    inc_table_.reset();
    inc_name_.clear();
    inc_oid_ = 0;
  }
  return ok_status();
}

// One key value as the chunk and the stream both name it: its typed value (the same from its
// text and its binary form), or its bytes when sluice cannot represent it.
std::string PostgresDriver::key_part(uint32_t type_oid, std::string_view data, bool binary,
                                     Arena& scratch) const {
  auto v = binary ? binary_to_value(types_, type_oid, data, scratch)
                  : text_to_value(types_, type_oid, data, scratch);
  return v.ok() ? to_debug_string(v.value()) : fmt::format("{}:{}", binary ? 'b' : 't', data);
}

Result<bool> PostgresDriver::incremental_change(TableState& t, const Tuple* old_tuple,
                                                const Tuple* new_tuple) {
  const uint32_t oid = t.rel->oid;
  if (signal_oid_ && oid == signal_oid_) {
    if (!new_tuple) return true;  // deletes/updates of signal rows: nothing to do
    std::string_view type, data, id;
    for (size_t i = 0; i < t.rel->columns.size() && i < new_tuple->size(); ++i) {
      const std::string& c = t.rel->columns[i].name;
      // Text columns (Debezium's shape): their binary form (pgoutput `binary`) is their text.
      const uint32_t type_oid = t.rel->columns[i].type_oid;
      const bool text_like = type_oid == oid::kText || type_oid == oid::kVarchar ||
                             type_oid == oid::kBpchar || type_oid == oid::kName;
      if ((*new_tuple)[i].kind != 't' && !((*new_tuple)[i].kind == 'b' && text_like)) continue;
      if (c == "type") type = (*new_tuple)[i].data;
      else if (c == "data") data = (*new_tuple)[i].data;
      else if (c == "id") id = (*new_tuple)[i].data;
    }
    auto tables = parse_snapshot_signal(type, data);
    if (!tables.ok()) {
      spdlog::error("pipeline {}: signal {} ignored: {}", ctx_.pipeline_id, id,
                    tables.error().message());
      return true;
    }
    if (!tables.value()) {
      spdlog::info("pipeline {}: signal {} of type '{}' ignored (sluice acts on execute-snapshot)",
                   ctx_.pipeline_id, id, type);
      return true;
    }
    std::vector<std::string> names;
    for (const std::string& spec : *tables.value()) {
      const TableRef* ref = find_table(spec);
      if (!ref) {
        spdlog::error(
            "pipeline {}: signal {}: table '{}' is not captured by this pipeline (add it to "
            "`tables`); not snapshotted",
            ctx_.pipeline_id, id, spec);
        continue;
      }
      names.push_back(qualified_name(ref->schema, ref->name));
    }
    const size_t added = st_->incremental.add_tables(st_->position.incremental, names);
    spdlog::info("pipeline {}: signal {}: incremental snapshot of {} ({} queued)", ctx_.pipeline_id,
                 id, fmt::join(names, ", "), added);
    return true;
  }
  if (oid != inc_oid_ || !st_->incremental.tracking()) return false;
  // The key as its typed values (chunk_key_part): the stream's values may be binary, the
  // chunk's are text.
  Arena scratch(256);
  auto drop = [&](const Tuple* tuple) {
    if (!tuple) return;
    std::vector<std::string> parts;
    for (uint32_t k : t.key_columns) {
      if (k >= tuple->size()) return;
      const TupleValue& v = (*tuple)[k];
      if (v.kind != 't' && v.kind != 'b') return;  // key not sent (TOAST)
      parts.push_back(key_part(t.rel->columns[k].type_oid, v.data, v.kind == 'b', scratch));
    }
    std::vector<std::string_view> key(parts.begin(), parts.end());
    st_->incremental.change_seen(st_->position.incremental, inc_name_, key_identity(key));
  };
  drop(new_tuple);
  drop(old_tuple);  // a key change, or a delete
  return false;
}

void PostgresDriver::incremental_truncate(const TableState& t) {
  if (t.rel && t.rel->oid == inc_oid_)
    st_->incremental.truncate_seen(st_->position.incremental, inc_name_);
}

bool PostgresDriver::restart_incremental_of(std::string_view schema, std::string_view table) {
  IncrementalState& inc = st_->position.incremental;
  if (inc.empty() || IncrementalSnapshot::current(inc) != qualified_name(schema, table))
    return false;
  st_->incremental.restart_table(inc);
  inc_table_.reset();
  inc_name_.clear();
  inc_oid_ = 0;
  spdlog::info("pipeline {}: incremental snapshot of {} starts over: its columns changed",
               ctx_.pipeline_id, qualified_name(schema, table));
  return true;
}

Status PostgresDriver::resnapshot_after_ddl(std::string_view schema, std::string_view table,
                                            std::string_view why) {
  const std::string name = qualified_name(schema, table);
  if (!find_table(name))
    return Error(Errc::unsupported,
                 fmt::format("{}.{}: {}, so the rows that existed read values the replication "
                             "stream never carried, and the table is not in `tables` to be read "
                             "again: run `sluice cleanup` and start again to re-snapshot it",
                             quote_identifier(schema), quote_identifier(table), why));
  if (!restart_incremental_of(schema, table))
    st_->incremental.add_tables(st_->position.incremental, {name});
  spdlog::warn(
      "pipeline {}: {}.{}: {}, so the rows that existed read values the replication stream never "
      "carried: the table is read again by an incremental snapshot",
      ctx_.pipeline_id, quote_identifier(schema), quote_identifier(table), why);
  return ok_status();
}

Status PostgresDriver::request_snapshot(const ConnectorContext& ctx,
                                        const std::vector<std::string>& tables) {
  name_slot_and_publication(ctx);
  if (signal_table_setting_.empty())
    return Error(Errc::config,
                 "the pipeline's source has no `signal.table`: set it (e.g. public.sluice_signals, "
                 "see docs/incremental-snapshots.md) and restart the pipeline once");
  auto sig = parse_table_name(signal_table_setting_);
  if (!sig)
    return Error(Errc::config,
                 fmt::format("setting 'signal.table': '{}' is not a table name (schema.table)",
                             signal_table_setting_));
  auto c = PgConn::connect(url_, false, net_);
  if (!c.ok()) return std::move(c).error();
  conn_ = std::move(c.value());
  SLUICE_TRY(resolve_tables());
  std::vector<std::string> names;
  for (const std::string& spec : tables) {
    const TableRef* ref = find_table(spec);
    if (!ref)
      return Error(Errc::config,
                   fmt::format("table '{}' is not captured by pipeline {} (not in its `tables`)",
                               spec, ctx.pipeline_id));
    names.push_back(qualified_name(ref->schema, ref->name));
  }
  const std::string id =
      fmt::format("sluice-{}", std::chrono::system_clock::now().time_since_epoch().count());
  auto r = conn_.exec_params(
      fmt::format("INSERT INTO {} (id, type, data) VALUES ($1, 'execute-snapshot', $2)",
                  qualified_name(sig->first, sig->second)),
      {id, snapshot_signal_data(names)}, PGRES_COMMAND_OK);
  conn_.reset();
  if (!r.ok())
    return r.error().with_context(
        fmt::format("cannot write the signal into {}: ", qualified_name(sig->first, sig->second)));
  return ok_status();
}

}  // namespace sluice::pg
