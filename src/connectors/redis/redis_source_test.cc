// The redis source's pure parts: its batch positions and what counts as a stream pattern.
#include "connectors/redis/redis_source.h"

#include <gtest/gtest.h>

namespace sluice::redis {
namespace {

TEST(RedisSourcePosition, TheSequenceLeadsThePosition) {
  EXPECT_EQ(position_sequence("12;orders=1733050000000-0;users=1-1"), 12u);
  EXPECT_EQ(position_sequence("7"), 7u);
  EXPECT_FALSE(position_sequence(""));
  EXPECT_FALSE(position_sequence(";orders=1-0"));
  EXPECT_FALSE(position_sequence("x1;orders=1-0"));
  EXPECT_FALSE(position_sequence("orders:0=12"));  // a kafka position
}

TEST(RedisSourcePosition, GlobCharactersMakeAPattern) {
  EXPECT_TRUE(is_stream_pattern("events:*"));
  EXPECT_TRUE(is_stream_pattern("s?"));
  EXPECT_TRUE(is_stream_pattern("s[12]"));
  EXPECT_FALSE(is_stream_pattern("orders"));
  EXPECT_FALSE(is_stream_pattern("app:orders.v1"));
}

}  // namespace
}  // namespace sluice::redis
