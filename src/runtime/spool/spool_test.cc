// The spool: the batch codec's round trip, the disk spool's files (torn tail, roll, retention,
// the disk bound) and a pipeline running through it with scripted connectors.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "runtime/memory_checkpoints_test.h"
#include "runtime/pipeline.h"
#include "runtime/spool/disk_spool.h"
#include "support/spool/batch_codec.h"

namespace sluice::spool {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string templ = (fs::temp_directory_path() / "sluice-spool-XXXXXX").string();
    path_ = mkdtemp(templ.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string path(const std::string& sub = "spool") const { return path_ + "/" + sub; }

 private:
  std::string path_;
};

// A batch of `n` records with keys from..from+n-1, position "p<last>".
void fill(Batch& b, int from, int n) {
  for (int i = from; i < from + n; ++i) {
    Record& r = b.add();
    r.op = Operation::create;
    r.key = b.object(1).add("id", Value::int64(i)).build();
    r.after = b.object(2)
                  .add("id", Value::int64(i))
                  .add("name", Value::string(b.copy("row " + std::to_string(i))))
                  .build();
    r.position = b.copy("p" + std::to_string(i));
  }
  b.set_position("p" + std::to_string(from + n - 1));
}

int64_t first_key(const Batch& b) { return b.records().front().key.fields()[0].value.as_int64(); }

TEST(SpoolBatchCodec, RoundTripsEveryValueKindAbsentVsNullAndControlRecords) {
  Batch b;
  static const uint8_t uuid[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  auto* iv = b.arena().allocate_array<Interval>(1);
  *iv = Interval{14, -3, 123456789};
  Value items[3] = {Value::int64(-1), Value::null(), Value::string("x")};
  Record& r = b.add();
  r.op = Operation::update;
  r.position = "lsn/0/16B3748";
  r.metadata =
      b.object(2).add("table", Value::string("t")).add("schema", Value::string("public")).build();
  r.key = b.object(1).add("id", Value::uint64(UINT64_MAX)).build();
  r.before = b.object(2).add("id", Value::int64(INT64_MIN)).add("gone", Value::null()).build();
  r.after = b.object(20)
                .add("absent", Value())
                .add("null", Value::null())
                .add("t", Value::boolean(true))
                .add("f", Value::boolean(false))
                .add("i", Value::int64(INT64_MAX))
                .add("u", Value::uint64(42))
                .add("d", Value::float64(-0.125))
                .add("dec", Value::decimal("-12.340"))
                .add("s", Value::string("héllo\0x"))
                .add("bytes", Value::bytes(std::string_view("\0\xff\x01", 3)))
                .add("date", Value::date(-719162))
                .add("time", Value::time(86399999999))
                .add("timetz", Value::timetz(3600000000, -19800))
                .add("ts", Value::timestamp(-1))
                .add("tstz", Value::timestamptz(1700000000000000))
                .add("iv", Value::interval(iv))
                .add("uuid", Value::uuid(uuid))
                .add("json", Value::json("{\"a\":[1,2]}"))
                .add("arr", Value::array(items, 3))
                .add("nested", b.object(1).add("deep", Value::array(items, 1)).build())
                .build();
  Record& del = b.add();
  del.op = Operation::remove;
  del.key = b.object(1).add("id", Value::int64(7)).build();  // before and after absent
  Record& schema = b.add();
  schema.op = Operation::schema;
  schema.after = b.object(1).add("columns", Value::array(items, 2)).build();
  Record& marker = b.add();
  marker.op = Operation::marker;
  marker.metadata = b.object(1).add("marker", Value::string("snapshot_end")).build();
  b.set_position("batch-position");

  std::string bytes;
  encode_batch(b, bytes);
  Batch out;
  ASSERT_TRUE(decode_batch(bytes, out).ok());
  ASSERT_EQ(out.size(), b.size());
  EXPECT_EQ(out.position(), "batch-position");
  EXPECT_EQ(out.control_count(), 2u);
  for (size_t i = 0; i < b.size(); ++i) {
    const Record& a = b.records()[i];
    const Record& c = out.records()[i];
    EXPECT_EQ(a.op, c.op) << i;
    EXPECT_EQ(a.position, c.position) << i;
    EXPECT_TRUE(a.metadata == c.metadata) << i;
    EXPECT_TRUE(a.key == c.key) << i;
    EXPECT_TRUE(a.before == c.before) << i;
    EXPECT_TRUE(a.after == c.after) << i << ": " << to_debug_string(c.after);
  }
  const Value* absent = out.records()[0].after.find("absent");
  ASSERT_NE(absent, nullptr);
  EXPECT_TRUE(absent->is_absent());
  EXPECT_TRUE(out.records()[0].after.find("null")->is_null());
  EXPECT_TRUE(out.records()[1].after.is_absent());
  EXPECT_EQ(out.records()[0].after.find("timetz")->tz_offset_seconds(), -19800);
  EXPECT_EQ(out.records()[0].after.find("iv")->as_interval(), (Interval{14, -3, 123456789}));
}

TEST(SpoolBatchCodec, RejectsEveryTruncationAndTrailingBytes) {
  Batch b;
  fill(b, 1, 3);
  std::string bytes;
  encode_batch(b, bytes);
  for (size_t n = 0; n < bytes.size(); ++n) {
    Batch out;
    EXPECT_FALSE(decode_batch(std::string_view(bytes).substr(0, n), out).ok()) << n;
  }
  Batch out;
  EXPECT_FALSE(decode_batch(bytes + "x", out).ok());
  std::string bad = bytes;
  bad[bad.size() - 1] = 99;  // an unknown value kind where `after`'s last field's kind was
  Batch out2;
  EXPECT_FALSE(decode_batch(std::string(200, '\x11'), out2).ok());
}

DiskSpoolOptions disk(const std::string& path) {
  DiskSpoolOptions o;
  o.path = path;
  return o;
}

TEST(DiskSpool, AppendsReadsAndResumesAfterReopen) {
  TempDir dir;
  {
    DiskSpool s(disk(dir.path()));
    ASSERT_TRUE(s.open().ok());
    EXPECT_FALSE(s.last_position());
    for (int i = 0; i < 3; ++i) {
      Batch b;
      fill(b, i * 10, 10);
      ASSERT_TRUE(s.append(b, {}).ok());
    }
    EXPECT_EQ(s.last_position(), "p29");
  }
  DiskSpool s(disk(dir.path()));
  ASSERT_TRUE(s.open().ok());
  EXPECT_EQ(s.last_position(), "p29");
  Batch b;
  fill(b, 30, 5);
  ASSERT_TRUE(s.append(b, {}).ok());
  auto reader = s.open_reader("destination", 2);  // batches 1 and 2 delivered before
  ASSERT_TRUE(reader.ok()) << reader.error().message();
  auto third = reader.value()->next(0ms, {});
  ASSERT_TRUE(third.ok() && third.value());
  EXPECT_EQ(third.value()->seq, 3u);
  Batch got;
  ASSERT_TRUE(decode_batch(third.value()->payload, got).ok());
  EXPECT_EQ(first_key(got), 20);
  auto fourth = reader.value()->next(0ms, {});
  ASSERT_TRUE(fourth.ok() && fourth.value());
  EXPECT_EQ(fourth.value()->seq, 4u);  // numbering went on after the reopen
  auto none = reader.value()->next(10ms, {});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none.value());
}

// Appends 3 batches, closes, damages the last frame with `damage`, reopens.
void expect_tail_truncated(const std::function<void(const std::string& segment)>& damage) {
  TempDir dir;
  uint64_t two_frames = 0;
  {
    DiskSpool s(disk(dir.path()));
    ASSERT_TRUE(s.open().ok());
    for (int i = 0; i < 3; ++i) {
      Batch b;
      fill(b, i * 10, 10);
      ASSERT_TRUE(s.append(b, {}).ok());
      if (i == 1) two_frames = s.disk_bytes();
    }
  }
  const std::string segment = dir.path() + "/00000000000000000001.seg";
  damage(segment);
  DiskSpool s(disk(dir.path()));
  ASSERT_TRUE(s.open().ok());
  EXPECT_EQ(fs::file_size(segment), two_frames);
  EXPECT_EQ(s.last_position(), "p19");  // the source resends the third batch
  Batch b;
  fill(b, 20, 10);
  ASSERT_TRUE(s.append(b, {}).ok());
  auto reader = s.open_reader("destination", std::nullopt);
  ASSERT_TRUE(reader.ok());
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    auto item = reader.value()->next(0ms, {});
    ASSERT_TRUE(item.ok() && item.value()) << seq;
    EXPECT_EQ(item.value()->seq, seq);
  }
}

TEST(DiskSpool, TornTailIsTruncatedAtOpen) {
  expect_tail_truncated(
      [](const std::string& seg) { fs::resize_file(seg, fs::file_size(seg) - 7); });
}

TEST(DiskSpool, CorruptTailFailsItsCrcAndIsTruncatedAtOpen) {
  expect_tail_truncated([](const std::string& seg) {
    std::fstream f(seg, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(seg) - 3));
    f.put('\x5a');
  });
}

TEST(DiskSpool, GarbageAfterTheLastFrameIsTruncatedAtOpen) {
  expect_tail_truncated([](const std::string& seg) {
    // The third frame half written, then zeros (what a file system may show after a crash).
    fs::resize_file(seg, fs::file_size(seg) - 20);
    std::ofstream f(seg, std::ios::app | std::ios::binary);
    f << std::string(64, '\0');
  });
}

TEST(DiskSpool, SegmentsRollBySizeAndGoOnceTheReaderReleasedThem) {
  TempDir dir;
  DiskSpoolOptions o = disk(dir.path());
  o.segment_bytes = 1024;
  DiskSpool s(o);
  ASSERT_TRUE(s.open().ok());
  for (int i = 0; i < 20; ++i) {
    Batch b;
    fill(b, i * 10, 10);
    ASSERT_TRUE(s.append(b, {}).ok());
  }
  const size_t segments = s.segment_count();
  EXPECT_GT(segments, 3u);
  EXPECT_EQ(s.depth().records, 200u);
  EXPECT_GT(s.depth().oldest_unix_ms, 0);
  auto reader = s.open_reader("destination", std::nullopt);
  ASSERT_TRUE(reader.ok());
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(reader.value()->next(0ms, {}).value());
  EXPECT_EQ(s.segment_count(), segments) << "nothing released yet";
  reader.value()->release(10);
  EXPECT_LT(s.segment_count(), segments);
  EXPECT_EQ(s.depth().records, 100u);
  for (int i = 10; i < 20; ++i) ASSERT_TRUE(reader.value()->next(0ms, {}).value());
  reader.value()->release(20);
  EXPECT_EQ(s.segment_count(), 1u) << "the segment holding the last batch stays";
  EXPECT_EQ(s.depth().records, 0u);
  EXPECT_EQ(s.depth().bytes, 0u);
  EXPECT_EQ(s.depth().oldest_unix_ms, 0);
  // A reopened spool numbers on from the last batch and the reader resumes at the end.
  s.close();
  DiskSpool again(o);
  ASSERT_TRUE(again.open().ok());
  EXPECT_EQ(again.last_position(), "p199");
  auto resumed = again.open_reader("destination", 20);
  ASSERT_TRUE(resumed.ok()) << resumed.error().message();
  EXPECT_FALSE(resumed.value()->next(0ms, {}).value());
}

TEST(DiskSpool, ReaderRefusesACheckpointTheSpoolCannotServe) {
  TempDir dir;
  DiskSpoolOptions o = disk(dir.path());
  o.segment_bytes = 512;
  DiskSpool s(o);
  ASSERT_TRUE(s.open().ok());
  for (int i = 0; i < 10; ++i) {
    Batch b;
    fill(b, i * 10, 10);
    ASSERT_TRUE(s.append(b, {}).ok());
  }
  auto ahead = s.open_reader("destination", 50);
  ASSERT_FALSE(ahead.ok());
  EXPECT_NE(ahead.error().message().find("ends at batch 10"), std::string::npos)
      << ahead.error().message();
  auto reader = s.open_reader("destination", 0);
  ASSERT_TRUE(reader.ok());
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(reader.value()->next(0ms, {}).value());
  reader.value()->release(9);
  auto gone = s.open_reader("destination", 0);
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.error().message().find("batches between are gone"), std::string::npos)
      << gone.error().message();
  EXPECT_EQ(parse_spool_position(spool_position(77)), 77u);
  EXPECT_FALSE(parse_spool_position("0/16B3748"));
}

TEST(DiskSpool, FullSpoolFailsTheAppendWithAOneLineErrorUnderWhenFullFail) {
  TempDir dir;
  DiskSpoolOptions o = disk(dir.path());
  o.segment_bytes = 1024;
  o.max_bytes = 4096;
  o.when_full = DiskSpoolOptions::WhenFull::fail;
  DiskSpool s(o);
  ASSERT_TRUE(s.open().ok());
  Status st = ok_status();
  int appended = 0;
  for (; appended < 100; ++appended) {
    Batch b;
    fill(b, appended * 10, 10);
    st = s.append(b, {});
    if (!st.ok()) break;
  }
  ASSERT_FALSE(st.ok());
  EXPECT_GT(appended, 3);
  EXPECT_LE(s.disk_bytes(), 4096u);
  EXPECT_FALSE(st.error().retriable());
  EXPECT_NE(st.error().message().find("raise spool.max_bytes"), std::string::npos);
  EXPECT_EQ(st.error().message().find('\n'), std::string::npos);
}

TEST(DiskSpool, FullSpoolBlocksTheAppenderUntilTheReaderReleases) {
  TempDir dir;
  DiskSpoolOptions o = disk(dir.path());
  o.segment_bytes = 1024;
  o.max_bytes = 4096;
  DiskSpool s(o);
  ASSERT_TRUE(s.open().ok());
  auto reader = s.open_reader("destination", std::nullopt);
  ASSERT_TRUE(reader.ok());
  std::atomic<int> appended{0};
  std::thread writer([&] {
    for (int i = 0; i < 60; ++i) {
      Batch b;
      fill(b, i * 10, 10);
      ASSERT_TRUE(s.append(b, {}).ok());
      ++appended;
    }
  });
  std::this_thread::sleep_for(300ms);
  const int blocked_at = appended.load();
  EXPECT_LT(blocked_at, 60) << "the writer went past max_bytes";
  EXPECT_LE(s.disk_bytes(), 4096u);
  // Read and release everything as it comes: the writer gets through.
  uint64_t seq = 0;
  while (seq < 60) {
    auto item = reader.value()->next(2000ms, {});
    ASSERT_TRUE(item.ok() && item.value()) << "after batch " << seq;
    seq = item.value()->seq;
    reader.value()->release(seq);
  }
  writer.join();
  EXPECT_EQ(appended.load(), 60);
  EXPECT_LE(s.disk_bytes(), 4096u);
}

TEST(DiskSpool, StopEndsAWaitForSpace) {
  TempDir dir;
  DiskSpoolOptions o = disk(dir.path());
  o.segment_bytes = 512;
  o.max_bytes = 2048;
  DiskSpool s(o);
  ASSERT_TRUE(s.open().ok());
  std::stop_source stop;
  std::thread writer([&] {
    Status st = ok_status();
    for (int i = 0; i < 100 && st.ok(); ++i) {
      Batch b;
      fill(b, i * 10, 10);
      st = s.append(b, stop.get_token());
    }
    EXPECT_FALSE(st.ok());
    EXPECT_EQ(st.error().code(), Errc::cancelled);
  });
  std::this_thread::sleep_for(100ms);
  stop.request_stop();
  writer.join();
}

// ---- a pipeline through the spool -------------------------------------------------------------

class CountingSource final : public Source {
 public:
  CountingSource(int total, std::atomic<int>* acked) : total_(total), acked_(acked) {}
  Status open(const ConnectorContext&, const std::optional<std::string>& cp) override {
    if (cp) next_ = std::stoi(cp->substr(1)) + 1;
    return ok_status();
  }
  Result<ReadStatus> read(Batch& b, const ReadRequest& req, std::stop_token) override {
    const int n = std::min<int>(static_cast<int>(req.max_records), total_ - next_);
    if (n <= 0) return ReadStatus::end;
    fill(b, next_, n);
    next_ += n;
    return next_ >= total_ ? ReadStatus::end : ReadStatus::more;
  }
  void ack(std::string_view p) override { *acked_ = std::stoi(std::string(p.substr(1))); }

 private:
  int total_;
  int next_ = 0;
  std::atomic<int>* acked_;
};

// Unreachable (a retriable open error) until `up`; then records every key it is given.
class FlakyDestination final : public Destination {
 public:
  Status open(const ConnectorContext&) override {
    ++opens;
    if (!up) return Error(Errc::connection, "connection refused", true);
    return ok_status();
  }
  void write(Batch& b, WriteDone done) override {
    std::lock_guard l(mu);
    for (const Record& r : b.records()) keys.push_back(r.key.fields()[0].value.as_int64());
    done(ok_status());
  }
  std::atomic<bool> up{false};
  std::atomic<int> opens{0};
  std::mutex mu;
  std::vector<int64_t> keys;
};

PipelineOptions spooled(const std::string& dir) {
  PipelineOptions o;
  o.id = "t";
  o.source_connector = "test";
  o.destination_connector = "test";
  o.max_records = 100;
  o.checkpoint_interval = 10ms;
  o.poll = 20ms;
  o.spool = disk(dir);
  o.spool->segment_bytes = 4096;
  return o;
}

TEST(SpoolPipeline, SourceIsAcknowledgedWhileTheDestinationIsDownThenTheDestinationCatchesUp) {
  TempDir dir;
  test::MemoryCheckpoints cps;
  std::atomic<int> acked{-1};
  auto dest = std::make_unique<FlakyDestination>();
  FlakyDestination* d = dest.get();
  MetricsRegistry registry;  // outlives the pipeline, as in the engine
  Pipeline p(spooled(dir.path()), std::make_unique<CountingSource>(2000, &acked), {},
             std::move(dest), &cps);
  p.register_metrics(registry);
  Status result = ok_status();
  std::thread t([&] { result = p.run(); });
  for (int i = 0; i < 500 && acked.load() < 1999; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(acked.load(), 1999) << "the source was not acknowledged while the destination was down";
  EXPECT_GE(d->opens.load(), 1);
  EXPECT_EQ(p.spool_depth()->records, 2000u);
  auto depth = registry.values("sluice_spool_records");
  ASSERT_EQ(depth.size(), 1u);
  EXPECT_EQ(metric_as_double(depth.front().second), 2000.0);
  auto oldest = registry.values("sluice_spool_oldest_seconds");
  ASSERT_EQ(oldest.size(), 1u);
  EXPECT_GE(metric_as_double(oldest.front().second), 0.0);
  EXPECT_EQ(metric_as_double(registry.values("sluice_records_written_total").front().second), 0.0)
      << "written counts what reached the destination, not the spool";
  EXPECT_EQ(p.in_flight_records(), 2000u);
  d->up = true;  // the destination comes back: the pipeline drains the spool, then ends
  t.join();
  ASSERT_TRUE(result.ok()) << result.error().message();
  ASSERT_EQ(d->keys.size(), 2000u);
  for (int i = 0; i < 2000; ++i) ASSERT_EQ(d->keys[i], i);
  EXPECT_EQ(cps.value("t"), "p1999");
  EXPECT_EQ(cps.value("t/spool/destination"), spool_position(20));
  EXPECT_EQ(p.spool_depth()->records, 0u);
  EXPECT_EQ(metric_as_double(registry.values("sluice_records_written_total").front().second),
            2000.0);
  EXPECT_EQ(p.in_flight_records(), 0u);
}

TEST(SpoolPipeline, ARestartResumesBothSidesWithoutSpoolingOrDeliveringTwice) {
  TempDir dir;
  test::MemoryCheckpoints cps;
  std::atomic<int> acked{-1};
  {
    // First run: the destination never comes; everything is spooled, then the pipeline stops.
    auto dest = std::make_unique<FlakyDestination>();
    Pipeline p(spooled(dir.path()), std::make_unique<CountingSource>(1000, &acked), {},
               std::move(dest), &cps);
    Status result = ok_status();
    std::thread t([&] { result = p.run(); });
    for (int i = 0; i < 500 && acked.load() < 999; ++i) std::this_thread::sleep_for(10ms);
    p.request_stop();
    t.join();
    ASSERT_TRUE(result.ok()) << result.error().message();
  }
  // The checkpoint store lags behind the spool (a crash before the acker persisted): the spool's
  // last batch decides where the source resumes, so nothing is spooled twice.
  cps.saved["t"] = "p499";
  auto dest = std::make_unique<FlakyDestination>();
  dest->up = true;
  FlakyDestination* d = dest.get();
  Pipeline p(spooled(dir.path()), std::make_unique<CountingSource>(1500, &acked), {},
             std::move(dest), &cps);
  Status result = p.run();
  ASSERT_TRUE(result.ok()) << result.error().message();
  ASSERT_EQ(d->keys.size(), 1500u);
  for (int i = 0; i < 1500; ++i) ASSERT_EQ(d->keys[i], i);
  EXPECT_EQ(cps.value("t"), "p1499");
}

// ---- several destinations over one spool ------------------------------------------------------

std::vector<SpoolLane> lanes_of(std::vector<std::pair<std::string, FlakyDestination*>>& made,
                                const std::vector<std::string>& names) {
  std::vector<SpoolLane> lanes;
  for (const std::string& n : names) {
    SpoolLane l;
    l.name = n;
    l.connector = "test";
    auto d = std::make_unique<FlakyDestination>();
    made.emplace_back(n, d.get());
    l.destination = std::move(d);
    lanes.push_back(std::move(l));
  }
  return lanes;
}

double series(MetricsRegistry& registry, const std::string& name, const std::string& dest) {
  auto v = registry.values(name, {{"destination", dest}});
  return v.empty() ? -1.0 : metric_as_double(v.front().second);
}

TEST(SpoolFanOut, ADestinationThatIsDownHoldsOnlyItsOwnReaderBack) {
  TempDir dir;
  test::MemoryCheckpoints cps;
  std::atomic<int> acked{-1};
  std::vector<std::pair<std::string, FlakyDestination*>> made;
  auto lanes = lanes_of(made, {"a", "b"});
  FlakyDestination* a = made[0].second;
  FlakyDestination* b = made[1].second;
  a->up = true;
  MetricsRegistry registry;
  PipelineOptions o = spooled(dir.path());
  o.destination_connector = "a+b";
  Pipeline p(o, std::make_unique<CountingSource>(2000, &acked), {}, std::move(lanes), &cps);
  p.register_metrics(registry);
  Status result = ok_status();
  std::thread t([&] { result = p.run(); });
  // The source is acknowledged and `a` has everything while `b` is down.
  auto a_done = [&] {
    std::lock_guard l(a->mu);
    return a->keys.size() == 2000u;
  };
  for (int i = 0; i < 1000 && (acked.load() < 1999 || !a_done() ||
                               cps.value("t/spool/a") != spool_position(20));
       ++i)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(acked.load(), 1999);
  EXPECT_TRUE(a_done());
  EXPECT_EQ(cps.value("t/spool/a"), spool_position(20));
  EXPECT_EQ(cps.has("t/spool/b"), false);
  EXPECT_EQ(series(registry, "sluice_spool_destination_records", "a"), 0.0);
  EXPECT_EQ(series(registry, "sluice_spool_destination_records", "b"), 2000.0);
  EXPECT_GT(series(registry, "sluice_spool_destination_bytes", "b"), 0.0);
  EXPECT_GE(series(registry, "sluice_spool_destination_oldest_seconds", "b"), 0.0);
  EXPECT_EQ(series(registry, "sluice_spool_destination_up", "a"), 1.0);
  EXPECT_EQ(series(registry, "sluice_spool_destination_up", "b"), 0.0);
  EXPECT_EQ(series(registry, "sluice_destination_records_written_total", "a"), 2000.0);
  EXPECT_EQ(series(registry, "sluice_destination_records_written_total", "b"), 0.0);
  // The pipeline's own figure is what every destination has; the spool keeps b's batches.
  EXPECT_EQ(metric_as_double(registry.values("sluice_records_written_total").front().second), 0.0);
  EXPECT_EQ(p.spool_depth()->records, 2000u);
  EXPECT_EQ(p.in_flight_records(), 2000u);
  EXPECT_EQ(p.destination_connector(), "a+b");
  EXPECT_EQ(p.destination_records_written(), 0u);
  b->up = true;  // b comes back: it drains the spool, then the pipeline ends
  t.join();
  ASSERT_TRUE(result.ok()) << result.error().message();
  for (auto& [name, d] : made) {
    ASSERT_EQ(d->keys.size(), 2000u) << name;
    for (int i = 0; i < 2000; ++i) ASSERT_EQ(d->keys[i], i) << name;
    EXPECT_EQ(cps.value("t/spool/" + name), spool_position(20)) << name;
  }
  EXPECT_EQ(p.spool_depth()->records, 0u);
  EXPECT_EQ(metric_as_double(registry.values("sluice_records_written_total").front().second),
            2000.0);
  EXPECT_EQ(p.destination_records_written(), 2000u);
}

TEST(SpoolFanOut, ADestinationAddedLaterStartsFromTheSpoolsHistoryAndTheOthersGoOn) {
  TempDir dir;
  test::MemoryCheckpoints cps;
  std::atomic<int> acked{-1};
  PipelineOptions o = spooled(dir.path());
  o.spool->segment_bytes = 64u << 20;  // one segment: the spool keeps all of its history
  {
    std::vector<std::pair<std::string, FlakyDestination*>> made;
    auto lanes = lanes_of(made, {"a"});
    made[0].second->up = true;
    Pipeline p(o, std::make_unique<CountingSource>(1000, &acked), {}, std::move(lanes), &cps);
    Status result = p.run();
    ASSERT_TRUE(result.ok()) << result.error().message();
    EXPECT_EQ(made[0].second->keys.size(), 1000u);
  }
  // The file gains destination b: it gets everything from the spool's first batch; a goes on
  // from its checkpoint (nothing twice).
  std::vector<std::pair<std::string, FlakyDestination*>> made;
  auto lanes = lanes_of(made, {"a", "b"});
  for (auto& [n, d] : made) d->up = true;
  Pipeline p(o, std::make_unique<CountingSource>(1500, &acked), {}, std::move(lanes), &cps);
  Status result = p.run();
  ASSERT_TRUE(result.ok()) << result.error().message();
  ASSERT_EQ(made[0].second->keys.size(), 500u);
  for (int i = 0; i < 500; ++i) ASSERT_EQ(made[0].second->keys[i], 1000 + i);
  ASSERT_EQ(made[1].second->keys.size(), 1500u);
  for (int i = 0; i < 1500; ++i) ASSERT_EQ(made[1].second->keys[i], i);
  EXPECT_EQ(cps.value("t/spool/a"), cps.value("t/spool/b"));
}

TEST(SpoolFanOut, ADestinationAddedAfterTheSpoolReleasedItsBeginningIsRefused) {
  TempDir dir;
  test::MemoryCheckpoints cps;
  std::atomic<int> acked{-1};
  PipelineOptions o = spooled(dir.path());  // 4 KiB segments: released ones are deleted
  {
    std::vector<std::pair<std::string, FlakyDestination*>> made;
    auto lanes = lanes_of(made, {"a"});
    made[0].second->up = true;
    Pipeline p(o, std::make_unique<CountingSource>(1000, &acked), {}, std::move(lanes), &cps);
    ASSERT_TRUE(p.run().ok());
  }
  std::vector<std::pair<std::string, FlakyDestination*>> made;
  auto lanes = lanes_of(made, {"a", "b"});
  for (auto& [n, d] : made) d->up = true;
  Pipeline p(o, std::make_unique<CountingSource>(1500, &acked), {}, std::move(lanes), &cps);
  Status result = p.run();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), Errc::config);
  EXPECT_NE(result.error().message().find("destination 'b' has no spool checkpoint (t/spool/b)"),
            std::string::npos)
      << result.error().message();
  EXPECT_NE(result.error().message().find("no longer holds the pipeline's beginning"),
            std::string::npos)
      << result.error().message();
  EXPECT_TRUE(made[0].second->keys.empty()) << "refused before anything was written";
}

// The spool added to a pipeline that ran without it: its destinations then had everything up
// to the source's position, so they start from the spool's first batch; a destination added
// after that (the spool does not hold the pipeline's beginning) is refused.
TEST(SpoolFanOut, ASpoolAddedToARunningPipelineServesItsDestinationsButNotALaterOne) {
  TempDir dir;
  test::MemoryCheckpoints cps;
  cps.saved["t"] = "p499";  // the source ran before, without a spool
  std::atomic<int> acked{-1};
  PipelineOptions o = spooled(dir.path());
  o.spool->segment_bytes = 64u << 20;
  {
    std::vector<std::pair<std::string, FlakyDestination*>> made;
    auto lanes = lanes_of(made, {"a"});
    made[0].second->up = true;
    Pipeline p(o, std::make_unique<CountingSource>(1000, &acked), {}, std::move(lanes), &cps);
    Status result = p.run();
    ASSERT_TRUE(result.ok()) << result.error().message();
    ASSERT_EQ(made[0].second->keys.size(), 500u);
    EXPECT_EQ(made[0].second->keys.front(), 500);
  }
  std::vector<std::pair<std::string, FlakyDestination*>> made;
  auto lanes = lanes_of(made, {"a", "b"});
  for (auto& [n, d] : made) d->up = true;
  Pipeline p(o, std::make_unique<CountingSource>(1500, &acked), {}, std::move(lanes), &cps);
  Status result = p.run();
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.error().message().find("destination 'b' has no spool checkpoint"),
            std::string::npos)
      << result.error().message();
}

}  // namespace
}  // namespace sluice::spool
