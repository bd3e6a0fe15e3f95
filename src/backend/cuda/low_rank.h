// Batched low-rank updates (LoRA) on the device: y[row] += (x[row] · Aᵀ) · Bᵀ
// for every (row, adapter) job of a decode-sized batch in one launch. The
// jobs travel as a kernel argument, so no index copy precedes the launch.
#pragma once
#include <cstdint>
#include <vector>

#include "ops/backend.h"
#include "tensor/dtype.h"

namespace ingot::cuda {

constexpr int kLowRankMaxJobs = 64;
constexpr int kLowRankMaxAdapters = 8;
constexpr int kLowRankMaxRank = 128;

struct LowRankAdapter {
  const void* a = nullptr;  // [rank, k] of `dtype`
  const void* bt = nullptr;  // Bᵀ, [rank, m] of `dtype`
  int32_t rank = 0;
};

struct LowRankJobs {
  int32_t count = 0;
  int32_t row[kLowRankMaxJobs] = {};
  int32_t adapter_of[kLowRankMaxJobs] = {};
  LowRankAdapter adapter[kLowRankMaxAdapters] = {};
};

// The jobs for `groups` over a batch of `rows` rows (x [rows, k], y [rows, m]),
// or false where the kernel does not take the batch: more rows, adapters or
// rank than it holds, a row in two groups, adapters not dense float of one
// dtype (the composed default then runs: prefill-sized batches go there).
// Adapter weights must be on `device` (the backend's; tests plan on the host).
bool plan_low_rank(int64_t rows, int64_t k, int64_t m, const std::vector<LowRankGroup>& groups, Device device,
                   LowRankJobs* jobs, DType* dtype);

// x [rows, k] and y [rows, m] float32, contiguous; no row in two jobs. A and B
// of every adapter share `dtype` (F32, BF16 or F16).
void launch_low_rank_add(const LowRankJobs& jobs, DType dtype, const float* x, float* y, int64_t k, int64_t m);

}  // namespace ingot::cuda
