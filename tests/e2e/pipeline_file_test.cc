// The pipeline-file builder of the test support (tests/support/pipeline_file.h) against the
// binary's loader: names a hand-built YAML string would break — quotes, '#', ': ', backslashes,
// non-ASCII, leading spaces — arrive intact.
#include <gtest/gtest.h>

#include "e2e/harness.h"
#include "support/pipeline_file.h"
#include "support/readers.h"

namespace sluice::test {
namespace {

TEST(PipelineFileBuilder, StringsNeedingQuotesReachTheBinaryIntact) {
  TempDir dir("builder");
  const std::string in = " in \"x\" #1: \\ \xc3\xa9.jsonl";
  const std::string out = "out 'o' #2: {y}.db";
  write_file(dir / in,
             "{\"operation\":\"create\",\"metadata\":{\"table\":\"t\"},\"key\":{\"id\":1},"
             "\"payload\":{\"after\":{\"id\":1,\"v\":\"a\"}}}\n");
  PipelineFile f;
  PipelineYaml& p = f.pipeline("ids.may-use_these");
  p.source("file").set("path", in);
  p.destination("sqlite").set("path", out).set("table", "{{table}}_copy");
  p.max_records(10).linger_ms(5);
  f.write(dir / "p.yaml");
  ASSERT_EQ(run_sluice({"run", "p.yaml"}, dir.path()), 0)
      << read_file(dir / "stderr.txt") << f.yaml();
  EXPECT_EQ(read_sqlite_table(dir / out, "t_copy", {"id", "v"}), (Rows{{"1", "a"}}));
  EXPECT_EQ(stored_checkpoint(dir / "state/checkpoints.db", "ids.may-use_these"), "100");
}

TEST(PipelineFileBuilder, ScalarsAndCollections) {
  EXPECT_EQ(Yaml("a\"b\\c\n").text(), "\"a\\\"b\\\\c\\n\"");
  EXPECT_EQ(Yaml(0.7).text(), "0.7");
  EXPECT_EQ(Yaml(2.0).text(), "2.0");
  EXPECT_EQ(Yaml(true).text(), "true");
  EXPECT_EQ(Yaml::strings({"a", "b c"}).text(), "[\"a\", \"b c\"]");
  EXPECT_EQ(Yaml::map({{"k", 1}, {"a b", "x"}}).text(), "{k: 1, \"a b\": \"x\"}");
  EXPECT_EQ(YamlMap().set("k", 1).set("k", 2).flow(), "{k: 2}");
}

}  // namespace
}  // namespace sluice::test
