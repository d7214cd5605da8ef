// libFuzzer target: the Kafka message formats — decoding a message into a record in each source
// format (src/connectors/common/message_formats.h) and encoding the decoded record the way the
// kafka destination does (message key and Debezium envelope,
// src/connectors/common/debezium_json.h).
//
// Input: byte 0 selects the format (opencdc, debezium, raw) and whether there is a key and a
// header; byte 1 is the key length (0-255) when there is one; the rest is key then value.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "connectors/common/debezium_json.h"
#include "connectors/common/message_formats.h"
#include "sluice/batch.h"

namespace kf = sluice::kafka;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t mode = data[0];
  const kf::Format format = mode % 3 == 0   ? kf::Format::opencdc
                            : mode % 3 == 1 ? kf::Format::debezium
                                            : kf::Format::raw;
  const bool has_key = mode & 0x10;
  const bool tombstone = (mode & 0x60) == 0x60;
  std::string_view rest(reinterpret_cast<const char*>(data) + 2, size - 2);
  const size_t key_len = has_key ? std::min<size_t>(data[1], rest.size()) : 0;
  // Owned copies of exactly their size so AddressSanitizer catches reads past either end.
  const std::string key(rest.substr(0, key_len)), value(rest.substr(key_len));
  const std::pair<std::string_view, std::string_view> headers[] = {{"trace", "t-1"}};

  kf::MessageView m;
  m.topic = "fuzz.public.t";
  m.partition = 1;
  m.offset = 42;
  if (has_key) m.key = key;
  if (!tombstone) m.value = value;
  m.timestamp_ms = (mode & 0x80) ? 1709214300000 : -1;
  if (mode & 0x08) m.headers = headers;

  kf::MessageDecoder decoder(format);
  sluice::Batch batch(4096);
  if (!decoder.decode(m, batch).ok()) return 0;
  for (const sluice::Record& r : batch.records()) {
    std::string out;
    (void)kf::encode_key(r, true, out);
    out.clear();
    (void)kf::encode_key(r, false, out);
    out.clear();
    kf::encode_debezium_envelope(r, kf::DebeziumSource{"fuzz", "0.0.0", 1709214300000}, out);
  }
  uint64_t lsn;
  (void)kf::parse_pg_lsn(value, &lsn);
  (void)kf::decimal_from_unscaled(key, int32_t(mode) - 128);
  return 0;
}
