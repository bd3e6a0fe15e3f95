// Helpers shared by the CPU backend tests: seeded random data and naive
// double-precision references.
#pragma once
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "backend/cpu/kernels.h"
#include "backend/cpu/thread_pool.h"
#include "tensor/tensor.h"

namespace ingot::cpu::testing {

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

inline Tensor random_tensor(const Shape& s, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  return Tensor::from_f32(random_floats(static_cast<size_t>(s.numel()), seed, lo, hi), s);
}

// Restores the start-up ISA level and thread count when a test ends.
struct IsaGuard {
  ~IsaGuard() {
    reset_isa();
    set_num_threads(0);
  }
};

}  // namespace ingot::cpu::testing
