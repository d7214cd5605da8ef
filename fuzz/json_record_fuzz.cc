// libFuzzer target: the OpenCDC JSON record codec (include/sluice/json.h, src/core/json.cc).
// decode_record_json must reject malformed lines with an error, never crash; and what it accepts
// must survive encode → decode → encode unchanged (the file destination writes what the file
// source reads back: a difference is lost or altered data).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "sluice/batch.h"
#include "sluice/json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string line(reinterpret_cast<const char*>(data), size);
  sluice::Batch batch(4096);
  if (!sluice::decode_record_json(line, batch).ok()) return 0;
  if (batch.size() != 1) std::abort();
  std::string first;
  sluice::encode_record_json(batch.records()[0], first);

  sluice::Batch again(4096);
  sluice::Status s = sluice::decode_record_json(first, again);
  if (!s.ok()) {
    std::fprintf(stderr, "re-decoding the encoder's output failed: %s\n%s\n",
                 s.error().message().c_str(), first.c_str());
    std::abort();
  }
  std::string second;
  sluice::encode_record_json(again.records()[0], second);
  if (second != first) {
    std::fprintf(stderr, "round trip changed the record:\n%s\n%s\n", first.c_str(), second.c_str());
    std::abort();
  }
  std::string b64 = sluice::base64_encode(std::string_view(line).substr(0, 64)), back;
  if (!sluice::base64_decode(b64, &back) || back != std::string_view(line).substr(0, 64))
    std::abort();
  return 0;
}
