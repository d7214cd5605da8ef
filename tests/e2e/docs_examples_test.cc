// The pipeline files shown in README.md and docs/ run as written against scripts/services'
// servers: every ```yaml block is a whole pipeline file that `sluice validate` accepts, and every
// ${VAR} it reads is one scripts/services prints (issue 13, items 12, 13 and 14).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <map>
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
  setenv("SLUICE_TEST_MONGODB_URL", "mongodb://127.0.0.1:17017/sluice", 0);
  setenv("SLUICE_TEST_REDIS_URL", "redis://sluice:redis-test-pw@127.0.0.1:16379", 0);
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

// ── coming-from-debezium.md: the settings it maps to exist ─────────────────────

// Settings declared per connector part in docs/connectors.md (generated from the declarations;
// docs.connectors_md_is_current keeps it so): "mysql source" -> {"url", "tables", ...}.
std::map<std::string, std::set<std::string>> declared_settings() {
  std::map<std::string, std::set<std::string>> out;
  std::string connector, part;
  for (const std::string& line : lines_of(read_file(kSource / "docs/connectors.md"))) {
    if (line.rfind("## ", 0) == 0) connector = line.substr(3), part.clear();
    else if (line == "### Source settings") part = connector + " source";
    else if (line == "### Destination settings") part = connector + " destination";
    else if (!part.empty() && line.rfind("| `", 0) == 0)
      out[part].insert(line.substr(3, line.find('`', 3) - 3));
  }
  return out;
}

// The rows of the markdown table under `heading` (up to the next heading), as cells.
std::vector<std::vector<std::string>> table_rows(const std::string& page,
                                                 const std::string& heading) {
  std::vector<std::vector<std::string>> rows;
  bool in = false;
  for (const std::string& line : lines_of(page)) {
    if (line.rfind('#', 0) == 0) in = line == heading;
    if (!in || line.rfind('|', 0) != 0 || line.rfind("|---", 0) == 0) continue;
    std::vector<std::string> cells;
    size_t at = 1;
    for (size_t bar; (bar = line.find(" |", at)) != std::string::npos; at = bar + 2)
      cells.push_back(line.substr(at + 1, bar - at - 1));
    rows.push_back(std::move(cells));
  }
  if (!rows.empty()) rows.erase(rows.begin());  // the header
  return rows;
}

std::vector<std::string> backticked(const std::string& cell) {
  std::vector<std::string> out;
  for (size_t a = cell.find('`'); a != std::string::npos; a = cell.find('`', a + 1)) {
    const size_t b = cell.find('`', a + 1);
    if (b == std::string::npos) break;
    out.push_back(cell.substr(a + 1, b - a - 1));
    a = b;
  }
  return out;
}

// `sluice validate` of one pipeline whose source or destination (`part`) sets `line`
// ("name: value" as YAML) beside what that part needs anyway.
int validate_setting(const std::string& part, const std::string& line, std::string* err) {
  const bool source = part.ends_with(" source");
  const std::string connector = part.substr(0, part.find(' '));
  std::string base;
  if (connector == "postgres") base = "url: postgresql://u:p@127.0.0.1:1/db";
  else if (connector == "mysql") base = "url: mysql://u:p@127.0.0.1:1/db";
  else if (connector == "kafka") base = "brokers: 127.0.0.1:1";
  const std::string name = line.substr(0, line.find(':'));
  std::string settings = "        " + base + "\n";
  if (name != "url" && name != "brokers") settings += "        " + line + "\n";
  if (connector == "mysql" && name != "tables") settings += "        tables: [db.t, db.u]\n";
  const std::string yaml =
      "version: 1\npipelines:\n  - id: p\n    source:\n" +
      (source ? "      connector: " + connector + "\n      settings:\n" + settings
              : std::string("      connector: postgres\n      settings:\n        url: "
                            "postgresql://u:p@127.0.0.1:1/db\n        tables: [public.t]\n")) +
      "    destination:\n" +
      (source ? std::string("      connector: discard\n")
              : "      connector: " + connector + "\n      settings:\n" + settings);
  TempDir dir("debezium-mapping");
  write_file(dir / "p.yaml", yaml);
  Process p({"validate", "p.yaml"}, dir.path());
  const int rc = p.wait_for(std::chrono::seconds(30));
  *err = p.stderr_text() + yaml;
  return rc;
}

// Every sluice setting the page's tables map to is declared by the connector part the row is about,
// and every `name: value` it shows is accepted by `sluice validate` (issue 13, item 14).
TEST(DocsExamples, ComingFromDebeziumMapsOnlyToSettingsThatExistWithValuesValidateAccepts) {
  const auto declared = declared_settings();
  ASSERT_TRUE(declared.count("mysql source") && declared.count("postgres source") &&
              declared.count("kafka destination"));
  const std::string page = read_file(kSource / "docs/coming-from-debezium.md");
  struct Section {
    std::string heading;
    std::vector<std::string> parts;  // a name must be declared by one of them
  };
  size_t checked = 0, validated = 0;
  for (const Section& sec :
       {Section{"### PostgreSQL and MySQL sources", {"postgres source", "mysql source"}},
        Section{"### Kafka destination (Kafka Connect's converters and producer)",
                {"kafka destination"}},
        Section{"### Conduit", {"postgres source"}}}) {
    const auto rows = table_rows(page, sec.heading);
    EXPECT_GE(rows.size(), 5u) << sec.heading;
    for (const auto& row : rows) {
      ASSERT_GE(row.size(), 2u) << sec.heading;
      SCOPED_TRACE(sec.heading + ": " + row[0]);
      // Conduit: only its postgres connector's settings map to settings.
      if (sec.heading == "### Conduit" && row[0].rfind("postgres ", 0) != 0) continue;
      std::vector<std::string> parts = sec.parts;
      if (row[1].find("of the kafka destination") != std::string::npos)
        parts = {"kafka destination"};
      // `name: a` / `b`: b is another value of name.
      const std::string cell = std::regex_replace(
          row[1], std::regex(R"(`([a-z_.]+): ([^`]*)` / `([^`:]*)`)"), "`$1: $2` / `$1: $3`");
      for (const std::string& token : backticked(cell)) {
        if (token.rfind('?', 0) == 0) continue;  // a URL parameter (`?sslmode=`)
        const size_t colon = token.find(": ");
        const std::string name = token.substr(0, colon);
        if (name.find(' ') != std::string::npos) continue;  // a command (`sluice validate`)
        std::vector<std::string> holders;
        for (const std::string& part : parts)
          if (declared.at(part).count(name)) holders.push_back(part);
        EXPECT_FALSE(holders.empty()) << "`" << name << "` is no setting of " << parts[0];
        ++checked;
        if (colon == std::string::npos) continue;
        for (const std::string& part : holders) {
          std::string err;
          EXPECT_EQ(validate_setting(part, token, &err), 0) << part << ": " << err;
          ++validated;
        }
      }
    }
  }
  EXPECT_GE(checked, 20u);
  EXPECT_GE(validated, 8u);
}

}  // namespace
}  // namespace sluice::test
