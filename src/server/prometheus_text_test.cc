// The exposition text rendered from the metrics registry.
#include "server/prometheus_text.h"

#include <gtest/gtest.h>

namespace sluice {
namespace {

TEST(PrometheusText, RendersFamiliesWithEscapedLabelsAndCumulativeHistograms) {
  MetricsRegistry r;
  std::atomic<uint64_t> n{7};
  LatencyHistogram h;
  h.observe(0.0001);
  h.observe(0.3);
  auto probe = r.add({
      MetricDef::counter("sluice_x_total", "Things.",
                         {{"pipeline", "a\"b\\c\nd"}, {"connector", "k"}}, n),
      MetricDef::gauge("sluice_lag_seconds", "Lag.", {{"pipeline", "p"}},
                       [] { return MetricValue(-1.0); }),
      MetricDef::gauge("sluice_rows", "Rows.", {{"pipeline", "p"}, {"kind", "done"}},
                       [] { return MetricValue(int64_t(-1)); }),
      MetricDef::latency("sluice_w_seconds", "Latency.", {{"pipeline", "p"}}, h),
  });
  const std::string text = render_prometheus(r);
  EXPECT_NE(text.find("# HELP sluice_x_total Things.\n# TYPE sluice_x_total counter\n"
                      "sluice_x_total{pipeline=\"a\\\"b\\\\c\\nd\",connector=\"k\"} 7\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE sluice_lag_seconds gauge\nsluice_lag_seconds{pipeline=\"p\"} -1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("sluice_rows{pipeline=\"p\",kind=\"done\"} -1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE sluice_w_seconds histogram\n"), std::string::npos) << text;
  EXPECT_NE(text.find("sluice_w_seconds_bucket{pipeline=\"p\",le=\"0.0005\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("sluice_w_seconds_bucket{pipeline=\"p\",le=\"0.25\"} 1\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("sluice_w_seconds_bucket{pipeline=\"p\",le=\"0.5\"} 2\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("sluice_w_seconds_bucket{pipeline=\"p\",le=\"+Inf\"} 2\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("sluice_w_seconds_count{pipeline=\"p\"} 2\n"), std::string::npos) << text;
  probe.reset();
  EXPECT_EQ(render_prometheus(r), "");
}

}  // namespace
}  // namespace sluice
