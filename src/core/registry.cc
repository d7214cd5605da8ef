#include "sluice/registry.h"

namespace sluice {

const ConnectorSpec* Registry::connector(std::string_view name) const noexcept {
  for (const auto& c : connectors_)
    if (c.name == name) return &c;
  return nullptr;
}

const ProcessorSpec* Registry::processor(std::string_view name) const noexcept {
  for (const auto& p : processors_)
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace sluice
