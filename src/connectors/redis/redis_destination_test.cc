// The redis destination's pure parts: field value texts and the key rendering (composite keys
// escaped so that no two keys render alike).
#include <gtest/gtest.h>

#include "connectors/redis/redis_destination.h"
#include "sluice/batch.h"

namespace sluice::redis {
namespace {

std::string field(const Value& v) {
  std::string out;
  render_field_value(v, out);
  return out;
}

std::string key(const Value& k) {
  std::string out;
  return render_key(k, out) ? out : "<none>";
}

TEST(RedisFieldValue, CanonicalTexts) {
  EXPECT_EQ(field(Value::int64(-7)), "-7");
  EXPECT_EQ(field(Value::uint64(18446744073709551615ull)), "18446744073709551615");
  EXPECT_EQ(field(Value::decimal("1.500")), "1.500");
  EXPECT_EQ(field(Value::boolean(false)), "false");
  EXPECT_EQ(field(Value::float64(0.1)), "0.1");
  EXPECT_EQ(field(Value::float64(std::numeric_limits<double>::quiet_NaN())), "NaN");
  EXPECT_EQ(field(Value::timestamp(1500000)), "1970-01-01T00:00:01.5");
  EXPECT_EQ(field(Value::time(3600000000)), "01:00:00");
  EXPECT_EQ(field(Value::null()), "");
  EXPECT_EQ(field(Value()), "");
  Batch b;
  Value items[] = {Value::int64(1), Value::string("a\"b")};
  EXPECT_EQ(field(Value::array(items, 2)), R"([1,"a\"b"])");
}

TEST(RedisKey, CompositeKeysAreUnambiguous) {
  Batch b;
  auto two = [&](std::string_view a, std::string_view c) {
    return key(b.object(2).add("a", Value::string(a)).add("b", Value::string(c)).build());
  };
  EXPECT_EQ(two("x:y", "z"), "x\\:y:z");
  EXPECT_EQ(two("x", "y:z"), "x:y\\:z");
  EXPECT_NE(two("x\\", "y"), two("x", "\\y"));
  EXPECT_EQ(key(b.object(1).add("id", Value::int64(42)).build()), "42");
  EXPECT_EQ(key(Value::string("scalar")), "scalar");
  EXPECT_EQ(key(Value()), "<none>");
  EXPECT_EQ(key(b.object(1).add("id", Value::null()).build()), "<none>");
}

}  // namespace
}  // namespace sluice::redis
