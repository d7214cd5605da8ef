// The registry: every connector and processor by name, with its settings table. Filled by one
// explicit function per kind (no static initialisers): register_builtin_connectors() in
// src/connectors/registry.cc and register_builtin_processors() in src/processors/registry.cc.
#pragma once

#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "sluice/connector.h"
#include "sluice/settings.h"

namespace sluice {

using SourceFactory = Result<std::unique_ptr<Source>> (*)(const Settings&);
using DestinationFactory = Result<std::unique_ptr<Destination>> (*)(const Settings&);
using ProcessorFactory = Result<std::unique_ptr<Processor>> (*)(const Settings&);

struct ConnectorSpec {
  std::string_view name;
  std::string_view summary;
  std::span<const SettingSpec> source_settings;       // empty if no source
  std::span<const SettingSpec> destination_settings;  // empty if no destination
  SourceFactory make_source = nullptr;
  DestinationFactory make_destination = nullptr;
  // Destination settings whose value is a record template ({{table}}, {{schema}},
  // {{metadata-key}}): the loader refuses a placeholder no record of the pipeline can fill
  // (`{{tabel}}`).
  std::span<const std::string_view> template_settings = {};
  // The metadata keys the source sets on its records. Empty: the source passes its input's own
  // metadata through (file, kafka), so any key may be present.
  std::span<const std::string_view> source_metadata = {};
};

struct ProcessorSpec {
  std::string_view name;
  std::string_view summary;
  std::span<const SettingSpec> settings;
  ProcessorFactory make = nullptr;
};

class Registry {
 public:
  void add(const ConnectorSpec& spec) { connectors_.push_back(spec); }
  void add(const ProcessorSpec& spec) { processors_.push_back(spec); }
  const ConnectorSpec* connector(std::string_view name) const noexcept;
  const ProcessorSpec* processor(std::string_view name) const noexcept;
  std::span<const ConnectorSpec> connectors() const noexcept { return connectors_; }
  std::span<const ProcessorSpec> processors() const noexcept { return processors_; }

  // Everything built into this binary.
  static const Registry& builtin();

 private:
  std::vector<ConnectorSpec> connectors_;
  std::vector<ProcessorSpec> processors_;
};

void register_builtin_connectors(Registry& r);
void register_builtin_processors(Registry& r);

}  // namespace sluice
