#include "connectors/common/log_source.h"

#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace sluice {
namespace {

// A position of the fake log: LSN points, a row-count cursor.
struct RowCursor {
  uint64_t rows = 0;
  bool operator==(const RowCursor&) const = default;
};
void write_field(PositionWriter& w, const RowCursor& c) { w.number(c.rows); }
bool read_field(PositionReader& r, RowCursor* c) { return r.number(&c->rows); }

struct FakeTraits {
  using Point = Lsn;
  using TxPoint = Lsn;
  using Cursor = RowCursor;
};
using FakePosition = LogPosition<FakeTraits>;

// One event of the fake change stream.
struct Event {
  enum Kind { begin, change, commit, lose_connection, time_out } kind;
  uint64_t lsn = 0;  // begin: the transaction's name; commit: the new point
  std::string value;
  Event(Kind k, uint64_t l = 0, std::string v = {}) : kind(k), lsn(l), value(std::move(v)) {}
};

// A scripted driver: a snapshot of `snapshot_rows` rows in chunks of two, then a stream of
// `events`; start_stream fails while `down` is set.
class FakeDriver final : public LogSourceDriver<FakeTraits> {
 public:
  std::string_view name() const override { return "fake"; }
  bool snapshot_only() const override { return only_snapshot; }
  Status connect(State&) override {
    ++connects;
    return ok_status();
  }
  Status plan_start(State& s) override {
    ++plans;
    if (s.position.phase == LogPhase::none) {
      s.position.phase = snapshot_rows ? LogPhase::snapshot : LogPhase::stream;
      s.position.point = Lsn{0x10};
      if (snapshot_rows) s.snapshot_started(snapshot_rows);
    }
    return ok_status();
  }
  Result<SnapshotRead> read_snapshot(Batch& batch, const ReadRequest&, std::stop_token,
                                     State& s) override {
    if (s.position.cursor.rows >= uint64_t(snapshot_rows)) return SnapshotRead::finished;
    for (int i = 0; i < 2 && s.position.cursor.rows < uint64_t(snapshot_rows); ++i) {
      batch.add().op = Operation::snapshot;
      ++s.position.cursor.rows;
      ++s.snapshot_rows;
      // The connection goes silent after this row: the chunk's rows so far are kept.
      if (s.position.cursor.rows == snapshot_silent_after) {
        snapshot_silent_after = 0;
        return SnapshotRead::timed_out;
      }
    }
    return SnapshotRead::more;
  }
  Status resume_snapshot(State&) override {
    ++snapshot_resumes;
    if (down) return Error(Errc::connection, "server down", /*retriable=*/true);
    return ok_status();
  }
  Status finish_snapshot(State&) override {
    ++finishes;
    return ok_status();
  }
  bool start_stream_on_open() const override { return stream_on_open; }
  Status start_stream(State&) override {
    ++stream_starts;
    if (down) return Error(Errc::connection, "server down", /*retriable=*/true);
    if (refuse) return Error(Errc::not_found, "binlog purged");
    streaming = true;
    return ok_status();
  }
  Result<StreamRead> read_stream(Batch& batch, const ReadRequest&, std::stop_token,
                                 State& s) override {
    while (!events.empty()) {
      Event e = events.front();
      events.pop_front();
      switch (e.kind) {
        case Event::begin: s.begin_transaction(Lsn{e.lsn}); break;
        case Event::change:
          if (s.tx.next_change()) {
            Record& r = batch.add();
            r.op = Operation::create;
            r.after = batch.object(1).add("v", Value::string(batch.copy(e.value))).build();
          }
          break;
        case Event::commit:
          s.tx.end();
          s.position.point = Lsn{e.lsn};
          break;
        case Event::lose_connection: return StreamRead::lost;
        case Event::time_out: return StreamRead::timed_out;
      }
    }
    return StreamRead::idle;
  }
  void stop_stream(State&) noexcept override {
    ++stream_stops;
    streaming = false;
  }
  void ack(const Position& p) override { acked.push_back(p.point.value); }
  void close() noexcept override { ++closes; }
  BackoffPolicy reconnect_backoff() const override { return backoff; }

  int snapshot_rows = 0;
  uint64_t snapshot_silent_after = 0;  // read_snapshot times out after this row (0: never)
  int snapshot_resumes = 0;
  bool only_snapshot = false;
  bool stream_on_open = false;
  bool down = false;
  bool refuse = false;
  bool streaming = false;
  BackoffPolicy backoff;
  std::deque<Event> events;
  int connects = 0, plans = 0, finishes = 0, stream_starts = 0, stream_stops = 0, closes = 0;
  std::vector<uint64_t> acked;
};

struct Fixture {
  FakeDriver* driver;
  std::unique_ptr<LogSource<FakeTraits>> source;
  ConnectorStats stats;
  ConnectorContext ctx{"p", "fake", &stats};
  Fixture() {
    auto d = std::make_unique<FakeDriver>();
    driver = d.get();
    source = std::make_unique<LogSource<FakeTraits>>(std::move(d));
  }
  Result<ReadStatus> read(Batch& b) {
    ReadRequest req;
    req.poll = std::chrono::milliseconds(20);
    return source->read(b, req, std::stop_token{});
  }
  std::vector<std::string> values(const Batch& b) {
    std::vector<std::string> out;
    for (const Record& r : b.records())
      if (const Value* v = r.after.is_object() ? r.after.find("v") : nullptr)
        out.emplace_back(v->as_text());
    return out;
  }
};

TEST(LogSourcePhases, SnapshotHandsOverToTheStreamAtTheSnapshotsPoint) {
  Fixture f;
  f.driver->snapshot_rows = 3;
  ASSERT_TRUE(f.source->open(f.ctx, std::nullopt).ok());
  EXPECT_EQ(f.stats.snapshot_rows_total.load(), 3);
  Batch b;
  ASSERT_EQ(f.read(b).value(), ReadStatus::more);
  EXPECT_EQ(b.size(), 2u);
  EXPECT_EQ(b.position(), "snapshot 0/10 0 2");
  EXPECT_EQ(f.stats.snapshot_rows_done.load(), 2);
  b.clear();
  ASSERT_EQ(f.read(b).value(), ReadStatus::more);
  EXPECT_EQ(b.position(), "snapshot 0/10 0 3");
  b.clear();
  ASSERT_EQ(f.read(b).value(), ReadStatus::more);  // every table read: the hand-over
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(b.position(), "cdc 0/10");
  EXPECT_EQ(f.driver->finishes, 1);
  EXPECT_EQ(f.driver->stream_starts, 0);
  b.clear();
  f.driver->events = {{Event::begin, 0x20}, {Event::change, 0, "a"}, {Event::commit, 0x30}};
  ASSERT_EQ(f.read(b).value(), ReadStatus::idle);
  EXPECT_EQ(f.values(b), std::vector<std::string>{"a"});
  EXPECT_EQ(b.position(), "cdc 0/30");
  EXPECT_EQ(f.driver->stream_starts, 1);
}

TEST(LogSourcePhases, InitialOnlyEndsWithDoneAndADoneCheckpointPlansNothing) {
  Fixture f;
  f.driver->snapshot_rows = 1;
  f.driver->only_snapshot = true;
  ASSERT_TRUE(f.source->open(f.ctx, std::nullopt).ok());
  Batch b;
  ASSERT_EQ(f.read(b).value(), ReadStatus::more);
  b.clear();
  ASSERT_EQ(f.read(b).value(), ReadStatus::end);
  EXPECT_EQ(b.position(), "done 0/10");

  Fixture g;
  ASSERT_TRUE(g.source->open(g.ctx, std::string("done 0/10")).ok());
  EXPECT_EQ(g.driver->connects, 1);
  EXPECT_EQ(g.driver->plans, 0);
  Batch c;
  ASSERT_EQ(g.read(c).value(), ReadStatus::end);
  EXPECT_EQ(c.position(), "done 0/10");
}

TEST(LogSourcePhases, AResumedSnapshotContinuesAtItsCursor) {
  Fixture f;
  f.driver->snapshot_rows = 5;
  ASSERT_TRUE(f.source->open(f.ctx, std::string("snapshot 0/10 0 4")).ok());
  Batch b;
  ASSERT_EQ(f.read(b).value(), ReadStatus::more);
  EXPECT_EQ(b.size(), 1u);
  EXPECT_EQ(b.position(), "snapshot 0/10 0 5");
}

TEST(LogSourcePhases, ACheckpointThatIsNotAPositionFailsOpenNamingTheConnector) {
  Fixture f;
  Status st = f.source->open(f.ctx, std::string("cdc nonsense"));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), Errc::data);
  EXPECT_NE(st.error().message().find("'cdc nonsense' is not a fake position"), std::string::npos);
  EXPECT_EQ(f.driver->connects, 0);
}

TEST(LogSourceResume, ACheckpointInsideATransactionSkipsWhatWasWritten) {
  Fixture f;
  ASSERT_TRUE(f.source->open(f.ctx, std::string("cdc 0/10 0/20 2")).ok());
  Batch b;
  // Before the transaction comes again, the position still names it.
  ASSERT_EQ(f.read(b).value(), ReadStatus::idle);
  EXPECT_EQ(b.position(), "cdc 0/10 0/20 2");
  b.clear();
  f.driver->events = {{Event::begin, 0x20}, {Event::change, 0, "a"}, {Event::change, 0, "b"}};
  ASSERT_EQ(f.read(b).value(), ReadStatus::idle);
  EXPECT_TRUE(f.values(b).empty());
  EXPECT_EQ(b.position(), "");  // an empty batch whose position did not change carries none
  EXPECT_EQ(f.source->stream_position(), "cdc 0/10 0/20 2");  // skipped changes count as written
  b.clear();
  f.driver->events = {{Event::change, 0, "c"}, {Event::commit, 0x30}};
  ASSERT_EQ(f.read(b).value(), ReadStatus::idle);
  EXPECT_EQ(f.values(b), std::vector<std::string>{"c"});
  EXPECT_EQ(b.position(), "cdc 0/30");
}

TEST(LogSourceResume, AnotherTransactionFirstDropsTheResumePoint) {
  TransactionResume<Lsn> tx;
  tx.resume_at(Lsn{0x20}, 2);
  tx.begin(Lsn{0x25});  // the interrupted transaction is not the next one: nothing to skip
  EXPECT_TRUE(tx.next_change());
  tx.end();
  EXPECT_FALSE(tx.partial());
  tx.begin(Lsn{0x20});
  EXPECT_TRUE(tx.next_change());
}

TEST(LogSourceResume, ALostConnectionResumesInsideTheTransactionItWasReading) {
  Fixture f;
  ASSERT_TRUE(f.source->open(f.ctx, std::string("cdc 0/10")).ok());
  Batch b;
  f.driver->events = {{Event::begin, 0x20},
                      {Event::change, 0, "a"},
                      {Event::change, 0, "b"},
                      {Event::lose_connection}};
  ASSERT_EQ(f.read(b).value(), ReadStatus::more);
  EXPECT_EQ(f.values(b), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(b.position(), "cdc 0/10 0/20 2");
  EXPECT_EQ(f.driver->stream_stops, 1);
  b.clear();
  // The server sends the transaction again from its start.
  f.driver->events = {{Event::begin, 0x20},
                      {Event::change, 0, "a"},
                      {Event::change, 0, "b"},
                      {Event::change, 0, "c"},
                      {Event::commit, 0x30}};
  ASSERT_EQ(f.read(b).value(), ReadStatus::idle);
  EXPECT_EQ(f.values(b), std::vector<std::string>{"c"});
  EXPECT_EQ(b.position(), "cdc 0/30");
  EXPECT_EQ(f.driver->stream_starts, 2);
}

TEST(LogSourceReconnect, ADownServerMakesReadIdleNotAnErrorAndRetriesWithBackoff) {
  Fixture f;
  f.driver->down = true;
  ASSERT_TRUE(f.source->open(f.ctx, std::string("cdc 0/10")).ok());
  for (int i = 0; i < 3; ++i) {
    Batch b;
    auto r = f.read(b);
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_EQ(r.value(), ReadStatus::idle);
  }
  // The first attempt is immediate; the next ones wait for the backoff (>= 100 ms), and reads in
  // between return after at most the poll interval without trying.
  EXPECT_EQ(f.driver->stream_starts, 1);
  f.driver->down = false;
  f.driver->events = {{Event::begin, 0x20}, {Event::change, 0, "a"}, {Event::commit, 0x30}};
  std::vector<std::string> got;
  for (int i = 0; i < 100 && got.empty(); ++i) {
    Batch b;
    ASSERT_TRUE(f.read(b).ok());
    got = f.values(b);
  }
  EXPECT_EQ(got, std::vector<std::string>{"a"});
  EXPECT_EQ(f.driver->stream_starts, 2);
}

TEST(LogSourceReconnect, StopIsNotHeldUpByTheBackoff) {
  Fixture f;
  f.driver->down = true;
  ASSERT_TRUE(f.source->open(f.ctx, std::string("cdc 0/10")).ok());
  Batch b;
  ASSERT_TRUE(f.read(b).ok());  // first attempt fails: the next is due in 100-200 ms
  std::stop_source stop;
  ReadRequest req;
  req.poll = std::chrono::seconds(30);
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    stop.request_stop();
  });
  const auto started = std::chrono::steady_clock::now();
  auto r = f.source->read(b, req, stop.get_token());
  stopper.join();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(), ReadStatus::idle);
  // Bounded by the backoff's first delay (at most 200 ms), never by the 30 s poll.
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
}

TEST(LogSourceReconnect, ADefiniteErrorFailsTheRead) {
  Fixture f;
  f.driver->refuse = true;
  ASSERT_TRUE(f.source->open(f.ctx, std::string("cdc 0/10")).ok());
  Batch b;
  auto r = f.read(b);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Errc::not_found);
}

TEST(LogSourceReconnect, StartingTheStreamOnOpenFailsOpen) {
  Fixture f;
  f.driver->stream_on_open = true;
  f.driver->refuse = true;
  EXPECT_FALSE(f.source->open(f.ctx, std::string("cdc 0/10")).ok());
}

// The connection probe through a real registry: what /metrics renders.
struct ProbeFixture : Fixture {
  MetricsRegistry registry;
  ProbeFixture() { ctx.metrics = &registry; }
  ~ProbeFixture() { source.reset(); }  // the registry outlives the source, as in the engine
  double get(std::string_view name, MetricLabels extra = {}) {
    MetricLabels match{{"pipeline", "p"}, {"connector", "fake"}};
    for (auto& l : extra) match.push_back(l);
    auto v = registry.values(name, match);
    EXPECT_EQ(v.size(), 1u) << name;
    return v.empty() ? -100.0 : metric_as_double(v.front().second);
  }
};

TEST(LogSourceProbe, ReportsConnectedThenDownThenTheReconnectAndIsIdleWhileDown) {
  ProbeFixture f;
  f.driver->snapshot_rows = 1;
  ASSERT_TRUE(f.source->open(f.ctx, std::nullopt).ok());
  EXPECT_EQ(f.get("sluice_source_connected"), 1);
  EXPECT_EQ(f.get("sluice_source_reconnects_total"), 0);
  EXPECT_EQ(f.get("sluice_source_down_seconds"), 0);
  EXPECT_EQ(f.get("sluice_source_phase", {{"phase", "snapshot"}}), 1);
  EXPECT_EQ(f.get("sluice_source_phase", {{"phase", "stream"}}), 0);
  Batch b;
  ASSERT_EQ(f.read(b).value(), ReadStatus::more);  // the row
  b.clear();
  ASSERT_EQ(f.read(b).value(), ReadStatus::more);  // the hand-over
  EXPECT_EQ(f.get("sluice_source_phase", {{"phase", "snapshot"}}), 0);
  EXPECT_EQ(f.get("sluice_source_phase", {{"phase", "stream"}}), 1);

  // The stream starts (not a reconnect), then breaks; the server stays down for a while.
  b.clear();
  f.driver->events = {{Event::begin, 0x20},
                      {Event::change, 0, "a"},
                      {Event::commit, 0x30},
                      {Event::lose_connection}};
  ASSERT_EQ(f.read(b).value(), ReadStatus::more);
  EXPECT_EQ(f.get("sluice_source_connected"), 0);
  EXPECT_EQ(f.get("sluice_source_reconnects_total"), 0);
  f.driver->down = true;
  const auto down_at = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - down_at < std::chrono::milliseconds(300)) {
    Batch c;
    auto r = f.read(c);
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_EQ(r.value(), ReadStatus::idle);
    EXPECT_EQ(f.get("sluice_source_connected"), 0);
  }
  EXPECT_GE(f.driver->stream_starts, 2);  // it did try while down
  EXPECT_EQ(f.get("sluice_source_reconnects_total"), 0);
  EXPECT_GE(f.get("sluice_source_down_seconds"), 0.25);

  // The server is back: the next due attempt reconnects, counted once.
  f.driver->down = false;
  for (int i = 0; i < 200 && f.get("sluice_source_connected") == 0; ++i) {
    Batch c;
    ASSERT_TRUE(f.read(c).ok());
  }
  EXPECT_EQ(f.get("sluice_source_connected"), 1);
  EXPECT_EQ(f.get("sluice_source_reconnects_total"), 1);
  EXPECT_EQ(f.get("sluice_source_down_seconds"), 0);
  Batch c;
  ASSERT_TRUE(f.read(c).ok());  // streaming on: no further reconnect
  EXPECT_EQ(f.get("sluice_source_reconnects_total"), 1);

  // close() unregisters every series.
  f.source->close();
  EXPECT_TRUE(f.registry.values("sluice_source_connected").empty());
  EXPECT_TRUE(f.registry.values("sluice_source_phase").empty());
}

TEST(LogSourceProbe, AStreamTimedOutByTheDriverIsCountedAndReconnectedFromWhatWasReturned) {
  ProbeFixture f;
  ASSERT_TRUE(f.source->open(f.ctx, std::string("cdc 0/10")).ok());
  EXPECT_EQ(f.get("sluice_source_connection_timeouts_total"), 0);
  f.driver->events = {
      {Event::begin, 0x20}, {Event::change, 0, "a"}, {Event::change, 0, "b"}, {Event::time_out}};
  Batch b;
  ASSERT_EQ(f.read(b).value(), ReadStatus::more);
  EXPECT_EQ(f.values(b), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(b.position(), "cdc 0/10 0/20 2");  // restart inside the transaction
  EXPECT_EQ(f.driver->stream_stops, 1);
  EXPECT_EQ(f.get("sluice_source_connection_timeouts_total"), 1);
  EXPECT_EQ(f.get("sluice_source_connected"), 0);
  // The transaction comes again from its start: its first two changes are skipped.
  f.driver->events = {{Event::begin, 0x20},
                      {Event::change, 0, "a"},
                      {Event::change, 0, "b"},
                      {Event::change, 0, "c"},
                      {Event::commit, 0x30}};
  Batch c;
  ASSERT_EQ(f.read(c).value(), ReadStatus::idle);
  EXPECT_EQ(f.values(c), std::vector<std::string>{"c"});
  EXPECT_EQ(f.get("sluice_source_connected"), 1);
  EXPECT_EQ(f.get("sluice_source_reconnects_total"), 1);
  EXPECT_EQ(f.get("sluice_source_connection_timeouts_total"), 1);
}

// A snapshot connection given up as dead: counted, reconnected with backoff through
// resume_snapshot (idle while the server is down), and the snapshot goes on from the rows the
// returned batches hold.
TEST(LogSourceProbe, ASnapshotTimedOutByTheDriverIsCountedResumedAndGoesOnAtItsCursor) {
  ProbeFixture f;
  f.driver->snapshot_rows = 5;
  f.driver->snapshot_silent_after = 3;
  f.driver->backoff = BackoffPolicy{std::chrono::milliseconds(1), std::chrono::milliseconds(1)};
  ASSERT_TRUE(f.source->open(f.ctx, std::nullopt).ok());
  Batch a;
  ASSERT_EQ(f.read(a).value(), ReadStatus::more);
  EXPECT_EQ(a.position(), "snapshot 0/10 0 2");
  Batch b;
  ASSERT_EQ(f.read(b).value(), ReadStatus::more);  // one row, then silence
  EXPECT_EQ(b.size(), 1u);
  EXPECT_EQ(b.position(), "snapshot 0/10 0 3");
  EXPECT_EQ(f.get("sluice_source_connection_timeouts_total"), 1);
  EXPECT_EQ(f.get("sluice_source_connected"), 0);
  f.driver->down = true;
  Batch c;
  ASSERT_EQ(f.read(c).value(), ReadStatus::idle);  // the reconnect fails: retried later
  EXPECT_FALSE(c.has_position());
  EXPECT_EQ(f.driver->snapshot_resumes, 1);
  f.driver->down = false;
  Batch d;
  for (int i = 0; i < 100 && d.empty(); ++i) ASSERT_TRUE(f.read(d).ok());
  EXPECT_EQ(f.driver->snapshot_resumes, 2);
  EXPECT_EQ(d.size(), 2u);
  EXPECT_EQ(d.position(), "snapshot 0/10 0 5");
  EXPECT_EQ(f.get("sluice_source_connected"), 1);
  EXPECT_EQ(f.get("sluice_source_reconnects_total"), 1);
  EXPECT_EQ(f.get("sluice_source_connection_timeouts_total"), 1);
}

TEST(LogSourceReconnect, TheDriversBackoffPolicySpacesTheAttempts) {
  Fixture f;
  f.driver->backoff =
      BackoffPolicy{std::chrono::milliseconds(60000), std::chrono::milliseconds(60000)};
  f.driver->down = true;
  ASSERT_TRUE(f.source->open(f.ctx, std::string("cdc 0/10")).ok());
  // The first attempt is immediate and fails; the next is due 30-60 s later, not within the
  // default schedule's 200 ms.
  for (int i = 0; i < 20; ++i) {
    Batch b;
    ASSERT_EQ(f.read(b).value(), ReadStatus::idle);
  }
  EXPECT_EQ(f.driver->stream_starts, 1);
}

TEST(LogSourceProbe, AServerDownAtTheFirstStreamStartIsDownUntilItComes) {
  ProbeFixture f;
  f.driver->down = true;
  ASSERT_TRUE(f.source->open(f.ctx, std::string("cdc 0/10")).ok());
  Batch b;
  ASSERT_EQ(f.read(b).value(), ReadStatus::idle);
  EXPECT_EQ(f.get("sluice_source_connected"), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_GE(f.get("sluice_source_down_seconds"), 0.015);
  EXPECT_EQ(f.get("sluice_source_phase", {{"phase", "stream"}}), 1);
}

TEST(LogSourceProbe, NothingIsRegisteredWithoutARegistry) {
  Fixture f;  // ctx.metrics is null (tests, `sluice cleanup`)
  f.driver->down = true;
  ASSERT_TRUE(f.source->open(f.ctx, std::string("cdc 0/10")).ok());
  Batch b;
  EXPECT_EQ(f.read(b).value(), ReadStatus::idle);
}

TEST(LogSourceAck, StreamPositionsReachTheDriverOthersDoNot) {
  Fixture f;
  ASSERT_TRUE(f.source->open(f.ctx, std::string("cdc 0/10")).ok());
  f.source->ack("snapshot 0/10 0 4");
  f.source->ack("garbage");
  f.source->ack("cdc 0/40 0/38 2");
  EXPECT_EQ(f.driver->acked, std::vector<uint64_t>{0x40});
}

TEST(BatchCaches, RetainsEachDescriptionOncePerBatchAndResetsTheTransactionMetadata) {
  BatchCaches caches;
  Batch b;
  auto desc = std::make_shared<const std::string>("table");
  caches.retain(b, desc);
  caches.retain(b, desc);
  EXPECT_EQ(desc.use_count(), 2);  // ours and the batch's one
  EXPECT_EQ(caches.tx_metadata(), nullptr);
  caches.set_tx_metadata({"a", "b", "c", "d"});
  ASSERT_NE(caches.tx_metadata(), nullptr);
  EXPECT_EQ((*caches.tx_metadata())[2], "c");
  caches.reset();
  EXPECT_EQ(caches.tx_metadata(), nullptr);
  caches.retain(b, desc);  // a new batch retains again
  EXPECT_EQ(desc.use_count(), 3);
}

}  // namespace
}  // namespace sluice
