// Tensor parallelism on the host collective: TP=2 and TP=4 (KV heads
// replicated) give the logits of the whole model on the dense goldens, for a
// prefill, decode steps, a batch of two sequences and a paged cache.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "models/model.h"
#include "ops/ops.h"
#include "parallel/tp_model.h"
#include "util/error.h"

using namespace ingot;

namespace {

std::string golden(const std::string& name) { return std::string(INGOT_SHARED_DIR) + "/goldens/" + name; }

double rel(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * double(a[i] - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / (den + 1e-30));
}

int32_t argmax(const std::vector<float>& v) {
  return int32_t(std::max_element(v.begin(), v.end()) - v.begin());
}

// Prefill of `ids`, then `steps` greedy tokens; every logits row.
std::vector<std::vector<float>> run_greedy(Model& m, const std::vector<int32_t>& ids, int steps,
                                           const CacheOptions& co = {}) {
  auto cache = new_cache(m, co);
  std::vector<std::vector<float>> rows;
  rows.push_back(m.forward(BatchInput::of(cache.get(), ids, false)).to_f32_vector());
  for (int s = 0; s < steps; ++s) {
    int32_t next = argmax(rows.back());
    rows.push_back(m.forward(BatchInput::of(cache.get(), std::vector<int32_t>{next}, false)).to_f32_vector());
  }
  return rows;
}

}  // namespace

struct TpCase {
  std::string golden;
  int ranks;
};

class TensorParallelGolden : public ::testing::TestWithParam<TpCase> {};

TEST_P(TensorParallelGolden, MatchesTheWholeModel) {
  const auto& [name, ranks] = GetParam();
  ASSERT_TRUE(std::filesystem::exists(golden(name))) << "missing golden " << name;
  auto whole = load_model(golden(name));
  auto split = parallel::load_tensor_parallel(golden(name), {}, ranks);
  EXPECT_EQ(split->vocab_size(), whole->vocab_size());
  std::vector<int32_t> ids = {5, 17, 301, 44, 9, 250, 77, 128, 3};
  auto want = run_greedy(*whole, ids, 6);
  auto got = run_greedy(*split, ids, 6);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_LT(rel(got[i], want[i]), 1e-5) << "row " << i;
    EXPECT_EQ(argmax(got[i]), argmax(want[i])) << "row " << i;
  }
  // The paged store gives the same numbers across ranks too.
  CacheOptions paged;
  paged.kind = "paged";
  auto got_paged = run_greedy(*split, ids, 2, paged);
  for (size_t i = 0; i < got_paged.size(); ++i) EXPECT_EQ(got_paged[i], got[i]) << "paged row " << i;
}

INSTANTIATE_TEST_SUITE_P(Dense, TensorParallelGolden,
                         ::testing::Values(TpCase{"llama-float32", 2}, TpCase{"llama-float32", 4},
                                           TpCase{"qwen2-float32", 2}, TpCase{"qwen2-float32", 4},
                                           TpCase{"qwen3-float32", 2}, TpCase{"llama3-rope-float32", 4},
                                           TpCase{"qwen3_moe-float32", 2}, TpCase{"qwen3_moe-float32", 4}),
                         [](const auto& info) {
                           std::string n = info.param.golden + "_tp" + std::to_string(info.param.ranks);
                           for (char& c : n)
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

TEST(TensorParallel, ConvertsEachRanksSliceToTheRequestedDtype) {
  LoadOptions bf16;
  bf16.dtype = DType::BF16;
  auto whole = load_model(golden("qwen2-float32"), bf16);
  auto split = parallel::load_tensor_parallel(golden("qwen2-float32"), bf16, 2);
  EXPECT_LT(split->weight_bytes(), 2 * whole->weight_bytes()) << "ranks hold bf16 slices";
  std::vector<int32_t> ids = {5, 17, 301, 44, 9, 250};
  auto want = run_greedy(*whole, ids, 3);
  auto got = run_greedy(*split, ids, 3);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_LT(rel(got[i], want[i]), 1e-5) << "row " << i;
  auto f32 = parallel::load_tensor_parallel(golden("qwen2-float32"), {}, 2);
  EXPECT_GT(rel(run_greedy(*f32, ids, 0)[0], want[0]), 1e-4) << "the bf16 load really rounded the weights";
}

TEST(TensorParallel, BatchedSequencesAndTrimAndClone) {
  auto whole = load_model(golden("qwen2-float32"));
  auto split = parallel::load_tensor_parallel(golden("qwen2-float32"), {}, 2);
  std::vector<int32_t> a = {5, 17, 301, 44, 9}, b = {250, 77, 128};
  auto wa = new_cache(*whole), wb = new_cache(*whole);
  auto sa = new_cache(*split), sb = new_cache(*split);
  BatchInput wboth, sboth;
  wboth.add(wa.get(), a, true);
  wboth.add(wb.get(), b, true);
  sboth.add(sa.get(), a, true);
  sboth.add(sb.get(), b, true);
  Tensor w = whole->forward(wboth);
  Tensor s = split->forward(sboth);
  EXPECT_LT(rel(s.to_f32_vector(), w.to_f32_vector()), 1e-5);
  // trim and clone reach every rank's cache: rewinding one token and replaying it is exact.
  auto fork = sa->clone();
  sa->trim(1);
  EXPECT_EQ(sa->offset(), 4);
  Tensor again = split->forward(BatchInput::of(sa.get(), std::vector<int32_t>{9}, false));
  Tensor from_fork = split->forward(BatchInput::of(fork.get(), std::vector<int32_t>{7}, false));
  Tensor whole_next = whole->forward(BatchInput::of(wa.get(), std::vector<int32_t>{7}, false));
  EXPECT_LT(rel(again.to_f32_vector(), s.slice(0, 4, 5).to_f32_vector()), 1e-6);
  EXPECT_LT(rel(from_fork.to_f32_vector(), whole_next.to_f32_vector()), 1e-5);
}

TEST(TensorParallel, RefusesWhatItCannotSplit) {
  auto message = [](const std::string& g, int n, LoadOptions o = {}) {
    try {
      parallel::load_tensor_parallel(golden(g), o, n);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("loaded");
  };
  EXPECT_NE(message("llama-float32", 3).find("num_attention_heads"), std::string::npos);
  EXPECT_NE(message("gemma3-float32", 2).find("not supported"), std::string::npos);
  LoadOptions cuda;
  cuda.device = Device::CUDA;
  EXPECT_NE(message("llama-float32", 2, cuda).find("--device cpu"), std::string::npos);
}
