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
// cost one COPY per batch. The price: a heap page's rows are never split across batches, so a
// batch can exceed max_records by up to one page's rows (a few hundred small rows at most) when a
// page is denser than any before it.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>

#include "connectors/postgres/postgres_source_driver.h"

namespace sluice::pg {

Status PostgresDriver::begin_snapshot(const std::string& exported) {
  if (auto b = conn_.exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", PGRES_COMMAND_OK);
      !b.ok())
    return b.error();
  if (!exported.empty()) {
    if (auto s = conn_.exec("SET TRANSACTION SNAPSHOT " + conn_.quote_literal(exported),
                            PGRES_COMMAND_OK);
        !s.ok())
      return s.error().with_context("cannot import the slot's snapshot: ");
  }
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

Status PostgresDriver::start_copy(const Batch& batch, const ReadRequest& req) {
  const TableRef& t = tables_[st_->position.table_index];
  if (copy_table_index_ != st_->position.table_index) {
    auto st = table_from_catalog(t);
    if (!st.ok()) return std::move(st).error();
    copy_table_ = st.value();
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
  }
  std::string cols;
  for (const auto& c : copy_table_->rel->columns)
    cols += (cols.empty() ? "" : ", ") + quote_identifier(c.name);
  if (cols.empty()) cols = "NULL";  // a table without columns still has rows
  // Rows that changed after the snapshot come again through the stream, which starts at the
  // snapshot's LSN, so a resume under a newer snapshot still converges.
  const uint64_t from = st_->position.cursor.page;
  const uint64_t room_rows = req.max_records > batch.size() ? req.max_records - batch.size() : 0;
  const uint64_t room_bytes = req.max_bytes > batch.bytes() ? req.max_bytes - batch.bytes() : 0;
  copy_chunk_pages_ = std::max<uint64_t>(1, chunk_sizer_.pages(room_rows, room_bytes, true));
  copy_last_chunk_ = from + copy_chunk_pages_ >= copy_table_pages_;
  std::string where = fmt::format("ctid >= '({},0)'::tid", from);
  if (!copy_last_chunk_)
    where += fmt::format(" AND ctid < '({},0)'::tid", from + copy_chunk_pages_);
  const std::string sql = fmt::format("COPY (SELECT {} FROM {}.{} WHERE {}) TO STDOUT", cols,
                                      quote_identifier(t.schema), quote_identifier(t.name), where);
  PgResult r(PQexec(conn_.get(), sql.c_str()));
  if (!r || PQresultStatus(r.get()) != PGRES_COPY_OUT)
    return classify_error(r ? PQresultErrorMessage(r.get()) : conn_.last_error(),
                          fmt::format("cannot read {}.{}", t.schema, t.name));
  copy_active_ = true;
  spdlog::trace("pipeline {}: snapshot of {}.{}: pages {} +{}", ctx_.pipeline_id, t.schema, t.name,
                from, copy_chunk_pages_);
  return ok_status();
}

Status PostgresDriver::finish_snapshot(State&) {
  if (auto c = conn_.exec("COMMIT", PGRES_COMMAND_OK); !c.ok()) return c.error();
  return ok_status();
}

Result<SnapshotRead> PostgresDriver::read_snapshot(Batch& batch, const ReadRequest& req,
                                                   std::stop_token stop, State&) {
  SourcePosition& pos = st_->position;
  Tuple tuple;
  size_t chunk_first = 0, chunk_bytes = 0;  // where the chunk being read began in the batch
  // A chunk, once begun, is read to its end (a stop request too waits for it): the batch ends
  // only there, so that its position is exact.
  while (copy_active_ || (batch.size() < req.max_records && batch.bytes() < req.max_bytes &&
                          !stop.stop_requested())) {
    if (!copy_active_) {
      if (pos.table_index >= tables_.size()) return SnapshotRead::finished;
      // Not even a page's rows fit any more: the next chunk begins the next batch.
      if (!batch.empty() && copy_table_index_ == pos.table_index &&
          chunk_sizer_.pages(req.max_records - batch.size(), req.max_bytes - batch.bytes(),
                             false) == 0)
        break;
      if (Status st = start_copy(batch, req); !st.ok()) return st.error();
      chunk_first = batch.size();
      chunk_bytes = batch.bytes();
      // The table's rows are bounded by markers, so a keyed destination can remove rows this
      // snapshot did not see (a re-snapshot after `sluice cleanup`). A resume at page 0 begins
      // again: every row of the table comes again.
      if (pos.cursor.page == 0)
        add_snapshot_marker(batch, copy_table_->rel->schema, copy_table_->rel->name, true);
    }
    char* buf = nullptr;
    const int n = PQgetCopyData(conn_.get(), &buf, 0);
    if (n > 0) {
      std::string_view line(buf, size_t(n));
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
      PQfreemem(buf);
      if (!st.ok()) return st.error();
      mark_poison(batch, r);
      ++st_->snapshot_rows;
      continue;
    }
    if (n == -1) {  // this table is done
      PgResult res(PQgetResult(conn_.get()));
      if (!res || PQresultStatus(res.get()) != PGRES_COMMAND_OK)
        return classify_error(res ? PQresultErrorMessage(res.get()) : conn_.last_error(),
                              "snapshot COPY failed");
      while (PgResult more{PQgetResult(conn_.get())}) {
      }
      copy_active_ = false;
      chunk_sizer_.chunk_read(copy_chunk_pages_, batch.size() - chunk_first,
                              batch.bytes() - chunk_bytes);
      if (copy_last_chunk_) {
        add_snapshot_marker(batch, copy_table_->rel->schema, copy_table_->rel->name, false);
        ++pos.table_index;
        pos.cursor.page = 0;
      } else {
        pos.cursor.page += copy_chunk_pages_;
      }
      continue;
    }
    return classify_error(conn_.last_error(), "snapshot read failed");
  }
  return SnapshotRead::more;
}

}  // namespace sluice::pg
