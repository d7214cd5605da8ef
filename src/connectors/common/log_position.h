// Positions of log sources: the strong types they are made of (Lsn, BinlogCoord, GtidSet,
// KeysetCursor) and the one versioned text codec every log source's position goes through.
//
// A position is what the runtime stores in the checkpoint store (or a destination) and hands back
// to open(); it is opaque text to the runtime. Its layout, one space-separated token list:
//
//   [v<N>] <phase> <point…> [snapshot: <table-index> <cursor…>] [stream: <tx-point…> <n>]
//          [stream, v2: isnap <table-count> <table…> <cursor>] [stream: cap <id>,<id>…]
//
//   phase    "snapshot" | "cdc" (streaming) | "done" (initial_only snapshot finished)
//   point    the driver's log point: where the stream starts (snapshot), everything before it is
//            durable (cdc), the snapshot's point (done)
//   cursor   where the snapshot of table <table-index> resumes
//   tx       cdc only, optional: the first <n> changes of the transaction starting at <tx-point>
//            are durable too (resume inside a transaction)
//
// Version 1 is written without the "v1" token: byte-identical with what the postgres and mysql
// sources stored before the codec existed, so every stored checkpoint decodes unchanged. Version 2
// adds the incremental snapshot's state to a streaming position ("v2 cdc … isnap …", written only
// while an incremental snapshot is pending, so a position without one stays version 1 byte for
// byte); decode() reads every version it knows and refuses the others. Version 3 adds the MVCC
// snapshot the source's snapshot began under to a snapshot position ("v3 snapshot … t<hex>
// s<snapshot>", written only when the driver recorded one), so a resumed snapshot can tell the row
// versions the first one saw from those the stream delivers. The tables a stream delivers end a
// streaming position of any version when the driver records them ("cdc … cap <id>,…"), so a run
// can tell a table listed again from one captured all along; it needs no version of its own (an
// older sluice refuses the tag where it reads a transaction point), so that every streaming
// position keeps beginning with its phase.
#pragma once

#include <charconv>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice {

// ── the codec's token stream ────────────────────────────────────────────────

class PositionWriter {
 public:
  void word(std::string_view w) {
    if (!out_.empty()) out_ += ' ';
    out_ += w;
  }
  void number(uint64_t v) {
    char buf[24];
    auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
    (void)ec;
    word(std::string_view(buf, size_t(end - buf)));
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

// Tokens split on single spaces (so "a  b" holds an empty token, which no field accepts).
class PositionReader {
 public:
  explicit PositionReader(std::string_view text) : text_(text) {}
  bool at_end() const { return done_; }
  bool word(std::string_view* out) {
    if (done_) return false;
    const size_t sp = text_.find(' ', start_);
    const size_t end = sp == std::string_view::npos ? text_.size() : sp;
    *out = text_.substr(start_, end - start_);
    if (sp == std::string_view::npos) done_ = true;
    else start_ = sp + 1;
    return true;
  }
  bool number(uint64_t* out) {
    std::string_view w;
    if (!word(&w) || w.empty()) return false;
    auto [ptr, ec] = std::from_chars(w.data(), w.data() + w.size(), *out);
    return ec == std::errc() && ptr == w.data() + w.size();
  }
  // Looks at the next token without taking it.
  std::string_view peek() const {
    if (done_) return {};
    const size_t sp = text_.find(' ', start_);
    return text_.substr(start_, (sp == std::string_view::npos ? text_.size() : sp) - start_);
  }

 private:
  std::string_view text_;
  size_t start_ = 0;
  bool done_ = false;
};

// ── strong types ────────────────────────────────────────────────────────────

// A PostgreSQL WAL position. Text form "X/Y" (hex high/low 32 bits), as PostgreSQL prints it.
struct Lsn {
  uint64_t value = 0;
  std::string to_string() const;
  static std::optional<Lsn> parse(std::string_view text);
  auto operator<=>(const Lsn&) const = default;
};

// A MySQL/MariaDB binlog coordinate: file name and byte offset in it. "-" as the file marks a
// position without a binlog (an initial_only snapshot).
struct BinlogCoord {
  std::string file;
  uint64_t pos = 0;
  bool operator==(const BinlogCoord&) const = default;
};

// One MariaDB GTID: domain-server-sequence.
struct MariaGtidPoint {
  uint32_t domain = 0;
  uint32_t server_id = 0;
  uint64_t seq = 0;
  bool operator==(const MariaGtidPoint&) const = default;
};

// MariaDB's GTID state: the last GTID per replication domain, in the order the server listed
// them ("0-1-42,1-2-7"); empty when the server has none (and always on MySQL).
class GtidSet {
 public:
  static std::optional<GtidSet> parse(std::string_view text);  // "" → empty set
  std::string to_string() const;
  bool empty() const { return items_.empty(); }
  // Replaces the domain's entry (or appends one): the state once `g` has committed.
  void apply(const MariaGtidPoint& g);
  const std::vector<MariaGtidPoint>& items() const { return items_; }
  bool operator==(const GtidSet&) const = default;

 private:
  std::vector<MariaGtidPoint> items_;
};

// Where a keyed (or key-less) table snapshot resumes: from the start, after a key (the primary key
// values of the last row read, as the server's text), or after a row count (tables without a key).
struct KeysetCursor {
  enum class Kind : uint8_t { start, after_key, offset } kind = Kind::start;
  std::vector<std::string> key;  // after_key
  uint64_t offset = 0;           // offset
  bool operator==(const KeysetCursor&) const = default;
};

// An incremental snapshot in progress while the stream flows (incremental_snapshot.h): the tables
// still to read, the first being read now, and where its next chunk starts (after the last key
// emitted). Tables are named as the source prints them (schema.table, quoted where needed); the
// codec hex-encodes them, so any name survives.
struct IncrementalState {
  std::vector<std::string> tables;
  KeysetCursor cursor;
  bool empty() const { return tables.empty(); }
  bool operator==(const IncrementalState&) const = default;
};

// A binlog stream point: the coordinate and, on MariaDB, the GTID state there (the stream resumes
// by GTID when there is one).
struct BinlogPoint {
  BinlogCoord coord;
  GtidSet gtid;
  bool operator==(const BinlogPoint&) const = default;
};

std::string hex_encode(std::string_view bytes);
std::optional<std::string> hex_decode(std::string_view hex);  // lower or upper case digits only

// Field codecs: one pair per strong type, found by overload resolution from LogPosition.
void write_field(PositionWriter& w, const Lsn& v);
bool read_field(PositionReader& r, Lsn* v);
void write_field(PositionWriter& w, const BinlogCoord& v);
bool read_field(PositionReader& r, BinlogCoord* v);
void write_field(PositionWriter& w, const GtidSet& v);  // "-" when empty
bool read_field(PositionReader& r, GtidSet* v);
void write_field(PositionWriter& w, const BinlogPoint& v);  // <file> <pos> <gtid>
bool read_field(PositionReader& r, BinlogPoint* v);
void write_field(PositionWriter& w, const KeysetCursor& v);  // "-", "k<hex>,<hex>…", "o<offset>"
bool read_field(PositionReader& r, KeysetCursor* v);
void write_field(PositionWriter& w, const IncrementalState& v);  // <n> <hex table>… <cursor>
bool read_field(PositionReader& r, IncrementalState* v);

// ── the position ────────────────────────────────────────────────────────────

enum class LogPhase : uint8_t { none, snapshot, stream, done };

// Traits name a driver's position parts, each with write_field/read_field:
//   struct Traits { using Point = …; using TxPoint = …; using Cursor = …; };
// The fingerprint of an ordered list of (schema or database, table) names: FNV-1a 64, never 0.
uint64_t tables_fingerprint(const std::vector<std::pair<std::string, std::string>>& tables);

template <class Traits>
struct LogPosition {
  using Point = typename Traits::Point;
  using TxPoint = typename Traits::TxPoint;
  using Cursor = typename Traits::Cursor;

  static constexpr uint64_t kVersion = 3;  // the newest layout this code writes

  LogPhase phase = LogPhase::none;
  Point point{};
  size_t table_index = 0;        // snapshot: the table being read
  Cursor cursor{};               // snapshot: where that table resumes
  TxPoint tx{};                  // cdc: the transaction partly durable …
  uint64_t tx_n = 0;             // … its first tx_n changes (0: none)
  IncrementalState incremental;  // cdc: an incremental snapshot pending (v2)
  // snapshot: a fingerprint of the ordered list of tables it reads (table_tables_fingerprint), so
  // that a resume after `tables` changed does not apply table_index to another list; 0: unknown
  // (positions written before it). Written as "t<hex>" after the cursor.
  uint64_t tables_fingerprint = 0;
  // snapshot (v3): the MVCC snapshot the snapshot began under, as the driver prints it (postgres:
  // pg_current_snapshot()'s "xmin:xmax:xip,…"); digits, ':' and ',' only. Empty: not recorded
  // (positions written before it, sources without one). Written as "s<text>" last.
  std::string mvcc;
  // stream: the ids of the tables the stream delivers from this point (postgres: the
  // relations' oids), ascending; empty: not recorded (positions written before it, sources that
  // capture whatever their log holds). The tables listed now but not here were added to the
  // pipeline since: their existing rows are copied. Written as "cap <id>,<id>…" last.
  std::vector<uint64_t> captured;

  bool operator==(const LogPosition&) const = default;

  // The snapshot reads `tables`, in this order. table_index is an index into that list, so a
  // snapshot resumed after the list changed (a table added, removed or reordered) would skip or
  // repeat a table: when it had begun reading under another list, it starts again from the first
  // table (true: the caller drops what it cached of the table being read). The list's
  // fingerprint is stored either way.
  bool restart_if_tables_changed(const std::vector<std::pair<std::string, std::string>>& tables) {
    const uint64_t fingerprint = sluice::tables_fingerprint(tables);
    const bool restart = tables_fingerprint != 0 && tables_fingerprint != fingerprint &&
                         (table_index > 0 || !(cursor == Cursor{}));
    if (restart) {
      table_index = 0;
      cursor = Cursor{};
      mvcc.clear();  // read again from the start, under the snapshot of this run
    }
    tables_fingerprint = fingerprint;
    return restart;
  }

  std::string encode() const {
    PositionWriter w;
    switch (phase) {
      case LogPhase::snapshot:
        if (!mvcc.empty()) w.word("v3");
        w.word("snapshot");
        write_field(w, point);
        w.number(table_index);
        write_field(w, cursor);
        if (tables_fingerprint) {
          char buf[20] = {'t'};
          auto [end, ec] = std::to_chars(buf + 1, buf + sizeof(buf), tables_fingerprint, 16);
          (void)ec;
          w.word(std::string_view(buf, size_t(end - buf)));
        }
        if (!mvcc.empty()) w.word("s" + mvcc);
        break;
      case LogPhase::stream:
        if (!incremental.empty()) w.word("v2");
        w.word("cdc");
        write_field(w, point);
        if (tx_n) {
          write_field(w, tx);
          w.number(tx_n);
        }
        if (!incremental.empty()) {
          w.word("isnap");
          write_field(w, incremental);
        }
        if (!captured.empty()) {
          w.word("cap");
          std::string list;
          for (uint64_t id : captured) {
            if (!list.empty()) list += ',';
            list += std::to_string(id);
          }
          w.word(list);
        }
        break;
      case LogPhase::done:
        w.word("done");
        write_field(w, point);
        break;
      case LogPhase::none: return "";
    }
    return w.take();
  }

  static std::optional<LogPosition> decode(std::string_view text) {
    PositionReader r(text);
    std::string_view head = r.peek();
    uint64_t version = 1;
    if (head.size() >= 2 && head[0] == 'v' && head[1] >= '0' && head[1] <= '9') {
      std::string_view v;
      r.word(&v);
      auto [ptr, ec] = std::from_chars(v.data() + 1, v.data() + v.size(), version);
      if (ec != std::errc() || ptr != v.data() + v.size() || version < 1 || version > kVersion)
        return std::nullopt;
    }
    LogPosition p;
    std::string_view phase;
    if (!r.word(&phase)) return std::nullopt;
    if (!read_field(r, &p.point)) return std::nullopt;
    if (phase == "snapshot") {
      uint64_t index;
      if (!r.number(&index) || !read_field(r, &p.cursor)) return std::nullopt;
      p.phase = LogPhase::snapshot;
      p.table_index = size_t(index);
      if (!r.at_end() && r.peek().starts_with("t")) {
        std::string_view w;
        r.word(&w);
        auto [ptr, ec] =
            std::from_chars(w.data() + 1, w.data() + w.size(), p.tables_fingerprint, 16);
        if (w.size() < 2 || ec != std::errc() || ptr != w.data() + w.size() ||
            p.tables_fingerprint == 0)
          return std::nullopt;
      }
      if (version >= 3 && !r.at_end() && r.peek().starts_with("s")) {
        std::string_view w;
        r.word(&w);
        w.remove_prefix(1);
        if (w.empty() || w.find_first_not_of("0123456789:,") != std::string_view::npos)
          return std::nullopt;
        p.mvcc = std::string(w);
      }
    } else if (phase == "cdc") {
      p.phase = LogPhase::stream;
      if (!r.at_end() && r.peek() != "isnap" && r.peek() != "cap" &&
          (!read_field(r, &p.tx) || !r.number(&p.tx_n)))
        return std::nullopt;
      if (!r.at_end() && r.peek() == "isnap") {
        std::string_view tag;
        if (version < 2 || !r.word(&tag) || !read_field(r, &p.incremental) || p.incremental.empty())
          return std::nullopt;
      }
      if (!r.at_end()) {
        std::string_view tag, list;
        if (!r.word(&tag) || tag != "cap" || !r.word(&list) || list.empty()) return std::nullopt;
        while (!list.empty()) {
          const size_t comma = list.find(',');
          const std::string_view id = list.substr(0, comma);
          uint64_t v = 0;
          auto [ptr, ec] = std::from_chars(id.data(), id.data() + id.size(), v);
          if (id.empty() || ec != std::errc() || ptr != id.data() + id.size() ||
              (!p.captured.empty() && v <= p.captured.back()))
            return std::nullopt;
          p.captured.push_back(v);
          list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
          if (comma != std::string_view::npos && list.empty()) return std::nullopt;
        }
      }
    } else if (phase == "done") {
      p.phase = LogPhase::done;
    } else {
      return std::nullopt;
    }
    if (!r.at_end()) return std::nullopt;
    return p;
  }
};

}  // namespace sluice
