// The sample_rows kernel against its host twin (GPU machine only: ctest
// label "gpu"): the same picks for every sampling setting, step after step,
// greedy by the PARITY.md rule, logprobs within float rounding (the twin's
// log-sum-exp is a sequential float sum, ~2e-4 off over 128k ids; the
// kernel's tree sum is closer).
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cuda/cuda_backend.h"
#include "sampling/row_sampler.h"
#include "sampling/sampler.h"
#include "sampling/tests/row_cases.h"

using namespace ingot;
using namespace ingot::sampling;
using ingot::sampling::testing::a_prompt;
using ingot::sampling::testing::random_logits;
using ingot::sampling::testing::row_cases;

namespace {

void kernel_against_twin(int64_t v, int steps, uint32_t seed) {
  const auto cases = row_cases();
  const auto prompt = a_prompt(v);
  std::vector<SequenceSampler> a;
  for (size_t c = 0; c < cases.size(); ++c) a.emplace_back(cases[c], 500 + c, prompt);
  const int64_t n = static_cast<int64_t>(cases.size());
  for (int step = 0; step < steps; ++step) {
    const auto logits = random_logits(n, v, seed + static_cast<uint32_t>(step));
    SampleRowsPlan plan;
    for (auto& s : a) ASSERT_TRUE(s.plan_row(v, plan));
    const Tensor dev = Tensor::from_f32(logits, {n, v}).to(Device::CUDA);
    ASSERT_NE(row_sampler(Device::CUDA), nullptr);
    const SampledRows got = sample_rows(dev, plan);
    const SampledRows want = sample_rows_host(logits.data(), n, v, plan);
    for (int64_t i = 0; i < n; ++i) {
      const auto at = static_cast<size_t>(i);
      EXPECT_EQ(got.token[at], want.token[at]) << "case " << i << " step " << step;
      if (plan.rows[at].logprob) {
        EXPECT_NEAR(got.logprob[at], want.logprob[at], 1e-3) << "case " << i;
        for (int k = 0; k < plan.rows[at].top_logprobs; ++k) {
          const size_t j = at * kSampleMaxTopLogprobs + static_cast<size_t>(k);
          EXPECT_EQ(got.top_id[j], want.top_id[j]) << "case " << i << " alternative " << k;
          EXPECT_NEAR(got.top_logprob[j], want.top_logprob[j], 1e-3);
        }
      }
      a[at].take(want, at);  // the next step's plan follows the twin's pick
    }
  }
}

class CudaSampleRows : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(cuda::available()) << "no CUDA device"; }
};

}  // namespace

TEST_F(CudaSampleRows, EqualsTheTwinSmallVocab) { kernel_against_twin(300, 30, 3); }
TEST_F(CudaSampleRows, EqualsTheTwinLlama3Vocab) { kernel_against_twin(128'256, 4, 5); }
TEST_F(CudaSampleRows, EqualsTheTwinTinyVocab) { kernel_against_twin(40, 20, 8); }

TEST_F(CudaSampleRows, NonFiniteRowsGiveZeroAndTiesTheLowestId) {
  const int64_t v = 5000;
  std::vector<float> logits(3 * v, -1.0f);
  logits[0 * v + 4000] = 7.0f;
  logits[0 * v + 2500] = 7.0f;  // a tie: 2500 wins
  logits[1 * v + 10] = INFINITY;
  logits[2 * v + 3] = NAN;
  SampleRowsPlan plan;
  plan.rows.resize(3);  // greedy
  const SampledRows got = sample_rows(Tensor::from_f32(logits, {3, v}).to(Device::CUDA), plan);
  EXPECT_EQ(got.token, (std::vector<int32_t>{2500, 0, 0}));
}
