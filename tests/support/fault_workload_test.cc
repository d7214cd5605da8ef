// The fault suite's verifier on values and messages written by hand (no database): one canonical
// text per type across PostgreSQL, MySQL and SQLite renderings, the row comparison's counts, and
// the Kafka exactly-once check's duplicates and gaps.
#include "support/fault_workload.h"

#include <gtest/gtest.h>

namespace sluice::test {
namespace {

using K = FaultColumn::Kind;

TEST(FaultVerifier, DecimalsCompareByValue) {
  EXPECT_EQ(canonical_value(K::decimal, "1.500000", Rendering::postgres),
            canonical_value(K::decimal, "1.5", Rendering::mysql));
  EXPECT_EQ(canonical_value(K::decimal, "-0.000", Rendering::postgres), "0");
  EXPECT_EQ(canonical_value(K::decimal, "007.10", Rendering::sqlite), "7.1");
  EXPECT_NE(canonical_value(K::decimal, "1.5", Rendering::postgres),
            canonical_value(K::decimal, "1.05", Rendering::postgres));
}

TEST(FaultVerifier, TimestampsCompareInUtc) {
  const std::string pg =
      canonical_value(K::timestamp, "2024-03-10 01:59:59.5+00", Rendering::postgres);
  EXPECT_EQ(pg, "2024-03-10 01:59:59.500000");
  EXPECT_EQ(canonical_value(K::timestamp, "2024-03-10T01:59:59.500000Z", Rendering::sqlite), pg);
  EXPECT_EQ(canonical_value(K::timestamp, "2024-03-10 02:59:59.5+01:00", Rendering::sqlite), pg);
  EXPECT_EQ(canonical_value(K::timestamp, "2024-03-09 20:59:59.5-05", Rendering::postgres), pg);
  EXPECT_EQ(canonical_value(K::timestamp, "2024-03-10 01:59:59.500000", Rendering::mysql), pg);
  EXPECT_NE(canonical_value(K::timestamp, "2024-03-10 01:59:59.500001", Rendering::mysql), pg);
}

// The redis destination's hash fields (docs/redis.md): ISO timestamps with T and Z (fraction only
// when not zero), raw bytes, true/false, decimals as the source gave them.
TEST(FaultVerifier, RedisRenderingsCompareWithPostgres) {
  EXPECT_EQ(canonical_value(K::timestamp, "2024-03-10T01:59:59.5Z", Rendering::redis),
            canonical_value(K::timestamp, "2024-03-10 01:59:59.5+00", Rendering::postgres));
  EXPECT_EQ(canonical_value(K::timestamp, "2024-03-10T01:59:59Z", Rendering::redis),
            canonical_value(K::timestamp, "2024-03-10 01:59:59+00", Rendering::postgres));
  EXPECT_NE(canonical_value(K::timestamp, "2024-03-10T01:59:59Z", Rendering::redis),
            canonical_value(K::timestamp, "2024-03-10 01:59:59.000001+00", Rendering::postgres));
  EXPECT_EQ(canonical_value(K::bytes, std::string("\x00\xff'\\", 4), Rendering::redis),
            canonical_value(K::bytes, "\\x00ff275c", Rendering::postgres));
  EXPECT_EQ(canonical_value(K::boolean, "true", Rendering::redis),
            canonical_value(K::boolean, "t", Rendering::postgres));
  EXPECT_EQ(canonical_value(K::decimal, "12.340000", Rendering::redis), "12.34");
  EXPECT_EQ(canonical_value(K::text, std::nullopt, Rendering::redis), "∅");  // no field
}

// BSON values as read_mongodb_image renders them (the header comment): Decimal128's text, a date
// as UTC microseconds, the ISO text of a sub-millisecond timestamp, raw binary, relaxed JSON.
TEST(FaultVerifier, BsonRenderingsCompareWithPostgres) {
  EXPECT_EQ(canonical_value(K::decimal, "1.5E+3", Rendering::bson),
            canonical_value(K::decimal, "1500.000000", Rendering::postgres));
  EXPECT_EQ(canonical_value(K::decimal, "-12.340000", Rendering::bson),
            canonical_value(K::decimal, "-12.34", Rendering::postgres));
  const std::string pg =
      canonical_value(K::timestamp, "2024-03-10 01:59:59.001237+00", Rendering::postgres);
  EXPECT_EQ(canonical_value(K::timestamp, "2024-03-10T01:59:59.001237Z", Rendering::bson), pg);
  EXPECT_EQ(canonical_value(K::timestamp, "2024-03-10 01:59:59.001000", Rendering::bson),
            canonical_value(K::timestamp, "2024-03-10 01:59:59.001+00", Rendering::postgres));
  EXPECT_NE(canonical_value(K::timestamp, "2024-03-10T01:59:59.001238Z", Rendering::bson), pg);
  EXPECT_EQ(canonical_value(K::date, "2024-02-29 00:00:00.000000", Rendering::bson),
            canonical_value(K::date, "2024-02-29", Rendering::postgres));
  EXPECT_EQ(canonical_value(K::bytes, std::string("\x00\xff'", 3), Rendering::bson),
            canonical_value(K::bytes, "\\x00ff27", Rendering::postgres));
  EXPECT_EQ(
      canonical_value(K::json, R"({ "n" : { "y" : null, "x" : 1.5 }, "id" : 7 })", Rendering::bson),
      canonical_value(K::json, R"({"id": 7, "n": {"x": 1.50, "y": null}})", Rendering::postgres));
}

TEST(FaultVerifier, BytesBooleansAndJson) {
  EXPECT_EQ(canonical_value(K::bytes, "\\x00FF27", Rendering::postgres),
            canonical_value(K::bytes, std::string("\x00\xff'", 3), Rendering::mysql));
  EXPECT_EQ(canonical_value(K::boolean, "t", Rendering::postgres),
            canonical_value(K::boolean, "1", Rendering::mysql));
  EXPECT_EQ(canonical_value(K::boolean, "f", Rendering::postgres), "false");
  EXPECT_EQ(
      canonical_value(K::json, "{\"b\": [1.50, \"x\\\"y\"], \"a\": null}", Rendering::postgres),
      canonical_value(K::json, "{\"a\":null,\"b\":[1.5,\"x\\\"y\"]}", Rendering::mysql));
  EXPECT_NE(canonical_json("{\"a\": 1}"), canonical_json("{\"a\": 2}"));
  EXPECT_EQ(canonical_value(K::text, std::nullopt, Rendering::postgres), "∅");
  EXPECT_NE(canonical_value(K::text, std::nullopt, Rendering::postgres),
            canonical_value(K::text, "", Rendering::postgres));
}

TEST(FaultVerifier, CompareImagesCountsEachKindOfDifference) {
  TableImage src, dst;
  src.rows = {{1, {"1", "a"}}, {2, {"2", "b"}}, {3, {"3", "c"}}};
  dst.rows = {{1, {"1", "a"}}, {2, {"2", "B"}}, {4, {"4", "d"}}};
  dst.duplicate_keys = 1;
  const Diff d = compare_images(src, dst);
  EXPECT_EQ(d.verified, 1);
  EXPECT_EQ(d.differing, 1);
  EXPECT_EQ(d.lost, 1);
  EXPECT_EQ(d.extra, 1);
  EXPECT_EQ(d.duplicated, 1);
  EXPECT_FALSE(d.exact());
  EXPECT_TRUE(compare_images(src, src).exact());
}

KafkaMessage msg(int64_t offset, const std::string& op, int64_t id, int rev) {
  KafkaMessage m;
  m.offset = offset;
  m.key = "{\"id\":" + std::to_string(id) + "}";
  std::string after =
      op == "delete" ? "null"
                     : "{\"id\":" + std::to_string(id) + ",\"rev\":" + std::to_string(rev) + "}";
  m.value = "{\"operation\":\"" + op + "\",\"key\":{\"id\":" + std::to_string(id) +
            "},\"payload\":{\"before\":null,\"after\":" + after + "}}";
  return m;
}

TEST(FaultVerifier, KafkaExactlyOnceFindsRepeatsGapsAndLosses) {
  TableImage src;
  src.rows = {{1, {"1", "3"}}, {2, {"2", "1"}}};
  const std::vector<KafkaMessage> good = {msg(0, "snapshot", 1, 1), msg(1, "update", 1, 2),
                                          msg(2, "update", 1, 3),   msg(3, "create", 2, 1),
                                          msg(4, "create", 5, 1),   msg(5, "delete", 5, 0)};
  EXPECT_TRUE(check_kafka_exactly_once(good, src).exact())
      << check_kafka_exactly_once(good, src).str();
  std::vector<KafkaMessage> repeated = good;
  repeated.insert(repeated.begin() + 2, msg(9, "update", 1, 2));
  EXPECT_EQ(check_kafka_exactly_once(repeated, src).duplicated, 1);
  std::vector<KafkaMessage> gap = good;
  gap.erase(gap.begin() + 1);
  EXPECT_EQ(check_kafka_exactly_once(gap, src).gaps, 1);
  std::vector<KafkaMessage> lost = good;
  lost.erase(lost.begin() + 3);  // the create of id 2
  EXPECT_EQ(check_kafka_exactly_once(lost, src).lost, 1);
  std::vector<KafkaMessage> no_delete = good;
  no_delete.pop_back();
  EXPECT_EQ(check_kafka_exactly_once(no_delete, src).lost, 1);
}

}  // namespace
}  // namespace sluice::test
