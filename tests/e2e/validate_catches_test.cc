// `sluice validate` refuses what `run` would refuse at once, without connecting anywhere (issue
// 13, item 10): unknown or invalid rdkafka.* properties, topic regexes that do not compile, an
// empty `tables` or `topics`, template keys no record carries, impossible filters.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "e2e/harness.h"
#include "support/pipeline_file.h"

namespace sluice::test {
namespace {

struct Case {
  std::string name;
  std::function<void(PipelineYaml&)> build;
  std::string expected;  // in the one error line
};

std::string validate(const PipelineFile& f) {
  TempDir dir("validate");
  f.write(dir / "p.yaml");
  Process p({"validate", "p.yaml"}, dir.path());
  const int rc = p.wait_for(std::chrono::seconds(30));
  if (rc == 0) return "<accepted>";
  EXPECT_EQ(rc, 2);
  return p.stderr_text();
}

const char* kPg = "postgresql://u@127.0.0.1:1/db";

TEST(ValidateCatches, WhatRunWouldRefuseAtOnce) {
  const std::vector<Case> cases = {
      {"unknown rdkafka property",
       [](PipelineYaml& p) {
         p.source("generator").set("count", 1);
         p.destination("kafka").set("brokers", "127.0.0.1:1").set("rdkafka.linger.msec", "5");
       },
       "unknown librdkafka property 'linger.msec'"},
      {"invalid rdkafka value",
       [](PipelineYaml& p) {
         p.source("kafka").set("brokers", "127.0.0.1:1").set("topics", Yaml::strings({"t"}));
         p.source_.set("rdkafka.fetch.max.bytes", "lots");
         p.destination("discard");
       },
       "librdkafka property 'fetch.max.bytes'"},
      {"bad topic regex",
       [](PipelineYaml& p) {
         p.source("kafka").set("brokers", "127.0.0.1:1").set("topics", Yaml::strings({"^a("}));
         p.destination("discard");
       },
       "'^a(' is not a valid regular expression"},
      {"empty topics",
       [](PipelineYaml& p) {
         p.source("kafka").set("brokers", "127.0.0.1:1").set("topics", Yaml::raw("[]"));
         p.destination("discard");
       },
       "setting 'topics' lists no topic"},
      {"empty postgres tables",
       [](PipelineYaml& p) {
         p.source("postgres").set("url", kPg).set("tables", Yaml::raw("[]"));
         p.destination("discard");
       },
       "setting 'tables' lists no table"},
      {"empty mysql tables",
       [](PipelineYaml& p) {
         p.source("mysql").set("url", "mysql://u@127.0.0.1:1/db").set("tables", Yaml::raw("[]"));
         p.destination("discard");
       },
       "setting 'tables' lists no table"},
      {"unknown template key",
       [](PipelineYaml& p) {
         p.source("postgres").set("url", kPg);
         p.destination("sqlite").set("path", "out.db").set("table", "{{tabel}}");
       },
       "destination.settings.table: unknown template key '{{tabel}}'"},
      {"impossible filter",
       [](PipelineYaml& p) {
         p.source("generator").set("count", 1);
         p.processor("filter")
             .set("operations", Yaml::strings({"delete"}))
             .set("field", "after.salary")
             .set("value", "1");
         p.destination("discard");
       },
       "deletes have no `after`"},
  };
  for (const Case& c : cases) {
    PipelineFile f;
    c.build(f.pipeline("p"));
    const std::string err = validate(f);
    EXPECT_NE(err.find(c.expected), std::string::npos) << c.name << ": " << err << f.yaml();
    EXPECT_EQ(err.find('\n'), err.size() - 1) << c.name << ": one line: " << err;
  }
}

}  // namespace
}  // namespace sluice::test

namespace sluice::test {
namespace {

// `destinations:`: each destination is checked like the single one (its connector's own
// cross-setting checks included), and the error names which one.
TEST(ValidateCatches, EachOfSeveralDestinations) {
  TempDir dir("validate_fan_out");
  auto file = [](const std::string& second) {
    return "version: 1\npipelines:\n  - id: p\n    source: {connector: generator, settings: "
           "{count: 1}}\n    destinations:\n      - {connector: discard}\n      - " +
           second + "\n";
  };
  write_file(dir / "ok.yaml", file("{connector: sqlite, settings: {path: out.db}}"));
  Process ok({"validate", "ok.yaml"}, dir.path());
  EXPECT_EQ(ok.wait_for(std::chrono::seconds(30)), 0) << ok.stderr_text();
  write_file(dir / "bad.yaml", file("{name: k, connector: kafka, settings: {brokers: "
                                    "'127.0.0.1:1', rdkafka.linger.msec: '5'}}"));
  Process bad({"validate", "bad.yaml"}, dir.path());
  EXPECT_EQ(bad.wait_for(std::chrono::seconds(30)), 2);
  EXPECT_NE(bad.stderr_text().find("pipeline p: destinations[1] (k): kafka destination: "),
            std::string::npos)
      << bad.stderr_text();
  EXPECT_NE(bad.stderr_text().find("unknown librdkafka property 'linger.msec'"), std::string::npos)
      << bad.stderr_text();
}

}  // namespace
}  // namespace sluice::test
