// Template source -> tokens, with jinja2's whitespace rules as transformers
// configures them: trim_blocks and lstrip_blocks on, `-` / `+` tag
// modifiers, newlines normalised to "\n" and one trailing newline dropped.
#pragma once
#include <string>
#include <vector>

namespace ingot::tmpl {

enum class Tok {
  Data,        // literal template text
  VarBegin,    // {{
  VarEnd,      // }}
  BlockBegin,  // {%
  BlockEnd,    // %}
  Name,
  String,  // value already unescaped
  Integer,
  Float,
  Op,  // operator or punctuation; value is its spelling
  Eof,
};

struct Token {
  Tok type;
  std::string value;
  int line;
};

// Throws Error(BadFormat) naming the line for malformed tags.
std::vector<Token> lex(const std::string& source);

}  // namespace ingot::tmpl
