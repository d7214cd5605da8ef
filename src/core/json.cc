// OpenCDC JSON codec. Encoding writes into a reusable per-thread buffer (no per-field heap
// allocation, no per-character bounds checks) and appends the finished line to the caller's string;
// decoding parses with simdjson and builds values in the batch arena.
//
// Exactness: values JSON cannot tell apart are written as strings (or, for json, as the embedded
// document) and named in the record's "types" member, which mirrors key/before/after:
//
//   {"payload":{"after":{"id":1,"at":"2024-02-29","tags":["a",{"b":"\u0001"}]}},
//    "types":{"after":{"at":"date"}}}
#include "sluice/json.h"

#include <simdjson.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <fmt/compile.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

namespace sluice {

// ---------------------------------------------------------------------------------------------
// Output buffer

namespace {

// A growable byte buffer written through a raw cursor. Callers reserve with need() before writing a
// bounded number of bytes, so the common writes are plain stores.
class Writer {
 public:
  void need(size_t n) {
    if (size_t(end_ - p_) < n) grow(n);
  }
  void put(char c) {
    need(1);
    *p_++ = c;
  }
  void put(std::string_view s) {
    need(s.size());
    std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
  }
  // Unchecked writes (after need()).
  void raw(char c) { *p_++ = c; }
  void raw(const char* s, size_t n) {
    std::memcpy(p_, s, n);
    p_ += n;
  }
  char* cursor() { return p_; }
  void advance_to(char* p) { p_ = p; }

  size_t size() const { return size_t(p_ - buf_.get()); }
  bool empty() const { return p_ == buf_.get(); }
  void truncate(size_t n) { p_ = buf_.get() + n; }
  void clear() { p_ = buf_.get(); }
  std::string_view view() const { return {buf_.get(), size()}; }

 private:
  void grow(size_t n) {
    size_t used = size();
    size_t cap = std::max<size_t>({size_t(end_ - buf_.get()) * 2, used + n, 4096});
    std::unique_ptr<char[]> b(new char[cap]);
    if (used) std::memcpy(b.get(), buf_.get(), used);
    buf_ = std::move(b);
    p_ = buf_.get() + used;
    end_ = buf_.get() + cap;
  }

  std::unique_ptr<char[]> buf_;
  char* p_ = nullptr;
  char* end_ = nullptr;
};

// Keeps a buffer from holding on to the memory of one huge record forever.
void trim(Writer& w) {
  if (w.size() > (8u << 20)) w = Writer();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// base64 (standard alphabet, '=' padding; decoding also accepts missing padding)

namespace {

constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::array<int8_t, 256> make_b64_table() {
  std::array<int8_t, 256> t{};
  for (auto& x : t) x = -1;
  for (int i = 0; i < 64; ++i) t[static_cast<uint8_t>(kB64[i])] = static_cast<int8_t>(i);
  return t;
}
constexpr auto kB64Rev = make_b64_table();

size_t base64_encoded_size(size_t n) { return (n + 2) / 3 * 4; }

// Writes the encoding of `in` to `d` (room for base64_encoded_size bytes); returns the end.
char* base64_encode_into(std::string_view in, char* d) {
  const size_t n = in.size();
  const auto* s = reinterpret_cast<const uint8_t*>(in.data());
  size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    uint32_t v = (uint32_t(s[i]) << 16) | (uint32_t(s[i + 1]) << 8) | s[i + 2];
    *d++ = kB64[v >> 18];
    *d++ = kB64[(v >> 12) & 63];
    *d++ = kB64[(v >> 6) & 63];
    *d++ = kB64[v & 63];
  }
  if (i < n) {
    uint32_t v = uint32_t(s[i]) << 16;
    if (i + 1 < n) v |= uint32_t(s[i + 1]) << 8;
    *d++ = kB64[v >> 18];
    *d++ = kB64[(v >> 12) & 63];
    *d++ = i + 1 < n ? kB64[(v >> 6) & 63] : '=';
    *d++ = '=';
  }
  return d;
}

void base64_append(std::string_view in, Writer& w) {
  w.need(base64_encoded_size(in.size()));
  w.advance_to(base64_encode_into(in, w.cursor()));
}

// Upper bound of the decoded size.
size_t base64_max_decoded(size_t n) { return (n + 3) / 4 * 3; }

// Decodes into `dst` (room for base64_max_decoded bytes); returns the size or -1 if malformed.
ptrdiff_t base64_decode_into(std::string_view in, char* dst) {
  size_t n = in.size();
  if (n % 4 == 0 && n >= 2) {
    if (in[n - 1] == '=') --n;
    if (in[n - 1] == '=') --n;
  }
  if (n % 4 == 1) return -1;
  char* d = dst;
  const auto* s = reinterpret_cast<const uint8_t*>(in.data());
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    int a = kB64Rev[s[i]], b = kB64Rev[s[i + 1]], c = kB64Rev[s[i + 2]], e = kB64Rev[s[i + 3]];
    if ((a | b | c | e) < 0) return -1;
    uint32_t v = (uint32_t(a) << 18) | (uint32_t(b) << 12) | (uint32_t(c) << 6) | uint32_t(e);
    *d++ = char(v >> 16);
    *d++ = char((v >> 8) & 255);
    *d++ = char(v & 255);
  }
  size_t rest = n - i;
  if (rest >= 2) {
    int a = kB64Rev[s[i]], b = kB64Rev[s[i + 1]];
    int c = rest == 3 ? kB64Rev[s[i + 2]] : 0;
    if ((a | b | c) < 0) return -1;
    uint32_t v = (uint32_t(a) << 18) | (uint32_t(b) << 12) | (uint32_t(c) << 6);
    *d++ = char(v >> 16);
    if (rest == 3) *d++ = char((v >> 8) & 255);
  }
  return d - dst;
}

}  // namespace

std::string base64_encode(std::string_view in) {
  std::string out(base64_encoded_size(in.size()), '\0');
  base64_encode_into(in, out.data());
  return out;
}

bool base64_decode(std::string_view in, std::string* out) {
  out->resize(base64_max_decoded(in.size()));
  ptrdiff_t n = base64_decode_into(in, out->data());
  if (n < 0) {
    out->clear();
    return false;
  }
  out->resize(size_t(n));
  return true;
}

// ---------------------------------------------------------------------------------------------
// Encoding

namespace {

// 1 for bytes that must be escaped inside a JSON string.
constexpr std::array<uint8_t, 256> make_escape_table() {
  std::array<uint8_t, 256> t{};
  for (int c = 0; c < 0x20; ++c) t[c] = 1;
  t['"'] = 1;
  t['\\'] = 1;
  return t;
}
constexpr auto kNeedsEscape = make_escape_table();

// Writes the escape of a byte that needs one (at most 6 bytes; room reserved by the caller).
void raw_escape(uint8_t c, Writer& w) {
  static constexpr char hex[] = "0123456789abcdef";
  char e = 0;
  switch (c) {
    case '"': e = '"'; break;
    case '\\': e = '\\'; break;
    case '\n': e = 'n'; break;
    case '\r': e = 'r'; break;
    case '\t': e = 't'; break;
    case '\b': e = 'b'; break;
    case '\f': e = 'f'; break;
    default: {
      const char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
      w.raw(u, 6);
      return;
    }
  }
  w.raw('\\');
  w.raw(e);
}

// Whether any byte of the 8 is < 0x20, '"' or '\\' (bytes >= 0x80 never match).
inline bool word_needs_escape(uint64_t x) {
  constexpr uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
  auto has_zero = [](uint64_t v) { return (v - ones) & ~v & highs; };
  const uint64_t lt_space = (x - ones * 0x20) & ~x & highs;
  return (lt_space | has_zero(x ^ (ones * '"')) | has_zero(x ^ (ones * '\\'))) != 0;
}

// Length of the valid UTF-8 sequence starting at s[0] (s[0] >= 0x80), or 0 if invalid.
size_t utf8_sequence_length(const uint8_t* s, size_t n) {
  uint8_t c = s[0];
  size_t len;
  uint32_t cp;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    cp = c & 0x07;
  } else return 0;
  if (n < len) return 0;
  for (size_t i = 1; i < len; ++i) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
    return 0;                                  // overlong
  if (cp >= 0xD800 && cp <= 0xDFFF) return 0;  // surrogate
  return len;
}

// Slow path for text that is not valid UTF-8: each invalid byte becomes U+FFFD so the line stays
// valid JSON (a string value is UTF-8 by contract; this only guards against bad input).
void append_string_body_repairing(std::string_view s, Writer& w) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  size_t n = s.size();
  for (size_t i = 0; i < n;) {
    w.need(6);
    uint8_t c = p[i];
    if (c < 0x80) {
      if (kNeedsEscape[c]) raw_escape(c, w);
      else w.raw(char(c));
      ++i;
      continue;
    }
    size_t len = utf8_sequence_length(p + i, n - i);
    if (len == 0) {
      w.raw("\xEF\xBF\xBD", 3);
      ++i;
    } else {
      w.raw(s.data() + i, len);
      i += len;
    }
  }
}

inline uint64_t load64(const uint8_t* p) {
  uint64_t x;
  std::memcpy(&x, p, 8);
  return x;
}
inline uint64_t load32(const uint8_t* p) {
  uint32_t x;
  std::memcpy(&x, p, 4);
  return x;
}

// Checks a whole string for bytes that need escaping, a word at a time (short tails are covered by
// overlapping loads, never reading outside the string). Sets *high to the OR of the bytes' high
// bits.
inline bool text_needs_escape(const uint8_t* p, size_t n, uint64_t* high) {
  constexpr uint64_t filler = 0x6161616161616161ULL;  // 'a': never needs escaping
  uint64_t h = 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x = load64(p + i);
    h |= x;
    if (word_needs_escape(x)) return true;
  }
  size_t rest = n - i;
  if (rest) {
    uint64_t x;
    if (n >= 8) x = load64(p + n - 8);
    else if (rest >= 4) x = load32(p) | (load32(p + n - 4) << 32);
    else {
      x = filler;
      for (size_t k = 0; k < rest; ++k) x = (x << 8) | p[k];
    }
    h |= x;
    if (word_needs_escape(x)) return true;
  }
  *high = h;
  return false;
}

// Copies up to a few bytes without a library call (dst has 16 bytes of slack past n).
inline void copy_short(char* d, const char* s, size_t n) {
  if (n >= 8) {
    if (n > 16) {
      std::memcpy(d, s, n);
      return;
    }
    std::memcpy(d, s, 8);
    std::memcpy(d + n - 8, s + n - 8, 8);
  } else if (n >= 4) {
    std::memcpy(d, s, 4);
    std::memcpy(d + n - 4, s + n - 4, 4);
  } else {
    for (size_t i = 0; i < n; ++i) d[i] = s[i];
  }
}

// Escaping path: copies runs between the bytes that need escaping.
void append_string_body_escaping(std::string_view s, Writer& w) {
  const size_t n = s.size();
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  size_t i = 0;
  while (i < n) {
    size_t j = i;
    while (j < n && !kNeedsEscape[p[j]]) ++j;
    w.raw(s.data() + i, j - i);
    if (j == n) break;
    w.need(6 + (n - j) + 1);
    raw_escape(p[j], w);
    i = j + 1;
  }
}

#if defined(__SSE2__)
// Which of x's 16 bytes need escaping or are not ASCII, a bit each (a signed compare: bytes of
// 0x80 and above are negative, so "below 0x20" takes them too).
inline unsigned special_bytes(__m128i x) {
  const __m128i m = _mm_or_si128(
      _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')), _mm_cmpeq_epi8(x, _mm_set1_epi8('\\'))),
      _mm_cmplt_epi8(x, _mm_set1_epi8(0x20)));
  return unsigned(_mm_movemask_epi8(m));
}
#endif

// ASCII text that needs no escaping, by far the common string (names, most values): copied to `d`
// (room for n + 16 bytes) and true; otherwise false, and `d`'s bytes are left unspecified. Never
// reads outside the string: short strings are covered by overlapping loads.
inline bool copy_plain_ascii(const char* s, size_t n, char* d) {
  const auto* p = reinterpret_cast<const uint8_t*>(s);
#if defined(__SSE2__)
  if (n >= 16) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
      const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
      if (special_bytes(x)) return false;
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), x);
    }
    if (i < n) {
      const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + n - 16));
      if (special_bytes(x)) return false;
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + n - 16), x);
    }
    return true;
  }
  // Shorter: overlapping loads, so that every lane holds one of the string's own bytes.
  if (n >= 8) {
    const uint64_t lo = load64(p), hi = load64(p + n - 8);
    if (special_bytes(_mm_set_epi64x(int64_t(hi), int64_t(lo)))) return false;
    std::memcpy(d, &lo, 8);
    std::memcpy(d + n - 8, &hi, 8);
    return true;
  }
  if (n >= 4) {
    const uint32_t lo = uint32_t(load32(p)), hi = uint32_t(load32(p + n - 4));
    if (special_bytes(_mm_set_epi32(int(hi), int(lo), int(hi), int(lo)))) return false;
    std::memcpy(d, &lo, 4);
    std::memcpy(d + n - 4, &hi, 4);
    return true;
  }
  if (n > 0) {  // bytes 0, n/2 and n-1 cover a string of 1 to 3
    const uint8_t a = p[0], b = p[n / 2], c = p[n - 1];
    const uint32_t v = uint32_t(a) | uint32_t(b) << 8 | uint32_t(c) << 16 | uint32_t(a) << 24;
    if (special_bytes(_mm_set1_epi32(int(v)))) return false;
    d[0] = char(a);
    d[n / 2] = char(b);
    d[n - 1] = char(c);
  }
  return true;
#else
  uint64_t high = 0;
  if (text_needs_escape(p, n, &high) || (high & 0x8080808080808080ULL)) return false;
  copy_short(d, s, n);
  return true;
#endif
}

// The rest of a string after its opening quote, when it needs escaping or is not ASCII.
void append_string_tail_slow(std::string_view s, Writer& w) {
  const size_t n = s.size();
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t start = w.size();
  uint64_t high = 0;
  if (text_needs_escape(p, n, &high)) {
    append_string_body_escaping(s, w);
    high = 0x80;  // let the UTF-8 check below decide
  } else {
    copy_short(w.cursor(), s.data(), n);
    w.advance_to(w.cursor() + n);
  }
  // Non-ASCII text is passed through only when it is valid UTF-8 (checked with SIMD).
  if ((high & 0x8080808080808080ULL) && !simdjson::validate_utf8(s.data(), n)) {
    w.truncate(start);
    append_string_body_repairing(s, w);
  }
  w.put('"');
}

void append_string(std::string_view s, Writer& w) {
  const size_t n = s.size();
  w.need(n + 18);
  w.raw('"');
  if (copy_plain_ascii(s.data(), n, w.cursor())) [[likely]] {
    w.advance_to(w.cursor() + n);
    w.raw('"');
    return;
  }
  append_string_tail_slow(s, w);
}

template <typename Int>
void append_int(Int v, Writer& w) {
  w.need(24);
  w.advance_to(std::to_chars(w.cursor(), w.cursor() + 24, v).ptr);
}

// Finite double in the shortest form that parses back to the same bits, always with '.' or an
// exponent so that a reader sees a floating-point number (3.0, not 3).
void append_double(double d, Writer& w) {
  w.need(40);
  char* b = w.cursor();
  char* e = fmt::format_to(b, FMT_COMPILE("{}"), d);
  bool mark = false;
  for (char* q = b; q < e; ++q)
    if (*q == '.' || *q == 'e') {
      mark = true;
      break;
    }
  if (!mark) {
    *e++ = '.';
    *e++ = '0';
  }
  w.advance_to(e);
}

// Dates and times: the canonical writers of sluice/temporal.h, straight into the buffer.
void append_date_text(int32_t days, Writer& w) {
  w.need(temporal::kMaxDateChars);
  w.advance_to(temporal::write_date(w.cursor(), days));
}

void append_time_text(int64_t micros, Writer& w) {
  w.need(temporal::kMaxTimeChars);
  w.advance_to(temporal::write_time(w.cursor(), micros));
}

void append_offset_text(int32_t off, Writer& w) {
  w.need(temporal::kMaxOffsetChars);
  w.advance_to(temporal::write_offset(w.cursor(), off));
}

// A batch's timestamps mostly fall on a few days: each thread keeps the text of the last day it
// wrote, and only the time of day is written for the next timestamp on that day.
void append_timestamp_text(int64_t micros, Writer& w) {
  struct DayText {
    int64_t days = std::numeric_limits<int64_t>::min();
    char text[temporal::kMaxDateChars];
    size_t size = 0;
  };
  thread_local DayText last;
  const temporal::DayAndTime t = temporal::split_timestamp(micros);
  if (t.days != last.days) {
    last.size = size_t(temporal::write_date(last.text, int32_t(t.days)) - last.text);
    last.days = t.days;
  }
  w.need(last.size + 1 + temporal::kMaxTimeChars);
  w.raw(last.text, last.size);
  w.raw('T');
  w.advance_to(temporal::write_time(w.cursor(), t.micros));
}

void append_uuid_text(const uint8_t* b, Writer& w) {
  static constexpr char hex[] = "0123456789abcdef";
  w.need(36);
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) w.raw('-');
    w.raw(hex[b[i] >> 4]);
    w.raw(hex[b[i] & 15]);
  }
}

bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// A json-kind document is embedded as-is when that keeps the line a single line and the decoder
// can recover the exact text; otherwise (multi-line, surrounding whitespace, empty, or itself a
// JSON string) it is written as a JSON string holding the text. Both are annotated "json"; the
// decoder takes a string's content and any other value's raw text.
// True when `t` is one complete JSON value. A json-kind value from a server is, but one decoded
// from a "json"-annotated string (or a Kafka Json field) is not checked: embedded raw, text such
// as 19700-01-01 made the whole line invalid JSON, so it is written as a string instead.
bool is_json_document(std::string_view t) {
  thread_local simdjson::dom::parser parser;
  thread_local std::string padded;
  padded.assign(t.data(), t.size());
  padded.resize(t.size() + simdjson::SIMDJSON_PADDING, '\0');
  return !parser.parse(padded.data(), t.size(), false).error();
}

bool json_embeds_raw(std::string_view t) {
  if (t.empty() || is_json_space(t.front()) || t.front() == '"' || is_json_space(t.back()))
    return false;
  return std::memchr(t.data(), '\n', t.size()) == nullptr &&
         std::memchr(t.data(), '\r', t.size()) == nullptr && is_json_document(t);
}

// Writes the annotation for a scalar kind; returns true (for brevity at call sites).
bool annotate(Writer* types, ValueKind kind) {
  std::string_view name = value_kind_name(kind);
  types->need(name.size() + 2);
  types->raw('"');
  types->raw(name.data(), name.size());
  types->raw('"');
  return true;
}

// Whether a non-container value needs a type annotation to decode exactly.
bool scalar_needs_annotation(const Value& v) {
  switch (v.kind()) {
    case ValueKind::null:
    case ValueKind::boolean:
    case ValueKind::int64:
    case ValueKind::string: return false;
    case ValueKind::uint64: return v.as_uint64() <= uint64_t(std::numeric_limits<int64_t>::max());
    case ValueKind::float64: return !std::isfinite(v.as_double());
    default: return true;  // absent, decimal, bytes, dates/times, interval, uuid, json
  }
}

// Quoted text value: `"` + body + `"`.
template <typename F>
void quoted(Writer& w, F body) {
  w.put('"');
  body();
  w.put('"');
}

// Writes `v` as JSON to `w`. When `types` is given and `v` needs an annotation, writes it to
// `*types` and returns true; otherwise leaves `*types` as it was and returns false.
bool encode_value(const Value& v, Writer& w, Writer* types) {
  switch (v.kind()) {
    case ValueKind::absent:  // a field present in the object but without a value (e.g. unchanged
                             // TOAST)
      w.put("null");
      return types && annotate(types, ValueKind::absent);
    case ValueKind::null: w.put("null"); return false;
    case ValueKind::boolean:
      w.put(v.as_bool() ? std::string_view("true") : std::string_view("false"));
      return false;
    case ValueKind::int64: append_int(v.as_int64(), w); return false;
    case ValueKind::uint64:
      append_int(v.as_uint64(), w);
      return types && scalar_needs_annotation(v) && annotate(types, ValueKind::uint64);
    case ValueKind::float64: {
      double d = v.as_double();
      if (std::isfinite(d)) {
        append_double(d, w);
        return false;
      }
      w.put(std::isnan(d) ? std::string_view("\"NaN\"")
            : d > 0       ? std::string_view("\"Infinity\"")
                          : std::string_view("\"-Infinity\""));
      return types && annotate(types, ValueKind::float64);
    }
    case ValueKind::decimal: append_string(v.as_text(), w); break;
    case ValueKind::string: append_string(v.as_text(), w); return false;
    case ValueKind::bytes: quoted(w, [&] { base64_append(v.as_text(), w); }); break;
    case ValueKind::date: quoted(w, [&] { append_date_text(v.as_date(), w); }); break;
    case ValueKind::time: quoted(w, [&] { append_time_text(v.as_micros(), w); }); break;
    case ValueKind::timetz:
      quoted(w, [&] {
        append_time_text(v.as_micros(), w);
        append_offset_text(v.tz_offset_seconds(), w);
      });
      break;
    case ValueKind::timestamp: quoted(w, [&] { append_timestamp_text(v.as_micros(), w); }); break;
    case ValueKind::timestamptz:
      quoted(w, [&] {
        append_timestamp_text(v.as_micros(), w);
        w.put('Z');
      });
      break;
    case ValueKind::interval:  // rare: the allocating formatter is fine here
      quoted(w, [&] { w.put(format_interval(v.as_interval())); });
      break;
    case ValueKind::uuid: quoted(w, [&] { append_uuid_text(v.uuid_bytes(), w); }); break;
    case ValueKind::json: {
      std::string_view t = v.as_text();
      if (json_embeds_raw(t)) w.put(t);
      else append_string(t, w);
      break;
    }
    case ValueKind::array: {
      w.put('[');
      const size_t mark = types ? types->size() : 0;
      bool any = false;
      if (types) types->put('[');
      bool first = true;
      for (const Value& item : v.items()) {
        if (!first) {
          w.put(',');
          if (types) types->put(',');
        }
        first = false;
        if (!types) encode_value(item, w, nullptr);
        else if (encode_value(item, w, types)) any = true;
        else types->put("null");
      }
      w.put(']');
      if (!types) return false;
      if (!any) {
        types->truncate(mark);
        return false;
      }
      types->put(']');
      return true;
    }
    case ValueKind::object: {
      w.put('{');
      bool any = false;
      bool first = true;
      for (const Field& f : v.fields()) {
        if (!first) w.put(',');
        first = false;
        append_string(f.name, w);
        w.put(':');
        const ValueKind k = f.value.kind();
        const bool container = k == ValueKind::array || k == ValueKind::object;
        // Plain scalars skip the annotation bookkeeping entirely (the common case).
        if (!types || (!container && !scalar_needs_annotation(f.value))) {
          encode_value(f.value, w, nullptr);
          continue;
        }
        const size_t mark = types->size();
        types->put(any ? ',' : '{');
        append_string(f.name, *types);
        types->put(':');
        if (encode_value(f.value, w, types)) any = true;
        else types->truncate(mark);
      }
      w.put('}');
      if (any) types->put('}');
      return any;
    }
  }
  return types && annotate(types, v.kind());
}

// Per-thread output buffers: the line and, beside it, its annotations (appended last).
struct EncodeBuffers {
  Writer line;
  Writer types;
};
thread_local EncodeBuffers t_enc;

}  // namespace

void encode_value_json(const Value& v, std::string& out) {
  Writer& w = t_enc.line;
  w.clear();
  encode_value(v, w, nullptr);
  out.append(w.view());
  trim(w);
}

void encode_record_json(const Record& r, std::string& out) {
  Writer& w = t_enc.line;
  Writer& types = t_enc.types;
  w.clear();
  types.clear();

  w.put("{\"position\":\"");
  base64_append(r.position, w);
  w.put("\",\"operation\":\"");
  w.put(operation_name(r.op));
  w.put('"');
  if (!r.metadata.is_absent()) {
    w.put(",\"metadata\":");
    encode_value(r.metadata, w, nullptr);
  }
  auto member = [&](std::string_view name, const Value& v, bool comma) {
    if (comma) w.put(',');
    w.put('"');
    w.put(name);
    w.put("\":");
    const size_t mark = types.size();
    if (mark) types.put(',');
    types.put('"');
    types.put(name);
    types.put("\":");
    if (!encode_value(v, w, &types)) types.truncate(mark);
  };
  if (!r.key.is_absent()) member("key", r.key, true);
  w.put(",\"payload\":{");
  if (!r.before.is_absent()) member("before", r.before, false);
  if (!r.after.is_absent()) member("after", r.after, !r.before.is_absent());
  w.put('}');
  if (!types.empty()) {
    w.put(",\"types\":{");
    w.put(types.view());
    w.put('}');
  }
  w.put('}');
  out.append(w.view());
  trim(w);
  trim(types);
}

// ---------------------------------------------------------------------------------------------
// Decoding
//
// simdjson's DOM parser (runtime-dispatched to the best SIMD kernel) validates the whole line; the
// values are then copied into the batch arena, guided by the "types" element walked in parallel.
// The DOM keeps no source offsets, so the raw text of an embedded json-kind document is found by
// re-walking the (already validated) line along the child indices leading to it.

namespace {

constexpr int kMaxDepth = 512;

// Per-thread decoding state reused across lines: the parser and a padded copy of the input.
struct DecodeState {
  simdjson::dom::parser parser;
  std::string input;
};

// Minimal walker over valid JSON text, used only to recover a value's raw text.
struct RawWalker {
  const char* p;

  void ws() {
    while (is_json_space(*p)) ++p;
  }
  void skip_string() {  // at the opening quote
    ++p;
    while (*p != '"') p += *p == '\\' ? 2 : 1;
    ++p;
  }
  void skip_value() {
    ws();
    if (*p == '"') return skip_string();
    if (*p == '{' || *p == '[') {
      int depth = 0;
      do {
        char c = *p;
        if (c == '"') {
          skip_string();
          continue;
        }
        if (c == '{' || c == '[') ++depth;
        else if (c == '}' || c == ']') --depth;
        ++p;
      } while (depth > 0);
      return;
    }
    while (*p && *p != ',' && *p != '}' && *p != ']' && !is_json_space(*p)) ++p;
  }
  // At a container: moves to the start of its i-th member's value (object) or i-th item (array).
  void child(uint32_t i) {
    ws();
    const bool object = *p == '{';
    ++p;
    for (uint32_t k = 0;; ++k) {
      ws();
      if (object) {
        skip_string();
        ws();
        ++p;  // ':'
        ws();
      }
      if (k == i) return;
      skip_value();
      ws();
      ++p;  // ','
    }
  }
};

// The first field whose name an earlier field of `fields` already has, or nullptr. Records have
// few fields: pairwise up to 64 of them, sorted views beyond.
const Field* first_duplicate_name(const Field* fields, uint32_t n) {
  if (n <= 64) {
    for (uint32_t i = 1; i < n; ++i)
      for (uint32_t j = 0; j < i; ++j)
        if (fields[i].name == fields[j].name) return &fields[i];
    return nullptr;
  }
  thread_local std::vector<const Field*> sorted;
  sorted.clear();
  for (uint32_t i = 0; i < n; ++i) sorted.push_back(&fields[i]);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const Field* a, const Field* b) { return a->name < b->name; });
  for (size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i]->name == sorted[i - 1]->name) return sorted[i];
  return nullptr;
}

class Decoder {
 public:
  Decoder(std::string_view text, Batch& batch) : text_(text), arena_(batch.arena()) {}

  // "after.items[2]: bad date value '...'"; the path is built while unwinding.
  std::string message() const { return path_.empty() ? error_ : path_ + ": " + error_; }
  void prefix_path(std::string_view component) {
    std::string p(component);
    if (!path_.empty() && path_.front() != '[') p += '.';
    path_ = p + path_;
  }
  bool fail(std::string msg) {
    error_ = std::move(msg);
    return false;
  }

  // Decodes `e` (reached from the root through child indices path_idx_[0..depth)) with the
  // optional annotation `t` (a kind name, an object/array mirroring `e`, or null).
  bool decode(simdjson::dom::element e, const simdjson::dom::element* t, Value* out, int depth);
  void set_index(int depth, uint32_t i) { idx_[depth] = i; }

 private:
  bool decode_typed(simdjson::dom::element e, std::string_view type_name, Value* out, int depth);
  std::string_view raw_text(int depth) const {
    RawWalker w{text_.data()};
    for (int d = 0; d < depth; ++d) w.child(idx_[d]);
    w.ws();
    const char* start = w.p;
    w.skip_value();
    return {start, size_t(w.p - start)};
  }
  std::string_view copy(std::string_view s) { return arena_.copy(s); }

  std::string_view text_;
  Arena& arena_;
  std::string error_;
  std::string path_;
  uint32_t idx_[kMaxDepth + 2] = {};
};

bool Decoder::decode_typed(simdjson::dom::element e, std::string_view type_name, Value* out,
                           int depth) {
  using simdjson::dom::element_type;
  const ValueKind kind = value_kind_from_name(type_name);
  if (kind == ValueKind::absent) {
    if (type_name ==
        "absent") {  // a field present without a value; the JSON placeholder is ignored
      *out = Value();
      return true;
    }
    return fail("unknown type '" + std::string(type_name.substr(0, 32)) + "' in \"types\"");
  }
  const element_type et = e.type();
  std::string_view s;
  auto want_string = [&]() -> bool {
    if (e.get_string().get(s) != simdjson::SUCCESS)
      return fail("expected a string holding a " + std::string(type_name) + " value");
    return true;
  };
  auto bad = [&]() {
    return fail("bad " + std::string(type_name) + " value '" + std::string(s.substr(0, 64)) + "'");
  };
  switch (kind) {
    case ValueKind::absent: break;
    case ValueKind::null:
      if (et != element_type::NULL_VALUE) return fail("expected null");
      *out = Value::null();
      return true;
    case ValueKind::boolean:
      if (et != element_type::BOOL) return fail("expected a boolean");
      *out = Value::boolean(e.get_bool().value_unsafe());
      return true;
    case ValueKind::int64: {
      int64_t i;
      if (e.get_int64().get(i)) return fail("expected an int64 number");
      *out = Value::int64(i);
      return true;
    }
    case ValueKind::uint64: {
      uint64_t u;
      if (e.get_uint64().get(u)) return fail("expected a uint64 number");
      *out = Value::uint64(u);
      return true;
    }
    case ValueKind::float64:
      if (et == element_type::STRING) {
        s = e.get_string().value_unsafe();
        if (s == "NaN") *out = Value::float64(std::numeric_limits<double>::quiet_NaN());
        else if (s == "Infinity") *out = Value::float64(std::numeric_limits<double>::infinity());
        else if (s == "-Infinity") *out = Value::float64(-std::numeric_limits<double>::infinity());
        else return bad();
        return true;
      } else {
        double d;
        if (e.get_double().get(d)) return fail("expected a float64 number");
        *out = Value::float64(d);
        return true;
      }
    case ValueKind::decimal:
      if (et == element_type::INT64 || et == element_type::UINT64 || et == element_type::DOUBLE) {
        *out = Value::decimal(
            copy(raw_text(depth)));  // tolerated from other writers: the number's text
        return true;
      }
      if (!want_string()) return false;
      *out = Value::decimal(copy(s));
      return true;
    case ValueKind::string:
      if (!want_string()) return false;
      *out = Value::string(copy(s));
      return true;
    case ValueKind::bytes: {
      if (!want_string()) return false;
      char* d = static_cast<char*>(arena_.allocate(base64_max_decoded(s.size()) + 1, 1));
      ptrdiff_t n = base64_decode_into(s, d);
      if (n < 0) return fail("bad bytes value: invalid base64");
      *out = Value::bytes(std::string_view(d, size_t(n)));
      return true;
    }
    case ValueKind::date: {
      int32_t days;
      if (!want_string()) return false;
      if (!parse_date(s, &days)) return bad();
      *out = Value::date(days);
      return true;
    }
    case ValueKind::time: {
      int64_t us;
      if (!want_string()) return false;
      if (!parse_time(s, &us)) return bad();
      *out = Value::time(us);
      return true;
    }
    case ValueKind::timetz: {
      int64_t us;
      int32_t off;
      if (!want_string()) return false;
      if (!parse_timetz(s, &us, &off)) return bad();
      *out = Value::timetz(us, off);
      return true;
    }
    case ValueKind::timestamp: {
      int64_t us;
      if (!want_string()) return false;
      if (!parse_timestamp(s, &us)) return bad();
      *out = Value::timestamp(us);
      return true;
    }
    case ValueKind::timestamptz: {
      int64_t us;
      if (!want_string()) return false;
      if (!parse_timestamptz(s, &us)) return bad();
      *out = Value::timestamptz(us);
      return true;
    }
    case ValueKind::interval: {
      Interval iv;
      if (!want_string()) return false;
      if (!parse_interval(s, &iv)) return bad();
      auto* p = static_cast<Interval*>(arena_.allocate(sizeof(Interval), alignof(Interval)));
      *p = iv;
      *out = Value::interval(p);
      return true;
    }
    case ValueKind::uuid: {
      uint8_t b[16];
      if (!want_string()) return false;
      if (!parse_uuid(s, b)) return bad();
      auto* p = static_cast<uint8_t*>(arena_.allocate(16, 1));
      std::memcpy(p, b, 16);
      *out = Value::uuid(p);
      return true;
    }
    case ValueKind::json:
      // A string holds the document's text; anything else is the embedded document itself.
      if (et == element_type::STRING) s = e.get_string().value_unsafe();
      else s = raw_text(depth);
      *out = Value::json(copy(s));
      return true;
    case ValueKind::array:
    case ValueKind::object: return decode(e, nullptr, out, depth);
  }
  return fail("unsupported type '" + std::string(type_name) + "'");
}

bool Decoder::decode(simdjson::dom::element e, const simdjson::dom::element* t, Value* out,
                     int depth) {
  using simdjson::dom::element_type;
  if (depth > kMaxDepth) return fail("nested too deeply");
  element_type tt = t ? t->type() : element_type::NULL_VALUE;
  if (tt == element_type::STRING)
    return decode_typed(e, t->get_string().value_unsafe(), out, depth);
  switch (e.type()) {
    case element_type::NULL_VALUE: *out = Value::null(); return true;
    case element_type::BOOL: *out = Value::boolean(e.get_bool().value_unsafe()); return true;
    case element_type::INT64: *out = Value::int64(e.get_int64().value_unsafe()); return true;
    case element_type::UINT64: *out = Value::uint64(e.get_uint64().value_unsafe()); return true;
    case element_type::DOUBLE: *out = Value::float64(e.get_double().value_unsafe()); return true;
    case element_type::STRING:
      *out = Value::string(copy(e.get_string().value_unsafe()));
      return true;
    case element_type::ARRAY: {
      simdjson::dom::array arr = e.get_array().value_unsafe();
      simdjson::dom::array tarr;
      simdjson::dom::array::iterator tit, tend;
      if (tt == element_type::ARRAY) {
        tarr = t->get_array().value_unsafe();
        tit = tarr.begin();
        tend = tarr.end();
      }
      size_t n = arr.size();
      if (n >= 0xFFFFFF)  // the DOM saturates large counts
        n = size_t(std::distance(arr.begin(), arr.end()));
      Value* items = arena_.allocate_array<Value>(n);
      uint32_t i = 0;
      for (simdjson::dom::element item : arr) {
        idx_[depth] = i;
        simdjson::dom::element ti;
        const bool typed = tit != tend;
        if (typed) {
          ti = *tit;
          ++tit;
        }
        if (!decode(item, typed ? &ti : nullptr, &items[i], depth + 1)) {
          prefix_path("[" + std::to_string(i) + "]");
          return false;
        }
        ++i;
      }
      *out = Value::array(items, i);
      return true;
    }
    case element_type::OBJECT: {
      simdjson::dom::object obj = e.get_object().value_unsafe();
      simdjson::dom::object tobj;
      simdjson::dom::object::iterator tit, tend;
      const bool typed_obj = tt == element_type::OBJECT;
      if (typed_obj) {
        tobj = t->get_object().value_unsafe();
        tit = tobj.begin();
        tend = tobj.end();
      }
      size_t n = obj.size();
      if (n >= 0xFFFFFF) n = size_t(std::distance(obj.begin(), obj.end()));
      Field* fields = arena_.allocate_array<Field>(n);
      uint32_t i = 0;
      for (simdjson::dom::key_value_pair kv : obj) {
        idx_[depth] = i;
        // Annotations follow the value's field order, so the next one usually matches.
        simdjson::dom::element ft;
        bool typed = false;
        if (typed_obj) {
          if (tit != tend && tit.key() == kv.key) {
            ft = tit.value();
            typed = true;
            ++tit;
          } else {
            typed = tobj.at_key(kv.key).get(ft) == simdjson::SUCCESS;
          }
        }
        fields[i].name = copy(kv.key);
        if (!decode(kv.value, typed ? &ft : nullptr, &fields[i].value, depth + 1)) {
          prefix_path(fields[i].name);
          return false;
        }
        ++i;
      }
      // A name given twice is ambiguous (which value is the column's, which annotation is
      // whose?): refuse it rather than keep both or pick one silently.
      if (const Field* dup = first_duplicate_name(fields, i)) {
        prefix_path(dup->name);
        return fail("the field is given twice in one object");
      }
      *out = Value::object(fields, i);
      return true;
    }
  }
  return fail("unexpected JSON value");
}

Status data_error(std::string msg) { return Error(Errc::data, "JSON record: " + std::move(msg)); }

}  // namespace

Status decode_record_json(std::string_view line, Batch& batch) {
  using simdjson::dom::element_type;
  thread_local DecodeState st;
  // The parser's buffers grow to the longest line seen; after an unusually long one, give the
  // memory back rather than keep it for the life of the thread.
  struct ReleaseAfterHugeLine {
    DecodeState& st;
    size_t size;
    ~ReleaseAfterHugeLine() {
      if (size > (8u << 20)) {
        st.parser = simdjson::dom::parser();
        std::string().swap(st.input);
      }
    }
  } release{st, line.size()};

  // simdjson reads a little past the end of its input: parse a padded copy (no allocation once
  // the buffer has grown to the longest line).
  const size_t need = line.size() + simdjson::SIMDJSON_PADDING;
  if (st.input.size() < need) st.input.resize(std::max(need, st.input.size() * 2));
  std::memcpy(st.input.data(), line.data(), line.size());
  std::memset(st.input.data() + line.size(), 0, simdjson::SIMDJSON_PADDING);
  const std::string_view text(st.input.data(), line.size());

  simdjson::dom::element doc;
  if (auto e = st.parser.parse(text.data(), text.size(), false).get(doc))
    return data_error(std::string("invalid JSON: ") + simdjson::error_message(e));
  simdjson::dom::object root;
  if (doc.get_object().get(root)) return data_error("not a JSON object");

  // Annotations for key/before/after, if any.
  simdjson::dom::element types, tkey, tbefore, tafter;
  bool has_key_t = false, has_before_t = false, has_after_t = false;
  if (root.at_key("types").get(types) == simdjson::SUCCESS && !types.is_null()) {
    simdjson::dom::object tobj;
    if (types.get_object().get(tobj)) return data_error("types: expected an object");
    has_key_t = tobj.at_key("key").get(tkey) == simdjson::SUCCESS;
    has_before_t = tobj.at_key("before").get(tbefore) == simdjson::SUCCESS;
    has_after_t = tobj.at_key("after").get(tafter) == simdjson::SUCCESS;
  }

  Decoder dec(text, batch);
  Record rec;
  bool have_op = false;
  uint32_t member = 0;
  for (simdjson::dom::key_value_pair kv : root) {
    dec.set_index(0, member++);
    const std::string_view name = kv.key;
    const simdjson::dom::element v = kv.value;
    if (name == "position") {
      if (v.is_null()) continue;
      std::string_view s;
      if (v.get_string().get(s)) return data_error("position: expected a base64 string");
      char* d = static_cast<char*>(batch.arena().allocate(base64_max_decoded(s.size()) + 1, 1));
      ptrdiff_t n = base64_decode_into(s, d);
      if (n < 0) return data_error("position: invalid base64");
      rec.position = std::string_view(d, size_t(n));
    } else if (name == "operation") {
      std::string_view s;
      if (v.get_string().get(s)) return data_error("operation: expected a string");
      if (!parse_operation(s, &rec.op))
        return data_error("operation: unknown '" + std::string(s.substr(0, 32)) +
                          "' (expected create, update, delete or snapshot)");
      have_op = true;
    } else if (name == "metadata") {
      if (v.is_null()) continue;
      if (v.type() != element_type::OBJECT) return data_error("metadata: expected an object");
      if (!dec.decode(v, nullptr, &rec.metadata, 1)) {
        dec.prefix_path("metadata");
        return data_error(dec.message());
      }
    } else if (name == "key") {
      if (!dec.decode(v, has_key_t ? &tkey : nullptr, &rec.key, 1)) {
        dec.prefix_path("key");
        return data_error(dec.message());
      }
    } else if (name == "payload") {
      if (v.is_null()) continue;
      simdjson::dom::object payload;
      if (v.get_object().get(payload)) return data_error("payload: expected an object");
      uint32_t pmember = 0;
      for (simdjson::dom::key_value_pair pkv : payload) {
        dec.set_index(1, pmember++);
        const bool is_before = pkv.key == "before";
        if (!is_before && pkv.key != "after") continue;
        const simdjson::dom::element* t =
            is_before ? (has_before_t ? &tbefore : nullptr) : (has_after_t ? &tafter : nullptr);
        if (!dec.decode(pkv.value, t, is_before ? &rec.before : &rec.after, 2)) {
          dec.prefix_path(is_before ? "before" : "after");
          return data_error(dec.message());
        }
      }
    }
    // Unknown members (and "types", read above) are ignored.
  }
  if (!have_op) return data_error("missing \"operation\"");
  batch.records().push_back(rec);
  return ok_status();
}

}  // namespace sluice
