// Random adapters and reference updates for the low-rank (LoRA) tests of the
// CUDA backend (cuda_low_rank_test.cpp, low_rank_plan_test.cpp).
#pragma once
#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/low_rank.h"
#include "backend/cuda/tests/test_util.h"
#include "ops/ops.h"

namespace ingot::low_rank_test {

using cuda_test::randn;
using cuda_test::rel;

struct Adapter {
  Weight a, b;
};

inline Adapter adapter(int64_t rank, int64_t k, int64_t m, DType dt, uint32_t seed, Device d = Device::CPU) {
  Adapter ad;
  ad.a.data = randn({rank, k}, seed, 0.1f).to(dt).to(d);
  ad.b.data = randn({rank, m}, seed + 1, 0.1f).to(dt).to(d);  // Bᵀ
  return ad;
}

constexpr int64_t kK = 96, kM = 520;

// y + the groups' updates, computed by the CPU backend on host copies.
inline std::vector<float> on_cpu(const Tensor& x, const Tensor& y, const std::vector<Adapter>& ads,
                          const std::vector<std::vector<int64_t>>& rows) {
  std::vector<Adapter> host(ads.size());
  std::vector<LowRankGroup> groups;
  for (size_t i = 0; i < ads.size(); ++i) {
    host[i].a.data = ads[i].a.data.to(Device::CPU);
    host[i].b.data = ads[i].b.data.to(Device::CPU);
    groups.push_back({&host[i].a, &host[i].b, rows[i]});
  }
  // A copy: y may already live on the host, and the update is in place.
  Tensor out = y.to(Device::CPU).clone();
  cpu::backend()->low_rank_add({LowRankOutput{&out, groups}}, x.to(Device::CPU));
  return out.to_f32_vector();
}

inline std::vector<float> on_gpu(const Tensor& x, const Tensor& y, const std::vector<Adapter>& ads,
                          const std::vector<std::vector<int64_t>>& rows) {
  std::vector<LowRankGroup> groups;
  for (size_t i = 0; i < ads.size(); ++i) groups.push_back({&ads[i].a, &ads[i].b, rows[i]});
  Tensor out = y.to(Device::CUDA).clone();
  ops::low_rank_add(out, x.to(Device::CUDA), groups);
  return out.to(Device::CPU).to_f32_vector();
}

}  // namespace ingot::low_rank_test

