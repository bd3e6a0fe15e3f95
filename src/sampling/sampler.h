// Per-sequence token selection: logits processors (logit bias, repetition /
// presence / frequency penalties, temperature, top-k, top-p, min-p), a
// counter-based random stream, exact greedy, and logprob reporting.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "ingot/types.h"
#include "ops/sample_rows.h"

namespace ingot::sampling {

// Largest top_logprobs a request may ask for.
constexpr int kMaxTopLogprobs = 20;

// Throws Error(InvalidArgument) naming the first out-of-range field.
void validate(const engine::SamplingParams& p, int64_t vocab);

// A uniform double in [0, 1) that depends only on (seed, step): the same
// request gives the same draws whatever else shares its batch.
double uniform(uint64_t seed, uint64_t step);

struct Sampled {
  int32_t token = 0;
  float logprob = 0;                      // of the raw model distribution
  std::vector<engine::TokenLogprob> top;  // raw distribution, most likely first
  bool blocked = false;                   // a constraint allowed no token at all (token = -1)
};

class SequenceSampler {
 public:
  // `prompt` feeds the repetition penalty (which, like vLLM's, covers prompt
  // and output; presence and frequency cover the output only).
  SequenceSampler(const engine::SamplingParams& p, uint64_t seed, const std::vector<int32_t>& prompt);
  // Structured output: masks every step with `c` (not owned); `end_ids`
  // (EOS, stop ids) are allowed exactly when the constraint is complete.
  void constrain(engine::TokenConstraint* c, std::vector<int32_t> end_ids);
  // Chooses the next token from a float32 logits row and advances the step.
  // `tokens_left` (this one included) lets a constraint close its text in time.
  Sampled sample(const float* logits, int64_t vocab, int64_t tokens_left = 0);
  int64_t steps() const { return step_; }
  // How many of `draft` (tokens proposed to follow, in order) a constraint
  // could allow: all without one; with one, those before the first token it
  // refuses or the first end id (which ends the text; whether it may come
  // depends on the state after the tokens before it).
  size_t admissible_prefix(const std::vector<int32_t>& draft) const;
  // Sampling where the logits are (ops/sample_rows.h): appends this step's
  // row to `plan`, or returns false (appending nothing) when the row needs
  // the host: a constraint, or a top-p / min-p / top-k filter over more
  // candidates than kSampleMaxTopK.
  bool plan_row(int64_t vocab, SampleRowsPlan& plan) const;
  // Row i of what that plan gave back, taken as this step's pick.
  Sampled take(const SampledRows& out, size_t i);

 private:
  bool needs_processing() const;
  SampleRow row_params() const;
  // The processed ids, in id order (none when nothing is processed).
  void append_edits(std::vector<LogitEdit>& out) const;
  void process(const float* logits, int64_t vocab);
  int32_t draw(int64_t vocab);

  void apply_constraint(int64_t vocab, int64_t tokens_left);

  engine::SamplingParams p_;
  engine::TokenConstraint* constraint_ = nullptr;
  std::vector<int32_t> end_ids_;
  uint64_t seed_;
  uint64_t step_ = 0;
  std::unordered_map<int32_t, int32_t> prompt_seen_;  // id -> 1
  std::unordered_map<int32_t, int32_t> output_count_;
  std::vector<float> work_;        // processed logits
  std::vector<int32_t> cand_;      // candidate ids
  std::vector<float> prob_;        // candidate probabilities
  std::vector<LogitEdit> edits_;
};

}  // namespace ingot::sampling
