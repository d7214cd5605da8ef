// /metrics and /healthz of a running binary, and JSON logs.
#include <gtest/gtest.h>
#include <httplib.h>

#include <regex>

#include "e2e/harness.h"
#include "support/pipeline_file.h"

namespace sluice::e2e {
namespace {

using namespace std::chrono_literals;

TEST(Observability, MetricsAndHealthWhileRunning) {
  auto dir = make_temp_dir("metrics");
  test::PipelineFile f;
  f.checkpoints_path = "cp.db";
  f.http = test::YamlMap().set("listen", "127.0.0.1:0");
  f.pipeline("m").source("generator").set("rate", 5000);
  f.pipeline("m").destination("discard");
  f.write(dir / "p.yaml");
  Process p({"run", "p.yaml", "--log-format", "json"}, dir);
  int port = 0;
  std::smatch m;
  for (int i = 0; i < 500 && port == 0; ++i) {
    std::string err = p.stderr_text();
    if (std::regex_search(err, m, std::regex("127\\.0\\.0\\.1:([0-9]+)/metrics")))
      port = std::stoi(m[1]);
    else std::this_thread::sleep_for(10ms);
  }
  ASSERT_GT(port, 0) << p.stderr_text();
  httplib::Client client("127.0.0.1", port);
  std::string body;
  for (int i = 0; i < 100; ++i) {  // until some records went through
    auto res = client.Get("/metrics");
    ASSERT_TRUE(res) << "GET /metrics failed";
    ASSERT_EQ(res->status, 200);
    body = res->body;
    if (std::regex_search(
            body, m,
            std::regex(
                "sluice_records_written_total\\{pipeline=\"m\",connector=\"discard\"\\} ([0-9]+)")) &&
        std::stoll(m[1]) > 0)
      break;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(std::regex_search(
      body, m,
      std::regex("sluice_records_written_total\\{pipeline=\"m\",connector=\"discard\"\\} [1-9]")))
      << body;
  EXPECT_NE(body.find("# TYPE sluice_batch_write_seconds histogram"), std::string::npos);
  EXPECT_NE(
      body.find(
          "sluice_batch_write_seconds_bucket{pipeline=\"m\",connector=\"discard\",le=\"+Inf\"}"),
      std::string::npos);
  EXPECT_NE(body.find("sluice_checkpoint_age_seconds{pipeline=\"m\""), std::string::npos);
  auto health = client.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_NE(health->body.find("m ok"), std::string::npos);

  p.signal(SIGTERM);
  ASSERT_EQ(p.wait_for(30s), 0) << p.stderr_text();
  // Every log line is a JSON object; the summary line is plain.
  std::istringstream lines(p.stderr_text());
  std::string line;
  int json_lines = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("sluice: pipeline", 0) == 0) continue;
    EXPECT_EQ(line.front(), '{') << line;
    EXPECT_NE(line.find("\"level\":\"info\""), std::string::npos) << line;
    ++json_lines;
  }
  EXPECT_GE(json_lines, 2);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sluice::e2e
