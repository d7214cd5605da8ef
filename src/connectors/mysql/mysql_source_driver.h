// The mysql log-source driver (private to the connector). The skeleton (connectors/common/
// log_source.h) runs the phases, the position, resume inside a transaction and reconnects; this
// driver does what is MySQL's / MariaDB's own, one concern per file:
//
//   mysql_source.cc             settings, factory, connect and server checks, start planning
//   mysql_binlog_status.cc      the server's binlog position (SHOW MASTER / BINARY LOG STATUS)
//   mysql_catalog.cc            captured tables, their schemas, TABLE_MAP → schema
//   mysql_source_types.cc       snapshot text values → the Values the binlog decoder produces
//   mysql_snapshot.cc           the snapshot: consistent-snapshot transaction, keyset chunks
//   mysql_stream.cc             the binlog stream: COM_BINLOG_DUMP, events → records
//   binlog_event_ring.cc        the events' bytes between the stream's reader thread and decoding
//   binlog_decode_pool.cc       rows events decoded ahead on helper threads (binlog.decode_threads)
//   mysql_ddl.cc                QUERY events: DDL → schema history and schema records, TRUNCATE,
//                               statement-based DML (refused)
//   mysql_ddl_parse.cc          the statements' forms (ALTER / CREATE / DROP / RENAME, DML)
//   mysql_incremental.cc        incremental snapshots: watermark rows in the signal table,
//                               key-ordered chunks, signals, `sluice snapshot`
//   mysql_schema_history.cc     each table's columns as of each DDL position, persisted
//   mysql_doctor.cc             `sluice doctor`: the server's set-up, privileges, the checkpoint
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <mysql.h>
// mysql.h first: mariadb_rpl.h relies on its types.
#include <mariadb_rpl.h>

#include "connectors/builtin.h"
#include "connectors/common/key_columns.h"
#include "connectors/common/log_source.h"
#include "connectors/mysql/binlog.h"
#include "connectors/mysql/binlog_decode_pool.h"
#include "connectors/mysql/binlog_event_ring.h"
#include "connectors/mysql/mysql_connection.h"
#include "connectors/mysql/mysql_schema_history.h"

namespace sluice::mysql {

namespace bl = binlog;

// "snapshot <file> <pos> <gtid> <table-index> <resume>", "cdc <file> <pos> <gtid> [<tx-file>
// <tx-pos> <n>]", "done <file> <pos> <gtid>": a transaction is named by where it starts.
struct PositionTraits {
  using Point = BinlogPoint;
  using TxPoint = BinlogCoord;
  using Cursor = KeysetCursor;
};
using SourcePosition = LogPosition<PositionTraits>;

struct TableRef {
  std::string db, table;
  int64_t estimate = 0;
};

struct TableMapState {
  bl::TableMap map;
  std::shared_ptr<const TableSchema> schema;  // null: not captured
  bool signal = false;                        // the signal table: rows consumed, never emitted
  std::vector<uint32_t> key;                  // key column indexes valid for this map
  std::vector<std::string_view> names;        // per map column
  // Tells this state from every other the table id had (decode jobs check it): on_table_map
  // numbers each state it makes.
  uint64_t generation = 0;
};

// mysql_source_types.cc
std::vector<std::string> parse_labels(std::string_view column_type);
bool is_numeric_type(std::string_view t);
// A zero date (zero year, month or day: `0000-00-00`, `2024-00-15`) is null with
// `zero_dates_as_null`, else an Errc::data error naming the column.
Result<Value> text_to_value(const TableSchema& t, size_t i, std::string_view s, Arena& arena,
                            bool zero_dates_as_null);
// Whether a DATE/DATETIME/TIMESTAMP column's text is a zero date.
bool is_zero_date_text(std::string_view type, std::string_view s);
// The stop for a value the source cannot represent when the pipeline has no dead-letter queue:
// `why` and the ways out (`zero_date`: also the zero_dates setting).
Error unrepresentable_value_stop(std::string_view why, bool zero_date);
// Marks a record holding such a value for the dead-letter queue (meta::kError = why).
void mark_source_reject(Batch& batch, Record& r, std::string_view why);
// BINLOG_GTID_POS: MariaDB's GTID state at a binlog coordinate (empty when it has none).
Result<GtidSet> gtid_at(MysqlConn& c, const BinlogCoord& at);
// mysql_binlog_status.cc
// SHOW MASTER STATUS, or SHOW BINARY LOG STATUS where the former is gone (MySQL 8.4).
Result<std::vector<MysqlRow>> binlog_status(MysqlConn& c);
// mysql_ddl.cc
// db.table as a user writes it (a part in backticks only where it is not a plain identifier): the
// names of incremental snapshots' tables (mysql_incremental.cc).
std::string qualified_name(std::string_view db, std::string_view table);
std::optional<std::pair<std::string, std::string>> parse_qualified_name(
    std::string_view s, std::string_view default_db);

// The settings the source runs on, bound by the table in mysql_source.cc (which writes the
// defaults) and checked by its finalize().
struct MysqlSourceOptions {
  std::string url;
  std::string user, password, password_file;  // override the URL's (finalize)
  std::vector<std::string> tables;
  std::string snapshot_mode;
  std::string zero_dates;           // reject | null
  bool verify_checksum = true;      // binlog.verify_checksum
  int64_t decode_threads = 0;       // binlog.decode_threads (0: 2 with four cores or more, else 1)
  int64_t snapshot_chunk_size = 0;  // finalize() raises it to at least 1
  int64_t server_id = 0;            // 0: derived from the pipeline id
  std::chrono::milliseconds heartbeat_interval{};
  std::string tls_mode, tls_ca, tls_cert, tls_key, tls_key_password;
  std::chrono::milliseconds connect_timeout{};
  std::chrono::milliseconds tcp_user_timeout{};
  std::chrono::milliseconds reconnect_initial_backoff{}, reconnect_max_backoff{};
  std::map<std::string, std::string> message_key_columns;  // "db.table" -> "a, b"
  std::string signal_table;                                // empty: no signal table
  MysqlUrl parsed_url;                                     // derived by finalize()
  std::string signal_db, signal_name;                      // derived by finalize()
  // Derived by finalize: (db, table) -> key column names, for tables without a primary key.
  KeyColumnsByTable key_columns_by_table;
};

class MysqlDriver final : public LogSourceDriver<PositionTraits> {
 public:
  explicit MysqlDriver(MysqlSourceOptions o);
  ~MysqlDriver() override { close(); }

  std::string_view name() const override { return "mysql"; }
  bool snapshot_only() const override { return mode_ == "initial_only"; }
  BackoffPolicy reconnect_backoff() const override { return reconnect_; }
  Status connect(State& s) override;
  Status plan_start(State& s) override;
  Result<SnapshotRead> read_snapshot(Batch& batch, const ReadRequest& req, std::stop_token stop,
                                     State& s) override;
  Status finish_snapshot(State& s) override;
  bool start_stream_on_open() const override { return true; }
  Status start_stream(State& s) override;
  Result<StreamRead> read_stream(Batch& batch, const ReadRequest& req, std::stop_token stop,
                                 State& s) override;
  void stop_stream(State& s) noexcept override;
  void close() noexcept override;  // a binlog reader holds nothing on the server: no ack()
  std::vector<SourceTable> captured_tables() const override {
    if (!doctor_tables_.empty()) return doctor_tables_;  // with their columns (doctor)
    std::vector<SourceTable> out;
    for (const TableRef& t : tables_) out.push_back({t.db, t.table});
    return out;
  }
  Status request_snapshot(const ConnectorContext& ctx,
                          const std::vector<std::string>& tables) override;
  Result<std::vector<DoctorCheck>> doctor(
      const ConnectorContext& ctx,
      const std::optional<std::string>& checkpoint) override;  // mysql_doctor.cc

 private:
  std::vector<SourceTable> doctor_tables_;  // doctor(): the tables with their columns and key
  Status check_server();
  // mysql_catalog.cc
  Status resolve_tables();
  bool captured(std::string_view db, std::string_view table) const;
  Result<std::shared_ptr<const TableSchema>> load_schema(const std::string& db,
                                                         const std::string& table);
  Status on_table_map(bl::TableMap map, uint32_t event_pos);
  // mysql_schema_history use: seeds the tables without an entry at `at` from the catalogue;
  // sets schemas_ to the history's state at `at`.
  Status seed_history(const BinlogCoord& at, bool all);
  Status rewind_schemas(const BinlogCoord& at);
  Status save_history();
  // The stream's start is still on the server: its binlog file and (MariaDB) its GTID state.
  Status check_start_available();
  Status ensure_catalog();
  // mysql_snapshot.cc
  Status begin_snapshot(bool fresh);
  // mysql_stream.cc
  void close_stream() noexcept;
  // `crc_verified`: the reader thread checked the event's CRC32 (EventRing::Event).
  // `job`: the event's rows, decoded ahead by the pool (decode_ahead), when they were.
  Status handle_event(Batch& batch, std::string_view raw, bool crc_verified,
                      RowsDecodePool::Job* job = nullptr);
  Status handle_rows(Batch& batch, const bl::Event& e, RowsDecodePool::Job* job);
  // handle_rows: what one decoded row makes: its record, a signal consumed, or nothing (a change
  // written before the restart). `plan_b`/`plan_a`: the images' plans (an image of every column
  // becomes the record's object as it is; its array is then the record's: returns true).
  Result<bool> row_record(Batch& batch, const TableMapState& ms, bl::RowsEvent::Kind kind,
                          std::span<const Field> rb, std::span<const Field> ra,
                          const bl::ZeroDates* zb, const bl::ZeroDates* za,
                          const bl::RowPlan& plan_b, const bl::RowPlan& plan_a, uint32_t event_pos,
                          Value& meta);
  // While the source's thread handles a rows event: hands the rows events after it that are
  // already in the ring to the decode pool, up to the next event that could change a table map
  // or a schema and within what the batch can still take.
  void decode_ahead(Batch& batch);
  // Forgets what was decoded ahead (its memory goes to `batch`'s arena); the events stay.
  void end_decode_ahead(Batch& batch);
  void begin_tx(uint32_t start, const bl::Header& h);
  void commit_tx(uint32_t next_pos);
  Value metadata(Batch& batch, const TableSchema& t, uint32_t event_pos, bool cdc);
  // mysql_ddl.cc
  Status on_query(Batch& batch, std::string_view db, std::string_view sql, uint32_t event_pos,
                  uint32_t next_pos);
  Status emit_changes(Batch& batch, const TableSchema& t, const std::vector<ColumnChange>& changes,
                      uint32_t event_pos);
  // mysql_snapshot.cc: the select list of a table's rows, and the keyset condition "after
  // `after`" (the key's values as the server printed them) spelled out for the primary key index.
  std::string snapshot_columns(const TableSchema& t) const;
  std::string keyset_after(const TableSchema& t, const std::vector<std::string>& after) const;
  // mysql_incremental.cc
  bool is_signal_table(std::string_view db, std::string_view table) const {
    return !signal_name_.empty() && db == signal_db_ && table == signal_name_;
  }
  // The signal table exists with Debezium's columns and this user may write it.
  Status check_signal_table();
  // Tables added to `tables` since the checkpoint (a stream resumed), queued for an incremental
  // snapshot; the pending ones logged.
  Status plan_incremental(State& s);
  const TableRef* find_table(std::string_view spec) const;
  // Between stream reads: when a chunk is due, writes LOW, reads the chunk, writes HIGH (and a
  // table's snapshot_begin marker into `batch` before its first chunk).
  // `max_bytes`: the batch bound its kept rows go into when the chunk's window closes.
  Status start_chunk_if_due(Batch& batch, size_t max_bytes);
  // A row of the signal table in the stream: a watermark or a signal.
  Status on_signal_row(Batch& batch, const TableMapState& ms, std::span<const Field> row);
  // A change of a captured table in the stream: its keys leave the chunk buffer.
  void incremental_change(const TableMapState& ms, std::span<const Field> first,
                          std::span<const Field> second);
  void incremental_truncate(std::string_view db, std::string_view table);
  Status emit_chunk(Batch& batch);
  // A snapshot row (initial or incremental) read as text → r.after: text[i] is column i's
  // (nullopt: NULL; missing at the end: NULL). A value sluice cannot represent (a zero date)
  // stops the snapshot naming the fixes, or, with a dead-letter queue, keeps its raw text and
  // marks the record for it: skipping the row would lose it.
  Status snapshot_row_after(Batch& batch, const TableSchema& t,
                            const std::vector<std::optional<std::string_view>>& text, Record& r);
  std::vector<std::optional<std::string_view>> row_text_;  // a row's columns, for the above

  // settings
  // A refusal at connect time that classify_errno() cannot place is retried: a server that is
  // still starting up answers oddly, and a source that is down is retried, not stopped.
  ConnectOptions opts_ = [] {
    ConnectOptions o;
    o.retry_unclassified_connect_errors = true;
    return o;
  }();
  std::vector<std::string> tables_setting_;
  bool zero_dates_null_ = false;  // zero_dates: null
  bool verify_checksum_ = true;   // binlog.verify_checksum: the reader thread checks each CRC32
  unsigned decode_threads_ = 1;   // binlog.decode_threads, resolved: 1 = the source's thread alone
  KeyColumnsByTable message_key_columns_;
  std::string mode_;
  int64_t chunk_size_;
  int64_t server_id_setting_;
  std::chrono::milliseconds heartbeat_;
  BackoffPolicy reconnect_;
  std::string signal_setting_, signal_db_, signal_name_;  // signal.table; parts empty: none

  State* st_ = nullptr;  // the skeleton's state, from connect() on
  ConnectorContext ctx_;
  uint32_t server_id_ = 0;
  bool mariadb_ = false;
  MysqlConn conn_;  // catalog queries and the snapshot transaction
  std::vector<TableRef> tables_;
  // Each captured table's columns at the stream's current point ("db.table"), from the history.
  std::unordered_map<std::string, std::shared_ptr<const TableSchema>> schemas_;
  SchemaHistory history_;
  bool history_pruned_ = false;                       // once per open, at the checkpoint's position
  std::unordered_map<uint64_t, TableMapState> maps_;  // by table id
  uint64_t map_generation_ = 0;                       // the last TableMapState::generation

  // incremental snapshot (the window state: st_->incremental; the pending tables and cursor:
  // st_->position.incremental)
  std::shared_ptr<const TableSchema> inc_table_;  // the current table's columns, per chunk
  std::string inc_name_;                          // its name in the position (db.table)
  double inc_row_bytes_ = 0;  // the most bytes one row of it took in a chunk read (0: none yet)
  // snapshot
  std::shared_ptr<const TableSchema> snap_table_;
  size_t snap_table_index_ = SIZE_MAX;
  // The most bytes one row of the table took in a batch, per query (0: none read yet).
  double snap_row_bytes_ = 0;
  // stream
  MysqlConn rpl_conn_;
  MARIADB_RPL* rpl_ = nullptr;
  // Events read off the dump connection by reader_, decoded on the source's thread; the network
  // and decoding overlap.
  std::unique_ptr<EventRing> ring_;
  std::jthread reader_;
  std::optional<bl::FormatDescription> fd_;
  bool checksum_ = false;  // events carry a CRC32
  std::string cur_file_;
  bool tx_saw_begin_ = false;
  std::optional<GtidSet> pending_gtid_;  // gtid state once the current transaction commits
  std::string tx_gtid_text_;             // the current transaction's GTID (metadata)
  uint32_t tx_time_ = 0;
  uint32_t tx_server_id_ = 0;  // the server that wrote the transaction (event header)
  // Decoding ahead (binlog_decode_pool.h): the pool (decode_threads_ > 1), and the events popped
  // from the ring but not handled yet, oldest first, each with its job if one was dispatched.
  // ahead_[0, ahead_scanned_) were looked at by decode_ahead; ahead_blocked_: the last of them
  // could change a table map or a schema, so nothing after it is dispatched before it is handled.
  struct Ahead {
    EventRing::Event ev;
    RowsDecodePool::Job* job = nullptr;
  };
  std::unique_ptr<RowsDecodePool> pool_;
  std::deque<Ahead> ahead_;
  size_t ahead_scanned_ = 0;
  bool ahead_blocked_ = false;
  size_t ahead_bytes_ = 0;    // the dispatched jobs' row images not taken back yet
  size_t read_room_ = 0;      // read_stream: records the batch may still take
  double bytes_per_row_ = 0;  // of the last rows event decoded (estimates a job's records)
  // handle_rows: a row image of some of the columns (binlog_row_image MINIMAL or NOBLOB), decoded
  // as fields named after the table's columns.
  std::vector<Field> row_before_, row_after_;
  bl::RowPlan plan_before_, plan_after_;  // handle_rows: the images of the event at hand
};

}  // namespace sluice::mysql
