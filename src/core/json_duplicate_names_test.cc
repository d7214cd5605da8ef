// Found by fuzz/json_record_fuzz.cc: a field name given twice in one object decoded as two fields,
// and the second one lost its type annotation on the way back (the encoder names each field's
// type once), so the file destination wrote a line the file source then refused.
#include <gtest/gtest.h>

#include <string>

#include "sluice/batch.h"
#include "sluice/json.h"

namespace sluice {
namespace {

TEST(JsonDuplicateNames, AFieldGivenTwiceIsADataErrorNamingIt) {
  Batch batch(4096);
  Status s = decode_record_json(
      R"({"operation":"create","key":1,"payload":{"after":{"born":"9970-01-01","name":"ann","born":"1970-01-02"}},)"
      R"("types":{"after":{"born":"date"}}})",
      batch);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), Errc::data);
  EXPECT_NE(s.error().message().find("after.born"), std::string::npos) << s.error().message();
  EXPECT_NE(s.error().message().find("twice"), std::string::npos) << s.error().message();
}

TEST(JsonDuplicateNames, NestedAndWideObjectsAreCheckedToo) {
  Batch batch(4096);
  EXPECT_FALSE(decode_record_json(R"({"operation":"create","key":{"a":1,"a":2}})", batch).ok());
  EXPECT_FALSE(
      decode_record_json(R"({"operation":"create","payload":{"after":{"x":{"k":1,"k":1}}}})", batch)
          .ok());
  std::string wide = R"({"operation":"create","payload":{"after":{)";
  for (int i = 0; i < 100; ++i) wide += "\"c" + std::to_string(i) + "\":" + std::to_string(i) + ",";
  std::string ok_wide = wide + "\"c100\":0}}}";
  EXPECT_TRUE(decode_record_json(ok_wide, batch).ok());
  std::string dup_wide = wide + "\"c7\":0}}}";
  Status s = decode_record_json(dup_wide, batch);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("after.c7"), std::string::npos) << s.error().message();
}

}  // namespace
}  // namespace sluice
