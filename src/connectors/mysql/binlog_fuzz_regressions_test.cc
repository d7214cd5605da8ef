// Inputs found by fuzz/binlog_fuzz.cc, reduced to the row image that triggered them: each must be
// a data error (or decode exactly), never undefined behaviour.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "connectors/mysql/binlog.h"

namespace sluice::mysql::binlog {
namespace {

// Decodes a one-column row image of `type` (meta 0, not null) holding `bytes`.
Result<size_t> decode_one(uint8_t type, const std::string& bytes, Value* out) {
  TableMap map;
  map.types = {type};
  map.meta = {0};
  map.nullable = {1};
  const std::string image = std::string(1, '\0') + bytes;  // null bitmap: not null
  const std::string present(1, '\x01');
  Arena arena;
  const std::vector<ColumnInfo> columns;  // an lvalue: decoded values may view the columns
  return decode_row(map, columns, present, image, arena, out);
}

// The old DATETIME: YYYYMMDDhhmmss in 8 little-endian bytes.
std::string le64(uint64_t v) {
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>(v >> (8 * i) & 0xff));
  return s;
}

TEST(BinlogFuzzRegressions, OldDatetimeDecodes) {
  Value v;
  auto used = decode_one(kTypeDatetime, le64(20240229134500ULL), &v);
  ASSERT_TRUE(used.ok()) << used.error().message();
  EXPECT_EQ(used.value(), 9u);
  EXPECT_EQ(v, Value::timestamp(int64_t(days_from_civil(2024, 2, 29)) * 86400000000LL +
                                ((13 * 60 + 45) * 60) * 1000000LL));
}

TEST(BinlogFuzzRegressions, OldDatetimeYearBeyond9999IsADataError) {
  Value v;
  // Year 854652249: its day count wraps in int32 and the microseconds overflow int64.
  auto used = decode_one(kTypeDatetime, le64(8546522490101000000ULL), &v);
  ASSERT_FALSE(used.ok());
  EXPECT_EQ(used.error().code(), Errc::data);
}

TEST(BinlogFuzzRegressions, NegativeDatetime2IsADataError) {
  Value v;
  // The fuzzer's: stored value 0x7fffffffff is -1 after the 0x8000000000 bias, so month -1.
  auto used = decode_one(kTypeDatetime2, std::string("\x7f\xff\xff\xff\xff", 5), &v);
  ASSERT_FALSE(used.ok());
  EXPECT_EQ(used.error().code(), Errc::data);
  // 2024-02-29 13:45:00 decodes (year*13+month, day, h, m, s packed after the bias).
  const uint64_t ymd = (2024 * 13 + 2) << 5 | 29, hms = 13 << 12 | 45 << 6;
  const uint64_t packed = (ymd << 17 | hms) + 0x8000000000ULL;
  std::string be;
  for (int i = 4; i >= 0; --i) be.push_back(static_cast<char>(packed >> (8 * i) & 0xff));
  auto ok = decode_one(kTypeDatetime2, be, &v);
  ASSERT_TRUE(ok.ok()) << ok.error().message();
  EXPECT_EQ(v, Value::timestamp(int64_t(days_from_civil(2024, 2, 29)) * 86400000000LL +
                                ((13 * 60 + 45) * 60) * 1000000LL));
}

}  // namespace
}  // namespace sluice::mysql::binlog
