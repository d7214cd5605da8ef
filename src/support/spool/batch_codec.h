// The spool's binary form of a batch: what a batch holds once the source side is done with it
// (its position, and each record's operation, position, metadata, key, before and after), so that
// the destination side reads back exactly what the processors produced.
//
//   batch  := varint(len) position · varint(n) record{n}
//   record := u8 op · varint(len) position · value metadata · value key · value before · value
//   after value  := u8 kind · payload (absent/null: none; bool: u8; int64, date, time, timestamp*:
//             zigzag varint; uint64: varint; float64: 8 bytes LE; decimal/string/bytes/json:
//             varint(len) bytes; timetz: zigzag micros · zigzag offset; interval: zigzag months ·
//             days · micros; uuid: 16 bytes; array: varint(n) value{n}; object: varint(n)
//             (varint(len) name · value){n})
//
// Absent and null are distinct kinds, so an unchanged TOAST column stays absent. The encoding has
// no framing or checksum of its own: the disk spool wraps each batch in a CRC-checked frame.
#pragma once

#include <string>
#include <string_view>

#include "sluice/batch.h"
#include "sluice/result.h"

namespace sluice::spool {

// Appends the encoding of `batch`'s position and records to `out`.
void encode_batch(const Batch& batch, std::string& out);

// Decodes `bytes` (one encode_batch output), appending its records to `out` and setting its
// position to the encoded one. Strings, bytes and
// uuids point into `bytes`, which must outlive the records (Batch::retain the buffer); arrays,
// objects and intervals are built in the batch's arena. Malformed input (truncated, an unknown
// kind or operation, nesting deeper than 64) is an Errc::data error, never a crash.
Status decode_batch(std::string_view bytes, Batch& out);

}  // namespace sluice::spool
