// `sluice run FILE` reloads FILE on edits, under load (generator pipelines writing a file and
// SQLite): an added pipeline starts, a removed one stops with its checkpoint saved, a changed one
// resumes from its checkpoint with no gap and no duplicate at a keyed destination, a
// processor-only edit applies without restarting the source, an invalid edit is rejected with its
// file:line:col error while everything keeps running, and a later valid edit applies.
#include <gtest/gtest.h>

#include <regex>

#include "e2e/harness.h"

namespace sluice::e2e {
namespace {

using namespace std::chrono_literals;
using test::lines_of;
using test::read_file;
using test::TempDir;
using test::wait_until;

// Writes `text` beside `path` and renames it over `path`, as editors do.
void replace_file(const std::filesystem::path& path, const std::string& text) {
  const auto tmp = path.string() + ".tmp";
  write_file(tmp, text);
  std::filesystem::rename(tmp, path);
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

const char* kHeader = "checkpoints:\n  path: cp.db\nhttp:\n  enabled: false\npipelines:\n";
const char* kA =
    "  - id: a\n"
    "    source: {connector: generator, settings: {rate: 300}}\n"
    "    destination: {connector: file, settings: {path: a.jsonl}}\n";
const char* kATagged =
    "  - id: a\n"
    "    source: {connector: generator, settings: {rate: 300}}\n"
    "    processors: [{type: field.set, settings: {field: tag, value: reloaded}}]\n"
    "    destination: {connector: file, settings: {path: a.jsonl}}\n";
const char* kS =
    "  - id: s\n"
    "    source: {connector: generator, settings: {rate: 300, seed: 7}}\n"
    "    destination: {connector: sqlite, settings: {path: out.db, table: employees}}\n";
const char* kSChanged =
    "  - id: s\n"
    "    source: {connector: generator, settings: {rate: 300, seed: 7}}\n"
    "    destination: {connector: sqlite, settings: {path: out.db, table: employees, "
    "busy_timeout: 7s}}\n";
const char* kB =
    "  - id: b\n"
    "    source: {connector: generator, settings: {rate: 300}}\n"
    "    destination: {connector: file, settings: {path: b.jsonl}}\n";

TEST(HotReload, EditsApplyToTheirPipelinesOnly) {
  TempDir dir("hot-reload");
  const auto file = dir / "p.yaml";
  write_file(file, std::string(kHeader) + kA + kS);
  Process p({"run", "p.yaml"}, dir.path());
  auto log_has = [&](const std::string& s) { return p.stderr_text().find(s) != std::string::npos; };
  auto applied = [&](size_t n) {
    return wait_until([&] { return count_of(p.stderr_text(), "reload applied:") >= n; }, 20s);
  };
  ASSERT_TRUE(wait_until([&] { return std::filesystem::exists(dir / "a.jsonl"); }, 10s))
      << p.stderr_text();

  // An invalid edit: rejected with file:line:col, everything runs on.
  replace_file(file, std::string(kHeader) + kA + kS + "    no_such_key: 1\n");
  ASSERT_TRUE(wait_until([&] { return log_has("reload rejected"); }, 20s)) << p.stderr_text();
  EXPECT_TRUE(
      std::regex_search(p.stderr_text(), std::regex("reload rejected.*p\\.yaml:[0-9]+:[0-9]+: ")))
      << p.stderr_text();
  const size_t a_lines = lines_of(read_file(dir / "a.jsonl")).size();
  ASSERT_TRUE(
      wait_until([&] { return lines_of(read_file(dir / "a.jsonl")).size() > a_lines; }, 20s));

  // Valid: b added, s changed (restarted from its checkpoint), a processor-only.
  replace_file(file, std::string(kHeader) + kATagged + kSChanged + kB);
  ASSERT_TRUE(applied(1)) << p.stderr_text();
  EXPECT_TRUE(log_has("reload applied: added b; restarted s; processors replaced in a"))
      << p.stderr_text();
  ASSERT_TRUE(wait_until(
      [&] { return read_file(dir / "a.jsonl").find("reloaded") != std::string::npos; }, 20s))
      << p.stderr_text();
  ASSERT_TRUE(wait_until([&] { return std::filesystem::exists(dir / "b.jsonl"); }, 20s));
  EXPECT_EQ(count_of(p.stderr_text(), "pipeline a: started"), 1u) << p.stderr_text();
  EXPECT_EQ(count_of(p.stderr_text(), "pipeline s: started"), 2u) << p.stderr_text();
  EXPECT_TRUE(log_has("pipeline s: started (generator → sqlite), resuming from checkpoint"));

  // b removed: drained, checkpointed, stopped; the others run on.
  replace_file(file, std::string(kHeader) + kATagged + kSChanged);
  ASSERT_TRUE(applied(2)) << p.stderr_text();
  EXPECT_TRUE(log_has("reload applied: removed b")) << p.stderr_text();
  {
    Db cp(dir / "cp.db");
    EXPECT_GT(cp.scalar("SELECT count(*) FROM checkpoints WHERE pipeline = 'b'"), 0)
        << "b stopped without its checkpoint";
  }
  const size_t b_lines = lines_of(read_file(dir / "b.jsonl")).size();

  p.terminate();
  ASSERT_EQ(p.wait_for(30s), 0) << p.stderr_text();
  EXPECT_EQ(lines_of(read_file(dir / "b.jsonl")).size(), b_lines) << "b wrote after its removal";
  // s across its restart: every id from 1 to its checkpoint exactly once (keyed: no duplicate
  // rows possible, so a gap shows as count < max).
  std::smatch m;
  const std::string err = p.stderr_text();
  ASSERT_TRUE(std::regex_search(err, m, std::regex("pipeline s stopped: .*checkpoint ([0-9]+)")))
      << err;
  Db db(dir / "out.db");
  EXPECT_EQ(db.scalar("SELECT count(*) FROM employees"), std::stoll(m[1]));
  EXPECT_EQ(db.scalar("SELECT max(id) FROM employees"), std::stoll(m[1]));
  EXPECT_EQ(db.scalar("SELECT min(id) FROM employees"), 1);
}

// `sluice run DIR`: every *.yaml file of the directory, watched as a whole. A file added, edited
// in place, or removed applies to its pipelines only; a file that repeats another's pipeline id or
// file-level key is rejected naming both files, and everything runs on.
TEST(HotReload, ADirectoryOfPipelineFiles) {
  TempDir dir("hot-reload-dir");
  const auto conf = dir / "conf";
  std::filesystem::create_directories(conf);
  write_file(conf / "00-a.yaml", std::string(kHeader) + kA);
  write_file(conf / "10-s.yaml", std::string("pipelines:\n") + kS);
  write_file(conf / "notes.txt", "not a pipeline file");
  {
    Process v({"validate", "conf"}, dir.path());
    EXPECT_EQ(v.wait_for(30s), 0) << v.stderr_text();
  }
  Process p({"run", "conf"}, dir.path());
  auto log_has = [&](const std::string& s) { return p.stderr_text().find(s) != std::string::npos; };
  auto applied = [&](size_t n) {
    return wait_until([&] { return count_of(p.stderr_text(), "reload applied:") >= n; }, 20s);
  };
  auto rejected = [&](size_t n) {
    return wait_until([&] { return count_of(p.stderr_text(), "reload rejected") >= n; }, 20s);
  };
  // Relative paths resolve against the files' folder.
  ASSERT_TRUE(wait_until([&] { return std::filesystem::exists(conf / "a.jsonl"); }, 10s))
      << p.stderr_text();
  ASSERT_TRUE(wait_until([&] { return std::filesystem::exists(conf / "out.db"); }, 10s))
      << p.stderr_text();

  // A file added (renamed into place: its .tmp name is not a pipeline file).
  replace_file(conf / "20-b.yaml", std::string("pipelines:\n") + kB);
  ASSERT_TRUE(applied(1)) << p.stderr_text();
  EXPECT_TRUE(log_has("reload applied: added b")) << p.stderr_text();

  // A file edited in place (same inode, the directory's own times unchanged).
  write_file(conf / "10-s.yaml", std::string("pipelines:\n") + kSChanged);
  ASSERT_TRUE(applied(2)) << p.stderr_text();
  EXPECT_TRUE(log_has("reload applied: restarted s")) << p.stderr_text();

  // A pipeline id of another file, then a file-level key of another file: rejected.
  replace_file(conf / "30-dup.yaml", std::string("pipelines:\n") + kA);
  ASSERT_TRUE(rejected(1)) << p.stderr_text();
  EXPECT_TRUE(log_has("30-dup.yaml: pipeline id 'a' is also defined in")) << p.stderr_text();
  replace_file(conf / "30-dup.yaml",
               "checkpoints:\n  path: other.db\npipelines:\n"
               "  - id: c\n"
               "    source: {connector: generator, settings: {rate: 300}}\n"
               "    destination: {connector: file, settings: {path: c.jsonl}}\n");
  ASSERT_TRUE(rejected(2)) << p.stderr_text();
  EXPECT_TRUE(log_has("30-dup.yaml: checkpoints.path is also set in")) << p.stderr_text();
  EXPECT_FALSE(std::filesystem::exists(conf / "c.jsonl"));

  // Removed: b and the rejected file go; b stops with its checkpoint, the others run on.
  std::filesystem::remove(conf / "30-dup.yaml");
  std::filesystem::remove(conf / "20-b.yaml");
  ASSERT_TRUE(applied(3)) << p.stderr_text();
  EXPECT_TRUE(log_has("reload applied: removed b")) << p.stderr_text();
  const size_t a_lines = lines_of(read_file(conf / "a.jsonl")).size();
  ASSERT_TRUE(
      wait_until([&] { return lines_of(read_file(conf / "a.jsonl")).size() > a_lines; }, 20s));
  p.terminate();
  ASSERT_EQ(p.wait_for(30s), 0) << p.stderr_text();
  Db cp(conf / "cp.db");
  EXPECT_GT(cp.scalar("SELECT count(*) FROM checkpoints WHERE pipeline = 'b'"), 0);
}

TEST(HotReload, ADirectoryWithoutPipelineFilesIsAnError) {
  TempDir dir("reload-empty-dir");
  std::filesystem::create_directories(dir / "conf");
  Process v({"validate", "conf"}, dir.path());
  EXPECT_NE(v.wait_for(30s), 0);
  EXPECT_NE(v.stderr_text().find("no pipeline files in this directory"), std::string::npos)
      << v.stderr_text();
}

}  // namespace
}  // namespace sluice::e2e
