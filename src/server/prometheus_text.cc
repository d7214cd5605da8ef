#include "server/prometheus_text.h"

#include <fmt/format.h>

#include <iterator>

namespace sluice {

namespace {

// Label values escaped per the exposition format (backslash, quote, newline).
std::string escaped(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string label_text(const MetricLabels& labels) {
  std::string out;
  for (const auto& [k, v] : labels)
    fmt::format_to(std::back_inserter(out), "{}{}=\"{}\"", out.empty() ? "" : ",", k, escaped(v));
  return out;
}

const char* type_name(MetricType t) {
  switch (t) {
    case MetricType::counter: return "counter";
    case MetricType::gauge: return "gauge";
    case MetricType::histogram: return "histogram";
  }
  return "untyped";
}

void render_histogram(std::string& out, const std::string& name, const std::string& l,
                      const LatencyHistogram& h) {
  auto it = std::back_inserter(out);
  const std::string sep = l.empty() ? "" : ",";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < LatencyHistogram::kBounds.size(); ++i) {
    cumulative += h.bucket(i);
    fmt::format_to(it, "{}_bucket{{{}{}le=\"{}\"}} {}\n", name, l, sep,
                   LatencyHistogram::kBounds[i], cumulative);
  }
  cumulative += h.bucket(LatencyHistogram::kBounds.size());
  fmt::format_to(it, "{}_bucket{{{}{}le=\"+Inf\"}} {}\n", name, l, sep, cumulative);
  fmt::format_to(it, "{}_sum{{{}}} {}\n", name, l, h.sum_seconds());
  fmt::format_to(it, "{}_count{{{}}} {}\n", name, l, h.count());
}

}  // namespace

std::string render_prometheus(const MetricsRegistry& registry) {
  std::string out;
  registry.visit([&](const MetricDef& family, const std::vector<const MetricDef*>& members) {
    auto it = std::back_inserter(out);
    fmt::format_to(it, "# HELP {} {}\n# TYPE {} {}\n", family.name, family.help, family.name,
                   type_name(family.type));
    for (const MetricDef* m : members) {
      const std::string l = label_text(m->labels);
      if (m->histogram) {
        render_histogram(out, m->name, l, *m->histogram);
        continue;
      }
      if (!m->read) continue;
      const MetricValue v = m->read();
      std::visit([&](auto x) { fmt::format_to(it, "{}{{{}}} {}\n", m->name, l, x); }, v);
    }
  });
  return out;
}

}  // namespace sluice
