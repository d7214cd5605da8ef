// The HTTP API (/api/v1, docs/api.md) and its CLI clients against a running binary: state changes
// verified through the data (a paused pipeline writes nothing, resume and restart end exact and
// keep positions), the dead-letter queue listed, replayed and discarded, the OpenAPI description
// against the routes the server answers, and the exit codes of `sluice status` and `sluice
// pipelines`.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <simdjson.h>

#include <fstream>
#include <regex>
#include <set>

#include "e2e/harness.h"
#include "support/pipeline_file.h"

namespace sluice::e2e {
namespace {

using namespace std::chrono_literals;

constexpr int kRows = 3000;

int find_port(Process& p) {
  std::smatch m;
  int port = 0;
  test::wait_until(
      [&] {
        const std::string err = p.stderr_text();
        if (!std::regex_search(err, m, std::regex("127\\.0\\.0\\.1:([0-9]+)/metrics")))
          return false;
        port = std::stoi(m[1]);
        return true;
      },
      30s, 10ms);
  return port;
}

struct Reply {
  int status = 0;
  std::string body;
};

Reply call(int port, const std::string& method, const std::string& path) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(90, 0);
  httplib::Result r = method == "GET"    ? c.Get(path)
                      : method == "POST" ? c.Post(path, "", "application/json")
                                         : c.Delete(path);
  if (!r) return {};
  return {r->status, r->body};
}

// A field of a JSON answer, as text (numbers without a fraction as integers; null as "null").
std::string field(const std::string& body, std::initializer_list<std::string_view> path) {
  simdjson::dom::parser parser;
  simdjson::dom::element e;
  if (parser.parse(body).get(e) != simdjson::SUCCESS) return "<not json>";
  for (std::string_view k : path)
    if (e[k].get(e) != simdjson::SUCCESS) return "<absent>";
  if (e.is_null()) return "null";
  std::string_view s;
  if (e.get_string().get(s) == simdjson::SUCCESS) return std::string(s);
  int64_t i = 0;
  if (e.get_int64().get(i) == simdjson::SUCCESS) return std::to_string(i);
  return simdjson::to_string(e);
}

// Runs a CLI client in its own folder (the run's own stdout/stderr stay apart), emptied first.
struct Cli {
  int rc = 0;
  std::string out, err;
};
Cli cli(const std::filesystem::path& dir, const std::vector<std::string>& args) {
  const std::filesystem::path d = dir / "cli";
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  Cli c;
  c.rc = run_sluice(args, d, 120s);
  c.out = read_file(d / "stdout.txt");
  c.err = read_file(d / "stderr.txt");
  return c;
}

int64_t written(int port, const std::string& id) {
  const Reply r = call(port, "GET", "/api/v1/pipelines/" + id);
  const std::string w = field(r.body, {"records", "written"});
  return r.status == 200 && std::isdigit(static_cast<unsigned char>(w[0])) ? std::stoll(w) : -1;
}

// generator (kRows rows, ~400/s) → SQLite, with the API on a free port.
void write_generator_pipeline(const std::filesystem::path& dir) {
  test::PipelineFile f;
  f.checkpoints_path = "cp.db";
  f.http = test::YamlMap().set("listen", "127.0.0.1:0");
  f.pipeline("gen").source("generator").set("count", kRows).set("rate", 400);
  f.pipeline("gen").destination("sqlite").set("path", "out.db");
  f.pipeline("gen").max_records(50);
  f.write(dir / "p.yaml");
}

// 1234567 → "1,234,567", as the run's summary line writes counts.
std::string thousands(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// Runs statements on a SQLite file (the test's own edits of the destination).
void sqlite_exec(const std::filesystem::path& db, const std::string& sql) {
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  sqlite3_busy_timeout(h, 10000);
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(h, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(h);
}

int64_t rows_in(const std::filesystem::path& db) {
  Db d(db);
  return d.scalar("SELECT count(*) FROM items");
}

int64_t rows(const std::filesystem::path& db) {
  if (!std::filesystem::exists(db)) return 0;
  Db d(db);
  if (d.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'employees'") != 1) return 0;
  return d.scalar("SELECT count(*) FROM employees");
}

void expect_exactly_every_row(const std::filesystem::path& db) {
  Db d(db);
  EXPECT_EQ(d.scalar("SELECT count(*) FROM employees"), kRows);
  EXPECT_EQ(d.scalar("SELECT count(DISTINCT id) FROM employees"), kRows);
  EXPECT_EQ(d.scalar("SELECT min(id) FROM employees"), 1);
  EXPECT_EQ(d.scalar("SELECT max(id) FROM employees"), kRows);
}

TEST(Api, APausedPipelineWritesNothingAndResumesToTheExactEnd) {
  auto dir = make_temp_dir("api-pause");
  write_generator_pipeline(dir);
  Process p({"run", "p.yaml", "--idle-exit", "1"}, dir);
  const int port = find_port(p);
  ASSERT_GT(port, 0) << p.stderr_text();
  ASSERT_TRUE(test::wait_until([&] { return written(port, "gen") >= 200; }, 60s))
      << p.stderr_text();

  const Reply paused = call(port, "POST", "/api/v1/pipelines/gen/pause");
  ASSERT_EQ(paused.status, 200) << paused.body;
  EXPECT_EQ(field(paused.body, {"state"}), "paused");
  EXPECT_EQ(field(paused.body, {"source_retains"}), "null");  // the generator keeps nothing
  const std::string checkpoint = field(paused.body, {"positions", "checkpointed"});
  const int64_t at_pause = rows(dir / "out.db");
  ASSERT_GT(at_pause, 0);
  EXPECT_LT(at_pause, kRows);
  // Drained at the pause: what it wrote is what it checkpointed.
  EXPECT_EQ(checkpoint, std::to_string(at_pause));
  // While paused nothing moves (observed over 2 s, a window the ~400 rows/s source would fill).
  const auto until = std::chrono::steady_clock::now() + 2s;
  while (std::chrono::steady_clock::now() < until) {
    ASSERT_EQ(rows(dir / "out.db"), at_pause);
    const Reply s = call(port, "GET", "/api/v1/pipelines/gen");
    ASSERT_EQ(field(s.body, {"state"}), "paused") << s.body;
    ASSERT_EQ(field(s.body, {"positions", "checkpointed"}), checkpoint);
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(p.running()) << "a paused pipeline must not end the run: " << p.stderr_text();
  // Pausing twice is a conflict; resume, and resuming twice is one too.
  EXPECT_EQ(call(port, "POST", "/api/v1/pipelines/gen/pause").status, 409);
  const Reply resumed = call(port, "POST", "/api/v1/pipelines/gen/resume");
  ASSERT_EQ(resumed.status, 200) << resumed.body;
  EXPECT_EQ(field(resumed.body, {"runs"}), "2");
  EXPECT_EQ(call(port, "POST", "/api/v1/pipelines/gen/resume").status, 409);

  ASSERT_EQ(p.wait_for(120s), 0) << p.stderr_text();
  expect_exactly_every_row(dir / "out.db");
  // The resumed run read only what was left after the checkpoint.
  EXPECT_NE(p.stderr_text().find(
                fmt::format("pipeline gen stopped: {} read", thousands(kRows - at_pause))),
            std::string::npos)
      << p.stderr_text();
  const std::string err = p.stderr_text();
  EXPECT_NE(err.find("api: POST /api/v1/pipelines/gen/pause from 127.0.0.1: ok"), std::string::npos)
      << err;
  EXPECT_NE(err.find("api: POST /api/v1/pipelines/gen/resume from 127.0.0.1: 409"),
            std::string::npos)
      << err;
  std::filesystem::remove_all(dir);
}

TEST(Api, RestartKeepsThePositionsAndTheCliClientsAnswerWithTheirExitCodes) {
  auto dir = make_temp_dir("api-restart");
  write_generator_pipeline(dir);
  Process p({"run", "p.yaml", "--idle-exit", "1"}, dir);
  const int port = find_port(p);
  ASSERT_GT(port, 0) << p.stderr_text();
  const std::string url = fmt::format("http://127.0.0.1:{}", port);
  ASSERT_TRUE(test::wait_until([&] { return written(port, "gen") >= 100; }, 60s))
      << p.stderr_text();

  // A running pipeline restarted: drained, checkpointed, started again from there.
  Cli c = cli(dir, {"pipelines", "restart", "gen", "--url", url});
  EXPECT_EQ(c.rc, 0) << c.err;
  EXPECT_NE(c.out.find("pipeline gen: restarted"), std::string::npos) << c.out;
  ASSERT_TRUE(test::wait_until([&] { return written(port, "gen") >= 100; }, 60s));

  c = cli(dir, {"status", url});
  EXPECT_EQ(c.rc, 0) << c.err;
  EXPECT_NE(c.out.find("running"), std::string::npos) << c.out;
  c = cli(dir, {"status", url, "--json"});
  EXPECT_EQ(c.rc, 0) << c.err;
  EXPECT_NE(c.out.find("\"runs\":2"), std::string::npos) << c.out;

  c = cli(dir, {"pipelines", "pause", "gen", "--url", url, "--json"});
  EXPECT_EQ(c.rc, 0) << c.err;
  EXPECT_EQ(field(c.out, {"state"}), "paused") << c.out;
  const int64_t at_pause = std::stoll(field(c.out, {"positions", "checkpointed"}));
  c = cli(dir, {"pipelines", "pause", "gen", "--url", url});  // 409: paused already
  EXPECT_EQ(c.rc, 1) << c.err;
  EXPECT_NE(c.err.find("paused already"), std::string::npos) << c.err;
  c = cli(dir, {"pipelines", "pause", "nope", "--url", url});
  EXPECT_EQ(c.rc, 5) << c.err;
  EXPECT_NE(c.err.find("no pipeline 'nope'"), std::string::npos) << c.err;
  EXPECT_EQ(cli(dir, {"pipelines", "pause", "gen", "--url", "ftp://x"}).rc, 2);
  EXPECT_EQ(cli(dir, {"pipelines", "jump", "gen"}).rc, 2);

  // A paused pipeline restarted starts from its checkpoint too.
  c = cli(dir, {"pipelines", "restart", "gen", "--url", url});
  EXPECT_EQ(c.rc, 0) << c.err;
  ASSERT_EQ(p.wait_for(120s), 0) << p.stderr_text();
  expect_exactly_every_row(dir / "out.db");
  EXPECT_NE(p.stderr_text().find(
                fmt::format("pipeline gen stopped: {} read", thousands(kRows - at_pause))),
            std::string::npos)
      << p.stderr_text();
  // The run has ended: nothing answers at its address.
  c = cli(dir, {"status", url});
  EXPECT_EQ(c.rc, 3) << c.err;
  EXPECT_NE(c.err.find("no answer from"), std::string::npos) << c.err;
  std::filesystem::remove_all(dir);
}

// file (followed) → SQLite with a file dead-letter queue; the table's CHECK rejects v = 'bad'.
TEST(Api, TheDeadLetterQueueIsListedReplayedAndDiscarded) {
  auto dir = make_temp_dir("api-dlq");
  sqlite_exec(dir / "out.db",
              "CREATE TABLE items (id INTEGER PRIMARY KEY, v TEXT CHECK (v <> 'bad'))");
  auto line = [](int id, const std::string& v) {
    return fmt::format(
        "{{\"operation\":\"create\",\"metadata\":{{\"table\":\"items\"}},\"key\":{{\"id\":{}}},"
        "\"payload\":{{\"after\":{{\"id\":{},\"v\":\"{}\"}}}}}}\n",
        id, id, v);
  };
  std::string input;
  for (int i = 1; i <= 10; ++i) input += line(i, i == 4 || i == 7 ? "bad" : "ok");
  write_file(dir / "in.jsonl", input);
  test::PipelineFile f;
  f.checkpoints_path = "cp.db";
  f.http = test::YamlMap().set("listen", "127.0.0.1:0");
  test::PipelineYaml& pl = f.pipeline("dl");
  pl.source("file").set("path", "in.jsonl").set("follow", true);
  pl.destination("sqlite").set("path", "out.db");
  pl.on_error = "dlq";
  pl.dlq("file").set("path", "dead.jsonl");
  f.write(dir / "p.yaml");

  Process p({"run", "p.yaml"}, dir);
  const int port = find_port(p);
  ASSERT_GT(port, 0) << p.stderr_text();
  Reply list;
  ASSERT_TRUE(test::wait_until(
      [&] {
        list = call(port, "GET", "/api/v1/pipelines/dl/dlq");
        return field(list.body, {"total"}) == "2";
      },
      60s))
      << list.body << p.stderr_text();
  EXPECT_EQ(rows_in(dir / "out.db"), 8);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(list.body).get(doc), simdjson::SUCCESS);
  std::vector<std::string> reasons;
  std::vector<int64_t> ids;
  for (simdjson::dom::element e : doc["entries"].get_array()) {
    reasons.emplace_back(std::string_view(e["reason"].get_string()));
    ids.push_back(int64_t(e["record"]["payload"]["after"]["id"].get_int64()));
  }
  EXPECT_EQ(ids, (std::vector<int64_t>{4, 7}));
  for (const std::string& r : reasons) EXPECT_NE(r.find("CHECK"), std::string::npos) << r;
  EXPECT_EQ(field(call(port, "GET", "/api/v1/pipelines/dl/dlq?limit=1").body, {"total"}), "2");

  // Replayed while the CHECK still holds: rejected again, kept.
  Reply again = call(port, "POST", "/api/v1/pipelines/dl/dlq/replay");
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(field(again.body, {"replayed"}), "0");
  EXPECT_EQ(field(again.body, {"failed"}), "2");
  EXPECT_EQ(field(again.body, {"paused_meanwhile"}), "true");
  EXPECT_EQ(field(call(port, "GET", "/api/v1/pipelines/dl/dlq").body, {"total"}), "2");
  EXPECT_EQ(call(port, "DELETE", "/api/v1/pipelines/dl/dlq/9").status, 404);

  // The table fixed (the CHECK dropped), entry 1 (id 7) replayed, entry 0 (id 4) discarded.
  sqlite_exec(dir / "out.db",
              "BEGIN; ALTER TABLE items RENAME TO items_old; "
              "CREATE TABLE items (id INTEGER PRIMARY KEY, v TEXT); "
              "INSERT INTO items SELECT * FROM items_old; DROP TABLE items_old; COMMIT");
  Reply one = call(port, "POST", "/api/v1/pipelines/dl/dlq/1/replay");
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(field(one.body, {"replayed"}), "1") << one.body;
  EXPECT_EQ(field(one.body, {"failed"}), "0") << one.body;
  Reply gone = call(port, "DELETE", "/api/v1/pipelines/dl/dlq/0");
  ASSERT_EQ(gone.status, 200) << gone.body;
  EXPECT_EQ(field(gone.body, {"discarded"}), "1");
  EXPECT_EQ(field(call(port, "GET", "/api/v1/pipelines/dl/dlq").body, {"total"}), "0");
  {
    Db d(dir / "out.db");
    EXPECT_EQ(d.scalar("SELECT count(*) FROM items WHERE id = 7 AND v = 'bad'"), 1);
    EXPECT_EQ(d.scalar("SELECT count(*) FROM items WHERE id = 4"), 0);
  }
  // The pipeline runs again after the edits: a new line lands.
  {
    std::ofstream out(dir / "in.jsonl", std::ios::app);
    out << line(11, "ok");
  }
  EXPECT_TRUE(test::wait_until([&] { return rows_in(dir / "out.db") == 10; }, 60s))
      << p.stderr_text();
  EXPECT_EQ(field(call(port, "GET", "/api/v1/pipelines/dl").body, {"state"}), "running");
  p.signal(SIGTERM);
  ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  std::filesystem::remove_all(dir);
}

// Every route the OpenAPI description documents answers (never the server's "no route"), and
// every route the server has is documented (the server's table: api_routes(), compared in
// src/server/api_test.cc).
TEST(Api, EveryDocumentedRouteAnswersAndUnknownOnesAreJson404s) {
  auto dir = make_temp_dir("api-routes");
  test::PipelineFile f;
  f.checkpoints_path = "cp.db";
  f.http = test::YamlMap().set("listen", "127.0.0.1:0");
  f.pipeline("r").source("generator").set("rate", 50);
  f.pipeline("r").destination("discard");
  f.write(dir / "p.yaml");
  Process p({"run", "p.yaml"}, dir);
  const int port = find_port(p);
  ASSERT_GT(port, 0) << p.stderr_text();

  const Reply spec = call(port, "GET", "/api/v1/openapi.json");
  ASSERT_EQ(spec.status, 200);
  EXPECT_EQ(spec.body,
            read_file(std::filesystem::path(SLUICE_SOURCE_DIR) / "docs/api/openapi.json"));
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(spec.body).get(doc), simdjson::SUCCESS);
  size_t routes = 0;
  for (auto [path, item] : doc["paths"].get_object()) {
    for (auto [method, op] : item.get_object()) {
      std::string m(method);
      for (char& c : m) c = char(std::toupper(static_cast<unsigned char>(c)));
      std::string concrete = std::regex_replace(std::string(path), std::regex("\\{id\\}"), "r");
      concrete = std::regex_replace(concrete, std::regex("\\{index\\}"), "0");
      // The mutating ones on an id no pipeline has: a route that exists answers its own 404.
      if (m != "GET")
        concrete = std::regex_replace(concrete, std::regex("/pipelines/r"), "/pipelines/none");
      const Reply r = call(port, m, concrete);
      EXPECT_NE(r.status, 0) << m << " " << concrete;
      EXPECT_EQ(r.body.find("no route"), std::string::npos)
          << m << " " << concrete << ": " << r.body;
      EXPECT_EQ(field(r.body, {}).substr(0, 1), "{") << m << " " << concrete << ": " << r.body;
      ++routes;
    }
  }
  EXPECT_EQ(routes, 13u);
  const Reply unknown = call(port, "GET", "/api/v1/nothing");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_NE(field(unknown.body, {"error"}).find("no route"), std::string::npos) << unknown.body;
  EXPECT_EQ(call(port, "GET", "/api/v1/pipelines/none").status, 404);
  // The file unchanged: a reload applies nothing.
  const Reply reload = call(port, "POST", "/api/v1/reload");
  EXPECT_EQ(reload.status, 200) << reload.body;
  EXPECT_EQ(field(reload.body, {"summary"}), "no pipeline changed") << reload.body;
  // This pipeline has no dead-letter queue; its generator takes no snapshot requests.
  EXPECT_EQ(call(port, "GET", "/api/v1/pipelines/r/dlq").status, 501);
  const Reply snap = call(port, "POST", "/api/v1/pipelines/r/snapshot?tables=public.t");
  EXPECT_EQ(snap.status, 501) << snap.body;
  EXPECT_EQ(call(port, "POST", "/api/v1/pipelines/r/snapshot").status, 400);
  // A body-less POST (curl -X POST) is routed too.
  httplib::Client raw("127.0.0.1", port);
  auto bare = raw.Post("/api/v1/reload");
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->status, 200) << bare->body;
  p.signal(SIGTERM);
  ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  std::filesystem::remove_all(dir);
}

TEST(Api, TheConfigurationIsShownWithSecretsRedactedAndTheTokenIsRequired) {
  auto dir = make_temp_dir("api-config");
  test::PipelineFile f;
  f.checkpoints_path = "cp.db";
  f.http = test::YamlMap().set("listen", "127.0.0.1:0").set("token", "tok-3456789");
  // A URL with a password in a setting that is not itself secret: masked.
  f.pipeline("c")
      .source("generator")
      .set("rate", 50)
      .set("table", "postgresql://u:hunter2-pw@h/db");
  f.pipeline("c").destination("file").set("path", "out.jsonl");
  f.write(dir / "p.yaml");
  Process p({"run", "p.yaml"}, dir);
  const int port = find_port(p);
  ASSERT_GT(port, 0) << p.stderr_text();
  EXPECT_EQ(call(port, "GET", "/api/v1/pipelines").status, 401);
  EXPECT_EQ(call(port, "POST", "/api/v1/pipelines/c/pause").status, 401);
  httplib::Client c("127.0.0.1", port);
  auto r = c.Get("/api/v1/pipelines/c", {{"Authorization", "Bearer tok-3456789"}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(field(r->body, {"config", "destination", "connector"}), "file");
  EXPECT_NE(r->body.find("out.jsonl"), std::string::npos) << r->body;
  EXPECT_EQ(r->body.find("hunter2-pw"), std::string::npos) << r->body;
  EXPECT_EQ(r->body.find("tok-3456789"), std::string::npos) << r->body;
  EXPECT_EQ(cli(dir, {"status", fmt::format("127.0.0.1:{}", port)}).rc, 4);
  const Cli ok = cli(dir, {"status", fmt::format("127.0.0.1:{}", port), "--token", "tok-3456789"});
  EXPECT_EQ(ok.rc, 0) << ok.err;
  EXPECT_EQ(ok.out.find("hunter2-pw"), std::string::npos) << ok.out;
  p.signal(SIGTERM);
  ASSERT_EQ(p.wait_for(60s), 0) << p.stderr_text();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sluice::e2e
