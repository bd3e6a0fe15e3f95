// PARITY.md greedy selection over one float32 logits row, streamed in tiles:
// the normalised (log-softmax) row is never written out.
#pragma once
#include <cstdint>
#include <vector>

#include "ingot/types.h"

namespace ingot::sampling {

// Log-sum-exp of a row (max first, then a sequential sum of exp(x - max)).
float row_logsumexp(const float* row, int64_t v);

// argmax of log-softmax in f32: the lowest id wins an exact tie; a row whose
// logsumexp is not finite selects 0. Returns the id; *logprob gets its value.
// Without `logprob` the log-sum-exp is computed only when a near-tie needs it.
int32_t greedy_token(const float* row, int64_t v, float* logprob = nullptr);

// The k most likely ids with their log-probs, most likely first (ties: lower
// id first). `lse` is row_logsumexp(row, v).
std::vector<engine::TokenLogprob> top_logprobs(const float* row, int64_t v, int k, float lse);

}  // namespace ingot::sampling
