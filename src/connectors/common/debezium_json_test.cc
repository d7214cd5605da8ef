#include "connectors/common/debezium_json.h"

#include <gtest/gtest.h>

#include "sluice/batch.h"

namespace sluice::kafka {
namespace {

Value meta(Batch& b, std::initializer_list<std::pair<std::string_view, std::string_view>> kv) {
  ObjectBuilder m = b.object(uint32_t(kv.size()));
  for (const auto& [k, v] : kv) m.add(k, Value::string(v));
  return m.build();
}

std::string value(const Value& v) {
  std::string out;
  encode_debezium_value(v, out);
  return out;
}

std::string envelope(const Record& r, int64_t now_ms = 1700000000123) {
  std::string out;
  encode_debezium_envelope(r, DebeziumSource{"shop", "1.0", now_ms}, out);
  return out;
}

TEST(DebeziumValue, MapsKindsLikeDebeziumDefaults) {
  EXPECT_EQ(value(Value::null()), "null");
  EXPECT_EQ(value(Value::boolean(true)), "true");
  EXPECT_EQ(value(Value::int64(-7)), "-7");
  EXPECT_EQ(value(Value::decimal("12.340")), "\"12.340\"");  // decimal.handling.mode=string
  EXPECT_EQ(value(Value::date(19782)), "19782");             // io.debezium.time.Date: days
  EXPECT_EQ(value(Value::time(3723000001)), "3723000001");   // MicroTime
  EXPECT_EQ(value(Value::timestamp(1700000000123456)), "1700000000123456");  // MicroTimestamp
  EXPECT_EQ(value(Value::timestamptz(0)), "\"1970-01-01T00:00:00Z\"");       // ZonedTimestamp
  EXPECT_EQ(value(Value::timetz(int64_t(3600) * 1000000, 3600)),
            "\"00:00:00Z\"");  // ZonedTime in UTC
  EXPECT_EQ(value(Value::json("{\"a\": 1}")),
            "\"{\\\"a\\\": 1}\"");  // io.debezium.data.Json: a string
  EXPECT_EQ(value(Value::string("a\"b\n")), "\"a\\\"b\\n\"");
  EXPECT_EQ(value(Value::bytes("\x01\x02")), "\"AQI=\"");  // base64
  Interval iv{0, 1, 5};
  EXPECT_EQ(value(Value::interval(&iv)), "86400000005");  // MicroDuration
  Interval month{1, 0, 0};
  EXPECT_EQ(value(Value::interval(&month)), "2629800000000");  // 365.25 / 12 days
  const uint8_t u[16] = {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0,
                         0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0};
  EXPECT_EQ(value(Value::uuid(u)), "\"12345678-9abc-def0-1234-56789abcdef0\"");
  const Value items[] = {Value::int64(1), Value::null()};
  EXPECT_EQ(value(Value::array(items, 2)), "[1,null]");
}

TEST(DebeziumValue, AbsentFieldsAreLeftOut) {
  Batch b;
  Value obj =
      b.object(3).add("id", Value::int64(1)).add("toast", Value()).add("n", Value::null()).build();
  EXPECT_EQ(value(obj), "{\"id\":1,\"n\":null}");
}

TEST(MessageKey, CompactJsonOfTheKeyAndNullWithoutOne) {
  Batch b;
  Record& r = b.add();
  std::string out;
  EXPECT_FALSE(encode_key(r, true, out));
  EXPECT_EQ(out, "");
  r.key = b.object(2).add("id", Value::int64(1)).add("region", Value::string("eu")).build();
  EXPECT_TRUE(encode_key(r, true, out));
  EXPECT_EQ(out, "{\"id\":1,\"region\":\"eu\"}");
  out.clear();
  r.key = b.object(1).add("day", Value::date(3)).build();
  EXPECT_TRUE(encode_key(r, true, out));
  EXPECT_EQ(out, "{\"day\":3}");
  out.clear();
  EXPECT_TRUE(encode_key(r, false, out));  // opencdc: the OpenCDC codec's text form
  EXPECT_EQ(out, "{\"day\":\"1970-01-04\"}");
}

TEST(DebeziumEnvelope, InsertFromPostgresCdc) {
  Batch b;
  Record& r = b.add();
  r.op = Operation::create;
  r.metadata = meta(b, {{"schema", "public"},
                        {"table", "employees"},
                        {"lsn", "0/16B3748"},
                        {"commit_lsn", "0/16B3800"},
                        {"commit_time", "2024-01-02T03:04:05.678Z"},
                        {"xid", "751"}});
  r.key = b.object(1).add("id", Value::int64(1)).build();
  r.after = b.object(2).add("id", Value::int64(1)).add("name", Value::string("Ann")).build();
  EXPECT_EQ(
      envelope(r),
      "{\"before\":null,\"after\":{\"id\":1,\"name\":\"Ann\"},"
      "\"source\":{\"version\":\"1.0\",\"connector\":\"sluice\",\"name\":\"shop\",\"ts_ms\":1704164645678,"
      "\"snapshot\":\"false\",\"db\":null,\"sequence\":null,\"schema\":\"public\",\"table\":\"employees\","
      "\"txId\":751,\"lsn\":23803720,\"xmin\":null},"
      "\"op\":\"c\",\"ts_ms\":1700000000123,\"transaction\":null}");
}

TEST(DebeziumEnvelope, UpdateDeleteSnapshotTruncate) {
  Batch b;
  Value key = b.object(1).add("id", Value::int64(2)).build();
  Value before = b.object(2).add("id", Value::int64(2)).add("n", Value::int64(1)).build();
  Value after = b.object(2).add("id", Value::int64(2)).add("n", Value::int64(2)).build();

  Record u;
  u.op = Operation::update;
  u.key = key;
  u.before = before;
  u.after = after;
  u.metadata = meta(b, {{"table", "t"}, {"connector", "postgresql"}, {"db", "shop"}});
  std::string e = envelope(u);
  EXPECT_NE(e.find("\"before\":{\"id\":2,\"n\":1},\"after\":{\"id\":2,\"n\":2}"), std::string::npos)
      << e;
  EXPECT_NE(e.find("\"op\":\"u\""), std::string::npos);
  EXPECT_NE(e.find("\"connector\":\"postgresql\""), std::string::npos);
  EXPECT_NE(e.find("\"db\":\"shop\""), std::string::npos);
  EXPECT_NE(e.find("\"schema\":null"), std::string::npos);
  EXPECT_NE(e.find("\"ts_ms\":1700000000123,\"snapshot\""),
            std::string::npos);  // no commit time: now

  Record d;
  d.op = Operation::remove;
  d.key = key;
  d.metadata = meta(b, {{"table", "t"}});
  e = envelope(d);
  EXPECT_EQ(e.rfind("{\"before\":{\"id\":2},\"after\":null,", 0), 0u)
      << e;  // key columns as before
  EXPECT_NE(e.find("\"op\":\"d\""), std::string::npos);
  EXPECT_EQ(debezium_op(d), 'd');

  Record s;
  s.op = Operation::snapshot;
  s.key = key;
  s.after = after;
  e = envelope(s);
  EXPECT_NE(e.find("\"snapshot\":\"true\""), std::string::npos);
  EXPECT_NE(e.find("\"op\":\"r\""), std::string::npos);
  EXPECT_NE(e.find("\"before\":null,\"after\":{\"id\":2,\"n\":2}"), std::string::npos);

  Record t;
  t.op = Operation::remove;
  t.metadata = meta(b, {{"table", "t"}, {"truncate", "true"}});
  EXPECT_EQ(debezium_op(t), 't');
  e = envelope(t);
  EXPECT_EQ(e.rfind("{\"before\":null,\"after\":null,", 0), 0u) << e;
  EXPECT_NE(e.find("\"op\":\"t\""), std::string::npos);
}

TEST(DebeziumEnvelope, BinlogSourcesGetDebeziumsMysqlSourceBlock) {
  Batch b;
  Record& r = b.add();
  r.op = Operation::create;
  r.metadata = meta(b, {{"schema", "shop"},
                        {"table", "orders"},
                        {"binlog_file", "mysql-bin.000003"},
                        {"binlog_pos", "154"},
                        {"gtid", "0-1-42"},
                        {"commit_time", "2024-01-02T03:04:05Z"},
                        {"connector", "mysql"}});
  r.key = b.object(1).add("id", Value::int64(7)).build();
  r.after = b.object(1).add("id", Value::int64(7)).build();
  EXPECT_EQ(
      envelope(r),
      "{\"before\":null,\"after\":{\"id\":7},"
      "\"source\":{\"version\":\"1.0\",\"connector\":\"mysql\",\"name\":\"shop\",\"ts_ms\":1704164645000,"
      "\"snapshot\":\"false\",\"db\":\"shop\",\"sequence\":null,\"table\":\"orders\",\"server_id\":0,"
      "\"gtid\":\"0-1-42\",\"file\":\"mysql-bin.000003\",\"pos\":154,\"row\":0,\"thread\":null,\"query\":null},"
      "\"op\":\"c\",\"ts_ms\":1700000000123,\"transaction\":null}");
}

TEST(PgLsn, Parses) {
  uint64_t v = 0;
  EXPECT_TRUE(parse_pg_lsn("16/B374D848", &v));
  EXPECT_EQ(v, 0x16B374D848u);
  EXPECT_FALSE(parse_pg_lsn("cdc 0/1", &v));
  EXPECT_FALSE(parse_pg_lsn("0/", &v));
  EXPECT_FALSE(parse_pg_lsn("", &v));
}

}  // namespace
}  // namespace sluice::kafka
