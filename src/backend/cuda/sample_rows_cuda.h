// The CUDA kernel of sample_rows (ops/sample_rows.h): one block per logits
// row does the row's edits, its greedy pick or seeded draw and the logprobs
// asked for; ids and logprobs come back in one small copy.
#pragma once
#include "ops/sample_rows.h"
#include "tensor/tensor.h"

namespace ingot::cuda {

SampledRows sample_rows_cuda(const Tensor& logits, const SampleRowsPlan& plan);

}  // namespace ingot::cuda
