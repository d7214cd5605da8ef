// The `file` destination: appends each record as one OpenCDC JSON line. Writes are synchronous; a
// batch is reported durable after its lines are written and (with `sync`) fsynced. Delivery is
// at-least-once, so after a crash the file may repeat the records of the batch in flight.
//
// A crash can also leave a torn last line. On open, an unfinished last line is completed with a
// newline when it is a whole record, and cut off otherwise (it was never reported durable; the
// source will send it again), so readers never meet a broken line.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "connectors/file/file_connector.h"
#include "sluice/json.h"

namespace sluice::file {

namespace {

// Encoded lines are written out whenever this much is buffered, bounding memory for big batches.
constexpr size_t kWriteChunk = 4u << 20;

class FileDestination final : public Destination {
 public:
  FileDestination(std::string path, bool sync) : path_(std::move(path)), sync_(sync) {}
  ~FileDestination() override { close(); }

  Status open(const ConnectorContext&) override {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0)
      return Error(Errc::io,
                   fmt::format("file destination: cannot open '{}' for appending: {}; check that "
                               "its directory exists and is writable (setting `path`)",
                               path_, std::strerror(errno)));
    struct stat st;
    if (::fstat(fd_, &st) != 0) return io_error("cannot stat");
    size_ = uint64_t(st.st_size);
    return repair_tail();
  }

  // `sluice doctor`: the file (or, before the first run, its directory) is writable; nothing is
  // created.
  Result<std::vector<DoctorCheck>> doctor(const ConnectorContext&,
                                          const std::vector<SourceTable>&) override {
    using O = DoctorCheck::Outcome;
    struct stat st;
    if (::stat(path_.c_str(), &st) == 0) {
      if (::access(path_.c_str(), W_OK) == 0)
        return std::vector<DoctorCheck>{{O::pass, "the file can be appended to", path_, {}}};
      return std::vector<DoctorCheck>{{O::fail, "the file can be appended to",
                                       fmt::format("{}: {}", path_, std::strerror(errno)),
                                       "make it writable by sluice, or fix `path`"}};
    }
    const size_t slash = path_.rfind('/');
    const std::string dir = slash == std::string::npos ? "."
                            : slash == 0               ? "/"
                                                       : path_.substr(0, slash);
    if (::access(dir.c_str(), W_OK) == 0)
      return std::vector<DoctorCheck>{{O::pass,
                                       "the file can be created",
                                       fmt::format("not created yet; {} is writable", dir),
                                       {}}};
    return std::vector<DoctorCheck>{
        {O::fail, "the file can be created", fmt::format("{}: {}", dir, std::strerror(errno)),
         "create the directory and make it writable by sluice, or fix `path`"}};
  }

  void write(Batch& batch, WriteDone done) override { done(write_batch(batch)); }

  void close() noexcept override {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  Error io_error(std::string_view what) const {
    return Error(Errc::io,
                 fmt::format("file destination: {} '{}': {}", what, path_, std::strerror(errno)),
                 /*retriable=*/true);
  }

  Status write_batch(const Batch& batch) {
    if (fd_ < 0) return Error(Errc::internal, "file destination: write before open");
    const uint64_t batch_start = size_;
    buf_.clear();
    for (const Record& r : batch.records()) {
      encode_record_json(r, buf_);
      buf_ += '\n';
      if (buf_.size() >= kWriteChunk) {
        if (Status st = write_out(batch_start); !st.ok()) return st;
      }
    }
    if (Status st = write_out(batch_start); !st.ok()) return st;
    if (sync_ && ::fdatasync(fd_) != 0) return io_error("cannot sync");
    return ok_status();
  }

  // Appends buf_; on failure cuts the file back to `batch_start` so no partial batch (or torn line)
  // stays behind for a retry to append after.
  Status write_out(uint64_t batch_start) {
    const char* p = buf_.data();
    size_t left = buf_.size();
    while (left > 0) {
      ssize_t n = ::write(fd_, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        Error err = io_error("cannot write to");
        if (::ftruncate(fd_, off_t(batch_start)) == 0) size_ = batch_start;
        return err;
      }
      p += n;
      left -= size_t(n);
      size_ += uint64_t(n);
    }
    buf_.clear();
    return ok_status();
  }

  // See the file comment: completes or cuts an unfinished last line.
  Status repair_tail() {
    if (size_ == 0) return ok_status();
    char last;
    if (::pread(fd_, &last, 1, off_t(size_ - 1)) != 1) return io_error("cannot read");
    if (last == '\n') return ok_status();
    // Find the start of the last line, reading backwards.
    uint64_t line_start = 0;
    char chunk[64 * 1024];
    for (uint64_t end = size_; end > 0 && line_start == 0;) {
      const uint64_t begin = end > sizeof chunk ? end - sizeof chunk : 0;
      const ssize_t n = ::pread(fd_, chunk, size_t(end - begin), off_t(begin));
      if (n != ssize_t(end - begin)) return io_error("cannot read");
      for (ssize_t i = n - 1; i >= 0; --i)
        if (chunk[i] == '\n') {
          line_start = begin + uint64_t(i) + 1;
          break;
        }
      end = begin;
    }
    std::string tail(size_t(size_ - line_start), '\0');
    if (::pread(fd_, tail.data(), tail.size(), off_t(line_start)) != ssize_t(tail.size()))
      return io_error("cannot read");
    Batch scratch(4096);
    if (decode_record_json(tail, scratch).ok()) {
      buf_.assign(1, '\n');
      if (Status st = write_out(size_); !st.ok()) return st;
    } else {
      if (::ftruncate(fd_, off_t(line_start)) != 0)
        return io_error("cannot truncate the torn last line of");
      size_ = line_start;
    }
    if (::fsync(fd_) != 0) return io_error("cannot sync");
    return ok_status();
  }

  std::string path_;
  bool sync_;
  int fd_ = -1;
  uint64_t size_ = 0;  // file size as written by this destination
  std::string buf_;    // encoded lines not yet written (reused across batches)
};

}  // namespace

Result<std::unique_ptr<Destination>> make_destination(const Settings& s) {
  SLUICE_TRY_ASSIGN(DestinationOptions o, destination_options(s));
  return std::unique_ptr<Destination>(std::make_unique<FileDestination>(std::move(o.path), o.sync));
}

}  // namespace sluice::file
