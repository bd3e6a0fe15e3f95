// Turning a sequence's tokens into streamed text and deciding when it ends:
// stop token ids / EOS, stop strings (matched on the decoded text, so across
// token boundaries) and max_tokens. Text that could still become the start
// of a stop string is held back until it cannot.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "ingot/types.h"

namespace ingot::sampling {

struct StopResult {
  std::string text;  // text released by this token
  bool finished = false;
  engine::FinishReason reason = engine::FinishReason::None;
  std::string matched;  // stop string, or the stop token's text
};

class StopChecker {
 public:
  // `decoder` may be null (no text; stop strings must then be empty).
  StopChecker(const engine::StopParams& p, std::vector<int32_t> eos_ids, const engine::TextDecoder* decoder);
  // Feeds the `n`-th generated token (n counts from 1).
  StopResult push(int32_t token, int64_t n);
  // Everything still held back (end of the sequence for another reason).
  std::string drain();

 private:
  size_t holdback() const;

  engine::StopParams p_;
  std::vector<int32_t> eos_;
  const engine::TextDecoder* decoder_;
  std::unique_ptr<engine::TextDecoder::Stream> stream_;
  std::string pending_;
};

}  // namespace ingot::sampling
