// Our own decoder of MySQL/MariaDB binary log events (row-based replication). It works on the raw
// bytes of one event as the server sends them after COM_BINLOG_DUMP (without the leading OK byte),
// so it is unit-testable on captured bytes.
//
//   event = header (19 bytes: timestamp, type, server_id, size, next position, flags)
//           + post-header + body [+ CRC32 when the binlog checksum is CRC32]
//
// Row images are decoded straight into the record model (include/sluice/value.h); strings are
// copied into the batch's arena. Column facts the binlog lacks (unsigned, charset, enum labels,
// JSON-ness on MariaDB) come from information_schema in ColumnInfo.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/arena.h"
#include "sluice/result.h"
#include "sluice/value.h"

namespace sluice::mysql::binlog {

enum EventType : uint8_t {
  kQuery = 2,
  kStop = 3,
  kRotate = 4,
  kFormatDescription = 15,
  kXid = 16,
  kTableMap = 19,
  kWriteRowsV1 = 23,
  kUpdateRowsV1 = 24,
  kDeleteRowsV1 = 25,
  kHeartbeat = 27,
  kWriteRowsV2 = 30,
  kUpdateRowsV2 = 31,
  kDeleteRowsV2 = 32,
  kMysqlGtid = 33,
  kMysqlAnonymousGtid = 34,
  kMysqlPreviousGtids = 35,
  kMysqlPartialUpdateRows = 39,
  kMariaAnnotateRows = 160,
  kMariaBinlogCheckpoint = 161,
  kMariaGtid = 162,
  kMariaGtidList = 163,
  kMariaStartEncryption = 164,
  kMariaWriteRowsCompressedV1 = 166,
  kMariaDeleteRowsCompressed = 171,
};

// Column type codes of TABLE_MAP events.
enum ColumnType : uint8_t {
  kTypeDecimal = 0,
  kTypeTiny = 1,
  kTypeShort = 2,
  kTypeLong = 3,
  kTypeFloat = 4,
  kTypeDouble = 5,
  kTypeNull = 6,
  kTypeTimestamp = 7,
  kTypeLonglong = 8,
  kTypeInt24 = 9,
  kTypeDate = 10,
  kTypeTime = 11,
  kTypeDatetime = 12,
  kTypeYear = 13,
  kTypeNewDate = 14,
  kTypeVarchar = 15,
  kTypeBit = 16,
  kTypeTimestamp2 = 17,
  kTypeDatetime2 = 18,
  kTypeTime2 = 19,
  kTypeJson = 245,
  kTypeNewDecimal = 246,
  kTypeEnum = 247,
  kTypeSet = 248,
  kTypeTinyBlob = 249,
  kTypeMediumBlob = 250,
  kTypeLongBlob = 251,
  kTypeBlob = 252,
  kTypeVarString = 253,
  kTypeString = 254,
  kTypeGeometry = 255,
};

constexpr size_t kHeaderSize = 19;
constexpr uint16_t kFlagArtificial = 0x20;

uint32_t crc32(const void* data, size_t n, uint32_t crc = 0) noexcept;

struct Header {
  uint32_t timestamp = 0;
  uint8_t type = 0;
  uint32_t server_id = 0;
  uint32_t size = 0;
  uint32_t next_pos = 0;  // position after this event in its file (0 for artificial events)
  uint16_t flags = 0;
};

// One event: header and the bytes after it, without the checksum.
struct Event {
  Header header;
  std::string_view body;
};

// What ends an event: nothing, or a CRC32 to verify, or one already verified (the source's
// network reader checks it on its own thread) or not to be checked (`binlog.verify_checksum:
// false`), only stripped.
enum class Checksum : uint8_t { none, verify, strip };

// Splits `raw` into header and body; verifies (a mismatch is a data error) and strips the trailing
// CRC32 as `checksum` says. A FORMAT_DESCRIPTION event announces its own checksum algorithm: parse
// it with parse_format_description, which handles both.
Result<Event> parse_event(std::string_view raw, Checksum checksum);
inline Result<Event> parse_event(std::string_view raw, bool crc32_checksum) {
  return parse_event(raw, crc32_checksum ? Checksum::verify : Checksum::none);
}
// The event's views point into `raw`: a temporary would leave them dangling.
Result<Event> parse_event(std::string&& raw, Checksum checksum) = delete;
Result<Event> parse_event(std::string&& raw, bool crc32_checksum) = delete;
// Whether `raw` (a whole event) ends with the CRC32 of the bytes before it.
bool crc32_matches(std::string_view raw) noexcept;

// The network reader's check of a stream's CRC32s, event by event in stream order: whether the
// stream carries them follows the server's binlog_checksum at first, then each
// FORMAT_DESCRIPTION event's announcement — as the decoder follows it.
class StreamChecksums {
 public:
  explicit StreamChecksums(bool crc32) : crc32_(crc32) {}
  // True when `raw` carries a CRC32 and it matches (the decoder then only strips it); false for a
  // FORMAT_DESCRIPTION (it checks its own), an event without one, or a mismatch (the decoder
  // verifies again and reports it).
  bool verified(std::string_view raw);

 private:
  bool crc32_;
};

struct FormatDescription {
  uint16_t binlog_version = 4;
  std::string server_version;
  std::vector<uint8_t> post_header_len;  // index: event type - 1
  bool crc32 = false;                    // events after this one carry a CRC32
  bool mariadb = false;
  uint8_t post_header(uint8_t type, uint8_t fallback) const noexcept {
    return type >= 1 && type - 1u < post_header_len.size() ? post_header_len[type - 1u] : fallback;
  }
};

// `raw` is the whole event. Verifies its CRC32 when it announces one.
Result<FormatDescription> parse_format_description(std::string_view raw);

struct Rotate {
  uint64_t position = 0;
  std::string file;
};
Result<Rotate> parse_rotate(const Event& e);

struct Query {
  std::string_view database;
  std::string_view sql;
};
Result<Query> parse_query(const Event& e);

// MariaDB GTID_EVENT: domain-server-seq; begins a transaction (standalone: a single statement,
// DDL).
struct MariaGtid {
  uint64_t seq = 0;
  uint32_t domain = 0;
  uint32_t server_id = 0;
  bool standalone = false;
  std::string to_string() const;
};
Result<MariaGtid> parse_maria_gtid(const Event& e);

// MariaDB GTID_LIST: the binlog state at the start of a file.
Result<std::vector<MariaGtid>> parse_maria_gtid_list(const Event& e);

// MySQL GTID_LOG_EVENT: source uuid and transaction number ("uuid:gno").
struct MysqlGtid {
  uint8_t sid[16] = {};
  int64_t gno = 0;
  std::string to_string() const;
};
Result<MysqlGtid> parse_mysql_gtid(const Event& e);

struct TableMap {
  uint64_t table_id = 0;
  std::string database, table;
  std::vector<uint8_t> types;
  std::vector<uint16_t> meta;
  std::vector<uint8_t> nullable;  // one byte per column
  // Optional metadata (binlog_row_metadata=MINIMAL/FULL): empty when the server did not log it.
  std::vector<std::string> column_names;  // FULL
  std::vector<uint8_t> is_unsigned;       // per column (numeric columns only can be 1)
  bool same_shape(const TableMap& o) const { return types == o.types && meta == o.meta; }
};
Result<TableMap> parse_table_map(const Event& e, const FormatDescription& fd);

struct RowsEvent {
  enum class Kind : uint8_t { write, update, remove } kind = Kind::write;
  uint64_t table_id = 0;
  uint16_t flags = 0;
  uint32_t columns = 0;
  std::string_view present;        // bitmap of columns in the (before) image
  std::string_view present_after;  // update: bitmap of columns in the after image
  std::string_view rows;           // the row images
  static constexpr uint16_t kEndOfStatement = 1;
};
bool is_rows_event(uint8_t type) noexcept;
Result<RowsEvent> parse_rows(const Event& e, const FormatDescription& fd);

// What information_schema says about a column (the binlog does not carry it by default).
struct ColumnInfo {
  std::string name;
  bool is_unsigned = false;
  enum class Text : uint8_t { utf8, latin1, binary } text = Text::utf8;
  bool json = false;                // MariaDB JSON (LONGTEXT with json_valid) or MySQL JSON
  std::vector<std::string> labels;  // enum / set members, in order
};

// Zero dates of a row image (DATE/DATETIME with a zero year, month or day, TIMESTAMP 0: what a
// permissive sql_mode stores as `0000-00-00`): no date a record can hold. With a ZeroDates the
// decoder writes each as its text (`2024-00-15`, `0000-00-00 00:00:00`) and says which column was
// the first; without one they decode as null.
struct ZeroDates {
  static constexpr size_t kNone = SIZE_MAX;
  size_t first = kNone;  // column index of the row's first zero date
};

// What decoding a row image needs of the table map, its columns and the image's column bitmap,
// worked out once per rows event (every row of the event shares them): the columns the bitmap
// names, in order, each with its type as the image stores it (a STRING column's real type and
// length resolved from its metadata) and its ColumnInfo.
struct RowPlan {
  struct Step {
    const ColumnInfo* info = nullptr;
    uint32_t column = 0;
    uint16_t meta = 0;
    uint8_t type = 0;
    uint8_t kind = 0;  // dense(type): what decode_row switches on
  };
  // The column types made dense (0-31 stay, 245-255 become 32-42, anything else 0xff) so that
  // decode_row's switch is a jump table rather than a search through the types.
  static constexpr uint8_t dense(uint8_t type) noexcept {
    return type < 32 ? type : type >= 245 ? uint8_t(type - 245 + 32) : uint8_t(0xff);
  }
  std::vector<Step> steps;       // the columns in the image, in order
  std::vector<uint32_t> absent;  // the columns it leaves out: decoded as absent
};
// Fills `plan` (its vectors keep their capacity). `cols` may be shorter than the map (unknown
// columns decode with defaults: signed, utf8) and must outlive the plan. A data error when the
// bitmap is shorter than the map.
Status make_row_plan(const TableMap& map, const std::vector<ColumnInfo>& cols,
                     std::string_view present, RowPlan& plan);
// Decodes one row image starting at `data` by `plan` (made for `map`): fills out[i] for each of
// the map's columns (absent when the image leaves it out). Returns the bytes consumed. Text values
// (enum and set labels among them) are copied into `arena`.
Result<size_t> decode_row(const RowPlan& plan, const TableMap& map, std::string_view data,
                          Arena& arena, Value* out, ZeroDates* zero_dates = nullptr);
// The same into out[i].value (the names are left as they are): a row kept as fields, so that an
// image of every column, in order, becomes the record's object by one copy.
Result<size_t> decode_row(const RowPlan& plan, const TableMap& map, std::string_view data,
                          Arena& arena, Field* out, ZeroDates* zero_dates = nullptr);
// The same for one row: the plan made and used once.
Result<size_t> decode_row(const TableMap& map, const std::vector<ColumnInfo>& cols,
                          std::string_view present, std::string_view data, Arena& arena, Value* out,
                          ZeroDates* zero_dates = nullptr);
Result<size_t> decode_row(const TableMap& map, std::vector<ColumnInfo>&& cols,
                          std::string_view present, std::string_view data, Arena& arena, Value* out,
                          ZeroDates* zero_dates = nullptr) = delete;

// Decodes MySQL's binary JSON (column type JSON on MySQL 5.7+) to JSON text.
Result<std::string> mysql_json_to_text(std::string_view bin);

// Exact text of a binary DECIMAL(precision, scale); `size` receives its byte length.
Result<std::string> decode_decimal(const uint8_t* p, size_t avail, int precision, int scale,
                                   size_t* size);

// Reads a length-encoded integer; false when truncated.
bool read_lenenc(std::string_view& in, uint64_t* out) noexcept;

std::string to_hex(std::string_view bytes);
std::string from_hex(std::string_view hex);  // ignores whitespace; empty on error

}  // namespace sluice::mysql::binlog
