#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "sluice/checkpoint.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;

class CheckpointStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("sluice-checkpoint-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<CheckpointStore> open(const fs::path& path) {
    auto store = open_sqlite_checkpoint_store(path.string());
    EXPECT_TRUE(store.ok()) << (store.ok() ? "" : store.error().message());
    return store.ok() ? std::move(store.value()) : nullptr;
  }

  fs::path dir_;
};

TEST_F(CheckpointStoreTest, SourceHistoryIsASecondEntryBesideThePosition) {
  auto store = open(dir_ / "cp.db");
  ASSERT_TRUE(store);
  CheckpointStoreHistory history(store.get(), "p1");
  ASSERT_FALSE(history.load().value());
  ASSERT_TRUE(store->save("p1", "position").ok());
  ASSERT_TRUE(history.save("history\nwith a newline").ok());
  EXPECT_EQ(history.load().value(), std::optional<std::string>("history\nwith a newline"));
  EXPECT_EQ(store->load("p1").value(), std::optional<std::string>("position"));
  // Another pipeline's history is its own; the key cannot be a pipeline id (ids have no '/').
  CheckpointStoreHistory other(store.get(), "p2");
  EXPECT_FALSE(other.load().value());
  EXPECT_NE(source_history_key("p1").find('/'), std::string::npos);
  ASSERT_TRUE(store->erase(source_history_key("p1")).ok());
  EXPECT_FALSE(history.load().value());
  EXPECT_EQ(store->load("p1").value(), std::optional<std::string>("position"));
}

TEST_F(CheckpointStoreTest, LoadOfUnknownPipelineIsEmpty) {
  auto store = open(dir_ / "cp.db");
  ASSERT_TRUE(store);
  auto r = store->load("nope");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
}

TEST_F(CheckpointStoreTest, SaveLoadOverwriteErase) {
  auto store = open(dir_ / "cp.db");
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->save("p1", "0/16B3748").ok());
  ASSERT_TRUE(store->save("p2", "other").ok());
  EXPECT_EQ(store->load("p1").value(), std::optional<std::string>("0/16B3748"));
  ASSERT_TRUE(store->save("p1", "0/16B9999").ok());
  EXPECT_EQ(store->load("p1").value(), std::optional<std::string>("0/16B9999"));
  EXPECT_EQ(store->load("p2").value(), std::optional<std::string>("other"));

  ASSERT_TRUE(store->erase("p1").ok());
  EXPECT_FALSE(store->load("p1").value().has_value());
  EXPECT_EQ(store->load("p2").value(), std::optional<std::string>("other"));
  EXPECT_TRUE(store->erase("never-saved").ok());
}

TEST_F(CheckpointStoreTest, PositionsAreBinarySafe) {
  auto store = open(dir_ / "cp.db");
  ASSERT_TRUE(store);
  const std::string binary("a\0b\xff\x01", 5);
  ASSERT_TRUE(store->save("bin", binary).ok());
  EXPECT_EQ(store->load("bin").value(), std::optional<std::string>(binary));
  // An empty position is a value, distinct from "no checkpoint".
  ASSERT_TRUE(store->save("empty", "").ok());
  EXPECT_EQ(store->load("empty").value(), std::optional<std::string>(""));
}

TEST_F(CheckpointStoreTest, CreatesParentDirectoriesAndPersistsAcrossReopen) {
  fs::path path = dir_ / "a" / "b" / "checkpoints.db";
  {
    auto store = open(path);
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->save("pg-to-kafka", "lsn:42").ok());
    ASSERT_TRUE(store->save("gone", "x").ok());
    ASSERT_TRUE(store->erase("gone").ok());
  }
  EXPECT_TRUE(fs::exists(path));
  auto store = open(path);
  ASSERT_TRUE(store);
  EXPECT_EQ(store->load("pg-to-kafka").value(), std::optional<std::string>("lsn:42"));
  EXPECT_FALSE(store->load("gone").value().has_value());
}

TEST_F(CheckpointStoreTest, UsesWalAndTheDocumentedTable) {
  fs::path path = dir_ / "cp.db";
  {
    auto store = open(path);
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->save("p", "pos").ok());
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), "wal");
  sqlite3_finalize(st);
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT pipeline, position, updated_at FROM checkpoints", -1,
                               &st, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), "p");
  EXPECT_EQ(sqlite3_column_type(st, 1), SQLITE_BLOB);
  EXPECT_GT(sqlite3_column_int64(st, 2), 1'600'000'000'000);  // epoch milliseconds
  sqlite3_finalize(st);
  sqlite3_close(db);
}

TEST_F(CheckpointStoreTest, ConcurrentSavesAndLoads) {
  auto store = open(dir_ / "cp.db");
  ASSERT_TRUE(store);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&store, t] {
      std::string id = "p" + std::to_string(t);
      for (int i = 0; i < 200; ++i) {
        ASSERT_TRUE(store->save(id, std::to_string(i)).ok());
        ASSERT_TRUE(store->load(id).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t)
    EXPECT_EQ(store->load("p" + std::to_string(t)).value(), std::optional<std::string>("199"));
}

TEST_F(CheckpointStoreTest, UnwritablePathIsAnIoErrorNamingThePath) {
  // A regular file where a directory is needed fails even for root (tests may run as root, so
  // permission bits alone would not).
  fs::create_directories(dir_);
  std::ofstream(dir_ / "not-a-dir") << "x";
  fs::path path = dir_ / "not-a-dir" / "cp.db";
  auto r = open_sqlite_checkpoint_store(path.string());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Errc::io);
  EXPECT_NE(r.error().message().find(path.string()), std::string::npos) << r.error().message();
  EXPECT_EQ(r.error().message().find('\n'), std::string::npos);
}

TEST_F(CheckpointStoreTest, DirectoryInPlaceOfTheFileIsAnIoError) {
  fs::create_directories(dir_ / "cp.db");
  auto r = open_sqlite_checkpoint_store((dir_ / "cp.db").string());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Errc::io);
  EXPECT_NE(r.error().message().find("cp.db"), std::string::npos) << r.error().message();
}

TEST_F(CheckpointStoreTest, NotASqliteFileIsAnIoError) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "garbage.db") << std::string(4096, 'x');
  auto r = open_sqlite_checkpoint_store((dir_ / "garbage.db").string());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Errc::io);
  EXPECT_NE(r.error().message().find("garbage.db"), std::string::npos) << r.error().message();
}

// One process per store (issue 13, item 6): a second open of the same file is refused while the
// first is open, naming the holder's pid, and allowed again once it is closed.
TEST_F(CheckpointStoreTest, SecondOpenOfTheSameStoreIsAConflictNamingThePid) {
  auto first = open(dir_ / "cp.db");
  ASSERT_TRUE(first);
  auto second = open_sqlite_checkpoint_store((dir_ / "cp.db").string());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().code(), Errc::conflict);
  EXPECT_NE(second.error().message().find("in use by another sluice process (pid " +
                                          std::to_string(::getpid()) + ")"),
            std::string::npos)
      << second.error().message();
  EXPECT_NE(second.error().message().find("checkpoints.path"), std::string::npos);
  ASSERT_TRUE(first->save("p", "x").ok());
  first.reset();
  auto again = open(dir_ / "cp.db");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->load("p").value(), std::optional<std::string>("x"));
}

}  // namespace
}  // namespace sluice
