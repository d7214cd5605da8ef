// Pipeline file loading against a local registry of fake connectors: defaults, every error class
// with its exact file:line:col and key path, ${ENV} interpolation, nested settings, and the docs
// renderers.
#include "config/config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <unistd.h>

namespace sluice {
namespace {

using std::chrono::milliseconds;

constexpr SettingSpec kGenSettings[] = {
    {"count", SettingType::integer, "0", false, "Records to emit."},
    {"rate", SettingType::number, "0", false, "Records per second."},
    {"operations", SettingType::number_map, "", false, "Operation weights."},
    {"table", SettingType::string, "employees", false, "Table name."},
    {"snapshot.mode", SettingType::enumeration, "initial", false, "Snapshot mode.",
     "initial,never,initial_only"},
    {"snapshot.chunk", SettingType::size, "1MiB", false, "Snapshot chunk."},
    {"tables", SettingType::string_list, "", false, "Tables | views."},
    {"poll", SettingType::duration, "200ms", false, "Poll interval."},
    {"pin", SettingType::integer, "", false, "A secret number.", {}, true},
    {"labels", SettingType::string_map, "", false, "Labels."},
    {"props.*", SettingType::string, "", false, "Pass-through properties."},
};

constexpr SettingSpec kSinkSettings[] = {
    {"path", SettingType::string, "", true, "File path."},
    {"fsync", SettingType::boolean, "false", false, "Fsync every batch."},
};

constexpr SettingSpec kExcludeSettings[] = {
    {"fields", SettingType::string_list, "", true, "Fields to drop."},
};

Result<std::unique_ptr<Source>> fake_source(const Settings&) {
  return Error(Errc::unsupported, "test only");
}
Result<std::unique_ptr<Destination>> fake_destination(const Settings&) {
  return Error(Errc::unsupported, "test only");
}
Result<std::unique_ptr<Processor>> fake_processor(const Settings&) {
  return Error(Errc::unsupported, "test only");
}

const Registry& registry() {
  static const Registry r = [] {
    Registry r;
    r.add(ConnectorSpec{"gen", "Generates records.", kGenSettings, {}, fake_source, nullptr});
    r.add(ConnectorSpec{
        "sink", "Writes records to a file.", {}, kSinkSettings, nullptr, fake_destination});
    r.add(ConnectorSpec{"both", "Reads and writes.", kSinkSettings, kSinkSettings, fake_source,
                        fake_destination});
    r.add(ProcessorSpec{"field.exclude", "Drops fields.", kExcludeSettings, fake_processor});
    return r;
  }();
  return r;
}

Config load(std::string_view yaml) { return load_config_string(yaml, "p.yaml", registry()); }

std::string error_of(std::string_view yaml) {
  try {
    load(yaml);
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a ConfigError for:\n" << yaml;
  return "";
}

// Lines 1-10; tests append to it or replace a line.
constexpr std::string_view kBase =
    "version: 1\n"                          // 1
    "pipelines:\n"                          // 2
    "  - id: p1\n"                          // 3
    "    source:\n"                         // 4
    "      connector: gen\n"                // 5
    "      settings:\n"                     // 6
    "        count: 100\n"                  // 7
    "    destination:\n"                    // 8
    "      connector: sink\n"               // 9
    "      settings: {path: out.jsonl}\n";  // 10

std::string replace(std::string_view text, std::string_view from, std::string_view to) {
  std::string s(text);
  auto at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

TEST(LoadConfig, ValidFileWithDefaults) {
  Config c = load(kBase);
  EXPECT_EQ(c.file, "p.yaml");
  EXPECT_EQ(c.version, 1);
  EXPECT_EQ(c.checkpoints_path, ".sluice/checkpoints.db");
  EXPECT_EQ(c.http_listen, "127.0.0.1:8080");
  EXPECT_TRUE(c.http_enabled);
  ASSERT_EQ(c.pipelines.size(), 1u);
  const PipelineConfig& p = c.pipelines[0];
  EXPECT_EQ(p.id, "p1");
  EXPECT_EQ(p.source.connector, "gen");
  EXPECT_EQ(p.source.spec, registry().connector("gen"));
  EXPECT_EQ(p.source.settings.get_int("count"), 100);
  EXPECT_EQ(p.source.settings.get_string("table"), "employees");
  EXPECT_EQ(p.source.settings.get_string("snapshot.mode"), "initial");
  EXPECT_EQ(p.source.settings.get_size("snapshot.chunk"), 1u << 20);
  EXPECT_EQ(p.source.settings.get_duration("poll"), milliseconds(200));
  EXPECT_FALSE(p.source.settings.has("pin"));  // no default, not given
  EXPECT_EQ(p.source.settings.spec().size(), std::size(kGenSettings));
  EXPECT_EQ(p.destination.connector, "sink");
  EXPECT_EQ(p.destination.settings.get_string("path"), "out.jsonl");
  EXPECT_FALSE(p.destination.settings.get_bool("fsync"));
  EXPECT_TRUE(p.processors.empty());
  EXPECT_EQ(p.batch.max_records, 10000u);
  EXPECT_EQ(p.batch.max_bytes, 64ull << 20);
  EXPECT_EQ(p.batch.linger, milliseconds(50));
  EXPECT_EQ(p.on_error, OnError::stop);
  EXPECT_EQ(p.stall_timeout, milliseconds(5 * 60 * 1000));
  EXPECT_FALSE(p.dlq);
}

TEST(LoadConfig, FullFile) {
  Config c = load(std::string(kBase) +
                  "    processors:\n"
                  "      - {type: field.exclude, settings: {fields: [after.salary, after.ssn]}}\n"
                  "    batch: {max_records: 500, max_bytes: 1MiB, linger_ms: 5}\n"
                  "    on_error: dlq\n"
                  "    dlq: {connector: both, settings: {path: dlq.jsonl}}\n"
                  "  - id: second.one_2-x\n"
                  "    source: {connector: both, settings: {path: in}}\n"
                  "    destination: {connector: both, settings: {path: out, fsync: yes}}\n"
                  "checkpoints: {path: /tmp/ck.db}\n"
                  "http: {listen: '[::1]:0', enabled: false}\n");
  ASSERT_EQ(c.pipelines.size(), 2u);
  const PipelineConfig& p = c.pipelines[0];
  ASSERT_EQ(p.processors.size(), 1u);
  EXPECT_EQ(p.processors[0].type, "field.exclude");
  EXPECT_EQ(p.processors[0].spec, registry().processor("field.exclude"));
  EXPECT_EQ(p.processors[0].settings.get_list("fields"),
            (std::vector<std::string>{"after.salary", "after.ssn"}));
  EXPECT_EQ(p.batch.max_records, 500u);
  EXPECT_EQ(p.batch.max_bytes, 1u << 20);
  EXPECT_EQ(p.batch.linger, milliseconds(5));
  EXPECT_EQ(p.on_error, OnError::dlq);
  ASSERT_TRUE(p.dlq);
  EXPECT_EQ(p.dlq->connector, "both");
  EXPECT_EQ(p.dlq->settings.get_string("path"), "dlq.jsonl");
  EXPECT_EQ(c.pipelines[1].id, "second.one_2-x");
  EXPECT_TRUE(c.pipelines[1].destination.settings.get_bool("fsync"));
  EXPECT_EQ(c.checkpoints_path, "/tmp/ck.db");
  EXPECT_EQ(c.http_listen, "[::1]:0");
  EXPECT_FALSE(c.http_enabled);
}

TEST(LoadConfig, SpoolMapIsDeclaredWithDefaultsAndChecked) {
  Config c = load(std::string(kBase) + "    spool: {type: disk, path: /tmp/sp, max_bytes: 1GiB}\n");
  ASSERT_TRUE(c.pipelines[0].spool);
  const SpoolConfig& s = *c.pipelines[0].spool;
  EXPECT_EQ(s.type, "disk");
  EXPECT_EQ(s.path, "/tmp/sp");
  EXPECT_EQ(s.max_bytes, uint64_t(1) << 30);
  EXPECT_EQ(s.segment_size, uint64_t(64) << 20);
  EXPECT_EQ(s.when_full, SpoolWhenFull::block);
  EXPECT_TRUE(s.fsync);
  EXPECT_FALSE(load(kBase).pipelines[0].spool);
  EXPECT_EQ(error_of(std::string(kBase) + "    spool: {type: disk}\n"),
            "p.yaml:11:12: pipelines[0].spool: missing required setting 'path' (the segment "
            "directory of a disk spool)");
  EXPECT_EQ(error_of(std::string(kBase) + "    spool: {type: redis}\n"),
            "p.yaml:11:12: pipelines[0].spool: missing required setting 'url' (the Redis server "
            "of a redis spool)");
  EXPECT_NE(error_of(std::string(kBase) + "    spool: {type: redis, url: 'redis://h:1', path: x}\n")
                .find("'path' is for a disk spool"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(kBase) + "    spool: {type: disk, path: x, url: 'redis://h:1'}\n")
                .find("'url' is for a redis spool"),
            std::string::npos);
  {
    const auto r = load(std::string(kBase) + "    spool: {type: redis, url: 'redis://h:1'}\n");
    ASSERT_TRUE(r.pipelines[0].spool);
    EXPECT_EQ(r.pipelines[0].spool->key, "sluice:spool:" + r.pipelines[0].id);
    EXPECT_EQ(r.pipelines[0].spool->url, "redis://h:1");
  }
  EXPECT_NE(error_of(std::string(kBase) + "    spool: {type: tape, path: x}\n")
                .find("pipelines[0].spool.type"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(kBase) + "    spool: {type: disk, path: x, when_full: drop}\n")
                .find("pipelines[0].spool.when_full"),
            std::string::npos);
}

TEST(LoadConfig, UnknownTopLevelKey) {
  EXPECT_EQ(error_of(std::string(kBase) + "htp: {}\n"),
            "p.yaml:11:1: htp: unknown key 'htp' (known: version, pipelines, checkpoints, http)");
}

TEST(LoadConfig, UnknownKeysInNestedSections) {
  EXPECT_EQ(
      error_of(std::string(kBase) + "    batchh: {}\n"),
      "p.yaml:11:5: pipelines[0].batchh: unknown key 'batchh' (known: id, source, processors, destination, "
      "destinations, batch, on_error, stall_timeout, dlq, spool)");
  EXPECT_EQ(
      error_of(std::string(kBase) + "    batch: {max_record: 5}\n"),
      "p.yaml:11:13: pipelines[0].batch.max_record: unknown key 'max_record' (known: max_records, max_bytes, "
      "linger_ms)");
  EXPECT_EQ(error_of(std::string(kBase) + "http: {listen: 127.0.0.1:1, port: 5}\n"),
            "p.yaml:11:29: http.port: unknown key 'port' (known: listen, enabled, token, "
            "token_file, allow_unauthenticated)");
  EXPECT_EQ(
      error_of(
          replace(kBase, "      connector: gen\n", "      connector: gen\n      setings: {}\n")),
      "p.yaml:6:7: pipelines[0].source.setings: unknown key 'setings' (known: connector, settings)");
}

TEST(LoadConfig, UnknownSetting) {
  EXPECT_EQ(
      error_of(replace(kBase, "count: 100", "cont: 100")),
      "p.yaml:7:9: pipelines[0].source.settings.cont: unknown setting 'cont' (known: count, rate, operations, "
      "table, snapshot.mode, snapshot.chunk, tables, poll, pin, labels, props.*)");
  EXPECT_EQ(
      error_of(replace(kBase, "{path: out.jsonl}", "{path: out.jsonl, fsyncc: true}")),
      "p.yaml:10:35: pipelines[0].destination.settings.fsyncc: unknown setting 'fsyncc' (known: path, fsync)");
}

TEST(LoadConfig, WrongType) {
  EXPECT_EQ(error_of(replace(kBase, "count: 100", "count: ten")),
            "p.yaml:7:16: pipelines[0].source.settings.count: expected an integer, got 'ten'");
  EXPECT_EQ(error_of(replace(kBase, "count: 100", "count: [1]")),
            "p.yaml:7:16: pipelines[0].source.settings.count: expected an integer, got a list");
  EXPECT_EQ(error_of(replace(kBase, "count: 100", "count:")),
            "p.yaml:7:9: pipelines[0].source.settings.count: expected an integer, got nothing");
  EXPECT_EQ(
      error_of(replace(kBase, "count: 100", "poll: soon")),
      "p.yaml:7:15: pipelines[0].source.settings.poll: expected a duration like 250ms, 5s, 2m or 1h, got 'soon'");
  EXPECT_EQ(
      error_of(replace(kBase, "count: 100", "operations: {create: lots}")),
      "p.yaml:7:30: pipelines[0].source.settings.operations.create: expected a number, got 'lots'");
  EXPECT_EQ(error_of(replace(kBase, "count: 100", "tables: [a, {b: c}]")),
            "p.yaml:7:21: pipelines[0].source.settings.tables[1]: expected a string, got a map");
  EXPECT_EQ(error_of(replace(kBase, "count: 100", "table: {a: 1}")),
            "p.yaml:7:16: pipelines[0].source.settings.table: expected a string, got a map");
}

TEST(LoadConfig, MissingRequiredSetting) {
  EXPECT_EQ(error_of(replace(kBase, "{path: out.jsonl}", "{}")),
            "p.yaml:10:17: pipelines[0].destination.settings: missing required setting 'path'");
  // Without a settings map the error points at the connector's map.
  EXPECT_EQ(error_of(replace(kBase, "      settings: {path: out.jsonl}\n", "")),
            "p.yaml:9:7: pipelines[0].destination.settings: missing required setting 'path'");
  EXPECT_EQ(error_of(replace(kBase, "{path: out.jsonl}", "")),
            "p.yaml:10:7: pipelines[0].destination.settings: missing required setting 'path'");
}

TEST(LoadConfig, MissingRequiredKeys) {
  EXPECT_EQ(error_of("version: 1\n"), "p.yaml:1:1: missing required key 'pipelines'");
  EXPECT_EQ(error_of(replace(kBase, "  - id: p1\n    source:", "  - source:")),
            "p.yaml:3:5: pipelines[0]: missing required key 'id'");
  EXPECT_EQ(error_of(replace(kBase, "      connector: sink\n", "")),
            "p.yaml:9:7: pipelines[0].destination: missing required key 'connector'");
  EXPECT_EQ(error_of("pipelines:\n  - id: a\n    source: {connector: gen}\n"),
            "p.yaml:2:5: pipelines[0]: missing required key 'destination' (or 'destinations')");
  EXPECT_EQ(error_of("pipelines: []\n"), "p.yaml:1:12: pipelines: expected at least one pipeline");
}

TEST(LoadConfig, UnknownConnectorListsKnownOnes) {
  EXPECT_EQ(
      error_of(replace(kBase, "connector: gen", "connector: postgres")),
      "p.yaml:5:18: pipelines[0].source.connector: unknown source connector 'postgres' (known: gen, both)");
  EXPECT_EQ(
      error_of(replace(kBase, "connector: sink", "connector: kafka")),
      "p.yaml:9:18: pipelines[0].destination.connector: unknown destination connector 'kafka' (known: sink, "
      "both)");
  EXPECT_EQ(
      error_of(replace(kBase, "connector: gen", "connector: sink")),
      "p.yaml:5:18: pipelines[0].source.connector: connector 'sink' cannot be a source (source connectors: gen, "
      "both)");
  EXPECT_EQ(
      error_of(std::string(kBase) + "    processors: [{type: field.drop}]\n"),
      "p.yaml:11:25: pipelines[0].processors[0].type: unknown processor 'field.drop' (known: field.exclude)");
}

TEST(LoadConfig, YamlSyntaxError) {
  EXPECT_EQ(error_of("pipelines: [a, b\nversion: 1\n"),
            "p.yaml:2:8: invalid YAML: end of sequence flow not found");
  EXPECT_EQ(error_of("version: 1\n  pipelines: 2\n"),
            "p.yaml:2:12: invalid YAML: illegal map value");
}

TEST(LoadConfig, BadEnumValue) {
  EXPECT_EQ(
      error_of(replace(kBase, "count: 100", "snapshot.mode: always")),
      "p.yaml:7:24: pipelines[0].source.settings.snapshot.mode: expected one of initial, never, initial_only, "
      "got 'always'");
  EXPECT_EQ(error_of(std::string(kBase) + "    on_error: retry\n"),
            "p.yaml:11:15: pipelines[0].on_error: expected one of stop, dlq, got 'retry'");
}

TEST(LoadConfig, PipelineIds) {
  std::string two = std::string(kBase) +
                    "  - id: p1\n"  // 11
                    "    source: {connector: gen}\n"
                    "    destination: {connector: sink, settings: {path: x}}\n";
  EXPECT_EQ(error_of(two),
            "p.yaml:11:9: pipelines[1].id: duplicate pipeline id 'p1' (first at line 3)");
  EXPECT_EQ(
      error_of(replace(kBase, "id: p1", "id: 'has space'")),
      "p.yaml:3:9: pipelines[0].id: invalid pipeline id 'has space' (use letters, digits, '_', '.' and '-')");
}

TEST(LoadConfig, OnErrorDlq) {
  EXPECT_EQ(error_of(std::string(kBase) + "    on_error: dlq\n"),
            "p.yaml:3:5: pipelines[0]: missing required key 'dlq' (on_error is dlq)");
  EXPECT_EQ(
      error_of(std::string(kBase) + "    dlq: {connector: sink, settings: {path: d}}\n"),
      "p.yaml:11:5: pipelines[0].dlq: dlq is set but on_error is not dlq (add 'on_error: dlq')");
  EXPECT_EQ(
      error_of(std::string(kBase) + "    on_error: dlq\n    dlq: {connector: gen}\n"),
      "p.yaml:12:22: pipelines[0].dlq.connector: connector 'gen' cannot be a destination (destination "
      "connectors: sink, both)");
}

TEST(LoadConfig, VersionBatchHttpValues) {
  EXPECT_EQ(error_of(replace(kBase, "version: 1", "version: 2")),
            "p.yaml:1:10: version: unsupported version 2 (this sluice reads version 1)");
  EXPECT_EQ(error_of(std::string(kBase) + "    batch: {max_records: 0}\n"),
            "p.yaml:11:26: pipelines[0].batch.max_records: must be greater than 0, got 0");
  EXPECT_EQ(
      error_of(std::string(kBase) + "    batch: {max_bytes: lots}\n"),
      "p.yaml:11:24: pipelines[0].batch.max_bytes: expected a size like 512KiB, 64MiB, 1GiB, 10MB or a number "
      "of bytes, got 'lots'");
  EXPECT_EQ(error_of(std::string(kBase) + "    batch: {linger_ms: -1}\n"),
            "p.yaml:11:24: pipelines[0].batch.linger_ms: must be 0 or more, got -1");
  EXPECT_EQ(error_of(std::string(kBase) + "http: {listen: 8080}\n"),
            "p.yaml:11:16: http.listen: expected host:port like 127.0.0.1:8080, got '8080'");
  EXPECT_EQ(error_of(std::string(kBase) + "http: {enabled: perhaps}\n"),
            "p.yaml:11:17: http.enabled: expected a boolean (true or false), got 'perhaps'");
  EXPECT_EQ(
      error_of(std::string(kBase) + "    stall_timeout: soon\n"),
      "p.yaml:11:20: pipelines[0].stall_timeout: expected a duration like 250ms, 5s, 2m or 1h, "
      "got 'soon'");
  EXPECT_EQ(load(std::string(kBase) + "    stall_timeout: 30s\n").pipelines[0].stall_timeout,
            milliseconds(30000));
  EXPECT_EQ(load(std::string(kBase) + "    stall_timeout: 0\n").pipelines[0].stall_timeout,
            milliseconds(0));
  Config c = load(std::string(kBase) + "    batch: {linger_ms: 1s, max_bytes: 4096}\n");
  EXPECT_EQ(c.pipelines[0].batch.linger, milliseconds(1000));
  EXPECT_EQ(c.pipelines[0].batch.max_bytes, 4096u);
}

TEST(LoadConfig, DuplicateKeys) {
  EXPECT_EQ(
      error_of(replace(kBase, "count: 100\n", "count: 100\n        count: 200\n")),
      "p.yaml:8:9: pipelines[0].source.settings.count: duplicate key 'count' (first at line 7)");
}

class EnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("SLUICE_TEST_COUNT", "42", 1);
    setenv("SLUICE_TEST_EMPTY", "", 1);
    unsetenv("SLUICE_TEST_UNSET");
  }
  void TearDown() override {
    unsetenv("SLUICE_TEST_COUNT");
    unsetenv("SLUICE_TEST_EMPTY");
  }
};

TEST_F(EnvTest, InterpolateEnv) {
  std::string out, missing;
  EXPECT_TRUE(interpolate_env("n=${SLUICE_TEST_COUNT}!", &out, &missing));
  EXPECT_EQ(out, "n=42!");
  EXPECT_TRUE(interpolate_env("${SLUICE_TEST_UNSET:-7}", &out, &missing));
  EXPECT_EQ(out, "7");
  EXPECT_TRUE(interpolate_env("${SLUICE_TEST_EMPTY:-fallback}", &out, &missing));
  EXPECT_EQ(out, "fallback");
  EXPECT_TRUE(interpolate_env("${SLUICE_TEST_EMPTY}", &out, &missing));
  EXPECT_EQ(out, "");
  EXPECT_TRUE(interpolate_env("${SLUICE_TEST_UNSET:-}", &out, &missing));
  EXPECT_EQ(out, "");
  EXPECT_TRUE(interpolate_env("${SLUICE_TEST_UNSET:-${SLUICE_TEST_COUNT}}", &out, &missing));
  EXPECT_EQ(out, "42");
  EXPECT_TRUE(interpolate_env("cost $$5 and $HOME and a $ sign$", &out, &missing));
  EXPECT_EQ(out, "cost $5 and $HOME and a $ sign$");
  EXPECT_TRUE(interpolate_env("$${SLUICE_TEST_COUNT}", &out, &missing));
  EXPECT_EQ(out, "${SLUICE_TEST_COUNT}");
  EXPECT_FALSE(interpolate_env("x${SLUICE_TEST_UNSET}", &out, &missing));
  EXPECT_EQ(missing, "SLUICE_TEST_UNSET");
  for (const char* bad : {"${", "${SLUICE_TEST_COUNT", "${}", "${1X}", "${A B}"}) {
    EXPECT_FALSE(interpolate_env(bad, &out, &missing)) << bad;
    EXPECT_EQ(missing, "") << bad;
  }
}

TEST_F(EnvTest, AppliedBeforeTypeParsing) {
  Config c = load(replace(kBase, "count: 100",
                          "count: ${SLUICE_TEST_COUNT}\n        table: ${SLUICE_TEST_UNSET:-t1}"));
  EXPECT_EQ(c.pipelines[0].source.settings.get_int("count"), 42);
  EXPECT_EQ(c.pipelines[0].source.settings.get_string("table"), "t1");
  c = load(replace(kBase, "id: p1", "id: ${SLUICE_TEST_UNSET:-from-env}"));
  EXPECT_EQ(c.pipelines[0].id, "from-env");
  c = load(replace(kBase, "count: 100", "tables: [\"${SLUICE_TEST_COUNT}\", $$x]"));
  EXPECT_EQ(c.pipelines[0].source.settings.get_list("tables"),
            (std::vector<std::string>{"42", "$x"}));
}

TEST_F(EnvTest, MissingVariableIsAnError) {
  EXPECT_EQ(
      error_of(replace(kBase, "count: 100", "count: ${SLUICE_TEST_UNSET}")),
      "p.yaml:7:16: pipelines[0].source.settings.count: environment variable 'SLUICE_TEST_UNSET' is not set "
      "(set it, or give a default: ${SLUICE_TEST_UNSET:-default})");
  EXPECT_EQ(
      error_of(replace(kBase, "count: 100", "table: ${oops")),
      "p.yaml:7:16: pipelines[0].source.settings.table: malformed ${...} (use ${NAME} or ${NAME:-default}; "
      "write $$ for a literal $)");
}

TEST_F(EnvTest, SecretValuesStayOutOfErrors) {
  setenv("SLUICE_TEST_PIN", "s3cr3t-pin", 1);
  std::string err = error_of(replace(kBase, "count: 100", "pin: ${SLUICE_TEST_PIN}"));
  unsetenv("SLUICE_TEST_PIN");
  EXPECT_EQ(err.find("s3cr3t"), std::string::npos) << err;
  EXPECT_NE(err.find("settings.pin: expected an integer"), std::string::npos) << err;
}

TEST(LoadConfig, NestedSettingsFlatten) {
  Config c = load(replace(kBase, "count: 100",
                          "snapshot:\n"
                          "          mode: never\n"
                          "          chunk: 2MiB\n"
                          "        operations: {create: 0.8, delete: 0.2}\n"
                          "        labels: {team: data}\n"
                          "        props: {acks: all, batch: {size: 100}}\n"
                          "        props.linger: 5"));
  const Settings& s = c.pipelines[0].source.settings;
  EXPECT_EQ(s.get_string("snapshot.mode"), "never");
  EXPECT_EQ(s.get_size("snapshot.chunk"), 2u << 20);
  EXPECT_EQ(s.get_number_map("operations"),
            (std::map<std::string, double>{{"create", 0.8}, {"delete", 0.2}}));
  EXPECT_EQ(s.get_string_map("labels"), (std::map<std::string, std::string>{{"team", "data"}}));
  EXPECT_EQ(s.with_prefix("props"), (std::map<std::string, std::string>{
                                        {"acks", "all"}, {"batch.size", "100"}, {"linger", "5"}}));

  Config dotted = load(replace(kBase, "count: 100", "snapshot.mode: never"));
  EXPECT_EQ(dotted.pipelines[0].source.settings.get_string("snapshot.mode"), "never");
}

TEST(LoadConfig, NestedSettingsErrors) {
  EXPECT_EQ(
      error_of(
          replace(kBase, "count: 100", "snapshot: {mode: never}\n        snapshot.mode: initial")),
      "p.yaml:8:9: pipelines[0].source.settings.snapshot.mode: setting 'snapshot.mode' is given twice (first at "
      "line 7)");
  EXPECT_EQ(
      error_of(replace(kBase, "count: 100", "snapshot: {mood: never}")),
      "p.yaml:7:20: pipelines[0].source.settings.snapshot.mood: unknown setting 'snapshot.mood' (known: count, "
      "rate, operations, table, snapshot.mode, snapshot.chunk, tables, poll, pin, labels, props.*)");
  EXPECT_EQ(error_of(replace(kBase, "count: 100", "snap: {mode: never}")).substr(0, 72),
            "p.yaml:7:9: pipelines[0].source.settings.snap: unknown setting 'snap' (k");
}

TEST(LoadConfig, StringListFromScalarOrSequence) {
  Config c = load(replace(kBase, "count: 100", "tables: \"a,b\""));
  EXPECT_EQ(c.pipelines[0].source.settings.get_list("tables"), std::vector<std::string>{"a,b"});
  c = load(replace(kBase, "count: 100", "tables: [x, y]"));
  EXPECT_EQ(c.pipelines[0].source.settings.get_list("tables"),
            (std::vector<std::string>{"x", "y"}));
}

TEST(LoadConfig, NeverCrashesOnOddShapes) {
  const std::string odd[] = {
      "",
      "---\n",
      "# only a comment\n",
      "[]\n",
      "just text\n",
      "pipelines:\n",
      "pipelines: 5\n",
      "pipelines: {id: a}\n",
      "pipelines: [5]\n",
      "pipelines: [~]\n",
      "pipelines:\n  -\n",
      "pipelines: [{id: [a]}]\n",
      "pipelines: [{id: a, source: 5}]\n",
      "pipelines: [{id: a, source: {connector: gen, settings: 5}}]\n",
      "pipelines: [{id: a, source: {connector: gen, settings: [1]}}]\n",
      "pipelines: [{id: a, source: {connector: gen, settings: {snapshot: &x {mode: *x}}}}]\n",
      "pipelines: [{id: a, source: {connector: gen, settings: {snapshot: &x {chunk: *x}}}}]\n",
      "pipelines: [{id: a, source: {connector: gen, settings: {tables: &x [*x]}}}]\n",
      "pipelines: [{id: a, source: {connector: {x: 1}}}]\n",
      "pipelines: [{id: a, source: {connector: gen}, destination: {connector: sink, settings: {path: p}}, "
      "processors: {x: 1}}]\n",
      "pipelines: [{id: a, source: {connector: gen}, destination: {connector: sink, settings: {path: p}}, "
      "processors: [~]}]\n",
      "pipelines: [{id: a, source: {connector: gen}, destination: {connector: sink, settings: {path: p}}, "
      "batch: [1]}]\n",
      "? [complex, key]\n: value\n",
      "{? {a: 1} : b}\n",
      "version: [1]\n",
      "version: 99999999999999999999999\n",
      "a: 1\n---\nb: 2\n",
      "\t\n",
      "version: 1\n\tpipelines: []\n",
      "pipelines: [{id: a, source: {connector: gen, settings: {count: \"${\"}}}]\n",
      "%YAML 1.2\n%YAML 1.2\n---\na: 1\n",
      "!!binary x\n",
      "&a [*a]\n",
      "*undefined\n",
      "pipelines: [{id: a, source: {connector: gen, settings: {a: " + std::string(3000, '[') +
          "}}}]\n",
  };
  for (const std::string& yaml : odd) {
    std::string err = error_of(yaml);
    EXPECT_EQ(err.rfind("p.yaml:", 0), 0u) << yaml << " -> " << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  }
}

TEST(LoadConfigFile, MissingFile) {
  try {
    load_config_file("/nonexistent/sluice/pipeline.yaml", registry());
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(),
                 "/nonexistent/sluice/pipeline.yaml: cannot read: No such file or directory");
  }
}

TEST(LoadConfigFile, ReadsFileAndNamesItInErrors) {
  auto dir =
      std::filesystem::temp_directory_path() / ("sluice_config_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto good = (dir / "good.yaml").string();
  auto bad = (dir / "bad.yaml").string();
  std::ofstream(good) << kBase;
  std::ofstream(bad) << replace(kBase, "count: 100", "count: ten");
  EXPECT_EQ(load_config_file(good, registry()).file, good);
  try {
    load_config_file(bad, registry());
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              bad + ":7:16: pipelines[0].source.settings.count: expected an integer, got 'ten'");
  }
  // A directory is read file by file: the invalid one is named, line and column.
  try {
    load_config_file(dir.string(), registry());
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              bad + ":7:16: pipelines[0].source.settings.count: expected an integer, got 'ten'");
  }
  std::filesystem::remove_all(dir);
}

TEST(LoadConfigFile, ADirectoryJoinsItsFilesAndRefusesRepeatedIdsAndKeys) {
  auto dir = std::filesystem::temp_directory_path() /
             ("sluice_config_dir_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "a.yaml") << kBase;
  std::ofstream(dir / "notes.md") << "not read";
  std::ofstream(dir / ".hidden.yaml") << "not: read";
  std::ofstream(dir / "b.yml") << replace(kBase, "id: p1", "id: p2");
  const Config c = load_config_file(dir.string(), registry());
  EXPECT_EQ(c.file, dir.string());
  ASSERT_EQ(c.pipelines.size(), 2u);
  EXPECT_EQ(c.pipelines[0].id, "p1");
  EXPECT_EQ(c.pipelines[1].id, "p2");
  std::ofstream(dir / "c.yaml") << kBase;  // p1 again
  try {
    load_config_file(dir.string(), registry());
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("c.yaml: pipeline id 'p1' is also defined in"),
              std::string::npos)
        << e.what();
  }
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  try {
    load_config_file(dir.string(), registry());
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("no pipeline files in this directory"), std::string::npos)
        << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(ConnectorDocs, MarkdownTable) {
  std::string md = render_connector_markdown(*registry().connector("gen"));
  EXPECT_EQ(md.rfind("## gen\n\nGenerates records.\n", 0), 0u) << md;
  EXPECT_NE(
      md.find(
          "### Source settings\n\n| name | type | default | required | description |\n|---|---|---|---|---|\n"),
      std::string::npos)
      << md;
  EXPECT_NE(md.find("| `count` | integer | `0` | no | Records to emit. |\n"), std::string::npos)
      << md;
  EXPECT_NE(
      md.find("| `snapshot.mode` | one of `initial`, `never`, `initial_only` | `initial` | no |"),
      std::string::npos)
      << md;
  EXPECT_NE(md.find("| `tables` | string list |  | no | Tables \\| views. |\n"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| `pin` | integer |  | no | A secret number. Secret: never logged. |"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("Destination settings"), std::string::npos);

  std::string both = render_connector_markdown(*registry().connector("both"));
  EXPECT_NE(both.find("### Destination settings"), std::string::npos);
  EXPECT_NE(both.find("| `path` | string |  | yes | File path. |"), std::string::npos) << both;
}

TEST(ConnectorDocs, ProcessorAndText) {
  std::string md = render_processor_markdown(*registry().processor("field.exclude"));
  EXPECT_NE(md.find("## field.exclude (processor)"), std::string::npos);
  EXPECT_NE(md.find("| `fields` | string list |  | yes | Fields to drop. |"), std::string::npos)
      << md;

  std::string text = render_connector_text(*registry().connector("sink"));
  EXPECT_EQ(text,
            "sink: Writes records to a file.\n"
            "Use as: destination\n"
            "\n"
            "Destination settings:\n"
            "  NAME   TYPE     DEFAULT  REQUIRED  DESCRIPTION\n"
            "  path   string   -        yes       File path.\n"
            "  fsync  boolean  false    no        Fsync every batch.\n");
}

TEST(ConnectorDocs, ReferenceIsSortedAndDeterministic) {
  std::string ref = render_reference_markdown(registry());
  EXPECT_EQ(ref.rfind("# Connector reference\n", 0), 0u);
  EXPECT_NE(ref.find("Generated by `sluice connectors --markdown`"), std::string::npos);
  auto both = ref.find("## both\n"), gen = ref.find("## gen\n"), sink = ref.find("## sink\n"),
       proc = ref.find("## field.exclude (processor)\n");
  ASSERT_NE(both, std::string::npos);
  EXPECT_LT(both, gen);
  EXPECT_LT(gen, sink);
  EXPECT_LT(sink, proc);
  EXPECT_NE(ref.find("[field.exclude](#fieldexclude-processor)"), std::string::npos);
  EXPECT_EQ(ref, render_reference_markdown(registry()));
  EXPECT_TRUE(ref.ends_with("|\n"));
  EXPECT_FALSE(ref.ends_with("\n\n"));
}

TEST(LoadConfig, LoopbackHostsOfHttpListen) {
  for (const char* host : {"127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]"})
    EXPECT_TRUE(is_loopback_host(host)) << host;
  for (const char* host : {"0.0.0.0", "", "10.0.0.1", "::", "[::]", "127.0.0.1.example.com",
                           "128.0.0.1", "localhost.example.com"})
    EXPECT_FALSE(is_loopback_host(host)) << host;
}

}  // namespace
}  // namespace sluice

namespace sluice {
namespace {

// Lines 1-7 then `destinations`.
constexpr std::string_view kFanOut =
    "version: 1\n"
    "pipelines:\n"
    "  - id: p1\n"
    "    source: {connector: gen, settings: {count: 1}}\n"
    "    destinations:\n"
    "      - {connector: sink, settings: {path: a}}\n"
    "      - {name: b, connector: sink, settings: {path: b}, on_error: dlq,\n"
    "         dlq: {connector: sink, settings: {path: dead}},\n"
    "         processors: [{type: field.exclude, settings: {fields: [after.x]}}]}\n";

TEST(LoadConfig, SeveralDestinations) {
  Config c = load(kFanOut);
  const PipelineConfig& p = c.pipelines[0];
  ASSERT_EQ(p.destinations.size(), 2u);
  EXPECT_EQ(p.destinations[0].name, "sink-0");  // connector plus index
  EXPECT_EQ(p.destinations[0].on_error, OnError::stop);
  EXPECT_FALSE(p.destinations[0].dlq);
  EXPECT_EQ(p.destinations[1].name, "b");
  EXPECT_EQ(p.destinations[1].on_error, OnError::dlq);
  ASSERT_TRUE(p.destinations[1].dlq);
  EXPECT_EQ(p.destinations[1].dlq->settings.get_string("path"), "dead");
  ASSERT_EQ(p.destinations[1].processors.size(), 1u);
  EXPECT_EQ(p.destination.connector, "sink");  // the first one, for code naming "the" destination
}

TEST(LoadConfig, SeveralDestinationsErrors) {
  EXPECT_EQ(error_of(std::string(kBase) + "    destinations: [{connector: sink}]\n"),
            "p.yaml:11:5: pipelines[0].destinations: both 'destination' and 'destinations' are "
            "set; keep one (destinations: [...] feeds several destinations from one source)");
  EXPECT_EQ(error_of(replace(kFanOut, "{name: b, ", "{name: sink-0, ")),
            "p.yaml:7:16: pipelines[0].destinations[1].name: duplicate destination name 'sink-0' "
            "(first at line 6); give each destination its own `name`");
  EXPECT_EQ(error_of(replace(kFanOut, "path: b}, on_error: dlq,", "path: b},")),
            "p.yaml:8:10: pipelines[0].destinations[1].dlq: dlq is set but on_error is not dlq "
            "(add 'on_error: dlq' to this destination)");
  EXPECT_EQ(error_of(replace(kFanOut, "settings: {path: a}", "settings: {}")),
            "p.yaml:6:37: pipelines[0].destinations[0].settings: missing required setting 'path'");
  EXPECT_EQ(error_of("version: 1\npipelines:\n  - id: p1\n    source: {connector: gen}\n"
                     "    destinations: []\n"),
            "p.yaml:5:19: pipelines[0].destinations: expected at least one destination");
  EXPECT_EQ(error_of("version: 1\npipelines:\n  - id: p1\n    source: {connector: gen}\n"
                     "    on_error: dlq\n    dlq: {connector: sink, settings: {path: d}}\n"
                     "    destinations: [{connector: sink, settings: {path: a}},\n"
                     "                   {connector: sink, settings: {path: b}}]\n"),
            "p.yaml:8:20: pipelines[0].destinations[1]: destinations[0] already uses the "
            "pipeline's dlq; give this destination a dlq of its own");
  EXPECT_EQ(error_of("version: 1\npipelines:\n  - id: p1\n    source: {connector: gen}\n"),
            "p.yaml:3:5: pipelines[0]: missing required key 'destination' (or 'destinations')");
  // A spool with several destinations: one reader each (their names are the readers').
  Config c = load(
      "version: 1\npipelines:\n  - id: p1\n    source: {connector: gen}\n"
      "    spool: {type: disk, path: s}\n"
      "    destinations: [{connector: sink, settings: {path: a}, name: x},\n"
      "                   {connector: sink, settings: {path: b}}]\n");
  ASSERT_TRUE(c.pipelines[0].spool);
  ASSERT_EQ(c.pipelines[0].destinations.size(), 2u);
  EXPECT_EQ(c.pipelines[0].destinations[0].name, "x");
  EXPECT_EQ(c.pipelines[0].destinations[1].name, "sink-1");
}

}  // namespace
}  // namespace sluice
