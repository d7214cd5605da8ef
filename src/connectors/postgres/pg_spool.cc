#include "connectors/postgres/pg_spool.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

namespace sluice::pg {

namespace {

// Each message: lsn (8), subxid (4), payload length (4), then the payload (type byte and body),
// in this machine's byte order (the file never leaves the process).
constexpr size_t kHeader = 16;
constexpr size_t kReadChunk = 1 << 20;

bool keeps_on_abort(char type) { return type == 'R' || type == 'Y'; }

int open_anonymous(const std::string& dir, std::string* why) {
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) return fd;
  // A file system without O_TMPFILE: a named file, unlinked at once.
  std::string templ = (std::filesystem::path(dir) / "sluice-txn-XXXXXX").string();
  std::vector<char> name(templ.begin(), templ.end());
  name.push_back('\0');
  fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) {
    *why = std::strerror(errno);
    return -1;
  }
  ::unlink(name.data());
  return fd;
}

}  // namespace

struct TransactionSpool::Txn {
  uint32_t xid = 0;
  std::string mem;  // framed messages not spilled
  int fd = -1;      // spilled messages, before those in mem
  uint64_t file_bytes = 0;
  std::unordered_set<uint32_t> aborted;  // subtransactions rolled back
  ~Txn() {
    if (fd >= 0) ::close(fd);
  }
};

TransactionSpool::TransactionSpool(size_t memory_limit, std::string spill_dir)
    : memory_limit_(memory_limit), spill_dir_(std::move(spill_dir)) {}
TransactionSpool::~TransactionSpool() = default;

Status TransactionSpool::start(uint32_t xid, bool first) {
  auto it = txns_.find(xid);
  if (first) {
    // A first segment of a transaction already held can only follow a stream that lost it: start
    // it afresh.
    if (it != txns_.end()) {
      memory_ -= it->second->mem.size();
      txns_.erase(it);
    }
    auto t = std::make_unique<Txn>();
    t->xid = xid;
    txns_.emplace(xid, std::move(t));
    return ok_status();
  }
  if (it == txns_.end())
    return Error(Errc::data,
                 fmt::format("pgoutput: a later segment of streamed transaction {} whose first "
                             "segment this stream did not carry",
                             xid));
  return ok_status();
}

Status TransactionSpool::add(uint32_t xid, uint32_t subxid, Lsn lsn, char type,
                             std::string_view body) {
  auto it = txns_.find(xid);
  if (it == txns_.end())
    return Error(
        Errc::data,
        fmt::format("pgoutput: a streamed message of transaction {} outside its stream", xid));
  Txn& t = *it->second;
  const size_t before = t.mem.size();
  // Grown by doubling, but never past the limit (a string doubling at 8 MiB would hold 16).
  if (const size_t need = before + kHeader + 1 + body.size(); need > t.mem.capacity())
    t.mem.reserve(
        std::max(need, std::min(memory_limit_, std::max<size_t>(2 * t.mem.capacity(), 64 << 10))));
  char header[kHeader];
  const uint32_t len = uint32_t(1 + body.size());
  std::memcpy(header, &lsn.value, 8);
  std::memcpy(header + 8, &subxid, 4);
  std::memcpy(header + 12, &len, 4);
  t.mem.append(header, kHeader);
  t.mem += type;
  t.mem.append(body);
  memory_ += t.mem.size() - before;
  if (memory_ > memory_limit_) return spill_largest();
  return ok_status();
}

Status TransactionSpool::spill_largest() {
  Txn* largest = nullptr;
  for (auto& [xid, t] : txns_)
    if (!largest || t->mem.size() > largest->mem.size()) largest = t.get();
  if (!largest || largest->mem.empty()) return ok_status();
  Txn& t = *largest;
  auto fail = [&](const std::string& why) {
    return Error(Errc::io, fmt::format("cannot spill in-progress transaction {} to {}: {} (set "
                                       "stream.spill_directory to a writable directory with room)",
                                       t.xid, spill_dir_, why));
  };
  if (t.fd < 0) {
    std::string why;
    t.fd = open_anonymous(spill_dir_, &why);
    if (t.fd < 0) return fail(why);
  }
  const char* p = t.mem.data();
  size_t left = t.mem.size();
  while (left > 0) {
    const ssize_t n = ::pwrite(t.fd, p, left, off_t(t.file_bytes));
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(std::strerror(errno));
    }
    p += n;
    left -= size_t(n);
    t.file_bytes += uint64_t(n);
  }
  spilled_bytes_ += t.mem.size();
  memory_ -= t.mem.size();
  std::string().swap(t.mem);  // its capacity too
  return ok_status();
}

void TransactionSpool::abort(uint32_t xid, uint32_t subxid) {
  auto it = txns_.find(xid);
  if (it == txns_.end()) return;
  if (xid == subxid) {
    memory_ -= it->second->mem.size();
    txns_.erase(it);
    return;
  }
  it->second->aborted.insert(subxid);
}

Result<std::unique_ptr<HeldTransaction>> TransactionSpool::take(uint32_t xid) {
  auto it = txns_.find(xid);
  if (it == txns_.end())
    return Error(Errc::data,
                 fmt::format("pgoutput: Stream Commit of transaction {}, which this stream did "
                             "not carry",
                             xid));
  memory_ -= it->second->mem.size();
  std::unique_ptr<HeldTransaction> held(new HeldTransaction(std::move(it->second)));
  txns_.erase(it);
  return held;
}

void TransactionSpool::clear() noexcept {
  txns_.clear();
  memory_ = 0;
}

HeldTransaction::HeldTransaction(std::unique_ptr<TransactionSpool::Txn> t) : t_(std::move(t)) {}
HeldTransaction::~HeldTransaction() = default;

Result<std::string_view> HeldTransaction::read_file(size_t n) {
  if (buf_.size() - buf_pos_ < n) {
    buf_.erase(0, buf_pos_);
    buf_pos_ = 0;
    const size_t want = std::max(n - buf_.size(), kReadChunk);
    const size_t have = buf_.size();
    buf_.resize(have + want);
    size_t got = 0;
    while (got < want && file_pos_ < t_->file_bytes) {
      const ssize_t r = ::pread(t_->fd, buf_.data() + have + got, want - got, off_t(file_pos_));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0)
        return Error(Errc::io, fmt::format("cannot read back spilled transaction {}: {}", t_->xid,
                                           r < 0 ? std::strerror(errno)
                                                 : "the file is shorter than written"));
      got += size_t(r);
      file_pos_ += uint64_t(r);
    }
    buf_.resize(have + got);
    if (buf_.size() < n)
      return Error(Errc::io, fmt::format("spilled transaction {} is cut short", t_->xid));
  }
  std::string_view v(buf_.data() + buf_pos_, n);
  buf_pos_ += n;
  return v;
}

Result<bool> HeldTransaction::next(Message* out) {
  for (;;) {
    std::string_view header, payload;
    const bool from_file = file_pos_ < t_->file_bytes || buf_pos_ < buf_.size();
    if (from_file) {
      auto h = read_file(kHeader);
      if (!h.ok()) return std::move(h).error();
      header = h.value();
    } else {
      if (mem_pos_ == t_->mem.size()) return false;
      if (t_->mem.size() - mem_pos_ < kHeader)
        return Error(Errc::internal, "a held transaction's message is cut short");
      header = std::string_view(t_->mem).substr(mem_pos_, kHeader);
      mem_pos_ += kHeader;
    }
    uint32_t subxid, len;
    std::memcpy(&out->lsn.value, header.data(), 8);
    std::memcpy(&subxid, header.data() + 8, 4);
    std::memcpy(&len, header.data() + 12, 4);
    if (from_file) {
      auto p = read_file(len);
      if (!p.ok()) return std::move(p).error();
      payload = p.value();
    } else {
      if (t_->mem.size() - mem_pos_ < len)
        return Error(Errc::internal, "a held transaction's message is cut short");
      payload = std::string_view(t_->mem).substr(mem_pos_, len);
      mem_pos_ += len;
    }
    if (payload.empty()) return Error(Errc::internal, "a held transaction's message is empty");
    if (!t_->aborted.empty() && !keeps_on_abort(payload[0]) && t_->aborted.contains(subxid))
      continue;
    out->payload = payload;
    return true;
  }
}

}  // namespace sluice::pg
