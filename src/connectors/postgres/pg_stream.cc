// The postgres change stream: START_REPLICATION on the slot (pgoutput, protocol 1, or 2 with
// in-progress transactions held in a TransactionSpool until they commit), XLogData decoded into
// records, and standby status updates that report as flushed only what the runtime
// acknowledged (durable at the destination), never what was merely received. A status thread
// keeps the walsender from timing out while the reader is blocked on a slow destination.
#include <fmt/format.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <condition_variable>

#include "connectors/postgres/pg_wire.h"
#include "connectors/postgres/postgres_source_driver.h"

namespace sluice::pg {

namespace {

using Clock = std::chrono::steady_clock;

// How long after losing the stream a slot still active for a PID is taken for our own old
// walsender on its way out: the server's wal_sender_timeout (when our connection died silently,
// the old walsender only notices then) and this margin; at least kSlotReleaseGrace.
constexpr auto kSlotReleaseGrace = std::chrono::seconds(90);
constexpr auto kSlotReleaseMargin = std::chrono::seconds(30);

using wire::be64;
using wire::put_be64;

int64_t now_pg_micros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
             .count() -
         kPgEpochOffsetMicros;
}

}  // namespace

Status PostgresDriver::start_stream(State&) {
  std::lock_guard lock(repl_mu_);
  if (!repl_.ok()) {
    repl_.reset();
    auto repl = PgConn::connect(url_, true, net_);
    if (!repl.ok()) return std::move(repl).error();
    repl_ = std::move(repl.value());
    rcvlowat_ = 0;  // a new socket: its default low-water mark
  }
  if (!conn_.ok()) {
    auto c = PgConn::connect(url_, false, net_);
    if (!c.ok()) return std::move(c).error();
    conn_ = std::move(c.value());
  }
  // Binary values (PostgreSQL 14+) while every captured column's type has a binary decoder.
  streaming_binary_ = false;
  if (binary_values_ && stream_binary_ && PQserverVersion(repl_.get()) >= 140000) {
    auto all = captured_types_decodable();
    if (!all.ok()) return std::move(all).error();
    streaming_binary_ = stream_binary_ = all.value();
  }
  // In-progress transactions (PostgreSQL 14+): whatever the server streamed of them before is
  // streamed again from their start.
  stream_protocol2_ = stream_in_progress_ && PQserverVersion(repl_.get()) >= 140000;
  spool_.clear();
  replay_.reset();
  in_stream_block_ = false;
  const std::string sql = fmt::format(
      "START_REPLICATION SLOT {} LOGICAL {} (proto_version '{}', publication_names {}, messages "
      "'true'{}{})",  // watermarks: messages
      quote_identifier(slot_), st_->position.point.to_string(), stream_protocol2_ ? 2 : 1,
      repl_.quote_literal(quote_identifier(publication_)),
      streaming_binary_ ? ", binary 'true'" : "", stream_protocol2_ ? ", streaming 'on'" : "");
  PgResult r(PQexec(repl_.get(), sql.c_str()));
  if (!r || PQresultStatus(r.get()) != PGRES_COPY_BOTH) {
    Error e = classify_error(r ? PQresultErrorMessage(r.get()) : repl_.last_error(),
                             fmt::format("cannot stream from slot {}", slot_));
    repl_.reset();
    // Right after our own stream broke, our old walsender may still hold the slot (until it
    // notices, at worst wal_sender_timeout later): retry with the skeleton's backoff for a while
    // before calling the slot taken by someone else.
    const auto grace =
        std::max<Clock::duration>(kSlotReleaseGrace, wal_sender_timeout_ + kSlotReleaseMargin);
    if (e.code() == Errc::conflict && lost_at_ && Clock::now() - *lost_at_ < grace)
      return Error(Errc::conflict, e.message(), /*retriable=*/true);
    return e;
  }
  lost_at_.reset();
  streaming_ = true;
  last_packet_ = Clock::now();
  reply_requested_at_.reset();
  spdlog::info("pipeline {}: streaming changes from slot {} at {}{}", ctx_.pipeline_id, slot_,
               st_->position.point.to_string(), streaming_binary_ ? " (binary values)" : "");
  return ok_status();
}

// Whether every column of the captured tables has a type binary_to_value decodes; the first that
// does not is named in the log (the stream then carries text).
Result<bool> PostgresDriver::captured_types_decodable() {
  std::string oids;
  for (const TableRef& t : tables_) oids += (oids.empty() ? "" : ",") + std::to_string(t.oid);
  auto r = conn_.exec_params(
      "SELECT a.attrelid::regclass::text, a.attname, a.atttypid, format_type(a.atttypid, "
      "a.atttypmod) FROM pg_attribute a WHERE a.attrelid = ANY($1::oid[]) AND a.attnum > 0 AND "
      "NOT a.attisdropped ORDER BY a.attrelid, a.attnum",
      {"{" + oids + "}"});
  if (!r.ok()) return r.error().with_context("cannot read the captured columns' types: ");
  PGresult* res = r.value().get();
  std::vector<uint32_t> types;
  for (int i = 0; i < PQntuples(res); ++i)
    types.push_back(uint32_t(std::stoul(PQgetvalue(res, i, 2))));
  SLUICE_TRY(resolve_types(types));
  for (int i = 0; i < PQntuples(res); ++i) {
    if (binary_decodable(types_, types[size_t(i)])) continue;
    spdlog::info(
        "pipeline {}: the stream carries values as text: column {} of {} is of type {}, which "
        "sluice reads only as text",
        ctx_.pipeline_id, quote_identifier(PQgetvalue(res, i, 1)), PQgetvalue(res, i, 0),
        PQgetvalue(res, i, 3));
    return false;
  }
  return true;
}

void PostgresDriver::send_status_locked(bool force, bool reply) {
  if (!streaming_ || !repl_.ok()) return;
  const uint64_t flush = acked_flush_.load();
  const auto now = Clock::now();
  // Well inside wal_sender_timeout (60 s by default), whatever the heartbeat interval.
  const auto interval = std::min<std::chrono::milliseconds>(heartbeat_, std::chrono::seconds(10));
  if (!force && flush == sent_flush_ && now - last_status_ < interval) return;
  char msg[34];
  msg[0] = 'r';
  put_be64(msg + 1, std::max(received_.value, flush));  // received
  put_be64(msg + 9, flush);                             // flushed = durable at the destination
  put_be64(msg + 17, flush);                            // applied
  put_be64(msg + 25, uint64_t(now_pg_micros()));
  msg[33] = reply ? 1 : 0;  // reply requested: the walsender answers with a keepalive at once
  if (PQputCopyData(repl_.get(), msg, sizeof(msg)) == 1 && PQflush(repl_.get()) == 0) {
    sent_flush_ = flush;
    last_status_ = now;
  }
}

// Keeps the walsender from timing out while the reader is blocked on a slow destination, and
// reports acknowledgements promptly.
void PostgresDriver::status_loop(std::stop_token stop) {
  std::mutex mu;
  std::condition_variable_any cv;
  while (!stop.stop_requested()) {
    {
      std::unique_lock wait_lock(mu);
      if (cv.wait_for(wait_lock, stop, std::chrono::milliseconds(200), [] { return false; })) break;
    }
    if (stop.stop_requested()) break;
    std::unique_lock lock(repl_mu_, std::try_to_lock);
    if (lock.owns_lock()) send_status_locked(false);
  }
}

void PostgresDriver::ack(const Position& p) {
  uint64_t cur = acked_flush_.load();
  while (p.point.value > cur && !acked_flush_.compare_exchange_weak(cur, p.point.value)) {
  }
}

Status PostgresDriver::handle_xlog(Batch& batch, const char* buf, int len) {
  if (len < 1) return ok_status();
  if (buf[0] == 'k') {
    if (len < 18) return Error(Errc::data, "replication keepalive message is truncated");
    const Lsn wal_end{be64(buf + 1)};
    if (wal_end > received_) received_ = wal_end;
    if (buf[17]) send_status_locked(true);
    // Idle heartbeat: between transactions everything before wal_end has been received, so the
    // position may advance there (once durable, the slot stops pinning WAL for us).
    if (st_->tx.settled() && wal_end > st_->position.point &&
        Clock::now() - last_heartbeat_ >= heartbeat_) {
      st_->position.point = wal_end;
      last_heartbeat_ = Clock::now();
    }
    return ok_status();
  }
  if (buf[0] != 'w') return ok_status();
  if (len < 25) return Error(Errc::data, "replication XLogData message is truncated");
  const Lsn lsn{be64(buf + 1)};
  if (lsn > received_) received_ = lsn;
  const std::string_view payload(buf + 25, size_t(len - 25));
  if (stream_protocol2_ && !payload.empty()) {
    const char type = payload.front();
    if (type == 'S' || type == 'E' || type == 'c' || type == 'A')
      return handle_stream_control(payload);
    if (in_stream_block_ && carries_stream_xid(type)) {
      // A change of the transaction in progress: held, without its xid, until its commit.
      if (payload.size() < 5)
        return Error(Errc::data, "pgoutput: truncated streamed message (no transaction id)");
      spooled_ = true;
      return spool_.add(block_xid_, wire::be32(payload.data() + 1), lsn, type, payload.substr(5));
    }
  }
  return handle_message(batch, payload, lsn);
}

void PostgresDriver::begin_transaction(Lsn final_lsn, int64_t commit_time, uint32_t xid) {
  st_->begin_transaction(final_lsn);  // the commit LSN names the transaction in positions
  tx_final_ = final_lsn;
  tx_commit_time_ = commit_time;
  tx_xid_ = xid;
}

void PostgresDriver::commit_transaction(const CommitMsg& c) {
  st_->tx.end();
  if (c.end_lsn > st_->position.point) st_->position.point = c.end_lsn;
  st_->report_commit_time(c.commit_time);
  last_heartbeat_ = Clock::now();
}

Status PostgresDriver::handle_stream_control(std::string_view payload) {
  Message m;
  SLUICE_TRY(decode_pgoutput(payload, &m));
  if (auto* s = std::get_if<StreamStartMsg>(&m)) {
    if (in_stream_block_ || replay_)
      return Error(Errc::data, "pgoutput: a Stream Start inside a streamed block");
    SLUICE_TRY(spool_.start(s->xid, s->first_segment));
    in_stream_block_ = true;
    block_xid_ = s->xid;
    return ok_status();
  }
  if (std::holds_alternative<StreamStopMsg>(m)) {
    in_stream_block_ = false;
    return ok_status();
  }
  if (auto* a = std::get_if<StreamAbortMsg>(&m)) {
    if (in_stream_block_ || replay_)
      return Error(Errc::data, "pgoutput: a Stream Abort inside a streamed block");
    spool_.abort(a->xid, a->subxid);
    return ok_status();
  }
  const auto& c = std::get<StreamCommitMsg>(m);
  if (in_stream_block_ || replay_)
    return Error(Errc::data, "pgoutput: a Stream Commit inside a streamed block");
  auto held = spool_.take(c.xid);
  if (!held.ok()) return std::move(held).error();
  replay_ = std::move(held.value());
  // Once, and then at every further GiB.
  if (const uint64_t spilled = spool_.spilled_bytes(); spilled > spilled_logged_) {
    spdlog::info(
        "pipeline {}: in-progress transactions took more than stream.in_progress_memory: {} MiB "
        "written to stream.spill_directory in this run so far",
        ctx_.pipeline_id, (spilled + (1 << 20) - 1) >> 20);
    spilled_logged_ = (spilled | ((uint64_t(1) << 30) - 1)) + 1;
  }
  begin_transaction(c.commit_lsn, c.commit_time, c.xid);
  replay_commit_ = CommitMsg{c.flags, c.commit_lsn, c.end_lsn, c.commit_time};
  return ok_status();
}

Status PostgresDriver::replay_next(Batch& batch) {
  HeldTransaction::Message m;
  auto more = replay_->next(&m);
  if (!more.ok()) return std::move(more).error();
  if (more.value()) return handle_message(batch, m.payload, m.lsn);
  replay_.reset();
  commit_transaction(replay_commit_);
  return ok_status();
}

Status PostgresDriver::handle_message(Batch& batch, std::string_view payload, Lsn lsn) {
  SLUICE_TRY(decode_pgoutput(payload, &msg_));
  if (auto* b = std::get_if<BeginMsg>(&msg_)) {
    begin_transaction(b->final_lsn, b->commit_time, b->xid);
    return ok_status();
  }
  if (auto* c = std::get_if<CommitMsg>(&msg_)) {
    commit_transaction(*c);
    return ok_status();
  }
  if (auto* r = std::get_if<RelationMsg>(&msg_)) {
    if (!delivers(r->relation->oid)) {
      // Kept only so that its changes are known to be skipped: no catalogue read, no shape.
      TableState& t = table_states_[r->relation->oid];
      t.rel = r->relation;
      t.skipped = true;
      return ok_status();
    }
    if (streaming_binary_) {
      // A table whose columns sluice cannot all read in binary (added to a FOR ALL TABLES
      // publication, or altered): the stream starts again in text from what was read, before this
      // description is taken (the new stream sends it again).
      std::vector<uint32_t> oids;
      for (const auto& c : r->relation->columns) oids.push_back(c.type_oid);
      SLUICE_TRY(ensure_catalog_connection());
      SLUICE_TRY(resolve_types(oids));
      for (const auto& c : r->relation->columns) {
        if (binary_decodable(types_, c.type_oid)) continue;
        spdlog::info(
            "pipeline {}: column {} of {}.{} is of type oid {}, which sluice reads only as text: the "
            "stream starts again with text values",
            ctx_.pipeline_id, quote_identifier(c.name), quote_identifier(r->relation->schema),
            quote_identifier(r->relation->name), c.type_oid);
        stream_binary_ = false;
        restart_stream_ = true;
        return ok_status();
      }
    }
    // Without the DDL capture, the previous description of the table is all there is to tell a
    // schema change by (with it, sluice.ddl_log rows carry the changes, in order).
    std::shared_ptr<const Relation> previous;
    if (auto it = table_states_.find(r->relation->oid); it != table_states_.end())
      previous = it->second.rel;
    auto t = table_from_relation(r->relation);
    if (!t.ok()) return std::move(t).error();
    if (ddl_capture_) return ok_status();
    // The first Relation of a table in this run: the baseline is the shape stored by an earlier
    // run (a DDL made while sluice was stopped is still a change).
    // Shapes are ordered by the commit LSN of the transaction that first showed them (a Relation
    // message's own XLogData start is 0): transactions arrive in commit order, and a replayed one
    // has the same commit LSN, so its baseline is the shape before it again.
    const Lsn at = st_->tx.in_transaction() && tx_final_.value != 0 ? tx_final_
                   : lsn.value != 0                                 ? lsn
                                                                    : received_;
    std::optional<Relation> stored;
    if (!previous) {
      SLUICE_TRY(load_shapes());
      stored = shape_before(*r->relation, at);
    }
    if (st_->tx.in_transaction())
      SLUICE_TRY(emit_relation_changes(batch,
                                       previous ? previous.get()
                                       : stored ? &*stored
                                                : nullptr,
                                       *r->relation, lsn));
    return record_shape(*r->relation, at);
  }
  // Incremental snapshot watermarks are sluice's own; other messages only when asked for (so
  // transactions count their changes as before).
  if (auto* m = std::get_if<LogicalMsg>(&msg_)) {
    auto ours = incremental_message(batch, *m);
    if (!ours.ok()) return std::move(ours).error();
    if (ours.value() || !logical_messages_) return ok_status();
  }
  const bool change =
      std::holds_alternative<InsertMsg>(msg_) || std::holds_alternative<UpdateMsg>(msg_) ||
      std::holds_alternative<DeleteMsg>(msg_) || std::holds_alternative<TruncateMsg>(msg_) ||
      (std::holds_alternative<LogicalMsg>(msg_) && std::get<LogicalMsg>(msg_).transactional);
  if (!change) {
    // A non-transactional message: outside any transaction.
    if (auto* m = std::get_if<LogicalMsg>(&msg_); m && logical_messages_)
      emit_logical_message(batch, *m, lsn);
    return ok_status();
  }
  if (!st_->tx.next_change()) return ok_status();  // written before the restart
  auto lookup = [&](uint32_t oid) -> TableState* {
    auto it = table_states_.find(oid);
    return it == table_states_.end() || !it->second.rel ? nullptr : &it->second;
  };
  auto relation_of = [&]() -> uint32_t {
    if (auto* m = std::get_if<InsertMsg>(&msg_)) return m->relation_oid;
    if (auto* m = std::get_if<UpdateMsg>(&msg_)) return m->relation_oid;
    if (auto* m = std::get_if<DeleteMsg>(&msg_)) return m->relation_oid;
    return 0;
  };
  if (ddl_log_oid_ != 0) {
    // The DDL capture's own tables: a log insert is schema records, everything else of them
    // (the state table's updates, a cleaned-up log) is no record at all.
    const uint32_t rel = relation_of();
    if (rel == ddl_log_oid_ || rel == ddl_state_oid_) {
      auto* ins = std::get_if<InsertMsg>(&msg_);
      if (!ins || rel != ddl_log_oid_) return ok_status();
      TableState* t = lookup(rel);
      if (!t)
        return Error(Errc::data,
                     fmt::format("change for relation {} before its Relation message", rel));
      return emit_ddl_log(batch, *t, ins->new_tuple, lsn);
    }
  }
  if (auto* ins = std::get_if<InsertMsg>(&msg_)) {
    TableState* t = lookup(ins->relation_oid);
    if (!t)
      return Error(Errc::data, fmt::format("change for relation {} before its Relation message",
                                           ins->relation_oid));
    if (t->skipped) return ok_status();
    return emit_change(batch, *t, Operation::create, nullptr, 0, &ins->new_tuple, lsn);
  }
  if (auto* up = std::get_if<UpdateMsg>(&msg_)) {
    TableState* t = lookup(up->relation_oid);
    if (!t)
      return Error(Errc::data, fmt::format("change for relation {} before its Relation message",
                                           up->relation_oid));
    if (t->skipped) return ok_status();
    return emit_change(batch, *t, Operation::update, up->old_kind ? &up->old_tuple : nullptr,
                       up->old_kind, &up->new_tuple, lsn);
  }
  if (auto* del = std::get_if<DeleteMsg>(&msg_)) {
    TableState* t = lookup(del->relation_oid);
    if (!t)
      return Error(Errc::data, fmt::format("change for relation {} before its Relation message",
                                           del->relation_oid));
    if (t->skipped) return ok_status();
    return emit_change(batch, *t, Operation::remove, &del->old_tuple, del->old_kind, nullptr, lsn);
  }
  if (auto* tr = std::get_if<TruncateMsg>(&msg_)) {
    for (uint32_t oid : tr->relation_oids) {
      TableState* t = lookup(oid);
      if (t && !t->skipped && (ddl_log_oid_ == 0 || (oid != ddl_log_oid_ && oid != ddl_state_oid_)))
        emit_truncate(batch, *t, lsn);
    }
    return ok_status();
  }
  if (auto* m = std::get_if<LogicalMsg>(&msg_); m && logical_messages_)
    emit_logical_message(batch, *m, lsn);
  return ok_status();
}

// The walsender sends keepalives on its own only when it has not heard from us for half its
// wal_sender_timeout, and our status updates keep it from ever getting there: silence is normal
// on an idle source. So after half the timeout of silence ask for a keepalive (reply requested);
// a request that stays unanswered for the other half means a dead connection.
void PostgresDriver::request_keepalive_if_silent() {
  if (reply_requested_at_ || Clock::now() - last_packet_ < stream_timeout_ / 2) return;
  send_status_locked(true, /*reply=*/true);
  reply_requested_at_ = Clock::now();
}

bool PostgresDriver::stream_silent_too_long() const {
  const auto now = Clock::now();
  return reply_requested_at_ && now - *reply_requested_at_ >= stream_timeout_ / 2 &&
         now - last_packet_ >= stream_timeout_;
}

Result<StreamRead> PostgresDriver::read_stream(Batch& batch, const ReadRequest& req,
                                               std::stop_token stop, State&) {
  if (Status st = start_chunk_if_due(batch, req.max_bytes); !st.ok()) return st.error();
  std::unique_lock lock(repl_mu_);
  const auto started = Clock::now();
  // The batch's first record, and the last message of a change (or the read's start): a burst
  // ended once none came for a tenth of the linger. Keepalives do not count: the walsender sends
  // one each time it waits for WAL while our reported position trails what it decoded, so WAL of
  // other databases, busy, would hold every burst's last records for the whole linger.
  Clock::time_point first{}, last_change = started;
  bool idle = false;
  // After a message, read or replayed: notes the batch's first record; true when the stream is to
  // start again in text from what was read (handle_message met a column only text can carry).
  auto after_message = [&](size_t before) {
    if (before == 0 && batch.size() > 0) first = Clock::now();
    if (!restart_stream_) return false;
    restart_stream_ = false;
    streaming_ = false;
    repl_.reset();
    return true;
  };
  spooled_ = false;
  while (batch.size() < req.max_records && batch.bytes() < req.max_bytes &&
         !stop.stop_requested()) {
    send_status_locked(false);
    if (replay_) {  // a streamed transaction that committed: its messages, then its commit
      const size_t before = batch.size();
      if (Status st = replay_next(batch); !st.ok()) return st.error();
      last_change = Clock::now();
      if (after_message(before)) return StreamRead::lost;
      continue;
    }
    char* buf = nullptr;
    const int n = PQgetCopyData(repl_.get(), &buf, 1);
    if (n > 0) {
      last_packet_ = Clock::now();
      if (buf[0] != 'k') last_change = last_packet_;
      reply_requested_at_.reset();
      const size_t before = batch.size();
      Status st = handle_xlog(batch, buf, n);
      PQfreemem(buf);
      if (!st.ok()) return st.error();
      if (after_message(before)) return StreamRead::lost;
      continue;
    }
    if (n == 0) {
      // A burst that ended returns at once (linger_deadline); bytes below the low-water mark
      // are read when the poll below times out, before the deadline is checked again.
      const auto deadline =
          batch.empty() ? started + req.poll : req.linger_deadline(first, last_change);
      const auto now = Clock::now();
      if (now >= deadline) {
        idle = !spooled_;  // a transaction in progress arriving is no idle source
        break;
      }
      const int fd = PQsocket(repl_.get());
      // Poll wakes when 64 KiB are in (or at the timeout, at most the batch's linger) while a
      // batch fills; at once for the first change of a batch.
      const int lowat = batch.empty() ? 1 : 64 << 10;
      if (lowat != rcvlowat_ &&
          ::setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof lowat) == 0)
        rcvlowat_ = lowat;
      pollfd pfd{fd, POLLIN, 0};
      const int wait_ms = int(std::min<int64_t>(
          100, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1));
      request_keepalive_if_silent();
      const int ready = ::poll(&pfd, 1, wait_ms);
      // Only after a poll that found nothing: a reply already in the socket is not silence (the
      // reader may have been away, blocked on the destination, for longer than the timeout),
      // nor are bytes below the low-water mark.
      int queued = 0;
      if (ready == 0 && stream_silent_too_long() &&
          !(::ioctl(fd, FIONREAD, &queued) == 0 && queued > 0)) {
        const auto silent =
            std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - last_packet_);
        spdlog::warn(
            "pipeline {}: the replication connection to {} was silent for {} ms, beyond "
            "stream.timeout ({} ms), and did not answer a keepalive request: taking it for dead "
            "and reconnecting",
            ctx_.pipeline_id, describe_target(url_), silent.count(), stream_timeout_.count());
        streaming_ = false;
        repl_.reset();
        return StreamRead::timed_out;
      }
      if (PQconsumeInput(repl_.get()) == 0) {
        streaming_ = false;
        spdlog::warn("pipeline {}: replication connection lost: {} (reconnecting)",
                     ctx_.pipeline_id, repl_.last_error());
        repl_.reset();
        return StreamRead::lost;
      }
      continue;
    }
    // -1: the server ended the stream; -2: error. Either way reconnect from what was read.
    std::string why = repl_.last_error();
    if (n == -1) {
      PgResult r(PQgetResult(repl_.get()));
      if (r && PQresultStatus(r.get()) == PGRES_FATAL_ERROR) why = PQresultErrorMessage(r.get());
    }
    Error e = classify_error(why, "replication stream");
    streaming_ = false;
    repl_.reset();
    if (!e.retriable() && e.code() != Errc::internal) return e;
    spdlog::warn("pipeline {}: {} (reconnecting)", ctx_.pipeline_id, e.message());
    return StreamRead::lost;
  }
  return idle ? StreamRead::idle : StreamRead::more;
}

void PostgresDriver::stop_stream(State&) noexcept {
  std::lock_guard lock(repl_mu_);
  streaming_ = false;
  repl_.reset();
  lost_at_ = Clock::now();
}

}  // namespace sluice::pg
