// Processors inside a running pipeline: generator → processors → file, read back with the codec.
#include <gtest/gtest.h>

#include "e2e/harness.h"
#include "sluice/json.h"

namespace sluice::e2e {
namespace {

TEST(ProcessorsEndToEnd, ExcludeRenameSetAndFilterShapeTheOutput) {
  auto dir = make_temp_dir("proc");
  write_file(dir / "p.yaml", R"(version: 1
pipelines:
  - id: shaped
    source:
      connector: generator
      settings: {count: 5000, operations: {create: 0.7, update: 0.2, delete: 0.1}}
    processors:
      - {type: filter, settings: {operations: [create, update]}}
      - {type: filter, settings: {field: after.salary, op: ge, value: "100000"}}
      - {type: field.exclude, settings: {fields: [after.email]}}
      - {type: field.rename, settings: {mapping: {after.name: full_name}}}
      - {type: field.set, settings: {field: metadata.origin, value: "${ORIGIN_NAME:-gen}"}}
    destination:
      connector: file
      settings: {path: out.jsonl}
checkpoints: {path: cp.db}
http: {enabled: false}
)");
  ASSERT_EQ(run_sluice({"run", "p.yaml"}, dir), 0) << read_file(dir / "stderr.txt");
  std::istringstream lines(read_file(dir / "out.jsonl"));
  std::string line;
  int n = 0;
  Batch batch;
  while (std::getline(lines, line)) {
    ASSERT_TRUE(decode_record_json(line, batch).ok()) << line;
    const Record& r = batch.records().back();
    EXPECT_TRUE(r.op == Operation::create || r.op == Operation::update);
    ASSERT_TRUE(r.after.is_object());
    EXPECT_GE(r.after.find("salary")->as_double(), 100000.0);
    EXPECT_EQ(r.after.find("email"), nullptr);
    EXPECT_EQ(r.after.find("name"), nullptr);
    ASSERT_NE(r.after.find("full_name"), nullptr);
    EXPECT_EQ(r.meta("origin"), "gen");
    EXPECT_EQ(r.meta("table"), "employees");
    ++n;
  }
  EXPECT_GT(n, 100);
  EXPECT_LT(n, 5000);
  const std::string err = read_file(dir / "stderr.txt");
  EXPECT_NE(err.find("5,000 read"), std::string::npos) << err;
  EXPECT_NE(err.find("filtered"), std::string::npos) << err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sluice::e2e
