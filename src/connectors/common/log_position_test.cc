#include "connectors/common/log_position.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "connectors/mysql/mysql_source_driver.h"
#include "connectors/postgres/postgres_source_driver.h"

namespace sluice {
namespace {

using PgPosition = pg::SourcePosition;
using MyPosition = mysql::SourcePosition;

// Positions as the postgres and mysql sources wrote them before the codec existed (their
// fmt::format encoders), stored in checkpoint stores and destinations today: each must decode and
// encode back to the very same bytes.
TEST(LogPositionLegacy, PostgresPositionsDecodeAndEncodeByteIdentical) {
  const std::vector<std::string> stored = {"snapshot 0/16B3748 0 0",
                                           "snapshot 1/A0 3 8192",
                                           "cdc 0/16B3748",
                                           "cdc FFFFFFFF/FFFFFFFF",
                                           "cdc 0/1A2B3C 0/1A2000 17",
                                           "done 0/0",
                                           "done 2/3"};
  for (const std::string& s : stored) {
    auto p = PgPosition::decode(s);
    ASSERT_TRUE(p) << s;
    EXPECT_EQ(p->encode(), s);
  }
  auto p = PgPosition::decode("cdc 0/1A2B3C 0/1A2000 17");
  EXPECT_EQ(p->phase, LogPhase::stream);
  EXPECT_EQ(p->point.value, 0x1A2B3Cu);
  EXPECT_EQ(p->tx.value, 0x1A2000u);
  EXPECT_EQ(p->tx_n, 17u);
  auto s = PgPosition::decode("snapshot 1/A0 3 8192");
  EXPECT_EQ(s->phase, LogPhase::snapshot);
  EXPECT_EQ(s->point.value, (uint64_t(1) << 32) | 0xA0);
  EXPECT_EQ(s->table_index, 3u);
  EXPECT_EQ(s->cursor.page, 8192u);
  // Lower-case hex (as PostgreSQL accepts it) decodes; it encodes in PostgreSQL's upper case.
  EXPECT_EQ(PgPosition::decode("cdc 0/1a")->encode(), "cdc 0/1A");
}

TEST(LogPositionLegacy, MysqlPositionsDecodeAndEncodeByteIdentical) {
  const std::vector<std::string> stored = {
      "snapshot mysql-bin.000003 1234 0-1-42 1 k0a0b,6869",
      "snapshot - 0 - 0 -",  // initial_only: no binlog
      "snapshot binlog.000001 4 - 2 o300",
      "snapshot binlog.000001 4 - 0 k",  // one key column whose last value was ''
      "cdc mysql-bin.000002 500 0-1-7,1-2-9",
      "cdc mysql-bin.000002 500 0-1-7,1-2-9 mysql-bin.000002 420 3",
      "cdc binlog.000009 157 -",
      "done binlog.000001 4 -",
      "done - 0 -"};
  for (const std::string& s : stored) {
    auto p = MyPosition::decode(s);
    ASSERT_TRUE(p) << s;
    EXPECT_EQ(p->encode(), s);
  }
  auto snap = MyPosition::decode("snapshot mysql-bin.000003 1234 0-1-42 1 k0a0b,6869");
  EXPECT_EQ(snap->point.coord.file, "mysql-bin.000003");
  EXPECT_EQ(snap->point.coord.pos, 1234u);
  ASSERT_EQ(snap->point.gtid.items().size(), 1u);
  EXPECT_EQ(snap->point.gtid.items()[0], (MariaGtidPoint{0, 1, 42}));
  EXPECT_EQ(snap->cursor.kind, KeysetCursor::Kind::after_key);
  EXPECT_EQ(snap->cursor.key, (std::vector<std::string>{"\x0a\x0b", "hi"}));
  auto cdc = MyPosition::decode("cdc mysql-bin.000002 500 0-1-7,1-2-9 mysql-bin.000002 420 3");
  EXPECT_EQ(cdc->tx, (BinlogCoord{"mysql-bin.000002", 420}));
  EXPECT_EQ(cdc->tx_n, 3u);
  EXPECT_EQ(MyPosition::decode("snapshot binlog.000001 4 - 2 o300")->cursor.offset, 300u);
}

TEST(LogPositionLegacy, MalformedPositionsAreRefused) {
  for (const char* s :
       {"", "cdc", "cdc zz", "cdc 0/1 0/2", "cdc 0/1 ", "cdc  0/1", "snapshot 0/1 1",
        "snapshot 0/1 x 0", "bogus 0/1", "done", "done 0/1 4", "cdc 0/1 0/2 -3", "CDC 0/1"})
    EXPECT_FALSE(PgPosition::decode(s)) << s;
  for (const char* s :
       {"cdc f x -", "cdc f 4", "cdc  4 -", "cdc f 4 0-1", "cdc f 4 0-1-2,", "cdc f 4 - g 5",
        "snapshot f 4 - 1 kzz", "snapshot f 4 - 1 k0", "snapshot f 4 - 1 ox", "snapshot f 4 - 1 q",
        "snapshot f 4 - 1", "done f 4 - x"})
    EXPECT_FALSE(MyPosition::decode(s)) << s;
}

TEST(LogPositionVersion, VersionOneMayBeExplicitAndLaterVersionsAreRefused) {
  auto explicit_v1 = PgPosition::decode("v1 cdc 0/5 0/4 2");
  ASSERT_TRUE(explicit_v1);
  EXPECT_EQ(explicit_v1->encode(), "cdc 0/5 0/4 2");  // version 1 is written without its tag
  EXPECT_FALSE(PgPosition::decode("v4 cdc 0/5"));
  EXPECT_FALSE(PgPosition::decode("v1"));
  EXPECT_FALSE(PgPosition::decode("vx cdc 0/5"));
}

TEST(LogPositionRoundTrip, KeysetCursorCarriesAnyBytes) {
  MyPosition p;
  p.phase = LogPhase::snapshot;
  p.point.coord = {"mysql-bin.000001", 4};
  p.point.gtid = *GtidSet::parse("0-1-9");
  p.table_index = 7;
  p.cursor.kind = KeysetCursor::Kind::after_key;
  p.cursor.key = {std::string("a b,c\0d", 7), "", std::string("\xff\x00\x7f", 3)};
  auto back = MyPosition::decode(p.encode());
  ASSERT_TRUE(back) << p.encode();
  EXPECT_EQ(*back, p) << p.encode();
}

// A snapshot position carries the fingerprint of its table list after the cursor ("t<hex>"); one
// without (written before it existed) decodes with 0, and a malformed one is refused.
TEST(LogPositionRoundTrip, SnapshotTablesFingerprint) {
  const uint64_t f = tables_fingerprint({{"public", "a"}, {"public", "b"}});
  EXPECT_NE(f, 0u);
  EXPECT_NE(f, tables_fingerprint({{"public", "b"}, {"public", "a"}}));
  EXPECT_NE(f, tables_fingerprint({{"public", "a"}, {"public", "b"}, {"public", "c"}}));
  EXPECT_NE(tables_fingerprint({{"ab", "c"}}), tables_fingerprint({{"a", "bc"}}));
  MyPosition m;
  m.phase = LogPhase::snapshot;
  m.point.coord = {"mysql-bin.000001", 4};
  m.table_index = 1;
  m.cursor.kind = KeysetCursor::Kind::after_key;
  m.cursor.key = {"42"};
  m.tables_fingerprint = f;
  auto back = MyPosition::decode(m.encode());
  ASSERT_TRUE(back) << m.encode();
  EXPECT_EQ(*back, m) << m.encode();
  PgPosition p;
  p.phase = LogPhase::snapshot;
  p.point = Lsn{0x10};
  p.table_index = 2;
  p.cursor.page = 9;
  EXPECT_EQ(p.encode(), "snapshot 0/10 2 9");
  p.tables_fingerprint = 0xabcULL;
  EXPECT_EQ(p.encode(), "snapshot 0/10 2 9 tabc");
  EXPECT_EQ(*PgPosition::decode("snapshot 0/10 2 9 tabc"), p);
  EXPECT_EQ(PgPosition::decode("snapshot 0/10 2 9")->tables_fingerprint, 0u);
  for (const char* bad : {"snapshot 0/10 2 9 t", "snapshot 0/10 2 9 tzz", "snapshot 0/10 2 9 t0",
                          "snapshot 0/10 2 9 tabc x"})
    EXPECT_FALSE(PgPosition::decode(bad)) << bad;
}

// Version 3: a snapshot position names the MVCC snapshot it began under ("s<text>", last, after
// "v3"); positions without one decode as before, and the token is refused in older versions.
TEST(LogPositionRoundTrip, SnapshotMvccSnapshot) {
  PgPosition p;
  p.phase = LogPhase::snapshot;
  p.point = Lsn{0x10};
  p.table_index = 1;
  p.cursor.page = 7;
  p.tables_fingerprint = 0xabcULL;
  p.mvcc = "100:105:100,103";
  EXPECT_EQ(p.encode(), "v3 snapshot 0/10 1 7 tabc s100:105:100,103");
  EXPECT_EQ(*PgPosition::decode(p.encode()), p);
  p.tables_fingerprint = 0;
  p.mvcc = "7:7:";
  EXPECT_EQ(p.encode(), "v3 snapshot 0/10 1 7 s7:7:");
  EXPECT_EQ(*PgPosition::decode(p.encode()), p);
  EXPECT_EQ(PgPosition::decode("snapshot 0/10 1 7 tabc")->mvcc, "");
  for (const char* bad : {"snapshot 0/10 1 7 s1:2:", "v2 snapshot 0/10 1 7 s1:2:",
                          "v3 snapshot 0/10 1 7 s", "v3 snapshot 0/10 1 7 s1 2",
                          "v3 snapshot 0/10 1 7 s1:x:", "v3 snapshot 0/10 1 7 s1:2: tabc"})
    EXPECT_FALSE(PgPosition::decode(bad)) << bad;
}

// A snapshot begun under another table list starts again from the first table; one not begun
// yet, or one without a fingerprint (older positions), keeps its place.
TEST(LogPositionRoundTrip, ASnapshotBegunUnderAnotherTableListRestarts) {
  const std::vector<std::pair<std::string, std::string>> ab = {{"public", "a"}, {"public", "b"}},
                                                         b = {{"public", "b"}};
  MyPosition m;
  m.phase = LogPhase::snapshot;
  m.table_index = 1;
  m.cursor.kind = KeysetCursor::Kind::after_key;
  m.cursor.key = {"7"};
  EXPECT_FALSE(m.restart_if_tables_changed(ab));  // no fingerprint: resumes as before
  EXPECT_EQ(m.table_index, 1u);
  EXPECT_EQ(m.tables_fingerprint, tables_fingerprint(ab));
  EXPECT_FALSE(m.restart_if_tables_changed(ab));  // the same list
  EXPECT_EQ(m.cursor.key, std::vector<std::string>{"7"});
  EXPECT_TRUE(m.restart_if_tables_changed(b));
  EXPECT_EQ(m.table_index, 0u);
  EXPECT_EQ(m.cursor, KeysetCursor{});
  EXPECT_EQ(m.tables_fingerprint, tables_fingerprint(b));
  EXPECT_FALSE(m.restart_if_tables_changed(ab));  // at the first table's start: nothing to undo
  EXPECT_EQ(m.tables_fingerprint, tables_fingerprint(ab));
  PgPosition p;
  p.phase = LogPhase::snapshot;
  p.cursor.page = 3;
  p.tables_fingerprint = tables_fingerprint(ab);
  EXPECT_TRUE(p.restart_if_tables_changed(b));
  EXPECT_EQ(p.cursor.page, 0u);
}

TEST(LogPositionRoundTrip, EveryPhaseRoundTrips) {
  PgPosition a;
  a.phase = LogPhase::stream;
  a.point = Lsn{0x123456789ull};
  a.tx = Lsn{0x123456000ull};
  a.tx_n = 1;
  EXPECT_EQ(PgPosition::decode(a.encode())->encode(), a.encode());
  a.tx_n = 0;  // no partial transaction: nothing about it is written
  EXPECT_EQ(a.encode(), "cdc 1/23456789");
  a.phase = LogPhase::none;
  EXPECT_EQ(a.encode(), "");
}

// Version 2: a streaming position carries a pending incremental snapshot (tables, cursor); one
// without stays version 1, byte for byte.
TEST(LogPositionVersion, IncrementalSnapshotStateIsVersionTwoAndRoundTrips) {
  PgPosition a;
  a.phase = LogPhase::stream;
  a.point = Lsn{0x50};
  a.incremental.tables = {"public.t", "sales.\"Order Items\""};
  a.incremental.cursor.kind = KeysetCursor::Kind::after_key;
  a.incremental.cursor.key = {"7", "a b"};
  const std::string text = a.encode();
  EXPECT_EQ(text.rfind("v2 cdc 0/50 isnap 2 t", 0), 0u) << text;
  auto back = PgPosition::decode(text);
  ASSERT_TRUE(back) << text;
  EXPECT_EQ(*back, a);
  a.tx = Lsn{0x40};
  a.tx_n = 3;  // inside a transaction too
  back = PgPosition::decode(a.encode());
  ASSERT_TRUE(back) << a.encode();
  EXPECT_EQ(*back, a);
  MyPosition m;
  m.phase = LogPhase::stream;
  m.point.coord = {"bin.000002", 99};
  m.incremental.tables = {"db.t"};
  auto mb = MyPosition::decode(m.encode());
  ASSERT_TRUE(mb) << m.encode();
  EXPECT_EQ(*mb, m);
  a.incremental = {};
  EXPECT_EQ(a.encode(), "cdc 0/50 0/40 3");  // nothing pending: version 1
  // Refused: the state in a version-1 position, an empty table list, a bad table token.
  for (const char* s :
       {"cdc 0/50 isnap 1 t61 -", "v2 cdc 0/50 isnap 0 -", "v2 cdc 0/50 isnap 1 x61 -",
        "v2 cdc 0/50 isnap 1 t6 -", "v2 cdc 0/50 isnap 2 t61 -", "v2 cdc 0/50 isnap",
        "v2 cdc 0/50 junk 1 t61 -"})
    EXPECT_FALSE(PgPosition::decode(s)) << s;
}

// A streaming position names the tables it delivers (ascending ids) last, in any version; one
// without stays as before, byte for byte.
TEST(LogPositionVersion, CapturedTablesEndAStreamingPositionAndRoundTrip) {
  PgPosition a;
  a.phase = LogPhase::stream;
  a.point = Lsn{0x50};
  a.captured = {16384, 16390};
  EXPECT_EQ(a.encode(), "cdc 0/50 cap 16384,16390");
  auto back = PgPosition::decode(a.encode());
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, a);
  a.tx = Lsn{0x40};
  a.tx_n = 3;
  a.incremental.tables = {"public.t"};
  EXPECT_EQ(a.encode().rfind("v2 cdc 0/50 0/40 3 isnap 1 t", 0), 0u) << a.encode();
  back = PgPosition::decode(a.encode());
  ASSERT_TRUE(back) << a.encode();
  EXPECT_EQ(*back, a);
  a.incremental = {};
  a.captured = {7};
  EXPECT_EQ(a.encode(), "cdc 0/50 0/40 3 cap 7");
  back = PgPosition::decode(a.encode());
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, a);
  a.captured.clear();
  EXPECT_EQ(a.encode(), "cdc 0/50 0/40 3");
  EXPECT_TRUE(PgPosition::decode("v2 cdc 0/50 isnap 1 t61 - cap 7"));
  // Refused: an empty list, unsorted or repeated ids, a bad id, a stray token, the list first.
  for (const char* s : {"cdc 0/50 cap", "cdc 0/50 cap 8,7", "cdc 0/50 cap 7,7", "cdc 0/50 cap 7,",
                        "cdc 0/50 cap ,7", "cdc 0/50 cap 7x", "cdc 0/50 cap 7 8", "cdc 0/50 kap 7",
                        "v2 cdc 0/50 cap 7 isnap 1 t61 -", "snapshot 0/50 0 0 cap 7"})
    EXPECT_FALSE(PgPosition::decode(s)) << s;
}

TEST(GtidSet, ApplyReplacesTheDomainInPlaceOrAppends) {
  auto g = GtidSet::parse("0-1-42,1-2-7");
  ASSERT_TRUE(g);
  g->apply({1, 3, 8});
  EXPECT_EQ(g->to_string(), "0-1-42,1-3-8");
  g->apply({5, 1, 1});
  EXPECT_EQ(g->to_string(), "0-1-42,1-3-8,5-1-1");
  GtidSet empty;
  empty.apply({0, 1, 1});
  EXPECT_EQ(empty.to_string(), "0-1-1");
  EXPECT_TRUE(GtidSet::parse("")->empty());
  EXPECT_FALSE(GtidSet::parse("0-1"));
  EXPECT_FALSE(GtidSet::parse("0-1-x"));
  EXPECT_FALSE(GtidSet::parse("-1-2-3"));
}

TEST(Hex, DecodeIsStrict) {
  EXPECT_EQ(hex_encode(std::string("\x00\xab", 2)), "00ab");
  EXPECT_EQ(hex_decode("00AB"), std::string("\x00\xab", 2));
  EXPECT_FALSE(hex_decode("0"));
  EXPECT_FALSE(hex_decode("0g"));
}

}  // namespace
}  // namespace sluice
