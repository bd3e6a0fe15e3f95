// Quantized weights on the GPU (quant_gemv.cu): the packed GGUF blocks and
// MLX affine words stay as loaded; kernels dequantize in registers.
//   - decode GEMV (n <= kGemvMaxRows activation rows) for every format: each
//     weight byte read once, float32 activations, float32 sums (large Q8_0 /
//     Q4_0 / Q4_1 launches round x to int8 as the CPU does:
//     quant_gemv_int8.cu);
//   - dequantization of whole rows into a float32 / bf16 buffer, which the
//     backend feeds to cuBLAS for prefill;
//   - embedding: the gathered rows dequantized on the device.
// Dequantized values equal the CPU's scalar reference (quant/reference.cpp) bit
// for bit (same operations, no fused multiply-add).
#pragma once
#include <cstdint>

#include "tensor/dtype.h"

namespace ingot::cuda {

enum class QuantFormat { Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K, Affine4, Affine8 };

// A device view of a quantized [m, k] weight. Rows are row_bytes apart.
struct QuantMatrix {
  QuantFormat format = QuantFormat::Q8_0;
  const uint8_t* data = nullptr;
  int64_t row_bytes = 0;
  int64_t m = 0, k = 0;
  // Affine only: float32 [m, k / group_size] scales and (optional) biases.
  const float* scales = nullptr;
  const float* biases = nullptr;
  int64_t group_stride = 0;
  int64_t group_size = 0;
};

// Values per block of the format (32 or 256); k must be a multiple of it.
int64_t quant_block_values(QuantFormat f);
// Whether the decode GEMV covers this format (else: dequantize + cuBLAS); all do today.
bool quant_gemv_supported(QuantFormat f);

// y[n, m] = x[n, k] · Wᵀ for 1 <= n <= 8 (x float32, contiguous, 16-byte aligned).
void launch_quant_gemv(const QuantMatrix& w, const float* x, float* y, int64_t n);
// Fused decode forms, each equal bit for bit to the separate ops: y = res + x·Wᵀ;
// y = silu(x·Gᵀ) * (x·Uᵀ) (G and U of one format and shape: quant_gemv_pair_applies);
// and up to three weights of one format and width on one x (q/k/v) in one launch.
void launch_quant_gemv_residual(const QuantMatrix& w, const float* x, const float* res, float* y, int64_t n);
bool quant_gemv_pair_applies(const QuantMatrix& gate, const QuantMatrix& up);
void launch_quant_gemv_swiglu(const QuantMatrix& gate, const QuantMatrix& up, const float* x, float* y, int64_t n);
bool quant_gemv_multi_applies(const QuantMatrix* w, int count);
void launch_quant_gemv_multi(const QuantMatrix* w, float* const* y, int count, const float* x, int64_t n);
// Rows [r0, r0 + rows) of W dequantized into out [rows, k] (F32 or BF16).
void launch_quant_dequant_rows(const QuantMatrix& w, int64_t r0, int64_t rows, void* out, DType out_dtype);
// out[i, :] = row ids[i] of W as float32; ids outside [0, m) give zero rows.
void launch_quant_embedding(const QuantMatrix& w, const int32_t* ids, int64_t n, float* out);

}  // namespace ingot::cuda
