// The mysql snapshot: START TRANSACTION WITH CONSISTENT SNAPSHOT with the binlog position that
// matches it (MariaDB's binlog_snapshot_file/position, else a brief FLUSH TABLES WITH READ LOCK),
// then each table in keyset chunks ordered by its primary key (offsets for tables without one), so
// that a restart re-reads at most one chunk. The position's cursor is the last key read.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "connectors/mysql/mysql_source_driver.h"

namespace sluice::mysql {

std::string MysqlDriver::snapshot_columns(const TableSchema& t) const {
  std::string cols;
  for (size_t i = 0; i < t.cols.size(); ++i) {
    if (!cols.empty()) cols += ", ";
    // The text protocol writes a FLOAT with 6 significant digits, which loses precision; as a
    // DOUBLE it comes exact, like the binlog's 4-byte value.
    if (t.data_types[i] == "float")
      cols += "CAST(" + quote_identifier(t.cols[i].name) + " AS DOUBLE)";
    else cols += quote_identifier(t.cols[i].name);
  }
  return cols.empty() ? "1" : cols;
}

std::string MysqlDriver::keyset_after(const TableSchema& t,
                                      const std::vector<std::string>& after) const {
  // (k1, k2) > (v1, v2) as (k1 > v1) OR (k1 = v1 AND k2 > v2), which the primary key index serves.
  auto lit = [&](size_t k) {
    const uint32_t ci = t.key[k];
    return is_numeric_type(t.data_types[ci]) ? after[k] : conn_.quoted(after[k]);
  };
  std::string where;
  for (size_t k = 0; k < t.key.size() && k < after.size(); ++k) {
    std::string term;
    for (size_t j = 0; j < k; ++j)
      term += quote_identifier(t.cols[t.key[j]].name) + " = " + lit(j) + " AND ";
    term += quote_identifier(t.cols[t.key[k]].name) + " > " + lit(k);
    where += (where.empty() ? "" : " OR ") + ("(" + term + ")");
  }
  return where;
}

Status MysqlDriver::begin_snapshot(bool fresh) {
  MYSQL* c = conn_.get();
  if (Status st =
          conn_.exec("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ", "query failed");
      !st.ok())
    return st;
  std::string file;
  uint64_t pos = 0;
  bool locked = false;
  const bool snapshot_only = mode_ == "initial_only";
  if (!mariadb_ && !snapshot_only) {
    // MySQL: the binlog position is only consistent with the snapshot under a global read lock.
    if (mysql_query(c, "FLUSH TABLES WITH READ LOCK") == 0) {
      locked = true;
    } else {
      std::string sql = "LOCK TABLES ";
      for (size_t i = 0; i < tables_.size(); ++i)
        sql += (i ? ", " : "") + quote_identifier(tables_[i].db) + "." +
               quote_identifier(tables_[i].table) + " READ";
      if (Status st = conn_.exec(sql, "query failed"); !st.ok())
        return st.error().with_context(
            "cannot lock the tables for the snapshot (grant RELOAD or LOCK TABLES): ");
      locked = true;
    }
  }
  if (Status st =
          conn_.exec("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY", "query failed");
      !st.ok())
    return st;
  if (!snapshot_only) {
    if (mariadb_) {
      // MariaDB reports the binlog position matching the consistent snapshot, without a lock.
      auto r = conn_.query("SHOW STATUS LIKE 'binlog_snapshot_%'", "query failed");
      if (!r.ok()) return std::move(r).error();
      for (const MysqlRow& row : r.value()) {
        if (row[0] == "Binlog_snapshot_file") file = row[1].value_or("");
        if (row[0] == "Binlog_snapshot_position") pos = std::stoull(row[1].value_or("0"));
      }
    } else {
      auto m = binlog_status(conn_);
      if (!m.ok()) return std::move(m).error();
      if (!m.value().empty()) {
        file = m.value()[0][0].value_or("");
        pos = std::stoull(m.value()[0][1].value_or("0"));
      }
    }
    if (locked) (void)conn_.exec("UNLOCK TABLES", "query failed");
    if (file.empty())
      return Error(Errc::unsupported, "the server reports no binlog position: is log_bin on?");
  }
  SourcePosition& p = st_->position;
  if (fresh) {
    p = SourcePosition{};
    p.phase = LogPhase::snapshot;
    p.point.coord.file = snapshot_only ? "-" : file;
    p.point.coord.pos = pos;
    if (mariadb_ && !snapshot_only) {
      SLUICE_TRY_ASSIGN(p.point.gtid, gtid_at(conn_, p.point.coord));
    }
    // The schema history starts here: the stream decodes from this point with these columns.
    if (!snapshot_only) SLUICE_TRY(seed_history(p.point.coord, true));
  }
  // A resumed snapshot reads under a newer snapshot but keeps the stream's original start: the
  // changes in between come again through the stream, so the end state converges. A keyset cursor
  // (the last key read) means the same under any snapshot; an offset does not: rows deleted while
  // sluice was stopped would shift the rest forward, and the rows the offset then skips would be
  // lost. A table paged by offsets (no unique key) is read again from its first row.
  // The position's table_index is an index into this list (sorted by name): a resume after
  // `tables` changed (a table added or removed) would skip or repeat a table, so the snapshot
  // starts again from the first one; the stream still starts at the original binlog position.
  std::vector<std::pair<std::string, std::string>> names;
  for (const TableRef& t : tables_) names.emplace_back(t.db, t.table);
  // (A fresh position has no fingerprint yet: nothing to restart.)
  if (st_->restart_snapshot_if_tables_changed(names)) snap_table_index_ = SIZE_MAX;
  if (!fresh && p.cursor.kind == KeysetCursor::Kind::offset) {
    if (p.table_index < tables_.size())
      spdlog::info(
          "pipeline {}: the snapshot of {}.{} resumes from its first row (a table without a "
          "unique key is read by offsets, which a newer snapshot shifts)",
          ctx_.pipeline_id, quote_identifier(tables_[p.table_index].db),
          quote_identifier(tables_[p.table_index].table));
    p.cursor = KeysetCursor{};
  }
  int64_t total = 0;
  for (size_t i = p.table_index; i < tables_.size(); ++i) total += tables_[i].estimate;
  st_->snapshot_started(total);
  spdlog::info("pipeline {}: snapshot of {} table(s), about {} rows; stream starts at {}:{}{}",
               ctx_.pipeline_id, tables_.size() - std::min(tables_.size(), p.table_index), total,
               p.point.coord.file, p.point.coord.pos,
               p.point.gtid.empty() ? "" : " (gtid " + p.point.gtid.to_string() + ")");
  return ok_status();
}

namespace {
// The rows of a table's first snapshot query, read before its bytes per row are known.
constexpr size_t kSnapshotProbeRows = 16;
}  // namespace

Result<SnapshotRead> MysqlDriver::read_snapshot(Batch& batch, const ReadRequest& req,
                                                std::stop_token stop, State&) {
  MYSQL* c = conn_.get();
  SourcePosition& pos_ = st_->position;
  size_t markers = 0;  // control records, not data: max_records counts the rows
  while (batch.size() < req.max_records && batch.bytes() < req.max_bytes &&
         !stop.stop_requested()) {
    if (pos_.table_index >= tables_.size()) return SnapshotRead::finished;
    const TableRef& tr = tables_[pos_.table_index];
    if (snap_table_index_ != pos_.table_index) {
      auto s = load_schema(tr.db, tr.table);
      if (!s.ok()) return std::move(s).error();
      snap_table_ = s.value();
      snap_table_index_ = pos_.table_index;
      snap_row_bytes_ = 0;
    }
    const TableSchema& t = *snap_table_;
    // A query's rows go into this batch: as many as the rows and the bytes left in it hold, at
    // the largest bytes per row seen in the table; before any was read, a few (a row may hold
    // megabytes). A query that still runs over ends the batch at the row that fills it.
    size_t limit =
        size_t(std::min<int64_t>(chunk_size_, int64_t(req.max_records - (batch.size() - markers))));
    const size_t room_bytes = req.max_bytes - batch.bytes();
    limit = std::min(limit, snap_row_bytes_ > 0
                                ? std::max<size_t>(1, size_t(double(room_bytes) / snap_row_bytes_))
                                : kSnapshotProbeRows);
    // The table's rows are bounded by markers (beyond max_records: control records are not data),
    // so a keyed destination can remove rows this snapshot did not see (a re-snapshot after
    // `sluice cleanup`). A resume at the table's start begins again: all its rows come again.
    if (pos_.cursor.kind == KeysetCursor::Kind::start) {
      add_snapshot_marker(batch, t.db, t.table, true);
      ++markers;
    }
    std::string sql = fmt::format("SELECT {} FROM {}.{}", snapshot_columns(t),
                                  quote_identifier(t.db), quote_identifier(t.table));
    // Keyset paging needs a unique key: a message.key.columns key may repeat, so offsets then.
    const bool keyset = !t.key.empty() && !t.key_from_setting;
    if (keyset) {
      if (pos_.cursor.kind == KeysetCursor::Kind::after_key) {
        // keyset: (k1, k2) > (v1, v2) spelled out so that the primary key index serves it.
        if (pos_.cursor.key.size() != t.key.size())
          return Error(
              Errc::data,
              fmt::format(
                  "snapshot checkpoint of {}.{} does not match its primary key; run `sluice "
                  "cleanup` and start over",
                  t.db, t.table));
        sql += " WHERE " + keyset_after(t, pos_.cursor.key);
      }
      std::string order;
      for (uint32_t k : t.key)
        order += (order.empty() ? "" : ", ") + quote_identifier(t.cols[k].name);
      sql += fmt::format(" ORDER BY {} LIMIT {}", order, limit);
    } else {
      const uint64_t offset =
          pos_.cursor.kind == KeysetCursor::Kind::offset ? pos_.cursor.offset : 0;
      sql += fmt::format(" LIMIT {} OFFSET {}", limit, offset);
    }
    if (mysql_real_query(c, sql.data(), sql.size()) != 0)
      return server_error(
          c, fmt::format("cannot read {}.{}", quote_identifier(t.db), quote_identifier(t.table)));
    MysqlResult res{mysql_use_result(c)};
    if (!res)
      return server_error(
          c, fmt::format("cannot read {}.{}", quote_identifier(t.db), quote_identifier(t.table)));
    st_->caches.retain(batch, snap_table_);
    size_t n = 0;
    MYSQL_ROW row;
    unsigned long* lens = nullptr;
    std::vector<std::string> last_key(t.key.size());
    const uint32_t ncols = uint32_t(t.cols.size());
    // One metadata object for the query's rows (read-only; a rejected row gets its own copy).
    const Value meta = metadata(batch, t, 0, false);
    const size_t bytes_before = batch.bytes();
    bool full = false;
    while (!full && (row = mysql_fetch_row(res.get()))) {
      lens = mysql_fetch_lengths(res.get());
      Record& r = batch.add();
      r.op = Operation::snapshot;
      r.metadata = meta;
      row_text_.resize(ncols);
      for (uint32_t i = 0; i < ncols; ++i)
        row_text_[i] = row[i] ? std::optional<std::string_view>(std::string_view(row[i], lens[i]))
                              : std::nullopt;
      SLUICE_TRY(snapshot_row_after(batch, t, row_text_, r));
      if (!t.key.empty()) {
        ObjectBuilder k = batch.object(uint32_t(t.key.size()));
        for (size_t j = 0; j < t.key.size(); ++j) {
          const uint32_t i = t.key[j];
          k.add(t.cols[i].name, r.after.fields()[i].value);
          last_key[j].assign(row[i] ? row[i] : "", row[i] ? lens[i] : 0);
        }
        r.key = k.build();
      }
      ++n;
      // The rest of the query's rows are read and dropped (res's mysql_free_result): the next
      // query begins after this row.
      full = batch.bytes() >= req.max_bytes && n < limit;
    }
    if (mysql_errno(c))
      return server_error(c, fmt::format("snapshot of {}.{} failed", t.db, t.table));
    st_->snapshot_rows += int64_t(n);
    if (n > 0)
      snap_row_bytes_ = std::max(snap_row_bytes_, double(batch.bytes() - bytes_before) / double(n));
    if (n < limit && !full) {
      add_snapshot_marker(batch, t.db, t.table, false);
      ++markers;
      ++pos_.table_index;
      pos_.cursor = KeysetCursor{};
    } else if (keyset) {
      pos_.cursor.kind = KeysetCursor::Kind::after_key;
      pos_.cursor.key = std::move(last_key);
    } else {
      const uint64_t offset =
          pos_.cursor.kind == KeysetCursor::Kind::offset ? pos_.cursor.offset : 0;
      pos_.cursor.kind = KeysetCursor::Kind::offset;
      pos_.cursor.offset = offset + n;
    }
  }
  return SnapshotRead::more;
}

Status MysqlDriver::snapshot_row_after(Batch& batch, const TableSchema& t,
                                       const std::vector<std::optional<std::string_view>>& text,
                                       Record& r) {
  const uint32_t ncols = uint32_t(t.cols.size());
  ObjectBuilder after = batch.object(ncols);
  std::string reject;  // why the row goes to the dead-letter queue
  for (uint32_t i = 0; i < ncols; ++i) {
    if (i >= text.size() || !text[i]) {
      after.add(t.cols[i].name, Value::null());
      continue;
    }
    auto v = text_to_value(t, i, *text[i], batch.arena(), zero_dates_null_);
    if (!v.ok()) {
      if (v.error().code() != Errc::data) return std::move(v).error();
      if (!st_->ctx.dead_letters)
        return unrepresentable_value_stop(v.error().message(),
                                          is_zero_date_text(t.data_types[i], *text[i]));
      if (reject.empty()) reject = v.error().message();
      after.add(t.cols[i].name, Value::string(batch.copy(*text[i])));
      continue;
    }
    after.add(t.cols[i].name, v.value());
  }
  r.after = after.build();
  if (!reject.empty()) mark_source_reject(batch, r, reject);
  return ok_status();
}

Status MysqlDriver::finish_snapshot(State&) {
  (void)conn_.exec("COMMIT", "query failed");  // read-only: nothing to lose if it fails
  return ok_status();
}

}  // namespace sluice::mysql
