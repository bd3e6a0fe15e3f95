// The value types of a generation request that the engine, the samplers and
// the stop rules share: sampling and stop parameters, structured-output
// constraints, finish reasons, logprobs and detokenization. Standard C++ only.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ingot::engine {

struct SamplingParams {
  float temperature = 1.0f;  // 0: greedy (PARITY.md argmax)
  float top_p = 1.0f;
  int top_k = 0;             // 0: off
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::map<int32_t, float> logit_bias;
  std::optional<uint64_t> seed;
  int top_logprobs = 0;       // alternatives per generated token
  bool logprobs = false;      // report the chosen token's logprob
};

struct StopParams {
  int64_t max_tokens = 256;
  std::vector<int32_t> stop_token_ids;
  std::vector<std::string> stop_strings;  // matched on detokenized text, across token boundaries
  bool ignore_eos = false;
  bool include_stop_str = false;
};

// Structured output: the tokens a sequence may produce next. One state per
// sequence, used on the engine thread only.
class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets the logits of tokens that may not come next to -inf. End tokens
  // (EOS, stop ids) are the engine's: it allows them exactly when complete().
  // `tokens_left` counts this token too, so the text can be closed in time.
  virtual void apply(float* logits, int64_t vocab, int64_t tokens_left) = 0;
  // Advances past a chosen token; false when the token was not allowed.
  virtual bool accept(int32_t token) = 0;
  virtual bool complete() const = 0;
  // How many of `tokens`, in order from the current state, the constraint
  // allows (end tokens aside), without changing the state. Speculative
  // decoding cuts draft tokens there before verifying them; the default
  // cuts nothing, which costs only verification work.
  virtual size_t allowed_prefix(const std::vector<int32_t>& tokens) { return tokens.size(); }
};

// Makes a fresh constraint state for each sequence of a request.
class Grammar {
 public:
  virtual ~Grammar() = default;
  virtual std::unique_ptr<TokenConstraint> start() const = 0;
};

enum class FinishReason { None, Stop, Length, Cancelled, Error };
const char* finish_reason_name(FinishReason r);

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
};

// Detokenization the engine uses for stop strings and TokenEvent::text.
class TextDecoder {
 public:
  virtual ~TextDecoder() = default;
  // Stateful incremental decoder for one sequence.
  class Stream {
   public:
    virtual ~Stream() = default;
    virtual std::string push(int32_t token) = 0;  // new complete text
    virtual std::string flush() = 0;
  };
  virtual std::unique_ptr<Stream> stream(bool skip_special) const = 0;
};

}  // namespace ingot::engine
