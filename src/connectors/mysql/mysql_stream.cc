// The mysql change stream: COM_BINLOG_DUMP (libmariadb's mariadb_rpl_open) from the position — by
// GTID on MariaDB (@slave_connect_state) — raw events read on a reader thread into a ring of memory
// (binlog_event_ring.h; the reader also checks their CRC32s), decoded by our own decoder
// (binlog.h) into records on the source's thread.
#include <fmt/format.h>
#include <mysqld_error.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "connectors/mysql/mysql_source_driver.h"

namespace sluice::mysql {

using Clock = std::chrono::steady_clock;

Status MysqlDriver::start_stream(State&) {
  close_stream();
  pending_gtid_.reset();
  const SourcePosition& pos_ = st_->position;
  // Before anything is read: the start is still on the server, and each table's columns are
  // those of the schema history there.
  if (Status st = check_start_available(); !st.ok()) return st;
  if (Status st = rewind_schemas(pos_.point.coord); !st.ok()) return st;
  const unsigned hb_s = unsigned(std::max<int64_t>(1, heartbeat_.count() / 1000));
  ConnectOptions dump_options = opts_;
  dump_options.read_timeout_s = std::max(30u, hb_s * 3);
  auto c = MysqlConn::connect(dump_options);
  if (!c.ok()) return std::move(c).error();
  rpl_conn_ = std::move(c.value());
  MYSQL* m = rpl_conn_.get();
  const uint64_t hb_ns = uint64_t(heartbeat_.count()) * 1000000ull;
  std::vector<std::string> setup = {
      "SET @master_binlog_checksum = @@global.binlog_checksum",
      "SET @source_binlog_checksum = @@global.binlog_checksum",
      fmt::format("SET @master_heartbeat_period = {}", hb_ns),
  };
  const bool use_gtid = mariadb_ && !pos_.point.gtid.empty();
  if (mariadb_) {
    setup.push_back("SET @mariadb_slave_capability = 4");
    if (use_gtid) {
      setup.push_back(fmt::format("SET @slave_connect_state = {}",
                                  rpl_conn_.quoted(pos_.point.gtid.to_string())));
      setup.push_back("SET @slave_gtid_strict_mode = 0");
      setup.push_back("SET @slave_gtid_ignore_duplicates = 0");
    }
  }
  for (const std::string& sql : setup) {
    if (mysql_real_query(m, sql.data(), sql.size()) != 0 &&
        mysql_errno(m) != ER_UNKNOWN_SYSTEM_VARIABLE) {
      Error e = server_error(m, "cannot set up the binlog connection");
      if (e.code() == Errc::connection) return e;
    }
    if (MysqlResult r{mysql_store_result(m)}) {
    }
  }
  auto q = rpl_conn_.query("SELECT @@global.binlog_checksum", "query failed");
  checksum_ = q.ok() && !q.value().empty() && q.value()[0][0].value_or("") == "CRC32";
  rpl_ = mariadb_rpl_init(m);
  if (!rpl_) return Error(Errc::internal, "cannot initialise libmariadb's replication API");
  const std::string file = use_gtid ? "" : pos_.point.coord.file;
  mariadb_rpl_optionsv(rpl_, MARIADB_RPL_SERVER_ID, server_id_);
  mariadb_rpl_optionsv(rpl_, MARIADB_RPL_FILENAME, file.c_str(), file.size());
  mariadb_rpl_optionsv(rpl_, MARIADB_RPL_START,
                       (unsigned long)(use_gtid ? 4 : std::max<uint64_t>(4, pos_.point.coord.pos)));
  mariadb_rpl_optionsv(rpl_, MARIADB_RPL_FLAGS, 0u);
  const std::string where = use_gtid
                                ? "GTID " + pos_.point.gtid.to_string()
                                : fmt::format("{}:{}", pos_.point.coord.file, pos_.point.coord.pos);
  // By value: the reader thread calls it after this function returned (`where` is a local).
  auto dump_error = [this, where](unsigned no, const std::string& msg) -> Error {
    if (no == ER_SPECIFIC_ACCESS_DENIED_ERROR || no == ER_ACCESS_DENIED_ERROR || no == 1227)
      return Error(
          Errc::permission,
          fmt::format("user '{}' cannot read the binlog ({}): GRANT REPLICATION SLAVE ON *.* "
                      "TO '{}'",
                      opts_.url.user, msg, opts_.url.user));
    if (no == 1236)  // ER_MASTER_FATAL_ERROR_READING_BINLOG: purged or unknown position
      return Error(
          Errc::not_found,
          fmt::format("binlog position {} is no longer on {} ({}): the changes since then are "
                      "lost; run `sluice cleanup` and start over with a new snapshot",
                      where, opts_.url.redacted(), msg));
    if (classify_errno(no).code == Errc::connection)
      return Error(Errc::connection, fmt::format("binlog stream: {} ({})", msg, no), true);
    return Error(Errc::data, fmt::format("binlog stream from {}: {} ({})", where, msg, no));
  };
  if (mariadb_rpl_open(rpl_) != 0) return dump_error(mysql_errno(m), mysql_error(m));
  // The first packet tells whether the server accepted the position.
  const unsigned long len = mysql_net_read_packet(m);
  if (len == packet_error || len == 0) return dump_error(mysql_errno(m), mysql_error(m));
  if (decode_threads_ > 1 && !pool_) pool_ = std::make_unique<RowsDecodePool>(decode_threads_ - 1);
  ring_ = std::make_unique<EventRing>();
  EventRing* ring = ring_.get();
  // Copies a packet's event into the ring and checks its CRC32 there (in cache, and off the
  // decoding thread); the decoder checks again only what this did not verify.
  auto put = [ring, verify = verify_checksum_, checksums = bl::StreamChecksums(checksum_)](
                 const uint8_t* p, size_t n) mutable {
    char* dst = ring->reserve(n);
    if (!dst) return false;
    std::memcpy(dst, p, n);
    const std::string_view ev(dst, n);
    ring->commit(verify && checksums.verified(ev));
    return true;
  };
  put(m->net.read_pos + 1, len - 1);
  const auto read_timeout = std::chrono::seconds(dump_options.read_timeout_s);
  reader_ = std::jthread([m, ring, put, dump_error, read_timeout](std::stop_token st) mutable {
    auto last_packet = Clock::now();
    while (!st.stop_requested()) {
      const unsigned long n = mysql_net_read_packet(m);
      if (n == packet_error || n == 0) {
        const auto silent = Clock::now() - last_packet;
        if (!st.stop_requested() && silent >= read_timeout - std::chrono::milliseconds(500)) {
          // Not even a heartbeat for the read timeout: the connection is taken for dead.
          ring->fail(
              Error(Errc::timeout,
                    fmt::format("the binlog stream was silent for {} s, beyond 3 x "
                                "heartbeat.interval ({} s): taking it for dead and "
                                "reconnecting",
                                std::chrono::duration_cast<std::chrono::seconds>(silent).count(),
                                read_timeout.count()),
                    true));
          return;
        }
        ring->fail(dump_error(mysql_errno(m), mysql_error(m)));
        return;
      }
      last_packet = Clock::now();
      const uint8_t* p = m->net.read_pos;
      if (p[0] == 0xfe && n < 8) {
        ring->fail(Error(Errc::connection, "the server ended the binlog stream", true));
        return;
      }
      if (!put(p + 1, n - 1)) return;  // stopped
    }
  });
  fd_.reset();
  cur_file_ = pos_.point.coord.file;
  spdlog::info("pipeline {}: streaming the binlog of {} from {} (server_id {})", ctx_.pipeline_id,
               opts_.url.redacted(), where, server_id_);
  return ok_status();
}

void MysqlDriver::close_stream() noexcept {
  if (reader_.joinable()) {
    reader_.request_stop();
    if (ring_) ring_->stop();
    if (rpl_conn_) {
      const int fd = int(mysql_get_socket(rpl_conn_.get()));
      if (fd >= 0) ::shutdown(fd, SHUT_RDWR);  // unblocks the reader's read
    }
    reader_.join();
  }
  if (rpl_) {
    // mariadb_rpl_close would close the connection too: free only the handle's memory here.
    rpl_->mysql = nullptr;
    mariadb_rpl_close(rpl_);
    rpl_ = nullptr;
  }
  rpl_conn_.reset();
  // Popped events point into the ring (no job is out between reads: end_decode_ahead).
  ahead_.clear();
  ahead_scanned_ = 0;
  ahead_blocked_ = false;
  ahead_bytes_ = 0;
  ring_.reset();
}

void MysqlDriver::stop_stream(State&) noexcept {
  close_stream();
  pending_gtid_.reset();
}

// A transaction starts at binlog position `start` (its GTID or BEGIN event). When it is the one a
// restart interrupted, its first changes were written already: the skeleton skips them.
void MysqlDriver::begin_tx(uint32_t start, const bl::Header& h) {
  st_->begin_transaction(BinlogCoord{cur_file_, start});
  tx_saw_begin_ = false;
  tx_time_ = h.timestamp;
  tx_server_id_ = h.server_id;
  tx_gtid_text_.clear();
}

void MysqlDriver::commit_tx(uint32_t next_pos) {
  BinlogPoint& point = st_->position.point;
  if (next_pos) {
    point.coord.file = cur_file_;
    point.coord.pos = next_pos;
  }
  if (pending_gtid_) point.gtid = std::move(*pending_gtid_);
  pending_gtid_.reset();
  st_->tx.end();
  tx_saw_begin_ = false;
  if (tx_time_) st_->report_commit_time(int64_t(tx_time_) * 1000000);
}

Value MysqlDriver::metadata(Batch& batch, const TableSchema& t, uint32_t event_pos, bool cdc) {
  ObjectBuilder m = batch.object(cdc ? 9 : 2);
  m.add(meta::kSchema, Value::string(t.db));
  m.add(meta::kTable, Value::string(t.table));
  if (cdc) {
    const auto* tx = st_->caches.tx_metadata();  // file, gtid, commit time, server id
    if (!tx)
      tx =
          &st_->caches.set_tx_metadata({batch.copy(cur_file_), batch.copy(tx_gtid_text_),
                                        batch.copy(format_timestamptz(int64_t(tx_time_) * 1000000)),
                                        batch.copy(std::to_string(tx_server_id_))});
    m.add("binlog_file", Value::string((*tx)[0]));
    m.add("binlog_pos", Value::string(batch.copy(std::to_string(event_pos))));
    if (!(*tx)[1].empty()) m.add("gtid", Value::string((*tx)[1]));
    m.add("commit_time", Value::string((*tx)[2]));
    m.add("server_id", Value::string((*tx)[3]));
  }
  return m.build();
}

Result<bool> MysqlDriver::row_record(Batch& batch, const TableMapState& ms,
                                     bl::RowsEvent::Kind kind, std::span<const Field> rb,
                                     std::span<const Field> ra, const bl::ZeroDates* zb,
                                     const bl::ZeroDates* za, const bl::RowPlan& plan_b,
                                     const bl::RowPlan& plan_a, uint32_t event_pos, Value& meta) {
  const TableSchema& t = *ms.schema;
  const bool upd = kind == bl::RowsEvent::Kind::update;
  if (ms.signal) {  // a watermark or a signal: consumed, not a change (nor counted as one)
    if (kind == bl::RowsEvent::Kind::write) SLUICE_TRY(on_signal_row(batch, ms, rb));
    return false;
  }
  // Before the resume check: a replayed change drops its key from the chunk too (always safe).
  if (st_->incremental.tracking()) incremental_change(ms, rb, ra);
  if (!st_->tx.next_change()) return false;  // written before the restart
  // A zero date (the first of the row's images): why the record goes to the dead-letter queue.
  std::string reject;
  const auto has_zero = [](const bl::ZeroDates* z) {
    return z && z->first != bl::ZeroDates::kNone;
  };
  const bl::ZeroDates* zero = has_zero(zb) ? zb : upd && has_zero(za) ? za : nullptr;
  if (zero) {
    const Value& v = (zero == zb ? rb : ra)[zero->first].value;
    reject = fmt::format("{}.{}.{}: zero date '{}' is no date", quote_identifier(t.db),
                         quote_identifier(t.table), quote_identifier(ms.names[zero->first]),
                         v.kind() == ValueKind::string ? v.as_text() : std::string_view());
    if (!st_->ctx.dead_letters) return unrepresentable_value_stop(reject, true);
  }
  // The event's rows share one metadata object (same table, transaction and event position).
  if (meta.is_absent()) meta = metadata(batch, t, event_pos, true);
  // The key first: it reads the images, which a full image's object then takes over.
  Value key;
  if (!ms.key.empty()) {
    ObjectBuilder k = batch.object(uint32_t(ms.key.size()));
    for (uint32_t i : ms.key) {
      const Value* v = upd && !ra[i].value.is_absent() ? &ra[i].value : &rb[i].value;
      if (!v->is_absent()) k.add(ms.names[i], *v);
    }
    key = k.build();
  }
  // An image of every column is the object as it is; one of some columns gathers those.
  auto object = [&](const bl::RowPlan& plan, std::span<const Field> row) {
    if (plan.absent.empty()) return Value::object(row.data(), uint32_t(row.size()));
    const auto cnt = uint32_t(plan.steps.size());
    Field* const f = batch.arena().allocate_array<Field>(cnt);
    const bl::RowPlan::Step* const steps = plan.steps.data();
    for (uint32_t j = 0; j < cnt; ++j) f[j] = row[steps[j].column];
    return Value::object(f, cnt);
  };
  // The record is made whole (not added empty and then filled: clearing its 88 bytes first
  // cost a tenth of this function).
  Record* added = nullptr;
  switch (kind) {
    case bl::RowsEvent::Kind::write:
      added = &batch.add(Operation::create, meta, key, Value(), object(plan_b, rb));
      break;
    case bl::RowsEvent::Kind::update:
      added = &batch.add(Operation::update, meta, key, object(plan_b, rb), object(plan_a, ra));
      break;
    case bl::RowsEvent::Kind::remove:
      added = &batch.add(Operation::remove, meta, key, object(plan_b, rb), Value());
      break;
  }
  Record& r = *added;
  if (!reject.empty()) mark_source_reject(batch, r, reject);
  return true;
}

Status MysqlDriver::handle_rows(Batch& batch, const bl::Event& e, RowsDecodePool::Job* job) {
  // Taken first, whatever follows: no helper reads this event or its table map afterwards.
  const RowsDecodePool::Job* const ahead = job ? &pool_->take(*job, batch.arena()) : nullptr;
  if (ahead) ahead_bytes_ -= ahead->rows.size();
  auto rows = bl::parse_rows(e, *fd_);
  if (!rows.ok()) return std::move(rows).error();
  auto it = maps_.find(rows->table_id);
  if (it == maps_.end())
    return Error(Errc::data, fmt::format("binlog rows event for table id {} without its TABLE_MAP",
                                         rows->table_id));
  TableMapState& ms = it->second;
  if (!ms.schema) return ok_status();  // not captured
  const TableSchema& t = *ms.schema;
  st_->caches.retain(batch, ms.schema);
  const size_t n = ms.map.types.size();
  std::string_view data = rows->rows;
  if (data.empty()) return ok_status();  // no row: nothing to plan (nor to check its bitmaps)
  const uint32_t event_pos = e.header.next_pos ? e.header.next_pos - e.header.size : 0;
  const bool upd = rows->kind == bl::RowsEvent::Kind::update;
  const auto in_table = [&](Error err) {
    return err.with_context(fmt::format("{}.{}: ", t.db, t.table));
  };
  Value meta;
  // Decoded ahead (by decode_ahead's rules always with this very table map): build the records.
  if (ahead && ahead->map_generation == ms.generation) {
    decode_ahead(batch);  // more for the helpers while this thread builds
    for (const RowsDecodePool::Row& row : ahead->out) {
      const bl::ZeroDates* zb = ahead->zero_dates ? &row.zero_before : nullptr;
      const bl::ZeroDates* za = ahead->zero_dates ? &row.zero_after : nullptr;
      auto made = row_record(batch, ms, rows->kind, {row.before, n},
                             upd ? std::span<const Field>(row.after, n) : std::span<const Field>(),
                             zb, za, ahead->before, ahead->after, event_pos, meta);
      if (!made.ok()) return std::move(made).error();
    }
    if (!ahead->status.ok()) return in_table(ahead->status.error());
    if (!ahead->out.empty()) bytes_per_row_ = double(data.size()) / double(ahead->out.size());
    return ok_status();
  }
  // An image holds the columns its bitmap names (decode_row leaves the others absent): the same
  // for every row of the event, planned once.
  if (auto s = bl::make_row_plan(ms.map, t.cols, rows->present, plan_before_); !s.ok())
    return in_table(s.error());
  if (upd)
    if (auto s = bl::make_row_plan(ms.map, t.cols, rows->present_after, plan_after_); !s.ok())
      return in_table(s.error());
  // Images of every column: the rows events that follow may be decoded on the pool's threads
  // meanwhile.
  if (pool_ && !ms.signal && plan_before_.absent.empty() && (!upd || plan_after_.absent.empty()))
    decode_ahead(batch);
  // Each image is decoded into fields named after the table's columns. An image of every column
  // (binlog_row_image FULL) is decoded straight into the batch's arena: that array becomes the
  // record's object as it is. An image of some columns is decoded into row_before_/row_after_,
  // and its object gathers the columns it has. A row that makes no record (a signal, or one
  // written before a restart) leaves its array to the next row.
  struct Image {
    const bl::RowPlan* plan;
    std::vector<Field>* scratch;
    Field* spare = nullptr;  // full image: the arena array the next row decodes into
  };
  auto name_fields = [&](Field* f) {
    for (size_t i = 0; i < n; ++i) f[i].name = ms.names[i];
  };
  auto target = [&](Image& im) -> Field* {
    if (!im.plan->absent.empty()) return im.scratch->data();
    if (im.spare == nullptr) {
      im.spare = batch.arena().allocate_array<Field>(n);
      name_fields(im.spare);
    }
    return im.spare;
  };
  Image before{&plan_before_, &row_before_}, after{&plan_after_, &row_after_};
  if (!plan_before_.absent.empty()) {
    row_before_.resize(n);
    name_fields(row_before_.data());
  }
  if (upd && !plan_after_.absent.empty()) {
    row_after_.resize(n);
    name_fields(row_after_.data());
  }
  // Zero dates: decoded as their text (zero_dates: reject) or as null (zero_dates: null).
  bl::ZeroDates zero_before, zero_after;
  bl::ZeroDates* const zb = zero_dates_null_ ? nullptr : &zero_before;
  bl::ZeroDates* const za = zero_dates_null_ ? nullptr : &zero_after;
  size_t count = 0;
  while (!data.empty()) {
    Field* const rb = target(before);
    auto used = bl::decode_row(plan_before_, ms.map, data, batch.arena(), rb, zb);
    if (!used.ok()) return in_table(used.error());
    data.remove_prefix(used.value());
    Field* ra = nullptr;
    if (upd) {
      ra = target(after);
      auto used2 = bl::decode_row(plan_after_, ms.map, data, batch.arena(), ra, za);
      if (!used2.ok()) return in_table(used2.error());
      data.remove_prefix(used2.value());
    }
    ++count;
    auto made = row_record(batch, ms, rows->kind, {rb, n},
                           ra ? std::span<const Field>(ra, n) : std::span<const Field>(), zb, za,
                           plan_before_, plan_after_, event_pos, meta);
    if (!made.ok()) return std::move(made).error();
    if (made.value()) {  // the record owns the arrays of full images now
      before.spare = nullptr;
      after.spare = nullptr;
    }
  }
  bytes_per_row_ = double(rows->rows.size()) / double(count);
  return ok_status();
}

// Looks at the events after the one being handled, in order: transactions' bounds pass; an event
// that could change a table map or a schema (a statement, a new table map, a rotation) stops the
// look until it was handled; a rows event of a captured table with images of every column becomes
// a job.
void MysqlDriver::decode_ahead(Batch& batch) {
  if (!pool_ || ahead_blocked_) return;
  // At most this much is out at a time: enough to keep a helper busy while this thread builds
  // one event's records, little enough that a batch's end wastes little.
  constexpr size_t kMaxJobs = 8;
  constexpr size_t kMaxBytes = 1u << 20;
  const bl::Checksum checksum = checksum_ ? bl::Checksum::strip : bl::Checksum::none;
  while (pool_->outstanding() < kMaxJobs && ahead_bytes_ < kMaxBytes) {
    // What is out already fills the batch (by the last event's bytes per row): no more.
    if (bytes_per_row_ > 0 &&
        batch.size() + size_t(double(ahead_bytes_) / bytes_per_row_) >= read_room_)
      return;
    if (ahead_scanned_ == ahead_.size()) {
      EventRing::Event ev;
      auto got = ring_->pop(&ev, Clock::time_point{});  // only what is in the ring now
      if (!got.ok() || !got.value()) return;            // an error comes out of the next pop again
      ahead_.push_back({ev, nullptr});
    }
    Ahead& a = ahead_[ahead_scanned_++];
    const std::string_view raw = a.ev.bytes;
    const auto block = [&] { ahead_blocked_ = true; };
    if (raw.size() < bl::kHeaderSize) return block();
    const uint8_t type = uint8_t(raw[4]);
    switch (type) {
      case bl::kXid:
      case bl::kMariaGtid:
      case bl::kMysqlGtid:
      case bl::kMysqlAnonymousGtid:
      case bl::kHeartbeat: continue;  // transactions' bounds: no table map or schema changes
      case bl::kFormatDescription:
      case bl::kRotate:
      case bl::kMysqlPartialUpdateRows: return block();
      case bl::kQuery: {
        auto ev = bl::parse_event(raw, checksum);
        if (!ev.ok()) return block();
        auto q = bl::parse_query(ev.value());
        if (!q.ok() || (q->sql != "BEGIN" && q->sql != "COMMIT" && q->sql != "ROLLBACK"))
          return block();  // a statement: DDL among them
        continue;
      }
      case bl::kTableMap: {  // the same map again changes nothing (on_table_map)
        auto ev = bl::parse_event(raw, checksum);
        if (!ev.ok()) return block();
        auto m = bl::parse_table_map(ev.value(), *fd_);
        if (!m.ok()) return block();
        auto it = maps_.find(m->table_id);
        if (it == maps_.end() || !it->second.map.same_shape(m.value()) ||
            it->second.map.database != m->database || it->second.map.table != m->table)
          return block();
        continue;
      }
      default: break;
    }
    if (type >= bl::kMariaWriteRowsCompressedV1 && type <= bl::kMariaDeleteRowsCompressed)
      return block();
    if (!bl::is_rows_event(type)) continue;  // annotations, GTID lists, ...: handled as nothing
    auto ev = bl::parse_event(raw, checksum);
    if (!ev.ok()) return block();
    auto rows = bl::parse_rows(ev.value(), *fd_);
    if (!rows.ok()) return block();
    if (rows->rows.empty()) continue;
    auto it = maps_.find(rows->table_id);
    if (it == maps_.end()) return block();
    const TableMapState& ms = it->second;
    if (!ms.schema || ms.signal) continue;  // not captured; signals stay on this thread, in order
    RowsDecodePool::Job& j = pool_->next();
    j.update = rows->kind == bl::RowsEvent::Kind::update;
    if (!bl::make_row_plan(ms.map, ms.schema->cols, rows->present, j.before).ok() ||
        !j.before.absent.empty())
      continue;  // decoded here, in turn (and any error reported then)
    if (j.update &&
        (!bl::make_row_plan(ms.map, ms.schema->cols, rows->present_after, j.after).ok() ||
         !j.after.absent.empty()))
      continue;
    j.schema = ms.schema;
    j.map = &ms.map;
    j.names = &ms.names;
    j.map_generation = ms.generation;
    j.zero_dates = !zero_dates_null_;
    j.rows = rows->rows;
    pool_->queue(j);
    a.job = &j;
    ahead_bytes_ += j.rows.size();
  }
}

void MysqlDriver::end_decode_ahead(Batch& batch) {
  if (!pool_) return;
  pool_->drain(batch.arena());
  for (Ahead& a : ahead_) a.job = nullptr;
  ahead_scanned_ = 0;
  ahead_blocked_ = false;
  ahead_bytes_ = 0;
}

Status MysqlDriver::handle_event(Batch& batch, std::string_view raw, bool crc_verified,
                                 RowsDecodePool::Job* job) {
  if (raw.size() < bl::kHeaderSize)
    return Error(Errc::data, "binlog event shorter than its header");
  const uint8_t type = uint8_t(raw[4]);
  if (type == bl::kFormatDescription) {
    auto fd = bl::parse_format_description(raw);
    if (!fd.ok()) return std::move(fd).error();
    fd_ = std::move(fd.value());
    checksum_ = fd_->crc32;
    return ok_status();
  }
  const bl::Checksum checksum = !checksum_                          ? bl::Checksum::none
                                : crc_verified || !verify_checksum_ ? bl::Checksum::strip
                                                                    : bl::Checksum::verify;
  auto ev = bl::parse_event(raw, checksum);
  if (!ev.ok()) return std::move(ev).error();
  const bl::Event& e = ev.value();
  const uint32_t start = e.header.next_pos >= e.header.size ? e.header.next_pos - e.header.size : 0;
  if (type != bl::kRotate && type != bl::kHeartbeat && !fd_)
    return Error(Errc::data,
                 fmt::format("binlog event type {} before the FORMAT_DESCRIPTION event", type));
  switch (type) {
    case bl::kRotate: {
      auto r = bl::parse_rotate(e);
      if (!r.ok()) return std::move(r).error();
      cur_file_ = r->file;
      const bool in_tx = st_->tx.in_transaction();
      if (!(e.header.flags & bl::kFlagArtificial) && !in_tx)
        st_->position.point.coord = BinlogCoord{r->file, r->position};
      if (!in_tx) maps_.clear();  // table ids are per server run; forget those of older files
      return ok_status();
    }
    case bl::kMariaGtid: {
      auto g = bl::parse_maria_gtid(e);
      if (!g.ok()) return std::move(g).error();
      begin_tx(start, e.header);
      tx_gtid_text_ = g->to_string();
      pending_gtid_ = st_->position.point.gtid;
      pending_gtid_->apply(MariaGtidPoint{g->domain, g->server_id, g->seq});
      return ok_status();
    }
    case bl::kMysqlGtid:
    case bl::kMysqlAnonymousGtid: {
      begin_tx(start, e.header);
      if (type == bl::kMysqlGtid) {
        auto g = bl::parse_mysql_gtid(e);
        if (g.ok()) tx_gtid_text_ = g->to_string();
      }
      return ok_status();
    }
    case bl::kQuery: {
      auto q = bl::parse_query(e);
      if (!q.ok()) return std::move(q).error();
      if (q->sql == "BEGIN") {
        if (!st_->tx.in_transaction())
          begin_tx(start, e.header);  // no GTID event before it (old servers)
        tx_saw_begin_ = true;
        return ok_status();
      }
      if (q->sql == "COMMIT" || q->sql == "ROLLBACK") {
        commit_tx(e.header.next_pos);
        return ok_status();
      }
      if (Status st = on_query(batch, q->database, q->sql, start, e.header.next_pos); !st.ok())
        return st;
      if (!st_->tx.in_transaction() || !tx_saw_begin_)
        commit_tx(e.header.next_pos);  // a statement of its own
      return ok_status();
    }
    case bl::kXid: commit_tx(e.header.next_pos); return ok_status();
    case bl::kTableMap: {
      auto m = bl::parse_table_map(e, *fd_);
      if (!m.ok()) return std::move(m).error();
      return on_table_map(std::move(m.value()), start);
    }
    case bl::kWriteRowsV1:
    case bl::kUpdateRowsV1:
    case bl::kDeleteRowsV1:
    case bl::kWriteRowsV2:
    case bl::kUpdateRowsV2:
    case bl::kDeleteRowsV2: return handle_rows(batch, e, job);
    case bl::kMysqlPartialUpdateRows:
      return Error(
          Errc::unsupported,
          "binlog has PARTIAL_UPDATE_ROWS events: set binlog_row_value_options='' on the server");
    default:
      if (type >= bl::kMariaWriteRowsCompressedV1 && type <= bl::kMariaDeleteRowsCompressed)
        return Error(Errc::unsupported,
                     "binlog has compressed row events: set log_bin_compress=OFF on the server");
      return ok_status();  // heartbeats, GTID lists, annotate rows, checkpoints, intvar, ...
  }
}

Result<StreamRead> MysqlDriver::read_stream(Batch& batch, const ReadRequest& req,
                                            std::stop_token stop, State&) {
  // An incremental snapshot's next chunk: its watermarks come back through this stream.
  if (Status st = start_chunk_if_due(batch, req.max_bytes); !st.ok()) return st.error();
  const auto started = Clock::now();
  // The batch's first record, and the last event that made records (or the read's start): a burst
  // ended once none came for a tenth of the linger. The binlog is the server's: events of other
  // tables and databases, busy, would otherwise hold every burst's last records for the whole
  // linger.
  Clock::time_point first{}, last = started;
  bool idle = false;
  read_room_ = req.max_records;
  // However the read ends: what was decoded ahead is this batch's memory, and no job is out.
  struct EndAhead {
    MysqlDriver* d;
    Batch& b;
    ~EndAhead() { d->end_decode_ahead(b); }
  } end_ahead{this, batch};
  while (batch.size() < req.max_records && batch.bytes() < req.max_bytes &&
         !stop.stop_requested()) {
    EventRing::Event ev;
    RowsDecodePool::Job* job = nullptr;
    if (!ahead_.empty()) {  // popped by decode_ahead already (its job with it, if any)
      ev = ahead_.front().ev;
      job = ahead_.front().job;
      ahead_.pop_front();
      if (ahead_scanned_ > 0 && --ahead_scanned_ == 0) ahead_blocked_ = false;
    } else {
      const auto deadline = batch.empty() ? started + req.poll : req.linger_deadline(first, last);
      // Past it, the read ends even while events of other tables keep coming: nothing of this
      // source's came within the linger (or the poll), as when the ring is empty.
      if (Clock::now() >= deadline) {
        idle = true;
        break;
      }
      auto got = ring_->pop(&ev, deadline);
      if (!got.ok()) {
        Error e = std::move(got).error();
        if (!e.retriable()) return e;
        if (e.code() == Errc::timeout) {
          spdlog::warn("pipeline {}: {}", ctx_.pipeline_id, e.message());
          return StreamRead::timed_out;
        }
        spdlog::warn("pipeline {}: binlog connection lost: {} (reconnecting)", ctx_.pipeline_id,
                     e.message());
        return StreamRead::lost;  // the skeleton restarts from what this and earlier batches cover
      }
      if (!got.value()) {
        idle = true;
        break;
      }
    }
    const size_t before = batch.size();
    Status st = handle_event(batch, ev.bytes, ev.crc_verified, job);
    ring_->release();
    if (!st.ok()) return st.error();
    if (batch.size() > before) {
      last = Clock::now();
      if (before == 0) first = last;
    }
  }
  return idle ? StreamRead::idle : StreamRead::more;
}

}  // namespace sluice::mysql
