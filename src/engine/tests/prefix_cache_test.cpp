#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "engine/prefix_cache.h"
#include "ingot/engine.h"
#include "models/model.h"
#include "test_models.h"

using namespace ingot;
using namespace ingot::engine;

namespace {

// Counts the tokens a wrapped model actually computes.
class CountingModel final : public Model {
 public:
  explicit CountingModel(Model& m) : m_(m) {}
  const ModelConfig& config() const override { return m_.config(); }
  Tensor forward(const BatchInput& in) override {
    tokens += static_cast<int64_t>(in.tokens.size());
    return m_.forward(in);
  }
  std::vector<kv::LayerSpec> cache_layout() const override { return m_.cache_layout(); }
  DType kv_dtype() const override { return m_.kv_dtype(); }
  Device device() const override { return m_.device(); }
  size_t weight_bytes() const override { return m_.weight_bytes(); }
  int64_t tokens = 0;

 private:
  Model& m_;
};

std::unique_ptr<Model> prefix_model() {
  std::string dir = std::string(INGOT_BINARY_DIR) + "/test_data/engine_prefix_llama";
  ingot::testing::write_random_llama(dir, {});  // 64-token vocab, 2048 positions
  return load_model(dir);
}

// A fresh cache of `model` holding `ids`.
std::unique_ptr<kv::SequenceCache> prefilled(Model& model, const std::vector<int32_t>& ids) {
  auto c = new_cache(model);
  BatchInput in;
  in.add(c.get(), ids, false);
  model.forward(in);
  return c;
}

std::vector<int32_t> random_ids(size_t n, uint32_t seed, int32_t vocab) {
  std::mt19937 g(seed);
  std::vector<int32_t> v(n);
  for (auto& t : v) t = static_cast<int32_t>(g() % static_cast<uint32_t>(vocab));
  return v;
}

struct Result {
  std::vector<TokenEvent> tokens;
  Usage usage;
};

Result run(Engine& e, Request r) {
  auto h = e.submit(std::move(r));
  Result out;
  Chunk c;
  do {
    EXPECT_TRUE(h->next(&c, std::chrono::seconds(60)));
    for (auto& t : c.tokens) out.tokens.push_back(t);
  } while (!c.finished);
  out.usage = c.usage;
  return out;
}

}  // namespace

TEST(PrefixCache, ChainLookupForkAndEviction) {
  PrefixCache pc(42, 4);
  std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_EQ(pc.chain(a, 10).size(), 2u);
  EXPECT_EQ(pc.lookup(a, 10).tokens, 0);
  auto model = prefix_model();
  auto cache = new_cache(*model);
  BatchInput in;
  in.add(cache.get(), a, false);
  model->forward(in);
  pc.publish(a, 10, *cache, 100);
  EXPECT_EQ(pc.entries(), 1);
  EXPECT_EQ(pc.bytes(), 100);
  std::vector<int32_t> b = {1, 2, 3, 4, 5, 6, 0, 0, 0};
  auto hit = pc.lookup(b, 9);
  EXPECT_EQ(hit.tokens, 4);  // only the first full block matches
  auto forked = pc.fork(hit);
  EXPECT_EQ(forked->offset(), 4);
  EXPECT_EQ(cache->offset(), 10);  // the source is untouched
  // Another fingerprint never matches.
  PrefixCache other(43, 4);
  EXPECT_NE(other.chain(a, 10)[0], pc.chain(a, 10)[0]);
  EXPECT_TRUE(pc.evict_one());
  EXPECT_EQ(pc.entries(), 0);
  EXPECT_EQ(pc.lookup(a, 10).tokens, 0);
}

TEST(PrefixCache, EvictingANewerEntryKeepsSharedBlocksOfAnOlderOne) {
  auto model = prefix_model();
  PrefixCache pc(7, 4);
  std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8}, b = {1, 2, 3, 4, 9, 9, 9, 9}, q = {1, 2, 3, 4, 0, 0};
  pc.publish(a, 8, *prefilled(*model, a), 1);
  pc.publish(b, 8, *prefilled(*model, b), 1);  // now the shared first block points at b's entry
  const auto hit_a = pc.lookup(a, 8);
  ASSERT_EQ(hit_a.tokens, 8);
  ASSERT_TRUE(pc.evict_one(hit_a.entry));  // evicts b
  EXPECT_EQ(pc.lookup(b, 8).tokens, 4);    // b's own blocks are gone, the shared one is a's
  const auto hit_q = pc.lookup(q, 5);
  EXPECT_EQ(hit_q.tokens, 4);
  EXPECT_EQ(hit_q.entry, hit_a.entry);
}

TEST(PrefixCache, SharedLongPrefixIsReusedWithIdenticalLogits) {
  auto base = prefix_model();
  const int32_t V = static_cast<int32_t>(base->vocab_size());
  auto prefix = random_ids(1024, 5, V);
  Request r1;
  r1.prompt = prefix;
  auto tail1 = random_ids(30, 6, V);
  r1.prompt.insert(r1.prompt.end(), tail1.begin(), tail1.end());
  r1.stop.max_tokens = 3;
  r1.stop.ignore_eos = true;
  r1.sampling.temperature = 0;
  Request r2 = r1;
  r2.prompt = prefix;
  auto tail2 = random_ids(21, 7, V);
  r2.prompt.insert(r2.prompt.end(), tail2.begin(), tail2.end());
  r2.stop.max_tokens = 5;
  r2.sampling.logprobs = true;
  r2.sampling.top_logprobs = 20;

  Result warm, cold;
  int64_t computed_warm = 0;
  {
    CountingModel m(*base);
    EngineOptions opt;
    opt.kv = "contiguous";
    auto e = start_engine(m, opt, nullptr, {});
    run(*e, r1);
    m.tokens = 0;
    warm = run(*e, r2);
    computed_warm = m.tokens;
    EXPECT_EQ(e->stats().prefix_hit_tokens, 1024);
  }
  {
    CountingModel m(*base);
    EngineOptions opt;
    opt.kv = "contiguous";
    opt.prefix_cache = false;
    auto e = start_engine(m, opt, nullptr, {});
    cold = run(*e, r2);
    EXPECT_EQ(m.tokens, 1045 + 4);
  }
  EXPECT_EQ(warm.usage.cached_prompt_tokens, 1024);
  EXPECT_EQ(cold.usage.cached_prompt_tokens, 0);
  // Prefill computed only the 21 new prompt tokens, then 4 decode rows.
  EXPECT_EQ(computed_warm, 21 + 4);
  ASSERT_EQ(warm.tokens.size(), cold.tokens.size());
  for (size_t i = 0; i < warm.tokens.size(); ++i) {
    EXPECT_EQ(warm.tokens[i].token, cold.tokens[i].token);
    EXPECT_EQ(warm.tokens[i].logprob, cold.tokens[i].logprob);
    ASSERT_EQ(warm.tokens[i].top.size(), 20u);
    for (size_t k = 0; k < 20; ++k) {
      EXPECT_EQ(warm.tokens[i].top[k].token, cold.tokens[i].top[k].token);
      EXPECT_EQ(warm.tokens[i].top[k].logprob, cold.tokens[i].top[k].logprob);
    }
  }
}

TEST(PrefixCache, ForkedPrefixGivesBitIdenticalLogitRows) {
  auto model = prefix_model();
  const int32_t V = static_cast<int32_t>(model->vocab_size());
  auto a = random_ids(1040, 8, V);
  auto b = a;
  b.resize(1024);
  auto t = random_ids(17, 9, V);
  b.insert(b.end(), t.begin(), t.end());
  auto prefill = [&](kv::SequenceCache& c, const std::vector<int32_t>& ids, size_t from) {
    Tensor last;
    for (size_t s = from; s < ids.size(); s += 512) {
      BatchInput in;
      const size_t e = std::min(ids.size(), s + 512);
      in.add(&c, std::span(ids).subspan(s, e - s), true);
      last = model->forward(in);
    }
    return last.to_f32_vector();
  };
  auto ca = new_cache(*model);
  prefill(*ca, a, 0);
  PrefixCache pc(1);
  pc.publish(a, 1040, *ca, 1);
  auto hit = pc.lookup(b, static_cast<int64_t>(b.size()) - 1);
  ASSERT_EQ(hit.tokens, 1024);
  auto warm_cache = pc.fork(hit);
  auto warm = prefill(*warm_cache, b, 1024);
  auto cold_cache = new_cache(*model);
  auto cold_all = prefill(*cold_cache, b, 0);
  // The cold run's final chunk covers positions 1024.. exactly as the warm one.
  ASSERT_EQ(warm.size(), cold_all.size());
  EXPECT_EQ(warm, cold_all);
}

// Exact mode (models with recurrent layers): an entry is found only by its
// whole length, so a fork never has to trim; the default mode also finds
// every shorter block prefix of it.
TEST(PrefixCacheExact, EntriesAreFoundOnlyWhole) {
  auto model = prefix_model();
  const auto ids = random_ids(40, 9, 64);
  auto cache = new_cache(*model);
  BatchInput in;
  in.add(cache.get(), std::span(ids).first(32));
  model->forward(in);
  auto other = ids;  // shares only the first block
  for (size_t i = 20; i < other.size(); ++i) other[i] = (other[i] + 1) % 64;
  for (bool exact : {false, true}) {
    PrefixCache pc(1, 16, exact);
    pc.publish(ids, 32, *cache, 1);
    auto hit = pc.lookup(ids, 39);
    EXPECT_EQ(hit.tokens, 32) << exact;
    EXPECT_EQ(pc.fork(hit)->offset(), 32);
    EXPECT_EQ(pc.lookup(other, 39).tokens, exact ? 0 : 16) << exact;
  }
}

TEST(PrefixCache, ScopesNeverShareEntries) {
  // A prefix published under one LoRA adapter's scope is invisible under the
  // base model's (0) and any other adapter's, for the same tokens.
  PrefixCache pc(42, 4);
  std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  auto model = prefix_model();
  auto cache = prefilled(*model, a);
  pc.publish(a, 9, *cache, 100, /*scope=*/7);
  EXPECT_EQ(pc.lookup(a, 9, 7).tokens, 8);
  EXPECT_EQ(pc.lookup(a, 9).tokens, 0);
  EXPECT_EQ(pc.lookup(a, 9, 8).tokens, 0);
  EXPECT_TRUE(pc.contains_chain(a, 8, 7));
  EXPECT_FALSE(pc.contains_chain(a, 8, 0));
  EXPECT_NE(pc.chain(a, 8, 7)[0], pc.chain(a, 8, 0)[0]);
  // The base model publishes its own entry beside it.
  pc.publish(a, 9, *cache, 100);
  EXPECT_EQ(pc.entries(), 2);
  EXPECT_EQ(pc.lookup(a, 9).tokens, 8);
  // A pin under one scope leaves the other scope's entry unpinned.
  pc.pin(a, 8, PrefixCache::Clock::now() + std::chrono::hours(1), 7);
  EXPECT_TRUE(pc.evict_one());
  EXPECT_EQ(pc.lookup(a, 9).tokens, 0);
  EXPECT_EQ(pc.lookup(a, 9, 7).tokens, 8);
}

TEST(PrefixCache, PinnedEntriesAreEvictedLast) {
  auto model = prefix_model();
  PrefixCache pc(9, 4);
  std::vector<int32_t> a = {1, 2, 3, 4}, b = {5, 6, 7, 8}, c = {9, 10, 11, 12};
  pc.publish(a, 4, *prefilled(*model, a), 1);  // the least recently used, but pinned
  pc.publish(b, 4, *prefilled(*model, b), 1);
  pc.publish(c, 4, *prefilled(*model, c), 1);
  pc.pin(a, 4, PrefixCache::Clock::now() + std::chrono::hours(1));
  pc.pin(b, 4, PrefixCache::Clock::now() - std::chrono::seconds(1));  // expired: no preference
  ASSERT_TRUE(pc.evict_one());
  EXPECT_EQ(pc.lookup(b, 4).tokens, 0) << "the oldest unpinned entry goes first";
  ASSERT_TRUE(pc.evict_one());
  EXPECT_EQ(pc.lookup(c, 4).tokens, 0);
  EXPECT_EQ(pc.lookup(a, 4).tokens, 4);
  ASSERT_TRUE(pc.evict_one()) << "memory wins over a pin when nothing else is left";
  EXPECT_EQ(pc.entries(), 0);
}
