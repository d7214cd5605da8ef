// on_error through the binary: a record the destination rejects goes to the dead-letter queue
// (with the error) while the rest lands, or stops the pipeline with the checkpoint before it.
#include <gtest/gtest.h>

#include <algorithm>

#include "e2e/harness.h"
#include "sluice/json.h"
#include "support/pipeline_file.h"

namespace sluice::e2e {
namespace {

std::string input_lines() {
  std::string out;
  for (int i = 1; i <= 20; ++i) {
    // Record 7 has no key: the sqlite destination rejects it (it upserts by key).
    std::string key = i == 7 ? "" : "\"key\":{\"id\":" + std::to_string(i) + "},";
    out += "{\"operation\":\"create\",\"metadata\":{\"table\":\"items\"}," + key +
           "\"payload\":{\"after\":{\"id\":" + std::to_string(i) + ",\"v\":\"x" +
           std::to_string(i) + "\"}}}\n";
  }
  return out;
}

std::string pipeline(const std::string& on_error) {
  test::PipelineFile f;
  f.checkpoints_path = "cp.db";
  test::PipelineYaml& p = f.pipeline("dl");
  p.source("file").set("path", "in.jsonl");
  p.destination("sqlite").set("path", "out.db");
  p.max_records(8);
  p.on_error = on_error;
  if (on_error == "dlq") p.dlq("file").set("path", "dead.jsonl");
  return f.yaml();
}

TEST(DeadLetter, RejectedRecordGoesToTheQueueWithItsErrorAndTheRestLands) {
  auto dir = make_temp_dir("dlq");
  write_file(dir / "in.jsonl", input_lines());
  write_file(dir / "p.yaml", pipeline("dlq"));
  ASSERT_EQ(run_sluice({"run", "p.yaml"}, dir), 0) << read_file(dir / "stderr.txt");
  Db db(dir / "out.db");
  EXPECT_EQ(db.scalar("SELECT count(*) FROM items"), 19);
  EXPECT_EQ(db.scalar("SELECT count(*) FROM items WHERE id = 7"), 0);
  const std::string dead = read_file(dir / "dead.jsonl");
  Batch b;
  ASSERT_TRUE(decode_record_json(dead.substr(0, dead.find('\n')), b).ok()) << dead;
  EXPECT_EQ(std::count(dead.begin(), dead.end(), '\n'), 1);
  const Record& r = b.records().front();
  EXPECT_EQ(r.after.find("id")->as_int64(), 7);
  EXPECT_NE(r.meta("sluice.error").find("no key"), std::string_view::npos)
      << r.meta("sluice.error");
  EXPECT_EQ(r.meta("sluice.pipeline"), "dl");
  EXPECT_NE(read_file(dir / "stderr.txt").find("1 to the dead-letter queue"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(DeadLetter, OnErrorStopFailsAndKeepsTheCheckpointBeforeTheRejectedBatch) {
  auto dir = make_temp_dir("stop");
  write_file(dir / "in.jsonl", input_lines());
  write_file(dir / "p.yaml", pipeline("stop"));
  EXPECT_EQ(run_sluice({"run", "p.yaml"}, dir), 1);
  const std::string err = read_file(dir / "stderr.txt");
  EXPECT_NE(err.find("no key"), std::string::npos) << err;
  Db db(dir / "out.db");
  // Record 7 is in the first batch of 8: nothing of it landed (the table's creation rolled back
  // too).
  EXPECT_EQ(db.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'items'"), 0);
  Db cp(dir / "cp.db");
  EXPECT_EQ(cp.scalar("SELECT count(*) FROM checkpoints"), 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sluice::e2e
