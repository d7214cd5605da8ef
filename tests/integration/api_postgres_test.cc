// The HTTP API on a PostgreSQL → SQLite pipeline (the sluice binary, the real server; an initial
// snapshot, then the stream, with a signal table the source adds to its publication): a pause
// keeps the replication slot, says how much WAL it retains, and writes nothing while the table
// keeps changing; resume ends at the exact source state; POST …/snapshot starts an incremental
// snapshot through the signal table, seen in the data (a row removed behind sluice's back at the
// destination comes back).
#include <gtest/gtest.h>
#include <httplib.h>

#include <regex>

#include "integration/pg_harness.h"

namespace sluice::pgtest {
namespace {

using e2e::Process;

int find_port(Process& p) {
  std::smatch m;
  int port = 0;
  wait_until(
      [&] {
        const std::string err = p.stderr_text();
        if (!p.running()) return true;  // it ended: no port
        if (!std::regex_search(err, m, std::regex("127\\.0\\.0\\.1:([0-9]+)/metrics")))
          return false;
        port = std::stoi(m[1]);
        return true;
      },
      60s, 10ms);
  return port;
}

int64_t sqlite_count(const std::filesystem::path& db) {
  if (!std::filesystem::exists(db)) return 0;
  e2e::Db d(db);
  if (d.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'items'") != 1) return 0;
  return d.scalar("SELECT count(*) FROM items");
}

TEST(ApiPostgres, PauseKeepsTheSlotWritesNothingAndResumeAndSnapshotEndExact) {
  TestDb db("api_pause");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db.sql().exec(
      "CREATE TABLE sluice_signals (id varchar(42) PRIMARY KEY, type varchar(32) NOT NULL, data "
      "varchar(2048));"
      "CREATE TABLE items (id int PRIMARY KEY, v text NOT NULL);"
      "INSERT INTO items SELECT g, 'v' || g FROM generate_series(1, 60) g"));
  auto dir = e2e::make_temp_dir("api-pg");
  PipelineFile f;
  f.id = "api_pause";
  f.url = db.url();
  f.tables = {"public.items"};
  // An initial snapshot with a signal table not yet in the publication: the source adds it
  // before its (read-only) snapshot transaction.
  f.source_settings = {{"signal.table", "public.sluice_signals"}};
  std::string yaml = f.yaml();
  const size_t http = yaml.find("http: {enabled: false}");
  ASSERT_NE(http, std::string::npos) << yaml;
  yaml.replace(http, std::string_view("http: {enabled: false}").size(),
               "http: {listen: \"127.0.0.1:0\"}");
  e2e::write_file(dir / "p.yaml", yaml);
  Process p({"run", "p.yaml"}, dir);
  const int port = find_port(p);
  ASSERT_GT(port, 0) << p.stderr_text();
  httplib::Client api("127.0.0.1", port);
  api.set_read_timeout(90, 0);
  ASSERT_TRUE(wait_for_checkpoint(p, dir, "api_pause", [](const std::string& c) {
    return c.find("cdc ") == 0;
  })) << p.stderr_text();
  ASSERT_TRUE(
      db.sql().exec("INSERT INTO items SELECT g, 'v' || g FROM generate_series(61, 100) g"));
  ASSERT_TRUE(wait_until([&] { return sqlite_count(dir / "out.db") == 100; }, 60s))
      << p.stderr_text();
  ASSERT_TRUE(db.sql().exec("INSERT INTO items VALUES (101, 'streamed')"));
  ASSERT_TRUE(wait_until([&] { return sqlite_count(dir / "out.db") == 101; }, 60s));
  // The snapshot's progress per table: the 60 rows the initial snapshot read.
  auto first = api.Get("/api/v1/pipelines/api_pause");
  ASSERT_TRUE(first);
  EXPECT_NE(first->body.find("\"tables\":[{\"table\":\"public.items\",\"rows\":60}]"),
            std::string::npos)
      << first->body;

  auto paused = api.Post("/api/v1/pipelines/api_pause/pause", "", "application/json");
  ASSERT_TRUE(paused);
  ASSERT_EQ(paused->status, 200) << paused->body;
  EXPECT_NE(paused->body.find("\"state\":\"paused\""), std::string::npos) << paused->body;
  // The slot's state and retained WAL, from the server.
  EXPECT_TRUE(std::regex_search(paused->body,
                                std::regex("\"source_retains\":\"wal_status = [a-z]+, confirmed "
                                           "at [0-9A-F]+/[0-9A-F]+, retains ")))
      << paused->body;
  const std::string slots = db.sql().scalar(
      "SELECT count(*) || ' ' || bool_or(active)::text FROM pg_replication_slots "
      "WHERE database = current_database()");
  EXPECT_EQ(slots, "1 false") << "the slot is kept, and nobody streams from it";

  // The source keeps changing; the destination does not.
  ASSERT_TRUE(db.sql().exec(
      "INSERT INTO items SELECT g, 'while paused' FROM generate_series(102, 300) g;"
      "UPDATE items SET v = 'updated while paused' WHERE id <= 10; DELETE FROM items WHERE id "
      "BETWEEN 20 AND 29"));
  const auto until = std::chrono::steady_clock::now() + 2s;
  while (std::chrono::steady_clock::now() < until) {
    ASSERT_EQ(sqlite_count(dir / "out.db"), 101);
    std::this_thread::sleep_for(100ms);
  }
  auto resumed = api.Post("/api/v1/pipelines/api_pause/resume", "", "application/json");
  ASSERT_TRUE(resumed);
  ASSERT_EQ(resumed->status, 200) << resumed->body;
  auto same = [&] {
    e2e::Db d(dir / "out.db");
    return d.scalar("SELECT count(*) FROM items") == 290 &&
           d.scalar("SELECT count(*) FROM items WHERE v = 'updated while paused'") == 10 &&
           d.scalar("SELECT count(*) FROM items WHERE id BETWEEN 20 AND 29") == 0;
  };
  ASSERT_TRUE(wait_until(same, 60s)) << p.stderr_text();

  // A row removed at the destination behind sluice's back comes back with a snapshot.
  {
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open((dir / "out.db").c_str(), &h), SQLITE_OK);
    sqlite3_busy_timeout(h, 10000);
    EXPECT_EQ(sqlite3_exec(h, "DELETE FROM items WHERE id = 50", nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(h);
  }
  ASSERT_EQ(sqlite_count(dir / "out.db"), 289);
  auto bad = api.Post("/api/v1/pipelines/api_pause/snapshot", "{\"tables\": [\"public.nope\"]}",
                      "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400) << bad->body;  // not in the pipeline's tables
  auto snap = api.Post("/api/v1/pipelines/api_pause/snapshot", "{\"tables\": [\"public.items\"]}",
                       "application/json");
  ASSERT_TRUE(snap);
  ASSERT_EQ(snap->status, 202) << snap->body;
  ASSERT_TRUE(wait_until([&] { return sqlite_count(dir / "out.db") == 290; }, 60s))
      << p.stderr_text();
  ASSERT_TRUE(wait_until(
      [&] {
        return p.stderr_text().find("incremental snapshot of public.items complete") !=
               std::string::npos;
      },
      60s))
      << p.stderr_text();
  // This run's incremental snapshot read the table's 290 rows (a run after resume counts anew).
  auto after = api.Get("/api/v1/pipelines/api_pause");
  ASSERT_TRUE(after);
  EXPECT_NE(after->body.find("\"tables\":[{\"table\":\"public.items\",\"rows\":290}]"),
            std::string::npos)
      << after->body;
  p.signal(SIGTERM);
  ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  EXPECT_TRUE(same());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sluice::pgtest
