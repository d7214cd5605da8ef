// The postgres snapshot: one REPEATABLE READ transaction (in the snapshot the slot exported when it
// was created), each table read by COPY in chunks of heap pages, so that a restart re-reads at
// most one chunk. The position's cursor is the first page of the chunk being read.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

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

// Heap pages per snapshot chunk (32 MiB): a restart re-reads at most one chunk of a table.
constexpr uint64_t kChunkPages = 4096;

Status PostgresDriver::start_copy() {
  const TableRef& t = tables_[st_->position.table_index];
  if (copy_table_index_ != st_->position.table_index) {
    auto st = table_from_catalog(t);
    if (!st.ok()) return std::move(st).error();
    copy_table_ = st.value();
    // The shape the snapshot read, at the slot's consistent point: the baseline of the stream's
    // first Relation message of the table, in this run or a later one.
    if (!ddl_capture_) SLUICE_TRY(record_shape(*copy_table_->rel, st_->position.point));
    // Not MVCC, so at least the size the snapshot saw: every visible row lies below it.
    auto size = conn_.exec_params(
        "SELECT pg_relation_size($1::oid) / current_setting('block_size')::bigint",
        {std::to_string(t.oid)});
    if (!size.ok())
      return size.error().with_context(fmt::format("cannot size {}.{}: ", t.schema, t.name));
    copy_table_pages_ = std::stoull(PQgetvalue(size.value().get(), 0, 0));
    copy_table_index_ = st_->position.table_index;
  }
  std::string cols;
  for (const auto& c : copy_table_->rel->columns)
    cols += (cols.empty() ? "" : ", ") + quote_identifier(c.name);
  if (cols.empty()) cols = "NULL";  // a table without columns still has rows
  // Chunks of physical pages read by TID range scans: as fast as a plain COPY, and resumable at a
  // chunk boundary. Rows that changed after the snapshot come again through the stream, which
  // starts at the snapshot's LSN, so a resume under a newer snapshot still converges.
  copy_last_chunk_ = st_->position.cursor.page + kChunkPages >= copy_table_pages_;
  std::string where = fmt::format("ctid >= '({},0)'::tid", st_->position.cursor.page);
  if (!copy_last_chunk_)
    where += fmt::format(" AND ctid < '({},0)'::tid", st_->position.cursor.page + kChunkPages);
  const std::string sql = fmt::format("COPY (SELECT {} FROM {}.{} WHERE {}) TO STDOUT", cols,
                                      quote_identifier(t.schema), quote_identifier(t.name), where);
  PgResult r(PQexec(conn_.get(), sql.c_str()));
  if (!r || PQresultStatus(r.get()) != PGRES_COPY_OUT)
    return classify_error(r ? PQresultErrorMessage(r.get()) : conn_.last_error(),
                          fmt::format("cannot read {}.{}", t.schema, t.name));
  copy_active_ = true;
  spdlog::debug("pipeline {}: snapshot of {}.{} from page {}", ctx_.pipeline_id, t.schema, t.name,
                st_->position.cursor.page);
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
  while (batch.size() < req.max_records && batch.bytes() < req.max_bytes &&
         !stop.stop_requested()) {
    if (!copy_active_) {
      if (pos.table_index >= tables_.size()) return SnapshotRead::finished;
      if (Status st = start_copy(); !st.ok()) return st.error();
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
      if (copy_last_chunk_) {
        add_snapshot_marker(batch, copy_table_->rel->schema, copy_table_->rel->name, false);
        ++pos.table_index;
        pos.cursor.page = 0;
      } else {
        pos.cursor.page += kChunkPages;
      }
      continue;
    }
    return classify_error(conn_.last_error(), "snapshot read failed");
  }
  return SnapshotRead::more;
}

}  // namespace sluice::pg
