// The postgres snapshot: one REPEATABLE READ transaction (in the snapshot the slot exported when it
// was created), each table read by COPY in chunks of heap pages (TID range scans), each chunk sized
// to the room left in the batch (ChunkSizer), and a batch ends where a chunk ends. The position's
// cursor is the first page not read yet, so it names exactly the rows the batch holds: a restart
// neither repeats nor skips a row, and a transactional destination (Kafka `transactions: true`)
// is exactly once in the snapshot as in the stream.
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
//
// The chunk is what the snapshot holds in memory, so a table's first chunk is one page: the
// catalogue counts rows, not the bytes of their out-of-line or compressed values (150 values of
// 200 kB share a heap page). A chunk whose size is a guess (grown over sparse pages: deleted
// rows, bloat) can hold many times a batch's room: the first dense chunk after 1,000 empty pages
// spans 1,000 pages (at most two batches' bytes at the densest bytes per page known). Such a chunk
// selects each row's ctid first, and is parsed a part at a time, each part whole heap pages within
// the room left: the batch ends between two pages, and its position's cursor is the page the next
// part begins at.
//
//   batch:  [ chunk P … P+k with ctids: part P … Q ) ─▶ position "snapshot … Q"
//   batch:  [ part Q … R ) ─▶ "snapshot … R"   …   [ part … P+k ) [ next chunk … ) ─▶ …
//
// A resumed snapshot. After a crash the exported snapshot is gone: the rest is read under a newer
// MVCC snapshot, while the stream still starts at the slot's consistent point. The position keeps
// the first snapshot (pg_current_snapshot(), "v3 snapshot … s<xmin:xmax:xip>"), and a resumed
// COPY skips the row versions it does not see: their transactions committed after the consistent
// point, so the stream delivers them, and each row comes once (read_committed Kafka included).
//   - xmin is 32 bits; pg_current_snapshot() is 64 (epoch and xid). While the server's current
//     xmax is below 2^32 (epoch 0: no xid was ever reused) a raw xmin is the full xid, frozen
//     tuples (which keep their raw xmin) included. Beyond, a frozen tuple's raw xmin from an
//     earlier epoch could fall among the skipped xids and be lost: the filter is off, and rows
//     changed since the first snapshot may come twice.
//   - A skip needs xmin >= xmax or xmin in xip: a transaction not seen by the first snapshot,
//     committed (its version is visible now) after it, so after the consistent point: the stream
//     has it. The slot's exported snapshot lists every uncommitted xid of [xmin, xmax) in xip,
//     subtransactions included; were a subtransaction's xid missing from xip (its top-level one in
//     progress), its rows would be taken as seen and emitted, then streamed: a duplicate, never a
//     loss.
//   - Unchanged TOASTed columns: pgoutput sends an UPDATE that leaves an out-of-line value alone
//     without it ('u'). A row changed while sluice was down that the resumed COPY skips (or whose
//     new version moved below the cursor) would reach a destination that never saw it only as
//     such updates: the column missing. So a row version that may hold an out-of-line value is
//     emitted anyway, also from the pages below the cursor of the table resumed inside (its rows
//     changed since the first snapshot only). Those rows may come twice (read_committed Kafka);
//     keyed destinations converge, every later update leaving the value as this row had it.
//     Without a first snapshot to filter by, the table resumed inside is read again from page 0
//     when it has out-of-line-able columns.
//   - A crash before the first checkpoint leaves no position: the slot's exported snapshot is
//     also kept beside the checkpoint (source_history, pg_ddl.cc), and a snapshot started again
//     on the unmoved slot filters by it.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "connectors/postgres/pg_wire.h"
#include "connectors/postgres/postgres_source_driver.h"

namespace sluice::pg {

namespace {
// Rows parsed between two reads of what arrived for the chunks in flight (pump_copies).
constexpr unsigned kPumpRows = 256;

// Reads binary COPY's header (the 11-byte signature, int32 flags, the int32 length of an extension
// area and the area): nullptr, or what is malformed in it.
const char* read_binary_copy_header(wire::Reader& r) {
  static constexpr std::string_view kSignature("PGCOPY\n\377\r\n\0", 11);
  std::string_view signature;
  int32_t extension;
  if (!r.bytes(kSignature.size(), &signature) || signature != kSignature || !r.skip(4) ||
      !r.i32(&extension))
    return "no header";
  if (extension < 0 || !r.skip(size_t(extension))) return "header extension";
  return nullptr;
}
}  // namespace

std::optional<XidSnapshot> XidSnapshot::parse(std::string_view text) {
  XidSnapshot x;
  auto number = [&](std::string_view w, uint64_t* out) {
    auto [ptr, ec] = std::from_chars(w.data(), w.data() + w.size(), *out);
    return !w.empty() && ec == std::errc() && ptr == w.data() + w.size();
  };
  const size_t a = text.find(':');
  const size_t b = a == std::string_view::npos ? a : text.find(':', a + 1);
  // xmin may exceed xmax: a slot's exported snapshot can be "33496:33469:" (xids below xmin
  // count as seen before xmax is looked at, as in XidInMVCCSnapshot).
  if (b == std::string_view::npos || !number(text.substr(0, a), &x.xmin) ||
      !number(text.substr(a + 1, b - a - 1), &x.xmax))
    return std::nullopt;
  std::string_view list = text.substr(b + 1);
  while (!list.empty()) {
    const size_t comma = list.find(',');
    uint64_t xid;
    if (!number(list.substr(0, comma), &xid) || xid < x.xmin || xid >= x.xmax ||
        (!x.xip.empty() && xid <= x.xip.back()))  // in [xmin, xmax), ascending
      return std::nullopt;
    x.xip.push_back(xid);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
    if (list.empty()) return std::nullopt;  // a trailing comma
  }
  return x;
}

bool XidSnapshot::sees(uint64_t xid) const {
  return xid < xmin || (xid < xmax && !std::binary_search(xip.begin(), xip.end(), xid));
}

std::string XidSnapshot::sees_sql(std::string_view x) const {
  if (xip.empty()) return fmt::format("({} < {})", x, std::max(xmin, xmax));
  std::string list;
  for (uint64_t xid : xip) list += (list.empty() ? "" : ",") + std::to_string(xid);
  return fmt::format("({0} < {1} OR ({0} < {2} AND {0} <> ALL ('{{{3}}}'::bigint[])))", x, xmin,
                     xmax, list);
}

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
  inflight_.clear();  // a new connection: no COPY in flight, the table's state is read again
  drop_lanes();
  copy_table_index_ = SIZE_MAX;
  auto now = conn_.exec("SELECT pg_current_snapshot()::text", PGRES_TUPLES_OK);
  if (!now.ok()) return now.error().with_context("cannot read the snapshot's transaction ids: ");
  const std::string now_text = PQgetvalue(now.value().get(), 0, 0);
  const auto now_snap = XidSnapshot::parse(now_text);
  if (!now_snap)
    return Error(Errc::data, fmt::format("unexpected pg_current_snapshot() {}", now_text));
  snapshot_now_text_ = now_text;
  snapshot_now_xmax_ = now_snap->xmax;
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
  SourcePosition& pos = st_->position;
  if (st_->restart_snapshot_if_tables_changed(names)) copy_table_index_ = SIZE_MAX;
  // A snapshot begun (or resumed from a position without one) records the MVCC snapshot it reads
  // under; a resume filters by the recorded one (see the top of this file).
  bool resumed = pos.table_index > 0 || !(pos.cursor == PageCursor{});
  first_snapshot_.reset();
  resume_table_index_ = pos.cursor.page > 0 ? pos.table_index : SIZE_MAX;
  SLUICE_TRY(load_shapes());
  if (!exported.empty()) {
    // Kept beside the checkpoint before anything is read: a crash before the first checkpoint
    // leaves no position, and the next run starts this snapshot again under another one.
    slot_snapshot_lsn_ = pos.point;
    slot_snapshot_mvcc_ = snapshot_now_text_;
    SLUICE_TRY(save_history());
  } else if (pos.mvcc.empty() && !resumed && !slot_snapshot_mvcc_.empty() &&
             slot_snapshot_lsn_ == pos.point) {
    // No checkpoint, but the slot is the one this pipeline created, unmoved: the stream starts
    // at its consistent point, so the snapshot is read as a resume of the one it exported.
    pos.mvcc = slot_snapshot_mvcc_;
    resumed = true;
    spdlog::info(
        "pipeline {}: the snapshot starts again (no checkpoint), skipping the row "
        "versions the stream from the slot's point delivers",
        ctx_.pipeline_id);
  }
  if (pos.mvcc.empty()) {
    pos.mvcc = snapshot_now_text_;
  } else if (auto first = XidSnapshot::parse(pos.mvcc); !first) {
    spdlog::warn(
        "pipeline {}: the position's snapshot {} is not readable: rows changed since it "
        "may come twice",
        ctx_.pipeline_id, pos.mvcc);
  } else if (snapshot_now_xmax_ >= (uint64_t(1) << 32)) {
    spdlog::info(
        "pipeline {}: transaction ids have wrapped around since the server was created: "
        "rows changed since the snapshot began may come twice",
        ctx_.pipeline_id);
  } else if (resumed) {
    first_snapshot_ = first;
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
  const double bytes_per_page = std::max(bytes_per_page_, disk_bytes_per_page_);
  if (bytes_per_page > 0) fit = std::min(fit, double(room_bytes) / bytes_per_page);
  if (bytes_per_page_ <= 0) fit = std::min(fit, 1.0);  // no row read yet: one page, then measure
  const uint64_t n = uint64_t(fit);
  if (n == 0) return batch_empty ? 1 : 0;
  uint64_t grown = n * boost_;
  if (bytes_per_page > 0)
    grown =
        std::min(grown, std::max(n, uint64_t(double(kGrownRooms * room_bytes) / bytes_per_page)));
  return std::min(kMaxPages, grown);
}

void ChunkSizer::chunk_read(uint64_t pages, uint64_t rows, uint64_t bytes) {
  if (pages == 0) return;
  const double rpp = double(rows) / double(pages), bpp = double(bytes) / double(pages);
  // Sparse (under half the density expected): the next chunk may span more pages.
  if (rows_per_page_ > 0 && rpp < rows_per_page_ / 2) boost_ = std::min(kMaxPages, boost_ * 2);
  else boost_ = 1;
  rows_per_page_ = std::max(rows_per_page_, rpp);
  bytes_per_page_ = std::max(bytes_per_page_, bpp);
  measured_ = true;
}

Status PostgresDriver::load_copy_table() {
  const TableRef& t = tables_[st_->position.table_index];
  if (copy_table_index_ == st_->position.table_index) return ok_status();
  auto st = table_from_catalog(t);
  if (!st.ok()) return std::move(st).error();
  copy_table_ = st.value();
  // The columns as COPY selects them: in binary, each column whose binary form sluice decodes as
  // it is, the others as their output function's text (not a cast to text, which differs from it
  // for bool, inet, bpchar, ...): format('%s') calls it, guarded, as it turns NULL into ''.
  copy_columns_.clear();
  copy_kinds_.clear();
  for (const auto& c : copy_table_->rel->columns) {
    const std::string q = quote_identifier(c.name);
    const bool binary = binary_values_ && binary_decodable(types_, c.type_oid);
    copy_columns_ +=
        (copy_columns_.empty() ? "" : ", ") +
        (binary || !binary_values_
             ? q
             : fmt::format("CASE WHEN {0} IS NULL THEN NULL ELSE format('%s', {0}) END", q));
    copy_kinds_.push_back(binary ? 'b' : 't');
  }
  if (copy_columns_.empty()) copy_columns_ = "NULL";  // a table without columns still has rows
  // The shape the snapshot read, at the slot's consistent point: the baseline of the stream's
  // first Relation message of the table, in this run or a later one.
  if (!ddl_capture_) SLUICE_TRY(record_shape(*copy_table_->rel, st_->position.point));
  // Not MVCC, so at least the size the snapshot saw: every visible row lies below it.
  auto size = conn_.exec_params(
      "SELECT pg_relation_size(oid) / current_setting('block_size')::bigint, "
      "CASE WHEN relpages > 0 AND reltuples > 0 THEN reltuples / relpages ELSE 0 END, "
      "pg_table_size(oid) "
      "FROM pg_class WHERE oid = $1::oid",
      {std::to_string(t.oid)});
  if (!size.ok())
    return size.error().with_context(fmt::format("cannot size {}.{}: ", t.schema, t.name));
  if (PQntuples(size.value().get()) != 1)
    return Error(Errc::data, fmt::format("{}.{} is gone from the catalogue", t.schema, t.name));
  copy_table_pages_ = std::stoull(PQgetvalue(size.value().get(), 0, 0));
  copy_maybe_toasted_ = "false";
  copy_below_cursor_end_ = 0;
  SLUICE_TRY(plan_resumed_table(t));
  const double rows_per_page = std::strtod(PQgetvalue(size.value().get(), 0, 1), nullptr);
  // Heap and TOAST on disk per heap page: what a page's rows hold before the first is read.
  const double disk_bytes_per_page =
      copy_table_pages_
          ? std::strtod(PQgetvalue(size.value().get(), 0, 2), nullptr) / double(copy_table_pages_)
          : 0;
  chunk_sizer_.start_table(rows_per_page, disk_bytes_per_page);
  below_cursor_sizer_.start_table(rows_per_page, disk_bytes_per_page);
  copy_table_index_ = st_->position.table_index;
  spdlog::debug("pipeline {}: snapshot of {}.{} from page {} (of {})", ctx_.pipeline_id, t.schema,
                t.name, st_->position.cursor.page, copy_table_pages_);
  return ok_status();
}

Status PostgresDriver::plan_resumed_table(const TableRef& t) {
  const bool resume_table = st_->position.table_index == resume_table_index_;
  if (!first_snapshot_ && !resume_table) return ok_status();
  // The columns that may hold an out-of-line value: variable-length, not PLAIN storage, in a
  // table with a TOAST table.
  auto cols = conn_.exec_params(
      "SELECT a.attname FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
      "WHERE a.attrelid = $1::oid AND a.attnum > 0 AND NOT a.attisdropped AND a.attlen = -1 "
      "AND a.attstorage <> 'p' AND c.reltoastrelid <> 0 ORDER BY a.attnum",
      {std::to_string(t.oid)});
  if (!cols.ok())
    return cols.error().with_context(
        fmt::format("cannot read {}.{}'s columns: ", t.schema, t.name));
  // A value held inline is the same datum inside a one-column row, after the row's 24-byte
  // header; an out-of-line one is fetched into the row (with its 4-byte header), so the row is
  // larger. Anything but that exact size counts as "may be out of line" (a duplicate at worst).
  std::string any;
  for (int i = 0; i < PQntuples(cols.value().get()); ++i) {
    const std::string c = quote_identifier(PQgetvalue(cols.value().get(), i, 0));
    any += fmt::format("{}coalesce(pg_column_size(ROW({})) <> 24 + pg_column_size({}), false)",
                       any.empty() ? "" : " OR ", c, c);
  }
  if (any.empty()) return ok_status();
  copy_maybe_toasted_ = "(" + any + ")";
  if (!resume_table) return ok_status();
  if (first_snapshot_) {
    copy_below_cursor_end_ = st_->position.cursor.page;
    spdlog::info(
        "pipeline {}: snapshot of {}.{} resumes at page {}; the pages before it are read "
        "for rows changed since it began that may hold out-of-line values",
        ctx_.pipeline_id, t.schema, t.name, copy_below_cursor_end_);
  } else {
    // Rows updated while sluice was down may have moved below the cursor, and their updates
    // lack unchanged out-of-line values: without the first snapshot to tell which rows those
    // are, the whole table is read again.
    spdlog::info(
        "pipeline {}: snapshot of {}.{} starts again from page 0 (it has out-of-line "
        "values and the position does not name the snapshot it began in)",
        ctx_.pipeline_id, t.schema, t.name);
    st_->position.cursor.page = 0;
  }
  return ok_status();
}

Status PostgresDriver::send_copy(size_t lane_index, uint64_t from, uint64_t pages,
                                 bool in_this_batch) {
  const TableRef& t = tables_[st_->position.table_index];
  // Rows that changed after the first snapshot come through the stream, which starts at its
  // LSN: a resume under a newer snapshot filters them out (below), so they come once.
  CopyChunk c;
  c.from = from;
  c.pages = std::max<uint64_t>(1, pages);
  c.below_cursor = from < copy_below_cursor_end_;
  c.in_this_batch = in_this_batch;
  c.lane = lane_index;
  if (c.below_cursor) c.pages = std::min(c.pages, copy_below_cursor_end_ - from);
  c.last = !c.below_cursor && from + c.pages >= copy_table_pages_;
  // (Below the cursor the position does not move: there is nothing to split at.)
  c.with_ctid = !c.below_cursor && c.pages > 1 && chunk_sizer_.guessing();
  std::string where = fmt::format("ctid >= '({},0)'::tid", from);
  if (!c.last) where += fmt::format(" AND ctid < '({},0)'::tid", from + c.pages);
  if (first_snapshot_) {
    // Resumed under a newer snapshot: the versions the first one saw (and, below the cursor,
    // only those it did not see), plus those that may hold out-of-line values. CASE fixes the
    // order (the planner may reorder AND/OR arms): the size test, which fetches out-of-line
    // values, runs only for versions the first snapshot did not see.
    const std::string seen = first_snapshot_->sees_sql("xmin::text::bigint");
    if (copy_maybe_toasted_ == "false") where += c.below_cursor ? " AND false" : " AND " + seen;
    else
      where += fmt::format(" AND CASE WHEN {} THEN {} ELSE {} END", seen,
                           c.below_cursor ? "false" : "true", copy_maybe_toasted_);
  }
  const std::string sql =
      fmt::format("COPY (SELECT {}{} FROM {}.{} WHERE {}) TO STDOUT{}", c.with_ctid ? "ctid, " : "",
                  copy_columns_, quote_identifier(t.schema), quote_identifier(t.name), where,
                  binary_values_ ? " (FORMAT binary)" : "");
  PgConn& conn = lane(c.lane);
  if (!PQsendQuery(conn.get(), sql.c_str()))
    return classify_error(conn.last_error(), fmt::format("cannot read {}.{}", t.schema, t.name));
  next_from_ = c.from + c.pages;
  Receiving r;
  r.chunk = c;
  inflight_.push_back(std::move(r));
  spdlog::trace("pipeline {}: snapshot of {}.{}: pages {} +{} (connection {})", ctx_.pipeline_id,
                t.schema, t.name, from, c.pages, c.lane);
  return ok_status();
}

Status PostgresDriver::step_copy(Receiving& r, bool wait) {
  using Stage = Receiving::Stage;
  PgConn& conn = lane(r.chunk.lane);
  const TableRef& t = tables_[st_->position.table_index];
  for (;;) {
    switch (r.stage) {
      case Stage::start: {
        if (!wait && PQisBusy(conn.get())) return ok_status();
        PgResult start(PQgetResult(conn.get()));
        if (!start || PQresultStatus(start.get()) != PGRES_COPY_OUT)
          return classify_error(start ? PQresultErrorMessage(start.get()) : conn.last_error(),
                                fmt::format("cannot read {}.{}", t.schema, t.name));
        r.stage = Stage::rows;
        break;
      }
      case Stage::rows: {
        char* buf = nullptr;
        const int n = PQgetCopyData(conn.get(), &buf, wait ? 0 : 1);
        if (n > 0) {
          r.lines.append(buf, size_t(n));
          PQfreemem(buf);
          if (++r.rows % 1024 == 0 && wait) deadline_.extend();
          break;
        }
        if (n == 0) return ok_status();  // nothing more yet (not waiting)
        if (n != -1) return classify_error(conn.last_error(), "snapshot read failed");
        r.stage = Stage::result;
        break;
      }
      case Stage::result: {
        if (!wait && PQisBusy(conn.get())) return ok_status();
        PgResult res(PQgetResult(conn.get()));
        if (!res || PQresultStatus(res.get()) != PGRES_COMMAND_OK)
          return classify_error(res ? PQresultErrorMessage(res.get()) : conn.last_error(),
                                "snapshot COPY failed");
        r.stage = Stage::end;
        break;
      }
      case Stage::end: {
        if (!wait && PQisBusy(conn.get())) return ok_status();
        if (PgResult more{PQgetResult(conn.get())}) break;  // none expected: read on to the end
        r.stage = Stage::done;  // the connection is free for the next chunk
        return ok_status();
      }
      case Stage::done: return ok_status();
    }
  }
}

Status PostgresDriver::receive_copy() {
  Receiving& r = inflight_.front();
  PgConn& conn = lane(r.chunk.lane);
  if (r.error) return *r.error;
  // query_timeout: from now until the first row, and between rows (progress moves it on).
  auto armed = deadline_.arm(conn);
  if (Status st = step_copy(r, true); !st.ok()) return conn.deadline_error_or(st.error());
  chunk_ = r.chunk;
  chunk_lines_ = std::move(r.lines);
  chunk_rows_ = r.rows;
  inflight_.pop_front();
  return ok_status();
}

// While a chunk is parsed: what arrived of the chunks in flight is read (the server is not held
// back by a full socket), and a connection whose chunk is received whole gets the next one at
// once, so the server reads on while sluice parses.
void PostgresDriver::pump_copies(const Batch& batch) {
  if (copy_request_ == nullptr) return;
  bool freed = false;
  for (Receiving& r : inflight_) {
    if (r.stage == Receiving::Stage::done || r.error) continue;
    PgConn& conn = lane(r.chunk.lane);
    Status st = PQconsumeInput(conn.get())
                    ? step_copy(r, false)
                    : Status(classify_error(conn.last_error(), "snapshot read failed"));
    if (!st.ok()) r.error = st.error();  // receive_copy() returns it: parsing goes on
    freed = freed || r.stage == Receiving::Stage::done;
  }
  if (freed) {
    Status st = send_more(*copy_request_, batch, false);
    if (!st.ok() && !inflight_.empty() && !inflight_.back().error)
      inflight_.back().error = st.error();
  }
}

Status PostgresDriver::send_more(const ReadRequest& req, const Batch& batch, bool right_after) {
  // At most one chunk received ahead per connection besides the one each reads.
  while (inflight_.size() < 2 * lane_count() && !chunk_.last &&
         (inflight_.empty() || !inflight_.back().chunk.last)) {
    std::vector<bool> busy(lane_count(), false);
    for (const Receiving& r : inflight_)
      if (r.stage != Receiving::Stage::done) busy[r.chunk.lane] = true;
    const auto free = std::find(busy.begin(), busy.end(), false);
    if (free == busy.end()) break;
    uint64_t pages = 0;
    if (right_after && inflight_.empty()) {
      const uint64_t rows_left = req.max_records - batch.size();
      const uint64_t room = rows_left > chunk_rows_ ? rows_left - chunk_rows_ : 0;
      pages = room ? sizer_for(next_from_).pages(room, req.max_bytes - batch.bytes(), false) : 0;
    }
    const bool in_this_batch = pages > 0;
    if (!pages) pages = sizer_for(next_from_).pages(req.max_records, req.max_bytes, true);
    SLUICE_TRY(send_copy(size_t(free - busy.begin()), next_from_, pages, in_this_batch));
  }
  return ok_status();
}

Status PostgresDriver::finish_snapshot(State&) {
  exported_.clear();
  for (PgConn& l : lanes_)
    if (auto c = l.exec("COMMIT", PGRES_COMMAND_OK); !c.ok()) return c.error();
  drop_lanes();
  if (auto c = conn_.exec("COMMIT", PGRES_COMMAND_OK); !c.ok()) return c.error();
  return ok_status();
}

// snapshot.parallel: conn_'s MVCC snapshot, exported, imported by the other connections, each in
// a read-only REPEATABLE READ transaction of its own (PostgreSQL's parallel pg_dump does the same).
Status PostgresDriver::open_lanes() {
  if (parallel_ <= 1 || lanes_.size() == size_t(parallel_ - 1)) return ok_status();
  drop_lanes();
  auto id = conn_.exec("SELECT pg_export_snapshot()", PGRES_TUPLES_OK);
  if (!id.ok()) {
    if (id.error().code() == Errc::connection) return id.error();
    spdlog::warn(
        "pipeline {}: snapshot.parallel: cannot export the snapshot ({}): one connection reads it",
        ctx_.pipeline_id, id.error().message());
    parallel_ = 1;
    return ok_status();
  }
  const std::string snapshot = PQgetvalue(id.value().get(), 0, 0);
  for (int i = 1; i < parallel_; ++i) {
    auto c = PgConn::connect(url_, false, net_);
    if (!c.ok()) return std::move(c).error();
    PgConn conn = std::move(c.value());
    SLUICE_TRY(conn.exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", PGRES_COMMAND_OK));
    if (auto s =
            conn.exec("SET TRANSACTION SNAPSHOT " + conn.quote_literal(snapshot), PGRES_COMMAND_OK);
        !s.ok())
      return s.error().with_context("snapshot.parallel: cannot import the snapshot: ");
    lanes_.push_back(std::move(conn));
  }
  spdlog::debug("pipeline {}: snapshot read by {} connections", ctx_.pipeline_id, lane_count());
  return ok_status();
}

void PostgresDriver::drop_lanes() noexcept { lanes_.clear(); }

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
  inflight_.clear();
  drop_lanes();
  chunk_lines_.clear();
  chunk_parsing_ = false;
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
  SLUICE_TRY(open_snapshot_transaction(""));
  // A newer MVCC snapshot: read on as a resumed snapshot (see the top of this file), filtered by
  // the first one the position records.
  const SourcePosition& pos = st_->position;
  first_snapshot_.reset();
  resume_table_index_ = pos.cursor.page > 0 ? pos.table_index : SIZE_MAX;
  if (auto first = XidSnapshot::parse(pos.mvcc); first && snapshot_now_xmax_ < (uint64_t(1) << 32))
    first_snapshot_ = first;
  return ok_status();
}

// `meta`: the chunk's rows share one metadata object (schema and table).
Status PostgresDriver::emit_snapshot_row(Batch& batch, const Tuple& tuple, const Value& meta) {
  Record& r = batch.add();
  r.op = Operation::snapshot;
  r.metadata = meta;
  SLUICE_TRY(tuple_to_object(batch, *copy_table_, tuple, false, &r.after));
  if (const auto& keys = copy_table_->key_columns; !keys.empty()) {
    // A snapshot row has every column, in order: the key's values are the row's.
    const auto fields = r.after.fields();
    ObjectBuilder k = batch.object(uint32_t(keys.size()));
    for (uint32_t i : keys) k.add(fields[i].name, fields[i].value);
    r.key = k.build();
  }
  mark_poison(batch, r);
  ++st_->snapshot_rows;
  return ok_status();
}

// COPY text: a line per row, fields split on tabs, "\\N" for NULL, backslash escapes.
Status PostgresDriver::parse_text_chunk(Batch& batch, Tuple& tuple, size_t begin, size_t end) {
  st_->caches.retain(batch, copy_table_->rel);
  const Value meta = metadata(batch, *copy_table_, {}, false);
  const auto& cols = copy_table_->rel->columns;
  tuple.resize(cols.size());
  if (field_scratch_.size() < cols.size()) field_scratch_.resize(cols.size());
  for (size_t li = begin; li < end; ++li) {
    std::string_view line = chunk_lines_[li];
    if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
    size_t start = 0;
    if (chunk_.with_ctid) {  // the ctid first (line_page reads it)
      const size_t tab = line.find('\t');
      start = tab == std::string_view::npos ? line.size() : tab + 1;
    }
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
    SLUICE_TRY(emit_snapshot_row(batch, tuple, meta));
    if (++pumped_rows_ % kPumpRows == 0) pump_copies(batch);
  }
  return ok_status();
}

// COPY (FORMAT binary), network byte order: a header (the 11-byte signature, int32 flags, int32
// length of an extension area), then per row an int16 field count and per field an int32 length
// (-1: NULL) and the bytes, then an int16 -1. The server sends a row per CopyData message, the
// header with the first; any split between messages that falls between rows is read.
Status PostgresDriver::parse_binary_chunk(Batch& batch, Tuple& tuple, size_t begin, size_t end) {
  st_->caches.retain(batch, copy_table_->rel);
  const Value meta = metadata(batch, *copy_table_, {}, false);
  const auto& cols = copy_table_->rel->columns;
  const size_t fields = std::max<size_t>(1, cols.size());  // "SELECT NULL" for no column
  auto malformed = [&](std::string_view what) {
    return Error(Errc::data, fmt::format("{}.{}: the server's binary COPY data is malformed ({})",
                                         copy_table_->rel->schema, copy_table_->rel->name, what));
  };
  const bool with_ctid = chunk_.with_ctid;
  bool header = begin > 0, trailer = false;
  tuple.resize(cols.size());
  for (size_t li = begin; li < end; ++li) {
    wire::Reader r(chunk_lines_[li]);
    if (!header) {
      if (const char* bad = read_binary_copy_header(r)) return malformed(bad);
      header = true;
    }
    while (!r.at_end()) {
      int16_t count;
      if (trailer || !r.i16(&count)) return malformed("data after the end");
      if (count == -1) {
        trailer = true;
        continue;
      }
      if (size_t(count) != fields + with_ctid)
        return malformed(fmt::format("a row of {} fields, {} selected", count, fields + with_ctid));
      // Locals, not the members: a store of a field's kind (a char) could alias them, and they
      // would be read again for every field.
      const char* p = r.rest().data();
      const char* const end = p + r.remaining();
      TupleValue* const out = tuple.data();
      const char* const kinds = copy_kinds_.data();
      const size_t ncols = cols.size();
      if (with_ctid) {  // (line_page reads it)
        if (end - p < 10 || wire::be32(p) != 6) return malformed("a row without its ctid");
        p += 10;
      }
      for (size_t i = 0; i < fields; ++i) {
        if (end - p < 4) return malformed("a row cut short");
        const int32_t len = int32_t(wire::be32(p));
        p += 4;
        TupleValue discard;
        TupleValue& v = i < ncols ? out[i] : discard;
        if (len == -1) {
          v.kind = 'n';
          v.data = {};
          continue;
        }
        if (len < 0 || end - p < len) return malformed("a field cut short");
        v.data = std::string_view(p, size_t(len));
        p += len;
        v.kind = i < ncols ? kinds[i] : 't';
      }
      r = wire::Reader(std::string_view(p, size_t(end - p)));
      SLUICE_TRY(emit_snapshot_row(batch, tuple, meta));
      if (++pumped_rows_ % kPumpRows == 0) pump_copies(batch);
    }
  }
  if (!trailer && end == chunk_lines_.size()) return malformed("no end marker");
  return ok_status();
}

std::optional<uint64_t> PostgresDriver::line_page(size_t i) const {
  const std::string_view line = chunk_lines_[i];
  uint64_t page = 0;
  if (!binary_values_) {  // "(page,item)\t…"
    if (line.size() < 2 || line[0] != '(') return std::nullopt;
    const auto [p, ec] = std::from_chars(line.data() + 1, line.data() + line.size(), page);
    if (ec != std::errc() || p == line.data() + line.size() || *p != ',') return std::nullopt;
    return page;
  }
  wire::Reader r(line);
  if (i == 0 && read_binary_copy_header(r)) return std::nullopt;  // it comes with the first row
  int16_t count;
  int32_t len;
  uint32_t block;
  if (!r.i16(&count) || count < 1 || !r.i32(&len) || len != 6 || !r.u32(&block))
    return std::nullopt;
  return block;
}

size_t PostgresDriver::part_end(size_t begin, uint64_t room_rows, uint64_t room_bytes,
                                bool batch_empty) const {
  const size_t n = chunk_lines_.size();
  uint64_t rows = 0, bytes = 0;
  size_t i = begin;
  std::optional<uint64_t> page = i < n ? line_page(i) : std::nullopt;
  while (i < n) {
    if (!page) return n;  // the end marker (or what the parser will call malformed): to the end
    // The page's rows: up to the first line of another page (whose page is the next one's).
    uint64_t page_bytes = chunk_lines_[i].size();
    size_t j = i + 1;
    std::optional<uint64_t> next;
    for (; j < n && (next = line_page(j)) == page; ++j) page_bytes += chunk_lines_[j].size();
    if ((rows + (j - i) > room_rows || bytes + page_bytes > room_bytes) &&
        (rows > 0 || !batch_empty))
      return i;
    rows += j - i;
    bytes += page_bytes;
    i = j;
    page = next;
  }
  return n;
}

Result<SnapshotRead> PostgresDriver::read_snapshot_chunks(Batch& batch, const ReadRequest& req,
                                                          std::stop_token stop) {
  SourcePosition& pos = st_->position;
  Tuple tuple;
  while (batch.size() < req.max_records && batch.bytes() < req.max_bytes &&
         !stop.stop_requested()) {
    if (pos.table_index >= tables_.size()) return SnapshotRead::finished;
    if (!chunk_parsing_) {
      if (inflight_.empty()) {  // nothing in flight: a chunk for the room left in this batch
        SLUICE_TRY(load_copy_table());
        SLUICE_TRY(open_lanes());
        const uint64_t from = copy_below_cursor_end_ ? 0 : pos.cursor.page;
        const uint64_t pages = sizer_for(from).pages(req.max_records - batch.size(),
                                                     req.max_bytes - batch.bytes(), batch.empty());
        if (pages == 0) break;  // not even a page's rows fit: the next batch begins it
        chunk_ = CopyChunk{};
        SLUICE_TRY(send_copy(0, from, pages, true));
      } else if (!inflight_.front().chunk.in_this_batch && !batch.empty()) {
        break;  // the chunk in flight was sized for a batch of its own
      }
      SLUICE_TRY(receive_copy());
      // While this chunk is parsed the server already reads the next ones (one per connection):
      // the chunk right after it sized for what this batch has left after it (or else for the
      // next batch), those behind it for a batch each.
      SLUICE_TRY(send_more(req, batch, true));
      chunk_parsing_ = true;
      chunk_next_ = 0;
      chunk_bytes_ = 0;
      // The table's rows are bounded by markers, so a keyed destination can remove rows this
      // snapshot did not see (a re-snapshot after `sluice cleanup`). A resume at page 0 begins
      // again: every row of the table comes again.
      if (chunk_.from == 0 && !chunk_.below_cursor)
        add_snapshot_marker(batch, copy_table_->rel->schema, copy_table_->rel->name, true);
    }
    // A chunk sized by a guess may hold far more rows than the batch has room for: it is parsed
    // a part at a time, each of whole heap pages, and the position names the page a part ends at.
    const size_t end = chunk_.with_ctid ? part_end(chunk_next_, req.max_records - batch.size(),
                                                   req.max_bytes - batch.bytes(), batch.empty())
                                        : chunk_lines_.size();
    // Its next page does not fit: the next batch begins with it. (An empty chunk ends here.)
    if (end == chunk_next_ && end < chunk_lines_.size()) break;
    copy_request_ = &req;
    const size_t bytes_before = batch.bytes();
    SLUICE_TRY(binary_values_ ? parse_binary_chunk(batch, tuple, chunk_next_, end)
                              : parse_text_chunk(batch, tuple, chunk_next_, end));
    copy_request_ = nullptr;
    chunk_bytes_ += batch.bytes() - bytes_before;
    if (end < chunk_lines_.size()) {
      // The batch holds every row before this page.
      chunk_next_ = end;
      pos.cursor.page = *line_page(end);
      break;
    }
    chunk_parsing_ = false;
    (chunk_.below_cursor ? below_cursor_sizer_ : chunk_sizer_)
        .chunk_read(chunk_.pages, chunk_rows_, chunk_bytes_);
    chunk_lines_.clear();
    // The batch now holds every row before the chunk's end: its position says so.
    if (chunk_.last) {
      add_snapshot_marker(batch, copy_table_->rel->schema, copy_table_->rel->name, false);
      ++pos.table_index;
      pos.cursor.page = 0;
    } else if (!chunk_.below_cursor) {
      pos.cursor.page = chunk_.from + chunk_.pages;
    }
  }
  return SnapshotRead::more;
}

}  // namespace sluice::pg
