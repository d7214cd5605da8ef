// Decoding change-event messages into records: Kafka messages for the kafka source, and the entries
// of Redis streams for the redis source (its `debezium` and `opencdc` formats), which set `where`
// and turn the kafka.* metadata off. Three formats:
//
//   opencdc   the value is one OpenCDC JSON record (sluice/json.h); its own metadata is kept.
//   debezium  the value is a Debezium change event, with or without the {"schema":…,"payload":…}
//             wrapper of JsonConverter schemas.enable=true; op c/u/d/r/t → create/update/delete/
//             snapshot/truncate; source.schema (or source.db) and source.table → metadata; the key
//             from the message key (payload unwrapped). With a schema, io.debezium.time.*,
//             Kafka Connect Date/Time/Timestamp/Decimal, VariableScaleDecimal, Uuid, Json and bytes
//             fields get their sluice kinds back.
//   raw       key = {"key": message key}, after = {"value": message value}, each a string when it
//             is UTF-8 and bytes otherwise; metadata table = the topic. A tombstone with a key is a
//             delete of that key.
//
// Every record also gets metadata kafka.topic, kafka.partition, kafka.offset, kafka.timestamp
// (ISO 8601, UTC; when the message has one) and the message headers (names as they are; a header
// never overrides metadata the record already has). A tombstone (null value) is skipped in the
// opencdc and debezium formats. A message that cannot be decoded is an Errc::data error naming the
// topic, partition and offset.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <utility>

#include "sluice/batch.h"
#include "sluice/result.h"

namespace sluice::kafka {

enum class Format { opencdc, debezium, raw };

bool parse_format(std::string_view name, Format* out) noexcept;

struct MessageView {
  std::string_view topic;
  int32_t partition = 0;
  int64_t offset = 0;
  std::optional<std::string_view> key;    // nullopt: null key
  std::optional<std::string_view> value;  // nullopt: tombstone
  int64_t timestamp_ms = -1;              // -1: none
  std::span<const std::pair<std::string_view, std::string_view>> headers = {};
  // Not Kafka (the redis source): no kafka.* metadata, and errors name `where` (e.g. "stream 'x'
  // entry 1-0") instead of the topic, partition and offset.
  bool kafka_metadata = true;
  std::string_view where = {};
};

class MessageDecoder {
 public:
  explicit MessageDecoder(Format format);
  ~MessageDecoder();
  MessageDecoder(const MessageDecoder&) = delete;
  MessageDecoder& operator=(const MessageDecoder&) = delete;

  // Appends zero records (tombstone skipped) or one record to `batch`; its memory is in the batch
  // arena. On error nothing is appended.
  Status decode(const MessageView& m, Batch& batch);

 private:
  struct State;
  Format format_;
  std::unique_ptr<State> st_;
};

// A string Value when `s` is valid UTF-8 (checked with SIMD), bytes otherwise; copied into `arena`.
// The Kafka and Redis sources read a payload, a key or a stream field this way.
Value text_or_bytes(Arena& arena, std::string_view s);

// Kafka Connect Decimal: big-endian two's-complement unscaled bytes and a scale → "-12.340".
std::string decimal_from_unscaled(std::string_view be_bytes, int32_t scale);

}  // namespace sluice::kafka
