// The batched row sampler's host twin against the per-sequence host sampler:
// the same picks, logprobs and alternatives, step after step, batched or alone.
#include <gtest/gtest.h>

#include "sampling/row_sampler.h"
#include "sampling/sampler.h"
#include "sampling/tests/row_cases.h"
#include "util/error.h"

using namespace ingot;
using namespace ingot::sampling;
using ingot::sampling::testing::a_prompt;
using ingot::sampling::testing::random_logits;
using ingot::sampling::testing::row_cases;

namespace {

void expect_same(const Sampled& a, const Sampled& b, const char* what) {
  EXPECT_EQ(a.token, b.token) << what;
  EXPECT_EQ(a.logprob, b.logprob) << what;
  ASSERT_EQ(a.top.size(), b.top.size()) << what;
  for (size_t j = 0; j < a.top.size(); ++j) {
    EXPECT_EQ(a.top[j].token, b.top[j].token) << what;
    EXPECT_EQ(a.top[j].logprob, b.top[j].logprob) << what;
  }
}

// Every case as one row of a batch, `steps` times: each step's plan covers all
// rows at once, and each row must equal its own host sampler's pick.
void run_batch_against_host(int64_t v, int steps, uint32_t seed) {
  const auto cases = row_cases();
  const auto prompt = a_prompt(v);
  std::vector<SequenceSampler> host, twin;
  for (size_t c = 0; c < cases.size(); ++c) {
    host.emplace_back(cases[c], 1000 + c, prompt);
    twin.emplace_back(cases[c], 1000 + c, prompt);
  }
  const int64_t n = static_cast<int64_t>(cases.size());
  for (int step = 0; step < steps; ++step) {
    const auto logits = random_logits(n, v, seed + static_cast<uint32_t>(step));
    SampleRowsPlan plan;
    for (auto& t : twin) ASSERT_TRUE(t.plan_row(v, plan));
    const SampledRows out = sample_rows_host(logits.data(), n, v, plan);
    for (int64_t i = 0; i < n; ++i) {
      const Sampled a = host[static_cast<size_t>(i)].sample(logits.data() + i * v, v);
      const Sampled b = twin[static_cast<size_t>(i)].take(out, static_cast<size_t>(i));
      expect_same(a, b, ("case " + std::to_string(i) + " step " + std::to_string(step)).c_str());
    }
  }
}

}  // namespace

TEST(RowSampler, TwinEqualsHostSamplerSmallVocab) { run_batch_against_host(300, 40, 7); }

TEST(RowSampler, TwinEqualsHostSamplerLargeVocab) { run_batch_against_host(50'000, 6, 11); }

TEST(RowSampler, TwinEqualsHostSamplerWhenTopKCoversTheVocabulary) {
  // top_k 64 over 40 ids: every id is a candidate, sorted (the host's full sort).
  run_batch_against_host(40, 30, 3);
}

TEST(RowSampler, BatchEqualsAlone) {
  const int64_t v = 2000;
  const auto cases = row_cases();
  const int64_t n = static_cast<int64_t>(cases.size());
  const auto logits = random_logits(n, v, 5);
  SampleRowsPlan all;
  for (size_t c = 0; c < cases.size(); ++c) ASSERT_TRUE(SequenceSampler(cases[c], c, a_prompt(v)).plan_row(v, all));
  const SampledRows together = sample_rows_host(logits.data(), n, v, all);
  for (int64_t i = 0; i < n; ++i) {
    SampleRowsPlan one;
    ASSERT_TRUE(SequenceSampler(cases[static_cast<size_t>(i)], static_cast<uint64_t>(i), a_prompt(v)).plan_row(v, one));
    const SampledRows alone = sample_rows_host(logits.data() + i * v, 1, v, one);
    EXPECT_EQ(alone.token[0], together.token[static_cast<size_t>(i)]) << "case " << i;
  }
}

TEST(RowSampler, TensorEntryPointRunsTheTwinOnTheCpu) {
  const int64_t v = 500;
  const auto cases = row_cases();
  const int64_t n = static_cast<int64_t>(cases.size());
  const auto logits = random_logits(n, v, 9);
  SampleRowsPlan plan;
  for (size_t c = 0; c < cases.size(); ++c) ASSERT_TRUE(SequenceSampler(cases[c], c, a_prompt(v)).plan_row(v, plan));
  const SampledRows a = sample_rows(Tensor::from_f32(logits, {n, v}), plan);
  const SampledRows b = sample_rows_host(logits.data(), n, v, plan);
  EXPECT_EQ(a.token, b.token);
  EXPECT_EQ(a.top_id, b.top_id);
}

TEST(RowSampler, RowsTheBatchedSamplerDoesNotCoverStayOnTheHost) {
  const int64_t v = 1000;
  auto plan_of = [&](auto f) {
    engine::SamplingParams p;
    f(p);
    SampleRowsPlan plan;
    const bool ok = SequenceSampler(p, 1, {}).plan_row(v, plan);
    EXPECT_EQ(plan.rows.size(), ok ? 1u : 0u);
    return ok;
  };
  EXPECT_FALSE(plan_of([](auto& p) { p.top_p = 0.9f; }));
  EXPECT_FALSE(plan_of([](auto& p) { p.min_p = 0.1f; }));
  EXPECT_FALSE(plan_of([](auto& p) { p.top_k = kSampleMaxTopK + 1; }));
  EXPECT_TRUE(plan_of([](auto& p) { p.top_k = kSampleMaxTopK; p.top_p = 0.5f; }));
  // Greedy ignores the filters.
  EXPECT_TRUE(plan_of([](auto& p) { p.temperature = 0; p.top_p = 0.5f; p.top_k = 500; }));
}

TEST(RowSampler, PlanEditsFollowPromptOutputAndBias) {
  engine::SamplingParams p;
  p.repetition_penalty = 1.5f;
  p.logit_bias = {{9, 1.0f}};
  SequenceSampler s(p, 1, {4, 4, 6});
  SampleRowsPlan plan;
  ASSERT_TRUE(s.plan_row(20, plan));
  ASSERT_EQ(plan.edits.size(), 3u);  // 4, 6 (prompt) and 9 (bias), in id order
  EXPECT_EQ(plan.edits[0].id, 4);
  EXPECT_TRUE(plan.edits[0].repeat);
  EXPECT_EQ(plan.edits[2].id, 9);
  EXPECT_TRUE(plan.edits[2].has_bias);
  EXPECT_FALSE(plan.edits[2].repeat);
  // No processing asked for: no edits at all.
  SampleRowsPlan plain;
  ASSERT_TRUE(SequenceSampler(engine::SamplingParams{}, 1, {1, 2}).plan_row(20, plain));
  EXPECT_TRUE(plain.edits.empty());
}

TEST(RowSampler, BadPlansAreRejected) {
  const std::vector<float> logits(2 * 10, 0.0f);
  SampleRowsPlan plan;
  plan.rows.resize(1);
  EXPECT_THROW(sample_rows_host(logits.data(), 2, 10, plan), Error);  // row count
  plan.rows.resize(2);
  plan.rows[1].edit_count = 1;
  EXPECT_THROW(sample_rows_host(logits.data(), 2, 10, plan), Error);  // edit past the list
  plan.edits.push_back({12, 0, 1.0f, 1, 0});
  EXPECT_THROW(sample_rows_host(logits.data(), 2, 10, plan), Error);  // id outside the vocabulary
  plan.edits[0].id = 3;
  EXPECT_NO_THROW(sample_rows_host(logits.data(), 2, 10, plan));
  plan.rows[0].top_k = kSampleMaxTopK + 1;
  EXPECT_THROW(sample_rows_host(logits.data(), 2, 10, plan), Error);
  plan.rows[0].top_k = 0;
  plan.rows[0].top_logprobs = kSampleMaxTopLogprobs + 1;
  EXPECT_THROW(sample_rows_host(logits.data(), 2, 10, plan), Error);
}
