// Helpers shared by the CUDA backend's tests: seeded random tensors and the
// relative error of a result against a reference.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "tensor/tensor.h"

namespace ingot::cuda_test {

// Normal(0, scale) float32 values on the host, the same for the same seed.
inline Tensor randn(const Shape& s, uint32_t seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(s.numel()));
  for (float& x : v) x = nd(g);
  return Tensor::from_f32(v, s);
}

// ||a - ref|| / ||ref||.
inline double rel(const std::vector<float>& a, const std::vector<float>& ref) {
  EXPECT_EQ(a.size(), ref.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < ref.size(); ++i) {
    num += (static_cast<double>(a[i]) - ref[i]) * (static_cast<double>(a[i]) - ref[i]);
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return std::sqrt(num / (den + 1e-30));
}

inline double rel(const Tensor& a, const Tensor& ref) { return rel(a.to_f32_vector(), ref.to_f32_vector()); }

}  // namespace ingot::cuda_test
