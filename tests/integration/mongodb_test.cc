// The mongodb connector end to end through the sluice binary, against FerretDB (the MongoDB
// wire-protocol test server, scripts/services start mongodb): PostgreSQL → MongoDB and MySQL →
// MongoDB with every type and the changes after the snapshot, MongoDB (snapshot) → PostgreSQL and
// → SQLite, kill -9 during a snapshot, and a duplicate-key rejection isolated to the dead-letter
// queue. Documents are compared as canonical Extended JSON: exact BSON types and values.
#include <gtest/gtest.h>
#include <signal.h>

#include <string>
#include <vector>

#include "integration/pg_harness.h"
#include "support/mongodb.h"
#include "support/readers.h"

namespace sluice::pgtest {
namespace {

using e2e::Process;
using test::MongoTestDb;

// The documents, one per line, for failure messages.
std::string show(const std::vector<std::string>& docs) {
  std::string out;
  for (const std::string& d : docs) out += d + "\n";
  return out;
}

TEST(PostgresToMongodb, EveryTypeThenChangesLandExactly) {
  TestDb pg("pg_mongo_types");
  ASSERT_TRUE(pg.ok());
  MongoTestDb mdb("pgtypes");
  ASSERT_TRUE(mdb.ok());
  ASSERT_TRUE(pg.sql().exec(
      "CREATE TABLE t (id int PRIMARY KEY, b bool, i2 smallint, i8 bigint, n numeric(20,4), "
      "f float8, s text, by bytea, d date, ts timestamp, tsz timestamptz, tsu timestamptz, u uuid, "
      "j jsonb, a int[], tm time, iv interval);"
      "CREATE TABLE k (a int, b text, v text, PRIMARY KEY (a, b));"
      "INSERT INTO t VALUES (1, true, -2, 9007199254740993, 12345678.9012, 1.5, 'héllo', "
      "'\\x00ff', '2024-02-29', '2024-02-29 13:45:00.123', '2024-02-29 13:45:00.123+00', "
      "'2024-02-29 13:45:00.123456+00', '12345678-9abc-def0-1234-56789abcdef0', "
      "'{\"a\": 1, \"b\": [true, null, \"x\"], \"k\": 2.5}', '{1,2,3}', '13:45:00.5', "
      "'1 day 2 hours');"
      "INSERT INTO t (id) VALUES (2);"
      "INSERT INTO k VALUES (1, 'x', 'one'), (2, 'y', 'two');"));
  auto dir = e2e::make_temp_dir("pg-mongo-types");
  test::PipelineFile f;
  test::PipelineYaml& p = f.pipeline("pgmongo");
  p.source("postgres")
      .set("url", pg.url())
      .set("tables", test::Yaml::strings({"public.t", "public.k"}));
  // FerretDB has no Decimal128 (it drops the connection on one): decimals as their exact text.
  // Decimal128 itself is pinned by mongodb_bson_test.cc.
  p.destination("mongodb").set("url", mdb.url()).set("decimals", "string");
  p.linger_ms(20);
  e2e::write_file(dir / "p.yaml", f.yaml());
  ASSERT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "2"}, dir, std::chrono::seconds(60)),
            0);

  auto docs = mdb.documents("t");
  ASSERT_TRUE(docs);
  ASSERT_EQ(docs->size(), 2u) << show(*docs);
  EXPECT_EQ(
      (*docs)[0],
      R"({ "_id" : { "$numberLong" : "1" }, "id" : { "$numberLong" : "1" }, "b" : true, )"
      R"("i2" : { "$numberLong" : "-2" }, "i8" : { "$numberLong" : "9007199254740993" }, )"
      R"("n" : "12345678.9012", "f" : { "$numberDouble" : "1.5" }, )"
      R"("s" : "héllo", "by" : { "$binary" : { "base64" : "AP8=", "subType" : "00" } }, )"
      R"("d" : { "$date" : { "$numberLong" : "1709164800000" } }, )"
      R"("ts" : { "$date" : { "$numberLong" : "1709214300123" } }, )"
      R"("tsz" : { "$date" : { "$numberLong" : "1709214300123" } }, )"
      R"("tsu" : "2024-02-29T13:45:00.123456Z", )"
      R"("u" : { "$binary" : { "base64" : "EjRWeJq83vASNFZ4mrze8A==", "subType" : "04" } }, )"
      R"("j" : { "a" : { "$numberLong" : "1" }, "b" : [ true, null, "x" ], "k" : { "$numberDouble" : "2.5" } }, )"
      R"("a" : [ { "$numberLong" : "1" }, { "$numberLong" : "2" }, { "$numberLong" : "3" } ], )"
      R"("tm" : "13:45:00.5", "iv" : "P1DT2H" })");
  EXPECT_EQ(
      (*docs)[1],
      R"({ "_id" : { "$numberLong" : "2" }, "id" : { "$numberLong" : "2" }, "b" : null, "i2" : null, )"
      R"("i8" : null, "n" : null, "f" : null, "s" : null, "by" : null, "d" : null, "ts" : null, )"
      R"("tsz" : null, "tsu" : null, "u" : null, "j" : null, "a" : null, "tm" : null, "iv" : null })");
  auto keys = mdb.documents("k");
  ASSERT_TRUE(keys);
  EXPECT_EQ(
      show(*keys),
      R"({ "_id" : { "a" : { "$numberLong" : "1" }, "b" : "x" }, "a" : { "$numberLong" : "1" }, "b" : "x", "v" : "one" })"
      "\n"
      R"({ "_id" : { "a" : { "$numberLong" : "2" }, "b" : "y" }, "a" : { "$numberLong" : "2" }, "b" : "y", "v" : "two" })"
      "\n");

  // The stream after the snapshot: update, delete, insert, truncate.
  ASSERT_TRUE(
      pg.sql().exec("UPDATE t SET s = 'changed', f = NULL WHERE id = 1;"
                    "DELETE FROM t WHERE id = 2; INSERT INTO t (id, s) VALUES (3, 'new');"
                    "TRUNCATE k; INSERT INTO k VALUES (3, 'z', 'three');"));
  ASSERT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "2"}, dir, std::chrono::seconds(60)),
            0);
  docs = mdb.documents("t");
  ASSERT_TRUE(docs);
  ASSERT_EQ(docs->size(), 2u) << show(*docs);
  EXPECT_NE((*docs)[0].find(R"("f" : null, "s" : "changed")"), std::string::npos) << (*docs)[0];
  EXPECT_NE((*docs)[1].find(R"("_id" : { "$numberLong" : "3" })"), std::string::npos) << (*docs)[1];
  keys = mdb.documents("k");
  ASSERT_TRUE(keys);
  ASSERT_EQ(keys->size(), 1u) << show(*keys);
  EXPECT_NE((*keys)[0].find(R"("v" : "three")"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(MysqlToMongodb, TypesAndChangesLandExactly) {
  test::MysqlDatabase my(test::unique_name("sl_my_mongo", 64));
  ASSERT_TRUE(my.ok());
  MongoTestDb mdb("mytypes");
  ASSERT_TRUE(mdb.ok());
  ASSERT_TRUE(my.sql().exec(
      "CREATE TABLE m (id bigint unsigned PRIMARY KEY, n decimal(12,3), s varchar(20), "
      "dt datetime(6), dm datetime(3), bl blob, j json, y year, e enum('a','b'));"
      "INSERT INTO m VALUES (18446744073709551615, -1.250, 'ü', '2024-02-29 13:45:00.123456', "
      "'2024-02-29 13:45:00.123', x'00ff', '{\"k\": [1, 2]}', 2024, 'b');"));
  auto dir = e2e::make_temp_dir("my-mongo-types");
  test::PipelineFile f;
  test::PipelineYaml& p = f.pipeline("mymongo");
  p.source("mysql").set("url", my.url()).set("tables", test::Yaml::strings({my.name() + ".m"}));
  // Unordered bulk writes (distinct keys per batch): the same end state.
  p.destination("mongodb").set("url", mdb.url()).set("decimals", "string").set("ordered", false);
  p.linger_ms(20);
  e2e::write_file(dir / "p.yaml", f.yaml());
  ASSERT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "2"}, dir, std::chrono::seconds(60)),
            0);
  auto docs = mdb.documents("m");
  ASSERT_TRUE(docs);
  ASSERT_EQ(docs->size(), 1u);
  EXPECT_EQ((*docs)[0], R"({ "_id" : "18446744073709551615", "id" : "18446744073709551615", )"
                        R"("n" : "-1.250", "s" : "ü", "dt" : "2024-02-29T13:45:00.123456", )"
                        R"("dm" : { "$date" : { "$numberLong" : "1709214300123" } }, )"
                        R"("bl" : { "$binary" : { "base64" : "AP8=", "subType" : "00" } }, )"
                        R"("j" : { "k" : [ { "$numberLong" : "1" }, { "$numberLong" : "2" } ] }, )"
                        R"("y" : { "$numberLong" : "2024" }, "e" : "b" })");
  ASSERT_TRUE(
      my.sql().exec("INSERT INTO m (id, s) VALUES (1, 'one');"
                    "UPDATE m SET s = 'max' WHERE id = 18446744073709551615;"));
  ASSERT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "2"}, dir, std::chrono::seconds(60)),
            0);
  EXPECT_EQ(mdb.count("m"), 2);
  docs = mdb.documents("m");
  ASSERT_TRUE(docs);
  EXPECT_NE(show(*docs).find(R"("s" : "max")"), std::string::npos) << show(*docs);
  std::filesystem::remove_all(dir);
}

// Documents of every BSON type FerretDB stores (it refuses Decimal128, min/max key, code, symbol,
// DBPointer and undefined: those are pinned by mongodb_bson_test.cc on libbson-built documents).
const std::vector<std::string> kTypedDocs = {
    R"({"_id":{"$oid":"65f0a1b2c3d4e5f601234567"},"i":{"$numberInt":"-3"},"l":{"$numberLong":"9007199254740993"},)"
    R"("d":2.5,"s":"héllo","b":true,"n":null,"dt":{"$date":{"$numberLong":"1709214300123"}},)"
    R"("bin":{"$binary":{"base64":"AP8=","subType":"00"}},"u":{"$binary":{"base64":"EjRWeJq83vASNFZ4mrze8A==","subType":"04"}},)"
    R"("nested":{"a":[1,{"b":"c"}]},"arr":[1,2],"ts":{"$timestamp":{"t":1700000000,"i":7}},)"
    R"("re":{"$regularExpression":{"pattern":"^a","options":"i"}}})",
    R"({"_id":{"$oid":"65f0a1b2c3d4e5f601234568"},"s":"second"})"};

TEST(MongodbToPostgres, SnapshotOfEveryTypeFerretdbStores) {
  MongoTestDb mdb("topg");
  ASSERT_TRUE(mdb.ok());
  ASSERT_TRUE(mdb.insert("docs", kTypedDocs));
  TestDb pg("mongo_pg");
  ASSERT_TRUE(pg.ok());
  auto dir = e2e::make_temp_dir("mongo-pg");
  test::PipelineFile f;
  test::PipelineYaml& p = f.pipeline("mpg");
  p.source("mongodb")
      .set("url", mdb.url())
      .set("collections", test::Yaml::strings({mdb.name() + ".docs"}))
      .set("stream", false);
  p.destination("postgres").set("url", pg.url());
  e2e::write_file(dir / "p.yaml", f.yaml());
  ASSERT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "2"}, dir, std::chrono::seconds(60)),
            0);
  auto rows = test::read_pg_table(
      pg.sql(), "public", "docs",
      {"_id", "i", "l", "d", "s", "b", "n", "dt", "bin", "u", "nested", "arr", "ts", "re"});
  ASSERT_TRUE(rows);
  EXPECT_EQ(
      test::show(*rows),
      "  65f0a1b2c3d4e5f601234567|-3|9007199254740993|2.5|héllo|true|NULL|2024-02-29 13:45:00.123+00|\\x00ff|"
      "12345678-9abc-def0-1234-56789abcdef0|{\"a\": [1, {\"b\": \"c\"}]}|{1,2}|"
      "{\"$timestamp\": {\"i\": 7, \"t\": 1700000000}}|{\"$regularExpression\": {\"options\": \"i\", \"pattern\": \"^a\"}}\n"
      "  65f0a1b2c3d4e5f601234568|NULL|NULL|NULL|second|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL\n");
  std::filesystem::remove_all(dir);
}

TEST(MongodbToSqlite, KillNineDuringTheSnapshotThenResumeEndsEqual) {
  MongoTestDb mdb("tosqlite");
  ASSERT_TRUE(mdb.ok());
  constexpr int kDocs = 20000;
  std::vector<std::string> docs;
  for (int i = 0; i < kDocs; ++i)
    docs.push_back(R"({"_id":)" + std::to_string(i) + R"(,"n":)" + std::to_string(i * 7) +
                   R"(,"s":"row )" + std::to_string(i) + R"("})");
  ASSERT_TRUE(mdb.insert_many("big", docs));
  auto dir = e2e::make_temp_dir("mongo-sqlite-kill");
  test::PipelineFile f;
  test::PipelineYaml& p = f.pipeline("msq");
  p.source("mongodb")
      .set("url", mdb.url())
      .set("collections", test::Yaml::strings({"big"}))
      .set("snapshot.batch_size", 500)
      .set("stream", false);
  p.destination("sqlite").set("path", "out.db");
  p.max_records(500).linger_ms(20);
  e2e::write_file(dir / "p.yaml", f.yaml());
  {
    Process run({"run", "p.yaml"}, dir);
    ASSERT_TRUE(wait_for_checkpoint(run, dir, "msq", [](const std::string& c) {
      return c.find("\"after\"") != std::string::npos;
    })) << run.stderr_text();
    run.signal(SIGKILL);
    EXPECT_EQ(run.wait(), 128 + SIGKILL);
  }
  const std::string at_kill = checkpoint_of(dir, "msq");
  ASSERT_NE(at_kill.find("\"after\""), std::string::npos) << at_kill;
  ASSERT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "2"}, dir, std::chrono::seconds(60)),
            0);
  auto rows = test::read_sqlite_table(dir / "out.db", "big", {"_id", "n", "s"});
  ASSERT_TRUE(rows);
  ASSERT_EQ(rows->size(), size_t(kDocs));
  test::Rows want;
  for (int i = 0; i < kDocs; ++i)
    want.push_back({std::to_string(i), std::to_string(i * 7), "row " + std::to_string(i)});
  EXPECT_EQ(*rows, test::sorted(want));
  std::cout << "checkpoint at the kill: " << at_kill << "\n";
  std::filesystem::remove_all(dir);
}

// FerretDB sorts the whole collection before a sorted find's first batch. A socket timeout shorter
// than that sort must not make the snapshot retry the same query forever: after three attempts
// that each waited the whole timeout without a document, the pipeline stops with the fix.
TEST(MongodbSource, ASnapshotQuerySlowerThanTheSocketTimeoutStopsWithTheFix) {
  MongoTestDb mdb("slowsort");
  ASSERT_TRUE(mdb.ok());
  std::vector<std::string> docs;
  for (int i = 0; i < 20000; ++i)
    docs.push_back(R"({"_id":)" + std::to_string(i) + R"(,"s":"row )" + std::to_string(i) +
                   R"("})");
  ASSERT_TRUE(mdb.insert_many("big", docs));
  const std::string url = mdb.url();
  auto dir = e2e::make_temp_dir("mongo-slow-sort");
  test::PipelineFile f;
  test::PipelineYaml& p = f.pipeline("slow");
  p.source("mongodb")
      .set("url", url + (url.find('?') == std::string::npos ? "?" : "&") + "socketTimeoutMS=150")
      .set("collections", test::Yaml::strings({"big"}))
      .set("stream", false);
  p.destination("discard");
  e2e::write_file(dir / "p.yaml", f.yaml());
  Process run({"run", "p.yaml", "--idle-exit", "2"}, dir);
  const int rc = run.wait_for(std::chrono::seconds(90));
  EXPECT_NE(rc, 0) << run.stderr_text();
  EXPECT_NE(rc, -1) << "still running after 90 s: " << run.stderr_text();
  EXPECT_NE(run.stderr_text().find("did not answer the snapshot's query within socketTimeoutMS "
                                   "(150 ms), 3 times in a row"),
            std::string::npos)
      << run.stderr_text();
  EXPECT_NE(run.stderr_text().find("add socketTimeoutMS=600000"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(MongodbDestination, DuplicateKeyRejectionGoesToTheDeadLetterQueueAlone) {
  MongoTestDb mdb("dlq");
  ASSERT_TRUE(mdb.ok());
  ASSERT_TRUE(mdb.command(
      R"({"createIndexes":"items","indexes":[{"key":{"email":1},"name":"email_unique","unique":true}]})"));
  auto dir = e2e::make_temp_dir("mongo-dlq");
  auto rec = [](int id, const std::string& email) {
    return R"({"operation":"create","metadata":{"table":"items"},"key":{"id":)" +
           std::to_string(id) + R"(},"payload":{"after":{"id":)" + std::to_string(id) +
           R"(,"email":")" + email + R"("}}})" + "\n";
  };
  e2e::write_file(dir / "in.jsonl", rec(1, "a@x") + rec(2, "a@x") + rec(3, "c@x"));
  test::PipelineFile f;
  test::PipelineYaml& p = f.pipeline("dlq");
  p.source("file").set("path", "in.jsonl");
  p.destination("mongodb").set("url", mdb.url());
  p.on_error = "dlq";
  p.dlq("file").set("path", "dlq.jsonl");
  e2e::write_file(dir / "p.yaml", f.yaml());
  ASSERT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "2"}, dir, std::chrono::seconds(60)),
            0);
  EXPECT_EQ(mdb.count("items"), 2);
  auto dead = test::read_jsonl_file(dir / "dlq.jsonl");
  ASSERT_EQ(dead.size(), 1u);
  const std::string line = dead[0][0].value_or("");
  EXPECT_NE(line.find("\"id\":2"), std::string::npos) << line;
  EXPECT_NE(line.find("code 11000"), std::string::npos) << line;
  std::filesystem::remove_all(dir);
}

TEST(MongodbDestination, CheckpointInDestinationResumesWithoutTheCheckpointStore) {
  MongoTestDb mdb("cpdest");
  ASSERT_TRUE(mdb.ok());
  auto dir = e2e::make_temp_dir("mongo-cpdest");
  std::string lines;
  for (int id = 1; id <= 5; ++id)
    lines += R"({"operation":"create","metadata":{"table":"items"},"key":{"id":)" +
             std::to_string(id) + R"(},"payload":{"after":{"id":)" + std::to_string(id) + "}}}\n";
  e2e::write_file(dir / "in.jsonl", lines);
  test::PipelineFile f;
  test::PipelineYaml& p = f.pipeline("cpd");
  p.source("file").set("path", "in.jsonl");
  p.destination("mongodb").set("url", mdb.url()).set("checkpoint_in_destination", true);
  e2e::write_file(dir / "p.yaml", f.yaml());
  ASSERT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "1"}, dir, std::chrono::seconds(60)),
            0);
  EXPECT_EQ(mdb.count("items"), 5);
  EXPECT_EQ(mdb.count("sluice_checkpoints"), 1);
  // The checkpoint store lost: the position stored in MongoDB is authoritative, nothing is read
  // again.
  std::filesystem::remove_all(dir / "state");
  std::filesystem::remove(dir / "stderr.txt");
  ASSERT_EQ(e2e::run_sluice({"run", "p.yaml", "--idle-exit", "1"}, dir, std::chrono::seconds(60)),
            0);
  EXPECT_NE(e2e::read_file(dir / "stderr.txt").find(" 0 read"), std::string::npos)
      << e2e::read_file(dir / "stderr.txt");
  EXPECT_EQ(mdb.count("items"), 5);
  std::filesystem::remove_all(dir);
}

TEST(MongodbConnector, BadSettingsFailWithTheFix) {
  auto dir = e2e::make_temp_dir("mongo-bad");
  test::PipelineFile f;
  test::PipelineYaml& p = f.pipeline("bad");
  p.source("generator").set("count", 1);
  p.destination("mongodb").set("url", "mongodb://127.0.0.1:1");
  e2e::write_file(dir / "p.yaml", f.yaml());
  Process run({"run", "p.yaml", "--idle-exit", "1"}, dir);
  EXPECT_NE(run.wait_for(std::chrono::seconds(20)), 0);
  EXPECT_NE(run.stderr_text().find("names no database"), std::string::npos) << run.stderr_text();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sluice::pgtest
