// Incremental snapshots of the mysql source (the algorithm: connectors/common/
// incremental_snapshot.h). MySQL's / MariaDB's part:
//
//   watermarks   MySQL has no logical messages: rows in the signal table (`signal.table`), as
//                Debezium writes them — id '<window>-open', type 'snapshot-window-open', data
//                {"openWindowFor": "<window>"}, and the same with close — each in its own
//                autocommit transaction on the catalogue connection; the binlog carries them in
//                commit order with the data, and the stream recognises them by the table
//   chunks       SELECT <columns> FROM t WHERE (k1 > v1) OR (k1 = v1 AND k2 > v2) ORDER BY k1, k2
//                LIMIT n on the same connection (autocommit, so each chunk reads a fresh
//                consistent view taken after the low watermark committed); values in the text
//                form of the initial snapshot, turned into the Values the binlog decoder
//                produces (text_to_value), so that a chunk row's key and a streamed change's key
//                compare as the same Values; the cursor keeps the server's text of the last key
//   triggers     a table added to `tables` while the pipeline resumes streaming (it has no entry
//                in the schema history at the checkpoint: the stream never decoded it), a row of
//                type execute-snapshot in the signal table, and `sluice snapshot`, which inserts
//                such a row
//
// The signal table's rows are consumed in the stream, never emitted (captured() leaves it out
// even under `tables: "*"`); sluice only inserts into it (Debezium's insert-insert
// watermarking), two rows per chunk, which anyone may delete at any time.
#include <fmt/format.h>
#include <mysqld_error.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "connectors/mysql/mysql_source_driver.h"

namespace sluice::mysql {

namespace {

// The rows of a table's first incremental chunk, read before its bytes per row are known.
constexpr int64_t kIncrementalProbeRows = 16;

constexpr std::string_view kWindowOpen = "snapshot-window-open";
constexpr std::string_view kWindowClose = "snapshot-window-close";

}  // namespace

// db.table as a user writes it: a part in backticks only where it is not a plain identifier.
std::string qualified_name(std::string_view db, std::string_view table) {
  auto part = [](std::string_view p) {
    bool plain = !p.empty();
    bool digits = true;
    for (char c : p) {
      const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$';
      const bool digit = c >= '0' && c <= '9';
      if (!alpha && !digit) plain = false;
      if (!digit) digits = false;
    }
    return plain && !digits ? std::string(p) : quote_identifier(p);
  };
  return part(db) + "." + part(table);
}

namespace {

// A key column's value as one comparable text: the same for a chunk row (text_to_value of the
// server's text) and a streamed row (the binlog decoder), whose Values are alike by design.
std::string key_text(const Value& v) {
  switch (v.kind()) {
    case ValueKind::boolean: return v.as_bool() ? "1" : "0";
    case ValueKind::int64: return std::to_string(v.as_int64());
    case ValueKind::uint64: return std::to_string(v.as_uint64());
    case ValueKind::float64: return fmt::format("{}", v.as_double());
    case ValueKind::date: return std::to_string(v.as_date());
    case ValueKind::time:
    case ValueKind::timetz:
    case ValueKind::timestamp:
    case ValueKind::timestamptz: return std::to_string(v.as_micros());
    case ValueKind::decimal:
    case ValueKind::string:
    case ValueKind::bytes:
    case ValueKind::json:
    case ValueKind::uuid: return std::string(v.as_text());
    default: return std::string(value_kind_name(v.kind()));
  }
}

bool same_name(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(uint8_t(a[i])) != std::tolower(uint8_t(b[i]))) return false;
  return true;
}

}  // namespace

const TableRef* MysqlDriver::find_table(std::string_view spec) const {
  auto name = parse_qualified_name(spec, opts_.url.database);
  if (!name) return nullptr;
  for (const TableRef& t : tables_)
    if (t.db == name->first && t.table == name->second) return &t;
  return nullptr;
}

Status MysqlDriver::check_signal_table() {
  const std::string q = quote_identifier(signal_db_) + "." + quote_identifier(signal_name_);
  const std::string create = fmt::format(
      "CREATE TABLE {} (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, data TEXT); GRANT "
      "INSERT ON {} TO '{}'",
      q, q, opts_.url.user);
  auto exists = conn_.query(
      fmt::format("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = {} AND "
                  "TABLE_NAME = {}",
                  conn_.quoted(signal_db_), conn_.quoted(signal_name_)),
      "query failed");
  if (!exists.ok()) return exists.error().with_context("cannot look up the signal table: ");
  if (exists.value().empty() || exists.value()[0][0].value_or("0") == "0")
    return Error(Errc::not_found,
                 fmt::format("signal table {} (setting 'signal.table') does not exist on {} (or "
                             "user '{}' has no privilege on it); create it: {}",
                             q, opts_.url.redacted(), opts_.url.user, create));
  // Writes nothing (no row qualifies), but the server checks the columns and the INSERT
  // privilege as for a real watermark.
  const std::string probe =
      fmt::format("INSERT INTO {} (id, type, data) SELECT '', '', '' FROM DUAL WHERE 1 = 0", q);
  if (Status st = conn_.exec(probe, "query failed"); !st.ok()) {
    const unsigned no = conn_.last_errno();
    if (no == ER_TABLEACCESS_DENIED_ERROR || no == ER_COLUMNACCESS_DENIED_ERROR ||
        st.error().code() == Errc::permission)
      return Error(Errc::permission,
                   fmt::format("user '{}' cannot write the signal table {} (setting "
                               "'signal.table'), where sluice writes its snapshot watermarks: "
                               "GRANT INSERT ON {} TO '{}'",
                               opts_.url.user, q, q, opts_.url.user));
    if (no == ER_BAD_FIELD_ERROR)
      return Error(Errc::config,
                   fmt::format("signal table {} (setting 'signal.table') lacks the columns id, "
                               "type, data; create it as: {}",
                               q, create));
    if (no == ER_OPTION_PREVENTS_STATEMENT)
      return Error(Errc::config,
                   fmt::format("the signal table {} cannot be written: {} (sluice writes its "
                               "snapshot watermarks there; point the source at the primary, not a "
                               "read-only replica)",
                               q, st.error().message()));
    return st.error().with_context(fmt::format("cannot write the signal table {}: ", q));
  }
  return ok_status();
}

Status MysqlDriver::plan_incremental(State& s) {
  const BinlogCoord& at = s.position.point.coord;
  // A table that left `tables` since the checkpoint: the stream skips its changes from here on,
  // so its history ends here (a null entry, as after a DROP). Listed again in a later run, it has
  // no schema at that run's checkpoint and counts as added: its rows are copied anew, and the
  // changes made while it was not listed reach the destination instead of being lost.
  bool changed = false;
  // Entries a run wrote ahead of its checkpoint before it stopped (a DDL on the table, or its
  // history seeded when it was added) go too: they describe a stream this run does not deliver,
  // and one later than the next checkpoint would make the table look captured all along.
  for (const std::string& key : history_.tables()) {
    const size_t dot = key.find('.');
    if (dot == std::string::npos ||
        captured(std::string_view(key).substr(0, dot), std::string_view(key).substr(dot + 1)))
      continue;
    const bool forgot_ahead = history_.forget_after(key, at);
    const bool was_pending = history_.set_copy_pending(key, false);
    const auto h = history_.at(key, at);
    if (h && *h) history_.record(key, at, nullptr);
    else if (!forgot_ahead && !was_pending) continue;
    changed = true;
    spdlog::info(
        "pipeline {}: {} is no longer in `tables`: its changes are skipped from {}:{} on (listed "
        "again, its rows are copied anew)",
        ctx_.pipeline_id, key, at.file, at.pos);
  }
  // A table listed again (its entry at the checkpoint is null) starts its history anew with the
  // catalogue's columns; tables with no entry at all are seeded at the stream's start.
  std::vector<std::string> relisted;
  for (const TableRef& t : tables_) {
    const std::string key = t.db + "." + t.table;
    if (const auto h = history_.at(key, at); !h || *h) continue;
    auto schema = load_schema(t.db, t.table);
    if (!schema.ok()) return std::move(schema).error();
    history_.record(key, at, schema.value());
    relisted.push_back(qualified_name(t.db, t.table));
    changed = true;
  }
  // A table added to `tables` since the checkpoint: the stream never decoded it, so the schema
  // history has no entry for it there (the snapshot or the first stream start seeds every captured
  // table), or it is listed again (above), or a run added it but stopped before a checkpoint
  // recorded its pending copy (the history says so). Its existing rows are read incrementally;
  // the stream carries its changes from now on. It stays "copy pending" in the history until its
  // copy completes.
  if (mode_ != "never" && !history_.empty()) {
    std::vector<std::string> added = relisted;
    for (const TableRef& t : tables_) {
      const std::string key = t.db + "." + t.table;
      if (!history_.at(key, at) || history_.copy_pending(key))
        added.push_back(qualified_name(t.db, t.table));
    }
    if (!added.empty()) {
      if (signal_name_.empty())
        return Error(
            Errc::config,
            fmt::format("{} added to `tables`: its existing rows are copied by an incremental "
                        "snapshot, which on mysql writes its watermarks into a signal table. Set "
                        "`signal.table` (CREATE TABLE <db>.sluice_signals (id VARCHAR(42) PRIMARY "
                        "KEY, type VARCHAR(32) NOT NULL, data TEXT); GRANT INSERT on it), or "
                        "`snapshot.mode: never` to only stream its changes",
                        fmt::join(added, ", ")));
      if (s.incremental.add_tables(s.position.incremental, added) > 0)
        spdlog::info("pipeline {}: incremental snapshot of the table(s) added to `tables`: {}",
                     ctx_.pipeline_id, fmt::join(added, ", "));
      for (const TableRef& t : tables_)
        if (std::find(added.begin(), added.end(), qualified_name(t.db, t.table)) != added.end())
          changed |= history_.set_copy_pending(t.db + "." + t.table, true);
    }
  }
  if (changed) SLUICE_TRY(save_history());
  if (!s.position.incremental.empty()) {
    if (signal_name_.empty())
      return Error(Errc::config,
                   fmt::format("the checkpoint has an incremental snapshot pending ({}), whose "
                               "watermarks go into the signal table: set `signal.table` again",
                               fmt::join(s.position.incremental.tables, ", ")));
    spdlog::info("pipeline {}: incremental snapshot pending: {}", ctx_.pipeline_id,
                 fmt::join(s.position.incremental.tables, ", "));
  }
  return ok_status();
}

Status MysqlDriver::start_chunk_if_due(Batch& batch, size_t max_bytes) {
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
  // The catalogue's columns now, per chunk (a DDL between chunks changes what the next reads).
  auto loaded = load_schema(ref->db, ref->table);
  if (!loaded.ok()) return std::move(loaded).error();
  inc_table_ = loaded.value();
  const TableSchema& t = *inc_table_;
  if (t.key.empty() || t.key_from_setting)
    return Error(Errc::unsupported,
                 fmt::format("incremental snapshot of {}: the table has no primary key, so it "
                             "cannot be read in key order; add a primary key",
                             table));
  if (inc_name_ != table) {
    inc_name_ = table;
    inc_row_bytes_ = 0;
    if (st_->ctx.stats) {
      st_->ctx.stats->snapshot_rows_total = ref->estimate;
      st_->ctx.stats->snapshot_rows_done = 0;
    }
  }
  std::string sql = fmt::format("SELECT {} FROM {}.{}", snapshot_columns(t), quote_identifier(t.db),
                                quote_identifier(t.table));
  if (inc.cursor.kind == KeysetCursor::Kind::after_key) {
    if (inc.cursor.key.size() != t.key.size())
      return Error(Errc::data,
                   fmt::format("incremental snapshot of {}: the checkpoint's cursor has {} key "
                               "values, the primary key {} columns; run `sluice snapshot` again",
                               table, inc.cursor.key.size(), t.key.size()));
    sql += " WHERE " + keyset_after(t, inc.cursor.key);
  }
  std::string order;
  for (uint32_t k : t.key) order += (order.empty() ? "" : ", ") + quote_identifier(t.cols[k].name);
  // The chunk is held until its window closes, then its kept rows go into one batch: as many rows
  // as the batch's bytes hold at the largest bytes per row seen in the table; before any, a few
  // (the read below also stops at the bytes; the limit keeps what it reads and drops small).
  const int64_t limit =
      inc_row_bytes_ > 0
          ? std::min(chunk_size_, std::max<int64_t>(1, int64_t(double(max_bytes) / inc_row_bytes_)))
          : std::min<int64_t>(chunk_size_, kIncrementalProbeRows);
  sql += fmt::format(" ORDER BY {} LIMIT {}", order, limit);

  // The table's first chunk: snapshot_begin goes first, before any streamed change can drop a
  // key from the chunk, so that a keyed destination's reconcile counts those changes as seen
  // (a change before the marker that left the chunk would be swept at snapshot_end).
  if (engine.table_started(inc)) add_snapshot_marker(batch, t.db, t.table, true);
  const std::string id = engine.begin_chunk();
  const std::string sig = quote_identifier(signal_db_) + "." + quote_identifier(signal_name_);
  auto watermark = [&](bool open) -> Status {
    const std::string w =
        fmt::format("INSERT INTO {} (id, type, data) VALUES ({}, {}, {})", sig,
                    conn_.quoted(id + (open ? "-open" : "-close")),
                    conn_.quoted(open ? kWindowOpen : kWindowClose),
                    conn_.quoted(fmt::format("{{\"{}\": \"{}\"}}",
                                             open ? "openWindowFor" : "closeWindowFor", id)));
    if (Status st = conn_.exec(w, "query failed"); !st.ok()) {
      if (st.error().code() == Errc::permission)
        return Error(Errc::permission,
                     fmt::format("user '{}' cannot write the signal table {}: GRANT INSERT ON {} "
                                 "TO '{}'",
                                 opts_.url.user, sig, sig, opts_.url.user));
      return st.error().with_context(
          fmt::format("cannot write the {} watermark into {}: ", open ? "low" : "high", sig));
    }
    return ok_status();
  };
  SLUICE_TRY(watermark(true));
  // Read as the rows arrive and cut at the batch's bytes (a row far larger than the ones before
  // it would otherwise bring a chunk of up to `limit` such rows).
  bool cut = false;
  auto rows = conn_.query_within(sql, "query failed", max_bytes > 0 ? max_bytes : SIZE_MAX, &cut);
  if (!rows.ok())
    return rows.error().with_context(fmt::format("cannot read a chunk of {}: ", table));
  Arena scratch(4096);
  std::vector<ChunkRow> chunk(rows.value().size());
  size_t bytes = 0;
  for (size_t i = 0; i < chunk.size(); ++i) {
    MysqlRow& src = rows.value()[i];
    ChunkRow& row = chunk[i];
    bytes += sizeof(Record) + src.size() * sizeof(Value);
    for (const auto& v : src) bytes += v ? v->size() : 0;
    for (uint32_t k : t.key) {
      const std::string text = k < src.size() ? src[k].value_or(std::string()) : std::string();
      auto v = text_to_value(t, k, text, scratch, zero_dates_null_);
      if (!v.ok()) return std::move(v).error();
      row.key.push_back(key_text(v.value()));
      row.cursor_key.push_back(text);
    }
    row.row = std::move(src);
  }
  const size_t n = chunk.size();
  if (n > 0) inc_row_bytes_ = std::max(inc_row_bytes_, double(bytes) / double(n));
  engine.chunk_read(std::move(chunk), !cut && int64_t(n) < limit);
  SLUICE_TRY(watermark(false));
  spdlog::debug(
      "pipeline {}: incremental snapshot of {}: chunk of {} rows ({} bytes) read (window {})",
      ctx_.pipeline_id, table, n, bytes, id);
  return ok_status();
}

Status MysqlDriver::on_signal_row(Batch& batch, const TableMapState& ms,
                                  std::span<const Field> row) {
  std::string_view id, type, data;
  for (size_t i = 0; i < ms.names.size() && i < row.size(); ++i) {
    const Value& v = row[i].value;
    if (v.kind() != ValueKind::string && v.kind() != ValueKind::bytes &&
        v.kind() != ValueKind::json)
      continue;
    if (same_name(ms.names[i], "id")) id = v.as_text();
    else if (same_name(ms.names[i], "type")) type = v.as_text();
    else if (same_name(ms.names[i], "data")) data = v.as_text();
  }
  IncrementalSnapshot& engine = st_->incremental;
  auto window_of = [&](std::string_view suffix) {
    return id.ends_with(suffix) ? id.substr(0, id.size() - suffix.size()) : id;
  };
  if (type == kWindowOpen) {
    engine.low_seen(window_of("-open"));
    return ok_status();
  }
  if (type == kWindowClose) {
    engine.high_seen(window_of("-close"));
    if (engine.emit_ready()) SLUICE_TRY(emit_chunk(batch));
    return ok_status();
  }
  auto tables = parse_snapshot_signal(type, data);
  if (!tables.ok()) {
    spdlog::error("pipeline {}: signal {} ignored: {}", ctx_.pipeline_id, id,
                  tables.error().message());
    return ok_status();
  }
  if (!tables.value()) {
    spdlog::info("pipeline {}: signal {} of type '{}' ignored (sluice acts on execute-snapshot)",
                 ctx_.pipeline_id, id, type);
    return ok_status();
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
    names.push_back(qualified_name(ref->db, ref->table));
  }
  const size_t added = engine.add_tables(st_->position.incremental, names);
  spdlog::info("pipeline {}: signal {}: incremental snapshot of {} ({} queued)", ctx_.pipeline_id,
               id, fmt::join(names, ", "), added);
  return ok_status();
}

void MysqlDriver::incremental_change(const TableMapState& ms, std::span<const Field> first,
                                     std::span<const Field> second) {
  if (!st_->incremental.tracking() || !inc_table_ || !ms.schema || ms.key.empty()) return;
  if (ms.schema->db != inc_table_->db || ms.schema->table != inc_table_->table) return;
  auto drop = [&](std::span<const Field> row) {
    if (row.empty()) return;
    std::vector<std::string> parts;
    for (uint32_t k : ms.key) {
      if (k >= row.size() || row[k].value.is_absent()) return;  // key not in the row image
      parts.push_back(key_text(row[k].value));
    }
    std::vector<std::string_view> views(parts.begin(), parts.end());
    st_->incremental.change_seen(st_->position.incremental, inc_name_, key_identity(views));
  };
  drop(first);
  drop(second);  // an update's after image: a key change
}

void MysqlDriver::incremental_truncate(std::string_view db, std::string_view table) {
  if (inc_table_ && inc_table_->db == db && inc_table_->table == table)
    st_->incremental.truncate_seen(st_->position.incremental, inc_name_);
}

Status MysqlDriver::emit_chunk(Batch& batch) {
  IncrementalState& inc = st_->position.incremental;
  IncrementalSnapshot& engine = st_->incremental;
  const std::shared_ptr<const TableSchema> schema = inc_table_;
  const TableSchema& t = *schema;
  st_->caches.retain(batch, schema);  // (snapshot_begin went out with the first chunk's read)
  const uint32_t ncols = uint32_t(t.cols.size());
  int64_t emitted = 0;
  // One metadata object for the chunk's rows (read-only; a rejected row gets its own copy).
  const Value meta = metadata(batch, t, 0, false);
  const auto& rows = engine.rows();
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!engine.kept(i)) continue;
    const auto& text = rows[i].row;
    Record& r = batch.add();
    r.op = Operation::snapshot;
    r.metadata = meta;
    row_text_.resize(std::min<size_t>(ncols, text.size()));
    for (size_t c = 0; c < row_text_.size(); ++c)
      row_text_[c] = text[c] ? std::optional<std::string_view>(*text[c]) : std::nullopt;
    SLUICE_TRY(snapshot_row_after(batch, t, row_text_, r));
    ObjectBuilder k = batch.object(uint32_t(t.key.size()));
    for (uint32_t c : t.key) k.add(t.cols[c].name, r.after.fields()[c].value);
    r.key = k.build();
    ++emitted;
  }
  const bool last = engine.last_chunk() || rows.empty();
  const uint64_t dropped = engine.rows_dropped();
  const uint64_t total = engine.rows_emitted() + uint64_t(emitted);
  if (last) add_snapshot_marker(batch, t.db, t.table, false);
  if (st_->ctx.stats) st_->ctx.stats->snapshot_rows_done = int64_t(total);
  if (auto done = engine.finish(inc)) {
    // Saved before the position that says so can reach a checkpoint; a stop in between resumes
    // the copy from the checkpoint's own pending list.
    if (history_.set_copy_pending(t.db + "." + t.table, false)) SLUICE_TRY(save_history());
    spdlog::info(
        "pipeline {}: incremental snapshot of {} complete ({} rows; {} left to newer streamed "
        "changes)",
        ctx_.pipeline_id, *done, total, dropped);
    inc_table_.reset();
    inc_name_.clear();
  }
  return ok_status();
}

Status MysqlDriver::request_snapshot(const ConnectorContext& ctx,
                                     const std::vector<std::string>& tables) {
  ctx_ = ctx;
  if (signal_name_.empty())
    return Error(Errc::config,
                 fmt::format("the pipeline's source has no `signal.table`: set it (e.g. "
                             "{}.sluice_signals, see docs/incremental-snapshots.md) and restart "
                             "the pipeline once",
                             opts_.url.database.empty() ? "mydb" : opts_.url.database));
  auto c = MysqlConn::connect(opts_);
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
    auto schema = load_schema(ref->db, ref->table);
    if (!schema.ok()) return std::move(schema).error();
    if (schema.value()->key.empty() || schema.value()->key_from_setting)
      return Error(Errc::unsupported,
                   fmt::format("table {} has no primary key, so it cannot be read in key order "
                               "for an incremental snapshot; add a primary key",
                               qualified_name(ref->db, ref->table)));
    names.push_back(qualified_name(ref->db, ref->table));
  }
  SLUICE_TRY(check_signal_table());
  const std::string sig = quote_identifier(signal_db_) + "." + quote_identifier(signal_name_);
  const std::string id =
      fmt::format("sluice-{}", std::chrono::system_clock::now().time_since_epoch().count());
  Status st =
      conn_.exec(fmt::format("INSERT INTO {} (id, type, data) VALUES ({}, "
                             "'execute-snapshot', {})",
                             sig, conn_.quoted(id), conn_.quoted(snapshot_signal_data(names))),
                 "query failed");
  conn_.reset();
  if (!st.ok())
    return st.error().with_context(fmt::format("cannot write the signal into {}: ", sig));
  return ok_status();
}

}  // namespace sluice::mysql
