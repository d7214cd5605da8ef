#include "runtime/spool/disk_spool.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <libdeflate.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "support/failpoint.h"
#include "support/spool/batch_codec.h"

namespace sluice::spool {

namespace {

constexpr uint32_t kMagic = 0x314c5053;  // "SPL1" little-endian
constexpr size_t kHeader = 32;
constexpr std::string_view kSuffix = ".seg";

struct Header {
  uint32_t magic = kMagic;
  uint32_t length = 0;
  uint64_t seq = 0;
  int64_t unix_ms = 0;
  uint32_t records = 0;
  uint32_t crc = 0;
};
static_assert(sizeof(Header) == kHeader);

uint32_t frame_crc(const Header& h, std::string_view payload) {
  // CRC-32 (zlib's polynomial: frames written before libdeflate was used read back unchanged).
  const uint32_t crc = libdeflate_crc32(0, &h, 28);
  return libdeflate_crc32(crc, payload.data(), payload.size());
}

int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Reads exactly n bytes at `offset`; false on a short read or error.
bool pread_all(int fd, void* buf, size_t n, uint64_t offset) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t got = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
  return true;
}

bool pwrite_all(int fd, const char* p, size_t n, uint64_t offset) {
  while (n > 0) {
    const ssize_t put = ::pwrite(fd, p, n, static_cast<off_t>(offset));
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return false;
    p += put;
    n -= static_cast<size_t>(put);
    offset += static_cast<uint64_t>(put);
  }
  return true;
}

Status sync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Error(Errc::io, fmt::format("spool {}: {}", dir, std::strerror(errno)));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return Error(Errc::io, fmt::format("spool {}: fsync: {}", dir, std::strerror(err)));
  return ok_status();
}

// The position a batch_codec payload starts with.
std::string payload_position(std::string_view payload) {
  uint64_t n = 0;
  size_t i = 0;
  for (int shift = 0; shift < 64 && i < payload.size(); shift += 7) {
    const auto b = static_cast<uint8_t>(payload[i++]);
    n |= uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80)) break;
  }
  if (n > payload.size() - i) return {};
  return std::string(payload.substr(i, n));
}

}  // namespace

std::string spool_position(uint64_t seq) { return "spool:" + std::to_string(seq); }

std::optional<uint64_t> parse_spool_position(std::string_view position) {
  if (!position.starts_with("spool:")) return std::nullopt;
  position.remove_prefix(6);
  uint64_t seq = 0;
  auto [end, ec] = std::from_chars(position.data(), position.data() + position.size(), seq);
  if (ec != std::errc() || end != position.data() + position.size()) return std::nullopt;
  return seq;
}

Status remove_disk_spool(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return ok_status();
  for (const auto& entry : std::filesystem::directory_iterator(path, ec))
    if (entry.path().extension() == kSuffix || entry.path().filename() == "origin")
      std::filesystem::remove(entry.path(), ec);
  if (ec)
    return Error(Errc::io,
                 fmt::format("spool {}: cannot remove its segments: {}", path, ec.message()));
  std::filesystem::remove(path, ec);  // only when empty: other files are the user's
  return ok_status();
}

// ---- reader ---------------------------------------------------------------------------------

class DiskSpool::Reader final : public SpoolReader {
 public:
  Reader(DiskSpool* spool, std::string name) : spool_(spool), name_(std::move(name)) {}
  ~Reader() override {
    if (fd_ >= 0) ::close(fd_);
  }

  Result<std::optional<SpooledBatch>> next(std::chrono::milliseconds wait,
                                           std::stop_token stop) override {
    std::string path;
    uint64_t offset = 0;
    {
      std::unique_lock lock(spool_->mu_);
      spool_->appended_cv_.wait_for(lock, stop, wait,
                                    [&] { return spool_->next_seq_ > next_seq_; });
      if (spool_->next_seq_ <= next_seq_) return std::optional<SpooledBatch>();
      // The segment holding next_seq_: the current one while it has frames past the cursor.
      const Segment* seg = nullptr;
      for (const Segment& s : spool_->segments_) {
        if (s.first_seq <= next_seq_ && next_seq_ <= s.last_seq) {
          seg = &s;
          break;
        }
      }
      if (!seg)
        return Error(Errc::internal, fmt::format("spool {}: batch {} is not in any segment",
                                                 spool_->options_.path, next_seq_));
      if (seg->first_seq != seg_first_) {
        seg_first_ = seg->first_seq;
        offset_ = 0;
        records_ = seg->records_before;
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
      }
      path = seg->path;
      offset = offset_;
    }
    if (fd_ < 0) {
      fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd_ < 0)
        return Error(Errc::io, fmt::format("spool {}: {}", path, std::strerror(errno)), true);
    }
    // Skip frames before the cursor (a reader opened in the middle of a segment).
    for (;;) {
      Header h;
      if (!pread_all(fd_, &h, kHeader, offset) || h.magic != kMagic)
        return Error(Errc::data,
                     fmt::format("spool {}: unreadable frame at offset {}", path, offset));
      if (h.seq < next_seq_) {
        offset += kHeader + h.length;
        records_ += h.records;
        continue;
      }
      if (h.seq != next_seq_)
        return Error(Errc::data, fmt::format("spool {}: expected batch {} at offset {}, found {}",
                                             path, next_seq_, offset, h.seq));
      auto payload = std::make_shared<std::string>(h.length, '\0');
      if (!pread_all(fd_, payload->data(), h.length, offset + kHeader) ||
          frame_crc(h, *payload) != h.crc)
        return Error(Errc::data, fmt::format("spool {}: batch {} at offset {} fails its CRC", path,
                                             h.seq, offset));
      offset += kHeader + h.length;
      records_ += h.records;
      offset_ = offset;
      ++next_seq_;
      {
        std::lock_guard lock(spool_->mu_);
        read_.push_back({h.seq, seg_first_, offset_, records_});
      }
      const std::string_view bytes(*payload);
      return std::optional<SpooledBatch>(
          SpooledBatch{h.seq, h.records, h.unix_ms, bytes, std::move(payload)});
    }
  }

  void release(uint64_t seq) override {
    std::lock_guard lock(spool_->mu_);
    ReaderState& st = spool_->readers_[name_];
    while (!read_.empty() && read_.front().seq <= seq) {
      st.released_seq = read_.front().seq;
      st.released_records = read_.front().records_after;
      st.seg_first = read_.front().seg_first;
      st.offset_after = read_.front().offset_after;
      read_.pop_front();
    }
    spool_->collect_locked();
  }

  bool at_end() const override {
    std::lock_guard lock(spool_->mu_);
    return spool_->finished_ && spool_->next_seq_ <= next_seq_;
  }

  // Positions the cursor right after `after` (holds mu_).
  void seek_locked(uint64_t after, const Segment& seg, uint64_t offset, uint64_t records) {
    next_seq_ = after + 1;
    seg_first_ = seg.first_seq;
    offset_ = offset;
    records_ = records;
  }

 private:
  friend class DiskSpool;
  struct Read {
    uint64_t seq, seg_first, offset_after, records_after;
  };
  DiskSpool* spool_;
  std::string name_;
  int fd_ = -1;
  uint64_t next_seq_ = 1;
  uint64_t seg_first_ = 0;
  uint64_t offset_ = 0;
  uint64_t records_ = 0;   // records of every frame before the cursor (relative)
  std::deque<Read> read_;  // read, not yet released (guarded by the spool's mu_)
};

// ---- spool ----------------------------------------------------------------------------------

DiskSpool::DiskSpool(DiskSpoolOptions options) : options_(std::move(options)) {
  for (const std::string& r : options_.readers) readers_[r];
}

DiskSpool::~DiskSpool() { close(); }

std::string DiskSpool::segment_path(uint64_t first_seq) const {
  return fmt::format("{}/{:020}{}", options_.path, first_seq, kSuffix);
}

Status DiskSpool::fail_io(const std::string& what, int err) const {
  // A full disk clears when a reader releases segments: the append is retried.
  return Error(Errc::io, fmt::format("spool {}: {}: {}", options_.path, what, std::strerror(err)),
               err == ENOSPC || err == EDQUOT);
}

Status DiskSpool::scan_segment(Segment& seg, bool last) {
  const int fd = ::open(seg.path.c_str(), last ? O_RDWR | O_CLOEXEC : O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail_io(seg.path, errno);
  struct stat st {};
  ::fstat(fd, &st);
  const auto size = static_cast<uint64_t>(st.st_size);
  uint64_t offset = 0;
  std::string payload;
  std::string problem;
  while (offset < size) {
    Header h;
    if (size - offset < kHeader || !pread_all(fd, &h, kHeader, offset)) {
      problem = "a frame header cut short";
      break;
    }
    if (h.magic != kMagic || h.length > size - offset - kHeader) {
      problem = h.magic != kMagic ? "no frame header" : "a frame cut short";
      break;
    }
    const uint64_t expect = seg.last_seq + 1;
    if (h.seq != expect) {
      problem = fmt::format("batch {} where {} was expected", h.seq, expect);
      break;
    }
    if (last) {
      payload.resize(h.length);
      if (!pread_all(fd, payload.data(), h.length, offset + kHeader) ||
          frame_crc(h, payload) != h.crc) {
        problem = "a CRC mismatch";
        break;
      }
      last_position_ = payload_position(payload);
    }
    offset += kHeader + h.length;
    seg.last_seq = h.seq;
    seg.records += h.records;
  }
  seg.bytes = offset;
  if (!problem.empty()) {
    if (!last) {
      ::close(fd);
      return Error(Errc::data,
                   fmt::format("spool {}: segment {} is corrupt at offset {} ({}); the spool "
                               "cannot be read past it: move the directory away and resnapshot "
                               "(sluice cleanup)",
                               options_.path, seg.path, offset, problem));
    }
    spdlog::warn(
        "spool {}: torn tail in {} at offset {} ({}): {} bytes truncated; the source sends that "
        "batch again (it was never acknowledged)",
        options_.path, std::filesystem::path(seg.path).filename().string(), offset, problem,
        size - offset);
    if (::ftruncate(fd, static_cast<off_t>(offset)) != 0 || ::fsync(fd) != 0) {
      const int err = errno;
      ::close(fd);
      return fail_io("truncating " + seg.path, err);
    }
  }
  ::close(fd);
  return ok_status();
}

Status DiskSpool::open() {
  std::unique_lock lock(mu_);
  std::error_code ec;
  std::filesystem::create_directories(options_.path, ec);
  if (ec)
    return Error(Errc::io, fmt::format("spool {}: cannot create the directory: {}", options_.path,
                                       ec.message()));
  std::vector<uint64_t> firsts;
  for (const auto& entry : std::filesystem::directory_iterator(options_.path, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.ends_with(kSuffix)) continue;
    uint64_t first = 0;
    const std::string_view digits(name.data(), name.size() - kSuffix.size());
    auto [end, perr] = std::from_chars(digits.data(), digits.data() + digits.size(), first);
    if (perr != std::errc() || end != digits.data() + digits.size() || first == 0) continue;
    firsts.push_back(first);
  }
  if (ec)
    return Error(Errc::io, fmt::format("spool {}: cannot list: {}", options_.path, ec.message()));
  std::sort(firsts.begin(), firsts.end());
  segments_.clear();
  uint64_t records = 0;
  for (size_t i = 0; i < firsts.size(); ++i) {
    Segment seg;
    seg.first_seq = firsts[i];
    seg.last_seq = firsts[i] - 1;
    seg.path = segment_path(firsts[i]);
    seg.records_before = records;
    if (!segments_.empty() && segments_.back().last_seq + 1 != seg.first_seq)
      return Error(Errc::data,
                   fmt::format("spool {}: segment {} follows one that ends at batch {}: a "
                               "segment is missing; move the directory away (sluice cleanup)",
                               options_.path, seg.path, segments_.back().last_seq));
    SLUICE_TRY(scan_segment(seg, i + 1 == firsts.size()));
    records += seg.records;
    disk_bytes_ += seg.bytes;
    segments_.push_back(std::move(seg));
  }
  total_records_ = records;
  if (segments_.empty()) {
    Segment seg;
    seg.first_seq = 1;
    seg.last_seq = 0;
    seg.path = segment_path(1);
    const int fd = ::open(seg.path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) return fail_io(seg.path, errno);
    ::close(fd);
    SLUICE_TRY(sync_dir(options_.path));
    segments_.push_back(std::move(seg));
  }
  next_seq_ = segments_.back().last_seq + 1;
  fd_ = ::open(segments_.back().path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd_ < 0) return fail_io(segments_.back().path, errno);
  origin_.clear();
  origin_readers_.clear();
  if (std::FILE* f = std::fopen((options_.path + "/origin").c_str(), "r")) {
    char buf[256] = {};
    for (bool first = true; std::fgets(buf, sizeof buf, f); first = false) {
      std::string line(buf, std::strcspn(buf, "\n"));
      if (first) origin_ = std::move(line);
      else if (!line.empty()) origin_readers_.push_back(std::move(line));
    }
    std::fclose(f);
  }
  // Readers have not said where they are yet: until they do, nothing is released.
  for (auto& [name, st] : readers_) st = ReaderState{};
  finished_ = false;
  open_ = true;
  collect_locked();
  return ok_status();
}

Status DiskSpool::roll_locked(std::unique_lock<std::mutex>&) {
  Segment seg;
  seg.first_seq = next_seq_;
  seg.last_seq = next_seq_ - 1;
  seg.path = segment_path(next_seq_);
  seg.records_before = total_records_;
  const int fd = ::open(seg.path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) return fail_io("creating " + seg.path, errno);
  if (Status st = sync_dir(options_.path); !st.ok()) {
    ::close(fd);
    return st;
  }
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
  segments_.push_back(std::move(seg));
  return ok_status();
}

Status DiskSpool::append(const Batch& batch, std::stop_token stop) {
  scratch_.assign(kHeader, '\0');
  encode_batch(batch, scratch_);
  const size_t frame = scratch_.size();
  Header h;
  h.length = static_cast<uint32_t>(frame - kHeader);
  h.unix_ms = now_unix_ms();
  h.records = static_cast<uint32_t>(batch.size());
  if (frame - kHeader > UINT32_MAX)
    return Error(Errc::invalid_argument, "spool: a batch of more than 4 GiB cannot be spooled");

  std::unique_lock lock(mu_);
  if (!open_) return Error(Errc::internal, "spool: append before open");
  if (options_.max_bytes > 0 && frame > options_.max_bytes)
    return Error(Errc::invalid_argument,
                 fmt::format("spool {}: a batch of {} bytes does not fit in spool.max_bytes ({} "
                             "bytes): raise spool.max_bytes or lower batch.max_bytes",
                             options_.path, frame, options_.max_bytes));
  for (;;) {
    Segment& active = segments_.back();
    const bool active_used = active.last_seq >= active.first_seq;
    const bool over =
        options_.max_bytes > 0 && disk_bytes_ + frame > options_.max_bytes && disk_bytes_ > 0;
    // Roll when the segment is full, or when the spool is full and every frame in it has been
    // released: the active segment can only go once it is no longer active.
    const bool all_released = min_released_locked() + 1 >= next_seq_;
    if (active_used && (active.bytes >= options_.segment_bytes || (over && all_released))) {
      SLUICE_TRY(roll_locked(lock));
      collect_locked();
      continue;
    }
    if (!over) break;
    if (options_.when_full == DiskSpoolOptions::WhenFull::fail)
      return Error(
          Errc::io,
          fmt::format("spool {} is full: {} bytes wait for the destination, spool.max_bytes "
                      "is {}: raise spool.max_bytes, or set spool.when_full: block to "
                      "hold the source back instead",
                      options_.path, disk_bytes_, options_.max_bytes));
    // Back-pressure: the source waits until a reader releases a segment.
    space_cv_.wait_for(lock, stop, std::chrono::milliseconds(200), [] { return false; });
    if (stop.stop_requested()) return Error(Errc::cancelled, "spool: stop requested while full");
  }
  Segment& active = segments_.back();
  const uint64_t offset = active.bytes;
  h.seq = next_seq_;
  lock.unlock();

  h.crc = frame_crc(h, std::string_view(scratch_).substr(kHeader));
  std::memcpy(scratch_.data(), &h, kHeader);
  if (!pwrite_all(fd_, scratch_.data(), frame, offset)) {
    const int err = errno;
    // Leave no partial frame behind (the next append writes at the same offset anyway).
    if (::ftruncate(fd_, static_cast<off_t>(offset)) != 0) {
    }
    return fail_io("write", err);
  }
  SLUICE_FAILPOINT("spool_after_write");
  if (options_.fsync && ::fdatasync(fd_) != 0) {
    const int err = errno;
    if (::ftruncate(fd_, static_cast<off_t>(offset)) != 0) {
    }
    return fail_io("fdatasync", err);
  }

  lock.lock();
  Segment& seg = segments_.back();
  seg.last_seq = h.seq;
  seg.bytes += frame;
  seg.records += h.records;
  total_records_ += h.records;
  disk_bytes_ += frame;
  next_seq_ = h.seq + 1;
  if (batch.has_position()) last_position_ = batch.position();
  collect_locked();
  lock.unlock();
  appended_cv_.notify_all();
  return ok_status();
}

uint64_t DiskSpool::min_released_locked() const {
  uint64_t m = UINT64_MAX;
  for (const auto& [name, st] : readers_) {
    if (!st.registered) return segments_.empty() ? 0 : segments_.front().first_seq - 1;
    m = std::min(m, st.released_seq);
  }
  return m == UINT64_MAX ? next_seq_ - 1 : m;
}

void DiskSpool::collect_locked() {
  const uint64_t released = min_released_locked();
  bool freed = false;
  // Never the segment holding the last frame (next_seq_ and the last position survive in it).
  while (segments_.size() > 1 && segments_.front().last_seq <= released &&
         segments_.front().last_seq + 1 < next_seq_) {
    Segment& s = segments_.front();
    if (::unlink(s.path.c_str()) != 0 && errno != ENOENT) {
      spdlog::warn("spool {}: cannot delete {}: {}", options_.path, s.path, std::strerror(errno));
      break;
    }
    disk_bytes_ -= s.bytes;
    segments_.pop_front();
    freed = true;
  }
  if (freed) (void)sync_dir(options_.path);
  // Depth: what the slowest reader has not released.
  SpoolDepth deepest;
  const ReaderState* slowest = nullptr;
  for (const auto& [name, st] : readers_) {
    const SpoolDepth d = reader_depth_locked(st);
    if (!slowest || d.records > deepest.records ||
        (d.records == deepest.records && d.bytes > deepest.bytes)) {
      deepest = d;
      slowest = &st;
    }
  }
  uint64_t records = deepest.records, bytes = deepest.bytes;
  if (released + 1 >= next_seq_) bytes = 0;
  depth_records_ = records;
  depth_bytes_ = bytes;
  // The oldest batch not released: its header (right after the slowest reader's released point)
  // holds its append time. One pread, whatever the segment's size.
  int64_t oldest = 0;
  if (released + 1 < next_seq_) {
    if (slowest && slowest->registered)
      oldest = frame_time_locked(slowest->seg_first, slowest->offset_after);
    else oldest = frame_time_locked(segments_.front().first_seq, 0);
  }
  oldest_ms_ = oldest;
  if (freed) space_cv_.notify_all();
}

SpoolDepth DiskSpool::reader_depth_locked(const ReaderState& st) const {
  SpoolDepth d;
  if (!st.registered) {
    d.records = total_records_ - segments_.front().records_before;
    d.bytes = disk_bytes_;
    return d;
  }
  d.records = total_records_ - std::min(total_records_, st.released_records);
  for (const Segment& s : segments_) {
    if (s.first_seq > st.seg_first) d.bytes += s.bytes;
    else if (s.first_seq == st.seg_first) d.bytes += s.bytes - std::min(s.bytes, st.offset_after);
  }
  if (st.released_seq == 0 && st.seg_first == 0) d.bytes = disk_bytes_;
  return d;
}

int64_t DiskSpool::frame_time_locked(uint64_t seg_first, uint64_t offset) const {
  for (const Segment& s : segments_) {
    if (s.first_seq < seg_first) continue;
    if (s.first_seq > seg_first) offset = 0;
    if (offset >= s.bytes) continue;  // that segment is done: the next one's first frame
    const int fd = ::open(s.path.c_str(), O_RDONLY | O_CLOEXEC);
    Header h;
    int64_t t = 0;
    if (fd >= 0 && pread_all(fd, &h, kHeader, offset) && h.magic == kMagic) t = h.unix_ms;
    if (fd >= 0) ::close(fd);
    return t;
  }
  return 0;
}

SpoolDepth DiskSpool::reader_depth(const std::string& name) const {
  std::lock_guard lock(mu_);
  auto it = readers_.find(name);
  if (it == readers_.end() || segments_.empty()) return {};
  const ReaderState& st = it->second;
  SpoolDepth d = reader_depth_locked(st);
  const bool registered_all = st.registered && st.released_seq + 1 >= next_seq_;
  if (registered_all || (!st.registered && segments_.front().first_seq >= next_seq_)) {
    d.records = 0;
    d.bytes = 0;
    return d;
  }
  d.oldest_unix_ms = st.registered ? frame_time_locked(st.seg_first, st.offset_after)
                                   : frame_time_locked(segments_.front().first_seq, 0);
  return d;
}

bool DiskSpool::covers_beginning(const std::string& name) const {
  std::lock_guard lock(mu_);
  if (segments_.empty() || segments_.front().first_seq != 1) return false;
  if (origin_ == "beginning") return true;
  return origin_ == "resumed" &&
         std::find(origin_readers_.begin(), origin_readers_.end(), name) != origin_readers_.end();
}

Status DiskSpool::mark_origin(bool beginning) {
  std::lock_guard lock(mu_);
  if (!origin_.empty()) return ok_status();
  // A spool that holds batches already but no origin was made before origins were recorded:
  // whether it covers the beginning is unknown (a new destination is refused).
  if (next_seq_ > 1 || segments_.empty() || segments_.front().first_seq != 1) {
    origin_ = "unknown";
    return ok_status();
  }
  const std::string text = beginning ? "beginning" : "resumed";
  const std::string path = options_.path + "/origin";
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) return fail_io(tmp, errno);
  std::string line = text + "\n";
  for (const auto& [name, st] : readers_) line += name + "\n";
  if (!pwrite_all(fd, line.data(), line.size(), 0) || ::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return fail_io("writing " + tmp, err);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail_io("renaming " + tmp, errno);
  SLUICE_TRY(sync_dir(options_.path));
  origin_ = text;
  origin_readers_.clear();
  for (const auto& [name, st] : readers_) origin_readers_.push_back(name);
  return ok_status();
}

std::optional<std::string> DiskSpool::last_position() const {
  std::lock_guard lock(mu_);
  return last_position_;
}

Result<std::unique_ptr<SpoolReader>> DiskSpool::open_reader(const std::string& name,
                                                            std::optional<uint64_t> after_seq) {
  std::lock_guard lock(mu_);
  auto it = readers_.find(name);
  if (it == readers_.end())
    return Error(Errc::internal,
                 fmt::format("spool {}: no reader named '{}'", options_.path, name));
  auto reader = std::make_unique<Reader>(this, name);
  const uint64_t last = next_seq_ - 1;
  const Segment& front = segments_.front();
  uint64_t after = after_seq.value_or(front.first_seq - 1);
  if (after > last)
    return Error(Errc::data,
                 fmt::format("spool {} ends at batch {}, but the {} checkpoint says batch {} was "
                             "delivered: the spool was removed or replaced; reset the pipeline "
                             "(sluice cleanup) to start again",
                             options_.path, last, name, after));
  if (after + 1 < front.first_seq)
    return Error(Errc::data,
                 fmt::format("spool {} starts at batch {}, but the {} checkpoint is at batch {}: "
                             "the batches between are gone; reset the pipeline (sluice cleanup)",
                             options_.path, front.first_seq, name, after));
  // The segment holding batch after+1 (or the active one when the reader is at the end).
  const Segment* seg = &segments_.back();
  for (const Segment& s : segments_)
    if (s.first_seq <= after + 1 && after + 1 <= s.last_seq) {
      seg = &s;
      break;
    }
  // The cursor starts at the segment's beginning; next() skips to after+1. For the release
  // bookkeeping, the released point is the segment start (records and bytes are then counted
  // from there until the first release).
  reader->seek_locked(after, *seg, 0, seg->records_before);
  ReaderState& st = it->second;
  st.registered = true;
  st.released_seq = after;
  st.released_records = seg->records_before;
  st.seg_first = seg->first_seq;
  st.offset_after = 0;
  if (after == last) {
    st.released_records = total_records_;
    st.offset_after = seg->bytes;
  }
  collect_locked();
  return std::unique_ptr<SpoolReader>(std::move(reader));
}

void DiskSpool::finish() {
  {
    std::lock_guard lock(mu_);
    finished_ = true;
  }
  appended_cv_.notify_all();
}

SpoolDepth DiskSpool::depth() const {
  return SpoolDepth{depth_records_.load(), depth_bytes_.load(), oldest_ms_.load()};
}

void DiskSpool::close() noexcept {
  std::lock_guard lock(mu_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  open_ = false;
}

size_t DiskSpool::segment_count() const {
  std::lock_guard lock(mu_);
  return segments_.size();
}

uint64_t DiskSpool::disk_bytes() const {
  std::lock_guard lock(mu_);
  return disk_bytes_;
}

}  // namespace sluice::spool
