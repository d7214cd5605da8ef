#include "connectors/common/log_position.h"

namespace sluice {

std::string Lsn::to_string() const {
  static constexpr char kHex[] = "0123456789ABCDEF";
  char buf[17 + 1];
  size_t n = 0;
  auto put = [&](uint32_t part) {
    char tmp[8];
    int k = 0;
    do {
      tmp[k++] = kHex[part & 0xF];
      part >>= 4;
    } while (part != 0);
    while (k > 0) buf[n++] = tmp[--k];
  };
  put(static_cast<uint32_t>(value >> 32));
  buf[n++] = '/';
  put(static_cast<uint32_t>(value));
  return std::string(buf, n);
}

std::optional<Lsn> Lsn::parse(std::string_view text) {
  // Same rules as PostgreSQL's pg_lsn_in: 1-8 hex digits, '/', 1-8 hex digits, nothing else.
  auto part = [&](uint32_t* out) -> bool {
    uint32_t v = 0;
    size_t n = 0;
    while (n < text.size() && n < 9) {
      char c = text[n];
      uint32_t d;
      if (c >= '0' && c <= '9') d = uint32_t(c - '0');
      else if (c >= 'a' && c <= 'f') d = uint32_t(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') d = uint32_t(c - 'A' + 10);
      else break;
      v = (v << 4) | d;
      ++n;
    }
    if (n == 0 || n > 8) return false;
    text.remove_prefix(n);
    *out = v;
    return true;
  };
  uint32_t hi, lo;
  if (!part(&hi)) return std::nullopt;
  if (text.empty() || text.front() != '/') return std::nullopt;
  text.remove_prefix(1);
  if (!part(&lo) || !text.empty()) return std::nullopt;
  return Lsn{(uint64_t(hi) << 32) | lo};
}

namespace {

template <class T>
bool parse_number(std::string_view s, T* out) {
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return !s.empty() && ec == std::errc() && ptr == s.data() + s.size();
}

}  // namespace

std::optional<GtidSet> GtidSet::parse(std::string_view text) {
  GtidSet set;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    const size_t d1 = item.find('-');
    const size_t d2 = d1 == std::string_view::npos ? d1 : item.find('-', d1 + 1);
    if (d2 == std::string_view::npos) return std::nullopt;
    MariaGtidPoint g;
    if (!parse_number(item.substr(0, d1), &g.domain) ||
        !parse_number(item.substr(d1 + 1, d2 - d1 - 1), &g.server_id) ||
        !parse_number(item.substr(d2 + 1), &g.seq))
      return std::nullopt;
    set.items_.push_back(g);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
    if (text.empty()) return std::nullopt;  // trailing comma
  }
  return set;
}

std::string GtidSet::to_string() const {
  std::string out;
  for (const MariaGtidPoint& g : items_) {
    if (!out.empty()) out += ',';
    out +=
        std::to_string(g.domain) + '-' + std::to_string(g.server_id) + '-' + std::to_string(g.seq);
  }
  return out;
}

void GtidSet::apply(const MariaGtidPoint& g) {
  for (MariaGtidPoint& item : items_)
    if (item.domain == g.domain) {
      item = g;
      return;
    }
  items_.push_back(g);
}

std::string hex_encode(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) {
    out += kDigits[uint8_t(c) >> 4];
    out += kDigits[uint8_t(c) & 15];
  }
  return out;
}

std::optional<std::string> hex_decode(std::string_view hex) {
  if (hex.size() % 2) return std::nullopt;
  auto digit = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = digit(hex[i]), lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += char(hi * 16 + lo);
  }
  return out;
}

void write_field(PositionWriter& w, const Lsn& v) { w.word(v.to_string()); }
bool read_field(PositionReader& r, Lsn* v) {
  std::string_view s;
  if (!r.word(&s)) return false;
  auto l = Lsn::parse(s);
  if (!l) return false;
  *v = *l;
  return true;
}

void write_field(PositionWriter& w, const BinlogCoord& v) {
  w.word(v.file);
  w.number(v.pos);
}
bool read_field(PositionReader& r, BinlogCoord* v) {
  std::string_view file;
  if (!r.word(&file) || file.empty() || !r.number(&v->pos)) return false;
  v->file = std::string(file);
  return true;
}

void write_field(PositionWriter& w, const GtidSet& v) { w.word(v.empty() ? "-" : v.to_string()); }
bool read_field(PositionReader& r, GtidSet* v) {
  std::string_view s;
  if (!r.word(&s)) return false;
  if (s == "-") {
    *v = GtidSet{};
    return true;
  }
  auto g = GtidSet::parse(s);
  if (!g || g->empty()) return false;
  *v = std::move(*g);
  return true;
}

void write_field(PositionWriter& w, const BinlogPoint& v) {
  write_field(w, v.coord);
  write_field(w, v.gtid);
}
bool read_field(PositionReader& r, BinlogPoint* v) {
  return read_field(r, &v->coord) && read_field(r, &v->gtid);
}

void write_field(PositionWriter& w, const KeysetCursor& v) {
  switch (v.kind) {
    case KeysetCursor::Kind::start: w.word("-"); return;
    case KeysetCursor::Kind::offset: w.word("o" + std::to_string(v.offset)); return;
    case KeysetCursor::Kind::after_key: {
      std::string s = "k";
      for (size_t i = 0; i < v.key.size(); ++i) s += (i ? "," : "") + hex_encode(v.key[i]);
      w.word(s);
      return;
    }
  }
}
bool read_field(PositionReader& r, KeysetCursor* v) {
  std::string_view s;
  if (!r.word(&s) || s.empty()) return false;
  *v = KeysetCursor{};
  if (s == "-") return true;
  if (s[0] == 'o') {
    v->kind = KeysetCursor::Kind::offset;
    return parse_number(s.substr(1), &v->offset);
  }
  if (s[0] != 'k') return false;
  v->kind = KeysetCursor::Kind::after_key;
  std::string_view rest = s.substr(1);
  while (true) {
    const size_t comma = rest.find(',');
    auto value = hex_decode(rest.substr(0, comma));
    if (!value) return false;
    v->key.push_back(std::move(*value));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return true;
}

void write_field(PositionWriter& w, const IncrementalState& v) {
  w.number(v.tables.size());
  for (const std::string& t : v.tables) w.word("t" + hex_encode(t));  // "t": never empty
  write_field(w, v.cursor);
}
bool read_field(PositionReader& r, IncrementalState* v) {
  uint64_t n = 0;
  if (!r.number(&n) || n > 100000) return false;
  v->tables.clear();
  for (uint64_t i = 0; i < n; ++i) {
    std::string_view s;
    if (!r.word(&s) || s.size() < 2 || s[0] != 't') return false;
    auto name = hex_decode(s.substr(1));
    if (!name) return false;
    v->tables.push_back(std::move(*name));
  }
  return read_field(r, &v->cursor);
}

uint64_t tables_fingerprint(const std::vector<std::pair<std::string, std::string>>& tables) {
  uint64_t h = 14695981039346656037ull;
  auto mix = [&](std::string_view part) {
    for (char c : part) h = (h ^ uint8_t(c)) * 1099511628211ull;
    h = (h ^ 0xffu) * 1099511628211ull;  // a separator no name byte sequence can fake alone
  };
  for (const auto& [schema, table] : tables) {
    mix(schema);
    mix(table);
  }
  return h ? h : 1;
}

}  // namespace sluice
