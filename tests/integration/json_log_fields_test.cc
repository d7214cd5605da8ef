// Issue 17, item 6: with `--log-format json`, every line that belongs to a pipeline carries its
// `pipeline` field, and the lines a connector's thread writes also its `connector`.
#include <gtest/gtest.h>

#include "e2e/harness.h"
#include "support/env.h"
#include "support/pipeline_file.h"
#include "support/sql.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  for (size_t at = 0; at < text.size();) {
    size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    if (nl > at) out.push_back(text.substr(at, nl - at));
    at = nl + 1;
  }
  return out;
}

TEST(JsonLogFields, PipelineAndConnectorOnEveryPipelineLine) {
  PgDatabase pg(unique_name("json_log"));
  ASSERT_TRUE(pg.ok());
  ASSERT_TRUE(pg.sql().exec("CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1), (2)"));
  TempDir dir("json-log-fields");
  PipelineFile f;
  f.checkpoints_path = "cp.db";
  f.pipeline("json_log")
      .source("postgres")
      .set("url", pg.url())
      .set("tables", Yaml::strings({"public.t"}));
  f.pipeline("json_log").destination("sqlite").set("path", "out.db");
  f.write(dir / "p.yaml");
  ASSERT_EQ(
      run_sluice({"run", "p.yaml", "--idle-exit", "0.5", "--log-format", "json"}, dir.path(), 90s),
      0)
      << read_file(dir / "stderr.txt");
  const std::string err = read_file(dir / "stderr.txt");
  int with_pipeline = 0;
  bool reader_line = false, started_line = false;
  for (const std::string& line : lines(err)) {
    ASSERT_EQ(line.front(), '{') << line;
    ASSERT_EQ(line.back(), '}') << line;
    const bool about = line.find("\"msg\":\"pipeline json_log") != std::string::npos;
    const bool field = line.find("\"pipeline\":\"json_log\"") != std::string::npos;
    if (about) {
      EXPECT_TRUE(field) << "a line about the pipeline without its field: " << line;
    }
    if (field) ++with_pipeline;
    EXPECT_EQ(line.find("\"pipeline\":", line.find("\"pipeline\":") + 1), std::string::npos)
        << "one pipeline field: " << line;
    // Written on the reader thread: the source's connector.
    if (line.find("snapshot complete") != std::string::npos) {
      reader_line = true;
      EXPECT_NE(line.find(",\"pipeline\":\"json_log\",\"connector\":\"postgres\"}"),
                std::string::npos)
          << line;
    }
    if (line.find("\"msg\":\"pipeline json_log: started") != std::string::npos) started_line = true;
  }
  EXPECT_TRUE(reader_line) << err;
  EXPECT_TRUE(started_line) << err;
  EXPECT_GE(with_pipeline, 3) << err;
  EXPECT_EQ(run_sluice({"cleanup", "p.yaml"}, dir.path(), 60s), 0);
}

}  // namespace
}  // namespace sluice::test
