// Renders pipeline metrics in the Prometheus text exposition format (version 0.0.4).
#pragma once

#include <span>
#include <string>

#include "runtime/pipeline.h"

namespace sluice {

std::string render_prometheus(std::span<Pipeline* const> pipelines);

}  // namespace sluice
