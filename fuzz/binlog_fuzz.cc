// libFuzzer target: the binlog event decoder (src/connectors/mysql/binlog.h). The input is a run
// of events as a replica receives them (each event's size is in its header). The harness keeps the
// stream state the mysql source keeps — the FORMAT_DESCRIPTION (checksum on/off, post-header sizes)
// and the TABLE_MAPs by table id — and decodes every row image of a rows event the way
// mysql_source.cc does (before image, and the after image of an update). JSON columns also go
// through mysql_json_to_text.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string_view>
#include <vector>

#include "connectors/mysql/binlog.h"
#include "sluice/arena.h"

namespace bl = sluice::mysql::binlog;

namespace {

uint32_t le32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

void decode_rows(const bl::Event& e, const bl::FormatDescription& fd,
                 const std::map<uint64_t, bl::TableMap>& maps, sluice::Arena& arena) {
  auto rows = bl::parse_rows(e, fd);
  if (!rows.ok()) return;
  auto it = maps.find(rows->table_id);
  if (it == maps.end()) return;
  const bl::TableMap& map = it->second;
  // Column facts from information_schema: vary them with the table id so both the defaults and
  // the unsigned / JSON / enum paths are reached.
  std::vector<bl::ColumnInfo> cols(map.types.size());
  for (size_t i = 0; i < cols.size(); ++i) {
    cols[i].is_unsigned = (rows->table_id >> (i % 8)) & 1;
    cols[i].json = map.types[i] == bl::kTypeBlob && (rows->table_id & 2);
    if (map.types[i] == bl::kTypeString) cols[i].labels = {"a", "b", "c"};
  }
  std::vector<sluice::Value> before(map.types.size()), after(map.types.size());
  std::string_view data = rows->rows;
  while (!data.empty()) {
    auto used = bl::decode_row(map, cols, rows->present, data, arena, before.data());
    if (!used.ok() || used.value() == 0 || used.value() > data.size()) return;
    data.remove_prefix(used.value());
    if (rows->kind == bl::RowsEvent::Kind::update) {
      auto used2 = bl::decode_row(map, cols, rows->present_after, data, arena, after.data());
      if (!used2.ok() || used2.value() == 0 || used2.value() > data.size()) return;
      data.remove_prefix(used2.value());
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<char[]> copy(new char[size ? size : 1]);
  if (size) std::memcpy(copy.get(), data, size);
  std::string_view in(copy.get(), size);

  bl::FormatDescription fd;  // before any FORMAT_DESCRIPTION: binlog v4 defaults, no checksum
  std::map<uint64_t, bl::TableMap> maps;
  sluice::Arena arena(4096);
  while (in.size() >= bl::kHeaderSize) {
    size_t n = le32(in.data() + 9);
    if (n < bl::kHeaderSize || n > in.size()) n = in.size();
    const std::string_view raw = in.substr(0, n);
    in.remove_prefix(n);
    if (static_cast<uint8_t>(raw[4]) == bl::kFormatDescription) {
      auto f = bl::parse_format_description(raw);
      if (f.ok()) fd = std::move(f).value();
      continue;
    }
    auto ev = bl::parse_event(raw, fd.crc32);
    if (!ev.ok()) continue;
    const bl::Event& e = ev.value();
    switch (e.header.type) {
      case bl::kRotate: (void)bl::parse_rotate(e); break;
      case bl::kQuery: (void)bl::parse_query(e); break;
      case bl::kMariaGtid: (void)bl::parse_maria_gtid(e); break;
      case bl::kMariaGtidList: (void)bl::parse_maria_gtid_list(e); break;
      case bl::kMysqlGtid: {
        auto g = bl::parse_mysql_gtid(e);
        if (g.ok()) (void)g->to_string();
        break;
      }
      case bl::kTableMap: {
        auto m = bl::parse_table_map(e, fd);
        if (m.ok()) maps[m->table_id] = std::move(m).value();
        break;
      }
      default:
        if (bl::is_rows_event(e.header.type)) decode_rows(e, fd, maps, arena);
        else (void)bl::mysql_json_to_text(e.body);  // any other body: the binary JSON decoder
    }
  }
  return 0;
}
