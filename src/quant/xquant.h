// Activations quantized for integer dot products: each run of 32 values gets
// one float scale d (max |x| / 127), 32 int8 values and their integer sum
// (used by formats with a per-block offset: Q4_1 mins, affine biases).
#pragma once
#include <cstdint>
#include <memory>

namespace ingot::quant {

struct XBlock {
  float d;
  int32_t sum;
  int8_t q[32];
};

// x: [n, k] row-major, k a multiple of 32, quantized into n * k/32 blocks.
// Compiled once for every instruction set, so all paths see the same int8 values.
struct XRows {
  XRows(const float* x, int64_t n, int64_t k);
  ~XRows();
  XRows(const XRows&) = delete;
  XRows& operator=(const XRows&) = delete;
  XBlock* blocks = nullptr;
};

}  // namespace ingot::quant
