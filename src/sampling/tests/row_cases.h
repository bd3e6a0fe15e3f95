// Sampling settings that cover every branch of the batched row sampler, for
// its tests against the host sampler (CPU) and the device kernel (CUDA).
#pragma once
#include <random>
#include <vector>

#include "ingot/types.h"

namespace ingot::sampling::testing {

inline std::vector<engine::SamplingParams> row_cases() {
  std::vector<engine::SamplingParams> out;
  auto add = [&](auto f) {
    engine::SamplingParams p;
    f(p);
    out.push_back(p);
  };
  add([](auto& p) { p.temperature = 0; });
  add([](auto& p) { p.temperature = 0; p.logprobs = true; p.top_logprobs = 5; });
  add([](auto& p) { p.temperature = 0; p.repetition_penalty = 1.3f; p.logit_bias = {{3, 4.0f}, {7, -100.0f}}; });
  add([](auto& p) { p.temperature = 1.0f; });
  add([](auto& p) { p.temperature = 0.7f; p.logprobs = true; p.top_logprobs = 20; });
  add([](auto& p) { p.temperature = 0.8f; p.top_k = 40; });
  add([](auto& p) { p.temperature = 1.2f; p.top_k = 64; p.top_p = 0.9f; });
  add([](auto& p) { p.temperature = 0.9f; p.top_k = 20; p.min_p = 0.05f; });
  add([](auto& p) { p.temperature = 1.0f; p.top_k = 1; });
  add([](auto& p) {
    p.temperature = 1.0f;
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.3f;
    p.repetition_penalty = 1.1f;
    p.logit_bias = {{11, 2.5f}};
  });
  add([](auto& p) { p.temperature = 0.6f; p.top_k = 30; p.frequency_penalty = -0.4f; p.top_p = 0.8f; });
  return out;
}

inline std::vector<float> random_logits(int64_t n, int64_t v, uint32_t seed, float scale = 3.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0, scale);
  std::vector<float> r(static_cast<size_t>(n * v));
  for (auto& x : r) x = d(g);
  return r;
}

inline std::vector<int32_t> a_prompt(int64_t v) {
  std::vector<int32_t> p;
  for (int32_t i = 0; i < 50; ++i) p.push_back(static_cast<int32_t>((i * 7919) % v));
  return p;
}

}  // namespace ingot::sampling::testing
