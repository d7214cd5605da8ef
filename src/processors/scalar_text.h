// Scalar text as written in processor settings: the YAML-like literals field.set parses its `value`
// with, and the number forms filter compares against (exactly, for integers and decimals).
#pragma once

#include <cstdint>
#include <string_view>

#include "sluice/value.h"

namespace sluice {

bool parse_yaml_null(std::string_view s) noexcept;             // null Null NULL ~
bool parse_yaml_bool(std::string_view s, bool* out) noexcept;  // true/True/TRUE, false/False/FALSE
// [-+]?digits, 0x hex, 0o octal (YAML 1.2 core); false on overflow.
bool parse_int64_text(std::string_view s, int64_t* out) noexcept;
bool parse_uint64_text(std::string_view s, uint64_t* out) noexcept;  // [+]?digits
// YAML floats ([-+]?(.d+|d+(.d*)?)([eE][-+]?d+)?, [-+]?.inf, .nan) and, unless `yaml_only`, also
// inf/infinity/nan in any case (what databases print).
bool parse_float_text(std::string_view s, double* out, bool yaml_only = false) noexcept;
// Text a decimal column accepts: plain or exponent notation, NaN, [-+]Infinity.
bool is_decimal_text(std::string_view s) noexcept;

// The YAML-like reading of `text`: null, bool, int64 (uint64 or exact decimal when too large),
// float64, else a string. Text-carrying results view `text`.
Value parse_scalar_value(std::string_view text) noexcept;

// A number in plain decimal notation ([-+]?(d+(.d*)?|.d+)), normalised for exact comparison:
// no leading zeros in `integer`, no trailing zeros in `fraction`, zero is never negative.
struct PlainDecimal {
  bool negative = false;
  std::string_view integer;
  std::string_view fraction;
};
bool parse_plain_decimal(std::string_view s, PlainDecimal* out) noexcept;
int compare_plain_decimal(const PlainDecimal& a, const PlainDecimal& b) noexcept;  // <0, 0, >0

}  // namespace sluice
