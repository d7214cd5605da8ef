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
  s.chunk_read(1, 100, 8000);
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
  s.chunk_read(1, 100, 8000);
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

// A chunk is held whole in memory until it is parsed: before any row of the table was read, what
// a page's rows hold is unknown (the catalogue counts rows, not the bytes of their out-of-line or
// compressed values), so the first chunk is one page, whatever the estimate.
TEST(ChunkSizer, TheFirstChunkIsOnePageUntilBytesPerPageAreKnown) {
  ChunkSizer s;
  s.start_table(150);  // 150 rows per page: each row's 1 MB value is out of line
  EXPECT_EQ(s.pages(10000, 64 << 20, true), 1u);
  EXPECT_EQ(s.pages(10000, 64 << 20, false), 1u);
  s.chunk_read(1, 150, 150 << 20);
  EXPECT_EQ(s.pages(10000, 64 << 20, true), 1u) << "a page's rows are more than the room";
  EXPECT_EQ(s.pages(10000, 64 << 20, false), 0u);
  // An empty page tells nothing of the bytes: the next chunk is still small (grown over it).
  s.start_table(150);
  s.chunk_read(1, 0, 0);
  EXPECT_EQ(s.pages(10000, 64 << 20, true), 2u);
}

// A chunk grown over sparse pages may meet dense ones: it stays within kGrownRooms rooms at the
// densest bytes per page known, measured or, before any row, the table's size on disk.
TEST(ChunkSizer, AGrownChunkStaysWithinItsBytes) {
  ChunkSizer s;
  s.start_table(100);
  s.chunk_read(10, 1000, 10 << 20);  // 1 MiB per page
  for (int i = 0; i < 20; ++i) s.chunk_read(64, 0, 0);
  EXPECT_EQ(s.pages(10000, 16 << 20, true), 16u * ChunkSizer::kGrownRooms);
  EXPECT_EQ(s.pages(10000, kBig, true), ChunkSizer::kMaxPages) << "small rows grow as before";
  // Not one row read yet, every page so far empty: the size on disk bounds the growth.
  s.start_table(100, 4 << 20);  // 4 MiB of TOAST per heap page
  for (int i = 0; i < 20; ++i) s.chunk_read(64, 0, 0);
  EXPECT_EQ(s.pages(10000, 16 << 20, true), 4u * ChunkSizer::kGrownRooms);
}

// A chunk sized before any of the table was read, or grown over sparse pages, is a guess: it is
// read with ctids and split into batches at heap pages (pg_snapshot.cc). Sized from pages read at
// the density expected, it is not.
TEST(ChunkSizer, ItGuessesUntilItMeasuredAndAfterSparsePages) {
  ChunkSizer s;
  s.start_table(100);
  EXPECT_TRUE(s.guessing()) << "the catalogue's estimate may be stale";
  s.chunk_read(100, 10000, 800000);
  EXPECT_FALSE(s.guessing());
  s.chunk_read(100, 0, 0);
  EXPECT_TRUE(s.guessing()) << "the next chunk is grown";
  s.chunk_read(200, 20000, 1600000);
  EXPECT_FALSE(s.guessing());
  s.start_table(0);
  EXPECT_TRUE(s.guessing()) << "a new table starts afresh";
}

// The first snapshot kept in a snapshot position: pg_current_snapshot()'s text, and what it sees.
TEST(XidSnapshot, ParsesPgCurrentSnapshotAndTellsWhatItSees) {
  auto x = XidSnapshot::parse("100:105:100,103");
  ASSERT_TRUE(x);
  EXPECT_EQ(x->xmin, 100u);
  EXPECT_EQ(x->xmax, 105u);
  EXPECT_EQ(x->xip, (std::vector<uint64_t>{100, 103}));
  EXPECT_TRUE(x->sees(2));  // a frozen tuple's xmin before 9.4 (FrozenTransactionId)
  EXPECT_TRUE(x->sees(99));
  EXPECT_FALSE(x->sees(100));  // in progress
  EXPECT_TRUE(x->sees(101));
  EXPECT_FALSE(x->sees(103));
  EXPECT_TRUE(x->sees(104));
  EXPECT_FALSE(x->sees(105));  // not yet begun
  EXPECT_EQ(x->sees_sql("x"), "(x < 100 OR (x < 105 AND x <> ALL ('{100,103}'::bigint[])))");
  auto idle = XidSnapshot::parse("7:7:");
  ASSERT_TRUE(idle);
  EXPECT_TRUE(idle->xip.empty());
  EXPECT_EQ(idle->sees_sql("x"), "(x < 7)");
  EXPECT_TRUE(XidSnapshot::parse("4294967296:4294967300:4294967297"));  // epoch 1
  // A slot's exported snapshot can have xmin above xmax: below xmin is seen (XidInMVCCSnapshot
  // tests xmin first).
  auto exported = XidSnapshot::parse("33496:33469:");
  ASSERT_TRUE(exported);
  EXPECT_TRUE(exported->sees(33470));
  EXPECT_TRUE(exported->sees(33495));
  EXPECT_FALSE(exported->sees(33496));
  EXPECT_EQ(exported->sees_sql("x"), "(x < 33496)");
  for (const char* bad : {"", "1", "1:2", "2:1:5", "1:5:0", "1:5:5", "1:5:3,2", "1:5:3,3", "1:5:3,",
                          "a:5:", "1:5:x", "1:5:,3"})
    EXPECT_FALSE(XidSnapshot::parse(bad)) << bad;
}

}  // namespace
}  // namespace sluice::pg
