// Cache and batching invariants of the newer families, on the shared golden
// checkpoints (small random-weight models of the real architectures):
// incremental decode equals a full recompute, a mixed-length batch equals
// each sequence alone, snapshots (clone) of hybrid caches continue exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "kv/linear_state.h"
#include "models/model.h"
#include "util/error.h"

using namespace ingot;

namespace {

const char* kFamilies[] = {"llama", "gemma2", "gemma3", "gemma4", "qwen3_moe", "qwen3_next", "qwen3_5"};

std::string golden_dir(const std::string& fam) {
  std::string d = std::string(INGOT_SHARED_DIR) + "/goldens/" + fam + "-float32";
  if (!std::filesystem::exists(d + "/config.json")) ADD_FAILURE() << "missing golden " << d;
  return d;
}

// Deterministic ids in [1, vocab).
std::vector<int32_t> ids(int n, int seed, int64_t vocab) {
  std::vector<int32_t> v;
  uint32_t s = 2654435761u * static_cast<uint32_t>(seed + 1);
  for (int i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    v.push_back(static_cast<int32_t>(1 + (s >> 8) % static_cast<uint32_t>(vocab - 1)));
  }
  return v;
}

Tensor run(Model& m, kv::SequenceCache& c, const std::vector<int32_t>& toks, bool all) {
  BatchInput in;
  in.add(&c, toks, all);
  return m.forward(in);
}

double row_rel(const Tensor& a, int64_t ra, const Tensor& b, int64_t rb) {
  const int64_t v = a.dim(1);
  const float* pa = a.data<float>() + ra * v;
  const float* pb = b.data<float>() + rb * v;
  double num = 0, den = 0;
  for (int64_t j = 0; j < v; ++j) {
    num += double(pa[j] - pb[j]) * double(pa[j] - pb[j]);
    den += double(pb[j]) * double(pb[j]);
  }
  return std::sqrt(num / den);
}

class Family : public ::testing::TestWithParam<const char*> {};

// 80 tokens cross a DeltaNet chunk boundary (64) and the sliding windows (8):
// one prefill over all of them (chunked form) must match a short prefill
// followed by token-by-token decode (recurrent form, cache growth).
TEST_P(Family, IncrementalDecodeEqualsFullRecompute) {
  auto model = load_model(golden_dir(GetParam()));
  auto toks = ids(80, 7, model->vocab_size());
  auto full_cache = new_cache(*model);
  Tensor full = run(*model, *full_cache, toks, true);
  ASSERT_EQ(full.dim(0), 80);
  auto cache = new_cache(*model);
  Tensor pre = run(*model, *cache, {toks.begin(), toks.begin() + 5}, true);
  for (int64_t i = 0; i < 5; ++i) EXPECT_LT(row_rel(pre, i, full, i), 2e-5) << "prefill row " << i;
  for (int64_t i = 5; i < 80; ++i) {
    Tensor step = run(*model, *cache, {toks[static_cast<size_t>(i)]}, false);
    ASSERT_EQ(step.dim(0), 1);
    EXPECT_LT(row_rel(step, 0, full, i), 2e-5) << "position " << i;
  }
  EXPECT_EQ(cache->offset(), 80);
}

// Three sequences of different lengths in one forward (prefill), then one
// batched decode step: each row equals the sequence run alone.
TEST_P(Family, MixedLengthBatchEqualsEachAlone) {
  auto model = load_model(golden_dir(GetParam()));
  const int lens[] = {3, 17, 70};
  std::vector<std::vector<int32_t>> seqs;
  std::vector<std::unique_ptr<kv::SequenceCache>> caches, alone_caches;
  std::vector<Tensor> alone_prefill, alone_step;
  for (int s = 0; s < 3; ++s) {
    seqs.push_back(ids(lens[s], 100 + s, model->vocab_size()));
    alone_caches.push_back(new_cache(*model));
    alone_prefill.push_back(run(*model, *alone_caches.back(), seqs.back(), true));
    alone_step.push_back(run(*model, *alone_caches.back(), {static_cast<int32_t>(11 + s)}, false));
    caches.push_back(new_cache(*model));
  }
  BatchInput in;
  for (int s = 0; s < 3; ++s) {
    in.add(caches[static_cast<size_t>(s)].get(), seqs[static_cast<size_t>(s)], true);
  }
  Tensor batch = model->forward(in);
  ASSERT_EQ(batch.dim(0), 3 + 17 + 70);
  int64_t row = 0;
  for (int s = 0; s < 3; ++s)
    for (int i = 0; i < lens[s]; ++i, ++row)
      EXPECT_LT(row_rel(batch, row, alone_prefill[static_cast<size_t>(s)], i), 1e-6) << "seq " << s << " row " << i;
  BatchInput step;
  for (int s = 0; s < 3; ++s) {
    step.add(caches[static_cast<size_t>(s)].get(), std::vector<int32_t>{11 + s}, false);
  }
  Tensor out = model->forward(step);
  ASSERT_EQ(out.dim(0), 3);
  for (int s = 0; s < 3; ++s) EXPECT_LT(row_rel(out, s, alone_step[static_cast<size_t>(s)], 0), 1e-6) << "seq " << s;
}

// A clone taken mid-sequence continues exactly like the original, and
// writing to one never shows in the other.
TEST_P(Family, CloneContinuesIndependently) {
  auto model = load_model(golden_dir(GetParam()));
  auto toks = ids(20, 3, model->vocab_size());
  auto cache = new_cache(*model);
  run(*model, *cache, toks, false);
  auto snap = cache->clone();
  Tensor a = run(*model, *cache, {5}, false);
  run(*model, *cache, {9, 9, 9}, false);  // diverge the original
  Tensor b = run(*model, *snap, {5}, false);
  EXPECT_LT(row_rel(b, 0, a, 0), 1e-7);
}

// Positions arrive in the batch: add() numbers a sequence's tokens from where
// its cache stands, and a batch without a position for every token is refused.
TEST_P(Family, PositionsArriveInTheBatch) {
  auto model = load_model(golden_dir(GetParam()));
  auto cache = new_cache(*model);
  run(*model, *cache, ids(5, 1, model->vocab_size()), false);
  BatchInput step;
  step.add(cache.get(), std::vector<int32_t>{7, 8});
  EXPECT_EQ(step.positions, (std::vector<int32_t>{5, 6}));
  BatchInput bare;
  bare.tokens = {7};
  bare.seqs.push_back({cache.get(), 1, false});
  EXPECT_THROW(model->forward(bare), Error);
  EXPECT_EQ(cache->offset(), 5);  // nothing written by the refused batch
}

INSTANTIATE_TEST_SUITE_P(Goldens, Family, ::testing::ValuesIn(kFamilies),
                         [](const auto& info) { return std::string(info.param); });

TEST(LinearState, HybridLayoutAndRewind) {
  auto model = load_model(golden_dir("qwen3_5"));
  auto layout = model->cache_layout();
  ASSERT_EQ(layout.size(), 4u);
  EXPECT_EQ(layout[0].kind, kv::LayerKind::LinearState);
  EXPECT_EQ(layout[3].kind, kv::LayerKind::Attention);
  EXPECT_EQ(layout[0].conv_channels, 2 * 2 * 16 + 4 * 16);
  auto cache = new_cache(*model);
  run(*model, *cache, ids(6, 1, model->vocab_size()), false);
  kv::LinearState* st = cache->layer(0).linear_state();
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(st->tokens(), 6);
  EXPECT_EQ(cache->layer(3).linear_state(), nullptr);
  EXPECT_THROW(cache->trim(1), Error);  // a recurrent state cannot be rewound
  // restore() from a snapshot's tensors brings the state back.
  auto snap = cache->clone();
  Tensor a = run(*model, *snap, {42}, false);
  auto fresh = cache->clone();
  for (int l = 0; l < 3; ++l) {
    kv::LinearState* src = cache->layer(l).linear_state();
    fresh->layer(l).linear_state()->restore(src->conv_state(), src->ssm_state(), src->tokens());
  }
  Tensor b = run(*model, *fresh, {42}, false);
  EXPECT_LT(row_rel(b, 0, a, 0), 1e-7);
}

TEST(Gemma4, SharedLayersOwnNoCache) {
  auto model = load_model(golden_dir("gemma4"));
  auto layout = model->cache_layout();
  ASSERT_EQ(layout.size(), 3u);  // 4 layers, the last shares layer 2's K/V
  EXPECT_EQ(layout[0].head_dim, 16);
  EXPECT_EQ(layout[0].window, 8);
  EXPECT_EQ(layout[2].head_dim, 32);
  EXPECT_EQ(layout[2].window, 0);
}

}  // namespace
