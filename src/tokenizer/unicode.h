// UTF-8 and Unicode helpers with the same character classes as Rust's `char`
// methods, which the reference tokenizer library relies on.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace ingot::tok {

// Decodes the code point at s[i] (s must be valid UTF-8); advances i.
inline char32_t next_cp(std::string_view s, size_t& i) {
  auto b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) { ++i; return b; }
  int n = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
  char32_t cp = b & (0x7F >> n);
  for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += n;
  return cp;
}
inline size_t cp_len(unsigned char lead) { return lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2; }
void append_utf8(std::string& out, char32_t cp);

// Byte offset of the first invalid UTF-8 sequence, or npos when valid.
size_t find_invalid_utf8(std::string_view s);
// Rust's String::from_utf8_lossy: each maximal invalid subsequence -> U+FFFD.
std::string utf8_lossy(std::string_view bytes);

bool is_whitespace(char32_t c);    // White_Space property (char::is_whitespace)
bool is_numeric(char32_t c);       // Nd | Nl | No (char::is_numeric)
bool is_punctuation(char32_t c);   // ASCII punctuation or a P* category
bool is_word_char(char32_t c);     // regex \w (Unicode)
bool is_combining_mark(char32_t c);  // Mn | Mc | Me
bool is_control(char32_t c);       // Cc | Cf | Co except \t \n \r (BERT's notion)
bool is_cjk(char32_t c);           // BERT's "Chinese character" ranges

enum class NormForm { NFC, NFD, NFKC, NFKD };
std::string unicode_normalize(std::string_view s, NormForm form);
std::string to_lower(std::string_view s);  // per char full lowercase mapping

}  // namespace ingot::tok
