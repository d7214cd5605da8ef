// The postgres log-source driver (private to the connector). The skeleton (connectors/common/
// log_source.h) runs the phases, the position, resume inside a transaction and reconnects; this
// driver does what is PostgreSQL's own, one concern per file:
//
//   postgres_source.cc   settings, factory, connect and checks, slot/publication planning, cleanup
//   pg_catalog.cc        tables, publication, types, relations and their record keys
//   pg_snapshot.cc       the snapshot: COPY of heap-page chunks sized to the batch, in the exported
//                        snapshot
//   pg_stream.cc         the replication stream: START_REPLICATION, XLogData → pgoutput, status
//   pg_records.cc        pgoutput tuples → records (values, key, metadata)
//   pg_ddl.cc            schema changes: the DDL capture (event trigger, log and state tables in
//                        schema `sluice`), Relation-message diffs, the widening table
//   pg_incremental.cc    incremental snapshots: watermarks, key-ordered chunks, signals
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "connectors/builtin.h"
#include "connectors/common/key_columns.h"
#include "connectors/common/log_source.h"
#include "connectors/postgres/pg_connection.h"
#include "connectors/postgres/pg_slot_health.h"
#include "connectors/postgres/pg_spool.h"
#include "connectors/postgres/pg_types.h"
#include "connectors/postgres/pgoutput.h"
#include "sluice/schema_change.h"

namespace sluice::pg {

// Snapshot cursor: the first heap page not read yet. Every batch ends at a chunk's end, so the
// batch's position names exactly the rows it holds: those on the pages before it. (Before batches
// and chunks were aligned, the same number named the first page of the 32 MiB chunk being read —
// rows of it could already be durable; such a stored position still resumes correctly, re-reading
// at most that chunk.)
struct PageCursor {
  uint64_t page = 0;
  bool operator==(const PageCursor&) const = default;
};
inline void write_field(PositionWriter& w, const PageCursor& c) { w.number(c.page); }
inline bool read_field(PositionReader& r, PageCursor* c) { return r.number(&c->page); }

// "snapshot <start-lsn> <table-index> <page>", "cdc <flush-lsn> [<tx-commit-lsn> <n>] [cap
// <oid>,…]", "done <lsn>": a transaction is named by its commit LSN (pgoutput's Begin carries it);
// `cap` lists the oids of the tables the stream delivers (plan_incremental()).
struct PositionTraits {
  using Point = Lsn;
  using TxPoint = Lsn;
  using Cursor = PageCursor;
};
using SourcePosition = LogPosition<PositionTraits>;

// Sizes snapshot chunks (heap-page ranges) to the room left in a batch, from the densest rows and
// bytes per page seen so far in the table: a batch ends only at a chunk's end (so that its position
// is exact), and the chunk should fill it without running over. A chunk is received whole before it
// is parsed, so its bytes are what the snapshot holds in memory: until a page's rows were read, the
// bytes a page holds are unknown (out-of-line and compressed values are many times the heap's 8
// KiB) and a table's first chunk is one page. A chunk of sparse pages (far fewer rows than
// expected: deleted rows, bloat) doubles the next one, so an empty stretch of the heap costs few
// COPYs; a dense one resets it. A grown chunk stays within kGrownRooms rooms' bytes at the densest
// bytes per page known (read, or the table's size on disk over its pages).
class ChunkSizer {
 public:
  static constexpr uint64_t kMaxPages = 4096;  // 32 MiB of heap: the largest chunk
  static constexpr uint64_t kGrownRooms = 2;
  // A table starts: the catalogue's rows per page, when it has them (0: none), and the table's
  // bytes on disk (heap and TOAST) per heap page (0: none).
  void start_table(double rows_per_page, double disk_bytes_per_page = 0) {
    rows_per_page_ = rows_per_page > 0 ? rows_per_page : 0;
    disk_bytes_per_page_ = disk_bytes_per_page > 0 ? disk_bytes_per_page : 0;
    bytes_per_page_ = 0;
    boost_ = 1;
    measured_ = false;
  }
  // Pages for a chunk that may add `room_rows` records and `room_bytes` bytes; 0 when not even one
  // page is expected to fit (end the batch first), at least 1 for an empty batch.
  uint64_t pages(uint64_t room_rows, uint64_t room_bytes, bool batch_empty) const;
  // A chunk of `pages` pages gave `rows` records of `bytes` bytes.
  void chunk_read(uint64_t pages, uint64_t rows, uint64_t bytes);
  // The next chunk's size is a guess that may hold many times the room it is sized for: grown
  // after sparse pages, or from the catalogue's estimate before any chunk of the table was read.
  bool guessing() const { return boost_ > 1 || !measured_; }

 private:
  double rows_per_page_ = 0, bytes_per_page_ = 0, disk_bytes_per_page_ = 0;
  uint64_t boost_ = 1;
  bool measured_ = false;
};

// An MVCC snapshot as pg_current_snapshot() prints it ("xmin:xmax:xip,…", 64-bit xids with their
// epoch): the first snapshot's, kept in the position (SourcePosition::mvcc) so that a snapshot
// resumed after a crash, which reads under a newer MVCC snapshot, can tell the row versions the
// first one saw (it emits them) from those committed after it (the stream, which starts at the
// slot's consistent point, delivers those: the resumed COPY skips them).
struct XidSnapshot {
  uint64_t xmin = 0, xmax = 0;
  std::vector<uint64_t> xip;  // in progress at the snapshot (ascending)
  static std::optional<XidSnapshot> parse(std::string_view text);
  // Whether a committed transaction `xid` is seen by this snapshot.
  bool sees(uint64_t xid) const;
  // The same test in SQL, of a bigint expression: "(x < xmin OR (x < xmax AND x <> ALL(…)))".
  std::string sees_sql(std::string_view x) const;
};

struct TableRef {
  std::string schema, name;
  uint32_t oid = 0;
  int64_t estimate = 0;
};

// A relation as sluice uses it: pgoutput's (or the catalog's) description plus the record key.
struct TableState {
  std::shared_ptr<const Relation> rel;
  std::vector<uint32_t> key_columns;  // indexes into rel->columns
  bool warned_no_key = false;
  // A table of the publication the pipeline does not list (a publication of the user's with more
  // tables, or a table taken out of `tables`): its changes are skipped, uncounted as records.
  bool skipped = false;
};

std::optional<std::pair<std::string, std::string>> parse_table_name(std::string_view s);

// The settings the source runs on, bound by the table in postgres_source.cc (which writes the
// defaults) and checked by its finalize().
struct PostgresSourceOptions {
  std::string url;  // finalize() folds user/password/password_file into it
  std::string user, password, password_file;
  std::optional<std::string> tls_mode;  // finalize() folds the tls.* settings into url too
  std::string tls_ca, tls_cert, tls_key, tls_key_password;
  std::vector<std::string> tables;
  std::string slot;         // empty: sluice_<pipeline id>
  std::string publication;  // empty: sluice_<pipeline id>
  std::string snapshot_mode;
  std::chrono::milliseconds heartbeat_interval{};
  // Silence of the replication stream after which it is taken for dead; empty: the server's
  // wal_sender_timeout (read at connect; 60 s when it is 0).
  std::optional<std::chrono::milliseconds> stream_timeout;
  std::chrono::milliseconds tcp_user_timeout{};
  std::chrono::milliseconds query_timeout{};  // catalogue queries and snapshot COPY; 0: none
  std::chrono::milliseconds reconnect_initial_backoff{}, reconnect_max_backoff{};
  bool heartbeat_emit_message = true;
  uint64_t slot_lag_warning = 0;  // bytes; 0: never warn
  bool logical_messages = false;
  bool binary = true;
  bool stream_in_progress = true;
  uint64_t stream_in_progress_memory = 8 << 20;
  std::string stream_spill_directory;  // empty: the system's temporary directory
  bool ddl_capture = false;
  std::string signal_table;  // empty: no signal table
  int64_t snapshot_chunk_size = 1024;
  int64_t snapshot_parallel = 1;
  std::map<std::string, std::string> message_key_columns;  // "schema.table" -> "a, b"
  // Derived by finalize: (schema, table) -> key column names, for tables without a primary key.
  KeyColumnsByTable key_columns_by_table;
};

// One column as the DDL capture records it (sluice.ddl_columns()).
struct DdlColumn {
  int64_t attnum = 0;
  std::string name, type;  // type: format_type(atttypid, atttypmod)
  uint32_t type_oid = 0;
  int32_t type_mod = -1;
  bool has_default = false, has_missing = false;
  std::optional<std::string> missing;  // attmissingval's text (what old rows read)
};

// Whether every value of type (from_oid, from_mod) survives a change to (to_oid, to_mod): the
// widenings sluice forwards as alter_column_type (int2→int4→int8, float4→float8,
// varchar(n)→varchar(m≥n)/text, numeric(p,s)→numeric(p'≥p,s)/numeric, …).
bool is_widening(uint32_t from_oid, int32_t from_mod, uint32_t to_oid, int32_t to_mod);

// The SQL that installs the DDL capture (schema sluice: ddl_log, ddl_state, ddl_columns(),
// the event triggers), idempotent; docs/schema-changes.md prints it for manual installs.
std::string_view ddl_capture_install_sql();

class PostgresDriver final : public LogSourceDriver<PositionTraits> {
 public:
  explicit PostgresDriver(PostgresSourceOptions o);
  ~PostgresDriver() override { close(); }

  std::string_view name() const override { return "postgres"; }
  bool snapshot_only() const override { return mode_ == "initial_only"; }
  Status connect(State& s) override;
  Status plan_start(State& s) override;
  Result<SnapshotRead> read_snapshot(Batch& batch, const ReadRequest& req, std::stop_token stop,
                                     State& s) override;
  Status resume_snapshot(State& s) override;
  Status finish_snapshot(State& s) override;
  Status start_stream(State& s) override;
  Result<StreamRead> read_stream(Batch& batch, const ReadRequest& req, std::stop_token stop,
                                 State& s) override;
  void stop_stream(State& s) noexcept override;
  void opened(State& s) override;
  void ack(const Position& p) override;
  void close() noexcept override;
  Status cleanup(const ConnectorContext& ctx) override;
  Result<std::vector<DoctorCheck>> doctor(
      const ConnectorContext& ctx,
      const std::optional<std::string>& checkpoint) override;  // pg_doctor.cc
  Status request_snapshot(const ConnectorContext& ctx,
                          const std::vector<std::string>& tables) override;
  std::vector<SourceTable> captured_tables() const override {
    if (!doctor_tables_.empty()) return doctor_tables_;  // with their columns (doctor)
    std::vector<SourceTable> out;
    for (const TableRef& t : tables_) out.push_back({t.schema, t.name});
    return out;
  }
  std::string server_state() const override;
  BackoffPolicy reconnect_backoff() const override { return reconnect_; }
  std::vector<SourceTable> doctor_tables_;  // doctor(): the tables with their columns and key

 private:
  void name_slot_and_publication(const ConnectorContext& ctx);
  Status connect_and_check();
  // pg_catalog.cc
  Status resolve_tables();
  Status ensure_publication();
  Status resolve_types(const std::vector<uint32_t>& oids);
  Result<TableState*> table_from_catalog(const TableRef& t);
  Result<TableState*> table_from_relation(std::shared_ptr<const Relation> rel);
  // pg_ddl.cc
  Status install_ddl_capture();
  Status track_ddl_tables();
  Status emit_relation_changes(Batch& batch, const Relation* before, const Relation& after,
                               Lsn lsn);
  Status emit_ddl_log(Batch& batch, TableState& log, const Tuple& tuple, Lsn lsn);
  Status uninstall_ddl_capture();
  void emit_schema(Batch& batch, std::string_view schema, std::string_view table,
                   const SchemaChange& c, Lsn lsn);
  Result<std::vector<std::string>> primary_key_columns(uint32_t rel);
  // Without ddl.capture: the tables' column shapes across restarts (pg_ddl.cc).
  Status load_shapes();
  std::optional<Relation> shape_before(const Relation& now, Lsn lsn) const;
  Status record_shape(const Relation& r, Lsn lsn);
  // In memory: whether r's shape is new at lsn (then save_history() persists it).
  bool add_shape(const Relation& r, Lsn lsn);
  Status save_history();  // the shapes and the slot's snapshot, beside the checkpoint
  // The baseline at stream start when none is stored: `at` the fresh slot's point, read in its
  // exported snapshot (every table); nullopt: the tables without a stored shape, as of now.
  Status record_catalog_shapes(std::optional<Lsn> at);
  // record_catalog_shapes(point) in a transaction of the slot's exported snapshot.
  Status shapes_in_exported_snapshot(const std::string& exported, Lsn point);
  // pg_snapshot.cc
  Status begin_snapshot(const std::string& exported);
  // BEGIN … REPEATABLE READ, in the exported snapshot when one is named.
  Status open_snapshot_transaction(const std::string& exported);
  Result<SnapshotRead> read_snapshot_chunks(Batch& batch, const ReadRequest& req,
                                            std::stop_token stop);
  // The snapshot's chunks (pg_snapshot.cc): the table's description and size, a COPY sent for a
  // page range, the whole chunk received into chunk_lines_.
  Status load_copy_table();
  // A table read under a newer snapshot than the first: which rows may hold out-of-line values,
  // and for the table resumed inside, the pages below the cursor to read (or a restart at 0).
  Status plan_resumed_table(const TableRef& t);
  struct Receiving;
  Status send_copy(size_t lane, uint64_t from, uint64_t pages, bool in_this_batch);
  // Sends the next chunks to the connections without a COPY in flight; `right_after`: the first
  // is parsed right after chunk_ (sized for what the batch has left).
  Status send_more(const ReadRequest& req, const Batch& batch, bool right_after);
  // Advances one chunk's COPY: `wait` until it is received whole, else only with what arrived.
  Status step_copy(Receiving& r, bool wait);
  void pump_copies(const Batch& batch);
  Status open_lanes();
  void drop_lanes() noexcept;
  Status receive_copy();
  // chunk_lines_[begin, end) → records: one per row, in COPY's text or binary format.
  Status parse_text_chunk(Batch& batch, Tuple& tuple, size_t begin, size_t end);
  Status parse_binary_chunk(Batch& batch, Tuple& tuple, size_t begin, size_t end);
  // A chunk with ctids: the heap page of chunk_lines_[i]'s row; none for the binary end marker
  // (or what is not a row: the parser says what).
  std::optional<uint64_t> line_page(size_t i) const;
  // A chunk with ctids: where the next part to parse from chunk_lines_[begin] ends, whole heap
  // pages of at most `room_rows` rows and `room_bytes` bytes as received (the first page whole
  // when `batch_empty`, however large); `begin` when not even its first page fits.
  size_t part_end(size_t begin, uint64_t room_rows, uint64_t room_bytes, bool batch_empty) const;
  Status emit_snapshot_row(Batch& batch, const Tuple& tuple, const Value& meta);
  // A binary value's text, by the server's output function (for values sluice cannot represent:
  // the error and the dead-letter queue show their text).
  Result<std::string> binary_as_text(uint32_t type_oid, std::string_view bytes);
  Result<bool> captured_types_decodable();
  Status ensure_catalog_connection();
  std::string key_part(uint32_t type_oid, std::string_view data, bool binary, Arena& scratch) const;
  // pg_stream.cc
  Status handle_xlog(Batch& batch, const char* buf, int len);
  // One pgoutput message (protocol 1's form) at `lsn`: records, transaction bounds, relations.
  Status handle_message(Batch& batch, std::string_view payload, Lsn lsn);
  // Protocol 2's Stream Start, Stop, Commit and Abort.
  Status handle_stream_control(std::string_view payload);
  // The next message of the streamed transaction being forwarded (replay_), or its commit.
  Status replay_next(Batch& batch);
  void begin_transaction(Lsn final_lsn, int64_t commit_time, uint32_t xid);
  void commit_transaction(const CommitMsg& c);
  // force: now, whatever the interval; reply: ask the walsender for a keepalive at once.
  void send_status_locked(bool force, bool reply = false);
  // Asks the walsender for a keepalive once the stream has been silent for half the timeout.
  void request_keepalive_if_silent();
  // That request stayed unanswered for the other half: the connection is dead.
  bool stream_silent_too_long() const;
  void status_loop(std::stop_token stop);
  // pg_records.cc
  Status emit_change(Batch& batch, TableState& t, Operation op, const Tuple* old_tuple,
                     char old_kind, const Tuple* new_tuple, Lsn lsn);
  void emit_truncate(Batch& batch, TableState& t, Lsn lsn);
  void emit_logical_message(Batch& batch, const LogicalMsg& m, Lsn lsn);
  Status tuple_to_object(Batch& batch, const TableState& t, const Tuple& tuple, bool key_only,
                         Value* out);
  [[gnu::cold]] Result<Value> value_problem(Batch& batch, const TableState& t, uint32_t column,
                                            const TupleValue& tv, Error e);
  Value metadata(Batch& batch, const TableState& t, std::string_view lsn, bool cdc);
  // After a record is built: when tuple_to_object kept a value it cannot represent as text
  // (the pipeline has a dead-letter queue), marks the record for it (Batch::add_source_reject).
  void mark_poison(Batch& batch, Record& r);
  std::string poison_;  // why, for the record being built
  // pg_incremental.cc
  Status plan_incremental(State& s, bool resumed_stream);
  // `max_bytes`: the batch bound its kept rows go into when the chunk's window closes.
  Status start_chunk_if_due(Batch& batch, size_t max_bytes);
  // A logical message of sluice's (a watermark): handled, true; else false.
  Result<bool> incremental_message(Batch& batch, const LogicalMsg& m);
  // Before a change is emitted: the signal table's rows are consumed (true); a change of the
  // table being chunked drops its key from the buffer.
  Result<bool> incremental_change(TableState& t, const Tuple* old_tuple, const Tuple* new_tuple);
  void incremental_truncate(const TableState& t);
  Status emit_chunk(Batch& batch);
  // ddl.capture saw a change that rewrote the table's values (a volatile default, a USING type
  // change): its rows are read again by an incremental snapshot (queued, or restarted when it
  // is the one being read), logged once with `why`.
  Status resnapshot_after_ddl(std::string_view schema, std::string_view table,
                              std::string_view why);
  // The columns of the table being read incrementally changed: its description is stale, so its
  // snapshot starts over (a chunk in flight is discarded). Returns whether it was that table.
  bool restart_incremental_of(std::string_view schema, std::string_view table);
  const TableRef* find_table(std::string_view qualified) const;
  // Whether the stream turns the relation's changes into records (or reads them itself: the signal
  // table, the DDL capture's tables).
  bool delivers(uint32_t oid) const;

  // settings
  std::string url_;
  std::vector<std::string> tables_setting_;
  std::string slot_setting_, publication_setting_, mode_;
  std::chrono::milliseconds heartbeat_;
  std::optional<std::chrono::milliseconds> stream_timeout_setting_;
  // Arms every call on conn_ (net_.deadline) and the snapshot's COPY: before conn_, which it
  // outlives.
  PgCallDeadline deadline_;
  PgNetOptions net_;
  BackoffPolicy reconnect_;
  bool heartbeat_emit_message_;
  uint64_t slot_lag_warning_;
  bool logical_messages_;
  bool binary_values_;       // setting `binary`: COPY (FORMAT binary) and pgoutput binary
  bool stream_in_progress_;  // setting stream.in_progress: protocol 2, streaming on (PG 14+)
  bool ddl_capture_;
  std::string signal_table_setting_;
  int64_t chunk_size_;
  KeyColumnsByTable message_key_columns_;

  State* st_ = nullptr;  // the skeleton's state, from connect() on
  ConnectorContext ctx_;
  std::string slot_, publication_;
  void note_slot_held();
  mutable std::mutex server_state_mu_;
  std::string server_state_;  // set once the slot exists (server_state())
  std::vector<TableRef> tables_;
  bool all_tables_ = false;
  uint32_t ddl_log_oid_ = 0, ddl_state_oid_ = 0;  // ddl.capture: sluice.ddl_log, sluice.ddl_state
  std::vector<TableRef> added_to_publication_;    // by ensure_publication() in this run
  // The listed tables' oids, ascending (empty with `tables: "*"`): the relations the stream
  // delivers; the others' changes are skipped (delivers()).
  std::vector<uint32_t> listed_oids_;

  PgConn conn_;       // catalog queries and the snapshot transaction
  PgConn repl_;       // replication protocol
  PgConn text_conn_;  // binary_as_text(), connected on first use
  std::mutex repl_mu_;
  TypeRegistry types_;
  std::unordered_map<uint32_t, TableState> table_states_;
  struct ShapeVersion {
    Lsn lsn;  // where the shape took effect (a Relation message's, or the snapshot's point)
    std::vector<Column> columns;
  };
  std::map<uint32_t, std::vector<ShapeVersion>> shapes_;  // by table oid, ascending lsn
  bool shapes_loaded_ = false;
  // The MVCC snapshot the slot exported when this pipeline created it at slot_snapshot_lsn_
  // (kept with the shapes), for a snapshot begun again before any checkpoint; empty: unknown.
  Lsn slot_snapshot_lsn_;
  std::string slot_snapshot_mvcc_;

  // snapshot
  struct CopyChunk {
    uint64_t from = 0, pages = 0;  // heap pages [from, from + pages)
    bool last = false;             // to the table's end
    // A resumed table's pages below the cursor, read only for rows changed since the first
    // snapshot that may hold out-of-line values (pg_snapshot.cc): the cursor stays where it is.
    bool below_cursor = false;
    bool in_this_batch = false;  // sized for the batch being filled (else for a batch of its own)
    // Sized by a guess (ChunkSizer::guessing): each row comes with its ctid first, so that the
    // chunk can be parsed a batch at a time, split between heap pages.
    bool with_ctid = false;
    size_t lane = 0;  // the connection reading it (0: conn_, k: lanes_[k - 1])
  };
  // The rows of a chunk as received, one CopyData message each, packed into 64 KiB blocks: libpq
  // allocates every message it returns, and freeing it right away lets the allocator hand the same
  // memory back for the next, where keeping a chunk's thousands of them cost more than parsing.
  class CopyLines {
   public:
    void append(const char* p, size_t n) {
      if (cap_ - used_ < n) {
        cap_ = std::max(kBlock, n);
        blocks_.push_back(std::make_unique_for_overwrite<char[]>(cap_));
        used_ = 0;
      }
      char* d = blocks_.back().get() + used_;
      std::memcpy(d, p, n);
      used_ += n;
      rows_.emplace_back(d, n);
    }
    void clear() noexcept {
      rows_.clear();
      blocks_.clear();
      used_ = cap_ = 0;
    }
    auto begin() const noexcept { return rows_.begin(); }
    auto end() const noexcept { return rows_.end(); }
    size_t size() const noexcept { return rows_.size(); }
    std::string_view operator[](size_t i) const noexcept { return rows_[i]; }

   private:
    static constexpr size_t kBlock = 64 << 10;
    std::vector<std::unique_ptr<char[]>> blocks_;
    size_t used_ = 0, cap_ = 0;  // of the last block
    std::vector<std::string_view> rows_;
  };
  // A chunk sent and being received: its rows, and how far its COPY got. Received by
  // receive_copy() (waiting) or, while another chunk is parsed, by pump_copies() (what has
  // arrived); an error pump_copies() met is kept for receive_copy() to return.
  struct Receiving {
    CopyChunk chunk;
    enum class Stage : uint8_t { start, rows, result, end, done } stage = Stage::start;
    CopyLines lines;
    uint64_t rows = 0;
    std::optional<Error> error;
  };
  // The first snapshot (the position's mvcc) when this run reads under another one and may
  // filter by it (pg_snapshot.cc, begin_snapshot); empty: no filter.
  std::optional<XidSnapshot> first_snapshot_;
  // pg_current_snapshot() of the snapshot transaction open now (open_snapshot_transaction).
  std::string snapshot_now_text_;
  uint64_t snapshot_now_xmax_ = 0;
  size_t resume_table_index_ = SIZE_MAX;  // the table the snapshot resumed inside (cursor > 0)
  // The loaded table's: an SQL test that a row may hold an out-of-line (TOASTed) value, "false"
  // when it cannot; and the pages below the cursor still to read for such rows (0: none).
  std::string copy_maybe_toasted_ = "false";
  uint64_t copy_below_cursor_end_ = 0;
  // The chunks sent, in page order, one per connection at most; the chunk received (being
  // parsed); where the next chunk to send begins.
  std::deque<Receiving> inflight_;
  CopyChunk chunk_;
  uint64_t next_from_ = 0;
  // snapshot.parallel: the connections besides conn_ that read chunks, each in a transaction
  // that imported conn_'s snapshot; the next to send a chunk to.
  int parallel_ = 1;
  std::vector<PgConn> lanes_;
  PgConn& lane(size_t i) { return i == 0 ? conn_ : lanes_[i - 1]; }
  size_t lane_count() const { return 1 + lanes_.size(); }
  std::string exported_;  // the slot's exported snapshot the snapshot reads in (resume_snapshot)
  // chunk_'s COPY lines as libpq returned them (each with its newline), parsed in place.
  CopyLines chunk_lines_;
  const ReadRequest* copy_request_ = nullptr;  // the read the chunks are parsed for (pump_copies)
  uint64_t pumped_rows_ = 0;                   // rows parsed (pump_copies every kPumpRows)
  uint64_t chunk_rows_ = 0;
  // chunk_ is being parsed, a batch at a time (with ctids), from chunk_lines_[chunk_next_];
  // the bytes its records took so far.
  bool chunk_parsing_ = false;
  size_t chunk_next_ = 0;
  uint64_t chunk_bytes_ = 0;
  size_t copy_table_index_ = SIZE_MAX;  // table whose description copy_table_ holds
  uint64_t copy_table_pages_ = 0;
  // Chunks above the cursor, and below it (rows changed since the first snapshot: nearly empty
  // pages, which must not grow the chunks above it, sized for the table's real density).
  ChunkSizer chunk_sizer_, below_cursor_sizer_;
  ChunkSizer& sizer_for(uint64_t from) {
    return from < copy_below_cursor_end_ ? below_cursor_sizer_ : chunk_sizer_;
  }
  TableState* copy_table_ = nullptr;
  std::vector<std::string> field_scratch_;
  // The loaded table's COPY select list, and per column the kind its values arrive as: 'b' (its
  // binary form) or 't' (its text: binary is off, or sluice has no binary decoder for the type).
  std::string copy_columns_;
  std::vector<char> copy_kinds_;
  // stream
  bool streaming_ = false;
  Lsn tx_final_;
  int64_t tx_commit_time_ = 0;
  uint32_t tx_xid_ = 0;
  Lsn received_;
  std::atomic<uint64_t> acked_flush_{0};
  uint64_t sent_flush_ = 0;
  std::chrono::steady_clock::time_point last_status_{};
  std::chrono::steady_clock::time_point last_heartbeat_ = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> lost_at_;  // when the stream last broke
  std::chrono::milliseconds wal_sender_timeout_{60000};           // the server's (connect); 0: none
  std::chrono::milliseconds stream_timeout_{60000};      // effective: setting or the server's
  std::chrono::steady_clock::time_point last_packet_{};  // the stream's last message
  std::optional<std::chrono::steady_clock::time_point> reply_requested_at_;  // unanswered
  // SO_RCVLOWAT of the replication socket (0: not set on this connection): 64 KiB while a batch
  // fills, so a busy stream wakes the reader per 64 KiB, not per message (the walsender's cost
  // per change halves); 1 while waiting for a first change, so a lone change is read at once.
  int rcvlowat_ = 0;
  // pgoutput `binary`: this stream's mode; whether the next may use it (false once a captured
  // column's type had no binary decoder, for the rest of the run); a stream to start again in text.
  bool streaming_binary_ = false;
  bool stream_binary_ = true;
  bool restart_stream_ = false;
  // stream.in_progress: this stream is protocol 2 with `streaming on`; inside a Stream Start /
  // Stop block of transaction block_xid_; the transactions in progress; the one committed and
  // being forwarded (read_stream replays it a message at a time, as if it had arrived so).
  bool stream_protocol2_ = false;
  bool in_stream_block_ = false;
  uint32_t block_xid_ = 0;
  TransactionSpool spool_;
  std::unique_ptr<HeldTransaction> replay_;
  CommitMsg replay_commit_;
  uint64_t spilled_logged_ = 0;  // log the spill when spool_.spilled_bytes() passes it
  bool spooled_ = false;         // a streamed change arrived in this read_stream call
  Message msg_;
  std::jthread status_thread_;
  SlotHealthMonitor slot_health_;  // pg_slot_health.cc: lag figures, warning, heartbeats
  // incremental snapshot
  uint32_t signal_oid_ = 0;
  std::optional<TableState> inc_table_;  // the table being chunked, described by the catalogue
  uint32_t inc_oid_ = 0;
  std::string inc_name_;
  // The most bytes one row of the table took in a chunk read (0: none read yet).
  double inc_row_bytes_ = 0;
};

}  // namespace sluice::pg
