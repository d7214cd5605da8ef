// The mysql source's schema history: each captured table's columns (name, type, order, key) as of
// each DDL position, so that a row event is decoded with the columns it was written with — with
// the server default binlog_row_metadata = NO_LOG/MINIMAL a row event carries no column names,
// and the server's catalogue is already at a later state when older events are replayed.
//
//   seeded        snapshot start (or the first stream start): the catalogue at a known position
//   appended      each DDL on a captured table (ALTER / CREATE / DROP / RENAME), at the position
//                 after the DDL event, computed from the statement (mysql_ddl_parse.h)
//   read          stream start (and every reconnect): each table's latest entry at or before the
//                 start position
//   persisted     in the checkpoint store beside the pipeline's position (ConnectorContext::
//                 history), written before any record after the DDL is returned
//
// Entries are only appended (a replayed DDL replaces its own entry with the same result), so a
// history written ahead of the checkpoint is always safe to read from an older position. The one
// exception: a table taken out of `tables` loses its entries ahead of the checkpoint (the stream
// no longer follows it) and gets a null entry there, so listed again it counts as added.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "connectors/common/log_position.h"
#include "connectors/mysql/binlog.h"
#include "connectors/mysql/mysql_ddl_parse.h"
#include "sluice/schema_change.h"

namespace sluice::mysql {

namespace bl = binlog;

struct TableSchema {
  std::string db, table;
  std::vector<bl::ColumnInfo> cols;
  std::vector<std::string> data_types;    // information_schema DATA_TYPE (snapshot text conversion)
  std::vector<std::string> column_types;  // COLUMN_TYPE (schema records' types; widening checks)
  std::vector<uint32_t> key;              // primary key columns (indexes into cols)
  std::string charset;                    // the table's default character set
  // The key comes from message.key.columns (the table has no primary key): it is the records'
  // key, but not unique, so the snapshot pages by offset rather than by it.
  bool key_from_setting = false;
};

// A column's decoding facts from its type and character set (the table's when `charset` is empty).
bl::ColumnInfo column_info(const std::string& name, const std::string& data_type,
                           const std::string& column_type, const std::string& charset,
                           const std::string& table_charset);

// One column change an ALTER made, as the schema record will carry it.
struct ColumnChange {
  SchemaChangeKind kind = SchemaChangeKind::add_column;
  std::string column, to, type, from;
  bool has_default = false;
  std::string default_text;  // add_column with has_default: the value old rows read, as text
  // add_column: why the rows that existed read values only the server knows (an expression
  // DEFAULT, AUTO_INCREMENT, a generated column); empty: none. Only a re-read of the table (an
  // incremental snapshot) tells them.
  std::string reread;
  // add_column: the new column's decoding facts and data type (the default is read as such).
  bl::ColumnInfo info;
  std::string data_type;
};

// Applies the ALTER TABLE `st` to `old`: the new schema (renamed when a clause renames the table)
// and the column changes in order; an error message (what sluice cannot follow) otherwise.
Result<std::shared_ptr<TableSchema>> apply_alter(const TableSchema& old, const ddl::Statement& st,
                                                 std::vector<ColumnChange>* changes);
// The schema a CREATE TABLE with a column list defines.
std::shared_ptr<TableSchema> schema_from_create(const ddl::Statement& st);

// Whether a TABLE_MAP column type code can hold the column `data_type` (an unknown data type fits).
bool map_type_fits(uint8_t map_type, std::string_view data_type);

bool coord_before_or_at(const BinlogCoord& a, const BinlogCoord& b);

class SchemaHistory {
 public:
  // The table's schema at `at`: its latest entry at or before it; nullopt when it has none, a null
  // pointer when the table was dropped there.
  std::optional<std::shared_ptr<const TableSchema>> at(const std::string& table_key,
                                                       const BinlogCoord& at) const;
  // Records the table's schema from `at` on (null: dropped); replaces an entry at the same point.
  void record(const std::string& table_key, const BinlogCoord& at,
              std::shared_ptr<const TableSchema> schema);
  // Forgets what no read at or after `at` needs: each table's entries before its latest one at or
  // before `at` (a pipeline never resumes before its checkpoint). True when it removed any.
  bool prune_before(const BinlogCoord& at);
  // Forgets the table's entries after `at` (written ahead of the checkpoint by a run that stopped
  // before its checkpoint moved past them); a table left with none is forgotten. True when it
  // removed any.
  bool forget_after(const std::string& table_key, const BinlogCoord& at);
  std::vector<std::string> tables() const;
  void clear() {
    tables_.clear();
    copy_pending_.clear();
  }
  bool empty() const { return tables_.empty(); }

  // Tables added to `tables` (or listed again) whose incremental snapshot has not completed yet.
  // Their entries are written at the stream's start, before any checkpoint records the pending
  // snapshot: a run stopped in between leaves the next one a table with an entry at its
  // checkpoint, which alone would make it look captured all along. Saved with the history.
  bool copy_pending(const std::string& table_key) const {
    return copy_pending_.count(table_key) != 0;
  }
  // True when the set changed.
  bool set_copy_pending(const std::string& table_key, bool pending);

  std::string encode() const;
  static Result<SchemaHistory> decode(std::string_view text);

 private:
  struct Entry {
    BinlogCoord at;
    std::shared_ptr<const TableSchema> schema;
  };
  std::map<std::string, std::vector<Entry>> tables_;
  std::set<std::string> copy_pending_;
};

}  // namespace sluice::mysql
