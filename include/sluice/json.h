// JSON encoding of records in the OpenCDC shape, and of values.
//
//   {"position":"<base64>","operation":"create","metadata":{...},"key":{...},
//    "payload":{"before":null,"after":{...}},"types":{...}}
//
// Values use natural JSON where JSON is exact (null, bool, int64, uint64, strings, objects, arrays,
// finite doubles written with a '.' or exponent). Kinds JSON cannot tell apart are written as
// strings (decimal, bytes as base64, dates/times ISO 8601, uuid, interval, NaN/Infinity) or, for
// json, as the embedded document; the optional "types" member mirrors the record's structure and
// names the kind of every such value, so decoding restores the exact typed record.
#pragma once

#include <string>
#include <string_view>

#include "sluice/batch.h"
#include "sluice/result.h"

namespace sluice {

// Appends one record as a single JSON line (no trailing newline).
void encode_record_json(const Record& r, std::string& out);
// Appends a value as natural JSON (no type annotation; lossy for non-JSON kinds).
void encode_value_json(const Value& v, std::string& out);
// Parses one JSON record line into `batch` (appends a record, memory in the batch arena).
Status decode_record_json(std::string_view line, Batch& batch);

std::string base64_encode(std::string_view in);
bool base64_decode(std::string_view in, std::string* out);

}  // namespace sluice
