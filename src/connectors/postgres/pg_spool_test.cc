#include "connectors/postgres/pg_spool.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace sluice::pg {
namespace {

struct Got {
  uint64_t lsn;
  std::string payload;
  bool operator==(const Got&) const = default;
};

std::vector<Got> drain(TransactionSpool& spool, uint32_t xid) {
  auto held = spool.take(xid);
  EXPECT_TRUE(held.ok()) << (held.ok() ? "" : held.error().message());
  std::vector<Got> out;
  if (!held.ok()) return out;
  HeldTransaction::Message m;
  for (;;) {
    auto more = held.value()->next(&m);
    EXPECT_TRUE(more.ok()) << (more.ok() ? "" : more.error().message());
    if (!more.ok() || !more.value()) break;
    out.push_back({m.lsn.value, std::string(m.payload)});
  }
  return out;
}

std::string tmp() { return std::filesystem::temp_directory_path().string(); }

TEST(TransactionSpool, HoldsEachTransactionsMessagesInArrivalOrder) {
  TransactionSpool spool(1 << 20, tmp());
  ASSERT_TRUE(spool.start(10, true).ok());
  ASSERT_TRUE(spool.add(10, 10, Lsn{1}, 'R', "rel").ok());
  ASSERT_TRUE(spool.add(10, 10, Lsn{2}, 'I', "row a").ok());
  ASSERT_TRUE(spool.start(11, true).ok());
  ASSERT_TRUE(spool.add(11, 11, Lsn{3}, 'I', "other").ok());
  ASSERT_TRUE(spool.start(10, false).ok());  // a later segment
  ASSERT_TRUE(spool.add(10, 12, Lsn{4}, 'U', std::string("b\0c", 3)).ok());
  EXPECT_EQ(spool.transactions(), 2u);
  EXPECT_EQ(drain(spool, 10),
            (std::vector<Got>{{1, "Rrel"}, {2, "Irow a"}, {4, std::string("Ub\0c", 4)}}));
  EXPECT_EQ(drain(spool, 11), (std::vector<Got>{{3, "Iother"}}));
  EXPECT_EQ(spool.memory(), 0u);
  EXPECT_EQ(spool.spilled_bytes(), 0u);
}

TEST(TransactionSpool, SpillsBeyondItsMemoryAndReadsBackInOrder) {
  TransactionSpool spool(4096, tmp());
  ASSERT_TRUE(spool.start(5, true).ok());
  ASSERT_TRUE(spool.start(6, true).ok());
  std::vector<Got> want5, want6;
  for (uint64_t i = 0; i < 3000; ++i) {
    // Some messages larger than the read-back chunk (1 MiB) and than the limit.
    const std::string body =
        i % 1000 == 7 ? std::string(3 << 20, char('a' + i % 26)) : "row " + std::to_string(i);
    ASSERT_TRUE(spool.add(5, 5, Lsn{i}, 'I', body).ok());
    want5.push_back({i, "I" + body});
    if (i % 100 == 0) {
      ASSERT_TRUE(spool.add(6, 6, Lsn{i}, 'D', "x").ok());
      want6.push_back({i, "Dx"});
    }
    EXPECT_LE(spool.memory(), 4096u + (3u << 20) + 64u);
  }
  EXPECT_GT(spool.spilled_bytes(), 9u << 20);
  EXPECT_EQ(drain(spool, 5), want5);
  EXPECT_EQ(drain(spool, 6), want6);
}

TEST(TransactionSpool, AbortsDropATransactionOrASubtransactionsChanges) {
  TransactionSpool spool(64, tmp());  // spilled: the filter applies to the file too
  ASSERT_TRUE(spool.start(20, true).ok());
  ASSERT_TRUE(spool.add(20, 20, Lsn{1}, 'I', "kept 1").ok());
  ASSERT_TRUE(spool.add(20, 21, Lsn{2}, 'R', "relation sent in the savepoint").ok());
  ASSERT_TRUE(spool.add(20, 21, Lsn{3}, 'I', "rolled back").ok());
  ASSERT_TRUE(spool.add(20, 21, Lsn{4}, 'M', "rolled back message").ok());
  ASSERT_TRUE(spool.add(20, 22, Lsn{5}, 'I', "kept 2").ok());
  spool.abort(20, 21);
  ASSERT_TRUE(spool.add(20, 20, Lsn{6}, 'T', "kept 3").ok());
  ASSERT_TRUE(spool.start(30, true).ok());
  ASSERT_TRUE(spool.add(30, 30, Lsn{7}, 'I', "aborted").ok());
  spool.abort(30, 30);
  spool.abort(99, 99);  // never held: nothing
  EXPECT_EQ(
      drain(spool, 20),
      (std::vector<Got>{
          {1, "Ikept 1"}, {2, "Rrelation sent in the savepoint"}, {5, "Ikept 2"}, {6, "Tkept 3"}}));
  auto gone = spool.take(30);
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().code(), Errc::data);
  EXPECT_EQ(spool.transactions(), 0u);
}

TEST(TransactionSpool, RefusesMessagesOfTransactionsItDoesNotHold) {
  TransactionSpool spool(1 << 20, tmp());
  EXPECT_EQ(spool.start(1, false).error().code(), Errc::data);
  EXPECT_EQ(spool.add(1, 1, Lsn{1}, 'I', "x").error().code(), Errc::data);
  ASSERT_TRUE(spool.start(1, true).ok());
  ASSERT_TRUE(spool.add(1, 1, Lsn{1}, 'I', "old").ok());
  // A first segment again (the server streams it afresh): what was held goes.
  ASSERT_TRUE(spool.start(1, true).ok());
  ASSERT_TRUE(spool.add(1, 1, Lsn{2}, 'I', "new").ok());
  EXPECT_EQ(drain(spool, 1), (std::vector<Got>{{2, "Inew"}}));
  ASSERT_TRUE(spool.start(2, true).ok());
  ASSERT_TRUE(spool.add(2, 2, Lsn{1}, 'I', "x").ok());
  spool.clear();
  EXPECT_EQ(spool.memory(), 0u);
  EXPECT_FALSE(spool.take(2).ok());
}

TEST(TransactionSpool, AnUnwritableSpillDirectoryIsAnErrorNamingTheSetting) {
  TransactionSpool spool(16, "/nonexistent/sluice-spill");
  ASSERT_TRUE(spool.start(1, true).ok());
  auto st = spool.add(1, 1, Lsn{1}, 'I', "more than sixteen bytes");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), Errc::io);
  EXPECT_NE(st.error().message().find("stream.spill_directory"), std::string::npos)
      << st.error().message();
}

}  // namespace
}  // namespace sluice::pg
