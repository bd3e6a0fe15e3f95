#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

#include "util/error.h"

namespace ingot::tok {

namespace {
struct MatchData {
  pcre2_match_data* md = nullptr;
  MatchData() : md(pcre2_match_data_create(4, nullptr)) {}
  ~MatchData() { pcre2_match_data_free(md); }
};
}  // namespace

namespace {
// Oniguruma's Unicode classes differ from PCRE2's UCP ones: \s is exactly
// White_Space (PCRE2 adds U+180E) and \w is letters, marks, decimal digits and
// connector punctuation (PCRE2 10.42: letters, all numbers, underscore).
constexpr const char* kSpace = R"(\t\n\x{0B}\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";
constexpr const char* kWord = R"(\p{L}\p{M}\p{Nd}\p{Pc})";

std::string translate_onig(const std::string& p) {
  std::string out;
  out.reserve(p.size() + 64);
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char n = p[++i];
      const char* set = (n == 's' || n == 'S') ? kSpace : (n == 'w' || n == 'W') ? kWord : nullptr;
      bool negated = n == 'S' || n == 'W';
      if (set && !in_class) {
        out += negated ? "[^" : "[";
        out += set;
        out += ']';
      } else if (set && !negated) {
        out += set;
      } else {
        out += '\\';
        out += n;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];  // a leading ']' is literal
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}
}  // namespace

Regex::Regex(const std::string& source) : pattern_(source) {
  int err = 0;
  PCRE2_SIZE off = 0;
  std::string pattern = translate_onig(source);
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &err, &off, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    fail(ErrorKind::BadFormat, "bad regex '", source, "' at offset ", off, ": ", reinterpret_cast<char*>(msg));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter when JIT is unavailable
  code_ = code;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

void Regex::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
  thread_local MatchData data;
  auto* code = static_cast<pcre2_code*>(code_);
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos <= text.size()) {
    int rc = pcre2_match(code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, data.md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof(msg));
      fail(ErrorKind::InvalidArgument, "regex '", pattern_, "' failed: ", reinterpret_cast<char*>(msg));
    }
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data.md);
    size_t s = ov[0], e = ov[1];
    out.emplace_back(s, e);
    if (e > s) {
      pos = e;
    } else {  // empty match: step over one character
      if (e >= text.size()) break;
      pos = e + 1;
      while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
    }
  }
}

}  // namespace ingot::tok
