// Found by fuzz/json_record_fuzz.cc: a json-kind value whose text is not JSON (decoded from a
// "json"-annotated string) was embedded raw, so the encoded line was not JSON and could not be
// read back. It is now written as a string and round-trips exactly.
#include <gtest/gtest.h>

#include <string>

#include "sluice/batch.h"
#include "sluice/json.h"

namespace sluice {
namespace {

TEST(JsonInvalidDocument, NonJsonTextOfAJsonValueRoundTrips) {
  const std::string line =
      R"({"position":"","operation":"create","payload":{"after":{"born":"19700-01-01"}},)"
      R"("types":{"after":{"born":"json"}}})";
  Batch b;
  ASSERT_TRUE(decode_record_json(line, b).ok());
  std::string out;
  encode_record_json(b.records()[0], out);
  EXPECT_NE(out.find(R"("born":"19700-01-01")"), std::string::npos) << out;
  Batch again;
  Status s = decode_record_json(out, again);
  ASSERT_TRUE(s.ok()) << s.error().message() << "\n" << out;
  const Value* born = again.records()[0].after.find("born");
  ASSERT_NE(born, nullptr);
  EXPECT_EQ(*born, Value::json("19700-01-01"));
}

TEST(JsonInvalidDocument, ValidDocumentsStayEmbedded) {
  Batch b;
  const std::string line =
      R"({"position":"","operation":"create","payload":{"after":{"j":{"a":[1,2]}}},)"
      R"("types":{"after":{"j":"json"}}})";
  ASSERT_TRUE(decode_record_json(line, b).ok());
  std::string out;
  encode_record_json(b.records()[0], out);
  EXPECT_NE(out.find(R"("j":{"a":[1,2]})"), std::string::npos) << out;
}

}  // namespace
}  // namespace sluice
