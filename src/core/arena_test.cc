#include "sluice/arena.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

namespace sluice {
namespace {

TEST(Arena, ResetHandsOutTheSameChunksAgainInOrder) {
  Arena a(1024);
  std::set<uintptr_t> first;
  for (int i = 0; i < 100; ++i) first.insert(reinterpret_cast<uintptr_t>(a.allocate(100, 8)));
  const size_t reserved = a.reserved();
  EXPECT_GE(reserved, 100u * 100u);
  a.reset();
  EXPECT_EQ(a.used(), 0u);
  EXPECT_EQ(a.reserved(), reserved);  // kept, not freed
  // The same sequence lands in the same memory: no new chunk.
  for (int i = 0; i < 100; ++i)
    EXPECT_TRUE(first.count(reinterpret_cast<uintptr_t>(a.allocate(100, 8)))) << i;
  EXPECT_EQ(a.reserved(), reserved);
}

TEST(Arena, LargeAllocationsHaveTheirOwnChunkFreedOnReset) {
  Arena a(1024);
  char* small = static_cast<char*>(a.allocate(10, 1));
  std::memset(small, 'x', 10);
  char* big = static_cast<char*>(a.allocate(5000, 16));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big) % 16, 0u);
  std::memset(big, 'y', 5000);
  // The current chunk stays current: the next small allocation follows the first.
  char* next = static_cast<char*>(a.allocate(10, 1));
  EXPECT_EQ(next, small + 10);
  EXPECT_EQ(a.used(), 5020u);
  const size_t with_big = a.reserved();
  a.reset();
  EXPECT_EQ(a.reserved(), with_big - (5000 + 16));
  EXPECT_EQ(std::string(a.copy("abc")), "abc");
}

TEST(Arena, ResetKeepsAtMostKeepBytes) {
  Arena a(64 * 1024);
  for (size_t i = 0; i < 2 * Arena::kKeepBytes / (32 * 1024); ++i) a.allocate(32 * 1024, 8);
  EXPECT_GT(a.reserved(), Arena::kKeepBytes);
  a.reset();
  EXPECT_LE(a.reserved(), Arena::kKeepBytes);
  EXPECT_GT(a.reserved(), 0u);
}

TEST(Arena, UsedCountsEveryChunk) {
  Arena a(256);
  size_t total = 0;
  for (int i = 0; i < 50; ++i) {
    a.allocate(40, 1);
    total += 40;
  }
  EXPECT_EQ(a.used(), total);
}

TEST(Arena, AdoptKeepsTheOtherArenasMemoryUntilReset) {
  Arena batch(1024), worker(1024);
  const std::string_view mine = batch.copy("batch's own");
  std::vector<std::string_view> theirs;
  for (int i = 0; i < 40; ++i) theirs.push_back(worker.copy(std::string(100, char('a' + i % 26))));
  const std::string_view big = worker.copy(std::string(5000, 'z'));
  const size_t worker_used = worker.used();
  const size_t before = batch.reserved() + worker.reserved();
  batch.adopt(worker);
  EXPECT_EQ(batch.used(), mine.size() + worker_used);
  EXPECT_EQ(worker.used(), 0u);
  EXPECT_EQ(batch.reserved() + worker.reserved(), before);  // moved, nothing freed or copied
  // The worker starts afresh: what it hands out now is not in the adopted memory.
  const std::string_view again = worker.copy(std::string(100, '#'));
  for (size_t i = 0; i < theirs.size(); ++i)
    EXPECT_EQ(theirs[i], std::string(100, char('a' + i % 26))) << i;
  EXPECT_EQ(big, std::string(5000, 'z'));
  EXPECT_EQ(again, std::string(100, '#'));
  // The batch's own chunk stays current, and a reset frees what it adopted.
  const std::string_view next = batch.copy("x");
  EXPECT_EQ(next.data(), mine.data() + mine.size());
  batch.reset();
  EXPECT_EQ(batch.reserved(), 1024u);
}

// Short strings copied in fixed-size moves: each comes out exact however many bytes around it were
// read or written, the arena counts only its bytes, and near a chunk's end, or with less than the
// padded copy readable, it falls back to copy() (ASan and the tests' sanitizer builds check that
// nothing is read or written outside).
TEST(Arena, PaddedCopiesAreExactAndStayInBounds) {
  Arena a(256);
  std::string text;
  for (int i = 0; i < 64; ++i) text += char('A' + i % 26);
  std::vector<std::pair<std::string_view, std::string>> made;
  for (int round = 0; round < 50; ++round)
    for (size_t n = 0; n <= 40; n += 3) {
      const std::string_view s(text.data() + (round % 20), n);
      const size_t used = a.used();
      // What may be read: the whole rest of `text` after s, or exactly s.
      const size_t readable = round % 2 ? text.size() - size_t(round % 20) : n;
      const std::string_view got = a.copy_padded(s, readable);
      EXPECT_EQ(got, s);
      EXPECT_EQ(a.used(), used + n);
      made.emplace_back(got, std::string(s));
    }
  for (const auto& [got, want] : made) ASSERT_EQ(got, want);
}

}  // namespace
}  // namespace sluice
