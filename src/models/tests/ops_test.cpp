// The new ops against independent formulations: the chunked gated delta
// rule against the token-by-token recurrence, the grouped MoE path against
// a per-token loop, the causal conv's carried state against one long call.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "models/moe.h"
#include "models/weights.h"
#include "ops/ops.h"
#include "util/error.h"

using namespace ingot;

namespace {

Tensor randn(std::vector<int64_t> shape, std::mt19937& g, float scale = 1.0f) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = nd(g);
  return Tensor::from_f32(v, Shape(shape));
}

double rel(const Tensor& a, const Tensor& b) {
  auto va = a.to_f32_vector(), vb = b.to_f32_vector();
  EXPECT_EQ(va.size(), vb.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < va.size(); ++i) {
    num += double(va[i] - vb[i]) * double(va[i] - vb[i]);
    den += double(vb[i]) * double(vb[i]);
  }
  return std::sqrt(num / den);
}

TEST(GatedDeltaRule, ChunkedEqualsRecurrent) {
  std::mt19937 g(5);
  const int64_t T = 150, hk = 2, hv = 4, dk = 16, dv = 8;  // 150 tokens: three chunks of 64
  Tensor q = ops::l2_norm(randn({T, hk, dk}, g), 1e-6f), k = ops::l2_norm(randn({T, hk, dk}, g), 1e-6f);
  Tensor v = randn({T, hv, dv}, g);
  Tensor a = randn({T, hv}, g);
  Tensor decay = ops::scale(ops::unary(UnaryOp::Softplus, a), -0.5f);  // log decay <= 0
  Tensor beta = ops::sigmoid(randn({T, hv}, g));
  Tensor s0 = randn({hv, dk, dv}, g, 0.3f);

  Tensor s_rec = s0.clone(), s_chunk = s0.clone();
  Tensor o_rec = ops::gated_delta_rule(q, k, v, decay, beta, s_rec, DeltaRuleForm::Recurrent);
  Tensor o_chunk = ops::gated_delta_rule(q, k, v, decay, beta, s_chunk, DeltaRuleForm::Chunked);
  EXPECT_LT(rel(o_chunk, o_rec), 1e-5);
  EXPECT_LT(rel(s_chunk, s_rec), 1e-5);

  // Token by token through the state equals one recurrent call.
  Tensor s_tok = s0.clone();
  std::vector<Tensor> outs;
  for (int64_t t = 0; t < T; ++t)
    outs.push_back(ops::gated_delta_rule(q.slice(0, t, t + 1).contiguous(), k.slice(0, t, t + 1).contiguous(),
                                         v.slice(0, t, t + 1).contiguous(), decay.slice(0, t, t + 1).contiguous(),
                                         beta.slice(0, t, t + 1).contiguous(), s_tok, DeltaRuleForm::Auto));
  EXPECT_LT(rel(ops::concat_rows(outs), o_rec), 1e-6);
  EXPECT_LT(rel(s_tok, s_rec), 1e-6);

  // A chunked prefill split at an odd point carries the state exactly.
  Tensor s_split = s0.clone();
  Tensor o1 = ops::gated_delta_rule(q.slice(0, 0, 37).contiguous(), k.slice(0, 0, 37).contiguous(),
                                    v.slice(0, 0, 37).contiguous(), decay.slice(0, 0, 37).contiguous(),
                                    beta.slice(0, 0, 37).contiguous(), s_split, DeltaRuleForm::Chunked);
  Tensor o2 = ops::gated_delta_rule(q.slice(0, 37, T).contiguous(), k.slice(0, 37, T).contiguous(),
                                    v.slice(0, 37, T).contiguous(), decay.slice(0, 37, T).contiguous(),
                                    beta.slice(0, 37, T).contiguous(), s_split, DeltaRuleForm::Chunked);
  EXPECT_LT(rel(ops::concat_rows({o1, o2}), o_rec), 1e-5);
}

TEST(GatedDeltaRule, MatchesHandComputedStep) {
  // One head, dk = dv = 1: S' = e^g S; d = beta (v - S' k); S = S' + k d; o = S q.
  Tensor q = Tensor::from_f32({0.5f}, {1, 1, 1}), k = Tensor::from_f32({2.0f}, {1, 1, 1});
  Tensor v = Tensor::from_f32({3.0f}, {1, 1, 1}), g = Tensor::from_f32({std::log(0.5f)}, {1, 1});
  Tensor b = Tensor::from_f32({0.25f}, {1, 1}), s = Tensor::from_f32({4.0f}, {1, 1, 1});
  Tensor o = ops::gated_delta_rule(q, k, v, g, b, s, DeltaRuleForm::Recurrent);
  // S' = 2; d = 0.25 * (3 - 4) = -0.25; S = 2 - 0.5 = 1.5; o = 0.75.
  EXPECT_NEAR(s.to_f32_vector()[0], 1.5f, 1e-6);
  EXPECT_NEAR(o.to_f32_vector()[0], 0.75f, 1e-6);
}

TEST(CausalConv, CarriedStateEqualsOneCall) {
  std::mt19937 g(9);
  const int64_t T = 13, C = 6, K = 4;
  Tensor x = randn({T, C}, g), w = randn({C, K}, g);
  Tensor st_full = Tensor::zeros({K - 1, C}, DType::F32);
  Tensor full = ops::causal_conv1d(x, w, st_full);
  // Channel 2 at t = 5 by hand: sum_j w[2, j] * x[5 - (K-1) + j, 2].
  float want = 0;
  for (int64_t j = 0; j < K; ++j) want += w.item_f32({2, j}) * x.item_f32({5 - (K - 1) + j, 2});
  EXPECT_NEAR(full.item_f32({5, 2}), want, 1e-5);
  Tensor st = Tensor::zeros({K - 1, C}, DType::F32);
  Tensor a = ops::causal_conv1d(x.slice(0, 0, 5).contiguous(), w, st);
  std::vector<Tensor> parts = {a};
  for (int64_t t = 5; t < T; ++t) parts.push_back(ops::causal_conv1d(x.slice(0, t, t + 1).contiguous(), w, st));
  EXPECT_LT(rel(ops::concat_rows(parts), full), 1e-7);
  EXPECT_LT(rel(st, st_full), 1e-7);
}

void check_moe(const std::string& fam, int64_t experts, int64_t shared, bool norm) {
  std::string dir = std::string(INGOT_SHARED_DIR) + "/goldens/" + fam + "-float32";
  ModelConfig cfg = load_model_config(dir);
  auto src = open_safetensors_source(dir, cfg, {});
  family::MoeBlock m = family::load_moe(*src, "model.layers.1.mlp.", experts, cfg.hidden_size, 32, shared, 2, norm,
                                        GluOp::SwiGlu);
  std::mt19937 g(3);
  Tensor h = randn({37, cfg.hidden_size}, g);
  Tensor grouped = family::moe_forward(m, h);
  Tensor naive = family::moe_forward_naive(m, h);
  EXPECT_LT(rel(grouped, naive), 1e-6) << fam;
  // Every token really used top_k distinct experts with the right weights.
  family::Routing r = family::route(m, h);
  for (int64_t t = 0; t < 37; ++t) {
    EXPECT_NE(r.expert[static_cast<size_t>(2 * t)], r.expert[static_cast<size_t>(2 * t + 1)]);
    if (norm) {
      EXPECT_NEAR(r.weight[static_cast<size_t>(2 * t)] + r.weight[static_cast<size_t>(2 * t + 1)], 1.0f, 1e-5);
    }
  }
}

TEST(Moe, GroupedEqualsPerTokenReference) {
  check_moe("qwen3_moe", 8, 0, false);
  check_moe("qwen3_next", 4, 32, true);  // with the gated shared expert
}

}  // namespace

TEST(LowRankAdd, InterleavedGroupsEqualPerRowLoop) {
  // Rows of two low-rank updates interleaved with rows of none (a batch
  // mixing two adapters and the base model) against a per-row double loop.
  std::mt19937 g(11);
  const int64_t N = 7, K = 12, M = 10;
  Tensor x = randn({N, K}, g);
  Tensor y0 = randn({N, M}, g);
  Weight a1, b1, a2, b2;
  a1.data = randn({3, K}, g);
  b1.data = randn({3, M}, g);  // Bᵀ
  a2.data = randn({5, K}, g);
  b2.data = randn({5, M}, g);
  const std::vector<int64_t> rows1 = {0, 3, 4}, rows2 = {1, 6};
  const std::vector<LowRankGroup> groups = {{&a1, &b1, rows1}, {&a2, &b2, rows2}};
  Tensor y = Tensor::from_f32(y0.to_f32_vector(), {N, M});
  ops::low_rank_add(y, x, groups);
  // The composed default (what a backend without its own kernel runs) agrees.
  Tensor composed = Tensor::from_f32(y0.to_f32_vector(), {N, M});
  backend(Device::CPU).Backend::low_rank_add({LowRankOutput{&composed, groups}}, x);
  EXPECT_LT(rel(composed, y), 1e-6);
  auto X = x.to_f32_vector(), Y = y0.to_f32_vector();
  auto apply = [&](const Weight& a, const Weight& b, int64_t r, const std::vector<int64_t>& rows) {
    auto A = a.data.to_f32_vector(), B = b.data.to_f32_vector();
    for (int64_t row : rows)
      for (int64_t m = 0; m < M; ++m) {
        double s = 0;
        for (int64_t j = 0; j < r; ++j) {
          double t = 0;
          for (int64_t k = 0; k < K; ++k) t += double(A[j * K + k]) * X[row * K + k];
          s += double(B[j * M + m]) * t;
        }
        Y[row * M + m] += static_cast<float>(s);
      }
  };
  apply(a1, b1, 3, rows1);
  apply(a2, b2, 5, rows2);
  EXPECT_LT(rel(y, Tensor::from_f32(Y, {N, M})), 1e-6);
  // Rows 2 and 5 belong to no group: untouched, bit for bit.
  auto got = y.to_f32_vector(), base = y0.to_f32_vector();
  for (int64_t row : {2, 5})
    for (int64_t m = 0; m < M; ++m) EXPECT_EQ(got[row * M + m], base[row * M + m]);
  // An empty row list means every row.
  Tensor all = Tensor::from_f32(y0.to_f32_vector(), {N, M});
  ops::low_rank_add(all, x, {{&a1, &b1, {}}});
  Tensor expect = Tensor::from_f32(y0.to_f32_vector(), {N, M});
  ops::low_rank_add(expect, x, {{&a1, &b1, {0, 1, 2, 3, 4, 5, 6}}});
  EXPECT_LT(rel(all, expect), 1e-7);
}

TEST(LowRankAdd, LargeGroupsOnThePoolAndBf16Factors) {
  // Past the serial threshold the work is split over the pool; bf16 factors
  // give the product of the bf16-rounded matrices.
  std::mt19937 g(12);
  const int64_t N = 24, K = 256, M = 384, r = 16;
  Tensor x = randn({N, K}, g);
  Weight a, b, a16, b16;
  a.data = randn({r, K}, g);
  b.data = randn({r, M}, g);
  a16.data = a.data.to(DType::BF16);
  b16.data = b.data.to(DType::BF16);
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < N; i += 2) rows.push_back(i);
  Tensor y = Tensor::zeros({N, M}, DType::F32), y16 = Tensor::zeros({N, M}, DType::F32);
  ops::low_rank_add(y, x, {{&a, &b, rows}});
  ops::low_rank_add(y16, x, {{&a16, &b16, rows}});
  Tensor want = Tensor::zeros({N, M}, DType::F32);
  backend(Device::CPU).Backend::low_rank_add({LowRankOutput{&want, {{&a, &b, rows}}}}, x);
  EXPECT_LT(rel(y, want), 1e-6);
  EXPECT_LT(rel(y16, want), 2e-2);
  EXPECT_GT(rel(y16, want), 0.0);
  auto got = y.to_f32_vector();
  for (int64_t m = 0; m < M; ++m) EXPECT_EQ(got[static_cast<size_t>(M + m)], 0.0f);  // row 1: in no group
}

TEST(LowRankAdd, ManyGroupsInOneCallEqualEachAlone) {
  // A batch of 4 adapters (every group past the serial threshold) in one
  // call: each row gets the bits it gets when its group is applied alone.
  std::mt19937 g(13);
  const int64_t N = 30, K = 256, M = 384, r = 16;
  Tensor x = randn({N, K}, g);
  Tensor y0 = randn({N, M}, g);
  std::vector<Weight> a(4), b(4);
  std::vector<std::vector<int64_t>> rows(4);
  std::vector<LowRankGroup> groups;
  for (int i = 0; i < 4; ++i) {
    a[i].data = randn({r, K}, g).to(i % 2 ? DType::BF16 : DType::F32);
    b[i].data = randn({r, M}, g).to(i % 2 ? DType::BF16 : DType::F32);
    for (int64_t row = i; row < N - 2; row += 4) rows[i].push_back(row);  // the last 2 rows: no adapter
  }
  for (int i = 0; i < 4; ++i) groups.push_back({&a[i], &b[i], rows[i]});
  Tensor all = Tensor::from_f32(y0.to_f32_vector(), {N, M});
  ops::low_rank_add(all, x, groups);
  Tensor alone = Tensor::from_f32(y0.to_f32_vector(), {N, M});
  for (const LowRankGroup& grp : groups) ops::low_rank_add(alone, x, {grp});
  auto p = all.to_f32_vector(), q = alone.to_f32_vector();
  ASSERT_EQ(p.size(), q.size());
  EXPECT_EQ(std::memcmp(p.data(), q.data(), p.size() * sizeof(float)), 0);
  auto base = y0.to_f32_vector();
  for (int64_t row : {N - 2, N - 1})
    for (int64_t m = 0; m < M; ++m) EXPECT_EQ(p[static_cast<size_t>(row * M + m)], base[static_cast<size_t>(row * M + m)]);
}

TEST(LowRankAdd, ProjectionsOfOneInputInOneCallEqualEachAlone) {
  // q / k / v-like outputs of one input with two adapter groups, at sizes
  // that take each of the CPU's paths (one thread; one pool pass repeating
  // the shrinks; shrink and expand passes): the bits of each output alone,
  // and the composed default's values.
  struct Case {
    int64_t N, K;
  };
  for (const Case c : {Case{1, 8}, Case{1, 576}, Case{2, 576}, Case{16, 576}}) {
    SCOPED_TRACE(testing::Message() << "N " << c.N << " K " << c.K);
    std::mt19937 g(static_cast<unsigned>(20 + c.N + c.K));
    const int64_t r = 16;
    const std::vector<int64_t> Ms = c.K > 8 ? std::vector<int64_t>{576, 192, 200} : std::vector<int64_t>{24, 8, 12};
    Tensor x = randn({c.N, c.K}, g);
    std::vector<Weight> a(6), b(6);
    std::vector<int64_t> even, odd;
    for (int64_t row = 0; row < c.N; ++row) (row % 2 ? odd : even).push_back(row);
    std::vector<Tensor> y0, fused, alone, composed;
    std::vector<LowRankOutput> outs, outs_composed;
    for (size_t o = 0; o < Ms.size(); ++o) {
      y0.push_back(randn({c.N, Ms[o]}, g));
      for (size_t k = 0; k < 2; ++k) {
        a[2 * o + k].data = randn({r, c.K}, g).to(k ? DType::BF16 : DType::F32);
        b[2 * o + k].data = randn({r, Ms[o]}, g).to(k ? DType::BF16 : DType::F32);
      }
    }
    for (size_t o = 0; o < Ms.size(); ++o) {
      fused.push_back(y0[o].clone());
      alone.push_back(y0[o].clone());
      composed.push_back(y0[o].clone());
    }
    for (size_t o = 0; o < Ms.size(); ++o) {
      // Output 1 takes only the first adapter; the others take both.
      std::vector<LowRankGroup> groups = {{&a[2 * o], &b[2 * o], even}};
      if (o != 1 && !odd.empty()) groups.push_back({&a[2 * o + 1], &b[2 * o + 1], odd});
      outs.push_back({&fused[o], groups});
      outs_composed.push_back({&composed[o], groups});
      ops::low_rank_add(alone[o], x, groups);
    }
    ops::low_rank_add(outs, x);
    backend(Device::CPU).Backend::low_rank_add(outs_composed, x);
    for (size_t o = 0; o < Ms.size(); ++o) {
      auto p = fused[o].to_f32_vector(), q = alone[o].to_f32_vector();
      EXPECT_EQ(std::memcmp(p.data(), q.data(), p.size() * sizeof(float)), 0) << "output " << o;
      EXPECT_LT(rel(fused[o], composed[o]), 1e-5) << "output " << o;
      EXPECT_GT(rel(fused[o], y0[o]), 1e-3) << "output " << o;  // the update happened
    }
  }
}

TEST(LowRankAdd, RefusesFactorsThatDoNotFit) {
  std::mt19937 g(14);
  Tensor x = randn({2, 32}, g);
  Tensor y = Tensor::zeros({2, 48}, DType::F32), y2 = Tensor::zeros({2, 40}, DType::F32);
  Weight a, b;
  a.data = randn({4, 32}, g);
  b.data = randn({4, 48}, g);
  // b has 48 outputs, y2 40: an error, and the fitting output is left untouched.
  EXPECT_THROW(ops::low_rank_add({LowRankOutput{&y, {{&a, &b, {}}}}, LowRankOutput{&y2, {{&a, &b, {}}}}}, x), Error);
  for (float v : y.to_f32_vector()) EXPECT_EQ(v, 0.0f);
  // A row outside the batch.
  EXPECT_THROW(ops::low_rank_add(y, x, {{&a, &b, {0, 2}}}), Error);
}
