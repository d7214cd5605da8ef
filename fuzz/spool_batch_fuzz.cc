// libFuzzer target: the spool's batch codec (src/runtime/spool/batch_codec.cc) on raw bytes.
// decode_batch must reject malformed input with an error, never crash or read past the input;
// and what it accepts must survive encode → decode → encode unchanged (the destination side of a
// spool reads back what the source side wrote: a difference is lost or altered data).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "support/spool/batch_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  sluice::Batch batch(4096);
  if (!sluice::spool::decode_batch(input, batch).ok()) return 0;
  std::string first;
  sluice::spool::encode_batch(batch, first);
  sluice::Batch again(4096);
  if (!sluice::spool::decode_batch(first, again).ok()) {
    std::fprintf(stderr, "re-decoding the encoder's output failed\n");
    std::abort();
  }
  if (again.size() != batch.size() || again.position() != batch.position()) std::abort();
  for (size_t i = 0; i < batch.size(); ++i) {
    const sluice::Record& a = batch.records()[i];
    const sluice::Record& b = again.records()[i];
    if (a.op != b.op || a.position != b.position || !(a.metadata == b.metadata) ||
        !(a.key == b.key) || !(a.before == b.before) || !(a.after == b.after))
      std::abort();
  }
  std::string second;
  sluice::spool::encode_batch(again, second);
  if (second != first) std::abort();
  return 0;
}
