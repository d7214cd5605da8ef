// libFuzzer target: the pgoutput decoder (src/connectors/postgres/pgoutput.h) on one XLogData
// payload. The decoder promises that malformed or truncated input is an Errc::data error, never a
// crash or a read outside the payload. The input is copied to a heap buffer of exactly its size so
// AddressSanitizer sees a read one byte past the end.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>

#include "connectors/postgres/pgoutput.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<char[]> copy(new char[size ? size : 1]);
  if (size) std::memcpy(copy.get(), data, size);
  const std::string_view payload(copy.get(), size);
  sluice::pg::Message m;
  sluice::Status s = sluice::pg::decode_pgoutput(payload, &m);
  if (s.ok()) {
    // Decoding into a message that already holds tuples exercises the storage reuse path.
    (void)sluice::pg::decode_pgoutput(payload, &m);
  }
  return 0;
}
