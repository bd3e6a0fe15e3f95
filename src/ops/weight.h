// A weight matrix as a model sees it: dense (f32/bf16/f16), GGUF block
// quantized (data dtype says which), or MLX-style affine quantized (uint32
// packed values with per-group scales and biases). Kernels pick the format;
// model code only ever calls ops::linear / ops::embedding on it.
#pragma once
#include <cstdint>

#include "tensor/tensor.h"

namespace ingot {

struct Weight {
  Tensor data;     // [out, in] logical shape (affine: uint32 [out, in*bits/32])
  Tensor scales;   // affine only: [out, in/group]
  Tensor biases;   // affine only: [out, in/group]
  int bits = 0;    // affine only: 4 or 8
  int group_size = 0;

  bool defined() const { return data.defined(); }
  bool is_affine() const { return bits != 0; }
  int64_t rows() const { return data.dim(0); }
  // Logical input width (unpacks affine).
  int64_t cols() const { return is_affine() ? data.dim(1) * 32 / bits : data.dim(1); }
  DType dtype() const { return data.dtype(); }
  Device device() const { return data.device(); }
  // Bytes the weight occupies (for the memory budget and rooflines).
  size_t nbytes() const {
    return data.nbytes() + (scales.defined() ? scales.nbytes() : 0) +
           (biases.defined() ? biases.nbytes() : 0);
  }
};

}  // namespace ingot
