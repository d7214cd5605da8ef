#include "support/fault_workload.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <mongoc/mongoc.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>

#include "support/sql.h"
#include "support/sqlite.h"

namespace sluice::test {

namespace {

using Kind = FaultColumn::Kind;

// ── Canonical values ────────────────────────────────────────────────────────

// Decimal text without a sign '+', leading zeros or trailing fraction zeros ("-0" is "0").
std::string canonical_decimal(std::string s) {
  if (s.find_first_of("eE") != std::string::npos) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", std::strtod(s.c_str(), nullptr));
    s = buf;
    if (s.find_first_of("eE") != std::string::npos) return s;
  }
  bool neg = false;
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  std::string intpart, frac;
  size_t dot = s.find('.', i);
  intpart = s.substr(i, dot == std::string::npos ? std::string::npos : dot - i);
  if (dot != std::string::npos) frac = s.substr(dot + 1);
  while (intpart.size() > 1 && intpart[0] == '0') intpart.erase(0, 1);
  if (intpart.empty()) intpart = "0";
  while (!frac.empty() && frac.back() == '0') frac.pop_back();
  std::string out = intpart + (frac.empty() ? "" : "." + frac);
  if (neg && out != "0") out = "-" + out;
  return out;
}

// Days since 1970-01-01 of a civil date, and back (H. Hinnant's algorithms).
int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = unsigned(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + int64_t(doe) - 719468;
}
void civil_from_days(int64_t z, int64_t* y, unsigned* m, unsigned* d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = unsigned(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = int64_t(yoe) + era * 400 + (*m <= 2);
}

std::string format_utc_micros(int64_t micros) {
  int64_t secs = micros >= 0 ? micros / 1000000 : (micros - 999999) / 1000000;
  int64_t us = micros - secs * 1000000;
  int64_t days = secs >= 0 ? secs / 86400 : (secs - 86399) / 86400;
  int64_t sod = secs - days * 86400;
  int64_t y;
  unsigned m, d;
  civil_from_days(days, &y, &m, &d);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04" PRId64 "-%02u-%02u %02d:%02d:%02d.%06d", y, m, d,
                int(sod / 3600), int(sod / 60 % 60), int(sod % 60), int(us));
  return buf;
}

// "YYYY-MM-DD[ T]HH:MM:SS[.f][Z|±hh[:mm]]" (no offset: UTC) as microseconds since the epoch;
// nullopt for another shape.
std::optional<int64_t> parse_timestamp(const std::string& s) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, se = 0;
  if (s.size() < 19 || std::sscanf(s.c_str(), "%4d-%2d-%2d", &y, &mo, &d) != 3 ||
      std::sscanf(s.c_str() + 11, "%2d:%2d:%2d", &h, &mi, &se) != 3)
    return std::nullopt;
  size_t i = 19;
  int64_t us = 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    int digits = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
      if (digits < 6) us = us * 10 + (s[i] - '0');
      ++digits;
      ++i;
    }
    for (; digits < 6; ++digits) us *= 10;
  }
  int64_t offset = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    const int sign = s[i] == '-' ? -1 : 1;
    int oh = 0, om = 0;
    std::string rest = s.substr(i + 1);
    rest.erase(std::remove(rest.begin(), rest.end(), ':'), rest.end());
    if (rest.size() >= 2) oh = std::atoi(rest.substr(0, 2).c_str());
    if (rest.size() >= 4) om = std::atoi(rest.substr(2, 2).c_str());
    offset = sign * (oh * 3600 + om * 60);
  }
  const int64_t secs =
      days_from_civil(y, unsigned(mo), unsigned(d)) * 86400 + h * 3600 + mi * 60 + se - offset;
  return secs * 1000000 + us;
}

std::string hex_of(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

// ── A small JSON reader, for canonical JSON and the Kafka messages ──────────

struct Json {
  enum class T { null, boolean, number, string, array, object } t = T::null;
  std::string s;  // number text, string value, "true"/"false"
  std::vector<Json> items;
  // Object members: keys[i] → values[i] (two vectors: a pair would need Json complete here).
  std::vector<std::string> keys;
  std::vector<Json> values;
  const Json* get(const std::string& k) const {
    for (size_t i = 0; i < keys.size(); ++i)
      if (keys[i] == k) return &values[i];
    return nullptr;
  }
};

class JsonReader {
 public:
  explicit JsonReader(const std::string& s) : s_(s) {}
  bool parse(Json* out) {
    if (!value(out)) return false;
    ws();
    return i_ == s_.size();
  }

 private:
  void ws() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool lit(const char* w) {
    size_t n = std::strlen(w);
    if (s_.compare(i_, n, w) != 0) return false;
    i_ += n;
    return true;
  }
  bool str(std::string* out) {
    if (i_ >= s_.size() || s_[i_] != '"') return false;
    ++i_;
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (c != '\\') {
        *out += c;
        continue;
      }
      if (i_ >= s_.size()) return false;
      char e = s_[i_++];
      switch (e) {
        case 'n': *out += '\n'; break;
        case 't': *out += '\t'; break;
        case 'r': *out += '\r'; break;
        case 'b': *out += '\b'; break;
        case 'f': *out += '\f'; break;
        case 'u': {
          if (i_ + 4 > s_.size()) return false;
          unsigned cp = unsigned(std::strtoul(s_.substr(i_, 4).c_str(), nullptr, 16));
          i_ += 4;
          if (cp >= 0xD800 && cp < 0xDC00 && s_.compare(i_, 2, "\\u") == 0) {
            unsigned lo = unsigned(std::strtoul(s_.substr(i_ + 2, 4).c_str(), nullptr, 16));
            i_ += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          // UTF-8
          if (cp < 0x80) *out += char(cp);
          else if (cp < 0x800) {
            *out += char(0xC0 | (cp >> 6));
            *out += char(0x80 | (cp & 0x3F));
          } else if (cp < 0x10000) {
            *out += char(0xE0 | (cp >> 12));
            *out += char(0x80 | ((cp >> 6) & 0x3F));
            *out += char(0x80 | (cp & 0x3F));
          } else {
            *out += char(0xF0 | (cp >> 18));
            *out += char(0x80 | ((cp >> 12) & 0x3F));
            *out += char(0x80 | ((cp >> 6) & 0x3F));
            *out += char(0x80 | (cp & 0x3F));
          }
          break;
        }
        default: *out += e;
      }
    }
    if (i_ >= s_.size()) return false;
    ++i_;
    return true;
  }
  bool value(Json* out) {
    ws();
    if (i_ >= s_.size()) return false;
    char c = s_[i_];
    if (c == '{') {
      out->t = Json::T::object;
      ++i_;
      ws();
      if (i_ < s_.size() && s_[i_] == '}') return ++i_, true;
      for (;;) {
        ws();
        std::string k;
        if (!str(&k)) return false;
        ws();
        if (i_ >= s_.size() || s_[i_++] != ':') return false;
        Json v;
        if (!value(&v)) return false;
        out->keys.push_back(std::move(k));
        out->values.push_back(std::move(v));
        ws();
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          continue;
        }
        if (i_ < s_.size() && s_[i_] == '}') return ++i_, true;
        return false;
      }
    }
    if (c == '[') {
      out->t = Json::T::array;
      ++i_;
      ws();
      if (i_ < s_.size() && s_[i_] == ']') return ++i_, true;
      for (;;) {
        Json v;
        if (!value(&v)) return false;
        out->items.push_back(std::move(v));
        ws();
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          continue;
        }
        if (i_ < s_.size() && s_[i_] == ']') return ++i_, true;
        return false;
      }
    }
    if (c == '"') {
      out->t = Json::T::string;
      return str(&out->s);
    }
    if (lit("true") || lit("false")) {
      out->t = Json::T::boolean;
      out->s = s_[i_ - 1] == 'e' && s_[i_ - 2] == 'u' ? "true" : "false";
      return true;
    }
    if (lit("null")) return true;
    size_t start = i_;
    while (i_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i_])) ||
                              std::strchr("+-.eE", s_[i_]) != nullptr))
      ++i_;
    if (i_ == start) return false;
    out->t = Json::T::number;
    out->s = s_.substr(start, i_ - start);
    return true;
  }
  const std::string& s_;
  size_t i_ = 0;
};

void write_json_string(const std::string& s, std::string* out) {
  *out += '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      *out += '\\';
      *out += char(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      *out += buf;
    } else {
      *out += char(c);
    }
  }
  *out += '"';
}

void write_canonical(const Json& j, std::string* out) {
  switch (j.t) {
    case Json::T::null: *out += "null"; break;
    case Json::T::boolean: *out += j.s; break;
    case Json::T::number: *out += canonical_decimal(j.s); break;
    case Json::T::string: write_json_string(j.s, out); break;
    case Json::T::array:
      *out += '[';
      for (size_t i = 0; i < j.items.size(); ++i) {
        if (i) *out += ',';
        write_canonical(j.items[i], out);
      }
      *out += ']';
      break;
    case Json::T::object: {
      std::vector<size_t> order(j.keys.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::sort(order.begin(), order.end(),
                [&](size_t a, size_t b) { return j.keys[a] < j.keys[b]; });
      *out += '{';
      for (size_t i = 0; i < order.size(); ++i) {
        if (i) *out += ',';
        write_json_string(j.keys[order[i]], out);
        *out += ':';
        write_canonical(j.values[order[i]], out);
      }
      *out += '}';
      break;
    }
  }
}

// ── The fault table's values, from (id, rev) ────────────────────────────────

struct RowValues {
  std::string amount;               // decimal text
  std::optional<std::string> note;  // NULL every fifth revision
  bool flag;
  std::string at;   // UTC "YYYY-MM-DD HH:MM:SS.ffffff"
  std::string day;  // YYYY-MM-DD
  std::string blob;
  std::string doc;  // JSON
};

RowValues values_of(int64_t id, int rev) {
  RowValues v;
  const int64_t a = (id * 7919 + int64_t(rev) * 104729) % 1000000000;
  char buf[64];
  // Every other value with trailing fraction zeros (1.500000 vs 1.5 across renderings).
  std::snprintf(buf, sizeof buf, "%s%" PRId64 ".%06" PRId64, (id + rev) % 3 == 0 ? "-" : "",
                a / 1000, (a % 1000) * ((id + rev) % 2 ? 1 : 1000) % 1000000);
  v.amount = buf;
  if (rev % 5 != 0)
    v.note = "note 'q' \"d\" \\ ü ✓ " + std::to_string(id) + "/" + std::to_string(rev);
  v.flag = (id + rev) % 2 == 0;
  // Around a DST change in most zones, with microseconds.
  const int64_t base = days_from_civil(2024, 3, 10) * 86400 + 1 * 3600 + 59 * 60;
  v.at = format_utc_micros((base + id * 3600 + rev) * 1000000 + (id * 1237) % 1000000);
  int64_t y;
  unsigned m, d;
  civil_from_days(days_from_civil(2000, 1, 1) + (id * 13 + rev) % 20000, &y, &m, &d);
  std::snprintf(buf, sizeof buf, "%04" PRId64 "-%02u-%02u", y, m, d);
  v.day = buf;
  v.blob = std::string("\x00\xff", 2) + char(id & 0xff) + char(rev & 0xff) + "'\\";
  v.doc = "{\"id\": " + std::to_string(id) + ", \"rev\": " + std::to_string(rev) +
          ", \"tags\": [\"a\", \"b\\\"c\"], \"n\": {\"x\": 1.50, \"y\": null}}";
  return v;
}

}  // namespace

std::string canonical_json(const std::string& text) {
  Json j;
  if (!JsonReader(text).parse(&j)) return text;
  std::string out;
  write_canonical(j, &out);
  return out;
}

std::string canonical_value(Kind kind, const std::optional<std::string>& value, Rendering from) {
  if (!value) return "∅";
  const std::string& v = *value;
  switch (kind) {
    case Kind::integer:
    case Kind::decimal: return canonical_decimal(v);
    case Kind::text: return v;
    case Kind::boolean:
      if (v == "t" || v == "true" || v == "1" || v == "TRUE") return "true";
      if (v == "f" || v == "false" || v == "0" || v == "FALSE") return "false";
      return "bool?" + v;
    case Kind::timestamp: {
      auto us = parse_timestamp(v);
      return us ? format_utc_micros(*us) : "timestamp?" + v;
    }
    case Kind::date: return v.substr(0, 10);
    case Kind::bytes:
      if (from == Rendering::postgres && v.rfind("\\x", 0) == 0) {
        std::string h = v.substr(2);
        std::transform(h.begin(), h.end(), h.begin(), ::tolower);
        return h;
      }
      return hex_of(v);
    case Kind::json: return canonical_json(v);
  }
  return v;
}

const std::vector<FaultColumn>& fault_columns() {
  static const std::vector<FaultColumn> cols = {
      {"id", Kind::integer}, {"rev", Kind::integer},  {"amount", Kind::decimal},
      {"note", Kind::text},  {"flag", Kind::boolean}, {"at", Kind::timestamp},
      {"day", Kind::date},   {"blob", Kind::bytes},   {"doc", Kind::json},
  };
  return cols;
}

uint64_t row_checksum(const std::vector<std::string>& row) {
  uint64_t h = 1469598103934665603ull;
  for (const std::string& v : row) {
    for (unsigned char c : v) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0x1f) * 1099511628211ull;
  }
  return h;
}

namespace {

std::string column_list(char quote, const std::vector<FaultColumn>& columns = fault_columns()) {
  std::string s;
  for (const auto& c : columns) {
    if (!s.empty()) s += ", ";
    s += quote + c.name + quote;
  }
  return s;
}

void add_rows(TableImage* img, const Rows& rows, Rendering from,
              const std::vector<FaultColumn>& cols) {
  for (const Row& r : rows) {
    std::vector<std::string> canon;
    for (size_t i = 0; i < cols.size() && i < r.size(); ++i)
      canon.push_back(canonical_value(cols[i].kind, r[i], from));
    if (!r.empty() && r[0]) {
      const int64_t id = std::stoll(*r[0]);
      if (img->rows.count(id)) img->duplicate_keys++;
      img->rows[id] = std::move(canon);
    }
  }
}

}  // namespace

TableImage read_pg_image(const std::string& url, const std::string& table) {
  return read_pg_image(url, table, fault_columns());
}

TableImage read_pg_image(const std::string& url, const std::string& table,
                         const std::vector<FaultColumn>& columns) {
  TableImage img;
  PgClient c;
  if (!c.connect(url) || !c.exec("SET TimeZone = 'UTC'", true)) {
    img.ok = false;
    img.error = "cannot connect";
    return img;
  }
  if (c.scalar("SELECT count(*) FROM pg_tables WHERE tablename = " + sql_literal(table)) == "0") {
    img.ok = false;
    img.error = "no table " + table;
    return img;
  }
  Rows rows = c.query("SELECT " + column_list('"', columns) + " FROM " + pg_ident(table), true);
  add_rows(&img, rows, Rendering::postgres, columns);
  return img;
}

TableImage read_mysql_image(const std::string& url, const std::string& table) {
  TableImage img;
  MysqlClient c;
  if (!c.connect(url) || !c.exec("SET time_zone = '+00:00'", true)) {
    img.ok = false;
    img.error = "cannot connect";
    return img;
  }
  Rows rows = c.query("SELECT " + column_list('`') + " FROM " + my_ident(table), true);
  add_rows(&img, rows, Rendering::mysql, fault_columns());
  return img;
}

TableImage read_sqlite_image(const std::filesystem::path& db, const std::string& table,
                             const std::vector<FaultColumn>& columns) {
  TableImage img;
  try {
    SqliteFile f(db);
    std::string cols;
    for (const auto& c : columns) cols += (cols.empty() ? "\"" : ", \"") + c.name + "\"";
    Rows rows;
    bool ok = f.query("SELECT " + cols + " FROM \"" + table + "\"", [&](sqlite3_stmt* st) {
      Row r;
      for (int i = 0; i < int(columns.size()); ++i) {
        if (sqlite3_column_type(st, i) == SQLITE_NULL) {
          r.push_back(std::nullopt);
          continue;
        }
        const void* p = sqlite3_column_blob(st, i);
        const int n = sqlite3_column_bytes(st, i);
        r.push_back(std::string(static_cast<const char*>(p), size_t(n)));
      }
      rows.push_back(std::move(r));
    });
    if (!ok) {
      img.ok = false;
      img.error = "cannot read table " + table;
      return img;
    }
    add_rows(&img, rows, Rendering::sqlite, columns);
  } catch (const std::exception& e) {
    img.ok = false;
    img.error = e.what();
  }
  return img;
}

namespace {

// A libmongoc client for `url` that gives up quickly (the checker polls), or null.
struct MongoClientFree {
  void operator()(mongoc_client_t* c) const noexcept { mongoc_client_destroy(c); }
};
using MongoClient = std::unique_ptr<mongoc_client_t, MongoClientFree>;
MongoClient mongo_client(const std::string& url, std::string* db) {
  static std::once_flag once;
  std::call_once(once, [] {
    mongoc_init();
    // libmongoc's warnings ("Couldn't send endSessions": FerretDB has no sessions) stay out of the
    // output; errors come back through bson_error_t.
    mongoc_log_set_handler(
        [](mongoc_log_level_t level, const char* domain, const char* message, void*) {
          if (level <= MONGOC_LOG_LEVEL_ERROR) std::fprintf(stderr, "%s: %s\n", domain, message);
        },
        nullptr);
  });
  bson_error_t err;
  mongoc_uri_t* uri = mongoc_uri_new_with_error(url.c_str(), &err);
  if (!uri) return nullptr;
  const char* name = mongoc_uri_get_database(uri);
  *db = name ? name : "";
  mongoc_uri_set_option_as_int32(uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS, 5000);
  mongoc_uri_set_option_as_int32(uri, MONGOC_URI_SOCKETTIMEOUTMS, 30000);
  MongoClient c(mongoc_client_new_from_uri(uri));
  mongoc_uri_destroy(uri);
  if (c) mongoc_client_set_error_api(c.get(), MONGOC_ERROR_API_VERSION_2);
  return c;
}

// One BSON value as text (the header comment's rules; nullopt for null).
std::optional<std::string> bson_text(const bson_iter_t* it) {
  char buf[64];
  switch (bson_iter_type(it)) {
    case BSON_TYPE_NULL:
    case BSON_TYPE_UNDEFINED: return std::nullopt;
    case BSON_TYPE_INT32: return std::to_string(bson_iter_int32(it));
    case BSON_TYPE_INT64: return std::to_string(bson_iter_int64(it));
    case BSON_TYPE_DOUBLE:
      std::snprintf(buf, sizeof buf, "%.17g", bson_iter_double(it));
      return std::string(buf);
    case BSON_TYPE_DECIMAL128: {
      bson_decimal128_t d;
      bson_iter_decimal128(it, &d);
      char s[BSON_DECIMAL128_STRING];
      bson_decimal128_to_string(&d, s);
      return std::string(s);
    }
    case BSON_TYPE_UTF8: {
      uint32_t n = 0;
      const char* s = bson_iter_utf8(it, &n);
      return std::string(s, n);
    }
    case BSON_TYPE_BOOL: return std::string(bson_iter_bool(it) ? "true" : "false");
    case BSON_TYPE_DATE_TIME: return format_utc_micros(bson_iter_date_time(it) * 1000);
    case BSON_TYPE_BINARY: {
      bson_subtype_t sub;
      uint32_t n = 0;
      const uint8_t* data = nullptr;
      bson_iter_binary(it, &sub, &n, &data);
      return std::string(reinterpret_cast<const char*>(data), n);
    }
    default: {
      // Documents, arrays and the rest: relaxed Extended JSON of {"v": value}, unwrapped.
      bson_t wrap = BSON_INITIALIZER;
      bson_append_iter(&wrap, "v", 1, it);
      char* json = bson_as_relaxed_extended_json(&wrap, nullptr);
      std::string out = canonical_json(json ? json : "");
      bson_free(json);
      bson_destroy(&wrap);
      const std::string head = "{\"v\":";
      if (out.rfind(head, 0) == 0 && out.size() > head.size()) {
        out = out.substr(head.size());
        out.pop_back();
      }
      return out;
    }
  }
}

}  // namespace

TableImage read_mongodb_image(const std::string& url, const std::string& collection) {
  TableImage img;
  std::string db;
  MongoClient client = mongo_client(url, &db);
  if (!client) {
    img.ok = false;
    img.error = "cannot create a MongoDB client";
    return img;
  }
  mongoc_collection_t* c =
      mongoc_client_get_collection(client.get(), db.c_str(), collection.c_str());
  bson_t filter = BSON_INITIALIZER;
  mongoc_cursor_t* cur = mongoc_collection_find_with_opts(c, &filter, nullptr, nullptr);
  const bson_t* doc = nullptr;
  Rows rows;
  while (mongoc_cursor_next(cur, &doc)) {
    Row r;
    for (const FaultColumn& col : fault_columns()) {
      bson_iter_t it;
      r.push_back(bson_iter_init_find(&it, doc, col.name.c_str()) ? bson_text(&it) : std::nullopt);
    }
    rows.push_back(std::move(r));
  }
  bson_error_t err;
  if (mongoc_cursor_error(cur, &err)) {
    img.ok = false;
    img.error = std::string("reading ") + collection + ": " + err.message;
  }
  mongoc_cursor_destroy(cur);
  mongoc_collection_destroy(c);
  if (img.ok) add_rows(&img, rows, Rendering::bson, fault_columns());
  return img;
}

namespace {
std::string fingerprint_of(const Rows& rows) {
  if (rows.size() != 1 || rows[0].size() != 3) return "";
  std::string s;
  for (const auto& v : rows[0]) s += (s.empty() ? "" : "/") + v.value_or("0");
  return s;
}
const char* kFingerprintColumns = "count(*), coalesce(sum(id), 0), coalesce(sum(rev), 0)";
}  // namespace

std::string pg_fingerprint(const std::string& url, const std::string& table) {
  PgClient c;
  if (!c.connect(url)) return "";
  if (c.scalar("SELECT count(*) FROM pg_tables WHERE tablename = " + sql_literal(table)) == "0")
    return "";
  return fingerprint_of(
      c.query(std::string("SELECT ") + kFingerprintColumns + " FROM " + pg_ident(table), true));
}

std::string mysql_fingerprint(const std::string& url, const std::string& table) {
  MysqlClient c;
  if (!c.connect(url)) return "";
  return fingerprint_of(
      c.query(std::string("SELECT ") + kFingerprintColumns + " FROM " + my_ident(table), true));
}

std::string sqlite_fingerprint(const std::filesystem::path& db, const std::string& table) {
  try {
    SqliteFile f(db);
    // No rev column in every table: count and sum of the keys only.
    auto rows = f.rows("SELECT count(*), coalesce(sum(id), 0), 0 FROM \"" + table + "\"");
    return rows ? fingerprint_of(*rows) : "";
  } catch (const std::exception&) {
    return "";
  }
}

std::string mongodb_fingerprint(const std::string& url, const std::string& collection) {
  std::string db;
  MongoClient client = mongo_client(url, &db);
  if (!client) return "";
  mongoc_collection_t* c =
      mongoc_client_get_collection(client.get(), db.c_str(), collection.c_str());
  // Only id and rev: a cheap scan (FerretDB's $group support is partial).
  bson_t filter = BSON_INITIALIZER;
  bson_t* opts = BCON_NEW("projection", "{", "id", BCON_INT32(1), "rev", BCON_INT32(1), "}");
  mongoc_cursor_t* cur = mongoc_collection_find_with_opts(c, &filter, opts, nullptr);
  const bson_t* doc = nullptr;
  int64_t n = 0, ids = 0, revs = 0;
  while (mongoc_cursor_next(cur, &doc)) {
    bson_iter_t it;
    n++;
    if (bson_iter_init_find(&it, doc, "id")) ids += bson_iter_as_int64(&it);
    if (bson_iter_init_find(&it, doc, "rev")) revs += bson_iter_as_int64(&it);
  }
  bson_error_t err;
  const bool failed = mongoc_cursor_error(cur, &err);
  mongoc_cursor_destroy(cur);
  bson_destroy(opts);
  mongoc_collection_destroy(c);
  if (failed) return "";
  return std::to_string(n) + "/" + std::to_string(ids) + "/" + std::to_string(revs);
}

namespace {
std::string show_row(const std::vector<std::string>& r) {
  std::string s;
  for (const auto& v : r) s += (s.empty() ? "" : "|") + v;
  return s;
}
}  // namespace

Diff compare_images(const TableImage& source, const TableImage& dest) {
  Diff d;
  d.duplicated = dest.duplicate_keys;
  auto example = [&](const std::string& e) {
    if (d.examples.size() < 5) d.examples.push_back(e);
  };
  if (!dest.ok) example("destination unreadable: " + dest.error);
  for (const auto& [id, row] : source.rows) {
    auto it = dest.rows.find(id);
    if (it == dest.rows.end()) {
      d.lost++;
      example("lost id " + std::to_string(id) + ": " + show_row(row));
    } else if (row_checksum(it->second) != row_checksum(row)) {
      d.differing++;
      example("id " + std::to_string(id) + " differs: source " + show_row(row) + " destination " +
              show_row(it->second));
    } else {
      d.verified++;
    }
  }
  for (const auto& [id, row] : dest.rows)
    if (!source.rows.count(id)) {
      d.extra++;
      example("extra id " + std::to_string(id) + " (deleted at the source): " + show_row(row));
    }
  if (!dest.ok) d.lost = int64_t(source.rows.size());
  return d;
}

std::string Diff::str() const {
  std::ostringstream o;
  o << "verified " << verified << ", lost " << lost << ", duplicated " << duplicated
    << ", differing " << differing << ", extra " << extra;
  for (const auto& e : examples) o << "\n  " << e;
  return o.str();
}

// ── The writer ──────────────────────────────────────────────────────────────

struct SourceWriter::Impl {
  Db db;
  std::string url, table;
  std::mt19937_64 rng;
  PgClient pg;
  MysqlClient my;
  mutable std::mutex mu;
  std::map<int64_t, int> live;
  std::vector<int64_t> live_keys;  // for random picks; may hold deleted keys (skipped)
  int64_t next_id = 1;
  int64_t ops = 0;                 // operations begun (for the first transaction's deadline)
  int tx_min = 200, tx_max = 400;  // rows per transaction (set_transaction_rows)
  Stats stats;

  std::string ident(const std::string& s) const {
    return db == Db::postgres ? pg_ident(s) : my_ident(s);
  }
  bool exec(const std::string& sql) {
    return db == Db::postgres ? pg.exec(sql, true) : my.exec(sql, true);
  }
  // SQL literals of a row's columns, in fault_columns() order.
  std::vector<std::string> literal_parts(int64_t id, int rev) const {
    RowValues v = values_of(id, rev);
    // MySQL: backslashes are escapes in string literals.
    auto text = [&](const std::string& t) {
      if (db != Db::mysql) return sql_literal(t);
      std::string n;
      for (char c : t) n += c == '\\' ? std::string("\\\\") : std::string(1, c);
      return sql_literal(n);
    };
    return {std::to_string(id),
            std::to_string(rev),
            v.amount,
            v.note ? text(*v.note) : "NULL",
            v.flag ? "TRUE" : "FALSE",
            db == Db::postgres ? sql_literal(v.at + "+00") : sql_literal(v.at),
            sql_literal(v.day),
            db == Db::postgres ? "'\\x" + hex_of(v.blob) + "'::bytea" : "X'" + hex_of(v.blob) + "'",
            text(v.doc)};
  }
  std::string literal_row(int64_t id, int rev) const {
    std::string s;
    for (const auto& p : literal_parts(id, rev)) s += (s.empty() ? "" : ", ") + p;
    return s;
  }
  std::string insert_sql(int64_t id) const {
    return "INSERT INTO " + ident(table) + " (" + column_list(db == Db::postgres ? '"' : '`') +
           ") VALUES (" + literal_row(id, 1) + ")";
  }
  // An UPDATE of every column (one change; delete + insert would be two).
  std::string update_sql(int64_t id, int rev) const {
    const char q = db == Db::postgres ? '"' : '`';
    const auto parts = literal_parts(id, rev);
    const auto& cols = fault_columns();
    std::string set;
    for (size_t i = 1; i < cols.size(); ++i)
      set += (i > 1 ? ", " : "") + std::string(1, q) + cols[i].name + q + " = " + parts[i];
    return "UPDATE " + ident(table) + " SET " + set + " WHERE " + q + "id" + q + " = " +
           std::to_string(id);
  }
  std::string delete_sql(int64_t id) const {
    const char q = db == Db::postgres ? '"' : '`';
    return "DELETE FROM " + ident(table) + " WHERE " + q + "id" + q + " = " + std::to_string(id);
  }
  // A random live key, or 0.
  int64_t pick() {
    for (int tries = 0; tries < 8 && !live_keys.empty(); ++tries) {
      size_t i = size_t(rng() % live_keys.size());
      int64_t id = live_keys[i];
      if (live.count(id)) return id;
      live_keys[i] = live_keys.back();
      live_keys.pop_back();
    }
    return 0;
  }
};

SourceWriter::SourceWriter(Db db, std::string url, std::string table, uint64_t seed)
    : impl_(std::make_unique<Impl>()) {
  impl_->db = db;
  impl_->url = std::move(url);
  impl_->table = std::move(table);
  impl_->rng.seed(seed);
  if (db == Db::postgres) impl_->pg.connect(impl_->url);
  else impl_->my.connect(impl_->url);
}

SourceWriter::~SourceWriter() { stop(); }

bool SourceWriter::create(int64_t rows) {
  Impl& m = *impl_;
  const std::string t = m.ident(m.table);
  std::string ddl = m.db == Db::postgres
                        ? "DROP TABLE IF EXISTS " + t + "; CREATE TABLE " + t +
                              " (\"id\" bigint PRIMARY KEY, \"rev\" int NOT NULL, \"amount\" "
                              "numeric(18,6), \"note\" text, \"flag\" boolean, \"at\" timestamptz, "
                              "\"day\" date, \"blob\" bytea, \"doc\" jsonb)"
                        : "DROP TABLE IF EXISTS " + t + "; CREATE TABLE " + t +
                              " (`id` bigint PRIMARY KEY, `rev` int NOT NULL, `amount` "
                              "decimal(18,6), `note` varchar(200) CHARACTER SET utf8mb4, `flag` "
                              "boolean, `at` datetime(6), `day` date, `blob` varbinary(64), `doc` "
                              "json)";
  if (!m.exec(ddl)) return false;
  {
    std::lock_guard lk(m.mu);  // a new table: no live key (new ones keep counting up)
    m.live.clear();
    m.live_keys.clear();
  }
  if (m.db == Db::mysql && !m.exec("SET time_zone = '+00:00'")) return false;
  for (int64_t done = 0; done < rows;) {
    std::string sql =
        "INSERT INTO " + t + " (" + column_list(m.db == Db::postgres ? '"' : '`') + ") VALUES ";
    for (int k = 0; k < 1000 && done < rows; ++k, ++done) {
      if (k) sql += ", ";
      sql += "(" + m.literal_row(m.next_id, 1) + ")";
      std::lock_guard lk(m.mu);
      m.live[m.next_id] = 1;
      m.live_keys.push_back(m.next_id);
      m.next_id++;
    }
    if (!m.exec(sql)) return false;
  }
  return true;
}

void SourceWriter::set_transaction_rows(int min, int max) {
  impl_->tx_min = std::max(1, min);
  impl_->tx_max = std::max(impl_->tx_min, max);
}

void SourceWriter::one_op() {
  Impl& m = *impl_;
  // One in ten operations is a transaction; the first comes within the first eight operations at
  // the latest, so a short run (a slow writer, a few seconds) always holds one (else ~12 % of the
  // MongoDB suite's 20-operation runs had none and its check that one ran failed).
  const unsigned r = ++m.ops >= 8 && m.stats.transactions == 0 ? 99u : unsigned(m.rng() % 100);
  std::unique_lock lk(m.mu, std::defer_lock);
  if (r < 45) {
    const int64_t id = m.next_id++;
    if (m.exec(m.insert_sql(id))) {
      lk.lock();
      m.live[id] = 1;
      m.live_keys.push_back(id);
      m.stats.inserts++;
    } else {
      m.stats.statements_failed++;
    }
    return;
  }
  if (r < 80) {
    const int64_t id = m.pick();
    if (!id) return;
    const int rev = m.live[id] + 1;
    if (m.exec(m.update_sql(id, rev))) {
      lk.lock();
      m.live[id] = rev;
      m.stats.updates++;
    } else {
      m.stats.statements_failed++;
    }
    return;
  }
  if (r < 90) {
    const int64_t id = m.pick();
    if (!id) return;
    if (m.exec(m.delete_sql(id))) {
      lk.lock();
      m.live.erase(id);
      m.stats.deletes++;
    } else {
      m.stats.statements_failed++;
    }
    return;
  }
  // A transaction of tx_min–tx_max rows (200–400 unless set_transaction_rows); keys touched once
  // each, so the model stays simple.
  const int n = m.tx_min + int(m.rng() % uint64_t(m.tx_max - m.tx_min + 1));
  std::map<int64_t, int> changed;  // rev, or 0 for deleted
  std::string sql = m.db == Db::postgres ? "BEGIN; " : "START TRANSACTION; ";
  int64_t ins = 0, upd = 0, del = 0;
  for (int k = 0; k < n; ++k) {
    const unsigned c = unsigned(m.rng() % 10);
    if (c < 4) {
      const int64_t id = m.next_id++;
      sql += m.insert_sql(id) + "; ";
      changed[id] = 1;
      ins++;
      continue;
    }
    const int64_t id = m.pick();
    if (!id || changed.count(id)) continue;
    if (c < 9) {
      const int rev = m.live[id] + 1;
      sql += m.update_sql(id, rev) + "; ";
      changed[id] = rev;
      upd++;
    } else {
      sql += m.delete_sql(id) + "; ";
      changed[id] = 0;
      del++;
    }
  }
  sql += "COMMIT";
  if (m.exec(sql)) {
    lk.lock();
    for (const auto& [id, rev] : changed) {
      if (rev == 0) {
        m.live.erase(id);
      } else {
        if (!m.live.count(id)) m.live_keys.push_back(id);
        m.live[id] = rev;
      }
    }
    m.stats.inserts += ins;
    m.stats.updates += upd;
    m.stats.deletes += del;
    m.stats.transactions++;
  } else {
    m.exec("ROLLBACK");
    m.stats.statements_failed++;
  }
}

void SourceWriter::start(std::chrono::milliseconds pause) {
  stop_ = false;
  thread_ = std::thread([this, pause] {
    while (!stop_) {
      one_op();
      std::this_thread::sleep_for(pause);
    }
  });
}

void SourceWriter::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void SourceWriter::run_ops(int n) {
  for (int i = 0; i < n; ++i) one_op();
}

SourceWriter::Stats SourceWriter::stats() const {
  std::lock_guard lk(impl_->mu);
  return impl_->stats;
}

std::map<int64_t, int> SourceWriter::live() const {
  std::lock_guard lk(impl_->mu);
  return impl_->live;
}

// ── Kafka exactly once ──────────────────────────────────────────────────────

KafkaExactlyOnce check_kafka_exactly_once(const std::vector<KafkaMessage>& messages,
                                          const TableImage& source) {
  KafkaExactlyOnce r;
  auto example = [&](const std::string& e) {
    if (r.examples.size() < 30) r.examples.push_back(e);
  };
  struct KeyState {
    int last_rev = -1;  // -1: nothing yet
    bool deleted = false;
  };
  std::map<int64_t, KeyState> keys;
  for (const KafkaMessage& m : messages) {
    if (!m.value) continue;  // a tombstone
    r.messages++;
    Json j;
    if (!JsonReader(*m.value).parse(&j)) {
      r.unparsed++;
      example("unparsed message at offset " + std::to_string(m.offset));
      continue;
    }
    const Json* op = j.get("operation");
    const Json* payload = j.get("payload");
    const Json* key = j.get("key");
    const Json* after = payload ? payload->get("after") : nullptr;
    const Json* before = payload ? payload->get("before") : nullptr;
    const Json* idj = key ? key->get("id") : nullptr;
    if (!idj && after) idj = after->get("id");
    if (!idj && before) idj = before->get("id");
    if (!op || !idj) {
      r.unparsed++;
      example("message without operation or id at offset " + std::to_string(m.offset));
      continue;
    }
    const int64_t id = std::stoll(idj->s);
    KeyState& k = keys[id];
    const std::string where =
        " (id " + std::to_string(id) + ", offset " + std::to_string(m.offset) + ")";
    if (op->s == "delete") {
      r.changes++;
      if (k.deleted) {
        r.duplicated++;
        example("second delete" + where);
      }
      k.deleted = true;
      continue;
    }
    const Json* revj = after ? after->get("rev") : nullptr;
    if (!revj) {
      r.unparsed++;
      example("message without after.rev" + where);
      continue;
    }
    const int rev = std::stoi(revj->s);
    if (op->s == "snapshot") r.snapshot_rows++;
    else r.changes++;
    if (k.deleted) {
      r.duplicated++;
      example(op->s + " rev " + std::to_string(rev) + " after the delete" + where);
      continue;
    }
    if (k.last_rev >= 0 && rev <= k.last_rev) {
      r.duplicated++;
      example(op->s + " rev " + std::to_string(rev) + " again after rev " +
              std::to_string(k.last_rev) + where);
    } else if (k.last_rev >= 0 && rev != k.last_rev + 1) {
      r.gaps++;
      example(op->s + " rev " + std::to_string(rev) + " after rev " + std::to_string(k.last_rev) +
              where);
    } else if (k.last_rev < 0 && op->s == "create" && rev != 1) {
      r.gaps++;
      example("create with rev " + std::to_string(rev) + where);
    }
    k.last_rev = std::max(k.last_rev, rev);
  }
  for (const auto& [id, row] : source.rows) {
    auto it = keys.find(id);
    const int rev = std::stoi(row[1]);
    if (it == keys.end() || it->second.deleted) {
      r.lost++;
      example("live id " + std::to_string(id) + " rev " + std::to_string(rev) +
              (it == keys.end() ? " never appeared" : " deleted in the topic"));
    } else if (it->second.last_rev != rev) {
      r.differing++;
      example("id " + std::to_string(id) + ": source rev " + std::to_string(rev) + ", topic rev " +
              std::to_string(it->second.last_rev));
    }
  }
  for (const auto& [id, k] : keys)
    if (!k.deleted && !source.rows.count(id)) {
      r.lost++;  // the delete never arrived
      example("deleted id " + std::to_string(id) + " has no delete in the topic");
    }
  return r;
}

std::string KafkaExactlyOnce::str() const {
  std::ostringstream o;
  o << messages << " messages (" << snapshot_rows << " snapshot rows, " << changes
    << " changes): duplicated " << duplicated << ", gaps " << gaps << ", lost " << lost
    << ", differing " << differing << ", unparsed " << unparsed;
  for (const auto& e : examples) o << "\n  " << e;
  return o.str();
}

// ── Figures and seeds ───────────────────────────────────────────────────────

void record_fault_result(const FaultResult& r) {
  char line[512];
  std::snprintf(line, sizeof line,
                "%s\t%s\t%d\t%d\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t%.2f\t%" PRIu64 "\n",
                r.pipeline.c_str(), r.fault.c_str(), r.iterations, r.faults, r.rows_verified,
                r.lost, r.duplicated, r.recovery_seconds, fault_seed());
  // One write with O_APPEND: lines of parallel cases do not interleave.
  int fd = ::open(SLUICE_FAULT_RESULTS, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    (void)!::write(fd, line, std::strlen(line));
    ::close(fd);
  }
  std::cout << "fault result: " << line;
}

uint64_t fault_seed() {
  static const uint64_t seed = [] {
    uint64_t s = 0;
    if (const char* e = std::getenv("SLUICE_FAULT_SEED"); e && *e)
      s = std::strtoull(e, nullptr, 10);
    else s = std::random_device{}() ^ (uint64_t(std::random_device{}()) << 32);
    std::cout << "fault suite seed: " << s << " (replay: SLUICE_FAULT_SEED=" << s << ")\n";
    return s;
  }();
  return seed;
}

bool fault_soak() {
  const char* e = std::getenv("SLUICE_FAULT_SOAK");
  return e && *e && std::string(e) != "0";
}

}  // namespace sluice::test
