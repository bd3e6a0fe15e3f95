// Decode products of bf16 weights on the tensor cores (gemv_mma.cu), in the
// forms of gemv.cu's launchers, which pick between the two kernels
// (Tuning::mma_gemv_min_rows / mma_gemv_max_rows); each activation row's
// result is the same whatever rows share its launch.
#pragma once
#include <cstdint>

#include "backend/cuda/kernels.h"

namespace ingot::cuda {

// Each takes what gemv_bf16_applies admits for both kernels: widths and row
// strides in whole 16-byte pieces, 16-byte-aligned pointers.
// y[i] = x · w[i]ᵀ for the s.count matrices of s.
void launch_gemv_mma(const GemvSegments& s, const float* x, int64_t n, int64_t k);
void launch_gemv_mma_residual(const void* w, int64_t ldw, const float* x, const float* res, float* y, int64_t n,
                              int64_t m, int64_t k);
void launch_gemv_mma_swiglu(const void* gate, const void* up, int64_t ldw, const float* x, float* y, int64_t n,
                            int64_t m, int64_t k);

}  // namespace ingot::cuda
