// RowsDecodePool without a server: the row images of captured events (binlog_test.cc's capture,
// written out again here as the events' rows) decoded on helper threads come out as the caller's
// own decode_row makes them, each job's in its place; the caller decodes what no helper took;
// drain() drops what was not taken and the decoded memory outlives the helpers' next round.
#include "connectors/mysql/binlog_decode_pool.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sluice::mysql {
namespace {

// A table of an INT, a VARCHAR and a DATETIME2(0): every row image is 1 null byte, 4 bytes, a
// length byte and the text, 5 bytes of packed DATETIME2.
struct Table {
  bl::TableMap map;
  std::vector<bl::ColumnInfo> cols;
  std::vector<std::string_view> names{"id", "name", "at"};
  Table() {
    map.types = {3 /*LONG*/, 15 /*VARCHAR*/, 18 /*DATETIME2*/};
    map.meta = {0, 200, 0};
    map.nullable = {0, 1, 1};
    for (std::string_view n : names) {
      bl::ColumnInfo c;
      c.name = std::string(n);
      cols.push_back(c);
    }
  }
};

void put_row(std::string& out, int32_t id, const std::string& name, bool null_at) {
  out.push_back(char(null_at ? 0x04 : 0x00));  // the null bitmap: column 3 null
  for (int i = 0; i < 4; ++i) out.push_back(char((uint32_t(id) >> (8 * i)) & 0xff));
  out.push_back(char(name.size()));
  out += name;
  if (!null_at) {
    // DATETIME2(0) 2024-05-06 07:08:09: 1 sign bit, 17 bits year*13+month, 5 day, 5 hour, 6
    // minute, 6 second, big-endian in 5 bytes.
    const uint64_t ym = 2024 * 13 + 5;
    const uint64_t v = (1ull << 39) | (ym << 22) | (6ull << 17) | (7ull << 12) | (8ull << 6) | 9;
    for (int i = 4; i >= 0; --i) out.push_back(char((v >> (8 * i)) & 0xff));
  }
}

// Event e's rows: e % 5 + 1 rows (an update event holds pairs: before, after).
std::string event_rows(int e, bool update) {
  std::string s;
  for (int r = 0; r <= e % 5; ++r) {
    put_row(s, e * 10 + r, "row " + std::to_string(e) + "." + std::to_string(r), r % 2 == 1);
    if (update) put_row(s, e * 10 + r, "new " + std::to_string(e), false);
  }
  return s;
}

struct Expected {
  std::vector<std::vector<Value>> before, after;
};

Expected reference(const Table& t, const bl::RowPlan& plan, std::string_view data, bool update,
                   Arena& arena) {
  Expected x;
  while (!data.empty()) {
    std::vector<Value> v(3);
    auto used = bl::decode_row(plan, t.map, data, arena, v.data());
    EXPECT_TRUE(used.ok());
    if (!used.ok()) break;
    data.remove_prefix(used.value());
    x.before.push_back(v);
    if (update) {
      auto used2 = bl::decode_row(plan, t.map, data, arena, v.data());
      EXPECT_TRUE(used2.ok());
      if (!used2.ok()) break;
      data.remove_prefix(used2.value());
      x.after.push_back(v);
    }
  }
  return x;
}

TEST(RowsDecodePool, HelpersDecodeWhatTheCallerWouldInItsPlace) {
  Table t;
  const std::string all(1, char(0x07));  // every column in the image
  bl::RowPlan plan;
  ASSERT_TRUE(bl::make_row_plan(t.map, t.cols, all, plan).ok());
  constexpr int kEvents = 300;
  std::vector<std::string> events;
  for (int e = 0; e < kEvents; ++e) events.push_back(event_rows(e, e % 3 == 0));
  Arena ref_arena;
  std::vector<Expected> want;
  for (int e = 0; e < kEvents; ++e)
    want.push_back(reference(t, plan, events[e], e % 3 == 0, ref_arena));
  ASSERT_EQ(want[4].before.size(), 5u);

  RowsDecodePool pool(3);
  Arena batch;
  // What the first round decoded, kept to be checked after the second (the helpers' arenas are
  // reused there: what drain() handed to `batch` must stay as it was).
  std::vector<std::pair<const Field*, const Field*>> kept;
  for (int round = 0; round < 2; ++round) {
    std::vector<RowsDecodePool::Job*> jobs;
    for (int e = 0; e < kEvents; ++e) {
      RowsDecodePool::Job& j = pool.next();
      j.map = &t.map;
      j.names = &t.names;
      j.before = plan;
      j.after = plan;
      j.update = e % 3 == 0;
      j.rows = events[e];
      pool.queue(j);
      jobs.push_back(&j);
    }
    EXPECT_EQ(pool.outstanding(), size_t(kEvents));
    // The second round takes back half and drops the rest.
    const int take = round == 0 ? kEvents : kEvents / 2;
    for (int e = 0; e < take; ++e) {
      const RowsDecodePool::Job& j = pool.take(*jobs[e], batch);
      ASSERT_TRUE(j.status.ok()) << j.status.error().message();
      ASSERT_EQ(j.out.size(), want[e].before.size()) << e;
      for (size_t r = 0; r < j.out.size(); ++r) {
        for (size_t c = 0; c < 3; ++c) {
          EXPECT_EQ(j.out[r].before[c].name, t.names[c]);
          EXPECT_EQ(j.out[r].before[c].value, want[e].before[r][c]) << e << " " << r << " " << c;
          if (j.update) {
            EXPECT_EQ(j.out[r].after[c].value, want[e].after[r][c]) << e << " " << r;
          }
        }
        EXPECT_EQ(j.out[r].after != nullptr, j.update);
        if (round == 0) kept.emplace_back(j.out[r].before, j.out[r].after);
      }
    }
    pool.drain(batch);
    EXPECT_EQ(pool.outstanding(), 0u);
  }
  size_t k = 0;
  for (int e = 0; e < kEvents; ++e)
    for (size_t r = 0; r < want[e].before.size(); ++r, ++k)
      for (size_t c = 0; c < 3; ++c) {
        ASSERT_EQ(kept[k].first[c].value, want[e].before[r][c]) << e << " " << r;
        if (kept[k].second) {
          ASSERT_EQ(kept[k].second[c].value, want[e].after[r][c]) << e << " " << r;
        }
      }
}

TEST(RowsDecodePool, ABadRowStopsItsJobAfterTheRowsBeforeIt) {
  Table t;
  bl::RowPlan plan;
  ASSERT_TRUE(bl::make_row_plan(t.map, t.cols, std::string(1, char(0x07)), plan).ok());
  std::string rows;
  put_row(rows, 1, "one", false);
  put_row(rows, 2, "two", true);
  rows += std::string("\x00\x01\x02", 3);  // a third row cut short
  RowsDecodePool pool(1);
  RowsDecodePool::Job& j = pool.next();
  j.map = &t.map;
  j.names = &t.names;
  j.before = plan;
  j.rows = rows;
  pool.queue(j);
  Arena batch;
  const RowsDecodePool::Job& done = pool.take(j, batch);
  EXPECT_FALSE(done.status.ok());
  ASSERT_EQ(done.out.size(), 2u);
  EXPECT_EQ(done.out[1].before[0].value, Value::int64(2));
  EXPECT_EQ(done.out[1].before[2].value, Value::null());
  pool.drain(batch);
}

}  // namespace
}  // namespace sluice::mysql
