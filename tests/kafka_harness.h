// Kafka tests: the Kafka test support (tests/support/kafka.h) and the pipeline files the kafka
// destination and source tests write (through the pipeline-file builder, tests/support).
#pragma once

#include "support/kafka.h"
#include "support/pipeline_file.h"

namespace sluice::test {

// A pipeline file: postgres source (`tables` of `pg_url`) → kafka destination.
struct KafkaPipelineFile {
  std::string id;
  std::string pg_url;
  std::vector<std::string> tables;
  std::map<std::string, std::string> source_settings;       // YAML scalars as written
  std::map<std::string, std::string> destination_settings;  // besides brokers
  size_t max_records = 1000;
  // More pipeline keys, YAML as written (on_error: "dlq", dlq: "{connector: file, ...}").
  std::map<std::string, std::string> pipeline_extra;
  bool metrics = false;  // http on a free loopback port (support/metrics.h reads it)

  std::string yaml() const {
    PipelineFile f;
    if (metrics) f.http = YamlMap().set("listen", "127.0.0.1:0");
    PipelineYaml& p = f.pipeline(id);
    ConnectorYaml& src =
        p.source("postgres").set("url", pg_url).set("tables", Yaml::strings(tables));
    for (const auto& [k, v] : source_settings) src.set(k, Yaml::raw(v));
    ConnectorYaml& dst = p.destination("kafka").set("brokers", kafka_brokers());
    for (const auto& [k, v] : destination_settings) dst.set(k, Yaml::raw(v));
    p.max_records(max_records).linger_ms(20);
    for (const auto& [k, v] : pipeline_extra) p.extra.set(k, Yaml::raw(v));
    return f.yaml();
  }
};

// A pipeline file: kafka source → postgres destination (`pg_url`).
struct KafkaSourcePipelineFile {
  std::string id;
  std::vector<std::string> topics;
  std::string pg_url;
  std::map<std::string, std::string> source_settings;  // besides brokers and topics; YAML scalars
  std::map<std::string, std::string> destination_settings;  // besides url
  size_t max_records = 1000;
  std::string brokers = kafka_brokers();
  bool metrics = false;  // http on a free loopback port (support/metrics.h reads it)

  std::string yaml() const {
    PipelineFile f;
    if (metrics) f.http = YamlMap().set("listen", "127.0.0.1:0");
    PipelineYaml& p = f.pipeline(id);
    ConnectorYaml& src =
        p.source("kafka").set("brokers", brokers).set("topics", Yaml::strings(topics));
    for (const auto& [k, v] : source_settings) src.set(k, Yaml::raw(v));
    ConnectorYaml& dst = p.destination("postgres").set("url", pg_url);
    for (const auto& [k, v] : destination_settings) dst.set(k, Yaml::raw(v));
    p.max_records(max_records).linger_ms(20);
    return f.yaml();
  }
};

}  // namespace sluice::test
