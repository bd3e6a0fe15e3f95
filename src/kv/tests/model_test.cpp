// Stores under real models (the goldens): paged equals contiguous bit for
// bit, rows of different lengths decoding together (with extract, filter and
// merge in the middle) give each sequence its solo logits in every family,
// and hybrid models' snapshots carry their recurrent state.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "kv/kinds.h"
#include "kv/linear_state.h"
#include "kv/paged.h"
#include "kv/snapshot.h"
#include "kv/rows.h"
#include "models/model.h"
#include "ops/ops.h"
#include "test_util.h"
#include "util/error.h"

using namespace ingot;
using namespace ingot::kv;
using namespace ingot::kv::testing;

namespace {

std::string golden(const std::string& name) {
  std::string dir = std::string(INGOT_SHARED_DIR) + "/goldens/" + name;
  EXPECT_TRUE(std::filesystem::exists(dir + "/config.json")) << "missing golden " << dir;
  return dir;
}

std::vector<int32_t> prompt(int64_t n, int64_t seed, int64_t vocab) {
  std::vector<int32_t> p;
  for (int64_t i = 0; i < n; ++i) p.push_back(static_cast<int32_t>((i * 37 + seed * 101 + 5) % vocab));
  return p;
}

Tensor run(Model& m, SequenceCache& c, const std::vector<int32_t>& toks, bool all = false) {
  BatchInput in;
  in.add(&c, toks, all);
  return m.forward(in);
}

}  // namespace

TEST(ModelCache, PagedLogitsAreBitIdenticalToContiguous) {
  for (const char* g : {"llama-float32", "llama-bfloat16", "qwen3-float32"}) {
    auto model = load_model(golden(g));
    auto ctg = new_cache(*model, {"contiguous", {}});
    CacheOptions po;
    po.kind = "paged";
    auto paged = new_cache(*model, po);
    auto p = prompt(23, 1, model->vocab_size());
    Tensor a = run(*model, *ctg, p, true), b = run(*model, *paged, p, true);
    ASSERT_TRUE(same_bytes(a, b)) << g;
    for (int i = 0; i < 20; ++i) {
      int32_t tok = ops::argmax(a.slice(0, a.dim(0) - 1, a.dim(0))).to_i32_vector()[0];
      a = run(*model, *ctg, {tok});
      b = run(*model, *paged, {tok});
      ASSERT_TRUE(same_bytes(a, b)) << g << " step " << i;
    }
  }
}

class RowsDecode : public ::testing::TestWithParam<std::pair<const char*, double>> {};

TEST_P(RowsDecode, RowsOfDifferentLengthsDecodeLikeEachAlone) {
  auto model = load_model(golden(GetParam().first));
  const double tol = GetParam().second;
  const int64_t V = model->vocab_size();
  const int n_rows = 5, steps = 10;
  std::vector<std::vector<int32_t>> prompts;
  for (int b = 0; b < n_rows; ++b) prompts.push_back(prompt(3 + 7 * b, b, V));

  // Alone: each sequence with its own contiguous cache, greedy.
  std::vector<std::vector<Tensor>> solo(n_rows);
  std::vector<std::vector<int32_t>> toks(n_rows);
  for (int b = 0; b < n_rows; ++b) {
    auto c = new_cache(*model);
    Tensor l = run(*model, *c, prompts[b]);
    for (int s = 0; s < steps; ++s) {
      solo[b].push_back(l);
      toks[b].push_back(ops::argmax(l).to_i32_vector()[0]);
      l = run(*model, *c, {toks[b].back()});
    }
  }

  // Together: paged rows over one shared pool, packed prefill of all prompts.
  auto pool = Pool::create(model->cache_layout(), model->kv_dtype(), model->device(), pool_options_for("paged"));
  Rows rows;
  std::vector<int> ids;  // which sequence each row is
  for (int b = 0; b < n_rows; ++b) {
    rows.push(pool->new_sequence());
    ids.push_back(b);
  }
  auto step_rows = [&](Rows& r, const std::vector<int>& who, int s, bool prefill) {
    BatchInput in;
    for (size_t i = 0; i < r.size(); ++i) {
      const auto& t = prefill ? prompts[static_cast<size_t>(who[i])] : std::vector<int32_t>{toks[who[i]][s - 1]};
      in.add(&r.row(i), t, false);
    }
    Tensor l = model->forward(in);
    for (size_t i = 0; i < r.size(); ++i)
      EXPECT_LE(rel(l.slice(0, i, i + 1), solo[who[i]][s]), tol) << "seq " << who[i] << " step " << s;
  };
  step_rows(rows, ids, 0, true);
  std::vector<int64_t> off = rows.offsets();
  for (int b = 0; b < n_rows; ++b) EXPECT_EQ(off[b], static_cast<int64_t>(prompts[b].size()));
  Rows side;
  std::vector<int> side_ids;
  for (int s = 1; s < steps; ++s) {
    if (s == 3) {  // sequence 1 leaves the batch and decodes alone for a while
      side.push(rows.extract(1));
      side_ids.push_back(ids[1]);
      ids.erase(ids.begin() + 1);
    }
    if (s == 5) {  // sequence 4 (now row 3) finishes; keep the rest in reverse order
      rows.filter({2, 1, 0});
      ids = {ids[2], ids[1], ids[0]};
      int64_t paged_layers = 0;  // window and recurrent layers keep their own stores
      for (int l = 0; l < pool->num_layers(); ++l) paged_layers += pool->layer(l) != nullptr;
      EXPECT_EQ(pool->used_blocks(), [&] {
        int64_t n = 0;
        for (auto* c : rows.caches()) n += paged_layers * ((c->offset() + 15) / 16);
        for (auto* c : side.caches()) n += paged_layers * ((c->offset() + 15) / 16);
        return n;
      }()) << "the filtered row's blocks went back to the pool";
    }
    if (s == 7) {  // sequence 1 rejoins
      rows.merge(std::move(side));
      ids.insert(ids.end(), side_ids.begin(), side_ids.end());
      EXPECT_TRUE(side.empty());
    }
    step_rows(rows, ids, s, false);
    if (!side.empty()) step_rows(side, side_ids, s, false);
  }
  EXPECT_EQ(rows.size(), 4u);
}

// float32: PARITY.md's batching bar 1e-6; bfloat16: its bf16 tolerance.
INSTANTIATE_TEST_SUITE_P(Goldens, RowsDecode,
                         ::testing::Values(std::pair<const char*, double>{"llama-float32", 1e-6},
                                           std::pair<const char*, double>{"qwen2-bfloat16", 3e-2},
                                           std::pair<const char*, double>{"gemma2-float32", 1e-6},
                                           std::pair<const char*, double>{"gemma3-float32", 1e-6},
                                           std::pair<const char*, double>{"gemma4-float32", 1e-6},
                                           std::pair<const char*, double>{"qwen3_moe-float32", 1e-6},
                                           std::pair<const char*, double>{"qwen3_next-float32", 1e-6},
                                           std::pair<const char*, double>{"qwen3_5-float32", 1e-6},
                                           std::pair<const char*, double>{"qwen3_5-bfloat16", 3e-2}));

// A step that carries prefill chunks and draft rows beside its decode rows
// keeps the decode rows in one batched job (kv::append_attend_batch); every
// sequence's rows must still be its solo rows, in every family.
class MixedStep : public ::testing::TestWithParam<std::pair<const char*, double>> {};

TEST_P(MixedStep, DecodeRowsBesidePrefillChunksAndDraftsMatchEachAlone) {
  auto model = load_model(golden(GetParam().first));
  const double tol = GetParam().second;
  const int64_t V = model->vocab_size();
  // Rows each sequence brings to the step: decode rows in runs split by a
  // prefill chunk (5) and a draft being verified (2).
  const std::vector<int64_t> n_new = {1, 1, 5, 1, 1, 1, 2, 1};
  auto pool = Pool::create(model->cache_layout(), model->kv_dtype(), model->device(), pool_options_for("paged"));
  CacheOptions paged;
  paged.kind = "paged";
  std::vector<std::unique_ptr<SequenceCache>> together, alone;
  std::vector<std::vector<int32_t>> extra;
  std::vector<Tensor> solo;
  for (size_t i = 0; i < n_new.size(); ++i) {
    const auto p = prompt(4 + 3 * static_cast<int64_t>(i), static_cast<int64_t>(i), V);
    extra.push_back(prompt(n_new[i], 50 + static_cast<int64_t>(i), V));
    together.push_back(pool->new_sequence());
    alone.push_back(new_cache(*model, paged));
    run(*model, *together.back(), p);
    run(*model, *alone.back(), p);
    solo.push_back(run(*model, *alone.back(), extra.back(), true));
  }
  BatchInput in;
  for (size_t i = 0; i < n_new.size(); ++i) {
    in.add(together[i].get(), extra[i], true);
  }
  Tensor l = model->forward(in);
  ASSERT_EQ(l.dim(0), static_cast<int64_t>(in.tokens.size()));
  int64_t row = 0;
  for (size_t i = 0; i < n_new.size(); ++i) {
    EXPECT_LE(rel(l.slice(0, row, row + n_new[i]), solo[i]), tol) << "sequence " << i;
    EXPECT_EQ(together[i]->offset(), alone[i]->offset()) << "sequence " << i;
    row += n_new[i];
  }
}

INSTANTIATE_TEST_SUITE_P(Goldens, MixedStep,
                         ::testing::Values(std::pair<const char*, double>{"llama-float32", 1e-6},
                                           std::pair<const char*, double>{"qwen2-bfloat16", 3e-2},
                                           std::pair<const char*, double>{"gemma3-float32", 1e-6},
                                           std::pair<const char*, double>{"qwen3_moe-float32", 1e-6},
                                           std::pair<const char*, double>{"qwen3_next-float32", 1e-6}));

// A hybrid model's snapshot carries its recurrent (gated DeltaNet) state with
// the attention layers' blocks: restored into the same pool, decoding goes on
// bit for bit as in the original sequence, for every paged scheme.
TEST(ModelCache, HybridSnapshotRoundTripIsBitExact) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("ingot-hybrid-snap-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const char* g : {"qwen3_next-float32", "qwen3_5-bfloat16"}) {
    auto model = load_model(golden(g));
    for (const char* kind : {"paged", "kv8"}) {
      auto pool = Pool::create(model->cache_layout(), model->kv_dtype(), Device::CPU, pool_options_for(kind));
      auto seq = pool->new_sequence();
      auto p = prompt(37, 4, model->vocab_size());
      run(*model, *seq, p);
      publish(*seq);
      SnapshotKey key{g, "tok", pool->scheme()};
      const std::string file = (dir / (std::string(g) + "-" + kind + ".ikv")).string();
      write_snapshot(file, *seq, p, key);
      std::vector<int32_t> back_ids;
      auto back = restore_snapshot(file, *pool, key, &back_ids);
      ASSERT_EQ(back_ids, p);
      ASSERT_EQ(back->offset(), 37);
      for (int l = 0; l < seq->num_layers(); ++l) {
        LinearState* a = seq->layer(l).linear_state();
        LinearState* b = back->layer(l).linear_state();
        ASSERT_EQ(a == nullptr, b == nullptr) << g << " layer " << l;
        if (!a) continue;
        EXPECT_EQ(b->tokens(), 37);
        EXPECT_TRUE(same_bytes(a->conv_state(), b->conv_state())) << g << " layer " << l;
        EXPECT_TRUE(same_bytes(a->ssm_state(), b->ssm_state())) << g << " layer " << l;
      }
      int32_t tok = 7;
      for (int i = 0; i < 12; ++i) {
        Tensor x = run(*model, *seq, {tok}), y = run(*model, *back, {tok});
        ASSERT_TRUE(same_bytes(x, y)) << g << " " << kind << " step " << i;
        tok = ops::argmax(x).to_i32_vector()[0];
      }
      // A recurrent state holds exactly its tokens: a shorter prefix is refused.
      EXPECT_THROW(write_snapshot(file + ".short", *seq, std::vector<int32_t>(p.begin(), p.begin() + 32), key),
                   Error);
    }
  }
  fs::remove_all(dir);
}
