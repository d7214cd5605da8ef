// Specs of the processors built into this binary; listed once in registry.cc.
#pragma once

#include "sluice/registry.h"

namespace sluice {

ProcessorSpec field_set_processor();
ProcessorSpec field_rename_processor();
ProcessorSpec field_exclude_processor();
ProcessorSpec filter_processor();

}  // namespace sluice
