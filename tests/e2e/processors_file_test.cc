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

// Issue 13, item 5: a filter on a field no record has warns once per pipeline and field (and
// counts them); a number field compared with a value that is not a number stops the pipeline
// before its checkpoint passes the records, instead of dropping every one silently.
TEST(ProcessorsEndToEnd, AFilterFieldMissingFromRecordsWarnsOnce) {
  auto dir = make_temp_dir("proc-missing");
  test::PipelineFile f;
  f.checkpoints_path = "cp.db";
  test::PipelineYaml& p = f.pipeline("missing");
  p.source("generator").set("count", 2000);
  p.processor("filter").set("field", "after.salry").set("op", "gt").set("value", "1");
  p.destination("file").set("path", "out.jsonl");
  p.max_records(100);
  f.write(dir / "p.yaml");
  ASSERT_EQ(run_sluice({"run", "p.yaml"}, dir), 0) << read_file(dir / "stderr.txt");
  const std::string err = read_file(dir / "stderr.txt");
  const std::string warning =
      "pipeline missing: filter: field after.salry is missing from a record";
  const size_t first = err.find(warning);
  EXPECT_NE(first, std::string::npos) << err;
  EXPECT_EQ(err.find(warning, first + 1), std::string::npos) << "warned more than once:\n" << err;
  EXPECT_NE(err.find("sluice_filter_field_missing_total"), std::string::npos) << err;
  std::filesystem::remove_all(dir);
}

TEST(ProcessorsEndToEnd, ANumberComparedWithANonNumberStopsThePipeline) {
  auto dir = make_temp_dir("proc-mismatch");
  test::PipelineFile f;
  f.checkpoints_path = "cp.db";
  test::PipelineYaml& p = f.pipeline("mismatch");
  p.source("generator").set("count", 2000);
  p.processor("filter").set("field", "after.salary").set("op", "gt").set("value", "lots");
  p.destination("file").set("path", "out.jsonl");
  f.write(dir / "p.yaml");
  EXPECT_NE(run_sluice({"run", "p.yaml"}, dir), 0);
  const std::string err = read_file(dir / "stderr.txt");
  EXPECT_NE(err.find("filter: field after.salary is a number but value 'lots' does not read as "
                     "one"),
            std::string::npos)
      << err;
  EXPECT_EQ(test::stored_checkpoint(dir / "cp.db", "mismatch"), "") << err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sluice::e2e
