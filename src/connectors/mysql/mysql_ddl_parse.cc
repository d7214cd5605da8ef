// DDL / DML statement recognition for the schema history (see mysql_ddl_parse.h).
#include "connectors/mysql/mysql_ddl_parse.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>

namespace sluice::mysql::ddl {

namespace {

struct Token {
  enum class Kind : uint8_t { word, quoted, string, number, punct } kind = Kind::punct;
  std::string text;  // word: as written; quoted: the name; string: unescaped; punct: one char
};

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(uint8_t(c)));
  return out;
}

bool is_word_char(char c) {
  return std::isalnum(uint8_t(c)) || c == '_' || c == '$' || uint8_t(c) >= 0x80;
}

std::vector<Token> tokenize(std::string_view s) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (std::isspace(uint8_t(c))) {
      ++i;
    } else if (c == '#' || (c == '-' && i + 2 < s.size() && s[i + 1] == '-' &&
                            std::isspace(uint8_t(s[i + 2])))) {
      while (i < s.size() && s[i] != '\n') ++i;
    } else if (c == '/' && i + 1 < s.size() && s[i + 1] == '*') {
      if (i + 2 < s.size() && s[i + 2] == '!') {
        // An executable comment /*!50100 ... */ or /*M!100100 ... */: its text is part of the
        // statement; drop the markers only.
        i += 3;
        while (i < s.size() && std::isdigit(uint8_t(s[i]))) ++i;
      } else if (i + 3 < s.size() && s[i + 2] == 'M' && s[i + 3] == '!') {
        i += 4;
        while (i < s.size() && std::isdigit(uint8_t(s[i]))) ++i;
      } else {
        const size_t end = s.find("*/", i + 2);
        i = end == std::string_view::npos ? s.size() : end + 2;
      }
    } else if (c == '*' && i + 1 < s.size() && s[i + 1] == '/') {
      i += 2;  // the end of an executable comment
    } else if (c == '`' || c == '"') {
      Token t;
      t.kind = c == '`' ? Token::Kind::quoted : Token::Kind::string;
      for (++i; i < s.size(); ++i) {
        if (s[i] == c) {
          if (i + 1 < s.size() && s[i + 1] == c) {
            t.text += c;
            ++i;
            continue;
          }
          break;
        }
        if (c == '"' && s[i] == '\\' && i + 1 < s.size()) ++i;
        t.text += s[i];
      }
      ++i;
      out.push_back(std::move(t));
    } else if (c == '\'') {
      Token t;
      t.kind = Token::Kind::string;
      for (++i; i < s.size(); ++i) {
        if (s[i] == '\'') {
          if (i + 1 < s.size() && s[i + 1] == '\'') {
            t.text += '\'';
            ++i;
            continue;
          }
          break;
        }
        if (s[i] == '\\' && i + 1 < s.size()) {
          ++i;
          switch (s[i]) {
            case 'n': t.text += '\n'; break;
            case 't': t.text += '\t'; break;
            case 'r': t.text += '\r'; break;
            case '0': t.text += '\0'; break;
            default: t.text += s[i];
          }
          continue;
        }
        t.text += s[i];
      }
      ++i;
      out.push_back(std::move(t));
    } else if (std::isdigit(uint8_t(c)) ||
               (c == '.' && i + 1 < s.size() && std::isdigit(uint8_t(s[i + 1])))) {
      Token t;
      t.kind = Token::Kind::number;
      while (i < s.size() &&
             (std::isalnum(uint8_t(s[i])) || s[i] == '.' ||
              ((s[i] == '-' || s[i] == '+') && i > 0 && (s[i - 1] == 'e' || s[i - 1] == 'E'))))
        t.text += s[i++];
      // A word that starts with digits (1abc) is a name.
      if (std::any_of(t.text.begin(), t.text.end(),
                      [](char ch) { return std::isalpha(uint8_t(ch)) && ch != 'e' && ch != 'E'; }))
        t.kind = Token::Kind::word;
      out.push_back(std::move(t));
    } else if (is_word_char(c)) {
      Token t;
      t.kind = Token::Kind::word;
      while (i < s.size() && is_word_char(s[i])) t.text += s[i++];
      out.push_back(std::move(t));
    } else {
      out.push_back(Token{Token::Kind::punct, std::string(1, c)});
      ++i;
    }
  }
  return out;
}

class Cursor {
 public:
  explicit Cursor(std::vector<Token> t) : t_(std::move(t)) {}
  bool done() const { return i_ >= t_.size(); }
  const Token* peek(size_t ahead = 0) const {
    return i_ + ahead < t_.size() ? &t_[i_ + ahead] : nullptr;
  }
  // The next token is the keyword `kw` (case-insensitive, not backquoted).
  bool is(std::string_view kw, size_t ahead = 0) const {
    const Token* t = peek(ahead);
    if (!t || t->kind != Token::Kind::word || t->text.size() != kw.size()) return false;
    for (size_t k = 0; k < kw.size(); ++k)
      if (std::toupper(uint8_t(t->text[k])) != uint8_t(kw[k])) return false;
    return true;
  }
  bool is_punct(char c, size_t ahead = 0) const {
    const Token* t = peek(ahead);
    return t && t->kind == Token::Kind::punct && t->text[0] == c;
  }
  bool accept(std::string_view kw) {
    if (!is(kw)) return false;
    ++i_;
    return true;
  }
  bool accept_punct(char c) {
    if (!is_punct(c)) return false;
    ++i_;
    return true;
  }
  const Token* next() { return i_ < t_.size() ? &t_[i_++] : nullptr; }
  // A name: a backquoted identifier or a bare word.
  std::optional<std::string> name() {
    const Token* t = peek();
    if (!t || (t->kind != Token::Kind::word && t->kind != Token::Kind::quoted &&
               t->kind != Token::Kind::number))
      return std::nullopt;
    ++i_;
    return t->text;
  }
  std::optional<QualifiedName> qualified(std::string_view default_db) {
    auto first = name();
    if (!first) return std::nullopt;
    if (accept_punct('.')) {
      auto second = name();
      if (!second) return std::nullopt;
      return QualifiedName{*first, *second};
    }
    return QualifiedName{std::string(default_db), *first};
  }
  // Skips a balanced ( ... ) group starting at the current '('; returns its tokens' text joined.
  bool skip_group() {
    if (!accept_punct('(')) return false;
    int depth = 1;
    while (!done() && depth > 0) {
      if (is_punct('(')) ++depth;
      else if (is_punct(')')) --depth;
      ++i_;
    }
    return depth == 0;
  }
  // Skips to the next ',' or ')' at depth 0 (not consumed) or the end.
  void skip_to_clause_end() {
    int depth = 0;
    while (!done()) {
      if (depth == 0 && (is_punct(',') || is_punct(')') || is_punct(';'))) return;
      if (is_punct('(')) ++depth;
      else if (is_punct(')')) --depth;
      ++i_;
    }
  }
  size_t index() const { return i_; }
  void seek(size_t i) { i_ = i; }

 private:
  std::vector<Token> t_;
  size_t i_ = 0;
};

std::string canonical_data_type(std::string base) {
  if (base == "integer") return "int";
  if (base == "int1") return "tinyint";
  if (base == "int2") return "smallint";
  if (base == "int3" || base == "middleint") return "mediumint";
  if (base == "int4") return "int";
  if (base == "int8") return "bigint";
  if (base == "bool" || base == "boolean") return "tinyint";
  if (base == "dec" || base == "numeric" || base == "fixed") return "decimal";
  if (base == "real" || base == "float8") return "double";
  if (base == "float4") return "float";
  if (base == "character") return "char";
  if (base == "long") return "mediumtext";
  return base;
}

bool is_binary_type(std::string_view t) {
  return t == "binary" || t == "varbinary" || t == "tinyblob" || t == "blob" || t == "mediumblob" ||
         t == "longblob";
}

// Reads a column type at the cursor: base word, ( args ), UNSIGNED / SIGNED / ZEROFILL,
// CHARACTER SET / CHARSET / COLLATE / BINARY. False when there is no type.
bool read_type(Cursor& c, ColumnDef* d) {
  const Token* base = c.peek();
  if (!base || base->kind != Token::Kind::word) return false;
  c.next();
  std::string b = lower(base->text);
  std::string spelled = b;
  if (b == "double" && c.accept("PRECISION")) spelled = "double";
  if ((b == "character" || b == "char") && c.accept("VARYING")) b = spelled = "varchar";
  if (b == "national" || b == "nchar" || b == "nvarchar") {
    // NATIONAL CHAR / VARCHAR: utf8
    if (b == "national") {
      const Token* t = c.next();
      if (!t) return false;
      b = lower(t->text);
    } else {
      b = b == "nchar" ? "char" : "varchar";
    }
    if (b == "character" || b == "char") b = c.accept("VARYING") ? "varchar" : "char";
    spelled = b;
    d->charset = "utf8mb3";
  }
  if (b == "long" && (c.is("VARCHAR") || c.is("VARBINARY"))) {
    if (c.accept("VARBINARY")) {
      b = "mediumblob";
    } else {
      c.next();
      b = "mediumtext";
    }
    spelled = b;
  }
  d->data_type = canonical_data_type(b);
  if (d->data_type == "serial") {
    d->data_type = "bigint";
    d->is_unsigned = true;
    d->not_null = true;
    d->auto_increment = true;
    spelled = "bigint unsigned";
  }
  d->type = spelled;
  if (c.is_punct('(')) {
    c.next();
    std::string args = "(";
    std::string cur;
    bool first = true;
    while (!c.done() && !c.is_punct(')')) {
      const Token* t = c.next();
      if (t->kind == Token::Kind::punct && t->text == ",") {
        d->args.push_back(cur);
        cur.clear();
        args += ",";
        first = true;
        continue;
      }
      if (!first) args += " ";
      first = false;
      if (t->kind == Token::Kind::string) {
        d->labels.push_back(t->text);
        std::string q = "'";
        for (char ch : t->text) q += ch == '\'' ? std::string("''") : std::string(1, ch);
        args += q + "'";
      } else {
        args += t->text;
      }
      cur += t->text;
    }
    if (!c.accept_punct(')')) return false;
    d->args.push_back(cur);
    d->type += args + ")";
  }
  if (d->data_type == "json") d->json = true;
  if (d->data_type == "enum" || d->data_type == "set") {
  } else {
    d->labels.clear();
  }
  for (;;) {
    if (c.accept("UNSIGNED")) {
      d->is_unsigned = true;
      d->type += " unsigned";
    } else if (c.accept("SIGNED")) {
    } else if (c.accept("ZEROFILL")) {
      d->is_unsigned = true;
      if (d->type.find("unsigned") == std::string::npos) d->type += " unsigned";
    } else if (c.is("CHARACTER") && c.is("SET", 1)) {
      c.next();
      c.next();
      if (auto n = c.name()) d->charset = lower(*n);
    } else if (c.accept("CHARSET")) {
      if (auto n = c.name()) d->charset = lower(*n);
    } else if (c.accept("COLLATE")) {
      if (auto n = c.name()) {
        const std::string coll = lower(*n);
        if (d->charset.empty()) d->charset = coll.substr(0, coll.find('_'));
      }
    } else if (c.is("BINARY") && !is_binary_type(d->data_type)) {
      c.next();  // a binary collation of a text type: still text
    } else if (c.accept("ASCII")) {
      d->charset = "latin1";
    } else if (c.accept("UNICODE")) {
      d->charset = "ucs2";
    } else if (c.accept("BYTE")) {
      d->charset = "binary";
    } else {
      break;
    }
  }
  if (is_binary_type(d->data_type)) d->charset = "binary";
  if (d->data_type == "json" && d->charset.empty()) d->charset = "utf8mb4";
  return true;
}

// The column attributes after the type, up to the end of the clause or FIRST / AFTER.
void read_attributes(Cursor& c, ColumnDef* d) {
  while (!c.done() && !c.is_punct(',') && !c.is_punct(')') && !c.is_punct(';') && !c.is("FIRST") &&
         !c.is("AFTER")) {
    if (c.accept("NOT")) {
      if (c.accept("NULL")) d->not_null = true;
    } else if (c.accept("NULL")) {
    } else if (c.accept("DEFAULT")) {
      const Token* t = c.peek();
      if (!t) return;
      if (t->kind == Token::Kind::string || t->kind == Token::Kind::number) {
        d->default_kind = ColumnDef::Default::literal;
        d->default_text = t->text;
        c.next();
      } else if ((t->kind == Token::Kind::punct && (t->text == "-" || t->text == "+")) &&
                 c.peek(1) && c.peek(1)->kind == Token::Kind::number) {
        d->default_kind = ColumnDef::Default::literal;
        d->default_text = (t->text == "-" ? "-" : "") + c.peek(1)->text;
        c.next();
        c.next();
      } else if (c.is("NULL")) {
        d->default_kind = ColumnDef::Default::null;
        c.next();
      } else if (c.is("TRUE") || c.is("FALSE")) {
        d->default_kind = ColumnDef::Default::literal;
        d->default_text = c.is("TRUE") ? "1" : "0";
        c.next();
      } else if (t->kind == Token::Kind::word && (lower(t->text) == "b" || lower(t->text) == "x") &&
                 c.peek(1) && c.peek(1)->kind == Token::Kind::string) {
        d->default_kind = ColumnDef::Default::expression;  // bit / hex literal: not as text
        c.next();
        c.next();
      } else {
        d->default_kind = ColumnDef::Default::expression;  // (expr), NOW(), CURRENT_TIMESTAMP...
        if (c.is_punct('(')) {
          c.skip_group();
        } else {
          c.next();
          if (c.is_punct('(')) c.skip_group();
        }
      }
    } else if (c.accept("AUTO_INCREMENT")) {
      d->auto_increment = true;
    } else if (c.accept("GENERATED")) {
      d->generated = true;
    } else if (c.accept("AS")) {
      d->generated = true;
      if (c.is_punct('(')) c.skip_group();
    } else if (c.accept("PRIMARY")) {
      c.accept("KEY");
      d->primary_key = true;
    } else if (c.is_punct('(')) {
      c.skip_group();
    } else {
      c.next();  // COMMENT 'x', UNIQUE, KEY, ON UPDATE ..., CHECK, INVISIBLE, REFERENCES ...
    }
  }
}

bool read_column_def(Cursor& c, ColumnDef* d) {
  auto n = c.name();
  if (!n) return false;
  d->name = *n;
  if (!read_type(c, d)) return false;
  read_attributes(c, d);
  return true;
}

void read_place(Cursor& c, AlterClause* a) {
  if (c.accept("FIRST")) {
    a->place = Place::first;
  } else if (c.accept("AFTER")) {
    a->place = Place::after;
    if (auto n = c.name()) a->after = *n;
  }
}

std::vector<std::string> read_name_list(Cursor& c) {
  std::vector<std::string> out;
  if (!c.accept_punct('(')) return out;
  while (!c.done() && !c.is_punct(')')) {
    if (auto n = c.name()) {
      out.push_back(*n);
      if (c.is_punct('(')) c.skip_group();  // a prefix length
      c.accept("ASC") || c.accept("DESC");
    } else {
      c.next();
    }
    c.accept_punct(',');
  }
  c.accept_punct(')');
  return out;
}

bool is_index_word(const Cursor& c) {
  return c.is("INDEX") || c.is("KEY") || c.is("UNIQUE") || c.is("FULLTEXT") || c.is("SPATIAL") ||
         c.is("CONSTRAINT") || c.is("FOREIGN") || c.is("CHECK") || c.is("PERIOD") ||
         c.is("SYSTEM") || c.is("PARTITION");
}

// One ALTER TABLE clause; false with `error` set when it is not understood. `more` receives the
// clauses after the first of ADD (a INT, b INT).
bool read_alter_clause(Cursor& c, std::string_view default_db, AlterClause* a,
                       std::vector<AlterClause>* more, std::string* error) {
  using K = AlterClause::Kind;
  if (c.accept("ADD")) {
    // ADD CONSTRAINT [name] PRIMARY KEY (...): the key, as ADD PRIMARY KEY.
    if (c.is("CONSTRAINT") && (c.is("PRIMARY", 1) || (c.is("PRIMARY", 2) && c.peek(1) &&
                                                      (c.peek(1)->kind == Token::Kind::word ||
                                                       c.peek(1)->kind == Token::Kind::quoted)))) {
      c.accept("CONSTRAINT");
      if (!c.is("PRIMARY")) c.next();
    }
    if (c.accept("PRIMARY")) {
      c.accept("KEY");
      a->kind = K::add_primary_key;
      if (c.accept("USING")) c.next();
      a->key = read_name_list(c);
      c.skip_to_clause_end();
      return true;
    }
    if (is_index_word(c)) {
      a->kind = K::no_column_change;
      c.skip_to_clause_end();
      return true;
    }
    c.accept("COLUMN");
    if (c.accept("IF")) {
      c.accept("NOT");
      c.accept("EXISTS");
    }
    if (c.accept_punct('(')) {
      // ADD [COLUMN] (a INT, b INT[, INDEX (...)]): each column appended in order.
      std::vector<AlterClause> list;
      while (!c.done() && !c.is_punct(')')) {
        AlterClause one;
        if (c.accept("PRIMARY") || (c.is("CONSTRAINT") && c.is("PRIMARY", 1) &&
                                    c.accept("CONSTRAINT") && c.accept("PRIMARY"))) {
          c.accept("KEY");
          one.kind = K::add_primary_key;
          if (c.accept("USING")) c.next();
          one.key = read_name_list(c);
          while (!c.done() && !c.is_punct(',') && !c.is_punct(')')) {
            if (c.is_punct('(')) c.skip_group();
            else c.next();
          }
        } else if (is_index_word(c)) {
          one.kind = K::no_column_change;
          while (!c.done() && !c.is_punct(',') && !c.is_punct(')')) {
            if (c.is_punct('(')) c.skip_group();
            else c.next();
          }
        } else {
          one.kind = K::add_column;
          if (!read_column_def(c, &one.def)) {
            *error = "a column definition in ADD (...)";
            return false;
          }
        }
        list.push_back(std::move(one));
        if (!c.accept_punct(',') && !c.is_punct(')')) {
          *error = "a column definition in ADD (...)";
          return false;
        }
      }
      if (!c.accept_punct(')') || list.empty()) {
        *error = "ADD (...) without its closing parenthesis";
        return false;
      }
      *a = std::move(list.front());
      for (size_t i = 1; i < list.size(); ++i) more->push_back(std::move(list[i]));
      return true;
    }
    a->kind = K::add_column;
    if (!read_column_def(c, &a->def)) {
      *error = "a column definition";
      return false;
    }
    read_place(c, a);
    return true;
  }
  if (c.accept("DROP")) {
    if (c.accept("PRIMARY")) {
      c.accept("KEY");
      a->kind = K::drop_primary_key;
      return true;
    }
    if (c.is("INDEX") || c.is("KEY") || c.is("FOREIGN") || c.is("CONSTRAINT") || c.is("CHECK") ||
        c.is("PARTITION") || c.is("SYSTEM") || c.is("PERIOD")) {
      a->kind = K::no_column_change;
      c.skip_to_clause_end();
      return true;
    }
    c.accept("COLUMN");
    if (c.accept("IF")) c.accept("EXISTS");
    auto n = c.name();
    if (!n) {
      *error = "the dropped column's name";
      return false;
    }
    a->kind = K::drop_column;
    a->column = *n;
    c.accept("RESTRICT") || c.accept("CASCADE");
    return true;
  }
  if (c.accept("RENAME")) {
    if (c.accept("COLUMN")) {
      if (c.accept("IF")) c.accept("EXISTS");
      auto from = c.name();
      if (!from || !c.accept("TO")) {
        *error = "RENAME COLUMN a TO b";
        return false;
      }
      auto to = c.name();
      if (!to) {
        *error = "RENAME COLUMN a TO b";
        return false;
      }
      a->kind = K::rename_column;
      a->column = *from;
      a->to = *to;
      return true;
    }
    if (c.is("INDEX") || c.is("KEY")) {
      a->kind = K::no_column_change;
      c.skip_to_clause_end();
      return true;
    }
    c.accept("TO") || c.accept("AS");
    auto t = c.qualified(default_db);
    if (!t) {
      *error = "the new table name";
      return false;
    }
    a->kind = K::rename_table;
    a->new_table = *t;
    return true;
  }
  if (c.accept("CHANGE")) {
    c.accept("COLUMN");
    if (c.accept("IF")) c.accept("EXISTS");
    auto from = c.name();
    if (!from || !read_column_def(c, &a->def)) {
      *error = "CHANGE old new type";
      return false;
    }
    a->kind = K::change_column;
    a->column = *from;
    read_place(c, a);
    return true;
  }
  if (c.accept("MODIFY")) {
    c.accept("COLUMN");
    if (c.accept("IF")) c.accept("EXISTS");
    if (!read_column_def(c, &a->def)) {
      *error = "MODIFY column type";
      return false;
    }
    a->kind = K::modify_column;
    a->column = a->def.name;
    read_place(c, a);
    return true;
  }
  if (c.accept("ALTER")) {
    // ALTER [COLUMN] c SET DEFAULT / DROP DEFAULT / SET VISIBLE ...: old rows keep their values.
    a->kind = K::no_column_change;
    c.skip_to_clause_end();
    return true;
  }
  if (c.accept("CONVERT")) {
    c.accept("TO");
    if (c.accept("CHARACTER")) c.accept("SET");
    else c.accept("CHARSET");
    auto n = c.name();
    if (!n) {
      *error = "CONVERT TO CHARACTER SET x";
      return false;
    }
    a->kind = K::convert_charset;
    a->charset = lower(*n);
    c.skip_to_clause_end();
    return true;
  }
  c.accept("DEFAULT");
  if ((c.is("CHARACTER") && c.is("SET", 1)) || c.is("CHARSET")) {
    if (c.accept("CHARACTER")) c.accept("SET");
    else c.accept("CHARSET");
    c.accept_punct('=');
    auto n = c.name();
    a->kind = K::default_charset;
    if (n) a->charset = lower(*n);
    c.skip_to_clause_end();
    return true;
  }
  // Table options and algorithm clauses change no column.
  for (const char* kw : {"ENGINE",
                         "COMMENT",
                         "ALGORITHM",
                         "LOCK",
                         "FORCE",
                         "ORDER",
                         "AUTO_INCREMENT",
                         "ROW_FORMAT",
                         "COLLATE",
                         "KEY_BLOCK_SIZE",
                         "STATS_PERSISTENT",
                         "STATS_AUTO_RECALC",
                         "STATS_SAMPLE_PAGES",
                         "PACK_KEYS",
                         "CHECKSUM",
                         "DELAY_KEY_WRITE",
                         "MAX_ROWS",
                         "MIN_ROWS",
                         "AVG_ROW_LENGTH",
                         "ENABLE",
                         "DISABLE",
                         "DISCARD",
                         "IMPORT",
                         "PAGE_CHECKSUM",
                         "TRANSACTIONAL",
                         "ENCRYPTED",
                         "ENCRYPTION_KEY_ID",
                         "PAGE_COMPRESSED",
                         "PAGE_COMPRESSION_LEVEL",
                         "IETF_QUOTES",
                         "SEQUENCE",
                         "REMOVE",
                         "COALESCE",
                         "REORGANIZE",
                         "ANALYZE",
                         "CHECK",
                         "OPTIMIZE",
                         "REBUILD",
                         "REPAIR",
                         "TRUNCATE",
                         "EXCHANGE",
                         "PARTITION",
                         "WAIT",
                         "NOWAIT",
                         "UNION",
                         "INSERT_METHOD",
                         "DATA",
                         "INDEX",
                         "CONNECTION",
                         "TABLESPACE",
                         "STORAGE",
                         "SECONDARY_ENGINE"})
    if (c.is(kw)) {
      a->kind = K::no_column_change;
      c.skip_to_clause_end();
      return true;
    }
  const Token* t = c.peek();
  *error = t ? "'" + t->text + "'" : "the end of the statement";
  return false;
}

void parse_alter(Cursor& c, std::string_view default_db, Statement* st) {
  st->kind = Statement::Kind::alter_table;
  c.accept("ONLINE");
  c.accept("IGNORE");
  if (!c.accept("TABLE")) {
    st->kind = Statement::Kind::other;  // ALTER USER / DATABASE / VIEW / ...
    return;
  }
  if (c.accept("IF")) c.accept("EXISTS");
  auto t = c.qualified(default_db);
  if (!t) {
    st->error = "the table name";
    return;
  }
  st->tables.push_back(*t);
  if (c.accept("WAIT")) c.next();
  else c.accept("NOWAIT");
  while (!c.done() && !c.is_punct(';')) {
    AlterClause a;
    std::vector<AlterClause> more;
    std::string why;
    if (!read_alter_clause(c, default_db, &a, &more, &why)) {
      st->error = "cannot read " + why;
      return;
    }
    st->clauses.push_back(std::move(a));
    for (AlterClause& m : more) st->clauses.push_back(std::move(m));
    // Options may follow each other without commas (ENGINE=x COMMENT='y').
    if (!c.accept_punct(',') && !c.done() && !c.is_punct(';') &&
        st->clauses.back().kind != AlterClause::Kind::no_column_change &&
        st->clauses.back().kind != AlterClause::Kind::default_charset) {
      const Token* n = c.peek();
      st->error = "cannot read '" + (n ? n->text : std::string()) + "' after a clause";
      return;
    }
  }
}

void parse_create(Cursor& c, std::string_view default_db, Statement* st) {
  c.accept("OR") && c.accept("REPLACE");
  st->temporary = c.accept("TEMPORARY");
  if (!c.accept("TABLE")) return;  // CREATE INDEX / VIEW / USER / DATABASE ...: no column change
  st->kind = Statement::Kind::create_table;
  if (c.accept("IF")) {
    c.accept("NOT");
    c.accept("EXISTS");
  }
  auto t = c.qualified(default_db);
  if (!t) {
    st->error = "the table name";
    return;
  }
  st->tables.push_back(*t);
  if (c.is("LIKE") || !c.is_punct('(')) {
    st->error = "CREATE TABLE without a column list (LIKE or AS SELECT)";
    return;
  }
  c.next();
  while (!c.done() && !c.is_punct(')')) {
    if (c.accept("PRIMARY")) {
      c.accept("KEY");
      if (c.accept("USING")) c.next();
      st->key = read_name_list(c);
      c.skip_to_clause_end();
    } else if ((is_index_word(c) && !c.is("PERIOD") && !c.is("SYSTEM") && !c.is("PARTITION")) ||
               (c.is("PERIOD") && c.is("FOR", 1))) {
      c.skip_to_clause_end();
    } else {
      ColumnDef d;
      if (!read_column_def(c, &d)) {
        st->error = "cannot read a column definition";
        return;
      }
      if (d.primary_key) st->key = {d.name};
      st->columns.push_back(std::move(d));
    }
    if (!c.accept_punct(',')) break;
  }
  if (!c.accept_punct(')')) {
    st->error = "cannot read the column list";
    return;
  }
  // Table options: DEFAULT CHARSET=x; AS SELECT / SELECT adds rows by statement, not columns.
  while (!c.done()) {
    if ((c.is("CHARACTER") && c.is("SET", 1)) || c.is("CHARSET")) {
      if (c.accept("CHARACTER")) c.accept("SET");
      else c.accept("CHARSET");
      c.accept_punct('=');
      if (auto n = c.name()) st->charset = lower(*n);
    } else if (c.accept("COLLATE")) {
      c.accept_punct('=');
      if (auto n = c.name(); n && st->charset.empty())
        st->charset = lower(n->substr(0, n->find('_')));
    } else if (c.is("AS") || c.is("SELECT") || c.is("IGNORE") || c.is("REPLACE")) {
      st->error = "CREATE TABLE ... SELECT";
      return;
    } else {
      c.next();
    }
  }
}

// INSERT / REPLACE / UPDATE / DELETE / LOAD DATA: the tables it may write.
void parse_dml(Cursor& c, std::string_view default_db, Statement* st) {
  st->kind = Statement::Kind::dml;
  auto add = [&](std::optional<QualifiedName> n) {
    if (n) st->tables.push_back(std::move(*n));
  };
  if (c.accept("INSERT") || c.accept("REPLACE")) {
    while (c.accept("LOW_PRIORITY") || c.accept("DELAYED") || c.accept("HIGH_PRIORITY") ||
           c.accept("IGNORE")) {
    }
    c.accept("INTO");
    add(c.qualified(default_db));
  } else if (c.accept("UPDATE")) {
    while (c.accept("LOW_PRIORITY") || c.accept("IGNORE")) {
    }
    // UPDATE a [AS x], b ... / a JOIN b: every table before SET may be written.
    while (!c.done() && !c.is("SET")) {
      const size_t at = c.index();
      if (c.is("JOIN") || c.is("INNER") || c.is("LEFT") || c.is("RIGHT") || c.is("CROSS") ||
          c.is("STRAIGHT_JOIN") || c.is("OUTER") || c.is("NATURAL") || c.accept_punct(',')) {
        if (c.index() == at) c.next();
        continue;
      }
      if (c.is("ON") || c.is("USING")) {
        // The join condition names no table that is written: skip to the next join or SET.
        c.next();
        while (!c.done() && !c.is("SET") && !c.is("JOIN") && !c.is("INNER") && !c.is("LEFT") &&
               !c.is("RIGHT") && !c.is("CROSS") && !c.is("STRAIGHT_JOIN") && !c.is("NATURAL") &&
               !c.is_punct(',')) {
          if (c.is_punct('(')) c.skip_group();
          else c.next();
        }
        continue;
      }
      add(c.qualified(default_db));
      if (c.index() == at) c.next();
      if (c.accept("AS")) c.name();
      else if (c.peek() && c.peek()->kind != Token::Kind::punct && !c.is("SET") && !c.is("JOIN") &&
               !c.is("INNER") && !c.is("LEFT") && !c.is("RIGHT") && !c.is("CROSS") &&
               !c.is("STRAIGHT_JOIN") && !c.is("NATURAL") && !c.is("ON"))
        c.name();  // an alias
    }
  } else if (c.accept("DELETE")) {
    while (c.accept("LOW_PRIORITY") || c.accept("QUICK") || c.accept("IGNORE")) {
    }
    if (c.accept("FROM")) {
      add(c.qualified(default_db));
      // DELETE FROM a, b USING ...: the tables listed before USING.
      while (c.accept_punct(',')) add(c.qualified(default_db));
    } else {
      // DELETE a, b FROM ...: the tables named before FROM.
      while (!c.done() && !c.is("FROM")) {
        add(c.qualified(default_db));
        c.accept_punct('.') && c.accept_punct('*');
        if (!c.accept_punct(',')) break;
      }
    }
  } else if (c.accept("LOAD")) {
    c.accept("DATA") || c.accept("XML");
    while (!c.done() && !c.is("INTO")) c.next();
    c.accept("INTO");
    c.accept("TABLE");
    add(c.qualified(default_db));
  }
}

}  // namespace

Statement parse_statement(std::string_view sql, std::string_view default_db) {
  Statement st;
  Cursor c(tokenize(sql));
  if (c.accept("ALTER")) {
    parse_alter(c, default_db, &st);
  } else if (c.accept("CREATE")) {
    parse_create(c, default_db, &st);
  } else if (c.accept("DROP")) {
    st.temporary = c.accept("TEMPORARY");
    if (!c.accept("TABLE") && !c.accept("TABLES")) return st;
    st.kind = Statement::Kind::drop_table;
    if (c.accept("IF")) c.accept("EXISTS");
    do {
      auto t = c.qualified(default_db);
      if (!t) {
        st.error = "cannot read the table names";
        return st;
      }
      st.tables.push_back(*t);
    } while (c.accept_punct(','));
  } else if (c.accept("RENAME")) {
    if (!c.accept("TABLE") && !c.accept("TABLES")) return st;
    st.kind = Statement::Kind::rename_table;
    if (c.accept("IF")) c.accept("EXISTS");
    do {
      auto from = c.qualified(default_db);
      if (c.accept("WAIT")) c.next();
      else c.accept("NOWAIT");
      if (!from || !c.accept("TO")) {
        st.error = "cannot read RENAME TABLE a TO b";
        return st;
      }
      auto to = c.qualified(default_db);
      if (!to) {
        st.error = "cannot read RENAME TABLE a TO b";
        return st;
      }
      st.tables.push_back(*from);
      st.tables.push_back(*to);
    } while (c.accept_punct(','));
  } else if (c.accept("TRUNCATE")) {
    st.kind = Statement::Kind::truncate;
    c.accept("TABLE");
    if (auto t = c.qualified(default_db)) st.tables.push_back(*t);
  } else if (c.is("INSERT") || c.is("REPLACE") || c.is("UPDATE") || c.is("DELETE") ||
             c.is("LOAD")) {
    parse_dml(c, default_db, &st);
  } else if (c.accept("WITH")) {
    // WITH cte AS (...) UPDATE / DELETE / INSERT ...
    while (!c.done() && !(c.is("INSERT") || c.is("REPLACE") || c.is("UPDATE") || c.is("DELETE"))) {
      if (c.is_punct('(')) c.skip_group();
      else c.next();
    }
    if (!c.done()) parse_dml(c, default_db, &st);
  }
  return st;
}

ColumnDef parse_column_type(std::string_view column_type) {
  ColumnDef d;
  Cursor c(tokenize(column_type));
  read_type(c, &d);
  return d;
}

namespace {

int int_rank(std::string_view t) {
  if (t == "tinyint") return 1;
  if (t == "smallint") return 2;
  if (t == "mediumint") return 3;
  if (t == "int") return 4;
  if (t == "bigint") return 5;
  return 0;
}
int int_digits(int rank, bool is_unsigned) {
  static constexpr int kSigned[] = {0, 3, 5, 7, 10, 19};
  static constexpr int kUnsigned[] = {0, 3, 5, 8, 10, 20};
  return is_unsigned ? kUnsigned[rank] : kSigned[rank];
}
int64_t arg(const ColumnDef& d, size_t i, int64_t fallback) {
  if (i >= d.args.size()) return fallback;
  int64_t v = fallback;
  std::from_chars(d.args[i].data(), d.args[i].data() + d.args[i].size(), v);
  return v;
}
// Maximum length in characters (text) or bytes (binary); 0 when not a string type.
int64_t string_capacity(const ColumnDef& d) {
  const std::string& t = d.data_type;
  if (t == "char" || t == "binary") return arg(d, 0, 1);
  if (t == "varchar" || t == "varbinary") return arg(d, 0, 1);
  if (t == "tinytext" || t == "tinyblob") return 255;
  if (t == "text" || t == "blob") return 65535;
  if (t == "mediumtext" || t == "mediumblob") return 16777215;
  if (t == "longtext" || t == "longblob") return 4294967295LL;
  return 0;
}
bool is_text(std::string_view t) {
  return t == "char" || t == "varchar" || t == "tinytext" || t == "text" || t == "mediumtext" ||
         t == "longtext";
}
bool is_binary(std::string_view t) { return is_binary_type(t); }

}  // namespace

bool same_type(const ColumnDef& a, const ColumnDef& b) {
  if (a.data_type != b.data_type || a.is_unsigned != b.is_unsigned) return false;
  if (int_rank(a.data_type) || a.data_type == "year") return true;  // display widths
  if (a.data_type == "enum" || a.data_type == "set") return a.labels == b.labels;
  if (a.data_type == "decimal")
    return arg(a, 0, 10) == arg(b, 0, 10) && arg(a, 1, 0) == arg(b, 1, 0);
  if (a.data_type == "float" || a.data_type == "double") return a.args == b.args;
  if (a.data_type == "bit") return arg(a, 0, 1) == arg(b, 0, 1);
  return arg(a, 0, 0) == arg(b, 0, 0);
}

bool is_widening(const ColumnDef& from, const ColumnDef& to, std::string* why) {
  const std::string& f = from.data_type;
  const std::string& t = to.data_type;
  auto no = [&](std::string reason) {
    *why = std::move(reason);
    return false;
  };
  if (same_type(from, to)) return true;
  if (int_rank(f)) {
    if (int_rank(t)) {
      if (from.is_unsigned && !to.is_unsigned) {
        if (int_rank(t) > int_rank(f)) return true;
        return no("an unsigned value may not fit the signed type");
      }
      if (!from.is_unsigned && to.is_unsigned)
        return no("negative values do not fit an unsigned type");
      if (int_rank(t) >= int_rank(f)) return true;
      return no("a narrower integer type");
    }
    if (t == "decimal") {
      const int64_t p = arg(to, 0, 10), s = arg(to, 1, 0);
      if (p - s >= int_digits(int_rank(f), from.is_unsigned) &&
          (!to.is_unsigned || from.is_unsigned))
        return true;
      return no("the decimal has too few integer digits");
    }
    if (t == "double" && int_rank(f) <= 4) return true;
    return no("not a numeric widening");
  }
  if (f == "float" && t == "double") return true;
  if (f == "decimal" && t == "decimal") {
    const int64_t p = arg(from, 0, 10), s = arg(from, 1, 0);
    const int64_t p2 = arg(to, 0, 10), s2 = arg(to, 1, 0);
    if (!from.is_unsigned && to.is_unsigned)
      return no("negative values do not fit an unsigned type");
    if (s2 >= s && p2 - s2 >= p - s) return true;
    return no("fewer digits");
  }
  if ((is_text(f) && is_text(t)) || (is_binary(f) && is_binary(t))) {
    if ((t == "char" || t == "binary") && f != t) return no("values would be padded");
    if (string_capacity(to) >= string_capacity(from)) return true;
    return no("a shorter length");
  }
  if ((f == "datetime" || f == "time" || f == "timestamp") && t == f) {
    if (arg(to, 0, 0) >= arg(from, 0, 0)) return true;
    return no("fewer fractional digits");
  }
  if (f == "date" && t == "datetime") return true;
  if ((f == "enum" || f == "set") && t == f) {
    if (to.labels.size() >= from.labels.size() &&
        std::equal(from.labels.begin(), from.labels.end(), to.labels.begin()))
      return true;
    return no("members removed or reordered");
  }
  if (f == "bit" && t == "bit") {
    if (arg(to, 0, 1) >= arg(from, 0, 1)) return true;
    return no("fewer bits");
  }
  return no("an incompatible type");
}

}  // namespace sluice::mysql::ddl
