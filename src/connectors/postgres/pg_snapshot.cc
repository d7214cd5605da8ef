// The postgres snapshot: one REPEATABLE READ transaction (in the snapshot the slot exported when it
// was created), each table read by COPY in chunks of heap pages (TID range scans), each chunk sized
// to the room left in the batch (ChunkSizer), and a batch ends only where a chunk ends. The
// position's cursor is the first page not read yet, so it names exactly the rows the batch holds:
// a restart neither repeats nor skips a row, and a transactional destination (Kafka
// `transactions: true`) is exactly once in the snapshot as in the stream.
//
//   batch:  [ chunk: pages P … P+k ) [ chunk: P+k … P+k+m )  ─▶ position "snapshot … P+k+m"
//              COPY (SELECT … WHERE ctid >= '(P,0)' AND ctid < '(P+k,0)')
//
// Selecting each row's ctid instead (a cursor after any row) costs the server about a third more
// time per row (tidout), and the server's COPY is the snapshot's bottleneck; page-aligned chunks
// cost one COPY per batch, and the server never waits for the client: a chunk is received whole
// (libpq's row buffers, kept), the next one is sent, and only then is the first parsed (one chunk
// of text in memory). The price:
// a heap page's rows are never split across batches, so a batch can exceed max_records by up to one
// page's rows (a few hundred small rows at most) when a page is denser than any before it.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>

#include "connectors/postgres/postgres_source_driver.h"

namespace sluice::pg {

Status PostgresDriver::open_snapshot_transaction(const std::string& exported) {
  if (auto b = conn_.exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", PGRES_COMMAND_OK);
      !b.ok())
    return b.error();
  if (!exported.empty()) {
    if (auto s = conn_.exec("SET TRANSACTION SNAPSHOT " + conn_.quote_literal(exported),
                            PGRES_COMMAND_OK);
        !s.ok())
      return s.error().with_context("cannot import the slot's snapshot: ");
  }
  return ok_status();
}

Status PostgresDriver::begin_snapshot(const std::string& exported) {
  SLUICE_TRY(open_snapshot_transaction(exported));
  exported_ = exported;
  // The position's table_index is an index into this list: a resume after `tables` changed
  // (a table added or removed, or listed in another order) would skip or repeat a table, so the
  // snapshot starts again from the first one; the stream still starts at the slot's point.
  std::vector<std::pair<std::string, std::string>> names;
  for (const TableRef& t : tables_) names.emplace_back(t.schema, t.name);
  if (st_->restart_snapshot_if_tables_changed(names)) copy_table_index_ = SIZE_MAX;
  int64_t total = 0;
  for (size_t i = st_->position.table_index; i < tables_.size(); ++i) total += tables_[i].estimate;
  st_->snapshot_started(total);
  spdlog::info("pipeline {}: snapshot of {} table(s), about {} rows{}", ctx_.pipeline_id,
               tables_.size() - st_->position.table_index, total,
               exported.empty() ? "" : " (in the slot's exported snapshot)");
  return ok_status();
}

uint64_t ChunkSizer::pages(uint64_t room_rows, uint64_t room_bytes, bool batch_empty) const {
  double fit = double(kMaxPages);
  if (rows_per_page_ > 0) fit = std::min(fit, double(room_rows) / rows_per_page_);
  if (bytes_per_page_ > 0) fit = std::min(fit, double(room_bytes) / bytes_per_page_);
  if (rows_per_page_ <= 0) fit = std::min(fit, 1.0);  // nothing known: one page, then measure
  uint64_t n = uint64_t(fit);
  if (n == 0) return batch_empty ? 1 : 0;
  return std::min(kMaxPages, n * boost_);
}

void ChunkSizer::chunk_read(uint64_t pages, uint64_t rows, uint64_t bytes) {
  if (pages == 0) return;
  const double rpp = double(rows) / double(pages), bpp = double(bytes) / double(pages);
  // Sparse (under half the density expected): the next chunk may span more pages.
  if (rows_per_page_ > 0 && rpp < rows_per_page_ / 2) boost_ = std::min(kMaxPages, boost_ * 2);
  else boost_ = 1;
  rows_per_page_ = std::max(rows_per_page_, rpp);
  bytes_per_page_ = std::max(bytes_per_page_, bpp);
}

Status PostgresDriver::load_copy_table() {
  const TableRef& t = tables_[st_->position.table_index];
  if (copy_table_index_ == st_->position.table_index) return ok_status();
  auto st = table_from_catalog(t);
  if (!st.ok()) return std::move(st).error();
  copy_table_ = st.value();
  // The shape the snapshot read, at the slot's consistent point: the baseline of the stream's
  // first Relation message of the table, in this run or a later one.
  if (!ddl_capture_) SLUICE_TRY(record_shape(*copy_table_->rel, st_->position.point));
  // Not MVCC, so at least the size the snapshot saw: every visible row lies below it.
  auto size = conn_.exec_params(
      "SELECT pg_relation_size(oid) / current_setting('block_size')::bigint, "
      "CASE WHEN relpages > 0 AND reltuples > 0 THEN reltuples / relpages ELSE 0 END "
      "FROM pg_class WHERE oid = $1::oid",
      {std::to_string(t.oid)});
  if (!size.ok())
    return size.error().with_context(fmt::format("cannot size {}.{}: ", t.schema, t.name));
  if (PQntuples(size.value().get()) != 1)
    return Error(Errc::data, fmt::format("{}.{} is gone from the catalogue", t.schema, t.name));
  copy_table_pages_ = std::stoull(PQgetvalue(size.value().get(), 0, 0));
  chunk_sizer_.start_table(std::strtod(PQgetvalue(size.value().get(), 0, 1), nullptr));
  copy_table_index_ = st_->position.table_index;
  spdlog::debug("pipeline {}: snapshot of {}.{} from page {} (of {})", ctx_.pipeline_id, t.schema,
                t.name, st_->position.cursor.page, copy_table_pages_);
  return ok_status();
}

Status PostgresDriver::send_copy(uint64_t from, uint64_t pages) {
  const TableRef& t = tables_[st_->position.table_index];
  std::string cols;
  for (const auto& c : copy_table_->rel->columns)
    cols += (cols.empty() ? "" : ", ") + quote_identifier(c.name);
  if (cols.empty()) cols = "NULL";  // a table without columns still has rows
  // Rows that changed after the snapshot come again through the stream, which starts at the
  // snapshot's LSN, so a resume under a newer snapshot still converges.
  inflight_ = CopyChunk{from, std::max<uint64_t>(1, pages), false};
  inflight_.last = from + inflight_.pages >= copy_table_pages_;
  std::string where = fmt::format("ctid >= '({},0)'::tid", from);
  if (!inflight_.last) where += fmt::format(" AND ctid < '({},0)'::tid", from + inflight_.pages);
  const std::string sql = fmt::format("COPY (SELECT {} FROM {}.{} WHERE {}) TO STDOUT", cols,
                                      quote_identifier(t.schema), quote_identifier(t.name), where);
  if (!PQsendQuery(conn_.get(), sql.c_str()))
    return classify_error(conn_.last_error(), fmt::format("cannot read {}.{}", t.schema, t.name));
  copy_active_ = true;
  spdlog::trace("pipeline {}: snapshot of {}.{}: pages {} +{}", ctx_.pipeline_id, t.schema, t.name,
                from, inflight_.pages);
  return ok_status();
}

Status PostgresDriver::receive_copy() {
  const TableRef& t = tables_[st_->position.table_index];
  // query_timeout: from now until the first row, and between rows (progress moves it on).
  auto armed = deadline_.arm(conn_);
  PgResult start(PQgetResult(conn_.get()));
  if (!start || PQresultStatus(start.get()) != PGRES_COPY_OUT)
    return conn_.deadline_error_or(
        classify_error(start ? PQresultErrorMessage(start.get()) : conn_.last_error(),
                       fmt::format("cannot read {}.{}", t.schema, t.name)));
  chunk_lines_.clear();
  chunk_rows_ = 0;
  for (;;) {
    char* buf = nullptr;
    const int n = PQgetCopyData(conn_.get(), &buf, 0);
    if (n > 0) {
      chunk_lines_.emplace_back(std::unique_ptr<char, PqFree>(buf), size_t(n));
      if (++chunk_rows_ % 1024 == 0) deadline_.extend();
      continue;
    }
    if (n == -1) break;
    return conn_.deadline_error_or(classify_error(conn_.last_error(), "snapshot read failed"));
  }
  PgResult res(PQgetResult(conn_.get()));
  if (!res || PQresultStatus(res.get()) != PGRES_COMMAND_OK)
    return conn_.deadline_error_or(classify_error(
        res ? PQresultErrorMessage(res.get()) : conn_.last_error(), "snapshot COPY failed"));
  while (PgResult more{PQgetResult(conn_.get())}) {
  }
  copy_active_ = false;
  chunk_ = inflight_;
  return ok_status();
}

Status PostgresDriver::finish_snapshot(State&) {
  exported_.clear();
  if (auto c = conn_.exec("COMMIT", PGRES_COMMAND_OK); !c.ok()) return c.error();
  return ok_status();
}

// A lost or silent snapshot connection: the chunk being read is dropped (the position names only
// the chunks already in batches), and resume_snapshot() opens the snapshot again on a new one.
Result<SnapshotRead> PostgresDriver::read_snapshot(Batch& batch, const ReadRequest& req,
                                                   std::stop_token stop, State&) {
  auto r = read_snapshot_chunks(batch, req, stop);
  if (r.ok() || r.error().code() != Errc::connection || !r.error().retriable()) return r;
  const bool timed_out = deadline_.fired();
  const SourcePosition& pos = st_->position;
  spdlog::warn("pipeline {}: snapshot: {} (reconnecting; it goes on at table {} page {})",
               ctx_.pipeline_id, r.error().message(), pos.table_index, pos.cursor.page);
  copy_active_ = false;
  next_in_this_batch_ = false;
  chunk_lines_.clear();
  copy_table_index_ = SIZE_MAX;
  copy_table_ = nullptr;
  conn_.reset();
  return timed_out ? SnapshotRead::timed_out : SnapshotRead::lost;
}

Status PostgresDriver::resume_snapshot(State&) {
  conn_.reset();
  auto c = PgConn::connect(url_, false, net_);
  if (!c.ok()) return std::move(c).error();
  conn_ = std::move(c.value());
  // The slot's exported snapshot while the connection that exported it still holds it; else a
  // newer one, as after a restart: the stream from the slot's point makes up what changed since.
  if (!exported_.empty()) {
    Status st = open_snapshot_transaction(exported_);
    if (st.ok()) return ok_status();
    if (st.error().code() == Errc::connection) return st;
    (void)conn_.exec("ROLLBACK", PGRES_COMMAND_OK);
    spdlog::warn("pipeline {}: {}: the snapshot goes on in a newer one", ctx_.pipeline_id,
                 st.error().message());
    exported_.clear();
  }
  return open_snapshot_transaction("");
}

Result<SnapshotRead> PostgresDriver::read_snapshot_chunks(Batch& batch, const ReadRequest& req,
                                                          std::stop_token stop) {
  SourcePosition& pos = st_->position;
  Tuple tuple;
  while (batch.size() < req.max_records && batch.bytes() < req.max_bytes &&
         !stop.stop_requested()) {
    if (pos.table_index >= tables_.size()) return SnapshotRead::finished;
    if (!copy_active_) {  // nothing in flight: a chunk for the room left in this batch
      SLUICE_TRY(load_copy_table());
      const uint64_t pages = chunk_sizer_.pages(req.max_records - batch.size(),
                                                req.max_bytes - batch.bytes(), batch.empty());
      if (pages == 0) break;  // not even a page's rows fit: the next batch begins it
      SLUICE_TRY(send_copy(pos.cursor.page, pages));
      next_in_this_batch_ = true;
    } else if (!next_in_this_batch_ && !batch.empty()) {
      break;  // the chunk in flight was sized for a batch of its own
    }
    SLUICE_TRY(receive_copy());
    // While this chunk is parsed the server already reads the next one: the next chunk of the
    // table, sized for what this batch has left after it, or else for the next batch.
    if (!chunk_.last) {
      const uint64_t rows_left = req.max_records - batch.size();
      const uint64_t room = rows_left > chunk_rows_ ? rows_left - chunk_rows_ : 0;
      uint64_t pages = room ? chunk_sizer_.pages(room, req.max_bytes - batch.bytes(), false) : 0;
      next_in_this_batch_ = pages > 0;
      if (!pages) pages = chunk_sizer_.pages(req.max_records, req.max_bytes, true);
      SLUICE_TRY(send_copy(chunk_.from + chunk_.pages, pages));
    }
    // The table's rows are bounded by markers, so a keyed destination can remove rows this
    // snapshot did not see (a re-snapshot after `sluice cleanup`). A resume at page 0 begins
    // again: every row of the table comes again.
    if (chunk_.from == 0)
      add_snapshot_marker(batch, copy_table_->rel->schema, copy_table_->rel->name, true);
    const size_t bytes_before = batch.bytes();
    for (const auto& [data, size] : chunk_lines_) {
      std::string_view line(data.get(), size);
      if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
      // Split on tabs; unescape fields that contain a backslash.
      const auto& cols = copy_table_->rel->columns;
      tuple.resize(cols.size());
      if (field_scratch_.size() < cols.size()) field_scratch_.resize(cols.size());
      size_t start = 0;
      for (size_t i = 0; i < cols.size(); ++i) {
        size_t tab = line.find('\t', start);
        if (tab == std::string_view::npos) tab = line.size();
        std::string_view f = line.substr(start, tab - start);
        start = tab + 1;
        TupleValue& v = tuple[i];
        if (f == "\\N") {
          v.kind = 'n';
          v.data = {};
        } else if (f.find('\\') != std::string_view::npos) {
          copy_unescape(f, &field_scratch_[i]);
          v.kind = 't';
          v.data = field_scratch_[i];
        } else {
          v.kind = 't';
          v.data = f;
        }
      }
      st_->caches.retain(batch, copy_table_->rel);
      Record& r = batch.add();
      r.op = Operation::snapshot;
      r.metadata = metadata(batch, *copy_table_, {}, false);
      Status st = tuple_to_object(batch, *copy_table_, tuple, false, &r.after);
      if (st.ok() && !copy_table_->key_columns.empty())
        st = tuple_to_object(batch, *copy_table_, tuple, true, &r.key);
      if (!st.ok()) return st.error();
      mark_poison(batch, r);
      ++st_->snapshot_rows;
    }
    chunk_sizer_.chunk_read(chunk_.pages, chunk_rows_, batch.bytes() - bytes_before);
    chunk_lines_.clear();
    // The batch now holds every row before the chunk's end: its position says so.
    if (chunk_.last) {
      add_snapshot_marker(batch, copy_table_->rel->schema, copy_table_->rel->name, false);
      ++pos.table_index;
      pos.cursor.page = 0;
    } else {
      pos.cursor.page = chunk_.from + chunk_.pages;
    }
  }
  return SnapshotRead::more;
}

}  // namespace sluice::pg
