// The ceiling of the redis destination (format: hash), and the matrix's reader of what it wrote.
//
//   sluice_redis_hash_ceiling write URL PREFIX ROWS [BATCH]
//       Writes the rows sluice's generator source produces for seed 1 (employee_row(1, id, id-1),
//       id 1..ROWS) as hashes PREFIX<id> with the nine columns as fields, in the texts the redis
//       destination writes (docs/redis.md): per batch (default 10,000 rows, sluice's default) one
//       pipelined MULTI, HSET × BATCH, EXEC — what the destination sends, without records,
//       batches or a pipeline. The rows are rendered before the clock starts. Prints
//       {"rows":N,"seconds":S}.
//   sluice_redis_hash_ceiling dump URL PREFIX
//       Every hash under PREFIX (SCAN MATCH PREFIX*), one line `id TAB name TAB email TAB position
//       TAB hire_date` each (HMGET, pipelined): the matrix's digest reads these.
//   sluice_redis_hash_ceiling drop URL PREFIX
//       Unlinks every key under PREFIX.
//   sluice_redis_hash_ceiling stream-fill URL STREAM ROWS
//       Appends the same rows to STREAM as entries (XADD * with the nine fields), pipelined: the
//       matrix's redis source row reads them (key_fields: [id]).
//   sluice_redis_hash_ceiling aof-settle URL
//       Rewrites the append-only file (BGREWRITEAOF) and waits until no rewrite runs or is
//       scheduled: a timed run then starts from a fresh AOF base, and the rewrite that its growth
//       would trigger (auto-aof-rewrite-percentage 100: a forked child compressing the whole
//       dataset) does not fall inside one run and not another.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "connectors/generator/employees.h"
#include "connectors/redis/redis_common.h"

using sluice::redis::RedisConnection;

namespace {

RedisConnection connect_or_die(const char* url) {
  auto u = sluice::redis::parse_redis_url(url);
  if (!u.ok()) {
    std::fprintf(stderr, "%s\n", u.error().message().c_str());
    std::exit(2);
  }
  RedisConnection::Options o;
  o.command_timeout = std::chrono::milliseconds(600'000);
  auto c = RedisConnection::connect(*u, o);
  if (!c.ok()) {
    std::fprintf(stderr, "%s\n", c.error().message().c_str());
    std::exit(1);
  }
  return std::move(c).value();
}

void die_on(const sluice::Result<sluice::redis::Reply>& r, const char* what) {
  if (!r.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, r.error().message().c_str());
    std::exit(1);
  }
  if (r.value()->type == REDIS_REPLY_ERROR) {
    std::fprintf(stderr, "%s: %s\n", what, r.value()->str);
    std::exit(1);
  }
}

// Days since 1970-01-01 → "YYYY-MM-DD" (H. Hinnant's civil_from_days).
std::string date_text(int64_t z) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = unsigned(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t y = int64_t(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned d = doy - (153 * mp + 2) / 5 + 1;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  if (m <= 2) ++y;
  char buf[48];
  std::snprintf(buf, sizeof buf, "%04lld-%02u-%02u", (long long)y, m, d);
  return buf;
}

// Micros since the epoch → "YYYY-MM-DDTHH:MM:SS[.ffffff]Z" (the destination's timestamptz text).
std::string timestamptz_text(int64_t micros) {
  int64_t secs = micros / 1000000, us = micros % 1000000;
  if (us < 0) us += 1000000, --secs;
  int64_t days = secs / 86400, sod = secs % 86400;
  if (sod < 0) sod += 86400, --days;
  char buf[64];
  if (us % 1000 == 0 && us != 0)  // milliseconds when the microseconds are whole, as it writes
    std::snprintf(buf, sizeof buf, "T%02d:%02d:%02d.%03dZ", int(sod / 3600), int(sod / 60 % 60),
                  int(sod % 60), int(us / 1000));
  else if (us != 0)
    std::snprintf(buf, sizeof buf, "T%02d:%02d:%02d.%06dZ", int(sod / 3600), int(sod / 60 % 60),
                  int(sod % 60), int(us));
  else
    std::snprintf(buf, sizeof buf, "T%02d:%02d:%02dZ", int(sod / 3600), int(sod / 60 % 60),
                  int(sod % 60));
  return date_text(days) + buf;
}

std::string double_text(double v) {
  char buf[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

// Row `id` as the command `verb key [extra] field value …`.
std::vector<std::string> row_command(const char* verb, std::string key, const char* extra,
                                     long id) {
  const auto r = sluice::generator::employee_row(1, id, uint64_t(id - 1));
  std::vector<std::string> cmd{verb, std::move(key)};
  if (extra) cmd.emplace_back(extra);
  for (std::string f :
       {std::string("id"), std::to_string(id), std::string("name"), r.name(), std::string("email"),
        r.email(), std::string("full_time"), std::string(r.full_time ? "true" : "false"),
        std::string("position"), std::string(r.position), std::string("hire_date"),
        date_text(r.hire_date), std::string("salary"), double_text(r.salary),
        std::string("updated_at"), timestamptz_text(r.updated_at), std::string("created_at"),
        timestamptz_text(r.created_at)})
    cmd.push_back(std::move(f));
  return cmd;
}

int stream_fill(const char* url, const std::string& stream, long rows) {
  RedisConnection c = connect_or_die(url);
  std::vector<std::string_view> args;
  for (long done = 0; done < rows;) {
    const long n = std::min(10000L, rows - done);
    std::vector<std::vector<std::string>> cmds;
    for (long i = 0; i < n; ++i) cmds.push_back(row_command("XADD", stream, "*", done + i + 1));
    for (const auto& cmd : cmds) {
      args.assign(cmd.begin(), cmd.end());
      c.append(args);
    }
    for (long i = 0; i < n; ++i) die_on(c.read_reply(), "XADD");
    done += n;
  }
  return 0;
}

int write(const char* url, const std::string& prefix, long rows, long batch) {
  // Rendered before the clock starts: the ceiling is the server and the protocol, not formatting.
  std::vector<std::vector<std::string>> cmds;
  cmds.reserve(size_t(rows));
  for (long id = 1; id <= rows; ++id)
    cmds.push_back(row_command("HSET", prefix + std::to_string(id), nullptr, id));
  RedisConnection c = connect_or_die(url);
  std::vector<std::string_view> args;
  const auto t0 = std::chrono::steady_clock::now();
  for (long done = 0; done < rows;) {
    const long n = std::min(batch, rows - done);
    c.append({"MULTI"});
    for (long i = 0; i < n; ++i) {
      const auto& cmd = cmds[size_t(done + i)];
      args.assign(cmd.begin(), cmd.end());
      c.append(args);
    }
    c.append({"EXEC"});
    for (long i = 0; i < n + 2; ++i) die_on(c.read_reply(), "write");
    done += n;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("{\"rows\":%ld,\"seconds\":%.6f}\n", rows, seconds);
  return 0;
}

// Calls `each(keys)` for every SCAN page of keys under `prefix`.
template <typename F>
void scan(RedisConnection& c, const std::string& prefix, F each) {
  std::string cursor = "0";
  const std::string match = prefix + "*";
  do {
    auto r = c.command({"SCAN", cursor, "MATCH", match, "COUNT", "1000"});
    die_on(r, "SCAN");
    const redisReply* a = r.value().get();
    cursor.assign(a->element[0]->str, a->element[0]->len);
    std::vector<std::string> keys;
    for (size_t i = 0; i < a->element[1]->elements; ++i)
      keys.emplace_back(a->element[1]->element[i]->str, a->element[1]->element[i]->len);
    if (!keys.empty()) each(keys);
  } while (cursor != "0");
}

int dump(const char* url, const std::string& prefix) {
  RedisConnection c = connect_or_die(url);
  RedisConnection reader = connect_or_die(url);
  scan(c, prefix, [&](const std::vector<std::string>& keys) {
    for (const std::string& k : keys)
      reader.append({"HMGET", k, "id", "name", "email", "position", "hire_date"});
    for (size_t i = 0; i < keys.size(); ++i) {
      auto r = reader.read_reply();
      die_on(r, "HMGET");
      const redisReply* a = r.value().get();
      std::string line;
      for (size_t f = 0; f < a->elements; ++f) {
        if (f) line += '\t';
        if (a->element[f]->type == REDIS_REPLY_STRING)
          line.append(a->element[f]->str, a->element[f]->len);
      }
      std::printf("%s\n", line.c_str());
    }
  });
  return 0;
}

int drop(const char* url, const std::string& prefix) {
  RedisConnection c = connect_or_die(url);
  RedisConnection w = connect_or_die(url);
  scan(c, prefix, [&](const std::vector<std::string>& keys) {
    std::vector<std::string_view> args{"UNLINK"};
    for (const std::string& k : keys) args.push_back(k);
    die_on(w.command(args), "UNLINK");
  });
  return 0;
}

int aof_settle(const char* url) {
  RedisConnection c = connect_or_die(url);
  auto r = c.command({"BGREWRITEAOF"});
  if (!r.ok() && r.error().message().find("already in progress") == std::string::npos)
    die_on(r, "BGREWRITEAOF");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto info = c.command({"INFO", "persistence"});
    die_on(info, "INFO");
    const std::string text = sluice::redis::reply_text(info->get());
    if (text.find("aof_rewrite_in_progress:0") != std::string::npos &&
        text.find("aof_rewrite_scheduled:0") != std::string::npos)
      return 0;
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "the AOF rewrite did not end within 10 minutes\n");
      return 1;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "write" && argc >= 5)
    return write(argv[2], argv[3], std::atol(argv[4]), argc > 5 ? std::atol(argv[5]) : 10000);
  if (mode == "dump" && argc == 4) return dump(argv[2], argv[3]);
  if (mode == "drop" && argc == 4) return drop(argv[2], argv[3]);
  if (mode == "stream-fill" && argc == 5) return stream_fill(argv[2], argv[3], std::atol(argv[4]));
  if (mode == "aof-settle" && argc == 3) return aof_settle(argv[2]);
  std::fprintf(stderr,
               "usage: %s write URL PREFIX ROWS [BATCH] | dump URL PREFIX | drop URL PREFIX | "
               "stream-fill URL STREAM ROWS | aof-settle URL\n",
               argv[0]);
  return 2;
}
