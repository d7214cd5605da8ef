// Record → Kafka message encodings of the kafka destination: the message key (compact JSON of the
// record key) and the Debezium change-event envelope as Debezium's JsonConverter writes it with
// schemas.enable=false:
//
//   {"before":{...}|null,"after":{...}|null,
//    "source":{"version":"…","connector":"…","name":"<topic.prefix>","ts_ms":…,"snapshot":"true|false",
//              "db":…,"sequence":null,"schema":…,"table":…,"txId":…,"lsn":…,"xmin":null},
//              (binlog sources: Debezium's MySQL block: db, sequence, table, server_id, gtid, file,
//              pos, row, thread, query)
//    "op":"c|u|d|r|t","ts_ms":…,"transaction":null}
//
// Values follow Debezium's default converters (decimal.handling.mode=string,
// time.precision.mode=adaptive_time_microseconds, interval.handling.mode=numeric,
// binary.handling.mode=bytes): see docs/kafka.md for the table.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sluice/record.h"

namespace sluice::kafka {

// One value the way Debezium's JsonConverter renders it (schemas disabled).
void encode_debezium_value(const Value& v, std::string& out);

// The message key: compact JSON of the record key ({"id":1}); `debezium` maps the values like
// encode_debezium_value, otherwise like the OpenCDC codec. Returns false (nothing appended) when
// the record has no key: the message gets a null key.
bool encode_key(const Record& r, bool debezium, std::string& out);

struct DebeziumSource {
  std::string_view name;     // source.name: the topic prefix
  std::string_view version;  // source.version
  int64_t now_ms = 0;  // top-level ts_ms (processing time); also source.ts_ms without a commit time
};

// The Debezium op letter of a record: r (snapshot), c, u, d, t (truncate).
char debezium_op(const Record& r) noexcept;

// Appends the envelope of `r`.
void encode_debezium_envelope(const Record& r, const DebeziumSource& src, std::string& out);

// "16/B374D848" → 0x16B374D848; false when `text` is not an LSN.
bool parse_pg_lsn(std::string_view text, uint64_t* out) noexcept;

}  // namespace sluice::kafka
