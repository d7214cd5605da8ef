#include "support/fault_redis.h"

#include <hiredis/hiredis.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>

namespace sluice::test {

namespace {

using Kind = FaultColumn::Kind;

struct ContextFree {
  void operator()(redisContext* c) const { redisFree(c); }
};
struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Context = std::unique_ptr<redisContext, ContextFree>;
using ReplyPtr = std::unique_ptr<redisReply, ReplyFree>;

ReplyPtr command(redisContext* c, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> argl;
  for (const auto& a : args) {
    argv.push_back(a.data());
    argl.push_back(a.size());
  }
  return ReplyPtr(
      static_cast<redisReply*>(redisCommandArgv(c, int(argv.size()), argv.data(), argl.data())));
}
void append(redisContext* c, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> argl;
  for (const auto& a : args) {
    argv.push_back(a.data());
    argl.push_back(a.size());
  }
  redisAppendCommandArgv(c, int(argv.size()), argv.data(), argl.data());
}
ReplyPtr next_reply(redisContext* c) {
  void* r = nullptr;
  if (redisGetReply(c, &r) != REDIS_OK) return nullptr;
  return ReplyPtr(static_cast<redisReply*>(r));
}
bool is_error(const ReplyPtr& r) { return !r || r->type == REDIS_REPLY_ERROR; }
std::string text(const redisReply* r) {
  if (r->type == REDIS_REPLY_INTEGER) return std::to_string(r->integer);
  return std::string(r->str ? r->str : "", r->len);
}

// redis://[user:password@]host:port[/db]: a connection with AUTH and SELECT done (null on error).
Context connect(const std::string& url) {
  std::string rest = url.rfind("redis://", 0) == 0 ? url.substr(8) : url;
  std::string user, password;
  if (const size_t at = rest.rfind('@'); at != std::string::npos) {
    const std::string cred = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const size_t colon = cred.find(':');
    if (colon == std::string::npos) {
      password = cred;
    } else {
      user = cred.substr(0, colon);
      password = cred.substr(colon + 1);
    }
  }
  std::string db = "0";
  if (const size_t slash = rest.find('/'); slash != std::string::npos) {
    if (slash + 1 < rest.size()) db = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
  }
  const size_t colon = rest.rfind(':');
  const std::string host = rest.substr(0, colon);
  const int port = colon == std::string::npos ? 6379 : std::atoi(rest.c_str() + colon + 1);
  const timeval tv{5, 0};
  Context c(redisConnectWithTimeout(host.c_str(), port, tv));
  if (!c || c->err) return nullptr;
  redisSetTimeout(c.get(), tv);
  if (!password.empty()) {
    auto r = user.empty() ? command(c.get(), {"AUTH", password})
                          : command(c.get(), {"AUTH", user, password});
    if (is_error(r)) return nullptr;
  }
  if (db != "0" && is_error(command(c.get(), {"SELECT", db}))) return nullptr;
  return c;
}

// `prefix` as a SCAN MATCH pattern of the keys under it (glob characters escaped).
std::string match_of(const std::string& prefix) {
  std::string m;
  for (char ch : prefix) {
    if (ch == '*' || ch == '?' || ch == '[' || ch == ']' || ch == '\\') m += '\\';
    m += ch;
  }
  return m + "*";
}

// Every key under `prefix` (nullopt when the server cannot be read).
std::optional<std::vector<std::string>> keys_under(redisContext* c, const std::string& prefix) {
  std::vector<std::string> keys;
  std::string cursor = "0";
  do {
    auto r = command(c, {"SCAN", cursor, "MATCH", match_of(prefix), "COUNT", "1000"});
    if (is_error(r) || r->type != REDIS_REPLY_ARRAY || r->elements != 2) return std::nullopt;
    cursor = text(r->element[0]);
    for (size_t i = 0; i < r->element[1]->elements; ++i)
      keys.push_back(text(r->element[1]->element[i]));
  } while (cursor != "0");
  return keys;
}

}  // namespace

TableImage read_redis_image(const std::string& url, const std::string& key_prefix) {
  TableImage img;
  Context c = connect(url);
  auto fail = [&](const std::string& why) {
    img.ok = false;
    img.error = why;
    return img;
  };
  if (!c) return fail("cannot connect to Redis");
  auto keys = keys_under(c.get(), key_prefix);
  if (!keys) return fail("SCAN failed");
  for (const auto& k : *keys) append(c.get(), {"HGETALL", k});
  const auto& cols = fault_columns();
  for (const auto& k : *keys) {
    ReplyPtr r = next_reply(c.get());
    if (is_error(r) || r->type != REDIS_REPLY_ARRAY) return fail("HGETALL " + k + " failed");
    if (r->elements == 0) continue;  // gone since the SCAN
    std::map<std::string, std::string> fields;
    for (size_t i = 0; i + 1 < r->elements; i += 2)
      fields[text(r->element[i])] = text(r->element[i + 1]);
    std::vector<std::string> canon;
    for (const auto& col : cols) {
      auto it = fields.find(col.name);
      canon.push_back(canonical_value(
          col.kind, it == fields.end() ? std::nullopt : std::optional<std::string>(it->second),
          Rendering::redis));
    }
    // The key's id (a field that disagrees shows as a differing row).
    const std::string suffix = k.substr(key_prefix.size());
    char* end = nullptr;
    const long long id = std::strtoll(suffix.c_str(), &end, 10);
    if (suffix.empty() || *end != '\0') {
      img.duplicate_keys++;  // not a key of the table's: counted, shown by the comparison
      continue;
    }
    if (img.rows.count(id)) img.duplicate_keys++;
    img.rows[id] = std::move(canon);
  }
  return img;
}

std::string redis_fingerprint(const std::string& url, const std::string& key_prefix) {
  Context c = connect(url);
  if (!c) return "";
  auto keys = keys_under(c.get(), key_prefix);
  if (!keys) return "";
  for (const auto& k : *keys) append(c.get(), {"HMGET", k, "id", "rev"});
  int64_t count = 0, ids = 0, revs = 0;
  for (size_t i = 0; i < keys->size(); ++i) {
    ReplyPtr r = next_reply(c.get());
    if (is_error(r) || r->type != REDIS_REPLY_ARRAY || r->elements != 2) return "";
    if (r->element[0]->type == REDIS_REPLY_NIL) continue;  // gone since the SCAN
    count++;
    ids += std::strtoll(text(r->element[0]).c_str(), nullptr, 10);
    if (r->element[1]->type != REDIS_REPLY_NIL)
      revs += std::strtoll(text(r->element[1]).c_str(), nullptr, 10);
  }
  return std::to_string(count) + "/" + std::to_string(ids) + "/" + std::to_string(revs);
}

void redis_delete_prefix(const std::string& url, const std::string& prefix) {
  Context c = connect(url);
  if (!c) return;
  auto keys = keys_under(c.get(), prefix);
  if (!keys) return;
  for (const auto& k : *keys) append(c.get(), {"UNLINK", k});
  for (size_t i = 0; i < keys->size(); ++i) (void)next_reply(c.get());
}

int64_t redis_pending(const std::string& url, const std::string& stream, const std::string& group) {
  Context c = connect(url);
  if (!c) return -1;
  auto r = command(c.get(), {"XPENDING", stream, group});
  if (is_error(r) || r->type != REDIS_REPLY_ARRAY || r->elements < 1) return -1;
  return r->element[0]->integer;
}

const std::vector<FaultColumn>& stream_columns() {
  static const std::vector<FaultColumn> cols = {
      {"id", Kind::integer}, {"rev", Kind::integer}, {"note", Kind::text}, {"flag", Kind::boolean}};
  return cols;
}

// ── The stream writer ───────────────────────────────────────────────────────

struct StreamWriter::Impl {
  std::string url, stream, table;
  std::mt19937_64 rng;
  Context c;
  mutable std::mutex mu;
  std::map<int64_t, int> live;
  std::vector<int64_t> live_keys;  // for random picks; may hold deleted keys (skipped)
  int64_t next_id = 1;
  Stats stats;

  static std::optional<std::string> note_of(int64_t id, int rev) {
    if (rev % 5 == 0) return std::nullopt;
    return "note 'q' \"d\" \\ ü ✓ " + std::to_string(id) + "/" + std::to_string(rev);
  }
  static bool flag_of(int64_t id, int rev) { return (id + rev) % 2 == 0; }

  static std::string json_string(const std::string& s) {
    std::string out = "\"";
    for (unsigned char ch : s) {
      if (ch == '"' || ch == '\\') {
        out += '\\';
        out += char(ch);
      } else if (ch < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", ch);
        out += buf;
      } else {
        out += char(ch);
      }
    }
    return out + "\"";
  }
  // One OpenCDC record: create / update of (id, rev), or delete of id (rev 0).
  std::string record(const std::string& op, int64_t id, int rev) const {
    const std::string key = "{\"id\":" + std::to_string(id) + "}";
    std::string after = "null";
    if (op != "delete") {
      const auto note = note_of(id, rev);
      after = "{\"id\":" + std::to_string(id) + ",\"rev\":" + std::to_string(rev) +
              ",\"note\":" + (note ? json_string(*note) : "null") +
              ",\"flag\":" + (flag_of(id, rev) ? "true" : "false") + "}";
    }
    return "{\"operation\":\"" + op + "\",\"metadata\":{\"table\":" + json_string(table) +
           "},\"key\":" + key + ",\"payload\":{\"before\":null,\"after\":" + after + "}}";
  }
  std::vector<std::string> xadd(const std::string& op, int64_t id, int rev) const {
    return {"XADD", stream, "*", "value", record(op, id, rev)};
  }
  bool reconnect() {
    if (c && c->err == 0) return true;
    c = connect(url);
    return c != nullptr;
  }
  // Runs `cmds` in one MULTI/EXEC; true when EXEC applied them all.
  bool transaction(const std::vector<std::vector<std::string>>& cmds) {
    if (!reconnect()) return false;
    append(c.get(), {"MULTI"});
    for (const auto& a : cmds) append(c.get(), a);
    append(c.get(), {"EXEC"});
    bool ok = !is_error(next_reply(c.get()));
    for (size_t i = 0; i < cmds.size(); ++i) ok = !is_error(next_reply(c.get())) && ok;
    ReplyPtr exec = next_reply(c.get());
    if (is_error(exec) || exec->type != REDIS_REPLY_ARRAY || exec->elements != cmds.size())
      return false;
    for (size_t i = 0; i < exec->elements; ++i)
      if (exec->element[i]->type == REDIS_REPLY_ERROR) return false;
    return ok;
  }
  int64_t pick() {
    for (int tries = 0; tries < 8 && !live_keys.empty(); ++tries) {
      size_t i = size_t(rng() % live_keys.size());
      int64_t id = live_keys[i];
      if (live.count(id)) return id;
      live_keys[i] = live_keys.back();
      live_keys.pop_back();
    }
    return 0;
  }
};

StreamWriter::StreamWriter(std::string url, std::string stream, std::string table, uint64_t seed)
    : impl_(std::make_unique<Impl>()) {
  impl_->url = std::move(url);
  impl_->stream = std::move(stream);
  impl_->table = std::move(table);
  impl_->rng.seed(seed);
}

StreamWriter::~StreamWriter() { stop(); }

bool StreamWriter::create(int64_t rows) {
  Impl& m = *impl_;
  if (!m.reconnect() || is_error(command(m.c.get(), {"DEL", m.stream}))) return false;
  {
    std::lock_guard lk(m.mu);
    m.live.clear();
    m.live_keys.clear();
  }
  for (int64_t done = 0; done < rows;) {
    std::vector<std::vector<std::string>> cmds;
    std::vector<int64_t> ids;
    for (int k = 0; k < 1000 && done < rows; ++k, ++done) {
      ids.push_back(m.next_id);
      cmds.push_back(m.xadd("create", m.next_id++, 1));
    }
    if (!m.transaction(cmds)) return false;
    std::lock_guard lk(m.mu);
    for (int64_t id : ids) {
      m.live[id] = 1;
      m.live_keys.push_back(id);
    }
    m.stats.creates += int64_t(ids.size());
  }
  return true;
}

void StreamWriter::one_op() {
  Impl& m = *impl_;
  const unsigned r = unsigned(m.rng() % 100);
  // A run of 200–400 entries in one MULTI/EXEC (10 %), else one entry; keys touched once per run.
  const int n = r < 90 ? 1 : 200 + int(m.rng() % 201);
  std::vector<std::vector<std::string>> cmds;
  std::map<int64_t, int> changed;  // rev, or 0 for deleted
  int64_t cr = 0, up = 0, de = 0;
  for (int k = 0; k < n; ++k) {
    const unsigned c = unsigned(m.rng() % 100);
    if (c < 45) {
      const int64_t id = m.next_id++;
      cmds.push_back(m.xadd("create", id, 1));
      changed[id] = 1;
      cr++;
      continue;
    }
    const int64_t id = m.pick();
    if (!id || changed.count(id)) continue;
    if (c < 85) {
      const int rev = m.live[id] + 1;
      cmds.push_back(m.xadd("update", id, rev));
      changed[id] = rev;
      up++;
    } else {
      cmds.push_back(m.xadd("delete", id, 0));
      changed[id] = 0;
      de++;
    }
  }
  if (cmds.empty()) return;
  const bool ok = m.transaction(cmds);
  std::lock_guard lk(m.mu);
  if (!ok) {
    m.stats.failed++;
    return;
  }
  for (const auto& [id, rev] : changed) {
    if (rev == 0) {
      m.live.erase(id);
    } else {
      if (!m.live.count(id)) m.live_keys.push_back(id);
      m.live[id] = rev;
    }
  }
  m.stats.creates += cr;
  m.stats.updates += up;
  m.stats.deletes += de;
  if (n > 1) m.stats.transactions++;
}

void StreamWriter::start(std::chrono::milliseconds pause) {
  stop_ = false;
  thread_ = std::thread([this, pause] {
    while (!stop_) {
      one_op();
      std::this_thread::sleep_for(pause);
    }
  });
}

void StreamWriter::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

StreamWriter::Stats StreamWriter::stats() const {
  std::lock_guard lk(impl_->mu);
  return impl_->stats;
}

TableImage StreamWriter::expected() const {
  std::lock_guard lk(impl_->mu);
  TableImage img;
  for (const auto& [id, rev] : impl_->live) {
    const auto& cols = stream_columns();
    const std::vector<std::optional<std::string>> raw = {
        std::to_string(id), std::to_string(rev), Impl::note_of(id, rev),
        std::string(Impl::flag_of(id, rev) ? "true" : "false")};
    std::vector<std::string> canon;
    for (size_t i = 0; i < cols.size(); ++i)
      canon.push_back(canonical_value(cols[i].kind, raw[i], Rendering::redis));
    img.rows[id] = std::move(canon);
  }
  return img;
}

}  // namespace sluice::test
