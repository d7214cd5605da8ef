// Checks the loader makes across a pipeline's parts, with the built-in connectors: template keys
// the pipeline's records cannot fill, listed tables that would merge at the destination, and
// relative paths resolved against the pipeline file's folder (issue 13, items 1, 10 and 12).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "config/config.h"

namespace sluice {
namespace {

std::string error_of(const std::string& yaml) {
  try {
    load_config_string(yaml, "p.yaml", Registry::builtin());
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "<no error>";
}

// A pipeline from `source` (YAML lines at the settings' indentation) to `destination`.
std::string pipeline(const std::string& source, const std::string& source_settings,
                     const std::string& destination, const std::string& destination_settings,
                     const std::string& processors = "") {
  return "version: 1\n"
         "pipelines:\n"
         "  - id: p\n"
         "    source:\n"
         "      connector: " +
         source +
         "\n"
         "      settings:\n" +
         source_settings + processors +
         "    destination:\n"
         "      connector: " +
         destination +
         "\n"
         "      settings:\n" +
         destination_settings;
}

const std::string kPg = "        url: postgresql://u@127.0.0.1:1/db\n";
const std::string kMy = "        url: mysql://u@127.0.0.1:1/db\n";

TEST(TemplateKeys, AnUnknownKeyIsAnErrorAtItsLocationNeverAFallbackName) {
  EXPECT_EQ(error_of(pipeline("postgres", kPg, "sqlite",
                              "        path: out.db\n"
                              "        table: \"{{tabel}}\"\n")),
            "p.yaml:12:16: pipelines[0].destination.settings.table: unknown template key "
            "'{{tabel}}': postgres records carry schema, table, lsn, commit_lsn, commit_time, "
            "xid, truncate, message.prefix (a processor may add one: field.set with field: "
            "metadata.KEY)");
  EXPECT_NE(error_of(pipeline("mysql", kMy, "kafka",
                              "        brokers: 127.0.0.1:9\n"
                              "        topic: \"cdc.{{nosuchkey}}\"\n"))
                .find("pipelines[0].destination.settings.topic: unknown template key "
                      "'{{nosuchkey}}': mysql records carry"),
            std::string::npos);
  EXPECT_NE(error_of(pipeline("generator", "        count: 1\n", "postgres",
                              kPg + "        schema: \"{{schema}}\"\n"))
                .find("pipelines[0].destination.settings.schema: unknown template key "
                      "'{{schema}}': generator records carry table"),
            std::string::npos);
  EXPECT_NE(error_of(pipeline("postgres", kPg, "sqlite",
                              "        path: out.db\n"
                              "        table: \"{{table\"\n"))
                .find("p.yaml:12:16: pipelines[0].destination.settings.table: table template "
                      "\"{{table\" has an unclosed"),
            std::string::npos);
}

TEST(TemplateKeys, KnownKeysProcessorAddedKeysAndPassThroughSourcesAreAccepted) {
  EXPECT_EQ(error_of(pipeline("postgres", kPg, "postgres",
                              kPg + "        schema: \"{{schema}}\"\n"
                                    "        table: \"{{table}}_{{xid}}\"\n")),
            "<no error>");
  EXPECT_EQ(error_of(pipeline("postgres", kPg, "sqlite",
                              "        path: out.db\n"
                              "        table: \"{{tenant}}_{{table}}\"\n",
                              "    processors:\n"
                              "      - type: field.set\n"
                              "        settings: {field: metadata.tenant, value: acme}\n")),
            "<no error>");
  // The file source carries its input's own metadata: any key may be there.
  EXPECT_EQ(error_of(pipeline("file", "        path: in.jsonl\n", "sqlite",
                              "        path: out.db\n"
                              "        table: \"{{tenant}}\"\n")),
            "<no error>");
}

TEST(TableRouting, SameNamedTablesOfTwoSchemasAreRefusedUnlessTheTemplateSeparatesThem) {
  const std::string two_schemas = kPg + "        tables: [s1.t, s2.t]\n";
  const std::string err =
      error_of(pipeline("postgres", two_schemas, "sqlite", "        path: x\n"));
  EXPECT_NE(err.find("p.yaml:12:"), std::string::npos) << err;
  EXPECT_NE(err.find("pipelines[0].destination.settings.table: source tables s1.t and s2.t would "
                     "both be written to table 't', where rows sharing a key merge; set `table: "
                     "\"{{schema}}_{{table}}\"` on the sqlite destination"),
            std::string::npos)
      << err;
  EXPECT_NE(error_of(pipeline("postgres", two_schemas, "postgres", kPg))
                .find("set `schema: \"{{schema}}\"` or `table: \"{{schema}}_{{table}}\"`"),
            std::string::npos);
  EXPECT_NE(error_of(pipeline("mysql", kMy + "        tables: [db1.t, db2.t]\n", "mysql", kMy))
                .find("source tables db1.t and db2.t would both be written to table 't'"),
            std::string::npos);
  // Separated, merged on purpose, or not the same name: fine.
  EXPECT_EQ(error_of(pipeline("postgres", two_schemas, "postgres",
                              kPg + "        schema: \"{{schema}}\"\n")),
            "<no error>");
  EXPECT_EQ(error_of(pipeline("postgres", two_schemas, "sqlite",
                              "        path: x\n        table: \"{{schema}}_{{table}}\"\n")),
            "<no error>");
  EXPECT_EQ(
      error_of(pipeline("postgres", two_schemas, "sqlite", "        path: x\n        table: t\n")),
      "<no error>");
  EXPECT_EQ(error_of(pipeline("postgres", kPg + "        tables: [s1.t, s1.u]\n", "sqlite",
                              "        path: x\n")),
            "<no error>");
}

TEST(RelativePaths, ResolveAgainstThePipelineFilesFolder) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("sluice_paths_test_" + std::to_string(getpid())) / "conf";
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "p.yaml").string();
  std::ofstream(file) << "version: 1\n"
                         "pipelines:\n"
                         "  - id: p\n"
                         "    source: {connector: file, settings: {path: in/records.jsonl}}\n"
                         "    destination: {connector: sqlite, settings: {path: /abs/out.db}}\n"
                         "    on_error: dlq\n"
                         "    dlq: {connector: file, settings: {path: ../dlq.jsonl}}\n"
                         "checkpoints: {path: state/checkpoints.db}\n";
  const Config c = load_config_file(file, Registry::builtin());
  const std::string d = std::filesystem::canonical(dir).string();
  EXPECT_EQ(c.pipelines[0].source.settings.get_string("path"), d + "/in/records.jsonl");
  EXPECT_EQ(c.pipelines[0].destination.settings.get_string("path"), "/abs/out.db");
  EXPECT_EQ(c.pipelines[0].dlq->settings.get_string("path"), d + "/../dlq.jsonl");
  EXPECT_EQ(c.checkpoints_path, d + "/state/checkpoints.db");

  // Not written in the file: the default stays relative to the working directory.
  std::ofstream(file) << "version: 1\n"
                         "pipelines:\n"
                         "  - id: p\n"
                         "    source: {connector: file, settings: {path: in.jsonl}}\n"
                         "    destination: {connector: discard}\n";
  EXPECT_EQ(load_config_file(file, Registry::builtin()).checkpoints_path, ".sluice/checkpoints.db");
  std::filesystem::remove_all(dir.parent_path());
}

}  // namespace
}  // namespace sluice
