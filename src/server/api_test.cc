// The API's routes (api_routes(), the table register_api_routes serves) against its OpenAPI
// description (docs/api/openapi.json, embedded): every route the server has is documented and
// every documented route is served. tests/e2e/api_test.cc calls each documented route on a
// running binary.
#include "server/api.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <set>

namespace sluice {
namespace {

TEST(ApiRoutes, TheServerRoutesAreExactlyTheDocumentedOnes) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(std::string(openapi_json())).get(doc), simdjson::SUCCESS);
  std::string_view version;
  ASSERT_EQ(doc["openapi"].get_string().get(version), simdjson::SUCCESS);
  EXPECT_TRUE(version.starts_with("3.")) << version;
  std::set<std::string> documented, served;
  for (auto [path, item] : doc["paths"].get_object())
    for (auto [method, op] : item.get_object()) {
      std::string m(method);
      for (char& c : m) c = char(std::toupper(static_cast<unsigned char>(c)));
      documented.insert(m + " " + std::string(path));
      // Each operation says what its errors look like.
      simdjson::dom::object responses;
      EXPECT_EQ(op["responses"].get_object().get(responses), simdjson::SUCCESS) << path;
    }
  for (const ApiRoute& r : api_routes())
    served.insert(std::string(r.method) + " " + std::string(r.path));
  EXPECT_EQ(documented, served);
}

TEST(ApiRoutes, PositionsAreTextWhenPrintableElseBase64) {
  EXPECT_EQ(position_json(""), "null");
  EXPECT_EQ(position_json("0/16B3748"), "\"0/16B3748\"");
  EXPECT_EQ(position_json(std::string("\x01\x02", 2)), "\"b64:AQI=\"");
  EXPECT_EQ(position_json("a\"b"), "\"a\\\"b\"");
}

}  // namespace
}  // namespace sluice
