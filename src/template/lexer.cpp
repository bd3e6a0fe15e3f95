#include "template/lexer.h"

#include <cstring>

#include "template/value.h"
#include "util/error.h"

namespace ingot::tmpl {

namespace {

[[noreturn]] void syntax_error(int line, const std::string& msg) {
  fail(ErrorKind::BadFormat, "chat template syntax error at line ", line, ": ", msg);
}

// Python's str.rstrip(): trailing Unicode whitespace.
std::string rstrip_py(const std::string& s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xc0) == 0x80) --start;
    auto cps = utf8_decode(std::string_view(s).substr(start, end - start));
    if (cps.size() != 1 || !py_isspace(cps[0])) break;
    end = start;
  }
  return s.substr(0, end);
}

// Skips Unicode whitespace from pos (the `\s*` after a `-` end tag).
size_t skip_space(const std::string& s, size_t pos) {
  while (pos < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[pos]);
    if (c < 0x80) {
      if (!py_isspace(c)) break;
      ++pos;
      continue;
    }
    size_t len = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
    auto cps = utf8_decode(std::string_view(s).substr(pos, len));
    if (cps.size() != 1 || !py_isspace(cps[0])) break;
    pos += len;
  }
  return pos;
}

bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The body of a string literal decoded the way jinja2 does it: Python's
// "unicode-escape" codec over the (backslash-replaced) source text.
std::string unescape(const std::string& raw, int line) {
  std::string out;
  size_t k = 0;
  while (k < raw.size()) {
    char c = raw[k];
    if (c != '\\' || k + 1 >= raw.size()) {
      out += c;
      ++k;
      continue;
    }
    char e = raw[k + 1];
    k += 2;
    switch (e) {
      case '\n': break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case 'x':
      case 'u':
      case 'U': {
        size_t digits = e == 'x' ? 2 : (e == 'u' ? 4 : 8);
        char32_t cp = 0;
        for (size_t d = 0; d < digits; ++d) {
          int h = k + d < raw.size() ? hex_value(raw[k + d]) : -1;
          if (h < 0) syntax_error(line, std::string("truncated \\") + e + " escape in string literal");
          cp = cp * 16 + static_cast<char32_t>(h);
        }
        if (cp > 0x10ffff) syntax_error(line, "illegal Unicode character in string literal");
        k += digits;
        utf8_append(out, cp);
        break;
      }
      case 'N': syntax_error(line, "\\N{...} escapes are not supported");
      default:
        if (e >= '0' && e <= '7') {
          char32_t cp = static_cast<char32_t>(e - '0');
          for (int d = 0; d < 2 && k < raw.size() && raw[k] >= '0' && raw[k] <= '7'; ++d, ++k)
            cp = cp * 8 + static_cast<char32_t>(raw[k] - '0');
          utf8_append(out, cp);
        } else if (static_cast<unsigned char>(e) >= 0x80) {
          // A backslash before a non-ASCII character pairs with the backslash
          // that backslashreplace put in front of the character's \x/\u code.
          size_t start = k - 1;
          size_t len = 1;
          while (start + len < raw.size() && (static_cast<unsigned char>(raw[start + len]) & 0xc0) == 0x80) ++len;
          auto cps = utf8_decode(std::string_view(raw).substr(start, len));
          char buf[16];
          char32_t cp = cps.empty() ? 0xfffd : cps[0];
          if (cp < 0x100)
            std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(cp));
          else if (cp < 0x10000)
            std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
          else
            std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(cp));
          out += buf;
          k = start + len;
        } else {
          out += '\\';
          out += e;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      size_t tag = find_tag(pos_);
      if (tag == std::string::npos) {
        emit_data(src_.substr(pos_));
        advance_to(src_.size());
        break;
      }
      char kind = src_[tag + 1];  // '{', '%' or '#'
      char sign = tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+') ? src_[tag + 2] : 0;
      size_t raw_end = kind == '%' ? match_raw_begin(tag) : 0;
      std::string text = src_.substr(pos_, tag - pos_);
      emit_data(strip_before(text, sign, kind != '{'));
      advance_to(tag);
      size_t body = tag + 2 + (sign ? 1 : 0);
      if (raw_end) {
        lex_raw(raw_end);
      } else if (kind == '#') {
        lex_comment(body);
      } else {
        lex_tag(body, kind == '%');
      }
    }
    tokens_.push_back({Tok::Eof, "", line_});
    return std::move(tokens_);
  }

 private:
  size_t find_tag(size_t from) const {
    size_t k = from;
    while ((k = src_.find('{', k)) != std::string::npos) {
      if (k + 1 < src_.size() && (src_[k + 1] == '{' || src_[k + 1] == '%' || src_[k + 1] == '#')) return k;
      ++k;
    }
    return std::string::npos;
  }

  // `-` strips all whitespace before the tag; lstrip_blocks strips spaces
  // and tabs between the line start and a block or comment tag.
  std::string strip_before(const std::string& text, char sign, bool block_or_comment) const {
    if (sign == '-') return rstrip_py(text);
    if (sign == '+' || !block_or_comment) return text;
    size_t l_pos = text.rfind('\n');
    l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
    bool line_start = pos_ == 0 || src_[pos_ - 1] == '\n';
    if (l_pos == 0 && !line_start) return text;
    if (text.find_first_not_of(" \t", l_pos) != std::string::npos) return text;
    return text.substr(0, l_pos);
  }

  void emit_data(const std::string& text) {
    if (!text.empty()) tokens_.push_back({Tok::Data, text, line_});
  }

  void advance_to(size_t p) {
    for (size_t k = pos_; k < p && k < src_.size(); ++k)
      if (src_[k] == '\n') ++line_;
    pos_ = p;
  }

  // {%[-+]?\s*raw\s*-?%} at `tag`; returns the position after it, or 0.
  size_t match_raw_begin(size_t tag) const {
    size_t k = tag + 2;
    if (k < src_.size() && (src_[k] == '-' || src_[k] == '+')) ++k;
    k = skip_space(src_, k);
    if (src_.compare(k, 3, "raw") != 0) return 0;
    k = skip_space(src_, k + 3);
    if (src_.compare(k, 3, "-%}") == 0) return skip_space(src_, k + 3);
    if (src_.compare(k, 2, "%}") == 0) return k + 2;
    return 0;
  }

  void lex_raw(size_t content_start) {
    advance_to(content_start);
    size_t k = content_start;
    while ((k = src_.find("{%", k)) != std::string::npos) {
      size_t p = k + 2;
      char sign = p < src_.size() && (src_[p] == '-' || src_[p] == '+') ? src_[p] : 0;
      if (sign) ++p;
      p = skip_space(src_, p);
      if (src_.compare(p, 6, "endraw") == 0) {
        p = skip_space(src_, p + 6);
        size_t end = 0;
        if (src_.compare(p, 3, "+%}") == 0) end = p + 3;
        else if (src_.compare(p, 3, "-%}") == 0) end = skip_space(src_, p + 3);
        else if (src_.compare(p, 2, "%}") == 0) end = p + 2 + (p + 2 < src_.size() && src_[p + 2] == '\n');
        if (end) {
          emit_data(strip_before(src_.substr(content_start, k - content_start), sign, true));
          advance_to(end);
          return;
        }
      }
      k += 2;
    }
    syntax_error(line_, "missing end of raw directive");
  }

  void lex_comment(size_t body) {
    size_t k = src_.find("#}", body);
    if (k == std::string::npos) syntax_error(line_, "missing end of comment tag");
    size_t end = k + 2;
    if (k > body && src_[k - 1] == '-') end = skip_space(src_, end);
    else if (!(k > body && src_[k - 1] == '+') && end < src_.size() && src_[end] == '\n') ++end;
    advance_to(end);
  }

  void lex_tag(size_t body, bool block) {
    tokens_.push_back({block ? Tok::BlockBegin : Tok::VarBegin, "", line_});
    advance_to(body);
    std::vector<char> brackets;
    const char* close = block ? "%}" : "}}";
    while (true) {
      if (pos_ >= src_.size()) syntax_error(line_, std::string("unexpected end of template, expected '") + close + "'");
      if (brackets.empty()) {
        size_t end = 0;
        if (src_[pos_] == '-' && src_.compare(pos_ + 1, 2, close) == 0) {
          end = skip_space(src_, pos_ + 3);
        } else if (block && src_.compare(pos_, 3, "+%}") == 0) {
          end = pos_ + 3;
        } else if (src_.compare(pos_, 2, close) == 0) {
          end = pos_ + 2;
          if (block && end < src_.size() && src_[end] == '\n') ++end;  // trim_blocks
        }
        if (end) {
          tokens_.push_back({block ? Tok::BlockEnd : Tok::VarEnd, "", line_});
          advance_to(end);
          return;
        }
      }
      char c = src_[pos_];
      size_t ws = skip_space(src_, pos_);
      if (ws > pos_) {
        advance_to(ws);
        continue;
      }
      if (is_name_start(c)) {
        size_t e = pos_;
        while (e < src_.size() && is_name_char(src_[e])) ++e;
        tokens_.push_back({Tok::Name, src_.substr(pos_, e - pos_), line_});
        advance_to(e);
      } else if (is_digit(c)) {
        lex_number();
      } else if (c == '\'' || c == '"') {
        lex_string(c);
      } else {
        lex_operator(brackets);
      }
    }
  }

  void lex_number() {
    size_t e = pos_;
    auto digits = [&](size_t p) {  // (\d+_)*\d+
      size_t q = p;
      while (q < src_.size() && (is_digit(src_[q]) || (src_[q] == '_' && q > p && q + 1 < src_.size() &&
                                                       is_digit(src_[q + 1]))))
        ++q;
      return q;
    };
    e = digits(pos_);
    bool is_float = false;
    bool after_dot = pos_ > 0 && src_[pos_ - 1] == '.';
    if (!after_dot && e + 1 < src_.size() && src_[e] == '.' && is_digit(src_[e + 1])) {
      e = digits(e + 1);
      is_float = true;
    }
    if (!after_dot && e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t q = e + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && is_digit(src_[q])) {
        e = digits(q);
        is_float = true;
      }
    }
    std::string text;
    for (size_t k = pos_; k < e; ++k)
      if (src_[k] != '_') text += src_[k];
    tokens_.push_back({is_float ? Tok::Float : Tok::Integer, text, line_});
    advance_to(e);
  }

  void lex_string(char quote) {
    size_t k = pos_ + 1;
    while (k < src_.size() && src_[k] != quote) {
      if (src_[k] == '\\') ++k;
      ++k;
    }
    if (k >= src_.size()) syntax_error(line_, "unterminated string literal");
    std::string raw = src_.substr(pos_ + 1, k - pos_ - 1);
    int line = line_;
    tokens_.push_back({Tok::String, unescape(raw, line), line});
    advance_to(k + 1);
  }

  void lex_operator(std::vector<char>& brackets) {
    static const char* two[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* op : two)
      if (src_.compare(pos_, 2, op) == 0) {
        tokens_.push_back({Tok::Op, op, line_});
        advance_to(pos_ + 2);
        return;
      }
    char c = src_[pos_];
    if (!std::strchr("+-/*%~[](){}<>=.:|,;", c) || c == 0) {
      std::string shown = static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f
                              ? str_cat("byte 0x", std::hex, static_cast<int>(static_cast<unsigned char>(c)))
                              : std::string("'") + c + "'";
      syntax_error(line_, "unexpected character " + shown);
    }
    if (c == '(' || c == '[' || c == '{') {
      brackets.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (brackets.empty()) syntax_error(line_, std::string("unexpected '") + c + "'");
      if (brackets.back() != c)
        syntax_error(line_, std::string("unexpected '") + c + "', expected '" + brackets.back() + "'");
      brackets.pop_back();
    }
    tokens_.push_back({Tok::Op, std::string(1, c), line_});
    advance_to(pos_ + 1);
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

// jinja2 splits on \r\n, \r and \n, rejoins with \n and (keep_trailing_newline
// being off) drops one final newline.
std::string normalize_newlines(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t k = 0; k < s.size(); ++k) {
    if (s[k] == '\r') {
      out += '\n';
      if (k + 1 < s.size() && s[k + 1] == '\n') ++k;
    } else {
      out += s[k];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

std::vector<Token> lex(const std::string& source) { return Lexer(normalize_newlines(source)).run(); }

}  // namespace ingot::tmpl
