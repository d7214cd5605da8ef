// The MySQL source's row decoder alone: rows events of the benchmark table (bench/mysql's
// `employees`: INT, three utf8mb4 VARCHARs, BOOLEAN, DATE, FLOAT, two TIMESTAMP(6)) decoded into
// field arrays in a batch's arena, as handle_rows decodes a full image. Reports rows/s as
// items_per_second: the decoding share of binlog → discard, without the server or the network.
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>

#include "connectors/mysql/binlog.h"
#include "sluice/arena.h"

namespace sluice::mysql::binlog {
namespace {

void put_le(std::string& out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out += char((v >> (8 * i)) & 0xff);
}
void put_be(std::string& out, uint64_t v, int n) {
  for (int i = n - 1; i >= 0; --i) out += char((v >> (8 * i)) & 0xff);
}
void put_varchar(std::string& out, const std::string& s) {
  put_le(out, s.size(), 2);  // utf8mb4 VARCHAR(100) and (255): more than 255 bytes, 2-byte length
  out += s;
}

// One event's rows: `rows` images of the table, all columns present and not null.
std::string row_images(int first, int rows) {
  static const char* kPositions[] = {"Engineer", "Manager", "Analyst",
                                     "Designer", "Sales",   "Support"};
  std::string out;
  for (int id = first; id < first + rows; ++id) {
    put_le(out, 0, 2);  // null bitmap of 9 columns
    put_le(out, uint32_t(id), 4);
    put_varchar(out, "Employee " + std::to_string(id));
    put_varchar(out, "employee" + std::to_string(id) + "@example.com");
    out += char(id % 7 != 0);
    put_varchar(out, kPositions[id % 6]);
    const uint32_t y = 2015 + uint32_t(id % 10), m = 1 + uint32_t(id % 12),
                   d = 1 + uint32_t(id % 28);
    put_le(out, y << 9 | m << 5 | d, 3);
    const float salary = 30000.0f + float(id % 70000) * 1.25f;
    uint32_t bits;
    std::memcpy(&bits, &salary, 4);
    put_le(out, bits, 4);
    for (int t = 0; t < 2; ++t) {
      put_be(out, 1700000000u + uint32_t(id), 4);
      put_be(out, uint32_t(id % 1000000), 3);
    }
  }
  return out;
}

void BM_DecodeEmployeesRows(benchmark::State& state) {
  TableMap map;
  map.database = "bench";
  map.table = "employees";
  map.types = {kTypeLong, kTypeVarchar, kTypeVarchar,    kTypeTiny,      kTypeVarchar,
               kTypeDate, kTypeFloat,   kTypeTimestamp2, kTypeTimestamp2};
  map.meta = {0, 1020, 1020, 0, 400, 0, 4, 6, 6};
  std::vector<ColumnInfo> cols(map.types.size());
  for (size_t i = 0; i < cols.size(); ++i) cols[i].name = "c" + std::to_string(i);
  RowPlan plan;
  if (!make_row_plan(map, cols, std::string("\xff\x01", 2), plan).ok()) {
    state.SkipWithError("make_row_plan failed");
    return;
  }
  constexpr int kRows = 1000;  // about what a 1,000-row transaction's events hold
  const std::string data = row_images(1, kRows);
  const size_t n = map.types.size();
  Arena arena;
  for (auto _ : state) {
    std::string_view rest = data;
    for (int r = 0; r < kRows; ++r) {
      Field* f = arena.allocate_array<Field>(n);
      auto used = decode_row(plan, map, rest, arena, f);
      if (!used.ok()) {
        state.SkipWithError(used.error().message().c_str());
        return;
      }
      rest.remove_prefix(used.value());
    }
    benchmark::DoNotOptimize(rest.data());
    arena.reset();
  }
  state.SetItemsProcessed(state.iterations() * kRows);
}
BENCHMARK(BM_DecodeEmployeesRows);

}  // namespace
}  // namespace sluice::mysql::binlog
