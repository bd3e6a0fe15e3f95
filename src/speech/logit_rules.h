// The rules Whisper's decoding applies to every step's logits: the
// generation config's suppressed tokens, and the timestamp grammar (a window
// starts with a timestamp, timestamps come in pairs, never run backwards, and
// are taken when together they are likelier than any text token).
#pragma once
#include <cstdint>
#include <vector>

#include "speech/generation.h"

namespace ingot::speech {

class LogitRules {
 public:
  LogitRules(const WhisperGeneration& gen, int64_t vocab, bool timestamps);

  // Sets the logits of tokens that may not follow `generated` (the tokens
  // sampled so far in this window, prompt excluded) to -inf.
  void apply(float* logits, const std::vector<int32_t>& generated) const;

  int32_t ts_begin() const { return ts_begin_; }
  bool is_timestamp(int32_t t) const { return ts_begin_ >= 0 && t >= ts_begin_; }
  bool timestamps() const { return timestamps_; }

 private:
  const WhisperGeneration& gen_;
  int64_t vocab_;
  bool timestamps_;
  int32_t ts_begin_ = -1;
};

// log_softmax of one row, in place, computed in double for the sum.
void log_softmax_inplace(float* row, int64_t n);

}  // namespace ingot::speech
