#include "connectors/common/key_columns.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sluice {
namespace {

std::string dq(std::string_view s) { return "\"" + std::string(s) + "\""; }

TEST(KeyColumns, SplitsOnCommasAndTrimsSpaces) {
  auto list = parse_key_column_list("public.events", " device ,ts,  a b ");
  ASSERT_TRUE(list.ok()) << list.error().message();
  EXPECT_EQ(list.value(), (std::vector<std::string>{"device", "ts", "a b"}));
}

TEST(KeyColumns, AnEmptyNameIsAConfigErrorNamingTheTable) {
  for (const char* text : {"", " ", "a,", ",a", "a,,b", "a, ,b"}) {
    auto list = parse_key_column_list("shop.events", text);
    ASSERT_FALSE(list.ok()) << "'" << text << "'";
    EXPECT_EQ(list.error().code(), Errc::config);
    EXPECT_NE(list.error().message().find("shop.events: an empty column name"), std::string::npos)
        << list.error().message();
  }
}

TEST(KeyColumns, EveryConfiguredTableMustBeCaptured) {
  KeyColumnsByTable configured{{{"public", "a"}, {"x"}}, {{"public", "b"}, {"y"}}};
  EXPECT_TRUE(check_key_columns_captured(configured, {{"public", "a"}, {"public", "b"}}, dq).ok());
  Status st = check_key_columns_captured(configured, {{"public", "a"}, {"other", "b"}}, dq);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("\"public\".\"b\" is not a captured table"),
            std::string::npos)
      << st.error().message();
}

}  // namespace
}  // namespace sluice
