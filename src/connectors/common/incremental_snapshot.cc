#include "connectors/common/incremental_snapshot.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "sluice/record.h"

namespace sluice {

std::string key_identity(const std::vector<std::string_view>& key) {
  std::string out;
  for (std::string_view k : key) {
    out += std::to_string(k.size());
    out += ':';
    out += k;
  }
  return out;
}

size_t IncrementalSnapshot::add_tables(IncrementalState& st,
                                       const std::vector<std::string>& tables) {
  size_t added = 0;
  for (const std::string& t : tables) {
    if (std::find(st.tables.begin(), st.tables.end(), t) != st.tables.end()) continue;
    st.tables.push_back(t);
    ++added;
  }
  return added;
}

std::string IncrementalSnapshot::begin_chunk() {
  // Unique across runs (a restart must not take an old run's watermark for its own): the start
  // time of this process's first chunk and a counter.
  static const uint64_t run = uint64_t(std::chrono::system_clock::now().time_since_epoch().count());
  id_ = fmt::format("{:x}-{}", run, ++next_id_);
  window_ = Window::awaiting_low;
  rows_.clear();
  dropped_.clear();
  index_.clear();
  exhausted_ = false;
  emit_ready_ = false;
  read_ = false;
  return id_;
}

void IncrementalSnapshot::chunk_read(std::vector<ChunkRow> rows, bool exhausted) {
  rows_ = std::move(rows);
  dropped_.assign(rows_.size(), false);
  index_.clear();
  for (size_t i = 0; i < rows_.size(); ++i) {
    std::vector<std::string_view> k(rows_[i].key.begin(), rows_[i].key.end());
    index_.emplace(key_identity(k), i);
  }
  exhausted_ = exhausted;
  read_ = true;
}

void IncrementalSnapshot::low_seen(std::string_view id) {
  if (window_ == Window::awaiting_low && id == id_) window_ = Window::open;
}

void IncrementalSnapshot::high_seen(std::string_view id) {
  if (window_ == Window::open && id == id_) {
    window_ = Window::closed;
    emit_ready_ = true;
  }
}

bool IncrementalSnapshot::change_seen(const IncrementalState& st, std::string_view table,
                                      std::string_view identity) {
  if (!tracking() || table != current(st)) return false;
  auto it = index_.find(std::string(identity));
  if (it == index_.end() || dropped_[it->second]) return false;
  dropped_[it->second] = true;
  ++dropped_total_;
  return true;
}

void IncrementalSnapshot::truncate_seen(const IncrementalState& st, std::string_view table) {
  if (!tracking() || table != current(st)) return;
  for (size_t i = 0; i < dropped_.size(); ++i)
    if (!dropped_[i]) {
      dropped_[i] = true;
      ++dropped_total_;
    }
}

void IncrementalSnapshot::restart_table(IncrementalState& st) {
  st.cursor = KeysetCursor{};
  window_ = Window::closed;
  id_.clear();
  emit_ready_ = false;
  rows_.clear();
  dropped_.clear();
  index_.clear();
  read_ = false;
  exhausted_ = false;
  emitted_ = dropped_total_ = 0;
}

std::optional<std::string> IncrementalSnapshot::finish(IncrementalState& st) {
  for (size_t i = 0; i < rows_.size(); ++i)
    if (!dropped_[i]) ++emitted_;
  emit_ready_ = false;
  std::optional<std::string> done;
  if (exhausted_ || rows_.empty()) {
    done = st.tables.front();
    st.tables.erase(st.tables.begin());
    st.cursor = KeysetCursor{};
    emitted_ = dropped_total_ = 0;
  } else {
    st.cursor.kind = KeysetCursor::Kind::after_key;
    const ChunkRow& last = rows_.back();  // past the chunk, dropped rows included
    st.cursor.key = last.cursor_key.empty() ? last.key : last.cursor_key;
  }
  rows_.clear();
  dropped_.clear();
  index_.clear();
  read_ = false;
  return done;
}

// ── signals ─────────────────────────────────────────────────────────────────

namespace {

// Just enough JSON for the signal's data: objects, arrays, strings (with escapes), and skipping
// numbers, booleans and null.
class SignalJson {
 public:
  explicit SignalJson(std::string_view s) : s_(s) {}
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r'))
      ++i_;
  }
  bool eat(char c) {
    ws();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool peek(char c) {
    ws();
    return i_ < s_.size() && s_[i_] == c;
  }
  bool string(std::string* out) {
    if (!eat('"')) return false;
    out->clear();
    while (i_ < s_.size()) {
      char c = s_[i_++];
      if (c == '"') return true;
      if (c != '\\') {
        *out += c;
        continue;
      }
      if (i_ >= s_.size()) return false;
      char e = s_[i_++];
      switch (e) {
        case '"': *out += '"'; break;
        case '\\': *out += '\\'; break;
        case '/': *out += '/'; break;
        case 'n': *out += '\n'; break;
        case 't': *out += '\t'; break;
        case 'r': *out += '\r'; break;
        case 'b': *out += '\b'; break;
        case 'f': *out += '\f'; break;
        case 'u': {
          if (i_ + 4 > s_.size()) return false;
          unsigned v = 0;
          for (int k = 0; k < 4; ++k) {
            char h = s_[i_++];
            v <<= 4;
            if (h >= '0' && h <= '9') v |= unsigned(h - '0');
            else if (h >= 'a' && h <= 'f') v |= unsigned(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F') v |= unsigned(h - 'A' + 10);
            else return false;
          }
          if (v < 0x80) {
            *out += char(v);
          } else if (v < 0x800) {
            *out += char(0xC0 | (v >> 6));
            *out += char(0x80 | (v & 0x3F));
          } else {
            *out += char(0xE0 | (v >> 12));
            *out += char(0x80 | ((v >> 6) & 0x3F));
            *out += char(0x80 | (v & 0x3F));
          }
          break;
        }
        default: return false;
      }
    }
    return false;
  }
  bool skip_value(int depth = 0) {
    if (depth > 32) return false;
    ws();
    if (peek('"')) {
      std::string tmp;
      return string(&tmp);
    }
    if (eat('{')) {
      if (eat('}')) return true;
      do {
        std::string k;
        if (!string(&k) || !eat(':') || !skip_value(depth + 1)) return false;
      } while (eat(','));
      return eat('}');
    }
    if (eat('[')) {
      if (eat(']')) return true;
      do {
        if (!skip_value(depth + 1)) return false;
      } while (eat(','));
      return eat(']');
    }
    const size_t start = i_;
    while (i_ < s_.size() && s_[i_] != ',' && s_[i_] != '}' && s_[i_] != ']' && s_[i_] != ' ') ++i_;
    return i_ > start;
  }
  bool at_end() {
    ws();
    return i_ == s_.size();
  }

 private:
  std::string_view s_;
  size_t i_ = 0;
};

void json_string(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (uint8_t(c) < 0x20) {
      out += fmt::format("\\u{:04x}", unsigned(uint8_t(c)));
    } else {
      out += c;
    }
  }
  out += '"';
}

}  // namespace

Result<std::optional<std::vector<std::string>>> parse_snapshot_signal(std::string_view type,
                                                                      std::string_view data) {
  if (type != "execute-snapshot") return std::optional<std::vector<std::string>>();
  auto bad = [&](std::string_view why) {
    return Error(Errc::data,
                 fmt::format("execute-snapshot signal: {} (data must be {{\"data-collections\": "
                             "[\"schema.table\"], \"type\": \"incremental\"}}, got '{}')",
                             why, data));
  };
  SignalJson j(data);
  std::vector<std::string> tables;
  bool have_tables = false;
  std::string kind = "incremental";
  if (!j.eat('{')) return bad("not a JSON object");
  if (!j.eat('}')) {
    do {
      std::string name;
      if (!j.string(&name) || !j.eat(':')) return bad("not a JSON object");
      if (name == "data-collections") {
        if (!j.eat('[')) return bad("data-collections is not an array");
        have_tables = true;
        if (!j.eat(']')) {
          do {
            std::string t;
            if (!j.string(&t)) return bad("data-collections holds a non-string");
            tables.push_back(std::move(t));
          } while (j.eat(','));
          if (!j.eat(']')) return bad("data-collections is not an array");
        }
      } else if (name == "type") {
        if (!j.string(&kind)) return bad("type is not a string");
      } else if (!j.skip_value()) {
        return bad("not valid JSON");
      }
    } while (j.eat(','));
    if (!j.eat('}')) return bad("not a JSON object");
  }
  if (!j.at_end()) return bad("trailing text after the JSON object");
  if (!have_tables || tables.empty()) return bad("no table in data-collections");
  std::string lower = kind;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; });
  if (lower != "incremental")
    return bad(fmt::format("snapshot type '{}' is not supported (only incremental)", kind));
  return std::optional<std::vector<std::string>>(std::move(tables));
}

std::string snapshot_signal_data(const std::vector<std::string>& tables) {
  std::string out = "{\"data-collections\": [";
  for (size_t i = 0; i < tables.size(); ++i) {
    if (i) out += ", ";
    json_string(out, tables[i]);
  }
  out += "], \"type\": \"incremental\"}";
  return out;
}

void add_snapshot_marker(Batch& batch, std::string_view schema, std::string_view table,
                         bool begin) {
  Record& r = batch.add();
  r.op = Operation::marker;
  r.metadata =
      batch.object(3)
          .add(meta::kSchema, Value::string(batch.copy(schema)))
          .add(meta::kTable, Value::string(batch.copy(table)))
          .add(meta::kMarker, Value::string(begin ? meta::kSnapshotBegin : meta::kSnapshotEnd))
          .build();
}

}  // namespace sluice
