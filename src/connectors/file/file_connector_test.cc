#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "connectors/builtin.h"
#include "sluice/json.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class FileConnectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("sluice-file-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "records.jsonl").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  static Settings settings(std::span<const SettingSpec> spec,
                           std::map<std::string, std::string> text) {
    Settings s(spec);
    auto err = settings_from_text(spec, text, &s);
    EXPECT_FALSE(err) << *err;
    return s;
  }

  std::unique_ptr<Destination> destination(bool sync = true) {
    auto d = file_connector().make_destination(
        settings(file_connector().destination_settings,
                 {{"path", path_}, {"sync", sync ? "true" : "false"}}));
    EXPECT_TRUE(d.ok());
    Status st = d.value()->open(ConnectorContext{"p", "file", nullptr});
    EXPECT_TRUE(st.ok()) << st.error().message();
    return std::move(d).value();
  }

  std::unique_ptr<Source> source(bool follow,
                                 std::optional<std::string> checkpoint = std::nullopt) {
    auto s = file_connector().make_source(
        settings(file_connector().source_settings,
                 {{"path", path_}, {"follow", follow ? "true" : "false"}}));
    EXPECT_TRUE(s.ok());
    Status st = s.value()->open(ConnectorContext{"p", "file", nullptr}, checkpoint);
    EXPECT_TRUE(st.ok()) << st.error().message();
    return std::move(s).value();
  }

  // A batch of `n` records with ids from `first`, using several value kinds.
  static void fill(Batch& b, int first, int n) {
    for (int i = first; i < first + n; ++i) {
      Record& r = b.add();
      r.op = i % 3 == 0 ? Operation::update : Operation::create;
      r.position = b.copy("src-" + std::to_string(i));
      r.metadata = b.object(1).add("table", Value::string("t")).build();
      r.key = b.object(1).add("id", Value::int64(i)).build();
      if (r.op == Operation::update) r.before = Value::null();
      r.after = b.object(4)
                    .add("id", Value::int64(i))
                    .add("name", Value::string(b.copy("name \"" + std::to_string(i) + "\"\n")))
                    .add("day", Value::date(19000 + i))
                    .add("amount", Value::decimal(b.copy(std::to_string(i) + ".50")))
                    .build();
    }
  }

  void write(Destination& d, Batch& b) {
    bool called = false;
    d.write(b, [&](Status st) {
      EXPECT_TRUE(st.ok()) << st.error().message();
      called = true;
    });
    EXPECT_TRUE(called) << "write must complete synchronously";
  }

  void append_raw(std::string_view text) {
    std::ofstream f(path_, std::ios::app | std::ios::binary);
    f << text;
  }

  std::string contents() {
    std::ifstream f(path_, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

  static ReadRequest request(size_t max_records = 10000) {
    ReadRequest req;
    req.max_records = max_records;
    req.linger = 20ms;
    req.poll = 50ms;
    return req;
  }

  fs::path dir_;
  std::string path_;
};

void expect_same_values(const Record& want, const Record& got) {
  EXPECT_EQ(want.op, got.op);
  EXPECT_TRUE(want.metadata == got.metadata);
  EXPECT_TRUE(want.key == got.key) << to_debug_string(got.key);
  EXPECT_TRUE(want.before == got.before) << to_debug_string(got.before);
  EXPECT_TRUE(want.after == got.after) << to_debug_string(got.after);
}

TEST_F(FileConnectorTest, WritesBatchesAndReadsThemBack) {
  auto dest = destination();
  Batch b1, b2;
  fill(b1, 0, 5);
  fill(b2, 5, 7);
  write(*dest, b1);
  write(*dest, b2);
  dest->close();

  const std::string text = contents();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 12);

  auto src = source(false);
  Batch out;
  auto st = src->read(out, request(), {});
  ASSERT_TRUE(st.ok()) << st.error().message();
  EXPECT_EQ(st.value(), ReadStatus::end);
  ASSERT_EQ(out.size(), 12u);
  for (size_t i = 0; i < 12; ++i)
    expect_same_values(i < 5 ? b1.records()[i] : b2.records()[i - 5], out.records()[i]);
  // Positions are byte offsets just past each line; the batch covers the whole file.
  EXPECT_EQ(out.position(), std::to_string(text.size()));
  EXPECT_EQ(out.records().back().position, std::to_string(text.size()));
  EXPECT_EQ(out.records()[0].position, std::to_string(text.find('\n') + 1));

  // Reading again at the end: nothing more, still the end.
  Batch again;
  st = src->read(again, request(), {});
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st.value(), ReadStatus::end);
  EXPECT_TRUE(again.empty());
}

TEST_F(FileConnectorTest, ReopenedDestinationAppends) {
  {
    auto dest = destination(false);
    Batch b;
    fill(b, 0, 2);
    write(*dest, b);
  }
  {
    auto dest = destination(false);
    Batch b;
    fill(b, 2, 3);
    write(*dest, b);
  }
  auto src = source(false);
  Batch out;
  ASSERT_TRUE(src->read(out, request(), {}).ok());
  ASSERT_EQ(out.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(out.records()[size_t(i)].key.find("id")->as_int64(), i);
}

TEST_F(FileConnectorTest, ResumesFromCheckpointOffset) {
  auto dest = destination();
  Batch b;
  fill(b, 0, 10);
  write(*dest, b);

  std::string checkpoint;
  {
    auto src = source(false);
    Batch out;
    auto st = src->read(out, request(4), {});
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st.value(), ReadStatus::more);
    ASSERT_EQ(out.size(), 4u);
    checkpoint = out.position();
    EXPECT_EQ(checkpoint, out.records().back().position);
  }
  auto src = source(false, checkpoint);
  Batch out;
  auto st = src->read(out, request(), {});
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st.value(), ReadStatus::end);
  ASSERT_EQ(out.size(), 6u);
  for (size_t i = 0; i < 6; ++i) expect_same_values(b.records()[i + 4], out.records()[i]);
}

TEST_F(FileConnectorTest, BadCheckpointsAreRejected) {
  append_raw("");
  for (const char* cp : {"abc", "12x", "", "999999"}) {
    auto s =
        file_connector().make_source(settings(file_connector().source_settings, {{"path", path_}}));
    ASSERT_TRUE(s.ok());
    Status st = s.value()->open(ConnectorContext{}, std::string(cp));
    ASSERT_FALSE(st.ok()) << cp;
    EXPECT_EQ(st.error().code(), Errc::data);
    EXPECT_NE(st.error().message().find("checkpoint"), std::string::npos) << st.error().message();
  }
}

TEST_F(FileConnectorTest, FollowPicksUpAppendedLines) {
  auto dest = destination();
  Batch b;
  fill(b, 0, 2);
  write(*dest, b);

  auto src = source(true);
  Batch out;
  auto st = src->read(out, request(), {});
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st.value(), ReadStatus::idle);  // following: the end of the file is not the end
  EXPECT_EQ(out.size(), 2u);

  Batch empty;
  st = src->read(empty, request(), {});
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st.value(), ReadStatus::idle);
  EXPECT_TRUE(empty.empty());
  EXPECT_FALSE(empty.has_position());

  Batch more;
  fill(more, 2, 3);
  write(*dest, more);
  Batch out2;
  st = src->read(out2, request(), {});
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(out2.size(), 3u);
  EXPECT_EQ(out2.records()[0].key.find("id")->as_int64(), 2);
  EXPECT_EQ(out2.position(), std::to_string(contents().size()));

  // A line being written (no newline yet) waits until it is complete.
  std::string line;
  encode_record_json(more.records()[0], line);
  const size_t before = contents().size();
  append_raw(line.substr(0, 10));
  Batch partial;
  st = src->read(partial, request(), {});
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(partial.empty());
  append_raw(line.substr(10) + "\n");
  Batch completed;
  st = src->read(completed, request(), {});
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(completed.size(), 1u);
  expect_same_values(more.records()[0], completed.records()[0]);
  EXPECT_EQ(completed.position(), std::to_string(before + line.size() + 1));
}

TEST_F(FileConnectorTest, FollowReturnsPromptlyOnStop) {
  append_raw("");
  auto src = source(true);
  std::stop_source stop;
  stop.request_stop();
  ReadRequest req = request();
  req.poll = 10s;
  Batch out;
  auto t0 = std::chrono::steady_clock::now();
  auto st = src->read(out, req, stop.get_token());
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st.value(), ReadStatus::idle);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

TEST_F(FileConnectorTest, LastLineWithoutNewlineIsReadAtEndWhenNotFollowing) {
  append_raw(
      "\n{\"operation\":\"create\",\"payload\":{\"after\":{\"a\":1}}}\r\n  \n"
      "{\"operation\":\"delete\",\"key\":7}");
  auto src = source(false);
  Batch out;
  auto st = src->read(out, request(), {});
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st.value(), ReadStatus::end);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out.records()[1].op, Operation::remove);
  EXPECT_EQ(out.records()[1].key.as_int64(), 7);
  EXPECT_EQ(out.position(), std::to_string(contents().size()));
}

TEST_F(FileConnectorTest, BadLineIsReportedAfterTheGoodOnes) {
  append_raw(
      "{\"operation\":\"create\",\"key\":1}\n{\"operation\":\"create\",\"key\":2}\nnot json\n");
  auto src = source(false);
  Batch out;
  auto st = src->read(out, request(), {});
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(out.size(), 2u);
  Batch next;
  st = src->read(next, request(), {});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), Errc::data);
  EXPECT_NE(st.error().message().find(path_), std::string::npos);
  EXPECT_NE(st.error().message().find("byte offset 62"), std::string::npos) << st.error().message();
}

TEST_F(FileConnectorTest, LongLinesGrowTheBuffer) {
  auto dest = destination(false);
  Batch b;
  std::string big(3u << 20, 'x');
  for (int i = 0; i < 2; ++i) {
    Record& r = b.add();
    r.key = Value::int64(i);
    r.after = Value::string(b.copy(big));
  }
  write(*dest, b);
  auto src = source(false);
  Batch out;
  auto st = src->read(out, request(), {});
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out.records()[1].after.as_text(), big);
}

TEST_F(FileConnectorTest, MissingFileIsAnIoErrorNamingThePath) {
  path_ = (dir_ / "nope.jsonl").string();
  auto s =
      file_connector().make_source(settings(file_connector().source_settings, {{"path", path_}}));
  ASSERT_TRUE(s.ok());
  Status st = s.value()->open(ConnectorContext{}, std::nullopt);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), Errc::io);
  EXPECT_NE(st.error().message().find(path_), std::string::npos) << st.error().message();
  EXPECT_EQ(st.error().message().find('\n'), std::string::npos);

  path_ = (dir_ / "no-such-dir" / "out.jsonl").string();
  auto d = file_connector().make_destination(
      settings(file_connector().destination_settings, {{"path", path_}}));
  ASSERT_TRUE(d.ok());
  st = d.value()->open(ConnectorContext{});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), Errc::io);
  EXPECT_NE(st.error().message().find(path_), std::string::npos) << st.error().message();
}

TEST_F(FileConnectorTest, PathIsRequired) {
  Settings s(file_connector().source_settings);
  auto err = settings_from_text(file_connector().source_settings, {}, &s);
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("path"), std::string::npos);
}

TEST_F(FileConnectorTest, DestinationRepairsATornLastLine) {
  const std::string good = "{\"operation\":\"create\",\"key\":1}\n";
  // A torn write: cut off mid-record.
  append_raw(good + "{\"operation\":\"create\",\"ke");
  {
    auto dest = destination();
    Batch b;
    fill(b, 5, 1);
    write(*dest, b);
  }
  auto src = source(false);
  Batch out;
  ASSERT_TRUE(src->read(out, request(), {}).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out.records()[0].key.as_int64(), 1);
  EXPECT_EQ(out.records()[1].key.find("id")->as_int64(), 5);

  // A complete last record that only lacks its newline is kept.
  fs::remove(path_);
  append_raw(good + "{\"operation\":\"create\",\"key\":2}");
  {
    auto dest = destination();
    Batch b;
    fill(b, 6, 1);
    write(*dest, b);
  }
  auto src2 = source(false);
  Batch out2;
  ASSERT_TRUE(src2->read(out2, request(), {}).ok());
  ASSERT_EQ(out2.size(), 3u);
  EXPECT_EQ(out2.records()[1].key.as_int64(), 2);
}

TEST_F(FileConnectorTest, IsRegistered) {
  Registry r;
  register_builtin_connectors(r);
  const ConnectorSpec* spec = r.connector("file");
  ASSERT_NE(spec, nullptr);
  EXPECT_NE(spec->make_source, nullptr);
  EXPECT_NE(spec->make_destination, nullptr);
}

}  // namespace
}  // namespace sluice
