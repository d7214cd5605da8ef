// `sluice cleanup` is a full reset and the way out of dead ends (issue 13, item 7): a run that
// fails after creating its replication slot says so and names `sluice cleanup FILE`; cleanup then
// drops the slot, and erases a position stored in a Kafka destination (transactions: the
// positions topic), so the next run starts over.
#include <gtest/gtest.h>

#include <regex>

#include "e2e/harness.h"
#include "kafka_harness.h"
#include "support/env.h"
#include "support/pipeline_file.h"
#include "support/sql.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

TEST(CleanupReset, AFailureAfterTheSlotWasCreatedNamesCleanup) {
  PgDatabase pg(unique_name("cleanup"));
  ASSERT_TRUE(pg.ok());
  const std::string role = unique_name("cleanup_role", 40);
  // The role may replicate but not read the table: the snapshot fails after the slot exists. The
  // publication is made by the owner beforehand (sluice uses an existing one).
  ASSERT_TRUE(pg.admin().exec("CREATE ROLE " + role + " LOGIN REPLICATION PASSWORD 'pw'"));
  ASSERT_TRUE(
      pg.sql().exec("CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1); "
                    "CREATE PUBLICATION sluice_f FOR TABLE t"));
  TempDir dir("cleanup-slot");
  PipelineFile f;
  f.checkpoints_path = "cp.db";
  f.pipeline("f")
      .source("postgres")
      .set("url", pg_url_with_credentials(pg.url(), role, "pw"))
      .set("tables", Yaml::strings({"public.t"}));
  f.pipeline("f").destination("sqlite").set("path", "out.db");
  f.write(dir / "p.yaml");
  EXPECT_EQ(run_sluice({"run", "p.yaml"}, dir.path(), 60s), 1);
  const std::string err = read_file(dir / "stderr.txt");
  EXPECT_NE(err.find("permission denied"), std::string::npos) << err;
  EXPECT_NE(err.find("replication slot \"sluice_f\""), std::string::npos) << err;
  EXPECT_NE(err.find("`sluice cleanup p.yaml`"), std::string::npos) << err;
  EXPECT_EQ(pg.admin().scalar("SELECT count(*) FROM pg_replication_slots WHERE slot_name = "
                              "'sluice_f'"),
            "1");

  // The way out it names: the slot is gone.
  EXPECT_EQ(run_sluice({"cleanup", "p.yaml"}, dir.path(), 60s), 0) << read_file(dir / "stderr.txt");
  EXPECT_EQ(pg.admin().scalar("SELECT count(*) FROM pg_replication_slots WHERE slot_name = "
                              "'sluice_f'"),
            "0");
  pg.sql().exec("DROP PUBLICATION IF EXISTS sluice_f", true);
  pg.admin().exec("DROP ROLE IF EXISTS " + role, true);
}

TEST(CleanupReset, CleanupErasesThePositionInTheKafkaPositionsTopic) {
  const std::string topic = unique_topic("cleanup"), positions = unique_topic("cleanup_pos");
  TempDir dir("cleanup-kafka");
  PipelineFile f;
  f.checkpoints_path = "cp.db";
  f.pipeline("k").source("generator").set("count", 30);
  f.pipeline("k")
      .destination("kafka")
      .set("brokers", kafka_brokers())
      .set("topic", topic)
      .set("transactions", true)
      .set("transactional.id", "sluice-" + topic)
      .set("positions.topic", positions);
  f.write(dir / "p.yaml");
  auto written = [&](const std::string& err) -> int64_t {
    std::smatch m;
    if (!std::regex_search(err, m,
                           std::regex("pipeline k stopped: [0-9,]+ read, ([0-9,]+) written")))
      return -1;
    return std::stoll(std::regex_replace(m[1].str(), std::regex(","), ""));
  };
  ASSERT_EQ(run_sluice({"run", "p.yaml", "--idle-exit", "0.5"}, dir.path(), 120s), 0)
      << read_file(dir / "stderr.txt");
  EXPECT_EQ(written(read_file(dir / "stderr.txt")), 30);

  std::filesystem::remove(dir / "stdout.txt");
  ASSERT_EQ(run_sluice({"cleanup", "p.yaml"}, dir.path(), 120s), 0)
      << read_file(dir / "stderr.txt");
  EXPECT_NE(read_file(dir / "stdout.txt").find("position stored in the destination"),
            std::string::npos)
      << read_file(dir / "stdout.txt");

  // Without the stored position the next run starts over: all 30 again.
  std::filesystem::remove(dir / "stderr.txt");
  ASSERT_EQ(run_sluice({"run", "p.yaml", "--idle-exit", "0.5"}, dir.path(), 120s), 0)
      << read_file(dir / "stderr.txt");
  EXPECT_EQ(written(read_file(dir / "stderr.txt")), 30) << read_file(dir / "stderr.txt");
  delete_topics({topic, positions});
}

}  // namespace
}  // namespace sluice::test
