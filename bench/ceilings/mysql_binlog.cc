// The MySQL/MariaDB CDC read ceiling: the thinnest binlog reader libmariadb allows. It asks for the
// binlog from FILE:START (COM_BINLOG_DUMP through mariadb_rpl_open, with the checksum and heartbeat
// variables a replica sets), then reads packets with mysql_net_read_packet and looks only at each
// event's 19-byte header (type, size, next position): nothing is copied, checked or decoded. It
// counts the rows events (WRITE/UPDATE/DELETE_ROWS, v1 and v2) and their bytes, and stops at the
// first event whose next position is at or past END in FILE.
//
//   sluice_mysql_binlog_ceiling HOST PORT USER PASSWORD FILE START END
//
// Prints one JSON line: {"events": N, "rows_events": R, "bytes": B, "seconds": S, "cpu_s": C}.
#include <mysql.h>
// after mysql.h
#include <mariadb_rpl.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

uint32_t le32(const unsigned char* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

bool is_rows_event(unsigned type) {
  // WRITE/UPDATE/DELETE_ROWS_EVENT_V1 (23..25) and v2 (30..32).
  return (type >= 23 && type <= 25) || (type >= 30 && type <= 32);
}

int fail(MYSQL* m, const char* what) {
  std::fprintf(stderr, "%s: %s (%u)\n", what, mysql_error(m), mysql_errno(m));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 8) {
    std::fprintf(stderr, "usage: %s HOST PORT USER PASSWORD FILE START END\n", argv[0]);
    return 2;
  }
  const std::string file = argv[5];
  const unsigned long start = std::strtoul(argv[6], nullptr, 10);
  const unsigned long end = std::strtoul(argv[7], nullptr, 10);
  MYSQL* m = mysql_init(nullptr);
  if (!mysql_real_connect(m, argv[1], argv[3], argv[4], nullptr, unsigned(std::atoi(argv[2])),
                          nullptr, 0))
    return fail(m, "connect");
  for (const char* sql :
       {"SET @master_binlog_checksum = @@global.binlog_checksum",
        "SET @source_binlog_checksum = @@global.binlog_checksum",
        "SET @master_heartbeat_period = 1000000000", "SET @mariadb_slave_capability = 4"}) {
    if (mysql_query(m, sql) != 0 && mysql_errno(m) != 1193)  // ER_UNKNOWN_SYSTEM_VARIABLE
      return fail(m, sql);
    if (MYSQL_RES* r = mysql_store_result(m)) mysql_free_result(r);
  }
  MARIADB_RPL* rpl = mariadb_rpl_init(m);
  if (rpl == nullptr) return fail(m, "mariadb_rpl_init");
  mariadb_rpl_optionsv(rpl, MARIADB_RPL_SERVER_ID, 0x5eedu);
  mariadb_rpl_optionsv(rpl, MARIADB_RPL_FILENAME, file.c_str(), file.size());
  mariadb_rpl_optionsv(rpl, MARIADB_RPL_START, start);
  mariadb_rpl_optionsv(rpl, MARIADB_RPL_FLAGS, 0u);
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = cpu_seconds();
  if (mariadb_rpl_open(rpl) != 0) return fail(m, "COM_BINLOG_DUMP");
  uint64_t events = 0, rows_events = 0, bytes = 0;
  bool in_file = false;  // past the fake ROTATE into FILE that opens the stream
  for (;;) {
    const unsigned long n = mysql_net_read_packet(m);
    if (n == packet_error || n == 0) return fail(m, "reading the binlog");
    const unsigned char* p = m->net.read_pos;
    if (p[0] == 0xfe && n < 8) {
      std::fprintf(stderr, "the server ended the stream before position %lu\n", end);
      return 1;
    }
    if (n < 20) continue;
    const unsigned char* h = p + 1;  // after the OK byte
    const unsigned type = h[4];
    const uint32_t next = le32(h + 13);
    ++events;
    bytes += n - 1;
    if (is_rows_event(type)) ++rows_events;
    if (type == 4) {  // ROTATE: names the file the positions that follow belong to
      in_file =
          std::string(reinterpret_cast<const char*>(h + 19 + 8), n - 1 - 19 - 8).starts_with(file);
      continue;
    }
    if (in_file && next != 0 && next >= end) break;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "{\"events\": %llu, \"rows_events\": %llu, \"bytes\": %llu, \"seconds\": %.3f, "
      "\"cpu_s\": %.3f}\n",
      (unsigned long long)events, (unsigned long long)rows_events, (unsigned long long)bytes,
      seconds, cpu_seconds() - c0);
  rpl->mysql = nullptr;  // mariadb_rpl_close would close the connection too
  mariadb_rpl_close(rpl);
  mysql_close(m);
  return 0;
}
