// The HTTP endpoint's bearer token (http.token, http.token_file): every path but /healthz needs
// it, a wrong or missing one is a 401, the token never shows in the log; and a listener beyond
// loopback without a token is refused by validate unless http.allow_unauthenticated says so.
#include <gtest/gtest.h>
#include <httplib.h>

#include <regex>

#include "e2e/harness.h"
#include "support/pipeline_file.h"

namespace sluice::e2e {
namespace {

using namespace std::chrono_literals;

constexpr const char* kToken = "s3cr3t-t0ken-for-the-http-test";

// Starts `f` and returns the HTTP port the run logs (0 when it did not).
int start_and_find_port(Process& p) {
  std::smatch m;
  for (int i = 0; i < 1000; ++i) {
    std::string err = p.stderr_text();
    if (std::regex_search(err, m, std::regex("127\\.0\\.0\\.1:([0-9]+)/metrics")))
      return std::stoi(m[1]);
    std::this_thread::sleep_for(10ms);
  }
  return 0;
}

test::PipelineFile generator_pipeline(test::YamlMap http) {
  test::PipelineFile f;
  f.checkpoints_path = "cp.db";
  f.http = std::move(http);
  f.pipeline("h").source("generator").set("rate", 100);
  f.pipeline("h").destination("discard");
  return f;
}

void expect_token_is_required(int port) {
  httplib::Client client("127.0.0.1", port);
  auto none = client.Get("/metrics");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_EQ(none->body.find("sluice_"), std::string::npos);
  auto wrong = client.Get("/metrics", {{"Authorization", "Bearer not-the-token"}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  // A prefix of the token, and the token with a byte more, are wrong too.
  const std::string t = kToken;
  auto prefix = client.Get("/metrics", {{"Authorization", "Bearer " + t.substr(0, 5)}});
  ASSERT_TRUE(prefix);
  EXPECT_EQ(prefix->status, 401);
  auto longer = client.Get("/metrics", {{"Authorization", "Bearer " + t + "x"}});
  ASSERT_TRUE(longer);
  EXPECT_EQ(longer->status, 401);
  auto other_path = client.Get("/anything");
  ASSERT_TRUE(other_path);
  EXPECT_EQ(other_path->status, 401);
  auto right = client.Get("/metrics", {{"Authorization", "Bearer " + t}});
  ASSERT_TRUE(right);
  EXPECT_EQ(right->status, 200);
  EXPECT_NE(right->body.find("sluice_"), std::string::npos);
  auto health = client.Get("/healthz");  // liveness probes carry no credentials
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_NE(health->body.find("h ok"), std::string::npos);
}

TEST(HttpToken, TheTokenIsRequiredEverywhereButHealthz) {
  auto dir = make_temp_dir("http-token");
  generator_pipeline(test::YamlMap().set("listen", "127.0.0.1:0").set("token", kToken))
      .write(dir / "p.yaml");
  Process p({"run", "p.yaml"}, dir);
  const int port = start_and_find_port(p);
  ASSERT_GT(port, 0) << p.stderr_text();
  expect_token_is_required(port);
  p.signal(SIGTERM);
  ASSERT_EQ(p.wait_for(30s), 0) << p.stderr_text();
  EXPECT_EQ(p.stderr_text().find(kToken), std::string::npos) << "the token was logged";
  std::filesystem::remove_all(dir);
}

TEST(HttpToken, TheTokenCanComeFromAFile) {
  auto dir = make_temp_dir("http-token-file");
  write_file(dir / "token", std::string(kToken) + "\n");
  generator_pipeline(test::YamlMap().set("listen", "127.0.0.1:0").set("token_file", "token"))
      .write(dir / "p.yaml");
  Process p({"run", "p.yaml"}, dir);
  const int port = start_and_find_port(p);
  ASSERT_GT(port, 0) << p.stderr_text();
  expect_token_is_required(port);
  p.signal(SIGTERM);
  ASSERT_EQ(p.wait_for(30s), 0) << p.stderr_text();
  std::filesystem::remove_all(dir);
}

int validate(const std::filesystem::path& dir, const test::YamlMap& http) {
  generator_pipeline(http).write(dir / "p.yaml");
  return run_sluice({"validate", "p.yaml"}, dir, 30s);
}

TEST(HttpToken, BeyondLoopbackWithoutATokenIsRefusedUnlessAllowed) {
  auto dir = make_temp_dir("http-public");
  EXPECT_NE(validate(dir, test::YamlMap().set("listen", "0.0.0.0:18080")), 0);
  const std::string err = read_file(dir / "stderr.txt");
  EXPECT_NE(err.find("http.listen: '0.0.0.0:18080' is beyond loopback and no token is set"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("http.allow_unauthenticated"), std::string::npos) << err;
  EXPECT_EQ(validate(dir, test::YamlMap().set("listen", "0.0.0.0:18080").set("token", kToken)), 0)
      << read_file(dir / "stderr.txt");
  EXPECT_EQ(
      validate(dir,
               test::YamlMap().set("listen", "0.0.0.0:18080").set("allow_unauthenticated", true)),
      0)
      << read_file(dir / "stderr.txt");
  EXPECT_EQ(validate(dir, test::YamlMap().set("listen", "127.0.0.2:18080")), 0)
      << read_file(dir / "stderr.txt");
  EXPECT_EQ(validate(dir, test::YamlMap().set("listen", "[::1]:18080")), 0)
      << read_file(dir / "stderr.txt");
  // HTTP off: nothing is exposed.
  EXPECT_EQ(validate(dir, test::YamlMap().set("listen", "0.0.0.0:18080").set("enabled", false)), 0)
      << read_file(dir / "stderr.txt");
  std::filesystem::remove_all(dir);
}

TEST(HttpToken, TokenSettingsAreCheckedAtValidate) {
  auto dir = make_temp_dir("http-token-checks");
  write_file(dir / "token", std::string(kToken));
  write_file(dir / "empty", "");
  EXPECT_NE(validate(dir, test::YamlMap().set("token", kToken).set("token_file", "token")), 0);
  EXPECT_NE(read_file(dir / "stderr.txt").find("http.token and http.token_file are both set"),
            std::string::npos)
      << read_file(dir / "stderr.txt");
  EXPECT_NE(validate(dir, test::YamlMap().set("token_file", "missing")), 0);
  EXPECT_NE(read_file(dir / "stderr.txt").find("http.token_file: cannot read"), std::string::npos)
      << read_file(dir / "stderr.txt");
  EXPECT_NE(validate(dir, test::YamlMap().set("token_file", "empty")), 0);
  EXPECT_NE(read_file(dir / "stderr.txt").find("is empty"), std::string::npos)
      << read_file(dir / "stderr.txt");
  EXPECT_EQ(read_file(dir / "stderr.txt").find(kToken), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sluice::e2e
