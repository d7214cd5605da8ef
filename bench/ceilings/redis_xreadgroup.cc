// The ceiling of the redis source: the thinnest consumer-group reader of a stream — XREADGROUP
// COUNT N … > in a loop with two reads in flight, each reply discarded after an XACK of its ids
// (pipelined with the next read), until the stream is drained. What the redis source adds on top
// (records, batches, the destination, acknowledging after it) is compared against this rate (target
// >= 80 %).
//
//   sluice_redis_xreadgroup_ceiling URL STREAM [COUNT]
//       Creates group `ceiling` on STREAM from id 0 (dropping an old one), reads every entry and
//       prints {"entries":N,"seconds":S}.
//   sluice_redis_xreadgroup_ceiling fill URL STREAM COUNT [FIELD_BYTES]
//       Appends COUNT entries (fields id=N, v=FIELD_BYTES characters) to STREAM, pipelined.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <string>
#include <vector>

#include "connectors/redis/redis_common.h"

using sluice::redis::RedisConnection;

namespace {

RedisConnection connect_or_die(const char* url) {
  auto u = sluice::redis::parse_redis_url(url);
  if (!u.ok()) {
    std::fprintf(stderr, "%s\n", u.error().message().c_str());
    std::exit(2);
  }
  auto c = RedisConnection::connect(*u, {});
  if (!c.ok()) {
    std::fprintf(stderr, "%s\n", c.error().message().c_str());
    std::exit(1);
  }
  return std::move(c).value();
}

int fill(const char* url, const std::string& stream, long count, size_t bytes) {
  RedisConnection c = connect_or_die(url);
  const std::string v(bytes, 'x');
  const long chunk = 10000;
  for (long done = 0; done < count;) {
    const long n = std::min(chunk, count - done);
    for (long i = 0; i < n; ++i) {
      const std::string id = std::to_string(done + i + 1);
      c.append({"XADD", stream, "*", "id", id, "v", v});
    }
    for (long i = 0; i < n; ++i)
      if (!c.read_reply().ok()) return 1;
    done += n;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 5 && std::string(argv[1]) == "fill")
    return fill(argv[2], argv[3], std::atol(argv[4]), argc > 5 ? size_t(std::atol(argv[5])) : 32);
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s URL STREAM [COUNT] | fill URL STREAM COUNT [FIELD_BYTES]\n",
                 argv[0]);
    return 2;
  }
  const std::string stream = argv[2];
  const std::string count = argc > 3 ? argv[3] : "10000";
  RedisConnection c = connect_or_die(argv[1]);
  (void)c.command({"XGROUP", "DESTROY", stream, "ceiling"});
  if (auto r = c.command({"XGROUP", "CREATE", stream, "ceiling", "0"}); !r.ok()) {
    std::fprintf(stderr, "%s\n", r.error().message().c_str());
    return 1;
  }
  long entries = 0;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> ids;
  std::vector<std::string_view> args;
  const std::initializer_list<std::string_view> read = {
      "XREADGROUP", "GROUP", "ceiling", "c", "COUNT", count, "STREAMS", stream, ">"};
  // Two reads in flight: the server serves the next one while this side parses the last reply,
  // and each XACK travels with the read after it (no round trip of its own). Replies come back in
  // the order the commands went: `due` holds what each one is (true: a read).
  std::deque<bool> due = {true, true};
  c.append(read);
  c.append(read);
  bool drained = false;
  while (!due.empty()) {
    const bool is_read = due.front();
    due.pop_front();
    auto r = c.read_reply();
    if (!r.ok()) {
      std::fprintf(stderr, "%s\n", r.error().message().c_str());
      return 1;
    }
    if (!is_read) continue;
    if ((*r)->type != REDIS_REPLY_ARRAY || (*r)->elements == 0 ||
        (*r)->element[0]->element[1]->elements == 0) {
      drained = true;  // the reads still in flight come back empty too
      continue;
    }
    const redisReply* e = (*r)->element[0]->element[1];
    ids.clear();
    for (size_t i = 0; i < e->elements; ++i)
      ids.emplace_back(e->element[i]->element[0]->str, e->element[i]->element[0]->len);
    args.assign({"XACK", stream, "ceiling"});
    for (const auto& id : ids) args.push_back(id);
    c.append(args);
    due.push_back(false);
    if (!drained) {
      c.append(read);
      due.push_back(true);
    }
    if (!c.flush().ok()) return 1;  // now, even when the next reply is already received
    entries += long(e->elements);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("{\"entries\":%ld,\"seconds\":%.3f}\n", entries, s);
  (void)c.command({"XGROUP", "DESTROY", stream, "ceiling"});
  return 0;
}
