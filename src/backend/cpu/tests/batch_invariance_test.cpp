// End to end on the golden models: sequences batched into one forward pass get
// bit-identical logits to each sequence run alone (prefill and decode rows mixed).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>

#include "models/model.h"

namespace ingot {
namespace {

std::vector<float> run(Model& m, std::vector<std::pair<kv::SequenceCache*, std::vector<int32_t>>> parts) {
  BatchInput in;
  for (auto& [cache, toks] : parts) {
    in.add(cache, toks, true);
  }
  return m.forward(in).to_f32_vector();
}

void expect_same_bits(const std::vector<float>& a, const float* b, size_t n, const std::string& what) {
  ASSERT_GE(a.size(), n) << what;
  EXPECT_EQ(0, std::memcmp(a.data(), b, n * sizeof(float))) << what;
}

class BatchInvariance : public ::testing::TestWithParam<std::string> {};

TEST_P(BatchInvariance, BatchedRowsEqualSoloRows) {
  const std::string dir = std::string(INGOT_SHARED_DIR) + "/goldens/" + GetParam();
  ASSERT_TRUE(std::ifstream(dir + "/config.json").good()) << "missing golden " << dir;
  auto model = load_model(dir);
  const int64_t v = model->vocab_size();
  const std::vector<int32_t> a1{5, 17, 3, 99, 42, 7, 8, 120, 64, 1, 250, 33}, a2{77};
  const std::vector<int32_t> b1{9, 200, 14, 61, 3, 3, 180}, b2{15, 2, 99, 41};

  auto ca = new_cache(*model), cb = new_cache(*model);
  auto la1 = run(*model, {{ca.get(), a1}});
  auto la2 = run(*model, {{ca.get(), a2}});
  auto lb1 = run(*model, {{cb.get(), b1}});
  auto lb2 = run(*model, {{cb.get(), b2}});

  // Both prompts in one pass, then A's decode step together with B's 4-token continuation.
  auto xa = new_cache(*model), xb = new_cache(*model);
  auto both1 = run(*model, {{xa.get(), a1}, {xb.get(), b1}});
  expect_same_bits(la1, both1.data(), a1.size() * v, "A prompt");
  expect_same_bits(lb1, both1.data() + a1.size() * v, b1.size() * v, "B prompt");
  auto both2 = run(*model, {{xa.get(), a2}, {xb.get(), b2}});
  expect_same_bits(la2, both2.data(), a2.size() * v, "A decode step");
  expect_same_bits(lb2, both2.data() + a2.size() * v, b2.size() * v, "B continuation");
}

INSTANTIATE_TEST_SUITE_P(Goldens, BatchInvariance, ::testing::Values("llama-bfloat16", "qwen3-float32"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string s = i.param;
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

}  // namespace
}  // namespace ingot
