#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <set>

#include "backend/cpu/cpu_backend.h"
#include "sampling/greedy.h"
#include "sampling/sampler.h"
#include "util/error.h"

using namespace ingot;
using namespace ingot::sampling;

namespace {
std::vector<float> random_row(int64_t v, uint32_t seed, float scale = 3.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0, scale);
  std::vector<float> r(static_cast<size_t>(v));
  for (auto& x : r) x = d(g);
  return r;
}
}  // namespace

TEST(Greedy, MatchesReferenceOnRandomRows) {
  for (uint32_t s = 0; s < 50; ++s) {
    const int64_t v = 1 + s * 397;  // crosses the tile size
    auto row = random_row(v, s);
    int64_t ref = -1;
    float ref_lp = cpu::greedy_argmax_row(row.data(), v, &ref);
    float lp = 0;
    EXPECT_EQ(greedy_token(row.data(), v, &lp), ref);
    EXPECT_EQ(lp, ref_lp);
  }
}

TEST(Greedy, LowestIdWinsTiesAndNonFiniteRowGivesZero) {
  std::vector<float> row(5000, -1.0f);
  row[4000] = 7.0f;
  row[2500] = 7.0f;
  EXPECT_EQ(greedy_token(row.data(), 5000), 2500);
  row[10] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(greedy_token(row.data(), 5000), 0);
  std::vector<float> nan_row(10, 1.0f);
  nan_row[3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(greedy_token(nan_row.data(), 10), 0);
  // The same inside the vectorised part of a long row, with and without a logprob.
  std::vector<float> long_nan(5000, 1.0f);
  long_nan[4321] = 9.0f;
  long_nan[1234] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(greedy_token(long_nan.data(), 5000), 0);
  float lp = 0;
  EXPECT_EQ(greedy_token(long_nan.data(), 5000, &lp), 0);
  // Two logits that differ by less than the f32 spacing after subtracting the
  // logsumexp tie in log-softmax space: the lower id wins.
  std::vector<float> close = {1000.0f, 1000.0f + 6e-5f, -5.0f};
  int64_t ref = -1;
  cpu::greedy_argmax_row(close.data(), 3, &ref);
  EXPECT_EQ(greedy_token(close.data(), 3), ref);
}

// Without a logprob to report, greedy_token skips the log-sum-exp unless a
// near-tie could change the pick; it must pick what the full rule picks (the
// call with a logprob) on rows built to sit at that edge.
TEST(Greedy, PickWithoutLogprobEqualsTheFullRule) {
  std::mt19937 g(11);
  const float inf = std::numeric_limits<float>::infinity();
  int checked = 0;
  for (float magnitude : {0.0f, 1.0f, 30.0f, 1000.0f, 1e6f, -500.0f, 3e30f}) {
    for (int64_t v : {1, 2, 3, 97, 4096, 151680}) {
      for (int trial = 0; trial < 6; ++trial) {
        auto row = random_row(v, static_cast<uint32_t>(g()), 2.0f);
        for (auto& x : row) x += magnitude;
        std::uniform_int_distribution<int64_t> at(0, v - 1);
        const int64_t top = at(g), rival = at(g);
        // Odd trials: a flat row (logits within 1e-3 of each other), where lse - max ~ log(v)
        // and the rounded log-softmax merges neighbours; even: one clear favourite.
        if (trial % 2) {
          std::uniform_real_distribution<float> flat(0.0f, 1e-3f);
          for (auto& x : row) x = magnitude + flat(g);
        }
        row[static_cast<size_t>(top)] = magnitude + (trial % 2 ? 1e-3f : 20.0f);
        // The rival sits 0..4 f32 steps below the top (or on it), or a little further.
        float r = row[static_cast<size_t>(top)];
        for (int k = 0; k < trial; ++k) r = std::nextafter(r, -inf);
        if (trial == 5) r -= std::fabs(r) * 1e-6f + 1e-6f;
        if (rival != top) row[static_cast<size_t>(rival)] = r;
        if (trial % 3 == 1 && v > 2) row[static_cast<size_t>((top + 1) % v)] = -inf;  // masked ids
        float lp = 0;
        ASSERT_EQ(greedy_token(row.data(), v), greedy_token(row.data(), v, &lp))
            << "magnitude " << magnitude << " v " << v << " trial " << trial;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 7 * 6 * 6);
  // Rows the full rule settles by its non-finite case.
  std::vector<float> masked(8, -inf);
  EXPECT_EQ(greedy_token(masked.data(), 8), 0);
  masked[5] = 1.0f;
  EXPECT_EQ(greedy_token(masked.data(), 8), 5);
  masked[6] = inf;
  EXPECT_EQ(greedy_token(masked.data(), 8), 0);
}

TEST(Greedy, TopLogprobsSortedAndNormalised) {
  auto row = random_row(3000, 7);
  float lse = row_logsumexp(row.data(), 3000);
  auto top = top_logprobs(row.data(), 3000, 5, lse);
  ASSERT_EQ(top.size(), 5u);
  EXPECT_EQ(top[0].token, greedy_token(row.data(), 3000));
  for (size_t i = 1; i < top.size(); ++i) EXPECT_GE(top[i - 1].logprob, top[i].logprob);
  double mass = 0;
  for (float x : row) mass += std::exp(static_cast<double>(x - lse));
  EXPECT_NEAR(mass, 1.0, 1e-4);
}

TEST(Sampler, ValidationRejectsBadParams) {
  auto expect_bad = [](engine::SamplingParams p) {
    try {
      validate(p, 100);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    }
  };
  engine::SamplingParams p;
  p.temperature = -0.5f;
  expect_bad(p);
  p = {};
  p.top_p = 1.5f;
  expect_bad(p);
  p = {};
  p.top_p = 0.0f;
  expect_bad(p);
  p = {};
  p.top_k = -1;
  expect_bad(p);
  p = {};
  p.min_p = 2;
  expect_bad(p);
  p = {};
  p.repetition_penalty = 0;
  expect_bad(p);
  p = {};
  p.logit_bias[100] = 1;
  expect_bad(p);
  p = {};
  p.top_logprobs = 21;
  expect_bad(p);
  EXPECT_NO_THROW(validate(engine::SamplingParams{}, 100));
}

TEST(Sampler, SeededStreamIsReproducibleAndSeedDependent) {
  engine::SamplingParams p;
  p.temperature = 1.0f;
  auto row = random_row(64, 3, 1.0f);
  auto run = [&](uint64_t seed) {
    SequenceSampler s(p, seed, {});
    std::vector<int32_t> out;
    for (int i = 0; i < 40; ++i) out.push_back(s.sample(row.data(), 64).token);
    return out;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

TEST(Sampler, DistributionMatchesSoftmax) {
  // Three tokens with known probabilities at temperature 0.5.
  std::vector<float> row = {0.0f, std::log(2.0f) * 0.5f, std::log(7.0f) * 0.5f};
  engine::SamplingParams p;
  p.temperature = 0.5f;
  SequenceSampler s(p, 1, {});
  std::vector<int> hist(3);
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++hist[static_cast<size_t>(s.sample(row.data(), 3).token)];
  EXPECT_NEAR(hist[0] / double(n), 0.1, 0.01);
  EXPECT_NEAR(hist[1] / double(n), 0.2, 0.01);
  EXPECT_NEAR(hist[2] / double(n), 0.7, 0.01);
}

TEST(Sampler, TopKTopPMinPRestrictCandidates) {
  std::vector<float> row = {5.0f, 4.0f, 3.0f, 2.0f, 1.0f, 0.0f};
  auto support = [&](engine::SamplingParams p) {
    SequenceSampler s(p, 9, {});
    std::set<int32_t> seen;
    for (int i = 0; i < 3000; ++i) seen.insert(s.sample(row.data(), 6).token);
    return seen;
  };
  engine::SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 2;
  EXPECT_EQ(support(p), (std::set<int32_t>{0, 1}));
  p = {};
  p.top_p = 0.7f;  // p0 ≈ 0.636, p0 + p1 ≈ 0.87
  EXPECT_EQ(support(p), (std::set<int32_t>{0, 1}));
  p = {};
  p.min_p = 0.3f;  // keeps p >= 0.3·p0: e^-1 ≈ 0.37 only
  EXPECT_EQ(support(p), (std::set<int32_t>{0, 1}));
  p = {};
  EXPECT_EQ(support(p).size(), 6u);
}

TEST(Sampler, PenaltiesAndBiasChangeGreedyChoice) {
  std::vector<float> row = {2.0f, 1.9f, 0.0f};
  engine::SamplingParams p;
  p.temperature = 0;
  p.logit_bias[2] = 5.0f;
  EXPECT_EQ(SequenceSampler(p, 0, {}).sample(row.data(), 3).token, 2);
  p = {};
  p.temperature = 0;
  p.repetition_penalty = 1.2f;  // prompt token 0 penalised: 2.0/1.2 < 1.9
  EXPECT_EQ(SequenceSampler(p, 0, {0}).sample(row.data(), 3).token, 1);
  p = {};
  p.temperature = 0;
  p.frequency_penalty = 0.2f;
  SequenceSampler s(p, 0, {});
  EXPECT_EQ(s.sample(row.data(), 3).token, 0);  // then 0 carries -0.2
  EXPECT_EQ(s.sample(row.data(), 3).token, 1);
  p = {};
  p.temperature = 0;
  p.presence_penalty = 0.05f;
  SequenceSampler s2(p, 0, {});
  EXPECT_EQ(s2.sample(row.data(), 3).token, 0);
  EXPECT_EQ(s2.sample(row.data(), 3).token, 0);  // 2.0 - 0.05 still beats 1.9
}

TEST(Sampler, LogprobsReportRawDistribution) {
  auto row = random_row(100, 11);
  engine::SamplingParams p;
  p.temperature = 0;
  p.logprobs = true;
  p.top_logprobs = 3;
  auto r = SequenceSampler(p, 0, {}).sample(row.data(), 100);
  float lp = 0;
  EXPECT_EQ(r.token, greedy_token(row.data(), 100, &lp));
  EXPECT_FLOAT_EQ(r.logprob, lp);
  ASSERT_EQ(r.top.size(), 3u);
  EXPECT_EQ(r.top[0].token, r.token);
}

namespace {
// Allows ids below `limit` (end ids are the sampler's business).
class Below final : public ingot::engine::TokenConstraint {
 public:
  explicit Below(int32_t limit) : limit_(limit) {}
  void apply(float* logits, int64_t vocab, int64_t) override {
    for (int64_t i = limit_; i < vocab; ++i) logits[i] = -1e30f;
  }
  bool accept(int32_t t) override { return t < limit_; }
  bool complete() const override { return false; }
  size_t allowed_prefix(const std::vector<int32_t>& tokens) override {
    size_t n = 0;
    while (n < tokens.size() && tokens[n] < limit_) ++n;
    return n;
  }

 private:
  int32_t limit_;
};
}  // namespace

TEST(Sampler, AdmissiblePrefixOfADraftStopsAtRefusedAndEndTokens) {
  ingot::engine::SamplingParams p;
  SequenceSampler free(p, 1, {});
  EXPECT_EQ(free.admissible_prefix({9, 8, 7}), 3u);  // no constraint: everything may be verified
  SequenceSampler s(p, 1, {});
  Below c(5);
  s.constrain(&c, {7});
  EXPECT_EQ(s.admissible_prefix({1, 2, 3}), 3u);
  EXPECT_EQ(s.admissible_prefix({1, 6, 3}), 1u);  // refused by the constraint
  EXPECT_EQ(s.admissible_prefix({1, 2, 7, 3}), 2u);  // the end id ends the draft
  EXPECT_EQ(s.admissible_prefix({7}), 0u);
  EXPECT_EQ(s.admissible_prefix({}), 0u);
}
