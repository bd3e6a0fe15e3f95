// Random quantized matrices for the kernel tests (CPU and CUDA): random code
// bytes with block scales (and minimums) kept in a realistic range, so that
// dot products neither vanish nor overflow.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "quant/quant.h"
#include "tensor/half.h"

namespace ingot::quant::testing {

// A block-quantized matrix (Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K).
inline Weight random_blocks(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.002f, 0.05f);
  Tensor data = Tensor::empty({rows, cols}, t);
  auto* p = data.data<uint8_t>();
  for (size_t i = 0; i < data.nbytes(); ++i) p[i] = static_cast<uint8_t>(byte(rng));
  const size_t bb = static_cast<size_t>(dtype_info(t).block_bytes);
  auto put = [](uint8_t* at, float v) {
    uint16_t h = f32_to_f16(v);
    std::memcpy(at, &h, 2);
  };
  for (size_t b = 0; b < data.nbytes() / bb; ++b) {
    uint8_t* blk = p + b * bb;
    switch (t) {
      case DType::Q8_0: case DType::Q4_0: put(blk, scale(rng)); break;
      case DType::Q4_1: put(blk, scale(rng)); put(blk + 2, -8 * scale(rng)); break;
      case DType::Q4_K: case DType::Q5_K: put(blk, scale(rng) / 8); put(blk + 2, scale(rng) / 8); break;
      case DType::Q6_K: put(blk + 208, scale(rng) / 16); break;
      default: break;
    }
  }
  Weight w;
  w.data = data;
  return w;
}

// An affine (MLX-style) matrix: packed `bits`-bit codes, a float32 scale and,
// unless `with_biases` is false, a bias per group of `group` columns.
inline Weight random_affine(int bits, int group, int64_t rows, int64_t cols, uint32_t seed, bool with_biases = true) {
  std::mt19937 rng(seed);
  Weight w;
  w.bits = bits;
  w.group_size = group;
  w.data = Tensor::empty({rows, cols * bits / 32}, DType::U32);
  for (int64_t i = 0; i < w.data.numel(); ++i) w.data.data<uint32_t>()[i] = static_cast<uint32_t>(rng());
  std::uniform_real_distribution<float> u(-0.05f, 0.05f);
  std::vector<float> s(static_cast<size_t>(rows * cols / group)), b(s.size());
  for (auto& v : s) v = std::fabs(u(rng)) / (bits == 4 ? 1 : 16) + 1e-4f;
  for (auto& v : b) v = u(rng);
  w.scales = Tensor::from_f32(s, {rows, cols / group});
  if (with_biases) w.biases = Tensor::from_f32(b, {rows, cols / group});
  return w;
}

// n rows of k standard-normal activations (row-major).
inline std::vector<float> random_x(int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * k));
  for (auto& v : x) v = g(rng);
  return x;
}

}  // namespace ingot::quant::testing
