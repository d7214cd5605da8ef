// The `file` source: reads OpenCDC JSON lines. The position is the byte offset just past the last
// consumed line (decimal text), so a restart resumes at the first line not yet acknowledged. With
// `follow`, the end of the file is not the end of the source: appended lines are picked up, and a
// last line without its newline is left alone until it is complete (a writer may be mid-line).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <thread>

#include "connectors/file/file_connector.h"
#include "sluice/json.h"

namespace sluice::file {

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kInitialBuffer = 1u << 20;
// How often a following source looks for appended data while waiting.
constexpr auto kFollowPoll = std::chrono::milliseconds(10);

bool blank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

class FileSource final : public Source {
 public:
  FileSource(std::string path, bool follow) : path_(std::move(path)), follow_(follow) {}
  ~FileSource() override { close(); }

  Status open(const ConnectorContext&, const std::optional<std::string>& checkpoint) override {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0)
      return Error(Errc::io,
                   fmt::format("file source: cannot open '{}': {}; check the `path` setting "
                               "(the file must exist and be readable)",
                               path_, std::strerror(errno)));
    offset_ = 0;
    if (checkpoint) {
      const char* b = checkpoint->data();
      const char* e = b + checkpoint->size();
      auto [p, ec] = std::from_chars(b, e, offset_);
      if (ec != std::errc() || p != e || b == e)
        return Error(Errc::data,
                     fmt::format("file source: checkpoint '{}' is not a byte offset; remove "
                                 "the pipeline's checkpoint to read '{}' from the start",
                                 *checkpoint, path_));
      struct stat st;
      if (::fstat(fd_, &st) != 0) return io_error("cannot stat");
      if (uint64_t(st.st_size) < offset_)
        return Error(Errc::data,
                     fmt::format("file source: checkpoint offset {} is past the end of '{}' "
                                 "({} bytes): the file was truncated or replaced; remove the "
                                 "pipeline's checkpoint to read it from the start",
                                 offset_, path_, st.st_size));
      if (::lseek(fd_, off_t(offset_), SEEK_SET) < 0) return io_error("cannot seek in");
    }
    buf_.reset(new char[kInitialBuffer]);
    cap_ = kInitialBuffer;
    head_ = tail_ = scan_ = 0;
    return ok_status();
  }

  Result<ReadStatus> read(Batch& batch, const ReadRequest& req, std::stop_token stop) override {
    const auto start = Clock::now();
    Clock::time_point first =
        start;  // when the batch got its first record (linger runs from there)
    const uint64_t start_offset = offset_;
    auto finish = [&](ReadStatus s) -> Result<ReadStatus> {
      if (offset_ != start_offset) set_position(batch);
      return s;
    };

    while (true) {
      // Consume the complete lines already buffered.
      while (batch.size() < req.max_records && batch.bytes() < req.max_bytes) {
        const char* nl =
            static_cast<const char*>(std::memchr(buf_.get() + scan_, '\n', tail_ - scan_));
        if (!nl) {
          scan_ = tail_;
          break;
        }
        const size_t end = size_t(nl - buf_.get());
        const bool was_empty = batch.empty();
        Status st = consume_line(batch, end, end + 1);
        if (!st.ok()) {
          // Hand over what was read before the bad line; the next read reports it.
          if (batch.size() > 0 && offset_ != start_offset) return finish(ReadStatus::more);
          return std::move(st).error();
        }
        if (was_empty && !batch.empty()) first = Clock::now();
      }
      if (batch.size() >= req.max_records || batch.bytes() >= req.max_bytes)
        return finish(ReadStatus::more);

      Result<size_t> got = fill();
      if (!got.ok()) return std::move(got).error();
      if (got.value() > 0) continue;

      // At the end of the file.
      if (!follow_) {
        if (head_ < tail_) {  // a last line without a newline is complete once the file has ended
          Status st = consume_line(batch, tail_, tail_);
          if (!st.ok()) {
            if (batch.size() > 0 && offset_ != start_offset) return finish(ReadStatus::more);
            return std::move(st).error();
          }
        }
        return finish(ReadStatus::end);
      }
      if (Status st = check_not_truncated(); !st.ok()) return std::move(st).error();
      const auto deadline = batch.empty() ? start + req.poll : first + req.linger;
      const auto now = Clock::now();
      if (now >= deadline || stop.stop_requested()) return finish(ReadStatus::idle);
      std::this_thread::sleep_for(std::min<Clock::duration>(deadline - now, kFollowPoll));
    }
  }

  void ack(std::string_view) override {}  // nothing to release: the file is only read

  void close() noexcept override {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  Error io_error(std::string_view what) const {
    return Error(Errc::io,
                 fmt::format("file source: {} '{}': {}", what, path_, std::strerror(errno)));
  }

  // Decodes the buffered line [head_, end) and moves past it to `next` (end + 1 after a newline).
  Status consume_line(Batch& batch, size_t end, size_t next) {
    std::string_view line(buf_.get() + head_, end - head_);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const uint64_t line_offset = offset_;
    if (!blank(line)) {
      Status st = decode_record_json(line, batch);
      if (!st.ok())
        return st.error().with_context(
            fmt::format("file source: '{}' at byte offset {}: ", path_, line_offset));
      // The record's position is this source's: the offset just past its line.
      char pos[24];
      auto* e = std::to_chars(pos, pos + sizeof pos, offset_ + (next - head_)).ptr;
      batch.records().back().position = batch.copy({pos, size_t(e - pos)});
    }
    offset_ += next - head_;
    head_ = next;
    if (scan_ < head_) scan_ = head_;
    return ok_status();
  }

  void set_position(Batch& batch) const {
    char pos[24];
    auto* e = std::to_chars(pos, pos + sizeof pos, offset_).ptr;
    batch.set_position({pos, size_t(e - pos)});
  }

  // Reads more of the file into the buffer; returns the bytes read (0 at the end of the file).
  Result<size_t> fill() {
    if (head_ > 0 && (tail_ == cap_ || head_ >= cap_ / 2)) {  // reclaim consumed space
      std::memmove(buf_.get(), buf_.get() + head_, tail_ - head_);
      tail_ -= head_;
      scan_ -= head_;
      head_ = 0;
    }
    if (tail_ == cap_) {  // one line longer than the buffer: grow it
      std::unique_ptr<char[]> b(new char[cap_ * 2]);
      std::memcpy(b.get(), buf_.get(), tail_);
      buf_ = std::move(b);
      cap_ *= 2;
    }
    while (true) {
      ssize_t n = ::read(fd_, buf_.get() + tail_, cap_ - tail_);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return io_error("cannot read");
      tail_ += size_t(n);
      return size_t(n);
    }
  }

  // A followed file that shrank below what was read was truncated or replaced in place: continuing
  // would silently skip or repeat data.
  Status check_not_truncated() const {
    struct stat st;
    if (::fstat(fd_, &st) != 0) return io_error("cannot stat");
    if (uint64_t(st.st_size) < offset_ + (tail_ - head_))
      return Error(Errc::io,
                   fmt::format("file source: '{}' shrank to {} bytes below the read offset {} "
                               "(truncated while followed); restart the pipeline after removing "
                               "its checkpoint to read it again",
                               path_, st.st_size, offset_ + (tail_ - head_)));
    return ok_status();
  }

  std::string path_;
  bool follow_;
  int fd_ = -1;
  uint64_t offset_ = 0;  // file offset of buf_[head_]: everything before it is consumed
  std::unique_ptr<char[]> buf_;
  size_t cap_ = 0;
  size_t head_ = 0;  // first unconsumed byte
  size_t tail_ = 0;  // end of the bytes read
  size_t scan_ = 0;  // bytes in [head_, scan_) hold no newline
};

}  // namespace

Result<std::unique_ptr<Source>> make_source(const Settings& s) {
  SLUICE_TRY_ASSIGN(SourceOptions o, source_options(s));
  return std::unique_ptr<Source>(std::make_unique<FileSource>(std::move(o.path), o.follow));
}

}  // namespace sluice::file
