// The snapshot's chunk sizing (ChunkSizer): chunks fill the room left in a batch without running
// over it, from the densest pages seen; sparse stretches of the heap grow the chunks.
#include <gtest/gtest.h>

#include "connectors/postgres/postgres_source_driver.h"

namespace sluice::pg {
namespace {

constexpr uint64_t kBig = uint64_t(1) << 40;

TEST(ChunkSizer, WithoutAnEstimateReadsOnePageThenMeasures) {
  ChunkSizer s;
  s.start_table(0);
  EXPECT_EQ(s.pages(10000, kBig, true), 1u);
  s.chunk_read(1, 100, 8000);
  EXPECT_EQ(s.pages(10000, kBig, true), 100u);
  EXPECT_EQ(s.pages(9900, kBig, false), 99u);
}

TEST(ChunkSizer, AChunkNeverPlansBeyondTheRoomLeft) {
  ChunkSizer s;
  s.start_table(100);
  EXPECT_EQ(s.pages(10000, kBig, true), 100u);
  EXPECT_EQ(s.pages(99, kBig, false), 0u) << "not one page fits: the batch ends first";
  EXPECT_EQ(s.pages(99, kBig, true), 1u) << "an empty batch takes one page anyway";
  s.chunk_read(1, 100, 80000);  // 80 kB per page (TOASTed values)
  EXPECT_EQ(s.pages(10000, 800000, true), 10u) << "bytes bound it too";
  // The densest page seen counts: a denser stretch lowers later chunks.
  s.chunk_read(10, 2000, 800000);
  EXPECT_EQ(s.pages(10000, kBig, true), 50u);
}

TEST(ChunkSizer, SparsePagesGrowTheChunkDensePagesResetIt) {
  ChunkSizer s;
  s.start_table(100);
  s.chunk_read(100, 0, 0);  // all rows deleted
  EXPECT_EQ(s.pages(10000, kBig, false), 200u);
  s.chunk_read(200, 10, 800);
  EXPECT_EQ(s.pages(10000, kBig, false), 400u);
  for (int i = 0; i < 20; ++i) s.chunk_read(400, 0, 0);
  EXPECT_EQ(s.pages(10000, kBig, false), ChunkSizer::kMaxPages);
  s.chunk_read(100, 10000, 800000);
  EXPECT_EQ(s.pages(10000, kBig, false), 100u);
  s.start_table(0);
  EXPECT_EQ(s.pages(10000, kBig, true), 1u) << "a new table starts afresh";
}

}  // namespace
}  // namespace sluice::pg
