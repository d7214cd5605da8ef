// The postgres snapshot: one REPEATABLE READ transaction (in the snapshot the slot exported when it
// was created), each table read by one COPY in physical (ctid) order, the ctid of every row read
// along. The position's cursor is the heap tuple of the last row a batch holds, so a restart
// resumes right after it (`ctid > '(page,tuple)'`, a TID range scan): no row comes twice, none is
// skipped — with a transactional destination (Kafka `transactions: true`) the snapshot is exactly
// once, as the stream is.
//
//   COPY (SELECT ctid, c1, c2 … FROM t WHERE ctid > '(p,t)'::tid) TO STDOUT
//          │                                  └── the cursor the run resumed from ((0,0): start)
//          └── "(page,tuple)" per row → pos.cursor after each row, the batch's position on return
//
// Physical order is what the TID range scan returns; a plain seq scan would too, except that a
// synchronised scan starts where another scan of the table is, and a parallel one interleaves
// workers: the snapshot transaction turns both off, and a ctid that does not ascend is an error,
// never a silent gap.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>

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
  // The rows must come in ctid order (the cursor is "after this ctid"): no synchronised scan
  // starting mid-table, no parallel workers interleaving pages.
  if (auto o = conn_.exec("SET LOCAL synchronize_seqscans = off; "
                          "SET LOCAL max_parallel_workers_per_gather = 0",
                          PGRES_COMMAND_OK);
      !o.ok())
    return o.error();
  int64_t total = 0;
  for (size_t i = st_->position.table_index; i < tables_.size(); ++i) total += tables_[i].estimate;
  st_->snapshot_started(total);
  spdlog::info("pipeline {}: snapshot of {} table(s), about {} rows{}", ctx_.pipeline_id,
               tables_.size() - st_->position.table_index, total,
               exported.empty() ? "" : " (in the slot's exported snapshot)");
  return ok_status();
}

Status PostgresDriver::start_copy() {
  const TableRef& t = tables_[st_->position.table_index];
  if (copy_table_index_ != st_->position.table_index) {
    auto st = table_from_catalog(t);
    if (!st.ok()) return std::move(st).error();
    copy_table_ = st.value();
    copy_table_index_ = st_->position.table_index;
  }
  std::string cols = "ctid";
  for (const auto& c : copy_table_->rel->columns) cols += ", " + quote_identifier(c.name);
  // A TID range scan from the cursor: as fast as a plain COPY, resumable after any row. Rows that
  // changed after the snapshot come again through the stream, which starts at the snapshot's LSN,
  // so a resume under a newer snapshot still converges.
  const HeapCursor& from = st_->position.cursor;
  const std::string sql =
      fmt::format("COPY (SELECT {} FROM {}.{} WHERE ctid > '({},{})'::tid) TO STDOUT", cols,
                  quote_identifier(t.schema), quote_identifier(t.name), from.page, from.tuple);
  PgResult r(PQexec(conn_.get(), sql.c_str()));
  if (!r || PQresultStatus(r.get()) != PGRES_COPY_OUT)
    return classify_error(r ? PQresultErrorMessage(r.get()) : conn_.last_error(),
                          fmt::format("cannot read {}.{}", t.schema, t.name));
  copy_active_ = true;
  spdlog::debug("pipeline {}: snapshot of {}.{} after ctid ({},{})", ctx_.pipeline_id, t.schema,
                t.name, from.page, from.tuple);
  return ok_status();
}

namespace {

// "(page,tuple)" as COPY's text prints a tid.
bool parse_ctid(std::string_view f, HeapCursor* out) {
  if (f.size() < 5 || f.front() != '(' || f.back() != ')') return false;
  const char* p = f.data() + 1;
  const char* end = f.data() + f.size() - 1;
  auto [a, ea] = std::from_chars(p, end, out->page);
  if (ea != std::errc() || a == end || *a != ',') return false;
  auto [b, eb] = std::from_chars(a + 1, end, out->tuple);
  return eb == std::errc() && b == end;
}

}  // namespace

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
      // snapshot did not see (a re-snapshot after `sluice cleanup`). A resume before the
      // table's first row begins again: every row of the table comes again.
      if (pos.cursor.at_start())
        add_snapshot_marker(batch, copy_table_->rel->schema, copy_table_->rel->name, true);
    }
    char* buf = nullptr;
    const int n = PQgetCopyData(conn_.get(), &buf, 0);
    if (n > 0) {
      std::string_view line(buf, size_t(n));
      if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
      // The ctid first: the cursor moves past this row (the batch's position names it).
      const size_t ctid_end = std::min(line.find('\t'), line.size());
      HeapCursor at;
      if (!parse_ctid(line.substr(0, ctid_end), &at) || !(pos.cursor < at)) {
        const std::string ctid(line.substr(0, ctid_end));
        PQfreemem(buf);
        return Error(Errc::internal,
                     fmt::format("snapshot of {}.{}: row ctid '{}' does not follow ({},{}); the "
                                 "heap order the cursor relies on broke, report it",
                                 copy_table_->rel->schema, copy_table_->rel->name, ctid,
                                 pos.cursor.page, pos.cursor.tuple));
      }
      line.remove_prefix(std::min(ctid_end + 1, line.size()));
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
      pos.cursor = at;
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
      add_snapshot_marker(batch, copy_table_->rel->schema, copy_table_->rel->name, false);
      ++pos.table_index;
      pos.cursor = HeapCursor{};
      continue;
    }
    return classify_error(conn_.last_error(), "snapshot read failed");
  }
  return SnapshotRead::more;
}

}  // namespace sluice::pg
