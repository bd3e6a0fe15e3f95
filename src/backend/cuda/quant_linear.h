// Linear and embedding over quantized weights on CUDA (quant_linear.cpp):
// the backend's linear / embedding hand quantized weights here.
#pragma once
#include "ops/weight.h"
#include "tensor/tensor.h"

namespace ingot::cuda {

// x [..., k] · Wᵀ (+ bias) -> float32 [..., m]: the decode GEMV for few rows of a
// format that has one, else W dequantized in row tiles and multiplied by cuBLAS.
Tensor quant_linear(const Tensor& x, const Weight& w, const Tensor* bias);
// The rows `ids` of a quantized table, dequantized to float32 [n, cols].
Tensor quant_embedding(const Weight& table, const Tensor& ids);

}  // namespace ingot::cuda
