// The PostgreSQL CDC read ceiling: the thinnest logical-replication reader libpq allows. It
// starts pgoutput on an existing slot (protocol 1, optionally `binary 'true'`), discards every
// CopyData message after counting its Insert/Update/Delete messages, answers keepalives, and
// sends a standby status update once a second. Its socket has SO_RCVLOWAT 64 KiB, so poll wakes
// it per 64 KiB rather than per message (poll's 10 ms timeout still bounds a read): the
// walsender, not this reader, is then the limit (it runs at 100 % of a core here). Nothing is
// decoded beyond the message tag. It stops once CHANGES changes arrived.
//
//   sluice_pg_logical_ceiling URL SLOT PUBLICATION CHANGES [--binary]
//
// SLUICE_CEILING_RCVLOWAT=N sets another low-water mark (1: woken per message, as pg_recvlogical
// is: the walsender then costs about twice the CPU per change); SLUICE_CEILING_POLL_MS=N another
// poll timeout.
//
// Prints one JSON line: {"changes": N, "seconds": S, "cpu_s": C, "bytes": B}.
#include <libpq-fe.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

uint64_t be64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

void put_be64(char* p, uint64_t v) {
  for (int i = 7; i >= 0; --i, v >>= 8) p[i] = static_cast<char>(v & 0xff);
}

// Microseconds since 2000-01-01, as the replication protocol counts time.
int64_t pg_now() {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count() -
         946684800LL * 1000000;
}

bool send_status(PGconn* c, uint64_t lsn) {
  char msg[34];
  msg[0] = 'r';
  put_be64(msg + 1, lsn);   // written
  put_be64(msg + 9, lsn);   // flushed
  put_be64(msg + 17, lsn);  // applied
  put_be64(msg + 25, static_cast<uint64_t>(pg_now()));
  msg[33] = 0;
  return PQputCopyData(c, msg, sizeof msg) == 1 && PQflush(c) == 0;
}

std::string quote_ident(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s URL SLOT PUBLICATION CHANGES [--binary]\n", argv[0]);
    return 2;
  }
  const std::string slot = argv[2], publication = argv[3];
  const uint64_t want = std::strtoull(argv[4], nullptr, 10);
  const bool binary = argc > 5 && std::strcmp(argv[5], "--binary") == 0;
  const char* keys[] = {"dbname", "replication", nullptr};
  const char* values[] = {argv[1], "database", nullptr};
  PGconn* c = PQconnectdbParams(keys, values, 1);
  if (PQstatus(c) != CONNECTION_OK) {
    std::fprintf(stderr, "connect: %s", PQerrorMessage(c));
    return 1;
  }
  const std::string start = "START_REPLICATION SLOT " + quote_ident(slot) +
                            " LOGICAL 0/0 (proto_version '1', publication_names '" +
                            quote_ident(publication) + "'" + (binary ? ", binary 'true'" : "") +
                            ")";
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = cpu_seconds();
  PGresult* r = PQexec(c, start.c_str());
  if (PQresultStatus(r) != PGRES_COPY_BOTH) {
    std::fprintf(stderr, "START_REPLICATION: %s", PQerrorMessage(c));
    return 1;
  }
  PQclear(r);
  const int fd = PQsocket(c);
  const char* lowat_env = std::getenv("SLUICE_CEILING_RCVLOWAT");
  const int lowat = lowat_env ? std::atoi(lowat_env) : 64 << 10;
  const char* poll_env = std::getenv("SLUICE_CEILING_POLL_MS");
  const int poll_ms = poll_env ? std::atoi(poll_env) : 10;
  (void)setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof lowat);
  uint64_t changes = 0, bytes = 0, lsn = 0;
  auto last_status = std::chrono::steady_clock::now();
  while (changes < want) {
    char* buf = nullptr;
    const int n = PQgetCopyData(c, &buf, 1);
    if (n > 0) {
      bytes += uint64_t(n);
      if (buf[0] == 'w' && n > 25) {
        const char tag = buf[25];
        if (tag == 'I' || tag == 'U' || tag == 'D') ++changes;
        const uint64_t start_lsn = be64(buf + 1);
        if (start_lsn > lsn) lsn = start_lsn;
      } else if (buf[0] == 'k' && n >= 18 && buf[17] != 0) {
        if (!send_status(c, lsn)) return 1;
      }
      PQfreemem(buf);
      continue;
    }
    if (n < 0) {
      std::fprintf(stderr, "stream ended: %s", PQerrorMessage(c));
      return 1;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - last_status >= std::chrono::seconds(1)) {
      if (!send_status(c, lsn)) return 1;
      last_status = now;
    }
    pollfd p{fd, POLLIN, 0};
    (void)poll(&p, 1, poll_ms);
    if (PQconsumeInput(c) == 0) {
      std::fprintf(stderr, "read: %s", PQerrorMessage(c));
      return 1;
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("{\"changes\": %llu, \"seconds\": %.4f, \"cpu_s\": %.3f, \"bytes\": %llu}\n",
              static_cast<unsigned long long>(changes), seconds, cpu_seconds() - cpu0,
              static_cast<unsigned long long>(bytes));
  PQfinish(c);
  return 0;
}
