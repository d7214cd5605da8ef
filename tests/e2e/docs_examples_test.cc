// The pipeline files shown in README.md and docs/ run as written against scripts/services'
// servers: every ```yaml block is a whole pipeline file that `sluice validate` accepts, and every
// ${VAR} it reads is one scripts/services prints (issue 13, items 12, 13 and 14).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <regex>
#include <set>
#include <string>
#include <vector>

#include "e2e/harness.h"

namespace sluice::test {
namespace {

const std::filesystem::path kSource = SLUICE_SOURCE_DIR;

struct Block {
  int line = 0;  // of the opening fence
  std::string text;
};

std::vector<Block> yaml_blocks(const std::string& markdown) {
  std::vector<Block> out;
  const std::vector<std::string> lines = lines_of(markdown);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i] != "```yaml") continue;
    Block b;
    b.line = int(i + 1);
    for (++i; i < lines.size() && lines[i] != "```"; ++i) b.text += lines[i] + "\n";
    out.push_back(std::move(b));
  }
  return out;
}

// The variables scripts/services prints ("print_var NAME ...").
std::set<std::string> services_variables() {
  std::set<std::string> vars;
  const std::string script = read_file(kSource / "scripts/services");
  const std::regex var("(SLUICE_TEST_[A-Z_]+)");
  for (auto it = std::sregex_iterator(script.begin(), script.end(), var);
       it != std::sregex_iterator(); ++it)
    vars.insert((*it)[1]);
  return vars;
}

// Validates every yaml block of `page`; the services' variables are set to the addresses
// scripts/services gives by default when the environment has none (validate connects nowhere).
void validate_examples(const std::string& page, size_t at_least) {
  setenv("SLUICE_TEST_PG_URL", "postgresql://postgres:sluice@127.0.0.1:15432/postgres", 0);
  setenv("SLUICE_TEST_MYSQL_URL", "mysql://sluice:sluice@127.0.0.1:13306/sluice", 0);
  setenv("SLUICE_TEST_KAFKA_BROKERS", "127.0.0.1:19092", 0);
  const std::set<std::string> known = services_variables();
  const std::vector<Block> blocks = yaml_blocks(read_file(kSource / page));
  EXPECT_GE(blocks.size(), at_least) << page;
  for (const Block& b : blocks) {
    SCOPED_TRACE(page + ":" + std::to_string(b.line));
    EXPECT_NE(b.text.find("pipelines:"), std::string::npos)
        << "a fragment: show whole pipeline files, so they run as written\n"
        << b.text;
    const std::regex ref(R"(\$\{([A-Za-z_][A-Za-z0-9_]*))");
    for (auto it = std::sregex_iterator(b.text.begin(), b.text.end(), ref);
         it != std::sregex_iterator(); ++it)
      EXPECT_TRUE(known.count((*it)[1]))
          << "${" << (*it)[1] << "} is not a variable scripts/services prints";
    TempDir dir("docs-example");
    write_file(dir / "p.yaml", b.text);
    Process p({"validate", "p.yaml"}, dir.path());
    EXPECT_EQ(p.wait_for(std::chrono::seconds(30)), 0) << p.stderr_text() << b.text;
  }
}

TEST(DocsExamples, ReadmePipelineFilesValidateAsWritten) { validate_examples("README.md", 4); }

TEST(DocsExamples, PipelineFileReferenceExampleWithADlqValidates) {
  const std::string page = read_file(kSource / "docs/pipeline-file.md");
  EXPECT_NE(page.find("on_error: dlq"), std::string::npos);
  validate_examples("docs/pipeline-file.md", 1);
}

TEST(DocsExamples, ComingFromDebeziumExamplesValidate) {
  validate_examples("docs/coming-from-debezium.md", 2);
}

}  // namespace
}  // namespace sluice::test
