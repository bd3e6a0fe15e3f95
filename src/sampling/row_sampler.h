// Runs a SampleRowsPlan (ops/sample_rows.h) over a batch of logits rows:
// on the backend of the logits' device when it samples there (only ids and
// the logprobs asked for come back), else on the host by the twin below,
// which computes what the device kernel computes, the same way.
#pragma once
#include <cstdint>

#include "ops/sample_rows.h"
#include "tensor/tensor.h"

namespace ingot::sampling {

// The host twin: logits float32 [n, v] row-major, n == plan.rows.size().
SampledRows sample_rows_host(const float* logits, int64_t n, int64_t v, const SampleRowsPlan& plan);

// logits [plan.rows.size(), v] float32 on any device.
SampledRows sample_rows(const Tensor& logits, const SampleRowsPlan& plan);

// Throws InvalidArgument when the plan does not fit a [n, v] logits batch
// (row count, edit ranges and ids, top-k and top_logprobs bounds).
void check_plan(const SampleRowsPlan& plan, int64_t n, int64_t v);

}  // namespace ingot::sampling
