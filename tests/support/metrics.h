// Reading /metrics of a running binary (a pipeline file with `http: {listen: 127.0.0.1:0}`): the
// port it logged, one scrape, one series' value.
#pragma once

#include <string>

#include "support/process.h"

namespace sluice::test {

// The port the HTTP server logged ("127.0.0.1:PORT/metrics"); 0 when it did not within ~5 s.
int metrics_port(Process& p);

// The body of GET /metrics ("" when it did not answer 200).
std::string scrape_metrics(int port);

// The value of the series `name{labels}` (exactly as exposed) in a scrape; -1 when absent.
double metric_series(const std::string& body, const std::string& name_and_labels);

// `{pipeline="P",connector="C"}`, the labels of a connector's series.
std::string connector_labels(const std::string& pipeline, const std::string& connector);

}  // namespace sluice::test
