// Linear and embedding over quantized weights on CUDA (quant_linear.cpp):
// the backend's linear / embedding hand quantized weights here.
#pragma once
#include <vector>

#include "ops/weight.h"
#include "tensor/tensor.h"

namespace ingot::cuda {

// t as the kernels read activations: float32, contiguous, on the GPU (cast or
// copied only when it is not already).
Tensor dev_f32(const Tensor& t);

// x [..., k] · Wᵀ (+ bias) -> float32 [..., m]: the decode GEMV for few rows of a
// format that has one, else W dequantized in row tiles and multiplied by cuBLAS.
Tensor quant_linear(const Tensor& x, const Weight& w, const Tensor* bias);
// The rows `ids` of a quantized table, dequantized to float32 [n, cols].
Tensor quant_embedding(const Weight& table, const Tensor& ids);

// The fused decode GEMVs (no biases, n <= 8 rows of float32 x on the GPU);
// each returns an undefined Tensor where it does not apply, and the caller
// runs the separate ops. Results equal the separate ops bit for bit.
Tensor quant_linear_residual(const Tensor& x, const Weight& w, const Tensor& residual);
Tensor quant_swiglu_linear(const Tensor& x, const Weight& gate, const Weight& up);
std::vector<Tensor> quant_linear_many(const Tensor& x, const std::vector<const Weight*>& w);

}  // namespace ingot::cuda
