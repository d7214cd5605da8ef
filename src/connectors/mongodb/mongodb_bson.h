// Values ⇄ BSON for the mongodb connector, with libbson (no home-made BSON code).
//
//   sluice Value ──append_value──▶ bson_t     (destination; an inexact mapping is an Errc::data
//                                              error naming the field, so the record goes to the
//                                              dead-letter queue or stops the pipeline)
//   bson_iter_t  ──read_value────▶ Value      (source; every BSON type, exact; types without a
//                                              sluice counterpart become objects in MongoDB
//                                              Extended JSON v2 canonical shape)
//
// The mapping is documented in docs/mongodb.md; mongodb_bson_test.cc pins it.
#pragma once

#include <bson/bson.h>

#include <memory>
#include <string>
#include <string_view>

#include "sluice/arena.h"
#include "sluice/result.h"
#include "sluice/value.h"

namespace sluice::mongodb {

// An owned bson_t* (bson_t is over-aligned: std::unique_ptr<bson_t> drops the attribute and GCC
// warns), move-only.
class BsonPtr {
 public:
  BsonPtr() noexcept = default;
  explicit BsonPtr(bson_t* p) noexcept : p_(p) {}
  BsonPtr(BsonPtr&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  BsonPtr& operator=(BsonPtr&& o) noexcept {
    if (this != &o) {
      reset(o.p_);
      o.p_ = nullptr;
    }
    return *this;
  }
  BsonPtr(const BsonPtr&) = delete;
  BsonPtr& operator=(const BsonPtr&) = delete;
  ~BsonPtr() { reset(); }
  bson_t* get() const noexcept { return p_; }
  bson_t* operator->() const noexcept { return p_; }
  explicit operator bool() const noexcept { return p_ != nullptr; }
  void reset(bson_t* p = nullptr) noexcept {
    if (p_) bson_destroy(p_);
    p_ = p;
  }

 private:
  bson_t* p_ = nullptr;
};
inline BsonPtr make_bson() { return BsonPtr(bson_new()); }

// What a timestamp with a sub-millisecond part becomes (BSON dates hold milliseconds).
enum class SubMillisecond : uint8_t { string, reject };

// What a decimal (and a uint64 beyond int64) becomes: Decimal128, or its exact text for servers
// without Decimal128 (FerretDB 1.x drops the connection on one).
enum class Decimals : uint8_t { decimal128, string };

struct BsonWriteOptions {
  SubMillisecond sub_millisecond = SubMillisecond::string;
  Decimals decimals = Decimals::decimal128;
};

// Appends `v` to `doc` under `key`. An absent value appends nothing.
Status append_value(bson_t* doc, std::string_view key, const Value& v,
                    const BsonWriteOptions& options);
// Appends a JSON text as BSON (objects → documents, arrays → arrays, integers → int64, or
// Decimal128 when beyond int64, other numbers → double). `$`-keys stay plain keys (not Extended
// JSON).
Status append_json(bson_t* doc, std::string_view key, std::string_view json);
// A sluice decimal text ("-12.340", "NaN", "Infinity") as Decimal128; false when it does not fit
// exactly (more than 34 significant digits, exponent out of range).
bool decimal_to_bson(std::string_view text, bson_decimal128_t* out);

// The value under `it`, built in `arena`.
Value read_value(const bson_iter_t* it, Arena& arena);
// A whole document as an object value.
Value read_document(const bson_t* doc, Arena& arena);
// Decimal128 as sluice decimal text: plain positional notation ("1.20E+3" → "1200", "1E-2" →
// "0.01"), "NaN", "Infinity", "-Infinity".
std::string decimal_text(const bson_decimal128_t& d);

}  // namespace sluice::mongodb
