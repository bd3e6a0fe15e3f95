// Helpers shared by the kv tests: random tensors and comparisons.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace ingot::kv::testing {

inline Tensor random_tensor(std::mt19937& rng, const Shape& s, DType dt = DType::F32) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(s.numel()));
  for (float& x : v) x = nd(rng);
  return Tensor::from_f32(v, s).to(dt);
}

inline bool same_bytes(const Tensor& a, const Tensor& b) {
  Tensor x = a.contiguous(), y = b.contiguous();
  return x.dtype() == y.dtype() && x.shape() == y.shape() && std::memcmp(x.raw(), y.raw(), x.nbytes()) == 0;
}

inline double rel(const Tensor& a, const Tensor& ref) {
  std::vector<float> x = a.contiguous().to(DType::F32).to_f32_vector();
  std::vector<float> y = ref.contiguous().to(DType::F32).to_f32_vector();
  EXPECT_EQ(x.size(), y.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    num += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    den += double(y[i]) * y[i];
  }
  return std::sqrt(num / (den > 0 ? den : 1e-30));
}

// A copy of file `src` at `dst` with the byte at offset `at` XORed with `mask`
// (a damaged snapshot).
inline void damaged_copy(const std::string& src, const std::string& dst, uint64_t at, uint8_t mask) {
  std::filesystem::copy_file(src, dst, std::filesystem::copy_options::overwrite_existing);
  std::fstream f(dst, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(at));
  char ch = 0;
  f.get(ch);
  f.seekp(static_cast<std::streamoff>(at));
  f.put(static_cast<char>(ch ^ static_cast<char>(mask)));
}

}  // namespace ingot::kv::testing
