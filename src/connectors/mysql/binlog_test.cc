// Decoder tests on raw binlog events captured from the MariaDB 10.11 test server:
//   CREATE TABLE mys_capture.alltypes (33 columns of every type, see kColumns), then
//   INSERT a row of extreme values; INSERT (id) VALUES (2); UPDATE id=1 (vc, dec1); DELETE id=2;
//   SET SESSION binlog_row_image=MINIMAL; UPDATE alltypes SET i=7 WHERE id=1;
// dumped with `mariadb-binlog --read-from-remote-server --raw` (MariaDB writes v1 rows events;
// v2 is built from a v1 event below). The DDL query is the CREATE TABLE.
#include "connectors/mysql/binlog.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>

namespace sluice::mysql::binlog {
namespace {

// Captured from MariaDB 10.11 (binlog_checksum=CRC32) with mariadb-binlog --raw; see the test's
// comment.
constexpr std::string_view kRawFde =
    "2dbc0c6b0f01000000fc000000000100000000040031302e31312e31392d4d6172696144422d302b646562313275312d"
    "6c6f6700000000000000000000000000000000000000000000000013380d000800120004040404120000e400041a0800"
    "0000080808020000000a0a0a0000000000000a0a0a000000000000000000000000000000000000000000000000000000"
    "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000004130400"
    "0d0808080a0a0a01e029afeb";
constexpr std::string_view kRawGtidList =
    "2dbc0c6ba3010000002b0000002b010000000001000000000000000100000042010000000000009ce14898";
constexpr std::string_view kRawGtid =
    "2dbc0c6ba2010000002a0000004704000008004401000000000000000000000c00000000000023f37c41";
constexpr std::string_view kRawTableMap =
    "2dbc0c6b13010000007c000000c5060000000019000000000001000b6d79735f636170747572650008616c6c74797065"
    "7300210301010202090903030808f6f60405fe0ffcfe0ffc0a13131212110dfefe10fc0f1e0a021e0a0408fe14b00402"
    "fe040a00020006000306f701f8010401040a00feffffff01c0a739d4";
constexpr std::string_view kRawWriteAll =
    "2dbc0c6b1701000000ec000000b10700000000190000000000010021ffffffff0100000000fe0100000080ff0080ffff"
    "000080ffffff00000080ffffffff0000000000000080ffffffffffffffff7f439eb1a58c149aa4350dfb38d200bc614e"
    "090000c03fed5b47cae292c4d4026162120068c3a96c6c6f2077c3b6726c6420f09f988009006c6f6e67207465787402"
    "61620200ff0400deadbeef5dd00f4b91057f3747f3f5ec9963ff7efb996442000004ce665b0d4009fbf1ff03050aaa20"
    "0000007b226b223a205b312c20322e352c202278222c206e756c6c2c20747275655d7d04636166e9f4bebb8f";
constexpr std::string_view kRawWriteNulls =
    "2dbc0c6b17010000002e000000df0800000000190000000000010021ffffffff01feffffffff020000009b65637a";
constexpr std::string_view kRawUpdateFull =
    "2dbc0c6b1801000000ad0100009e0b00000000190000000000010021ffffffff01ffffffff0100000000fe0100000080"
    "ff0080ffff000080ffffff00000080ffffffff0000000000000080ffffffffffffffff7f439eb1a58c149aa4350dfb38"
    "d200bc614e090000c03fed5b47cae292c4d4026162120068c3a96c6c6f2077c3b6726c6420f09f988009006c6f6e6720"
    "746578740261620200ff0400deadbeef5dd00f4b91057f3747f3f5ec9963ff7efb996442000004ce665b0d4009fbf1ff"
    "03050aaa200000007b226b223a205b312c20322e352c202278222c206e756c6c2c20747275655d7d04636166e9000000"
    "00fe0100000080ff0080ffff000080ffffff00000080ffffffff0000000000000080ffffffffffffffff80000000018c"
    "149aa4350dfb38d200bc614e090000c03fed5b47cae292c4d402616207006368616e67656409006c6f6e672074657874"
    "0261620200ff0400deadbeef5dd00f4b91057f3747f3f5ec9963ff7efb996442000004ce665b0d4009fbf1ff03050aaa"
    "200000007b226b223a205b312c20322e352c202278222c206e756c6c2c20747275655d7d04636166e95b52e788";
constexpr std::string_view kRawDeleteNulls =
    "2dbc0c6b19010000002e000000c70c00000000190000000000010021ffffffff01feffffffff0200000010231178";
constexpr std::string_view kRawUpdateMinimal =
    "2dbc0c6b180100000034000000f90d0000000019000000000001002101000000008000000000fe01000000fe07000000"
    "5b4aed60";
constexpr std::string_view kRawXid =
    "2dbc0c6b10010000001f000000d007000000006a0000000000000086f62ab0";
constexpr std::string_view kRawDdlQuery =
    "2dbc0c6b0201000000780200001d040000000019000000000000000b0000230000000000010100002054000000000603"
    "737464042d002d00e0008169000000000000006d79735f6361707475726500637265617465207461626c6520616c6c74"
    "7970657320280a20696420696e74207072696d617279206b65792c2074692074696e79696e742c207469752074696e79"
    "696e7420756e7369676e65642c20736920736d616c6c696e742c2073697520736d616c6c696e7420756e7369676e6564"
    "2c206d69206d656469756d696e742c206d6975206d656469756d696e7420756e7369676e65642c0a206920696e742c20"
    "697520696e7420756e7369676e65642c20626920626967696e742c2062697520626967696e7420756e7369676e65642c"
    "0a206465633120646563696d616c2831302c32292c206465633220646563696d616c2833302c3130292c20666c20666c"
    "6f61742c20646220646f75626c652c0a206320636861722835292c207663207661726368617228333030292c20747820"
    "746578742c20626e2062696e6172792834292c2076622076617262696e617279283130292c20626c20626c6f622c0a20"
    "6420646174652c20742074696d652c2074362074696d652836292c206474206461746574696d652c2064743320646174"
    "6574696d652833292c2074732074696d657374616d70283629206e756c6c2c207920796561722c0a206520656e756d28"
    "27726564272c27677265656e272c27626c756527292c20737420736574282761272c2762272c276327292c2062742062"
    "6974283132292c206a206a736f6e2c206c312076617263686172283130292063686172616374657220736574206c6174"
    "696e31290c1b0017";

// The decoded bytes of a capture, kept for the whole test program: parse_event's Event (and what
// is parsed from it) are views into its input, so a temporary string would leave them dangling.
const std::string& raw(std::string_view hex) {
  static std::map<std::string, std::string, std::less<>> decoded;
  auto it = decoded.find(hex);
  if (it == decoded.end()) it = decoded.emplace(std::string(hex), from_hex(hex)).first;
  return it->second;
}

std::vector<ColumnInfo> make_columns() {
  const char* names[] = {"id",   "ti",   "tiu", "si",  "siu", "mi", "miu", "i",  "iu", "bi", "biu",
                         "dec1", "dec2", "fl",  "db",  "c",   "vc", "tx",  "bn", "vb", "bl", "d",
                         "t",    "t6",   "dt",  "dt3", "ts",  "y",  "e",   "st", "bt", "j",  "l1"};
  std::vector<ColumnInfo> cols;
  for (const char* n : names) {
    ColumnInfo c;
    c.name = n;
    const std::string s = n;
    c.is_unsigned = s == "tiu" || s == "siu" || s == "miu" || s == "iu" || s == "biu";
    if (s == "bn" || s == "vb" || s == "bl") c.text = ColumnInfo::Text::binary;
    if (s == "l1") c.text = ColumnInfo::Text::latin1;
    if (s == "e") c.labels = {"red", "green", "blue"};
    if (s == "st") c.labels = {"a", "b", "c"};
    c.json = s == "j";
    cols.push_back(c);
  }
  return cols;
}
// Decoded enum/set values are views into the column descriptions: they must outlive the values
// (the source retains the table schema in the batch), so the tests keep one for the whole run.
const std::vector<ColumnInfo>& columns() {
  static const std::vector<ColumnInfo> kColumns = make_columns();
  return kColumns;
}

struct Decoded {
  FormatDescription fd;
  TableMap map;
};

Decoded setup() {
  Decoded d;
  auto fd = parse_format_description(raw(kRawFde));
  EXPECT_TRUE(fd.ok()) << (fd.ok() ? "" : fd.error().message());
  d.fd = fd.value();
  const std::string ev_bytes = raw(kRawTableMap);  // events are views into these bytes
  auto ev = parse_event(ev_bytes, true);
  EXPECT_TRUE(ev.ok());
  auto m = parse_table_map(ev.value(), d.fd);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message());
  d.map = m.value();
  return d;
}

int64_t ts_micros(int64_t y, unsigned mo, unsigned d, int64_t h, int64_t mi, int64_t s,
                  int64_t us = 0) {
  return int64_t(days_from_civil(y, mo, d)) * 86400000000LL + ((h * 60 + mi) * 60 + s) * 1000000 +
         us;
}

TEST(BinlogTest, Crc32KnownValue) {
  EXPECT_EQ(crc32("123456789", 9), 0xCBF43926u);
  EXPECT_EQ(crc32("", 0), 0u);
}

TEST(BinlogTest, FormatDescription) {
  auto fd = parse_format_description(raw(kRawFde));
  ASSERT_TRUE(fd.ok()) << fd.error().message();
  EXPECT_EQ(fd->binlog_version, 4);
  EXPECT_TRUE(fd->mariadb);
  EXPECT_TRUE(fd->crc32);
  EXPECT_EQ(fd->post_header(kTableMap, 0), 8);
  EXPECT_EQ(fd->post_header(kWriteRowsV1, 0), 8);
  EXPECT_EQ(fd->post_header(kWriteRowsV2, 0), 10);
  EXPECT_NE(fd->server_version.find("10.11"), std::string::npos);
}

TEST(BinlogTest, ChecksumMismatchIsADataError) {
  std::string e = raw(kRawXid);
  auto ok = parse_event(e, true);
  ASSERT_TRUE(ok.ok());
  e[20] ^= 0x01;
  auto bad = parse_event(e, true);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), Errc::data);
  EXPECT_NE(bad.error().message().find("CRC32"), std::string::npos);
  std::string f = raw(kRawFde);
  f[30] ^= 0x01;
  EXPECT_FALSE(parse_format_description(f).ok());
}

// The reader thread checks CRC32s (crc32_matches); the decoder then only strips them.
TEST(BinlogTest, AVerifiedChecksumIsStrippedNotCheckedAgain) {
  std::string e = raw(kRawXid);
  EXPECT_TRUE(crc32_matches(e));
  auto verified = parse_event(e, Checksum::verify);
  ASSERT_TRUE(verified.ok());
  auto stripped = parse_event(e, Checksum::strip);
  ASSERT_TRUE(stripped.ok());
  EXPECT_EQ(stripped->body, verified->body);
  EXPECT_EQ(stripped->body.size(), e.size() - kHeaderSize - 4);
  auto none = parse_event(e, Checksum::none);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->body.size(), e.size() - kHeaderSize);
  e[20] ^= 0x01;
  EXPECT_FALSE(crc32_matches(e));
  EXPECT_FALSE(parse_event(e, Checksum::verify).ok());
  EXPECT_TRUE(parse_event(e, Checksum::strip).ok());  // not checked
  EXPECT_FALSE(crc32_matches(std::string_view(e).substr(0, kHeaderSize + 3)));
}

// The reader's view follows the FORMAT_DESCRIPTION's algorithm, as the decoder does.
TEST(BinlogTest, StreamChecksumsFollowTheFormatDescription) {
  const std::string fde = raw(kRawFde), xid = raw(kRawXid);
  std::string bad = xid;
  bad[20] ^= 0x01;
  StreamChecksums off(false);
  EXPECT_FALSE(off.verified(xid));  // no CRC32 announced yet: nothing verified
  EXPECT_FALSE(off.verified(fde));  // announces CRC32 (checks its own)
  EXPECT_TRUE(off.verified(xid));
  EXPECT_FALSE(off.verified(bad));  // left to the decoder, which reports it
  // A FORMAT_DESCRIPTION announcing no checksum: nothing after it is taken as verified.
  std::string none_fde = fde;
  none_fde[none_fde.size() - 5] = 0;  // algorithm NONE (its own trailing CRC32 is then not read)
  StreamChecksums on(true);
  EXPECT_TRUE(on.verified(xid));
  EXPECT_FALSE(on.verified(none_fde));
  EXPECT_FALSE(on.verified(xid));
}

// A row plan holds the columns the bitmap names among the map's first ones: the number of values
// in each row image.
TEST(BinlogTest, ARowPlanTakesTheBitmapsColumnsOfTheMap) {
  auto plan_of = [](std::string_view bitmap, size_t n) {
    TableMap map;
    map.types.assign(n, kTypeLong);
    map.meta.assign(n, 0);
    map.nullable.assign(n, 1);
    RowPlan plan;
    const std::vector<ColumnInfo> cols;
    auto s = make_row_plan(map, cols, bitmap, plan);
    return std::make_pair(s.ok(), plan);
  };
  auto [ok1, p1] = plan_of("\x0b", 8);  // columns 0, 1, 3
  ASSERT_TRUE(ok1);
  ASSERT_EQ(p1.steps.size(), 3u);
  EXPECT_EQ(p1.steps[0].column, 0u);
  EXPECT_EQ(p1.steps[1].column, 1u);
  EXPECT_EQ(p1.steps[2].column, 3u);
  EXPECT_EQ(p1.absent, (std::vector<uint32_t>{2, 4, 5, 6, 7}));
  auto [ok2, p2] = plan_of("\xff\x01", 9);  // 9 columns, all present
  ASSERT_TRUE(ok2);
  EXPECT_EQ(p2.steps.size(), 9u);
  auto [ok3, p3] = plan_of("\xff\x03", 9);  // bits past the 9th are not columns
  ASSERT_TRUE(ok3);
  EXPECT_EQ(p3.steps.size(), 9u);
  EXPECT_TRUE(p3.absent.empty());
  EXPECT_FALSE(plan_of("\xff", 12).first);  // a bitmap shorter than the map is a data error
  EXPECT_FALSE(plan_of("", 3).first);
}

TEST(BinlogTest, TruncatedEventsAreErrors) {
  std::string e = raw(kRawWriteAll);
  EXPECT_FALSE(parse_event(std::string_view(e).substr(0, 10), true).ok());
  EXPECT_FALSE(
      parse_event(std::string_view(e).substr(0, e.size() - 1), true).ok());  // size mismatch
}

TEST(BinlogTest, GtidAndGtidList) {
  const std::string ev_bytes = raw(kRawGtid);  // events are views into these bytes
  auto ev = parse_event(ev_bytes, true);
  ASSERT_TRUE(ev.ok());
  auto g = parse_maria_gtid(ev.value());
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->domain, 0u);
  EXPECT_EQ(g->server_id, 1u);
  EXPECT_EQ(g->to_string(), "0-1-" + std::to_string(g->seq));
  EXPECT_FALSE(g->standalone);
  const std::string lev_bytes = raw(kRawGtidList);  // events are views into these bytes
  auto lev = parse_event(lev_bytes, true);
  ASSERT_TRUE(lev.ok());
  auto list = parse_maria_gtid_list(lev.value());
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ(list->at(0).domain, 0u);
  EXPECT_GT(list->at(0).seq, 0u);
}

TEST(BinlogTest, DdlQueryAndXid) {
  const std::string ev_bytes = raw(kRawDdlQuery);  // events are views into these bytes
  auto ev = parse_event(ev_bytes, true);
  ASSERT_TRUE(ev.ok());
  auto q = parse_query(ev.value());
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->database, "mys_capture");
  EXPECT_TRUE(q->sql.starts_with("create table alltypes")) << q->sql;
  const std::string x_bytes = raw(kRawXid);  // events are views into these bytes
  auto x = parse_event(x_bytes, true);
  ASSERT_TRUE(x.ok());
  EXPECT_EQ(x->header.type, kXid);
  EXPECT_EQ(x->body.size(), 8u);
}

TEST(BinlogTest, TableMap) {
  Decoded d = setup();
  EXPECT_EQ(d.map.database, "mys_capture");
  EXPECT_EQ(d.map.table, "alltypes");
  ASSERT_EQ(d.map.types.size(), 33u);
  EXPECT_EQ(d.map.types[0], kTypeLong);
  EXPECT_EQ(d.map.types[11], kTypeNewDecimal);
  EXPECT_EQ(d.map.meta[11], (10 << 8) | 2);
  EXPECT_EQ(d.map.types[22], kTypeTime2);
  EXPECT_EQ(d.map.meta[23], 6);
  EXPECT_EQ(d.map.types[31], kTypeBlob);  // MariaDB JSON is LONGTEXT
  EXPECT_FALSE(d.map.nullable[0]);
  EXPECT_TRUE(d.map.nullable[1]);
}

void expect_full_row(const std::vector<Value>& v) {
  EXPECT_EQ(v[0], Value::int64(1));
  EXPECT_EQ(v[1], Value::int64(-128));
  EXPECT_EQ(v[2], Value::uint64(255));
  EXPECT_EQ(v[3], Value::int64(-32768));
  EXPECT_EQ(v[4], Value::uint64(65535));
  EXPECT_EQ(v[5], Value::int64(-8388608));
  EXPECT_EQ(v[6], Value::uint64(16777215));
  EXPECT_EQ(v[7], Value::int64(-2147483648LL));
  EXPECT_EQ(v[8], Value::uint64(4294967295ULL));
  EXPECT_EQ(v[9], Value::int64(std::numeric_limits<int64_t>::min()));
  EXPECT_EQ(v[10], Value::uint64(std::numeric_limits<uint64_t>::max()));
  EXPECT_EQ(v[11].kind(), ValueKind::decimal);
  EXPECT_EQ(v[11].as_text(), "-12345678.90");
  EXPECT_EQ(v[12].as_text(), "12345678901234567890.0123456789");
  EXPECT_EQ(v[13], Value::float64(1.5));
  EXPECT_EQ(v[14], Value::float64(-2.25e100));
  EXPECT_EQ(v[15], Value::string("ab"));
  EXPECT_EQ(v[16], Value::string("h\xc3\xa9llo w\xc3\xb6rld \xf0\x9f\x98\x80"));
  EXPECT_EQ(v[17], Value::string("long text"));
  EXPECT_EQ(v[18], Value::bytes(std::string_view("ab\0\0", 4)));  // BINARY(4) padding restored
  EXPECT_EQ(v[19], Value::bytes(std::string_view("\x00\xff", 2)));
  EXPECT_EQ(v[20], Value::bytes("\xde\xad\xbe\xef"));
  EXPECT_EQ(v[21], Value::date(days_from_civil(2024, 2, 29)));
  EXPECT_EQ(v[22], Value::time(-((838LL * 60 + 59) * 60 + 59) * 1000000));
  EXPECT_EQ(v[23], Value::time(-(((12LL * 60 + 34) * 60 + 56) * 1000000 + 789012)));
  EXPECT_EQ(v[24], Value::timestamp(ts_micros(1999, 12, 31, 23, 59, 59)));
  EXPECT_EQ(v[25], Value::timestamp(ts_micros(2000, 1, 1, 0, 0, 0, 123000)));
  // TIMESTAMP is stored in UTC; the capture ran with the server's time zone UTC.
  EXPECT_EQ(v[26], Value::timestamptz(ts_micros(2024, 6, 1, 12, 0, 0, 654321)));
  EXPECT_EQ(v[27], Value::int64(2155));
  EXPECT_EQ(v[28], Value::string("blue"));
  EXPECT_EQ(v[29], Value::string("a,c"));
  EXPECT_EQ(v[30], Value::uint64(0b101010101010));
  EXPECT_EQ(v[31], Value::json(R"({"k": [1, 2.5, "x", null, true]})"));
  EXPECT_EQ(v[32], Value::string("caf\xc3\xa9"));  // latin1 → UTF-8
}

TEST(BinlogTest, WriteRowsEveryType) {
  Decoded d = setup();
  const std::string ev_bytes = raw(kRawWriteAll);  // events are views into these bytes
  auto ev = parse_event(ev_bytes, true);
  ASSERT_TRUE(ev.ok());
  auto rows = parse_rows(ev.value(), d.fd);
  ASSERT_TRUE(rows.ok()) << rows.error().message();
  EXPECT_EQ(rows->kind, RowsEvent::Kind::write);
  EXPECT_EQ(rows->table_id, d.map.table_id);
  EXPECT_EQ(rows->columns, 33u);
  Arena arena;
  std::vector<Value> v(33);
  auto used = decode_row(d.map, columns(), rows->present, rows->rows, arena, v.data());
  ASSERT_TRUE(used.ok()) << used.error().message();
  EXPECT_EQ(used.value(), rows->rows.size());
  expect_full_row(v);
}

TEST(BinlogTest, NullsDecodeAsNull) {
  Decoded d = setup();
  const std::string ev_bytes = raw(kRawWriteNulls);  // events are views into these bytes
  auto ev = parse_event(ev_bytes, true);
  ASSERT_TRUE(ev.ok());
  auto rows = parse_rows(ev.value(), d.fd);
  ASSERT_TRUE(rows.ok());
  Arena arena;
  std::vector<Value> v(33);
  ASSERT_TRUE(decode_row(d.map, columns(), rows->present, rows->rows, arena, v.data()).ok());
  EXPECT_EQ(v[0], Value::int64(2));
  for (size_t i = 1; i < 33; ++i) EXPECT_TRUE(v[i].is_null()) << i;
}

TEST(BinlogTest, UpdateFullImageHasBeforeAndAfter) {
  Decoded d = setup();
  const std::string ev_bytes = raw(kRawUpdateFull);  // events are views into these bytes
  auto ev = parse_event(ev_bytes, true);
  ASSERT_TRUE(ev.ok());
  auto rows = parse_rows(ev.value(), d.fd);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->kind, RowsEvent::Kind::update);
  Arena arena;
  std::vector<Value> before(33), after(33);
  std::string_view data = rows->rows;
  auto u1 = decode_row(d.map, columns(), rows->present, data, arena, before.data());
  ASSERT_TRUE(u1.ok());
  data.remove_prefix(u1.value());
  auto u2 = decode_row(d.map, columns(), rows->present_after, data, arena, after.data());
  ASSERT_TRUE(u2.ok());
  EXPECT_EQ(u2.value(), data.size());
  expect_full_row(before);
  EXPECT_EQ(after[16], Value::string("changed"));
  EXPECT_EQ(after[11].as_text(), "0.01");
  EXPECT_EQ(after[9], before[9]);
}

TEST(BinlogTest, DeleteRows) {
  Decoded d = setup();
  const std::string ev_bytes = raw(kRawDeleteNulls);  // events are views into these bytes
  auto ev = parse_event(ev_bytes, true);
  ASSERT_TRUE(ev.ok());
  auto rows = parse_rows(ev.value(), d.fd);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->kind, RowsEvent::Kind::remove);
  Arena arena;
  std::vector<Value> v(33);
  ASSERT_TRUE(decode_row(d.map, columns(), rows->present, rows->rows, arena, v.data()).ok());
  EXPECT_EQ(v[0], Value::int64(2));
}

TEST(BinlogTest, MinimalImageLeavesColumnsAbsent) {
  Decoded d = setup();
  const std::string ev_bytes = raw(kRawUpdateMinimal);  // events are views into these bytes
  auto ev = parse_event(ev_bytes, true);
  ASSERT_TRUE(ev.ok());
  auto rows = parse_rows(ev.value(), d.fd);
  ASSERT_TRUE(rows.ok());
  Arena arena;
  std::vector<Value> before(33), after(33);
  std::string_view data = rows->rows;
  auto u1 = decode_row(d.map, columns(), rows->present, data, arena, before.data());
  ASSERT_TRUE(u1.ok());
  data.remove_prefix(u1.value());
  ASSERT_TRUE(decode_row(d.map, columns(), rows->present_after, data, arena, after.data()).ok());
  EXPECT_EQ(before[0], Value::int64(1));  // the primary key identifies the row
  for (size_t i = 1; i < 33; ++i) EXPECT_TRUE(before[i].is_absent()) << i;
  EXPECT_EQ(after[7], Value::int64(7));
  for (size_t i = 0; i < 33; ++i) {
    if (i != 7) {
      EXPECT_TRUE(after[i].is_absent()) << i;
    }
  }
}

// handle_rows makes one RowPlan per image bitmap and reuses it (and the value array) for every row
// of the event and then for the next event: a full image decoded after a MINIMAL one, and a MINIMAL
// one after a full one, give exactly what a fresh array and a plan of its own give.
TEST(BinlogTest, AReusedPlanAndValueArrayDecodeLikeFreshOnes) {
  Decoded d = setup();
  const std::string full_bytes = raw(kRawWriteAll), minimal_bytes = raw(kRawUpdateMinimal);
  auto full_ev = parse_event(full_bytes, true);
  auto minimal_ev = parse_event(minimal_bytes, true);
  ASSERT_TRUE(full_ev.ok() && minimal_ev.ok());
  auto full = parse_rows(full_ev.value(), d.fd);
  auto minimal = parse_rows(minimal_ev.value(), d.fd);
  ASSERT_TRUE(full.ok() && minimal.ok());
  const std::vector<ColumnInfo>& cols = columns();
  Arena arena;
  RowPlan plan;
  std::vector<Value> reused(33);
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(make_row_plan(d.map, cols, full->present, plan).ok());
    EXPECT_EQ(plan.steps.size(), 33u);
    EXPECT_TRUE(plan.absent.empty());
    auto used = decode_row(plan, d.map, full->rows, arena, reused.data());
    ASSERT_TRUE(used.ok()) << used.error().message();
    EXPECT_EQ(used.value(), full->rows.size());
    expect_full_row(reused);

    // The MINIMAL update's before image (the key only), into the array the full row filled.
    ASSERT_TRUE(make_row_plan(d.map, cols, minimal->present, plan).ok());
    EXPECT_EQ(plan.steps.size(), 1u);
    EXPECT_EQ(plan.absent.size(), 32u);
    auto u1 = decode_row(plan, d.map, minimal->rows, arena, reused.data());
    ASSERT_TRUE(u1.ok());
    std::vector<Value> fresh(33);
    ASSERT_TRUE(decode_row(d.map, cols, minimal->present, minimal->rows, arena, fresh.data()).ok());
    EXPECT_EQ(reused[0], Value::int64(1));
    for (size_t i = 0; i < 33; ++i) EXPECT_EQ(reused[i], fresh[i]) << i;
    for (size_t i = 1; i < 33; ++i) EXPECT_TRUE(reused[i].is_absent()) << i;
  }
}

// The plan switches on a dense code of the column type (0-31 and 245-255); a type outside those
// ranges must stay unsupported rather than alias a known one (33 would be JSON's dense code, 32+1).
TEST(BinlogTest, AColumnTypeOutsideTheKnownRangesIsUnsupported) {
  for (const uint8_t type : {uint8_t(33), uint8_t(42), uint8_t(100), uint8_t(244)}) {
    TableMap map;
    map.database = "d";
    map.table = "t";
    map.types = {type};
    map.meta = {0};
    map.nullable = {1};
    const std::string present(1, '\x01'), image("\x00\x01\x02\x03\x04\x05\x06\x07\x08", 9);
    const std::vector<ColumnInfo> cols;
    Arena arena;
    Value v;
    auto r = decode_row(map, cols, present, image, arena, &v);
    ASSERT_FALSE(r.ok()) << int(type);
    EXPECT_EQ(r.error().code(), Errc::unsupported) << int(type);
  }
  EXPECT_EQ(RowPlan::dense(kTypeJson), 32);
  EXPECT_EQ(RowPlan::dense(kTypeGeometry), 42);
  EXPECT_EQ(RowPlan::dense(kTypeTimestamp2), kTypeTimestamp2);
}

// A v2 rows event is a v1 event with an extra-data block after the flags.
TEST(BinlogTest, RowsEventV2) {
  Decoded d = setup();
  std::string v1 = raw(kRawWriteNulls);
  v1.resize(v1.size() - 4);  // drop the CRC
  std::string v2 = v1.substr(0, kHeaderSize + 8) + std::string("\x04\x00\xaa\xbb", 4) +
                   v1.substr(kHeaderSize + 8);
  v2[4] = char(kWriteRowsV2);
  const uint32_t size = uint32_t(v2.size() + 4);
  for (int i = 0; i < 4; ++i) v2[9 + i] = char((size >> (8 * i)) & 0xff);
  const uint32_t crc = crc32(v2.data(), v2.size());
  for (int i = 0; i < 4; ++i) v2 += char((crc >> (8 * i)) & 0xff);
  auto ev = parse_event(v2, true);
  ASSERT_TRUE(ev.ok()) << ev.error().message();
  auto rows = parse_rows(ev.value(), d.fd);
  ASSERT_TRUE(rows.ok()) << rows.error().message();
  EXPECT_EQ(rows->kind, RowsEvent::Kind::write);
  Arena arena;
  std::vector<Value> v(33);
  ASSERT_TRUE(decode_row(d.map, columns(), rows->present, rows->rows, arena, v.data()).ok());
  EXPECT_EQ(v[0], Value::int64(2));
}

TEST(BinlogTest, Rotate) {
  std::string e(kHeaderSize, '\0');
  e[4] = char(kRotate);
  e += std::string("\x04\x00\x00\x00\x00\x00\x00\x00", 8) + "binlog.000042";
  const uint32_t size = uint32_t(e.size());
  for (int i = 0; i < 4; ++i) e[9 + i] = char((size >> (8 * i)) & 0xff);
  auto ev = parse_event(e, false);
  ASSERT_TRUE(ev.ok());
  auto r = parse_rotate(ev.value());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->file, "binlog.000042");
  EXPECT_EQ(r->position, 4u);
}

TEST(BinlogTest, Decimals) {
  // DECIMAL(10,2) 1234567.89 and -0.01; DECIMAL(5,0) 0.
  size_t n = 0;
  const uint8_t pos[] = {0x80, 0x12, 0xd6, 0x87, 0x59};  // intg 8 → 4 bytes for 8 digits? see below
  auto a = decode_decimal(pos, sizeof(pos), 10, 2, &n);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(n, 5u);
  EXPECT_EQ(a.value(), "1234567.89");
  const uint8_t neg[] = {0x7f, 0xff, 0xff, 0xff, 0xfe};
  auto b = decode_decimal(neg, sizeof(neg), 10, 2, &n);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b.value(), "-0.01");
  const uint8_t zero[] = {0x80, 0x00, 0x00};
  auto c = decode_decimal(zero, sizeof(zero), 5, 0, &n);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.value(), "0");
  EXPECT_FALSE(decode_decimal(zero, 2, 5, 0, &n).ok());
}

TEST(BinlogTest, MysqlBinaryJson) {
  auto obj = mysql_json_to_text(from_hex("00 0100 0c00 0b00 0100 05 0100 61"));
  ASSERT_TRUE(obj.ok());
  EXPECT_EQ(obj.value(), R"({"a":1})");
  auto arr = mysql_json_to_text(from_hex("02 0200 0c00 0c 0a00 04 0100 01 78"));
  ASSERT_TRUE(arr.ok());
  EXPECT_EQ(arr.value(), R"(["x",true])");
  auto str = mysql_json_to_text(from_hex("0c 03 61 22 62"));
  ASSERT_TRUE(str.ok());
  EXPECT_EQ(str.value(), R"("a\"b")");
  auto dbl = mysql_json_to_text(from_hex("0b 000000000000f83f"));
  ASSERT_TRUE(dbl.ok());
  EXPECT_EQ(dbl.value(), "1.5");
  EXPECT_FALSE(mysql_json_to_text(from_hex("00 0500 0c00")).ok());  // count beyond size
}

TEST(BinlogTest, MysqlGtid) {
  std::string e(kHeaderSize, '\0');
  e[4] = char(kMysqlGtid);
  e += '\x01';
  e += from_hex("3e11fa47 71ca 11e1 9e33 c80aa9429562");
  e += std::string("\x17\x00\x00\x00\x00\x00\x00\x00", 8);
  e += std::string(17, '\0');
  const uint32_t size = uint32_t(e.size());
  for (int i = 0; i < 4; ++i) e[9 + i] = char((size >> (8 * i)) & 0xff);
  auto ev = parse_event(e, false);
  ASSERT_TRUE(ev.ok());
  auto g = parse_mysql_gtid(ev.value());
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->to_string(), "3e11fa47-71ca-11e1-9e33-c80aa9429562:23");
}

// binlog_row_metadata=FULL: CREATE TABLE m (id INT UNSIGNED PRIMARY KEY, name VARCHAR(10),
// n TINYINT, b BIGINT UNSIGNED); INSERT (1, 'x', -1, 18446744073709551615).
constexpr std::string_view kRawTableMapFull =
    "9bbe0c6b13010000004c0000003f02000000001c01000000000100086d79735f6d65746100016d0004030f01080228"
    "000e0101a00201e0040c026964046e616d65016e016208010069c6db52";
constexpr std::string_view kRawWriteFull =
    "9bbe0c6b1701000000310000007002000000001c01000000000100040ff0010000000178ffffffffffffffffff3bd250db";

TEST(BinlogTest, OptionalMetadataNamesColumnsAndSignedness) {
  auto fd = parse_format_description(raw(kRawFde));
  ASSERT_TRUE(fd.ok());
  const std::string ev_bytes = raw(kRawTableMapFull);  // events are views into these bytes
  auto ev = parse_event(ev_bytes, true);
  ASSERT_TRUE(ev.ok());
  auto m = parse_table_map(ev.value(), fd.value());
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_EQ(m->column_names, (std::vector<std::string>{"id", "name", "n", "b"}));
  EXPECT_EQ(m->is_unsigned, (std::vector<uint8_t>{1, 0, 0, 1}));
  const std::string wev_bytes = raw(kRawWriteFull);  // events are views into these bytes
  auto wev = parse_event(wev_bytes, true);
  ASSERT_TRUE(wev.ok());
  auto rows = parse_rows(wev.value(), fd.value());
  ASSERT_TRUE(rows.ok());
  std::vector<ColumnInfo> cols(4);
  for (size_t i = 0; i < 4; ++i) cols[i].is_unsigned = m->is_unsigned[i];
  Arena arena;
  std::vector<Value> v(4);
  ASSERT_TRUE(decode_row(m.value(), cols, rows->present, rows->rows, arena, v.data()).ok());
  EXPECT_EQ(v[0], Value::uint64(1));
  EXPECT_EQ(v[1], Value::string("x"));
  EXPECT_EQ(v[2], Value::int64(-1));
  EXPECT_EQ(v[3], Value::uint64(18446744073709551615ULL));
  // Without optional metadata the vectors stay empty.
  const std::string plain_bytes = raw(kRawTableMap);
  auto plain = parse_table_map(parse_event(plain_bytes, true).value(), fd.value());
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->column_names.empty());
  EXPECT_TRUE(plain->is_unsigned.empty());
}

TEST(BinlogTest, Lenenc) {
  std::string s = from_hex("fc 3412 ff");
  std::string_view in = s;
  uint64_t v = 0;
  ASSERT_TRUE(read_lenenc(in, &v));
  EXPECT_EQ(v, 0x1234u);
  EXPECT_EQ(in.size(), 1u);
  EXPECT_FALSE(read_lenenc(in, &v));  // 0xff is not a length
}

// Zero dates (a zero month or day; TIMESTAMP 0): with a ZeroDates their text and the first such
// column; without one, null. Never a date (TIMESTAMP 0 is not 1970-01-01: that is 00:00:01).
TEST(BinlogTest, ZeroDatesDecodeAsTheirTextWhenAskedElseNull) {
  TableMap map;
  map.types = {kTypeLong, kTypeDate, kTypeDatetime, kTypeTimestamp, kTypeDate};
  map.meta = {0, 0, 0, 0, 0};
  map.nullable = {1, 1, 1, 1, 1};
  auto le = [](uint64_t v, int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s.push_back(static_cast<char>(v >> (8 * i) & 0xff));
    return s;
  };
  const std::string image = std::string(1, '\0') + le(7, 4) +
                            le((2024u << 9) | (0u << 5) | 15u, 3) + le(20240200103000ULL, 8) +
                            le(0, 4) + le((2024u << 9) | (1u << 5) | 15u, 3);
  const std::string present(1, '\x1f');
  const std::vector<ColumnInfo> columns;
  Arena arena;
  std::vector<Value> v(5);
  ZeroDates zero;
  ASSERT_TRUE(decode_row(map, columns, present, image, arena, v.data(), &zero).ok());
  EXPECT_EQ(zero.first, 1u);
  EXPECT_EQ(v[1], Value::string("2024-00-15"));
  EXPECT_EQ(v[2], Value::string("2024-02-00 10:30:00"));
  EXPECT_EQ(v[3], Value::string("0000-00-00 00:00:00"));
  EXPECT_EQ(v[4], Value::date(days_from_civil(2024, 1, 15)));
  ASSERT_TRUE(decode_row(map, columns, present, image, arena, v.data()).ok());
  EXPECT_TRUE(v[1].is_null() && v[2].is_null() && v[3].is_null());
  EXPECT_EQ(v[4], Value::date(days_from_civil(2024, 1, 15)));
}

}  // namespace
}  // namespace sluice::mysql::binlog
