// The redis source through the sluice binary against the real Redis server (SLUICE_TEST_REDIS_URL)
// and SQLite / PostgreSQL (SLUICE_TEST_PG_URL): streams by name and by pattern read through a
// consumer group, entries acknowledged (XPENDING empty at the end, the group's position moved),
// a restart reading only what is new, kill -9 mid-stream (nothing lost), a crashed consumer's
// pending entries claimed, OpenCDC entries into PostgreSQL, a malformed entry to the dead-letter
// queue or a one-line stop.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "integration/pg_harness.h"
#include "support/process.h"
#include "support/redis.h"
#include "support/sqlite.h"

namespace sluice::test {
namespace {

using redis::RedisConnection;
using redis::reply_text;

// Streams of one test, deleted before and after it.
struct Streams {
  RedisConnection c = redis_connect();
  std::vector<std::string> names;
  explicit Streams(std::vector<std::string> n) : names(std::move(n)) { drop(); }
  ~Streams() { drop(); }
  void drop() {
    for (const auto& s : names) (void)c.command({"DEL", s});
  }
  // XADDs `n` entries of fields id=<first+i>, v=<prefix+i>, pipelined.
  void add(const std::string& stream, int first, int n, const std::string& prefix = "v") {
    for (int i = first; i < first + n; ++i) {
      const std::string id = std::to_string(i), v = prefix + id;
      c.append({"XADD", stream, "*", "id", id, "v", v});
    }
    for (int i = 0; i < n; ++i) ASSERT_TRUE(c.read_reply().ok());
  }
  int64_t pending(const std::string& stream, const std::string& group) {
    auto r = c.command({"XPENDING", stream, group});
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message());
    return r.ok() && (*r)->type == REDIS_REPLY_ARRAY ? (*r)->element[0]->integer : -1;
  }
};

std::string pipeline_yaml(const std::string& streams, const std::string& extra_source,
                          const std::string& destination, const std::string& extra = "") {
  return "version: 1\n"
         "pipelines:\n"
         "  - id: rs\n"
         "    source:\n"
         "      connector: redis\n"
         "      settings:\n"
         "        url: " +
         redis_url() +
         "\n"
         "        streams: " +
         streams + "\n" + extra_source + "    destination: " + destination + "\n" + extra +
         "checkpoints: {path: cp.db}\n";
}

// id → v of table `table` in the SQLite file.
std::map<std::string, std::string> sqlite_rows(const std::filesystem::path& db,
                                               const std::string& table) {
  std::map<std::string, std::string> out;
  SqliteFile f(db);
  f.query("SELECT id, v FROM \"" + table + "\"",
          [&](sqlite3_stmt* st) { out[sqlite_column_text(st, 0)] = sqlite_column_text(st, 1); });
  return out;
}

std::map<std::string, std::string> expected(int first, int n, const std::string& prefix = "v") {
  std::map<std::string, std::string> m;
  for (int i = first; i < first + n; ++i) m[std::to_string(i)] = prefix + std::to_string(i);
  return m;
}

TEST(RedisSource, StreamsByPatternToSqliteAreAcknowledgedAndARestartReadsOnlyWhatIsNew) {
  TempDir dir("redis_source_pattern");
  Streams s({"rsp_a", "rsp_b"});
  s.add("rsp_a", 1, 300);
  s.add("rsp_b", 1, 200, "b");
  write_file(dir / "p.yaml", pipeline_yaml("[\"rsp_*\"]", "        key_fields: [id]\n",
                                           "{connector: sqlite, settings: {path: out.db}}"));
  ASSERT_EQ(run_sluice({"run", "p.yaml", "--idle-exit", "2"}, dir.path()), 0)
      << read_file(dir / "stderr.txt");
  EXPECT_EQ(sqlite_rows(dir / "out.db", "rsp_a"), expected(1, 300));
  EXPECT_EQ(sqlite_rows(dir / "out.db", "rsp_b"), expected(1, 200, "b"));
  EXPECT_EQ(s.pending("rsp_a", "sluice-rs"), 0);
  EXPECT_EQ(s.pending("rsp_b", "sluice-rs"), 0);

  // New entries, one of them an update of a key: only they are read (the group's position).
  s.add("rsp_a", 301, 50);
  s.add("rsp_a", 7, 1, "changed");
  ASSERT_EQ(run_sluice({"run", "p.yaml", "--idle-exit", "2"}, dir.path()), 0)
      << read_file(dir / "stderr.txt");
  auto want = expected(1, 350);
  want["7"] = "changed7";
  EXPECT_EQ(sqlite_rows(dir / "out.db", "rsp_a"), want);
  EXPECT_EQ(s.pending("rsp_a", "sluice-rs"), 0);
  // The second run read 51 entries (the first 500): the progress summary is not parsed, the group
  // says it — entries-read of the group on rsp_a is 351.
  auto info = s.c.command({"XINFO", "GROUPS", "rsp_a"});
  ASSERT_TRUE(info.ok());
  EXPECT_NE(reply_text(info->get()).find("entries-read, 351"), std::string::npos)
      << reply_text(info->get());
}

TEST(RedisSource, RawEntriesKeyedByTheEntryIdByDefault) {
  TempDir dir("redis_source_entry_id");
  Streams s({"rs_ids"});
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(s.c.command({"XADD", "rs_ids", "*", "v", "x"}).ok());
  write_file(dir / "p.yaml",
             pipeline_yaml("[rs_ids]", "", "{connector: sqlite, settings: {path: out.db}}"));
  ASSERT_EQ(run_sluice({"run", "p.yaml", "--idle-exit", "2"}, dir.path()), 0)
      << read_file(dir / "stderr.txt");
  SqliteFile f(dir / "out.db");
  EXPECT_EQ(f.scalar("SELECT count(DISTINCT id) FROM rs_ids WHERE id LIKE '%-%' AND v = 'x'"), 20);

  // An entry with a field `id` of its own: the entry id cannot take that column.
  ASSERT_TRUE(s.c.command({"XADD", "rs_ids", "*", "id", "7"}).ok());
  EXPECT_NE(run_sluice({"run", "p.yaml", "--idle-exit", "2"}, dir.path()), 0);
  EXPECT_NE(read_file(dir / "stderr.txt").find("set key_fields: [id]"), std::string::npos)
      << read_file(dir / "stderr.txt");
}

TEST(RedisSource, KillNineMidStreamLosesNothing) {
  TempDir dir("redis_source_kill");
  Streams s({"rs_kill"});
  const int n = 30000;
  s.add("rs_kill", 1, n);
  write_file(dir / "p.yaml", pipeline_yaml("[rs_kill]", "        key_fields: [id]\n",
                                           "{connector: sqlite, settings: {path: out.db}}",
                                           "    batch: {max_records: 500}\n"));
  {
    Process p({"run", "p.yaml"}, dir.path());
    ASSERT_TRUE(wait_until(
        [&] {
          if (!std::filesystem::exists(dir / "out.db")) return false;
          SqliteFile f(dir / "out.db");
          return f.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'rs_kill'") == 1 &&
                 f.scalar("SELECT count(*) FROM rs_kill") > 1000;
        },
        std::chrono::seconds(15)))
        << p.stderr_text();
    p.kill9();
  }
  EXPECT_GT(s.pending("rs_kill", "sluice-rs"), 0);  // read, not acknowledged when killed
  s.add("rs_kill", n + 1, 100);
  ASSERT_EQ(run_sluice({"run", "p.yaml", "--idle-exit", "2"}, dir.path()), 0)
      << read_file(dir / "stderr.txt");
  EXPECT_EQ(sqlite_rows(dir / "out.db", "rs_kill"), expected(1, n + 100));
  EXPECT_EQ(s.pending("rs_kill", "sluice-rs"), 0);
}

TEST(RedisSource, ACrashedConsumersPendingEntriesAreClaimed) {
  TempDir dir("redis_source_claim");
  Streams s({"rs_claim"});
  s.add("rs_claim", 1, 100);
  ASSERT_TRUE(s.c.command({"XGROUP", "CREATE", "rs_claim", "sluice-rs", "0"}).ok());
  // Another consumer reads 40 entries and dies without acknowledging them.
  auto r = s.c.command(
      {"XREADGROUP", "GROUP", "sluice-rs", "dead", "COUNT", "40", "STREAMS", "rs_claim", ">"});
  ASSERT_TRUE(r.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  write_file(dir / "p.yaml",
             pipeline_yaml("[rs_claim]",
                           "        key_fields: [id]\n        claim.min_idle: 500ms\n"
                           "        claim.interval: 100ms\n",
                           "{connector: sqlite, settings: {path: out.db}}"));
  ASSERT_EQ(run_sluice({"run", "p.yaml", "--idle-exit", "2"}, dir.path()), 0)
      << read_file(dir / "stderr.txt");
  EXPECT_EQ(sqlite_rows(dir / "out.db", "rs_claim"), expected(1, 100));
  EXPECT_EQ(s.pending("rs_claim", "sluice-rs"), 0);
  EXPECT_NE(read_file(dir / "stderr.txt").find("claimed 40 entries"), std::string::npos)
      << read_file(dir / "stderr.txt");
}

// The source reads ahead while a stream has a backlog: entries delivered to this consumer but not
// yet decoded. Waiting there longer than claim.min_idle (50 ms; a slow destination takes 100 ms a
// statement) while XAUTOCLAIM's cursor walks over them, they are still delivered once, in stream
// order, from the read-ahead — never claimed back.
TEST(RedisSource, EntriesReadAheadForASlowDestinationAreNotClaimedBack) {
  pgtest::TestDb db("rs_slow");
  ASSERT_TRUE(db.ok());
  TempDir dir("redis_source_slow");
  Streams s({"rs_slow"});
  const int n = 3000;
  s.add("rs_slow", 1, n);
  ASSERT_TRUE(db.sql().exec("CREATE TABLE rs_slow (id text PRIMARY KEY, v text)"));
  ASSERT_TRUE(
      db.sql().exec("CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS "
                    "$$ BEGIN PERFORM pg_sleep(0.1); RETURN NULL; END $$"));
  ASSERT_TRUE(db.sql().exec(
      "CREATE TRIGGER slow AFTER INSERT ON rs_slow FOR EACH STATEMENT EXECUTE FUNCTION slow()"));
  write_file(dir / "p.yaml",
             pipeline_yaml("[rs_slow]",
                           "        key_fields: [id]\n        claim.min_idle: 50ms\n"
                           "        claim.interval: 10ms\n",
                           "{connector: postgres, settings: {url: \"" + db.url() + "\"}}",
                           "    batch: {max_records: 100}\n"));
  ASSERT_EQ(run_sluice({"run", "p.yaml", "--idle-exit", "2"}, dir.path()), 0)
      << read_file(dir / "stderr.txt");
  EXPECT_EQ(read_file(dir / "stderr.txt").find("claimed"), std::string::npos)
      << read_file(dir / "stderr.txt");
  EXPECT_EQ(db.sql().query("SELECT 1 FROM rs_slow WHERE v = 'v' || id").size(), size_t(n));
  EXPECT_EQ(s.pending("rs_slow", "sluice-rs"), 0);
}

std::string opencdc(const std::string& op, int64_t id, const std::string& v = "") {
  std::string after =
      op == "delete" ? "null" : "{\"id\":" + std::to_string(id) + ",\"v\":\"" + v + "\"}";
  return "{\"operation\":\"" + op +
         "\",\"metadata\":{\"table\":\"rs_items\"},\"key\":{\"id\":" + std::to_string(id) +
         "},\"payload\":{\"before\":null,\"after\":" + after + "}}";
}

TEST(RedisSource, OpenCdcEntriesIntoPostgres) {
  pgtest::TestDb db("rs_opencdc");
  ASSERT_TRUE(db.ok());
  TempDir dir("redis_source_opencdc");
  Streams s({"rs_cdc"});
  for (int i = 1; i <= 50; ++i)
    ASSERT_TRUE(
        s.c.command({"XADD", "rs_cdc", "*", "value", opencdc("create", i, "v" + std::to_string(i))})
            .ok());
  ASSERT_TRUE(s.c.command({"XADD", "rs_cdc", "*", "value", opencdc("update", 5, "five")}).ok());
  ASSERT_TRUE(s.c.command({"XADD", "rs_cdc", "*", "value", opencdc("delete", 9)}).ok());
  write_file(dir / "p.yaml",
             pipeline_yaml("[rs_cdc]", "        format: opencdc\n",
                           "{connector: postgres, settings: {url: \"" + db.url() + "\"}}"));
  ASSERT_EQ(run_sluice({"run", "p.yaml", "--idle-exit", "2"}, dir.path()), 0)
      << read_file(dir / "stderr.txt");
  std::map<int64_t, std::string> got, want;
  for (const auto& row : db.sql().query("SELECT id, v FROM rs_items"))
    got[std::stoll(*row[0])] = *row[1];
  for (int i = 1; i <= 50; ++i) want[i] = "v" + std::to_string(i);
  want[5] = "five";
  want.erase(9);
  EXPECT_EQ(got, want);
  EXPECT_EQ(s.pending("rs_cdc", "sluice-rs"), 0);
}

TEST(RedisSource, AMalformedEntryGoesToTheDeadLetterQueueOrStopsNamingStreamAndId) {
  TempDir dir("redis_source_malformed");
  Streams s({"rs_bad"});
  s.add("rs_bad", 1, 10);
  auto bad = s.c.command({"XADD", "rs_bad", "*", "v", "no id field"});
  ASSERT_TRUE(bad.ok());
  const std::string bad_id = reply_text(bad->get());
  s.add("rs_bad", 11, 10);

  // on_error: stop (the default): one error line naming the stream and the entry id.
  write_file(dir / "p.yaml", pipeline_yaml("[rs_bad]", "        key_fields: [id]\n",
                                           "{connector: sqlite, settings: {path: out.db}}"));
  EXPECT_NE(run_sluice({"run", "p.yaml", "--idle-exit", "2"}, dir.path(), std::chrono::seconds(20)),
            0);
  const std::string err = read_file(dir / "stderr.txt");
  EXPECT_NE(err.find("stream 'rs_bad' entry " + bad_id + ": has no field 'id'"), std::string::npos)
      << err;

  // on_error: dlq: the entry in the dead-letter file, every other one at the destination.
  write_file(dir / "p.yaml",
             pipeline_yaml("[rs_bad]", "        key_fields: [id]\n",
                           "{connector: sqlite, settings: {path: out.db}}",
                           "    on_error: dlq\n"
                           "    dlq: {connector: file, settings: {path: dlq.jsonl}}\n"));
  ASSERT_EQ(run_sluice({"run", "p.yaml", "--idle-exit", "2"}, dir.path()), 0)
      << read_file(dir / "stderr.txt");
  EXPECT_EQ(sqlite_rows(dir / "out.db", "rs_bad"), expected(1, 20));
  const std::string dlq = read_file(dir / "dlq.jsonl");
  EXPECT_NE(dlq.find(bad_id), std::string::npos) << dlq;
  EXPECT_NE(dlq.find("no id field"), std::string::npos) << dlq;
  EXPECT_EQ(s.pending("rs_bad", "sluice-rs"), 0);
}

}  // namespace
}  // namespace sluice::test
