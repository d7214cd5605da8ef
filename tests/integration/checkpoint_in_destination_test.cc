// checkpoint_in_destination against the real servers: the postgres and mysql destinations commit
// each batch's position into sluice_checkpoints in the batch's transaction, a failing batch leaves
// the previous position, and stored_position() reads it back (also after a reopen). Each test
// writes into a database of its own.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "integration/pg_harness.h"
#include "support/env.h"
#include "support/sql.h"

namespace sluice::pgtest {
namespace {

// Arbitrary bytes: NUL, high bytes, a quote and a backslash.
const std::string kPos1("lsn\0\xff'\\1", 8);

std::unique_ptr<Destination> make_dest(const std::string& connector,
                                       std::map<std::string, std::string> settings) {
  const ConnectorSpec* spec = Registry::builtin().connector(connector);
  EXPECT_NE(spec, nullptr);
  if (!spec || !spec->make_destination) return nullptr;
  Settings s(spec->destination_settings);
  auto err = settings_from_text(spec->destination_settings, settings, &s);
  EXPECT_FALSE(err.has_value()) << *err;
  auto d = spec->make_destination(s);
  EXPECT_TRUE(d.ok()) << d.error().message();
  if (!d.ok()) return nullptr;
  std::unique_ptr<Destination> dest = std::move(d.value());
  Status st = dest->open(ConnectorContext{"cid", connector, nullptr});
  EXPECT_TRUE(st.ok()) << st.error().message();
  return dest;
}

Status write(Destination& d, Batch& b) {
  int calls = 0;
  Status result = Error(Errc::internal, "done not called");
  d.write(b, [&](Status s) {
    ++calls;
    result = std::move(s);
  });
  EXPECT_EQ(calls, 1);
  return result;
}

Record& add(Batch& b, Value key, Value after) {
  Record& r = b.add();
  r.op = Operation::create;
  r.metadata = b.object(1).add("table", Value::string(b.copy("employees"))).build();
  r.key = key;
  r.after = after;
  return r;
}
Value id_key(Batch& b, int64_t id) { return b.object(1).add("id", Value::int64(id)).build(); }
Value person(Batch& b, int64_t id, std::string_view name, Value salary) {
  return b.object(3)
      .add("id", Value::int64(id))
      .add("name", Value::string(b.copy(name)))
      .add("salary", salary)
      .build();
}

std::optional<std::string> stored(Destination& d, std::string_view id = "cid") {
  auto r = d.stored_position(id);
  EXPECT_TRUE(r.ok()) << r.error().message();
  return r.ok() ? r.value() : std::nullopt;
}

// The scenario shared by both servers; `ids` reads back the employees' ids ("1,2").
void run_scenario(const std::function<std::unique_ptr<Destination>()>& open,
                  const std::function<std::string()>& ids) {
  auto d = open();
  ASSERT_TRUE(d);
  ASSERT_TRUE(d->stores_positions());
  EXPECT_FALSE(stored(*d).has_value());

  Batch b1;
  add(b1, id_key(b1, 1), person(b1, 1, "Ada", Value::float64(1)));
  b1.set_position(kPos1);
  ASSERT_TRUE(write(*d, b1).ok());
  EXPECT_EQ(stored(*d), std::optional<std::string>(kPos1));
  EXPECT_FALSE(stored(*d, "other").has_value());

  // Fails inside the transaction, after a good row: rows and position roll back together.
  Batch b2;
  add(b2, id_key(b2, 2), person(b2, 2, "Alan", Value::float64(2)));
  add(b2, id_key(b2, 3), person(b2, 3, "Grace", Value::string(b2.copy("not a number"))));
  b2.set_position("pos-2");
  Status s2 = write(*d, b2);
  EXPECT_FALSE(s2.ok());
  EXPECT_EQ(stored(*d), std::optional<std::string>(kPos1));
  EXPECT_EQ(ids(), "1");

  // A keyless record fails the batch too.
  Batch b3;
  add(b3, id_key(b3, 2), person(b3, 2, "Alan", Value::float64(2)));
  add(b3, Value(), person(b3, 4, "Edsger", Value::float64(4)));
  b3.set_position("pos-3");
  EXPECT_FALSE(write(*d, b3).ok());
  EXPECT_EQ(stored(*d), std::optional<std::string>(kPos1));

  // Replaying batch 1 and writing a newer one: the position moves on, the rows are exact.
  ASSERT_TRUE(write(*d, b1).ok());
  Batch b4;
  add(b4, id_key(b4, 2), person(b4, 2, "Alan", Value::float64(2)));
  b4.set_position("pos-4");
  ASSERT_TRUE(write(*d, b4).ok());
  EXPECT_EQ(stored(*d), std::optional<std::string>("pos-4"));
  EXPECT_EQ(ids(), "1,2");
  d->close();

  auto again = open();
  ASSERT_TRUE(again);
  EXPECT_EQ(stored(*again), std::optional<std::string>("pos-4"));
  again->close();
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

TEST(CheckpointInDestinationPostgres, PositionCommitsWithTheBatch) {
  TestDb db("cid_pg_" + std::to_string(::getpid()));
  ASSERT_TRUE(db.ok());
  run_scenario(
      [&] {
        return make_dest(
            "postgres",
            {{"url", db.url()}, {"schema", "cdc"}, {"checkpoint_in_destination", "true"}});
      },
      [&] {
        std::vector<std::string> ids;
        for (const Row& r : db.sql().query("SELECT id FROM cdc.employees ORDER BY id"))
          ids.push_back(*r[0]);
        return joined(ids);
      });
  EXPECT_EQ(
      db.sql().scalar(
          "SELECT encode(position, 'escape') FROM cdc.sluice_checkpoints WHERE pipeline = 'cid'"),
      "pos-4");
  EXPECT_EQ(
      db.sql().scalar("SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = "
                      "'cdc.sluice_checkpoints'::regclass AND attname = 'position'"),
      "bytea");
}

TEST(CheckpointInDestinationPostgres, OffByDefault) {
  TestDb db("cid_pg_off_" + std::to_string(::getpid()));
  ASSERT_TRUE(db.ok());
  auto d = make_dest("postgres", {{"url", db.url()}});
  ASSERT_TRUE(d);
  EXPECT_FALSE(d->stores_positions());
  Batch b;
  add(b, id_key(b, 1), person(b, 1, "Ada", Value::float64(1)));
  b.set_position("p");
  ASSERT_TRUE(write(*d, b).ok());
  d->close();
  EXPECT_EQ(
      db.sql().scalar("SELECT count(*) FROM pg_tables WHERE tablename = 'sluice_checkpoints'"),
      "0");
}

// ── MySQL / MariaDB ────────────────────────────────────────────────────────

// The first column of each row (NULL as "NULL").
std::vector<std::string> column(test::MysqlClient& c, const std::string& sql) {
  std::vector<std::string> out;
  for (const Row& r : c.query(sql)) out.push_back(r.empty() || !r[0] ? "NULL" : *r[0]);
  return out;
}

class CheckpointInDestinationMysql : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string base = test::mysql_url();
    ASSERT_FALSE(base.empty());
    url_ = test::MyUrl::parse(base);
    db_ = "sluice_cid_" + std::to_string(::getpid()) + "_" +
          ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_TRUE(admin_.connect(base, std::string()));
    admin_.exec("DROP DATABASE IF EXISTS `" + db_ + "`");
    admin_.exec("CREATE DATABASE `" + db_ + "` CHARACTER SET utf8mb4");
    ASSERT_TRUE(client_.connect(base, db_));
  }
  void TearDown() override {
    if (!db_.empty() && !HasFailure()) admin_.exec("DROP DATABASE IF EXISTS `" + db_ + "`");
  }
  std::string dest_url() const {
    test::MyUrl u = url_;
    u.db = db_;
    return u.str();
  }

  test::MyUrl url_;
  std::string db_;
  test::MysqlClient admin_, client_;
};

TEST_F(CheckpointInDestinationMysql, PositionCommitsWithTheBatch) {
  run_scenario(
      [&] {
        return make_dest("mysql", {{"url", dest_url()}, {"checkpoint_in_destination", "true"}});
      },
      [&] { return joined(column(client_, "SELECT id FROM employees ORDER BY id")); });
  EXPECT_EQ(column(client_, "SELECT position FROM sluice_checkpoints WHERE pipeline = 'cid'"),
            std::vector<std::string>{"pos-4"});
  EXPECT_EQ(column(client_,
                   "SELECT DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = '" + db_ +
                       "' AND TABLE_NAME = 'sluice_checkpoints' AND COLUMN_NAME = 'position'"),
            std::vector<std::string>{"longblob"});
}

TEST_F(CheckpointInDestinationMysql, OffByDefault) {
  auto d = make_dest("mysql", {{"url", dest_url()}});
  ASSERT_TRUE(d);
  EXPECT_FALSE(d->stores_positions());
  Batch b;
  add(b, id_key(b, 1), person(b, 1, "Ada", Value::float64(1)));
  b.set_position("p");
  ASSERT_TRUE(write(*d, b).ok());
  d->close();
  EXPECT_EQ(
      column(client_, "SELECT count(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = '" +
                          db_ + "' AND TABLE_NAME = 'sluice_checkpoints'"),
      std::vector<std::string>{"0"});
}

}  // namespace
}  // namespace sluice::pgtest
