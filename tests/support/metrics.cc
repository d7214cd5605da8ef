#include "support/metrics.h"

#include <httplib.h>

#include <chrono>
#include <regex>
#include <thread>

namespace sluice::test {

int metrics_port(Process& p) {
  std::smatch m;
  const std::regex listening("127\\.0\\.0\\.1:([0-9]+)/metrics");
  for (int i = 0; i < 500; ++i) {
    const std::string err = p.stderr_text();
    if (std::regex_search(err, m, listening)) return std::stoi(m[1]);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return 0;
}

std::string scrape_metrics(int port) {
  httplib::Client client("127.0.0.1", port);
  auto res = client.Get("/metrics");
  return res && res->status == 200 ? res->body : std::string();
}

double metric_series(const std::string& body, const std::string& name_and_labels) {
  const std::string head = name_and_labels + " ";
  for (const std::string& l : lines_of(body))
    if (l.compare(0, head.size(), head) == 0) return std::stod(l.substr(head.size()));
  return -1;
}

std::string connector_labels(const std::string& pipeline, const std::string& connector) {
  return "{pipeline=\"" + pipeline + "\",connector=\"" + connector + "\"}";
}

}  // namespace sluice::test
