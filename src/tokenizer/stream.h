// Incremental detokenization over any "decode ids[a, b)" function: decodes a
// short window (the tokens since the previous emission plus the new ones) and
// emits only the text past what that window's older part already produced,
// holding back while the text ends in U+FFFD (an incomplete UTF-8 sequence).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace ingot::tok {

using DecodeRange = std::function<std::string(const int32_t* ids, size_t n, bool skip_special)>;

class DecodeStream : public Tokenizer::Stream {
 public:
  DecodeStream(DecodeRange decode, bool skip_special) : decode_(std::move(decode)), skip_(skip_special) {}

  std::string push(int32_t id) override {
    ids_.push_back(id);
    std::string text = decode_(ids_.data(), ids_.size(), skip_);
    if (text.size() <= prefix_.size() || ends_with_replacement(text) || text.compare(0, prefix_.size(), prefix_) != 0)
      return "";
    std::string fresh = text.substr(prefix_.size());
    // Keep the tokens since the previous emission as context for the next one.
    ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(read_));
    read_ = ids_.size();
    prefix_ = decode_(ids_.data(), ids_.size(), skip_);
    return fresh;
  }

  std::string flush() override {
    std::string text = decode_(ids_.data(), ids_.size(), skip_);
    std::string out;
    if (text.size() > prefix_.size() && text.compare(0, prefix_.size(), prefix_) == 0) out = text.substr(prefix_.size());
    ids_.clear();
    read_ = 0;
    prefix_.clear();
    return out;
  }

 private:
  static bool ends_with_replacement(const std::string& s) {
    return s.size() >= 3 && s.compare(s.size() - 3, 3, "\xEF\xBF\xBD") == 0;
  }
  DecodeRange decode_;
  bool skip_;
  std::vector<int32_t> ids_;  // window: [0, read_) already emitted, the rest pending
  size_t read_ = 0;
  std::string prefix_;        // decode of ids_[0, read_)
};

}  // namespace ingot::tok
