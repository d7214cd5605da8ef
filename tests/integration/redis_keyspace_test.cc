// The redis source's keyspace mode through the sluice binary against the real Redis
// (SLUICE_TEST_REDIS_URL) into SQLite: a server without keyspace notifications is a one-line
// error naming the CONFIG SET to run; then (keyspace.configure: true) a snapshot of the hashes
// and strings matching the pattern, live changes (fields set and removed, deletes, expiry, a key
// changing type, new keys), and a restart after a key was deleted while sluice was stopped (the
// new snapshot's markers remove its row). The SQLite table ends equal to the Redis keys each time.
//
// One test: it sets notify-keyspace-events, a server-wide setting, and must not race itself.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "support/process.h"
#include "support/redis.h"
#include "support/sqlite.h"

namespace sluice::test {
namespace {

using redis::RedisConnection;
using redis::reply_text;
using namespace std::chrono_literals;

constexpr int kDb = 15;

std::string url_db(int db) {
  std::string u = redis_url();
  const size_t slash = u.find('/', u.find("//") + 2);
  if (slash != std::string::npos) u.resize(slash);
  return u + "/" + std::to_string(db);
}

// key → "col=value;…" (columns sorted, NULLs left out) of the SQLite table.
std::map<std::string, std::string> sqlite_keys(const std::filesystem::path& db) {
  std::map<std::string, std::string> out;
  if (!std::filesystem::exists(db)) return out;
  SqliteFile f(db);
  f.query("SELECT * FROM \"redis_keys\"", [&](sqlite3_stmt* st) {
    std::map<std::string, std::string> cols;
    std::string key;
    for (int i = 0; i < sqlite3_column_count(st); ++i) {
      const std::string name = sqlite3_column_name(st, i);
      if (sqlite3_column_type(st, i) == SQLITE_NULL) continue;
      if (name == "key") key = sqlite_column_text(st, i);
      else cols[name] = sqlite_column_text(st, i);
    }
    std::string text;
    for (const auto& [c, v] : cols) text += c + "=" + v + ";";
    out[key] = text;
  });
  return out;
}

// The same from Redis: hashes and strings under "ks:*".
std::map<std::string, std::string> redis_keys(RedisConnection& c) {
  std::map<std::string, std::string> out;
  std::string cursor = "0";
  do {
    auto scan = c.command({"SCAN", cursor, "MATCH", "ks:*", "COUNT", "1000"});
    if (!scan.ok()) return out;
    cursor = reply_text((*scan)->element[0]);
    for (size_t i = 0; i < (*scan)->element[1]->elements; ++i) {
      const std::string key = reply_text((*scan)->element[1]->element[i]);
      const std::string type = reply_text(c.command({"TYPE", key})->get());
      if (type == "string") {
        auto v = c.command({"GET", key});
        if (v.ok() && (*v)->type == REDIS_REPLY_STRING)
          out[key] = "value=" + reply_text(v->get()) + ";";
      } else if (type == "hash") {
        auto h = c.command({"HGETALL", key});
        std::map<std::string, std::string> fields;
        for (size_t k = 0; k + 1 < (*h)->elements; k += 2)
          fields[reply_text((*h)->element[k])] = reply_text((*h)->element[k + 1]);
        std::string text;
        for (const auto& [f, v] : fields) text += f + "=" + v + ";";
        if (!fields.empty()) out[key] = text;
      }
    }
  } while (cursor != "0");
  return out;
}

std::string pipeline_yaml(bool configure) {
  return "version: 1\n"
         "pipelines:\n"
         "  - id: ks\n"
         "    source:\n"
         "      connector: redis\n"
         "      settings:\n"
         "        url: " +
         url_db(kDb) +
         "\n"
         "        mode: keyspace\n"
         "        keyspace.pattern: \"ks:*\"\n" +
         (configure ? "        keyspace.configure: true\n" : "") +
         "    destination: {connector: sqlite, settings: {path: out.db}}\n"
         "    batch: {max_records: 200, linger_ms: 20}\n"
         "checkpoints: {path: cp.db}\n"
         "http: {listen: 127.0.0.1:0}\n";
}

TEST(RedisKeyspace, SnapshotThenNotificationsIntoSqliteAndAClearErrorWithoutNotifications) {
  TempDir dir("redis_keyspace");
  RedisConnection c = redis_connect(kDb);
  ASSERT_TRUE(c.command({"FLUSHDB"}).ok());
  ASSERT_TRUE(c.command({"CONFIG", "SET", "notify-keyspace-events", ""}).ok());
  for (int i = 1; i <= 200; ++i) {
    const std::string n = std::to_string(i);
    c.append({"HSET", "ks:user:" + n, "name", "n" + n, "age", n});
  }
  for (int i = 1; i <= 20; ++i)
    c.append({"SET", "ks:s:" + std::to_string(i), "v" + std::to_string(i)});
  c.append({"RPUSH", "ks:list", "a", "b"});  // another type: skipped
  c.append({"SET", "other:1", "x"});         // outside the pattern
  for (int i = 0; i < 222; ++i) ASSERT_TRUE(c.read_reply().ok());

  // Without notifications: one error line naming the command, a non-zero exit.
  write_file(dir / "p.yaml", pipeline_yaml(false));
  EXPECT_NE(run_sluice({"run", "p.yaml", "--idle-exit", "2"}, dir.path(), std::chrono::seconds(30)),
            0);
  const std::string err = read_file(dir / "stderr.txt");
  EXPECT_NE(err.find("run CONFIG SET notify-keyspace-events "), std::string::npos) << err;
  EXPECT_NE(err.find("or set keyspace.configure: true"), std::string::npos) << err;

  write_file(dir / "p.yaml", pipeline_yaml(true));
  {
    Process p({"run", "p.yaml"}, dir.path());
    ASSERT_TRUE(wait_until([&] { return sqlite_keys(dir / "out.db").size() == 220; }, 30s))
        << p.stderr_text();
    EXPECT_EQ(sqlite_keys(dir / "out.db"), redis_keys(c));
    for (int i = 1; i <= 40; ++i) {
      const std::string k = "ks:user:" + std::to_string(i);
      if (i % 4 == 0) c.append({"HSET", k, "name", "changed", "city", "c"});
      else if (i % 4 == 1) c.append({"HDEL", k, "age"});
      else if (i % 4 == 2) c.append({"DEL", k});
      else c.append({"SET", k, "now a string"});  // a hash becomes a string
    }
    c.append({"SET", "ks:s:1", "short-lived", "PX", "300"});
    c.append({"INCRBY", "ks:counter", "5"});
    c.append({"HSET", "ks:new", "a", "1"});
    for (int i = 0; i < 43; ++i) ASSERT_TRUE(c.read_reply().ok());
    // Until ks:s:1 expired (Redis' expiry is lazy or its active cycle: poll for it).
    ASSERT_TRUE(wait_until(
        [&] {
          return c.command({"EXISTS", "ks:s:1"}).value()->integer == 0;
        },
        30s));
    EXPECT_TRUE(wait_until([&] { return sqlite_keys(dir / "out.db") == redis_keys(c); }, 30s))
        << p.stderr_text();
    EXPECT_EQ(sqlite_keys(dir / "out.db").count("ks:s:1"), 0u);
    EXPECT_EQ(sqlite_keys(dir / "out.db")["ks:user:4"], "age=4;city=c;name=changed;");
    EXPECT_EQ(sqlite_keys(dir / "out.db")["ks:user:1"], "name=n1;") << "HDEL removes the column";
    EXPECT_EQ(sqlite_keys(dir / "out.db")["ks:user:3"], "value=now a string;");
    p.terminate();
    EXPECT_EQ(p.wait(), 0) << p.stderr_text();
  }
  // Changed while sluice is stopped: the notifications are lost, the new snapshot catches up.
  ASSERT_TRUE(c.command({"DEL", "ks:user:100"}).ok());
  ASSERT_TRUE(c.command({"HSET", "ks:user:101", "name", "offline"}).ok());
  ASSERT_EQ(run_sluice({"run", "p.yaml", "--idle-exit", "2"}, dir.path(), std::chrono::seconds(60)),
            0)
      << read_file(dir / "stderr.txt");
  const auto rows = sqlite_keys(dir / "out.db");
  EXPECT_EQ(rows.count("ks:user:100"), 0u) << "the snapshot's markers remove a vanished key";
  EXPECT_EQ(rows, redis_keys(c));
}

}  // namespace
}  // namespace sluice::test
