#include "connectors/kafka/kafka_compression.h"

#include <lz4frame.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include <string>
#include <vector>

namespace sluice::kafka {

std::optional<size_t> compressed_size(std::string_view codec, int level,
                                      std::span<const std::string_view> parts) {
  std::string in;
  size_t n = 0;
  for (std::string_view p : parts) n += p.size();
  in.reserve(n);
  for (std::string_view p : parts) in.append(p);
  std::vector<char> out;
  if (codec == "lz4") {
    // librdkafka: one LZ4 frame, independent blocks, its default level 0.
    LZ4F_preferences_t prefs{};
    prefs.frameInfo.blockMode = LZ4F_blockIndependent;
    prefs.compressionLevel = level < 0 ? 0 : level;
    out.resize(LZ4F_compressFrameBound(in.size(), &prefs));
    const size_t r = LZ4F_compressFrame(out.data(), out.size(), in.data(), in.size(), &prefs);
    if (LZ4F_isError(r)) return std::nullopt;
    return r;
  }
  if (codec == "zstd") {
    // librdkafka's default zstd level is 3 (ZSTD_CLEVEL_DEFAULT).
    out.resize(ZSTD_compressBound(in.size()));
    const size_t r = ZSTD_compress(out.data(), out.size(), in.data(), in.size(),
                                   level < 0 ? ZSTD_CLEVEL_DEFAULT : level);
    if (ZSTD_isError(r)) return std::nullopt;
    return r;
  }
  if (codec == "snappy") {
    size_t len = snappy_max_compressed_length(in.size());
    out.resize(len);
    if (snappy_compress(in.data(), in.size(), out.data(), &len) != SNAPPY_OK) return std::nullopt;
    return len;
  }
  if (codec == "gzip") {
    // librdkafka: a gzip stream (deflate, window 15, memLevel 8), Z_DEFAULT_COMPRESSION unless set.
    z_stream z{};
    if (deflateInit2(&z, level < 0 ? Z_DEFAULT_COMPRESSION : level, Z_DEFLATED, 15 + 16, 8,
                     Z_DEFAULT_STRATEGY) != Z_OK)
      return std::nullopt;
    out.resize(deflateBound(&z, in.size()));
    z.next_in = reinterpret_cast<Bytef*>(in.data());
    z.avail_in = static_cast<uInt>(in.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    const int r = deflate(&z, Z_FINISH);
    const size_t len = z.total_out;
    deflateEnd(&z);
    if (r != Z_STREAM_END) return std::nullopt;
    return len;
  }
  return std::nullopt;
}

}  // namespace sluice::kafka
