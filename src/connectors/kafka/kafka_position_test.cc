// The kafka source's position text (topic → partition → next offset).
#include <gtest/gtest.h>

#include "connectors/kafka/kafka_source.h"

namespace sluice::kafka {
namespace {

TEST(KafkaPosition, RoundTripsAndRejectsGarbage) {
  Offsets o;
  o["orders"][0] = 120;
  o["orders"][1] = 98;
  o["a.b-c_d"][7] = 0;
  const std::string text = encode_position(o);
  EXPECT_EQ(text, "a.b-c_d:7=0;orders:0=120,1=98");
  auto back = parse_position(text);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, o);
  EXPECT_TRUE(parse_position("")->empty());
  for (std::string_view bad :
       {"orders", "orders:", "orders:x=1", "orders:0=", "orders:0=-5", ":0=1", "cdc 0/16B3748"})
    EXPECT_FALSE(parse_position(bad)) << bad;
}

}  // namespace
}  // namespace sluice::kafka
