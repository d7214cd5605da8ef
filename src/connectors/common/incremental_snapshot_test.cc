// The DBLog window logic of incremental snapshots, without a server: which chunk rows survive the
// changes streamed between the watermarks, what the cursor says afterwards, and the signal format.
#include "connectors/common/incremental_snapshot.h"

#include <gtest/gtest.h>

#include "sluice/record.h"

namespace sluice {
namespace {

ChunkRow row(std::string k, std::string v) {
  ChunkRow r;
  r.key = {k};
  r.row = {k, v};
  return r;
}
std::string id_of(std::string_view k) { return key_identity({k}); }

TEST(IncrementalSnapshot, ChangesBetweenTheWatermarksDropTheirKeysFromTheChunk) {
  IncrementalState st;
  IncrementalSnapshot e;
  EXPECT_EQ(e.add_tables(st, {"public.a", "public.b", "public.a"}), 2u);
  ASSERT_TRUE(e.chunk_due(st));
  const std::string w = e.begin_chunk();
  EXPECT_FALSE(e.chunk_due(st));                            // one window at a time
  EXPECT_FALSE(e.change_seen(st, "public.a", id_of("1")));  // nothing read yet
  e.chunk_read({row("1", "x"), row("2", "y"), row("3", "z"), row("4", "w")}, /*exhausted=*/false);
  // Delivered before LOW but after the read: its commit may precede LOW in the log and still
  // have been invisible to the chunk's query, so the stream's version wins.
  EXPECT_TRUE(e.change_seen(st, "public.a", id_of("4")));
  e.low_seen("other-run-1");  // an earlier run's watermark: ignored
  EXPECT_EQ(e.window(), IncrementalSnapshot::Window::awaiting_low);
  e.low_seen(w);
  EXPECT_FALSE(e.change_seen(st, "public.b", id_of("2")));  // another table
  EXPECT_TRUE(e.change_seen(st, "public.a", id_of("2")));   // newer than the chunk's copy
  EXPECT_FALSE(e.change_seen(st, "public.a", id_of("2")));  // already dropped
  EXPECT_FALSE(e.change_seen(st, "public.a", id_of("9")));  // not in the chunk
  EXPECT_FALSE(e.emit_ready());
  e.high_seen(w);
  ASSERT_TRUE(e.emit_ready());
  EXPECT_TRUE(e.kept(0));
  EXPECT_FALSE(e.kept(1));
  EXPECT_TRUE(e.kept(2));
  EXPECT_FALSE(e.kept(3));
  EXPECT_TRUE(e.table_started(st));  // the first chunk: a snapshot_begin marker goes first
  EXPECT_FALSE(e.finish(st));
  // The cursor is past the chunk's last key; the table stays current.
  EXPECT_EQ(st.cursor.kind, KeysetCursor::Kind::after_key);
  EXPECT_EQ(st.cursor.key, std::vector<std::string>{"4"});  // past dropped rows too
  EXPECT_EQ(st.tables.front(), "public.a");
  EXPECT_FALSE(e.table_started(st));
  EXPECT_EQ(e.rows_emitted(), 2u);
  // After HIGH, changes no longer touch the (emitted) chunk.
  EXPECT_FALSE(e.change_seen(st, "public.a", id_of("3")));
  EXPECT_FALSE(e.tracking());
}

TEST(IncrementalSnapshot, TheLastChunkPopsTheTableAndResetsTheCursor) {
  IncrementalState st;
  IncrementalSnapshot e;
  e.add_tables(st, {"public.a", "public.b"});
  std::string w = e.begin_chunk();
  e.chunk_read({row("1", "x")}, /*exhausted=*/true);
  e.low_seen(w);
  e.truncate_seen(st, "public.a");  // everything read is stale
  e.high_seen(w);
  ASSERT_TRUE(e.emit_ready());
  EXPECT_FALSE(e.kept(0));
  EXPECT_TRUE(e.last_chunk());
  EXPECT_EQ(e.finish(st), std::optional<std::string>("public.a"));
  EXPECT_EQ(st.tables, std::vector<std::string>{"public.b"});
  EXPECT_EQ(st.cursor.kind, KeysetCursor::Kind::start);
  // An empty chunk ends the table too.
  w = e.begin_chunk();
  e.chunk_read({}, /*exhausted=*/false);
  e.low_seen(w);
  e.high_seen(w);
  EXPECT_EQ(e.finish(st), std::optional<std::string>("public.b"));
  EXPECT_TRUE(st.empty());
  EXPECT_FALSE(e.chunk_due(st));
}

TEST(IncrementalSnapshot, AChunkMatchedOnDecodedKeysResumesAfterTheServersText) {
  // mysql matches streamed changes on the decoded key values and pages on the server's text.
  IncrementalState st;
  IncrementalSnapshot e;
  e.add_tables(st, {"shop.t"});
  const std::string w = e.begin_chunk();
  ChunkRow a{{"d19723"}, {"2024-01-01"}, {"2024-01-01"}};
  ChunkRow b{{"d19724"}, {"2024-01-02"}, {"2024-01-02"}};
  e.chunk_read({a, b}, /*exhausted=*/false);
  e.low_seen(w);
  EXPECT_TRUE(e.change_seen(st, "shop.t", key_identity({"d19724"})));
  e.high_seen(w);
  ASSERT_TRUE(e.emit_ready());
  EXPECT_FALSE(e.finish(st));
  EXPECT_EQ(st.cursor.key, std::vector<std::string>{"2024-01-02"});
}

TEST(IncrementalSnapshot, CompositeKeysMatchOnEveryColumnAndNeverCollide) {
  EXPECT_NE(key_identity({"a:b", "c"}), key_identity({"a", "b:c"}));
  EXPECT_NE(key_identity({"1", "23"}), key_identity({"12", "3"}));
  IncrementalState st;
  IncrementalSnapshot e;
  e.add_tables(st, {"s.t"});
  const std::string w = e.begin_chunk();
  e.chunk_read(
      {ChunkRow{{"x", "1"}, {"x", "1", "v"}, {}}, ChunkRow{{"x", "2"}, {"x", "2", "v"}, {}}},
      false);
  e.low_seen(w);
  EXPECT_FALSE(e.change_seen(st, "s.t", key_identity({"x"})));
  EXPECT_TRUE(e.change_seen(st, "s.t", key_identity({"x", "2"})));
  e.high_seen(w);
  EXPECT_TRUE(e.kept(0));
  EXPECT_FALSE(e.kept(1));
  e.finish(st);
  EXPECT_EQ(st.cursor.key, (std::vector<std::string>{"x", "2"}));
}

TEST(SnapshotSignal, DebeziumShapeParsesAndBadDataIsAnErrorNamingTheShape) {
  auto ok = parse_snapshot_signal(
      "execute-snapshot",
      R"({"data-collections": ["public.a", "sales.\"Order Items\""], "type": "INCREMENTAL", "x": [1, {"y": null}]})");
  ASSERT_TRUE(ok.ok()) << ok.error().message();
  ASSERT_TRUE(ok.value());
  EXPECT_EQ(*ok.value(), (std::vector<std::string>{"public.a", "sales.\"Order Items\""}));
  auto other = parse_snapshot_signal("log", "whatever");
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other.value());
  for (const char* bad : {"", "[]", R"({"data-collections": []})", R"({"data-collections": [1]})",
                          R"({"data-collections": ["a.b"], "type": "blocking"})",
                          R"({"data-collections": ["a.b"]} x)", R"({"data-collections": "a.b"})"}) {
    auto r = parse_snapshot_signal("execute-snapshot", bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message().find("data-collections"), std::string::npos) << bad;
  }
  // What the CLI writes parses back.
  const std::vector<std::string> tables = {"public.a", "x.\"q\\\"\""};
  auto back = parse_snapshot_signal("execute-snapshot", snapshot_signal_data(tables));
  ASSERT_TRUE(back.ok() && back.value());
  EXPECT_EQ(*back.value(), tables);
}

TEST(SnapshotMarker, CarriesTheTableAndWhatItMeans) {
  Batch b;
  add_snapshot_marker(b, "public", "t", true);
  add_snapshot_marker(b, "public", "t", false);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b.records()[0].op, Operation::marker);
  EXPECT_EQ(b.records()[0].metadata.find(meta::kMarker)->as_text(), meta::kSnapshotBegin);
  EXPECT_EQ(b.records()[1].metadata.find(meta::kMarker)->as_text(), meta::kSnapshotEnd);
  EXPECT_EQ(b.records()[1].metadata.find(meta::kTable)->as_text(), "t");
  EXPECT_EQ(b.records()[1].metadata.find(meta::kSchema)->as_text(), "public");
}

}  // namespace
}  // namespace sluice
