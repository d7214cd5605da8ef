// The kafka destination's compressed-size estimate: every codec librdkafka offers, on data that
// compresses and data that does not, split into parts as a message's key, value and headers are.
#include "connectors/kafka/kafka_compression.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sluice::kafka {
namespace {

std::string hex_noise(size_t n) {
  std::string v(n, '0');
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (char& c : v) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = "0123456789abcdef"[x & 15];
  }
  return v;
}

TEST(KafkaCompressedSize, EveryCodecShrinksRepetitionAndNotNoise) {
  const std::string same(2500, 'v'), noise = hex_noise(2500);
  for (const char* codec : {"lz4", "zstd", "snappy", "gzip"}) {
    const std::vector<std::string_view> parts{"{\"id\":1}", same};
    const auto small = compressed_size(codec, -1, parts);
    ASSERT_TRUE(small.has_value()) << codec;
    EXPECT_LT(*small, 200u) << codec;
    const std::vector<std::string_view> noisy{"{\"id\":1}", noise};
    const auto big = compressed_size(codec, -1, noisy);
    ASSERT_TRUE(big.has_value()) << codec;
    // Hex digits carry 4 bits per byte: entropy coders (zstd, gzip) halve them, LZ-only codecs
    // (lz4, snappy) keep them whole.
    EXPECT_GT(*big, 1200u) << codec;
    if (std::string_view(codec) == "lz4" || std::string_view(codec) == "snappy") {
      EXPECT_GE(*big, 2500u) << codec;
    }
  }
}

TEST(KafkaCompressedSize, PartsAreCompressedAsOneMessage) {
  const std::string noise = hex_noise(3000);
  const std::vector<std::string_view> whole{noise};
  const std::vector<std::string_view> split{std::string_view(noise).substr(0, 1000),
                                            std::string_view(noise).substr(1000)};
  EXPECT_EQ(compressed_size("zstd", 3, whole), compressed_size("zstd", 3, split));
  EXPECT_EQ(compressed_size("lz4", -1, whole), compressed_size("lz4", -1, split));
}

TEST(KafkaCompressedSize, LevelMinusOneIsTheCodecsDefaultAndAnUnknownCodecHasNoSize) {
  const std::string text = [] {
    std::string t;
    for (int i = 0; i < 400; ++i) t += "row " + std::to_string(i * 7919 % 1000) + " value; ";
    return t;
  }();
  const std::vector<std::string_view> parts{text};
  // librdkafka's defaults: gzip 6 (Z_DEFAULT_COMPRESSION), zstd 3, lz4 0; the level is used.
  EXPECT_EQ(compressed_size("gzip", -1, parts), compressed_size("gzip", 6, parts));
  EXPECT_EQ(compressed_size("zstd", -1, parts), compressed_size("zstd", 3, parts));
  EXPECT_EQ(compressed_size("lz4", -1, parts), compressed_size("lz4", 0, parts));
  EXPECT_NE(compressed_size("zstd", 19, parts), compressed_size("zstd", 1, parts));
  EXPECT_FALSE(compressed_size("brotli", -1, parts).has_value());
  EXPECT_FALSE(compressed_size("none", -1, parts).has_value());
}

}  // namespace
}  // namespace sluice::kafka
