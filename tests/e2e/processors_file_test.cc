// Processors inside a running pipeline: generator → processors → file, read back with the codec.
#include <gtest/gtest.h>

#include "e2e/harness.h"
#include "sluice/json.h"
#include "support/pipeline_file.h"

namespace sluice::e2e {
namespace {

TEST(ProcessorsEndToEnd, ExcludeRenameSetAndFilterShapeTheOutput) {
  auto dir = make_temp_dir("proc");
  test::PipelineFile f;
  f.checkpoints_path = "cp.db";
  test::PipelineYaml& p = f.pipeline("shaped");
  p.source("generator")
      .set("count", 5000)
      .set("operations", test::Yaml::map({{"create", 0.7}, {"update", 0.2}, {"delete", 0.1}}));
  p.processor("filter").set("operations", test::Yaml::strings({"create", "update"}));
  p.processor("filter").set("field", "after.salary").set("op", "ge").set("value", "100000");
  p.processor("field.exclude").set("fields", test::Yaml::strings({"after.email"}));
  p.processor("field.rename").set("mapping", test::Yaml::map({{"after.name", "full_name"}}));
  p.processor("field.set").set("field", "metadata.origin").set("value", "${ORIGIN_NAME:-gen}");
  p.destination("file").set("path", "out.jsonl");
  f.write(dir / "p.yaml");
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
