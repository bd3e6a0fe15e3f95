// Activations quantized for integer dot products: each run of 32 values gets
// one float scale d (max |x| / 127), 32 int8 values and their integer sum
// (used by formats with a per-block offset: Q4_1 mins, affine biases).
// The GGUF formats read d16 and s16 instead: d and d * sum rounded to f16, the
// activation blocks llama.cpp pairs with them (Q8_0 / Q8_1), so ingot's sums
// round at the same points as llama.cpp's on the same file.
#pragma once
#include <cstdint>
#include <memory>

namespace ingot::quant {

struct XBlock {
  float d;
  int32_t sum;
  float d16;  // d through f16
  float s16;  // d * sum through f16
  int8_t q[32];
};

// Quantizes `count` runs of 32 values of x into out. With simd (and a CPU
// with AVX2) 8 values at a time: the same max, the same products rounded to
// nearest-even, the same ints as the scalar loop (the reference) for finite x.
void quantize_activation_blocks(const float* x, int64_t count, XBlock* out, bool simd = true);

// x: [n, k] row-major, k a multiple of 32, quantized into n * k/32 blocks.
// One quantizer for every kernel's instruction set, so all paths see the same int8 values.
struct XRows {
  XRows(const float* x, int64_t n, int64_t k);
  ~XRows();
  XRows(const XRows&) = delete;
  XRows& operator=(const XRows&) = delete;
  XBlock* blocks = nullptr;
};

}  // namespace ingot::quant
