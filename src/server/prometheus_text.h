// Renders the metrics registry in the Prometheus text exposition format (version 0.0.4).
#pragma once

#include <string>

#include "sluice/metrics.h"

namespace sluice {

std::string render_prometheus(const MetricsRegistry& registry);

}  // namespace sluice
