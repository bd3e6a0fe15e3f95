// Stores under a real model (the llama golden): paged equals contiguous bit
// for bit, and rows of different lengths decoding together (with extract,
// filter and merge in the middle) give each sequence its solo logits.
#include <gtest/gtest.h>

#include <filesystem>

#include "kv/kinds.h"
#include "kv/rows.h"
#include "models/model.h"
#include "ops/ops.h"
#include "test_util.h"

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
  in.tokens = toks;
  in.seqs.push_back({&c, static_cast<int64_t>(toks.size()), all});
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
      in.tokens.insert(in.tokens.end(), t.begin(), t.end());
      in.seqs.push_back({&r.row(i), static_cast<int64_t>(t.size()), false});
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
      EXPECT_EQ(pool->used_blocks(), [&] {
        int64_t n = 0;
        for (auto* c : rows.caches()) n += 2 * ((c->offset() + 15) / 16);
        for (auto* c : side.caches()) n += 2 * ((c->offset() + 15) / 16);
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
                                           std::pair<const char*, double>{"qwen2-bfloat16", 3e-2}));
