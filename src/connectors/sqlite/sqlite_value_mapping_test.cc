#include "connectors/sqlite/sqlite_value_mapping.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace sluice {
namespace {

using sqlite_destination::bind_value;

// Binds a value to `SELECT ?1` and reads back what SQLite received.
class BoundText {
 public:
  BoundText() {
    EXPECT_EQ(sqlite3_open(":memory:", &db_), SQLITE_OK);
    EXPECT_EQ(sqlite3_prepare_v2(db_, "SELECT ?1", -1, &st_, nullptr), SQLITE_OK);
  }
  ~BoundText() {
    sqlite3_finalize(st_);
    sqlite3_close(db_);
  }
  BoundText(const BoundText&) = delete;
  BoundText& operator=(const BoundText&) = delete;

  std::string operator()(const Value& v) {
    EXPECT_EQ(bind_value(st_, 1, v, scratch_), SQLITE_OK);
    EXPECT_EQ(sqlite3_step(st_), SQLITE_ROW);
    std::string out(reinterpret_cast<const char*>(sqlite3_column_text(st_, 0)),
                    size_t(sqlite3_column_bytes(st_, 0)));
    sqlite3_reset(st_);
    return out;
  }

 private:
  sqlite3* db_ = nullptr;
  sqlite3_stmt* st_ = nullptr;
  std::string scratch_;
};

constexpr int64_t kDay = 86400LL * 1000000LL;

std::vector<int64_t> sample_micros() {
  std::vector<int64_t> v = {0,
                            1,
                            -1,
                            999999,
                            1000000,
                            kDay - 1,
                            kDay,
                            -kDay,
                            -kDay - 1,
                            1709214300123456,     // 2024-02-29T13:45:00.123456
                            1709214300120000,     // trailing zeros trimmed
                            1709214300000000,     // no fraction
                            -62135596800000000,   // 0001-01-01
                            -62167219200000000,   // 0000-01-01
                            -62167219200000001,   // year -1: the slow path
                            253402300799999999,   // 9999-12-31T23:59:59.999999
                            253402300800000000};  // 10000-01-01: the slow path
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<int64_t> any(-70000000000000000, 300000000000000000);
  for (int i = 0; i < 20000; ++i) v.push_back(any(rng));
  return v;
}

TEST(SqliteValueMappingTest, TemporalTextIsExactlyTheCanonicalFormat) {
  BoundText bound;
  for (int64_t us : sample_micros()) {
    ASSERT_EQ(bound(Value::timestamp(us)), format_timestamp(us)) << us;
    ASSERT_EQ(bound(Value::timestamptz(us)), format_timestamptz(us)) << us;
    int64_t days = us / kDay;
    if (days >= INT32_MIN && days <= INT32_MAX) {
      ASSERT_EQ(bound(Value::date(int32_t(days))), format_date(int32_t(days))) << days;
    }
    int64_t t = ((us % kDay) + kDay) % kDay;
    ASSERT_EQ(bound(Value::time(t)), format_time(t)) << t;
  }
  for (int32_t d : {INT32_MIN, INT32_MAX, -719528, -719529, 2932896, 2932897})
    ASSERT_EQ(bound(Value::date(d)), format_date(d)) << d;
  ASSERT_EQ(bound(Value::time(kDay)), format_time(kDay));  // 24:00:00, the slow path
}

TEST(SqliteValueMappingTest, ColumnTypes) {
  using sqlite_destination::column_type_for;
  EXPECT_EQ(column_type_for(ValueKind::int64), "INTEGER");
  EXPECT_EQ(column_type_for(ValueKind::boolean), "INTEGER");
  EXPECT_EQ(column_type_for(ValueKind::float64), "REAL");
  EXPECT_EQ(column_type_for(ValueKind::decimal), "TEXT");
  EXPECT_EQ(column_type_for(ValueKind::bytes), "BLOB");
  EXPECT_EQ(column_type_for(ValueKind::uint64), "");
  EXPECT_EQ(column_type_for(ValueKind::null), "");
  EXPECT_EQ(column_type_for(ValueKind::object), "TEXT");
}

}  // namespace
}  // namespace sluice
