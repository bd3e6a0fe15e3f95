// PCRE2 (UTF + UCP, JIT) regex used by Split pre-tokenizers and Replace
// normalizers/decoders; the patterns in tokenizer.json are Oniguruma syntax,
// which PCRE2 accepts for everything real tokenizers use.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ingot::tok {

class Regex {
 public:
  // Throws Error(BadFormat) with the pattern and PCRE2's message.
  explicit Regex(const std::string& pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Non-overlapping matches left to right as byte ranges [start, end).
  // `text` must be valid UTF-8.
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;
  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8
};

}  // namespace ingot::tok
