// The kafka source's message decoders on constructed messages (Debezium envelopes written the way
// Debezium's JsonConverter writes them, with and without schemas), and its position text.
#include "connectors/common/message_formats.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "sluice/json.h"

namespace sluice::kafka {
namespace {

MessageView msg(std::optional<std::string_view> key, std::optional<std::string_view> value,
                int64_t offset = 42) {
  MessageView m;
  m.topic = "dbserver1.inventory.customers";
  m.partition = 3;
  m.offset = offset;
  m.key = key;
  m.value = value;
  m.timestamp_ms = 1700000000123;
  return m;
}

const Value& field(const Value& obj, std::string_view name) {
  static const Value absent;
  const Value* v = obj.find(name);
  return v ? *v : absent;
}

// ── debezium ────────────────────────────────────────────────────────────────

constexpr std::string_view kPlainCreate = R"({
  "before": null,
  "after": {"id": 1004, "first_name": "Anne", "last_name": "Kretchmar", "email": "annek@noanswer.org"},
  "source": {"version": "2.5.0.Final", "connector": "postgresql", "name": "dbserver1", "ts_ms": 1559033904863,
             "snapshot": "false", "db": "postgres", "schema": "inventory", "table": "customers", "txId": 555,
             "lsn": 24023128, "xmin": null},
  "op": "c",
  "ts_ms": 1559033904863
})";

TEST(KafkaDebezium, CreateWithoutSchemaKeepsValuesAndMetadata) {
  Batch b;
  MessageDecoder d(Format::debezium);
  std::vector<std::pair<std::string_view, std::string_view>> headers = {{"trace", "abc"},
                                                                        {"table", "ignored"}};
  MessageView m = msg(R"({"id": 1004})", kPlainCreate);
  m.headers = headers;
  ASSERT_TRUE(d.decode(m, b).ok());
  ASSERT_EQ(b.size(), 1u);
  const Record& r = b.records()[0];
  EXPECT_EQ(r.op, Operation::create);
  EXPECT_TRUE(r.before.is_absent());
  EXPECT_EQ(field(r.after, "id"), Value::int64(1004));
  EXPECT_EQ(field(r.after, "email").as_text(), "annek@noanswer.org");
  EXPECT_EQ(field(r.key, "id"), Value::int64(1004));
  EXPECT_EQ(r.meta("schema"), "inventory");
  EXPECT_EQ(r.meta("table"), "customers");
  EXPECT_EQ(r.meta("kafka.topic"), "dbserver1.inventory.customers");
  EXPECT_EQ(r.meta("kafka.partition"), "3");
  EXPECT_EQ(r.meta("kafka.offset"), "42");
  EXPECT_EQ(r.meta("kafka.timestamp"), "2023-11-14T22:13:20.123Z");
  EXPECT_EQ(r.meta("trace"), "abc");
  EXPECT_EQ(r.meta("table"), "customers");  // a header never overrides
}

TEST(KafkaDebezium, OperationsMapToRecordOperations) {
  const std::pair<std::string_view, Operation> cases[] = {{"c", Operation::create},
                                                          {"u", Operation::update},
                                                          {"d", Operation::remove},
                                                          {"r", Operation::snapshot}};
  for (const auto& [op, want] : cases) {
    Batch b;
    MessageDecoder d(Format::debezium);
    const std::string v = std::string(R"({"before":{"id":1,"v":"old"},"after":)") +
                          (op == "d" ? "null" : R"({"id":1,"v":"new"})") +
                          R"(,"source":{"db":"shop","table":"items"},"op":")" + std::string(op) +
                          R"("})";
    ASSERT_TRUE(d.decode(msg(R"({"id":1})", v), b).ok()) << op;
    ASSERT_EQ(b.size(), 1u);
    const Record& r = b.records()[0];
    EXPECT_EQ(r.op, want) << op;
    EXPECT_EQ(field(r.before, "v").as_text(), "old");
    if (op == "d") EXPECT_TRUE(r.after.is_absent());
    else EXPECT_EQ(field(r.after, "v").as_text(), "new");
    EXPECT_EQ(r.meta("schema"), "shop");  // MySQL: source.db
    EXPECT_EQ(r.meta("table"), "items");
  }
}

TEST(KafkaDebezium, TruncateIsAKeylessDeleteMarkedTruncate) {
  Batch b;
  MessageDecoder d(Format::debezium);
  ASSERT_TRUE(
      d.decode(
           msg(std::nullopt,
               R"({"before":null,"after":null,"source":{"schema":"public","table":"t"},"op":"t"})"),
           b)
          .ok());
  ASSERT_EQ(b.size(), 1u);
  EXPECT_TRUE(is_truncate(b.records()[0]));
  EXPECT_EQ(b.records()[0].meta("table"), "t");
}

TEST(KafkaDebezium, TombstonesAreSkipped) {
  Batch b;
  MessageDecoder d(Format::debezium);
  ASSERT_TRUE(d.decode(msg(R"({"id":1})", std::nullopt), b).ok());
  EXPECT_EQ(b.size(), 0u);
}

TEST(KafkaDebezium, SchemaWrapperRestoresTypes) {
  // As JsonConverter writes it with schemas.enable=true (PostgreSQL connector, time.precision.mode
  // adaptive, decimal.handling.mode precise, binary.handling.mode bytes).
  const std::string value = R"({
    "schema": {"type": "struct", "optional": false, "name": "dbserver1.public.t.Envelope", "fields": [
      {"type": "struct", "optional": true, "name": "dbserver1.public.t.Value", "field": "before", "fields": [
        {"type": "int32", "optional": false, "field": "id"}]},
      {"type": "struct", "optional": true, "name": "dbserver1.public.t.Value", "field": "after", "fields": [
        {"type": "int32", "optional": false, "field": "id"},
        {"type": "int32", "optional": true, "name": "io.debezium.time.Date", "version": 1, "field": "d"},
        {"type": "int64", "optional": true, "name": "io.debezium.time.MicroTimestamp", "version": 1, "field": "ts"},
        {"type": "int64", "optional": true, "name": "io.debezium.time.Timestamp", "version": 1, "field": "ts_ms"},
        {"type": "string", "optional": true, "name": "io.debezium.time.ZonedTimestamp", "version": 1, "field": "tstz"},
        {"type": "int64", "optional": true, "name": "io.debezium.time.MicroTime", "version": 1, "field": "tm"},
        {"type": "bytes", "optional": true, "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
         "parameters": {"scale": "2", "connect.decimal.precision": "12"}, "field": "amount"},
        {"type": "bytes", "optional": true, "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
         "parameters": {"scale": "2"}, "field": "neg"},
        {"type": "struct", "optional": true, "name": "io.debezium.data.VariableScaleDecimal", "version": 1,
         "field": "num", "fields": [{"type": "int32", "optional": false, "field": "scale"},
                                    {"type": "bytes", "optional": false, "field": "value"}]},
        {"type": "string", "optional": true, "name": "io.debezium.data.Uuid", "version": 1, "field": "u"},
        {"type": "string", "optional": true, "name": "io.debezium.data.Json", "version": 1, "field": "j"},
        {"type": "bytes", "optional": true, "field": "raw"},
        {"type": "string", "optional": true, "field": "s"}]},
      {"type": "struct", "optional": false, "name": "io.debezium.connector.postgresql.Source", "field": "source",
       "fields": [{"type": "string", "optional": false, "field": "schema"}, {"type": "string", "optional": false, "field": "table"}]},
      {"type": "string", "optional": false, "field": "op"},
      {"type": "int64", "optional": true, "field": "ts_ms"}]},
    "payload": {
      "before": null,
      "after": {"id": 7, "d": 19782, "ts": 1709214300123456, "ts_ms": 1709214300123, "tstz": "2024-02-29T13:45:00.5Z",
                "tm": 49500000000, "amount": "MDk=", "neg": "/tw=", "num": {"scale": 3, "value": "AeJA"},
                "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "j": "{\"a\": [1, 2]}", "raw": "AAEC/w==", "s": "text"},
      "source": {"schema": "public", "table": "t"},
      "op": "r",
      "ts_ms": 1709214300999}})";
  const std::string key =
      R"({"schema":{"type":"struct","optional":false,"name":"dbserver1.public.t.Key","fields":[{"type":"int32","optional":false,"field":"id"}]},"payload":{"id":7}})";
  Batch b;
  MessageDecoder d(Format::debezium);
  Status st = d.decode(msg(key, value), b);
  ASSERT_TRUE(st.ok()) << st.error().message();
  ASSERT_EQ(b.size(), 1u);
  const Record& r = b.records()[0];
  EXPECT_EQ(r.op, Operation::snapshot);
  EXPECT_EQ(field(r.key, "id"), Value::int64(7));
  const Value& a = r.after;
  int32_t days;
  ASSERT_TRUE(parse_date("2024-02-29", &days));
  EXPECT_EQ(field(a, "d"), Value::date(days));
  EXPECT_EQ(field(a, "ts").kind(), ValueKind::timestamp);
  EXPECT_EQ(format_timestamp(field(a, "ts").as_micros()), "2024-02-29T13:45:00.123456");
  EXPECT_EQ(format_timestamp(field(a, "ts_ms").as_micros()), "2024-02-29T13:45:00.123");
  EXPECT_EQ(field(a, "tstz").kind(), ValueKind::timestamptz);
  EXPECT_EQ(format_timestamptz(field(a, "tstz").as_micros()), "2024-02-29T13:45:00.5Z");
  EXPECT_EQ(field(a, "tm"), Value::time(49500000000));
  EXPECT_EQ(field(a, "amount"), Value::decimal("123.45"));  // 0x3039 = 12345
  EXPECT_EQ(field(a, "neg"), Value::decimal("-2.92"));      // 0xFEDC = -292
  EXPECT_EQ(field(a, "num"), Value::decimal("123.456"));    // 0x01E240 = 123456, scale 3
  EXPECT_EQ(field(a, "u").kind(), ValueKind::uuid);
  EXPECT_EQ(format_uuid(field(a, "u").uuid_bytes()), "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
  EXPECT_EQ(field(a, "j"), Value::json("{\"a\": [1, 2]}"));
  EXPECT_EQ(field(a, "raw"), Value::bytes(std::string_view("\x00\x01\x02\xff", 4)));
  EXPECT_EQ(field(a, "s").as_text(), "text");
  EXPECT_EQ(r.meta("schema"), "public");
}

TEST(KafkaDebezium, DecimalFromUnscaledBytes) {
  EXPECT_EQ(decimal_from_unscaled(std::string_view("\x30\x39", 2), 2), "123.45");
  EXPECT_EQ(decimal_from_unscaled(std::string_view("\xcf\xc7", 2), 2), "-123.45");
  EXPECT_EQ(decimal_from_unscaled(std::string_view("\x05", 1), 3), "0.005");
  EXPECT_EQ(decimal_from_unscaled(std::string_view("\xff", 1), 0), "-1");
  EXPECT_EQ(decimal_from_unscaled(std::string_view("\x00", 1), 2), "0.00");
  EXPECT_EQ(decimal_from_unscaled(std::string_view("\x07", 1), -2), "700");
  // 2^64 (more than 64 bits).
  EXPECT_EQ(decimal_from_unscaled(std::string_view("\x01\x00\x00\x00\x00\x00\x00\x00\x00", 9), 0),
            "18446744073709551616");
}

TEST(KafkaDebezium, MalformedMessagesAreOneLineDataErrorsNamingTheMessage) {
  MessageDecoder d(Format::debezium);
  for (std::string_view bad :
       {std::string_view("{not json"), std::string_view(R"({"after":{"id":1}})"),
        std::string_view(R"({"op":"x","after":{}})"), std::string_view("[1,2]")}) {
    Batch b;
    Status st = d.decode(msg(std::nullopt, bad, 17), b);
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_EQ(st.error().code(), Errc::data);
    EXPECT_NE(
        st.error().message().find("topic 'dbserver1.inventory.customers' partition 3 offset 17"),
        std::string::npos)
        << st.error().message();
    EXPECT_EQ(st.error().message().find('\n'), std::string::npos);
    EXPECT_EQ(b.size(), 0u);
  }
  Batch b;
  Status st = d.decode(msg("{bad key", R"({"op":"c","after":{"id":1}})"), b);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("key"), std::string::npos);
  EXPECT_EQ(b.size(), 0u);
}

// A temporal value whose microseconds do not fit int64 (or a date beyond int32 days) is a data
// error naming the field's type, never a wrapped value (a fuzz finding: ms * 1000 overflowed).
TEST(KafkaDebezium, TemporalValuesOutOfRangeAreDataErrors) {
  MessageDecoder d(Format::debezium);
  const std::pair<std::string_view, std::string_view> cases[] = {
      {"io.debezium.time.Timestamp", "170921449500000000"},
      {"org.apache.kafka.connect.data.Time", "-170921449500000000"},
      {"io.debezium.time.Date", "4294967296"}};
  for (const auto& [type, v] : cases) {
    const std::string value = fmt::format(
        R"({{"schema": {{"type": "struct", "name": "E", "fields": [{{"type": "struct", "optional": true, "name": "V", "field": "after", "fields": [{{"type": "int64", "optional": true, "name": "{}", "field": "t"}}]}}, {{"type": "string", "field": "op"}}]}}, "payload": {{"op": "c", "after": {{"t": {}}}}}}})",
        type, v);
    Batch b;
    Status st = d.decode(msg(std::nullopt, value), b);
    ASSERT_FALSE(st.ok()) << type;
    EXPECT_EQ(st.error().code(), Errc::data);
    EXPECT_NE(st.error().message().find("out of range"), std::string::npos) << st.error().message();
  }
}

// The message's own timestamp is whatever its producer set: one whose microseconds overflow int64
// is a data error whatever the format (it is checked before the value; ms * 1000 used to wrap), and
// the decoder still takes the next, ordinary message.
TEST(KafkaMessage, ATimestampBeyondMicrosecondRangeIsADataError) {
  for (Format f : {Format::debezium, Format::raw}) {
    MessageDecoder d(f);
    Batch b;
    MessageView m = msg(R"({"id": 1004})", kPlainCreate);
    m.kafka_metadata = true;
    m.timestamp_ms = INT64_MAX / 10;
    Status st = d.decode(m, b);
    ASSERT_FALSE(st.ok()) << int(f);
    EXPECT_EQ(st.error().code(), Errc::data);
    EXPECT_NE(st.error().message().find("out of range"), std::string::npos) << st.error().message();
    EXPECT_EQ(b.size(), 0u);
    m.timestamp_ms = 1700000000123;
    ASSERT_TRUE(d.decode(m, b).ok()) << int(f);
    ASSERT_EQ(b.size(), 1u);
    const Value* ts = b.records()[0].metadata.find("kafka.timestamp");
    ASSERT_NE(ts, nullptr) << int(f);
    EXPECT_EQ(ts->as_text().substr(0, 10), "2023-11-14") << int(f);
  }
}

// ── opencdc ─────────────────────────────────────────────────────────────────

TEST(KafkaOpenCdc, DecodesTheRecordAndKeepsItsMetadata) {
  Batch src;
  Record& in = src.add();
  in.op = Operation::update;
  ObjectBuilder md = src.object(2);
  md.add("table", Value::string("orders"));
  md.add("kafka.offset", Value::string("999"));  // replaced by this hop's
  in.metadata = md.build();
  ObjectBuilder k = src.object(1);
  k.add("id", Value::int64(5));
  in.key = k.build();
  ObjectBuilder a = src.object(2);
  a.add("id", Value::int64(5));
  a.add("when", Value::date(100));
  in.after = a.build();
  std::string line;
  encode_record_json(in, line);

  Batch b;
  MessageDecoder d(Format::opencdc);
  ASSERT_TRUE(d.decode(msg("k", line), b).ok());
  ASSERT_EQ(b.size(), 1u);
  const Record& r = b.records()[0];
  EXPECT_EQ(r.op, Operation::update);
  EXPECT_EQ(r.key, in.key);
  EXPECT_EQ(r.after, in.after);
  EXPECT_EQ(r.meta("table"), "orders");
  EXPECT_EQ(r.meta("kafka.offset"), "42");
  EXPECT_EQ(r.meta("kafka.partition"), "3");

  Batch t;
  ASSERT_TRUE(d.decode(msg("k", std::nullopt), t).ok());
  EXPECT_EQ(t.size(), 0u);
  Status st = d.decode(msg("k", "{\"operation\":\"bogus\"}"), t);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), Errc::data);
  EXPECT_EQ(t.size(), 0u);
}

// ── raw ─────────────────────────────────────────────────────────────────────

TEST(KafkaRaw, KeyAndValueAsStringsOrBytes) {
  Batch b;
  MessageDecoder d(Format::raw);
  ASSERT_TRUE(d.decode(msg("user-1", "hello"), b).ok());
  ASSERT_TRUE(d.decode(msg(std::string_view("\xff\x00", 2), std::string_view("\x80", 1)), b).ok());
  ASSERT_TRUE(d.decode(msg("user-1", std::nullopt), b).ok());      // keyed tombstone: delete
  ASSERT_TRUE(d.decode(msg(std::nullopt, std::nullopt), b).ok());  // nothing to say: skipped
  ASSERT_TRUE(d.decode(msg(std::nullopt, "no key"), b).ok());
  ASSERT_EQ(b.size(), 4u);
  const auto& rs = b.records();
  EXPECT_EQ(rs[0].op, Operation::create);
  EXPECT_EQ(field(rs[0].key, "key"), Value::string("user-1"));
  EXPECT_EQ(field(rs[0].after, "value"), Value::string("hello"));
  EXPECT_EQ(rs[0].meta("table"), "dbserver1.inventory.customers");
  EXPECT_EQ(field(rs[1].key, "key"), Value::bytes(std::string_view("\xff\x00", 2)));
  EXPECT_EQ(field(rs[1].after, "value"), Value::bytes(std::string_view("\x80", 1)));
  EXPECT_EQ(rs[2].op, Operation::remove);
  EXPECT_TRUE(rs[2].after.is_absent());
  EXPECT_TRUE(rs[3].key.is_absent());
}

// ── position ────────────────────────────────────────────────────────────────

}  // namespace
}  // namespace sluice::kafka
