#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "engine/memory.h"
#include "fake_model.h"
#include "ingot/engine.h"
#include "sampling/sampler.h"
#include "sampling/stop.h"
#include "util/error.h"

using namespace ingot;
using namespace ingot::engine;
using ingot::testing::FakeModel;
using ingot::testing::LetterDecoder;

namespace {

constexpr int32_t kEos = 31;

// What the request must produce, computed without the engine.
std::vector<int32_t> expected_tokens(const FakeModel& m, const Request& r, uint64_t seed) {
  sampling::SequenceSampler s(r.sampling, seed, r.prompt);
  sampling::StopChecker stop(r.stop, r.stop.ignore_eos ? std::vector<int32_t>{} : std::vector<int32_t>{kEos}, nullptr);
  std::vector<int32_t> seq = r.prompt, out;
  std::vector<float> row(static_cast<size_t>(m.vocab_size()));
  for (int64_t n = 1; n <= r.stop.max_tokens; ++n) {
    m.logits_row(seq.back(), static_cast<int64_t>(seq.size()) - 1, row.data());
    int32_t t = s.sample(row.data(), m.vocab_size()).token;
    out.push_back(t);
    seq.push_back(t);
    if (stop.push(t, n).finished) break;
  }
  return out;
}

struct Live {
  std::shared_ptr<RequestHandle> h;
  Request req;
  uint64_t seed;
  std::vector<int32_t> got;
  bool finished = false, cancelled_by_us = false;
  FinishReason reason = FinishReason::None;
  Usage usage;
};

void drain(Live& l) {
  Chunk c;
  while (!l.finished && l.h->next(&c, std::chrono::milliseconds(0))) {
    for (auto& t : c.tokens) l.got.push_back(t.token);
    if (c.finished) {
      l.finished = true;
      l.reason = c.reason;
      l.usage = c.usage;
    }
  }
}

void property_run(bool prefix_cache, uint32_t seed, bool speculative = false) {
  FakeModel model;
  model.counting = true;
  EngineOptions opt;
  opt.kv = "contiguous";
  if (speculative) {
    // Greedy text cycles (positions seen modulo 2), so drafts are often right;
    // sampled text gives drafts of every length, mostly rejected.
    model.position_period = 2;
    opt.speculative = "ngram";
    opt.num_speculative_tokens = 4;
  }
  opt.max_concurrency = 6;
  opt.token_budget = 40;
  opt.prefill_chunk = 16;
  opt.max_queue = 100000;
  opt.prefix_cache = prefix_cache;
  // A budget that holds only a few sequences at a time: 8 bytes per token.
  const int64_t kv_bytes_wanted = 8 * 1200;
  opt.memory_budget_gb = 1;
  const int64_t fixed = static_cast<int64_t>(1ll << 30) - kv_budget_bytes(model, opt);
  opt.memory_budget_gb = static_cast<double>(fixed + kv_bytes_wanted) / static_cast<double>(1ll << 30);
  const int64_t kv_budget = kv_budget_bytes(model, opt);
  ASSERT_NEAR(static_cast<double>(kv_budget), kv_bytes_wanted, 16);

  std::atomic<int64_t> max_resident{0}, violations{0};
  model.on_forward = [&](const BatchInput& in) {
    const int64_t bytes = 8 * ingot::testing::resident_counting_tokens().load();
    max_resident = std::max<int64_t>(max_resident.load(), bytes);
    if (bytes > kv_budget) ++violations;
    if (static_cast<int64_t>(in.tokens.size()) > opt.token_budget) ++violations;
    if (static_cast<int64_t>(in.seqs.size()) > opt.max_concurrency) ++violations;
  };
  auto eng = start_engine(model, opt, nullptr, {kEos});
  std::mt19937 rng(seed);
  std::vector<int32_t> shared(48);
  for (auto& t : shared) t = static_cast<int32_t>(rng() % 31);
  std::vector<std::unique_ptr<Live>> all;
  const int64_t target_steps = 2500;
  while (model.forward_calls.load() < target_steps || all.size() < 400) {
    if (rng() % 3 == 0) {
      auto l = std::make_unique<Live>();
      const int64_t plen = 1 + rng() % 60;
      if (prefix_cache && rng() % 2) l->req.prompt.assign(shared.begin(), shared.begin() + std::min<int64_t>(plen, 40));
      while (static_cast<int64_t>(l->req.prompt.size()) < plen) l->req.prompt.push_back(static_cast<int32_t>(rng() % 31));
      l->req.stop.max_tokens = static_cast<int64_t>(rng() % 40);
      l->req.stop.ignore_eos = rng() % 4 == 0;
      if (rng() % 8 == 0) {  // long generations, so that cancellations land mid-stream
        l->req.stop.max_tokens = 200 + static_cast<int64_t>(rng() % 200);
        l->req.stop.ignore_eos = true;
      }
      l->req.sampling.temperature = rng() % 2 ? 0.0f : 0.9f;
      l->req.sampling.top_k = static_cast<int>(rng() % 5);
      l->seed = rng();
      l->req.sampling.seed = l->seed;
      l->h = eng->submit(l->req);
      all.push_back(std::move(l));
    }
    for (auto& l : all) {
      if (!l->finished && !l->cancelled_by_us && rng() % 60 == 0) {
        l->h->cancel();
        l->cancelled_by_us = true;
      }
      drain(*l);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  for (auto& l : all) {
    Chunk c;
    while (!l->finished) {
      ASSERT_TRUE(l->h->next(&c, std::chrono::seconds(30))) << "a request never finished";
      for (auto& t : c.tokens) l->got.push_back(t.token);
      if (c.finished) {
        l->finished = true;
        l->reason = c.reason;
        l->usage = c.usage;
      }
    }
  }
  int64_t completed = 0, cancelled = 0;
  for (auto& l : all) {
    auto want = expected_tokens(model, l->req, l->seed);
    if (l->reason == FinishReason::Cancelled) {
      ASSERT_TRUE(l->cancelled_by_us);
      ASSERT_LE(l->got.size(), want.size());
      ASSERT_TRUE(std::equal(l->got.begin(), l->got.end(), want.begin())) << "cancelled stream diverged";
      ++cancelled;
    } else {
      ASSERT_TRUE(l->reason == FinishReason::Stop || l->reason == FinishReason::Length);
      ASSERT_EQ(l->got, want) << "tokens lost, duplicated or wrong";
      ++completed;
    }
    ASSERT_EQ(l->usage.completion_tokens, static_cast<int64_t>(l->got.size()));
    ASSERT_LE(l->usage.accepted_draft_tokens, l->usage.draft_tokens);
  }
  EXPECT_GT(completed, 100);
  EXPECT_GT(cancelled, 0);
  EXPECT_EQ(violations.load(), 0) << "max resident " << max_resident.load() << " budget " << kv_budget;
  Stats st = eng->stats();
  EXPECT_EQ(st.running, 0);
  EXPECT_EQ(st.waiting, 0);
  if (speculative) {
    EXPECT_GT(st.spec_accepted_tokens, st.spec_draft_tokens / 10);
    EXPECT_LT(st.spec_accepted_tokens, st.spec_draft_tokens);
  } else {
    EXPECT_EQ(st.spec_draft_tokens, 0);
  }
  if (prefix_cache) {
    EXPECT_GT(st.prefix_hit_tokens, 0);
  } else {
    EXPECT_EQ(ingot::testing::live_counting_caches().load(), 0) << "a finished sequence kept its cache";
  }
  eng->shutdown();
  EXPECT_EQ(ingot::testing::live_counting_caches().load(), 0);
  EXPECT_EQ(ingot::testing::resident_counting_tokens().load(), 0);
}

}  // namespace

TEST(Scheduler, RandomArrivalsAndCancellations) { property_run(false, 1); }
TEST(Scheduler, RandomArrivalsWithPrefixCache) { property_run(true, 2); }
TEST(Scheduler, RandomArrivalsCancellationsAndPrefixCacheWhileSpeculating) { property_run(true, 3, true); }

TEST(Scheduler, LongPromptIsNotStarved) {
  FakeModel model;
  EngineOptions opt;
  opt.kv = "contiguous";
  opt.max_concurrency = 4;
  opt.token_budget = 32;
  opt.prefill_chunk = 16;
  opt.prefix_cache = false;
  std::atomic<int64_t> last_big_chunk{-1};
  model.on_forward = [&](const BatchInput& in) {
    for (const auto& s : in.seqs)
      if (s.n_tokens > 3) last_big_chunk = model.forward_calls.load();
  };
  auto eng = start_engine(model, opt, nullptr, {});
  Request big;
  big.prompt.assign(600, 3);
  big.stop.max_tokens = 1;
  auto hb = eng->submit(big);
  // A steady stream of short requests behind it.
  std::vector<std::shared_ptr<RequestHandle>> small;
  for (int i = 0; i < 40; ++i) {
    Request r;
    r.prompt = {1, 2, 3};
    r.stop.max_tokens = 30;
    small.push_back(eng->submit(r));
  }
  Chunk c;
  bool done = false;
  while (!done) {
    ASSERT_TRUE(hb->next(&c, std::chrono::seconds(30)));
    done = c.finished;
  }
  EXPECT_EQ(c.reason, FinishReason::Length);
  // 600 prompt tokens at one 16-token chunk per step while short requests
  // decode beside it: done within ~38 steps, not after the 300 that the
  // short requests' decode needs.
  EXPECT_GT(last_big_chunk.load(), 30);
  EXPECT_LT(last_big_chunk.load(), 45);
}

TEST(Scheduler, QueueLimitAndBadInputAreClearErrors) {
  FakeModel model(32, 128);
  EngineOptions opt;
  opt.kv = "contiguous";
  opt.max_queue = 2;
  opt.max_concurrency = 1;
  auto eng = start_engine(model, opt, nullptr, {});
  auto kind_of = [&](Request r) {
    try {
      eng->submit(std::move(r));
    } catch (const Error& e) {
      return std::make_pair(e.kind(), std::string(e.what()));
    }
    return std::make_pair(ErrorKind::Internal, std::string("accepted"));
  };
  Request ok;
  ok.prompt = {1, 2};
  ok.stop.max_tokens = 4;
  Request r = ok;
  r.sampling.temperature = -1;
  EXPECT_EQ(kind_of(r).first, ErrorKind::InvalidArgument);
  r = ok;
  r.sampling.top_p = 1.5f;
  EXPECT_EQ(kind_of(r).first, ErrorKind::InvalidArgument);
  r = ok;
  r.stop.max_tokens = 500;
  auto e = kind_of(r);
  EXPECT_EQ(e.first, ErrorKind::InvalidArgument);
  EXPECT_NE(e.second.find("context"), std::string::npos) << e.second;
  r = ok;
  r.prompt.assign(200, 1);
  EXPECT_EQ(kind_of(r).first, ErrorKind::InvalidArgument);
  r.truncate_prompt = true;
  auto h = eng->submit(r);
  Chunk c;
  do ASSERT_TRUE(h->next(&c, std::chrono::seconds(10)));
  while (!c.finished);
  EXPECT_EQ(c.usage.prompt_tokens, 128 - 4);
  r = ok;
  r.stop.stop_strings = {"x"};
  EXPECT_EQ(kind_of(r).first, ErrorKind::InvalidArgument);  // no decoder
  r = ok;
  r.prompt = {99};
  EXPECT_EQ(kind_of(r).first, ErrorKind::InvalidArgument);
  // Queue limit: the engine thread cannot admit faster than we submit
  // long requests into a 1-wide engine.
  int rejected = 0;
  std::vector<std::shared_ptr<RequestHandle>> hs;
  for (int i = 0; i < 50; ++i) {
    Request q = ok;
    q.stop.max_tokens = 100;
    q.stop.ignore_eos = true;
    try {
      hs.push_back(eng->submit(q));
    } catch (const Error& err) {
      EXPECT_EQ(err.kind(), ErrorKind::ResourceExhausted);
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
  EXPECT_GT(eng->stats().requests_rejected, 0);
}

TEST(Scheduler, CancelFreesCacheAtOnce) {
  FakeModel model;
  model.counting = true;
  EngineOptions opt;
  opt.kv = "contiguous";
  opt.prefix_cache = false;
  // Hold the engine inside its second pass until the request is cancelled,
  // so the request cannot run to its length limit first on a loaded machine.
  std::atomic<bool> cancelled{false};
  model.on_forward = [&](const BatchInput&) {
    if (model.forward_calls.load() < 2) return;
    for (int i = 0; i < 10000 && !cancelled.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  auto eng = start_engine(model, opt, nullptr, {});
  Request r;
  r.prompt = {1, 2, 3};
  r.stop.max_tokens = 4000;
  r.stop.ignore_eos = true;
  auto h = eng->submit(r);
  Chunk c;
  ASSERT_TRUE(h->next(&c, std::chrono::seconds(10)));
  ASSERT_FALSE(c.finished);
  EXPECT_EQ(ingot::testing::live_counting_caches().load(), 1);
  h->cancel();
  cancelled.store(true);
  do ASSERT_TRUE(h->next(&c, std::chrono::seconds(10)));
  while (!c.finished);
  EXPECT_EQ(c.reason, FinishReason::Cancelled);
  EXPECT_EQ(ingot::testing::live_counting_caches().load(), 0);
}

TEST(Scheduler, StopStringsTextAndPromptLogprobsThroughTheEngine) {
  FakeModel model;
  EngineOptions opt;
  opt.kv = "contiguous";
  auto eng = start_engine(model, opt, std::make_shared<LetterDecoder>(), {});
  Request r;
  r.prompt = {1, 2, 3, 4, 5};
  r.stop.max_tokens = 40;
  r.sampling.temperature = 0;
  // First find the free-running text, then stop on a two-letter piece of it.
  auto h = eng->submit(r);
  std::string text;
  std::vector<int32_t> toks;
  Chunk c;
  do {
    ASSERT_TRUE(h->next(&c, std::chrono::seconds(10)));
    for (auto& t : c.tokens) {
      text += t.text;
      toks.push_back(t.token);
    }
  } while (!c.finished);
  ASSERT_EQ(c.reason, FinishReason::Length);
  ASSERT_EQ(text.size(), 40u);
  const std::string stop = text.substr(10, 2);
  const size_t at = text.find(stop);
  Request r2 = r;
  r2.stop.stop_strings = {stop};
  r2.prompt_logprobs = true;
  auto h2 = eng->submit(r2);
  std::string text2;
  bool first = true;
  do {
    ASSERT_TRUE(h2->next(&c, std::chrono::seconds(10)));
    if (first) {
      EXPECT_EQ(c.prompt_logprobs.size(), 4u);
    }
    first = false;
    for (auto& t : c.tokens) text2 += t.text;
  } while (!c.finished);
  EXPECT_EQ(c.reason, FinishReason::Stop);
  EXPECT_EQ(c.stop_matched, stop);
  EXPECT_EQ(text2, text.substr(0, at));
  EXPECT_EQ(c.usage.completion_tokens, static_cast<int64_t>(at + 2));
}

// Requests that fork a cached prefix of a paged pool are charged only for the
// blocks they add: with room for the prefix once and a block or two per
// request, they all run at once; the pool never holds more than the budget.
TEST(Scheduler, SharedPrefixBlocksAreChargedOnce) {
  FakeModel model;  // one layer of 1x1 K/V in float32: 8 bytes a token, 128 a block
  EngineOptions opt;
  opt.kv = "paged";
  opt.max_concurrency = 8;
  opt.token_budget = 512;
  opt.prefill_chunk = 512;
  const int64_t kv_bytes_wanted = 16 * 128 + 8 * 2 * 128 + 64;  // the prefix + 2 blocks for each of 8
  opt.memory_budget_gb = 1;
  const int64_t fixed = static_cast<int64_t>(1ll << 30) - kv_budget_bytes(model, opt);
  opt.memory_budget_gb = static_cast<double>(fixed + kv_bytes_wanted) / static_cast<double>(1ll << 30);
  const int64_t kv_budget = kv_budget_bytes(model, opt);
  ASSERT_NEAR(static_cast<double>(kv_budget), kv_bytes_wanted, 16);

  auto eng = start_engine(model, opt, nullptr, {kEos});
  std::atomic<int64_t> most_rows{0}, over_budget{0};
  // After the warm-up the engine's first step waits until all eight requests
  // are queued, so whether they run together depends on admission alone.
  std::atomic<bool> hold{false}, queued{false};
  model.on_forward = [&](const BatchInput& in) {
    for (int w = 0; w < 5000 && hold && !queued; ++w) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    most_rows = std::max<int64_t>(most_rows.load(), static_cast<int64_t>(in.seqs.size()));
    if (eng->stats().kv_pool_used_bytes > static_cast<double>(kv_budget)) ++over_budget;
  };
  std::vector<int32_t> shared(256);
  for (size_t i = 0; i < shared.size(); ++i) shared[i] = static_cast<int32_t>(i % 30);
  auto request = [&](int32_t tail) {
    Request r;
    r.prompt = shared;
    for (int i = 0; i < 8; ++i) r.prompt.push_back(tail);
    r.stop.max_tokens = 8;
    r.stop.ignore_eos = true;
    return r;
  };
  // The first request publishes the 256-token prefix (16 blocks).
  {
    Live warm;
    warm.h = eng->submit(request(0));
    while (!warm.finished) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      drain(warm);
    }
  }
  std::vector<std::unique_ptr<Live>> all;
  hold = true;
  for (int32_t i = 1; i <= 8; ++i) {
    auto l = std::make_unique<Live>();
    l->h = eng->submit(request(i));
    all.push_back(std::move(l));
  }
  queued = true;
  for (auto& l : all)
    while (!l->finished) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      drain(*l);
    }
  for (auto& l : all) {
    EXPECT_EQ(l->reason, FinishReason::Length);
    EXPECT_EQ(l->usage.cached_prompt_tokens, 256);
  }
  // Charged in full (17 blocks each) at most one request would fit beside the prefix.
  EXPECT_GE(most_rows.load(), 6) << "requests sharing a cached prefix did not run together";
  EXPECT_EQ(over_budget.load(), 0);
}
