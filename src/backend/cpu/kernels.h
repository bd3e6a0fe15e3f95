// CPU compute kernels on raw pointers. The backend (cpu_backend.cpp) adapts
// Tensors to these. Rows of the result never depend on how many other rows
// are computed with them: a sequence gets the same numbers alone or batched.
#pragma once
#include <cstdint>

#include "ops/weight.h"
#include "tensor/dtype.h"

namespace ingot::cpu {

// What the running CPU offers, read once at start-up.
struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512bf16 = false,
       avx512vnni = false, avxvnni = false;
};
const CpuFeatures& cpu_features();

// y[n, m] = sum_k x[n, k] * w[m, k] for a dense weight (f32 / bf16 / f16),
// rows of w `ldw` elements apart. Runs on the compute pool.
void linear_dense(const float* x, int64_t n, int64_t k, const void* w, DType wdt, int64_t ldw,
                  int64_t m, float* y);

// Quantized formats register their kernels here (GGUF blocks, MLX affine).
// linear: same contract as linear_dense for weight `w`;
// dequant_row: writes row `r` of `w` as k floats (embedding lookups).
using QuantLinearFn = void (*)(const float* x, int64_t n, const Weight& w, float* y);
using QuantRowFn = void (*)(const Weight& w, int64_t r, float* out);
struct QuantKernels {
  QuantLinearFn linear = nullptr;
  QuantRowFn dequant_row = nullptr;
};
// key: the weight's data dtype for GGUF blocks, or DType::U32 for affine.
void register_quant_kernels(DType key, QuantKernels k);
const QuantKernels* quant_kernels(DType key);

// Converts n values of a dense float type to f32.
void to_f32(const void* src, DType t, int64_t n, float* dst);

}  // namespace ingot::cpu
