// Speculative decoding through the engine on the fake model: outputs equal
// plain decoding (greedy, seeded sampling, logprobs, EOS, stop strings,
// structured output), the sampled distribution is the model's (chi-square),
// mixed batches, cancellation, and the paged pool after thousands of
// verifications; plus the n-gram drafter and the draft-length choice alone.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <thread>

#include "engine/ngram_drafter.h"
#include "engine/speculation.h"
#include "fake_model.h"
#include "ingot/engine.h"
#include "test_drafters.h"
#include "util/error.h"

using namespace ingot;
using namespace ingot::engine;
using ingot::testing::FakeModel;
using ingot::testing::FixedDrafter;
using ingot::testing::LetterDecoder;
using ingot::testing::ReplayDrafter;

namespace {

struct Output {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::string text;
  Chunk last;
};

Output collect(const std::shared_ptr<RequestHandle>& h) {
  Output o;
  do {
    EXPECT_TRUE(h->next(&o.last, std::chrono::seconds(30)));
    for (auto& t : o.last.tokens) {
      o.tokens.push_back(t.token);
      o.logprobs.push_back(t.logprob);
      o.text += t.text;
    }
  } while (!o.last.finished);
  return o;
}

void wait_idle(Engine& e) {
  for (int i = 0; i < 200 && e.stats().running > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

std::vector<Request> mixed_requests(int n, uint32_t seed, int64_t max_tokens) {
  std::mt19937 g(seed);
  std::vector<Request> rs;
  for (int i = 0; i < n; ++i) {
    Request r;
    const int len = 3 + static_cast<int>(g() % 40);
    for (int j = 0; j < len; ++j) r.prompt.push_back(static_cast<int32_t>(g() % 31));
    r.stop.max_tokens = max_tokens;
    r.stop.ignore_eos = i % 3 != 0;  // some end at EOS
    r.sampling.logprobs = true;
    if (i % 2) {
      r.sampling.temperature = 0.8f;
      r.sampling.top_k = i % 4 == 1 ? 8 : 0;
      r.sampling.seed = 77 + static_cast<uint64_t>(i);
    } else {
      r.sampling.temperature = 0;
    }
    rs.push_back(r);
  }
  return rs;
}

constexpr int32_t kEos = 31;

// Runs every request without speculation; returns outputs and a drafter that
// replays them with mistakes.
std::vector<Output> plain_run(FakeModel& model, const std::vector<Request>& rs, EngineOptions opt,
                              std::shared_ptr<ReplayDrafter>* replay, double error) {
  opt.speculative = "off";
  opt.drafter = nullptr;
  auto e = start_engine(model, opt, std::make_shared<LetterDecoder>(), {kEos});
  std::vector<Output> out;
  *replay = std::make_shared<ReplayDrafter>(model.vocab_size(), error, 5);
  for (const auto& r : rs) {
    out.push_back(collect(e->submit(r)));
    std::vector<int32_t> seq = r.prompt;
    seq.insert(seq.end(), out.back().tokens.begin(), out.back().tokens.end());
    (*replay)->add(seq);
  }
  return out;
}

}  // namespace

TEST(NgramDraft, LongestMostRecentMatchProposesWhatFollowed) {
  const NgramOptions two{2, 4};
  // Ending "7 8": "7 8 1 2" early, "7 8 3 4" later; the later wins at n = 2.
  std::vector<int32_t> t = {7, 8, 1, 2, 5, 7, 8, 3, 4, 9, 7, 8};
  EXPECT_EQ(ngram_draft(t, 2, two), (std::vector<int32_t>{3, 4}));
  // A longer match beats a more recent shorter one: "5 7 8" occurs once before.
  t = {5, 7, 8, 1, 2, 7, 8, 3, 4, 5, 7, 8};
  EXPECT_EQ(ngram_draft(t, 3, two), (std::vector<int32_t>{1, 2, 7}));
  // The default asks for 3 tokens at least: the 2-gram alone proposes nothing.
  EXPECT_EQ(ngram_draft(t, 3), (std::vector<int32_t>{1, 2, 7}));
  EXPECT_TRUE(ngram_draft({7, 8, 1, 2, 5, 7, 8, 3, 4, 9, 7, 8}, 2).empty());
  // Up to max_ngram only: past it the most recent match wins.
  t = {1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 2, 3, 4, 5, 6, 7, 8, 1, 1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_EQ(ngram_draft(t, 2, NgramOptions{3, 6}), (std::vector<int32_t>{1, 1}));
  EXPECT_EQ(ngram_draft(t, 2, NgramOptions{3, 8}), (std::vector<int32_t>{9, 0}));
  // Running into the ending continues the match periodically.
  t = {1, 2, 3, 1, 2, 3, 1, 2};
  EXPECT_EQ(ngram_draft(t, 5, two), (std::vector<int32_t>{3, 1, 2, 3, 1}));
  t = {4, 4, 4};
  EXPECT_EQ(ngram_draft(t, 4, two), (std::vector<int32_t>{4, 4, 4, 4}));
}

TEST(NgramDraft, NothingWithoutAMatchOfTheMinimumLength) {
  EXPECT_TRUE(ngram_draft({1, 2, 3, 4, 5}, 4).empty());
  EXPECT_TRUE(ngram_draft({1, 2, 3, 9, 3}, 4, NgramOptions{2, 4}).empty());  // only a 1-gram repeats
  EXPECT_EQ(ngram_draft({1, 2, 3, 9, 3}, 4, NgramOptions{1, 3}), (std::vector<int32_t>{9, 3, 9, 3}));
  EXPECT_TRUE(ngram_draft({1, 2, 1, 2}, 0).empty());
  EXPECT_TRUE(ngram_draft({}, 3).empty());
  EXPECT_TRUE(ngram_draft({5}, 3).empty());
  EXPECT_THROW(NgramDrafter(NgramOptions{0, 2}), Error);
  EXPECT_THROW(NgramDrafter(NgramOptions{3, 2}), Error);
}

TEST(DraftLength, FollowsAcceptanceAndRowCost) {
  EXPECT_EQ(choose_draft_length(0.1, 0.5, 0, 1, 16), 0);   // drafts rarely kept: plain decoding
  EXPECT_EQ(choose_draft_length(0.99, 0.0, 0, 1, 16), 16);  // free rows: as many as allowed
  EXPECT_EQ(choose_draft_length(0.99, 0.0, 0, 1, 3), 3);
  const int64_t cheap = choose_draft_length(0.8, 0.1, 0, 1, 16), dear = choose_draft_length(0.8, 0.5, 0, 1, 16);
  EXPECT_GT(cheap, dear);
  EXPECT_GT(dear, 0);
  EXPECT_GT(choose_draft_length(0.9, 0.3, 0, 1, 16), choose_draft_length(0.7, 0.3, 0, 1, 16));
  // Drafting that costs time shortens drafts (a draft model as slow as the target: none).
  EXPECT_LT(choose_draft_length(0.9, 0.1, 0.3, 1, 16), choose_draft_length(0.9, 0.1, 0, 1, 16));
  EXPECT_EQ(choose_draft_length(0.9, 0.1, 1.0, 1, 16), 0);
  // A full batch pays for a draft with every other sequence's time.
  EXPECT_EQ(choose_draft_length(0.8, 0.5, 0, 32, 16), 0);
  EXPECT_EQ(choose_draft_length(0.8, 0.5, 0, 1, 0), 0);
}

TEST(DraftLength, AcceptanceLearnsAndDriftsBack) {
  AcceptanceEstimate a(0.7);
  EXPECT_DOUBLE_EQ(a.rate(), 0.7);
  for (int i = 0; i < 20; ++i) a.record(4, 0);
  EXPECT_LT(a.rate(), 0.05);
  for (int i = 0; i < 200; ++i) a.idle();
  EXPECT_NEAR(a.rate(), 0.7, 0.01);
  for (int i = 0; i < 20; ++i) a.record(4, 4);
  EXPECT_GT(a.rate(), 0.99);
  AcceptanceEstimate low(0.85, 0.1);  // starts where the engine stands, drifts to the prior
  EXPECT_DOUBLE_EQ(low.rate(), 0.1);
  for (int i = 0; i < 200; ++i) low.idle();
  EXPECT_NEAR(low.rate(), 0.85, 0.01);
}

TEST(DraftLength, StepCostFitsTheRowSlope) {
  StepCost c(0.5);
  EXPECT_DOUBLE_EQ(c.row_cost(), 0.5);  // nothing seen yet
  EXPECT_EQ(c.one_row_seconds(), 0);
  for (int i = 0; i < 50; ++i) c.observe(1, 0.010);
  EXPECT_DOUBLE_EQ(c.row_cost(), 0.5);  // rows never varied
  EXPECT_NEAR(c.one_row_seconds(), 0.010, 1e-12);
  for (int i = 0; i < 50; ++i) c.observe(1 + i % 5, 0.010 + 0.002 * (i % 5));
  // time = 0.008 + 0.002 rows: one more row costs 0.002 / 0.010 of a one-row step.
  EXPECT_NEAR(c.row_cost(), 0.2, 1e-6);
  EXPECT_NEAR(c.one_row_seconds(), 0.010, 1e-9);
  // Plain steps again (drafting stopped): the slope learnt stays.
  for (int i = 0; i < 200; ++i) c.observe(1, 0.010);
  EXPECT_NEAR(c.row_cost(), 0.2, 1e-6);
  EXPECT_NEAR(c.one_row_seconds(), 0.010, 1e-9);
  DraftCost d;
  EXPECT_EQ(d.seconds_per_token(), 0);
  d.observe(4, 0.008);
  EXPECT_NEAR(d.seconds_per_token(), 0.002, 1e-12);
  for (int i = 0; i < 100; ++i) d.observe(2, 0.010);
  EXPECT_NEAR(d.seconds_per_token(), 0.005, 1e-6);
  for (int i = 0; i < 100; ++i) d.idle();
  EXPECT_LT(d.seconds_per_token(), 0.001);
}

TEST(Speculation, OutputsEqualPlainDecodingTokenForToken) {
  FakeModel model;
  for (const char* kv : {"contiguous", "paged"}) {
    // (Adaptive lengths: the goldens' and the server's tests. Here drafting
    // costs about what the fake model's step does, so adaptive would not draft.)
    for (int fixed : {1, 3, kMaxSpeculativeTokens}) {
      EngineOptions opt;
      opt.kv = kv;
      opt.max_concurrency = 8;
      opt.prefix_cache = false;
      auto rs = mixed_requests(12, 11, 60);
      std::shared_ptr<ReplayDrafter> replay;
      auto want = plain_run(model, rs, opt, &replay, 0.2);
      opt.drafter = replay;
      opt.num_speculative_tokens = fixed;
      auto e = start_engine(model, opt, std::make_shared<LetterDecoder>(), {kEos});
      std::vector<std::shared_ptr<RequestHandle>> hs;
      for (const auto& r : rs) hs.push_back(e->submit(r));
      int64_t drafted = 0, accepted = 0;
      for (size_t i = 0; i < rs.size(); ++i) {
        Output got = collect(hs[i]);
        SCOPED_TRACE(std::string(kv) + " k=" + std::to_string(fixed) + " request " + std::to_string(i));
        EXPECT_EQ(got.tokens, want[i].tokens);
        EXPECT_EQ(got.logprobs, want[i].logprobs);
        EXPECT_EQ(got.text, want[i].text);
        EXPECT_EQ(got.last.reason, want[i].last.reason);
        EXPECT_EQ(got.last.usage.completion_tokens, want[i].last.usage.completion_tokens);
        EXPECT_EQ(want[i].last.usage.draft_tokens, 0);
        drafted += got.last.usage.draft_tokens;
        accepted += got.last.usage.accepted_draft_tokens;
      }
      EXPECT_GT(accepted, 50) << kv;
      EXPECT_GT(drafted, accepted) << kv;
      wait_idle(*e);
      Stats st = e->stats();
      EXPECT_EQ(st.spec_draft_tokens, drafted);
      EXPECT_EQ(st.spec_accepted_tokens, accepted);
      EXPECT_GT(st.spec_drafts, 0);
    }
  }
}

TEST(Speculation, StopStringsEndTheTextWhereThePlainRunDoes) {
  FakeModel model;
  EngineOptions opt;
  opt.kv = "paged";
  Request r;
  r.prompt = {1, 2, 3, 4, 5};
  r.stop.max_tokens = 40;
  r.stop.ignore_eos = true;
  r.sampling.temperature = 0;
  std::shared_ptr<ReplayDrafter> replay;
  Output free_run = plain_run(model, {r}, opt, &replay, 0.0)[0];
  // A stop string in the middle of the free-running text.
  r.stop.stop_strings = {free_run.text.substr(17, 2)};
  auto want = plain_run(model, {r}, opt, &replay, 0.0)[0];
  ASSERT_EQ(want.last.reason, FinishReason::Stop);
  opt.drafter = replay;  // perfect drafts: the stop lands inside one
  opt.num_speculative_tokens = 8;
  auto e = start_engine(model, opt, std::make_shared<LetterDecoder>(), {kEos});
  Output got = collect(e->submit(r));
  EXPECT_EQ(got.text, want.text);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.last.stop_matched, want.last.stop_matched);
  EXPECT_EQ(got.last.usage.completion_tokens, want.last.usage.completion_tokens);
  EXPECT_GT(got.last.usage.accepted_draft_tokens, 0);
}

TEST(Speculation, MaxTokensIsNeverOvershot) {
  FakeModel model;
  // The cache never holds more than the prompt and max_tokens - 1 tokens
  // (the last token is never fed back): the reservation made at admission.
  int64_t limit = 0, over = 0;
  model.on_forward = [&](const BatchInput& in) {
    for (const auto& s : in.seqs)
      if (s.cache->offset() > limit) ++over;
  };
  EngineOptions opt;
  opt.kv = "paged";
  opt.drafter = std::make_shared<FixedDrafter>(std::vector<int32_t>(16, 3));
  opt.num_speculative_tokens = kMaxSpeculativeTokens;
  auto e = start_engine(model, opt, nullptr, {});
  for (int64_t max_tokens : {1, 2, 5, 17}) {
    Request r;
    r.prompt = {3, 3, 3};
    r.stop.max_tokens = max_tokens;
    r.sampling.temperature = 0;
    limit = 3 + max_tokens - 1;
    Output got = collect(e->submit(r));
    EXPECT_EQ(static_cast<int64_t>(got.tokens.size()), max_tokens);
    EXPECT_EQ(got.last.reason, FinishReason::Length);
    if (max_tokens > 2) {
      EXPECT_GT(got.last.usage.draft_tokens, 0);
    }
  }
  e->shutdown();
  model.on_forward = nullptr;
  EXPECT_EQ(over, 0);
}

// Rows that speculate and rows that do not share forward passes; each gets
// what it gets alone.
TEST(Speculation, MixedBatchesEqualEachRequestAlone) {
  FakeModel model;
  EngineOptions opt;
  opt.kv = "paged";
  opt.max_concurrency = 16;
  opt.prefill_chunk = 8;  // prefill chunks mix in too
  auto rs = mixed_requests(16, 21, 50);
  for (size_t i = 0; i < rs.size(); ++i) rs[i].speculative = i % 3 != 0;
  std::shared_ptr<ReplayDrafter> replay;
  auto want = plain_run(model, rs, opt, &replay, 0.3);
  opt.drafter = replay;
  int64_t mixed_steps = 0;
  model.on_forward = [&](const BatchInput& in) {
    bool plain = false, drafted = false;
    for (const auto& s : in.seqs) (s.n_tokens == 1 ? plain : drafted) = true;
    if (plain && drafted) ++mixed_steps;
  };
  auto e = start_engine(model, opt, std::make_shared<LetterDecoder>(), {kEos});
  std::vector<std::shared_ptr<RequestHandle>> hs;
  for (const auto& r : rs) hs.push_back(e->submit(r));
  for (size_t i = 0; i < rs.size(); ++i) {
    Output got = collect(hs[i]);
    EXPECT_EQ(got.tokens, want[i].tokens) << "request " << i;
    EXPECT_EQ(got.logprobs, want[i].logprobs) << "request " << i;
    if (!rs[i].speculative) {
      EXPECT_EQ(got.last.usage.draft_tokens, 0) << "request " << i;
    }
  }
  e->shutdown();
  model.on_forward = nullptr;
  EXPECT_GT(mixed_steps, 0);
}

// Thousands of verifications with random acceptance on the shared paged
// pool: every rejected block goes back, so the pool ends where it started.
TEST(Speculation, PagedPoolBlocksComeBackAfterThousandsOfVerifications) {
  FakeModel model;
  EngineOptions opt;
  opt.kv = "paged";
  opt.prefix_cache = false;
  opt.max_concurrency = 16;
  auto rs = mixed_requests(16, 31, 400);
  for (auto& r : rs) r.stop.ignore_eos = true;
  std::shared_ptr<ReplayDrafter> replay;
  auto want = plain_run(model, rs, opt, &replay, 0.12);
  opt.drafter = replay;
  opt.num_speculative_tokens = 7;
  auto e = start_engine(model, opt, nullptr, {kEos});
  std::vector<std::shared_ptr<RequestHandle>> hs;
  for (const auto& r : rs) hs.push_back(e->submit(r));
  for (size_t i = 0; i < rs.size(); ++i) EXPECT_EQ(collect(hs[i]).tokens, want[i].tokens) << "request " << i;
  wait_idle(*e);
  Stats st = e->stats();
  EXPECT_GT(st.spec_drafts, 1000);
  EXPECT_GT(st.spec_accepted_tokens, 0);
  EXPECT_LT(st.spec_accepted_tokens, st.spec_draft_tokens);
  EXPECT_GT(st.kv_pool_allocated_bytes, 0);
  EXPECT_EQ(st.kv_pool_used_bytes, 0) << "blocks of rejected drafts were not returned";
  EXPECT_EQ(st.kv_bytes_used, 0);
}

TEST(Speculation, CancellingMidStreamReturnsEveryBlock) {
  FakeModel model;
  EngineOptions opt;
  opt.kv = "paged";
  opt.prefix_cache = false;
  opt.drafter = std::make_shared<FixedDrafter>(std::vector<int32_t>(8, 5));
  opt.num_speculative_tokens = 8;
  auto e = start_engine(model, opt, nullptr, {});
  Request r;
  r.prompt = {1, 2, 3};
  r.stop.max_tokens = 3000;
  r.sampling.temperature = 0;
  auto h = e->submit(r);
  Chunk c;
  ASSERT_TRUE(h->next(&c, std::chrono::seconds(10)));
  h->cancel();
  do ASSERT_TRUE(h->next(&c, std::chrono::seconds(10)));
  while (!c.finished);
  EXPECT_EQ(c.reason, FinishReason::Cancelled);
  wait_idle(*e);
  EXPECT_EQ(e->stats().kv_pool_used_bytes, 0);
}

namespace {

// Structured output stand-in: only even ids (end tokens aside).
class EvenOnly final : public TokenConstraint {
 public:
  void apply(float* logits, int64_t vocab, int64_t) override {
    for (int64_t i = 1; i < vocab; i += 2) logits[i] = -INFINITY;
  }
  bool accept(int32_t t) override { return t % 2 == 0; }
  bool complete() const override { return false; }
  size_t allowed_prefix(const std::vector<int32_t>& tokens) override {
    size_t n = 0;
    while (n < tokens.size() && tokens[n] % 2 == 0) ++n;
    return n;
  }
};
class EvenGrammar final : public Grammar {
 public:
  std::unique_ptr<TokenConstraint> start() const override { return std::make_unique<EvenOnly>(); }
};

}  // namespace

TEST(Speculation, DraftTokensTheGrammarRefusesAreCutBeforeVerification) {
  FakeModel model;
  EngineOptions opt;
  opt.kv = "paged";
  Request r;
  r.prompt = {2, 4, 6};
  r.stop.max_tokens = 30;
  r.grammar = std::make_shared<EvenGrammar>();
  for (float temp : {0.0f, 1.0f}) {
    r.sampling.temperature = temp;
    r.sampling.seed = 9;
    std::shared_ptr<ReplayDrafter> replay;
    auto want = plain_run(model, {r}, opt, &replay, 0.0)[0];
    for (int32_t t : want.tokens) ASSERT_EQ(t % 2, 0);
    // Drafts: the true continuation, or odd ids (cut to nothing at once).
    for (bool odd : {false, true}) {
      opt.drafter = odd ? std::shared_ptr<const Drafter>(std::make_shared<FixedDrafter>(std::vector<int32_t>{1, 2, 4}))
                        : std::shared_ptr<const Drafter>(replay);
      opt.num_speculative_tokens = 4;
      auto e = start_engine(model, opt, std::make_shared<LetterDecoder>(), {kEos});
      Output got = collect(e->submit(r));
      EXPECT_EQ(got.tokens, want.tokens);
      if (odd) {
        EXPECT_EQ(got.last.usage.draft_tokens, 0);
      } else {
        EXPECT_GT(got.last.usage.accepted_draft_tokens, 10);
      }
    }
  }
}

namespace {

// Pearson's statistic with categories of expected count < 5 pooled.
double chi_square(const std::vector<int64_t>& observed, const std::vector<double>& p, int64_t n, int* dof) {
  double stat = 0, pooled_o = 0, pooled_e = 0;
  int cats = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double e = p[i] * static_cast<double>(n);
    if (e < 5) {
      pooled_o += static_cast<double>(observed[i]);
      pooled_e += e;
      continue;
    }
    stat += (static_cast<double>(observed[i]) - e) * (static_cast<double>(observed[i]) - e) / e;
    ++cats;
  }
  if (pooled_e > 0) {
    stat += (pooled_o - pooled_e) * (pooled_o - pooled_e) / std::max(pooled_e, 1e-9);
    ++cats;
  }
  *dof = cats - 1;
  return stat;
}

std::vector<double> softmax_row(const FakeModel& m, int32_t token, int64_t pos) {
  std::vector<float> row(static_cast<size_t>(m.vocab_size()));
  m.logits_row(token, pos, row.data());
  double mx = *std::max_element(row.begin(), row.end()), sum = 0;
  std::vector<double> p(row.size());
  for (size_t i = 0; i < row.size(); ++i) sum += p[i] = std::exp(row[i] - mx);
  for (double& x : p) x /= sum;
  return p;
}

// 99.9th percentile of chi-square with `dof` degrees of freedom
// (Wilson-Hilferty), generous enough for a test that must not flake.
double chi_square_limit(int dof) {
  const double k = dof, z = 3.09;
  const double t = 1 - 2 / (9 * k) + z * std::sqrt(2 / (9 * k));
  return k * t * t * t;
}

}  // namespace

// Sampled tokens keep the model's distribution with speculation: the first
// token (a verified draft position) and the next one given the draft was kept.
TEST(Speculation, SampledTokensKeepTheTargetDistribution) {
  FakeModel model;
  const int32_t prompt_token = 7;
  auto p1 = softmax_row(model, prompt_token, 0);
  // Draft the fourth most likely first token: kept often and rejected often.
  std::vector<int32_t> order(p1.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p1[static_cast<size_t>(a)] > p1[static_cast<size_t>(b)]; });
  const int32_t d = order[3];
  auto p2 = softmax_row(model, d, 1);
  EngineOptions opt;
  opt.kv = "paged";
  opt.prefix_cache = false;
  opt.drafter = std::make_shared<FixedDrafter>(std::vector<int32_t>{d, 0});
  opt.num_speculative_tokens = 2;
  auto e = start_engine(model, opt, nullptr, {});
  const int64_t n = 12000;
  std::vector<int64_t> first(p1.size(), 0), second(p2.size(), 0);
  int64_t kept = 0, drafted = 0;
  std::vector<std::shared_ptr<RequestHandle>> hs;
  for (int64_t i = 0; i < n; ++i) {
    Request r;
    r.prompt = {prompt_token};
    r.stop.max_tokens = 3;
    r.stop.ignore_eos = true;
    r.sampling.temperature = 1.0f;
    r.sampling.seed = 1000 + static_cast<uint64_t>(i);
    hs.push_back(e->submit(r));
    if (hs.size() == 200 || i == n - 1) {
      for (auto& h : hs) {
        Output o = collect(h);
        ASSERT_EQ(o.tokens.size(), 3u);
        ++first[static_cast<size_t>(o.tokens[0])];
        if (o.tokens[0] == d) ++second[static_cast<size_t>(o.tokens[1])];
        kept += o.last.usage.accepted_draft_tokens;
        drafted += o.last.usage.draft_tokens;
      }
      hs.clear();
    }
  }
  int dof = 0;
  const double s1 = chi_square(first, p1, n, &dof);
  EXPECT_LT(s1, chi_square_limit(dof)) << "first token, dof " << dof;
  const int64_t n2 = first[static_cast<size_t>(d)];
  const double s2 = chi_square(second, p2, n2, &dof);
  EXPECT_LT(s2, chi_square_limit(dof)) << "second token after the kept draft, dof " << dof << ", n " << n2;
  // The draft's first token is kept with its target probability.
  const double pd = p1[static_cast<size_t>(d)], sd = std::sqrt(pd * (1 - pd) / static_cast<double>(n));
  EXPECT_NEAR(static_cast<double>(n2) / static_cast<double>(n), pd, 5 * sd);
  EXPECT_GT(kept, 0);
  EXPECT_GE(drafted, n);
}

TEST(Speculation, SeededRequestsAreReproducibleAndOptOutWorks) {
  FakeModel model;
  EngineOptions opt;
  opt.kv = "paged";
  // Sampled ids over 32 rarely repeat 3-grams: 1-grams, so that drafts come often.
  opt.drafter = std::make_shared<NgramDrafter>(NgramOptions{1, 3});
  opt.num_speculative_tokens = 4;
  auto e = start_engine(model, opt, nullptr, {});
  Request r;
  for (int i = 0; i < 30; ++i) r.prompt.push_back(i % 6);
  r.stop.max_tokens = 80;
  r.stop.ignore_eos = true;
  r.sampling.temperature = 0.9f;
  r.sampling.seed = 4242;
  Output a = collect(e->submit(r)), b = collect(e->submit(r));
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_GT(a.last.usage.draft_tokens, 0);
  r.speculative = false;
  Output c = collect(e->submit(r));
  EXPECT_EQ(c.tokens, a.tokens);  // the same draws as plain decoding
  EXPECT_EQ(c.last.usage.draft_tokens, 0);
  EXPECT_EQ(c.last.usage.accepted_draft_tokens, 0);
}

TEST(Speculation, BadOptionsAreClearErrors) {
  FakeModel model;
  auto start = [&](const std::string& mode, int k) {
    EngineOptions opt;
    opt.speculative = mode;
    opt.num_speculative_tokens = k;
    return start_engine(model, opt, nullptr, {});
  };
  EXPECT_NO_THROW(start("off", 0));
  EXPECT_NO_THROW(start("ngram", kMaxSpeculativeTokens));
  for (auto [mode, k] : std::vector<std::pair<std::string, int>>{{"draft", 0}, {"", 0}, {"ngram", -1},
                                                                   {"ngram", kMaxSpeculativeTokens + 1}}) {
    try {
      start(mode, k);
      ADD_FAILURE() << "accepted speculative '" << mode << "' k " << k;
    } catch (const Error& err) {
      EXPECT_EQ(err.kind(), ErrorKind::InvalidArgument);
      EXPECT_NE(std::string(err.what()).find("specul"), std::string::npos) << err.what();
    }
  }
}

namespace {
// Fails on its n-th proposal (and every one after).
class FailingDrafter final : public Drafter {
 public:
  explicit FailingDrafter(int after) : after_(after) {}
  std::unique_ptr<SequenceDrafter> start() const override {
    class S final : public SequenceDrafter {
     public:
      explicit S(int after) : left_(after) {}
      std::vector<int32_t> propose(const std::vector<int32_t>&, int64_t k) override {
        if (left_-- <= 0) fail(ErrorKind::Internal, "draft model failed");
        return std::vector<int32_t>(static_cast<size_t>(k), 2);
      }

     private:
      int left_;
    };
    return std::make_unique<S>(after_);
  }

 private:
  int after_;
};
}  // namespace

// A drafter that throws costs its sequence the drafts, nothing else.
TEST(Speculation, AFailingDrafterOnlyStopsDrafting) {
  FakeModel model;
  EngineOptions opt;
  opt.kv = "paged";
  Request r;
  r.prompt = {4, 5, 6};
  r.stop.max_tokens = 30;
  r.stop.ignore_eos = true;
  r.sampling.temperature = 0;
  std::shared_ptr<ReplayDrafter> replay;
  auto want = plain_run(model, {r}, opt, &replay, 0.0)[0];
  opt.drafter = std::make_shared<FailingDrafter>(3);
  opt.num_speculative_tokens = 2;
  auto e = start_engine(model, opt, nullptr, {});
  Output got = collect(e->submit(r));
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.last.reason, FinishReason::Length);
  EXPECT_EQ(got.last.usage.draft_tokens, 6);  // three proposals of two
}

// Ids outside the vocabulary end a draft before the model sees them; a
// drafter proposing more than asked is cut to k.
TEST(Speculation, DraftIdsOutsideTheVocabularyAreCut) {
  FakeModel model;
  EngineOptions opt;
  opt.kv = "paged";
  Request r;
  r.prompt = {4, 5, 6};
  r.stop.max_tokens = 12;
  r.stop.ignore_eos = true;
  r.sampling.temperature = 0;
  std::shared_ptr<ReplayDrafter> replay;
  auto want = plain_run(model, {r}, opt, &replay, 0.0)[0];
  int64_t widest = 0;
  model.on_forward = [&](const BatchInput& in) {
    for (int32_t t : in.tokens)
      if (t < 0 || t >= model.vocab_size()) ++widest;
  };
  for (auto draft : {std::vector<int32_t>{-1, 2}, std::vector<int32_t>{2, 32, 3}, std::vector<int32_t>(40, 2)}) {
    opt.drafter = std::make_shared<FixedDrafter>(draft);
    opt.num_speculative_tokens = 3;
    auto e = start_engine(model, opt, nullptr, {});
    Output got = collect(e->submit(r));
    EXPECT_EQ(got.tokens, want.tokens);
    EXPECT_LE(got.last.usage.draft_tokens, 3 * 12);
  }
  model.on_forward = nullptr;
  EXPECT_EQ(widest, 0);
}
