// Quantized weight kernels for the CPU: GGUF block formats (Q8_0, Q4_0, Q4_1,
// Q4_K, Q5_K, Q6_K) and MLX affine (uint32-packed 4/8-bit values with a float
// scale and bias per group). Weights stay packed; activations are quantized
// per row into int8 blocks of 32 and multiplied with integer dot products.
// Every output (row, column) comes from the same sequence of operations no
// matter how many rows are computed together (batch invariance).
#pragma once
#include <cstdint>
#include <vector>

#include "backend/cpu/kernels.h"
#include "ops/weight.h"

namespace ingot::quant {

enum class Isa { Scalar, Avx2, Avx512Vnni };
const char* isa_name(Isa isa);
// The fastest path the running CPU supports (INGOT_QUANT_ISA=scalar|avx2|avx512 overrides).
Isa best_isa();
bool isa_supported(Isa isa);

// Kernels of one instruction set for a format key (the data dtype, or U32 for
// affine). Throws Unsupported for a key without kernels.
cpu::QuantKernels kernels(Isa isa, DType key);
// Registers the best kernels for every format with the CPU backend. Idempotent.
void install_cpu_kernels();

// Float references (tests): a row of weights as floats, and y = x · Wᵀ computed
// from dequantized rows with double accumulation.
void dequantize_row(const Weight& w, int64_t row, float* out);
void reference_linear(const float* x, int64_t n, const Weight& w, float* y);

// Bytes of one packed row of `w` (block formats and affine alike).
size_t row_bytes(const Weight& w);

}  // namespace ingot::quant
