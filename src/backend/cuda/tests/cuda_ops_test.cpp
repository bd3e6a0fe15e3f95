// Every CUDA op against the CPU backend on random inputs (GPU machine only:
// ctest label "gpu").
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <tuple>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/tests/test_util.h"
#include "backend/cuda/tuning.h"
#include "ops/ops.h"
#include "util/error.h"

using namespace ingot;
using ingot::cuda_test::randn;
using ingot::cuda_test::rel;

namespace {

Tensor gpu(const Tensor& t) { return t.to(Device::CUDA); }

class CudaOps : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(cuda::available()) << "no CUDA device"; }
};

}  // namespace

TEST_F(CudaOps, LinearF32AndBf16) {
  for (int64_t n : {1, 3, 17, 64}) {
    Tensor x = randn({n, 96}, 1);
    Weight w;
    w.data = randn({70, 96}, 2);
    Weight wg;
    wg.data = gpu(w.data);
    Tensor bias = randn({70}, 3);
    EXPECT_LT(rel(ops::linear(gpu(x), wg, &bias), ops::linear(x, w, &bias)), 1e-5) << n;
    Weight wb;
    wb.data = w.data.to(DType::BF16);
    Weight wbg;
    wbg.data = gpu(wb.data);
    // cuBLAS rounds x to bf16 like a bf16 reference would: loose bound.
    EXPECT_LT(rel(ops::linear(gpu(x), wbg), ops::linear(x, wb)), 1e-2) << n;
  }
}

TEST_F(CudaOps, NormsActivationsSoftmax) {
  Tensor x = randn({5, 300}, 4), w = randn({300}, 5), b = randn({300}, 6);
  EXPECT_LT(rel(ops::rms_norm(gpu(x), w, 1e-6f), ops::rms_norm(x, w, 1e-6f)), 1e-5);
  EXPECT_LT(rel(ops::rms_norm(gpu(x), w, 1e-6f, true), ops::rms_norm(x, w, 1e-6f, true)), 1e-5);
  EXPECT_LT(rel(ops::layer_norm(gpu(x), w, b, 1e-5f), ops::layer_norm(x, w, b, 1e-5f)), 1e-5);
  EXPECT_LT(rel(ops::softmax(gpu(x)), ops::softmax(x)), 1e-5);
  for (UnaryOp op : {UnaryOp::Silu, UnaryOp::GeluTanh, UnaryOp::Gelu, UnaryOp::Sigmoid, UnaryOp::Tanh})
    EXPECT_LT(rel(ops::unary(op, gpu(x)), ops::unary(op, x)), 1e-5);
  Tensor y = randn({5, 300}, 7);
  EXPECT_LT(rel(ops::swiglu(gpu(x), gpu(y)), ops::swiglu(x, y)), 1e-5);
  EXPECT_LT(rel(ops::geglu_tanh(gpu(x), gpu(y)), ops::geglu_tanh(x, y)), 1e-5);
  EXPECT_LT(rel(ops::add(gpu(x), gpu(w)), ops::add(x, w)), 1e-6);
  EXPECT_LT(rel(ops::mul(gpu(x), gpu(y)), ops::mul(x, y)), 1e-6);
  EXPECT_LT(rel(ops::softcap(gpu(x), 2.0f), ops::softcap(x, 2.0f)), 1e-5);
}

TEST_F(CudaOps, RopeAndAttention) {
  RopeSpec spec;
  spec.rotary_dim = 16;
  for (int i = 0; i < 8; ++i) spec.inv_freq.push_back(std::pow(10000.0f, -i / 8.0f));
  Tensor pos = Tensor::from_i32({3, 4, 5, 6, 7}, {5});
  Tensor q = randn({5, 4, 32}, 8);
  Tensor qc = q.clone(), qg = gpu(q);
  ops::rope_inplace(qc, pos, spec);
  ops::rope_inplace(qg, pos, spec);
  EXPECT_LT(rel(qg, qc), 1e-5);
  Tensor k = randn({300, 2, 32}, 9), v = randn({300, 2, 24}, 10), qa = randn({5, 4, 32}, 11);
  for (int64_t window : {0, 7}) {
    AttnParams p;
    p.scale = 0.17f;
    p.q_offset = 295;
    p.window = window;
    EXPECT_LT(rel(ops::attention(gpu(qa), gpu(k), gpu(v), p), ops::attention(qa, k, v, p)), 1e-5);
    Tensor kb = k.to(DType::BF16), vb = v.to(DType::BF16);
    EXPECT_LT(rel(ops::attention(gpu(qa), gpu(kb), gpu(vb), p), ops::attention(qa, kb, vb, p)), 1e-5);
  }
}

TEST_F(CudaOps, ArgmaxTieRuleAndNonFinite) {
  Tensor l = Tensor::from_f32({1, 5, 5, 2, NAN, 1, 1, 1, 0, 9, 9, 9}, {3, 4});
  EXPECT_EQ(ops::argmax(gpu(l)).to_i32_vector(), (std::vector<int32_t>{1, 0, 1}));
  Tensor big = randn({3, 100000}, 12);
  EXPECT_EQ(ops::argmax(gpu(big)).to_i32_vector(), ops::argmax(big).to_i32_vector());
}

TEST_F(CudaOps, EmbeddingGatherConcatAndStridedCopy) {
  Weight t;
  t.data = gpu(randn({50, 16}, 13).to(DType::BF16));
  Weight tc;
  tc.data = t.data.to(Device::CPU);
  Tensor ids = Tensor::from_i32({3, 0, 49}, {3});
  EXPECT_EQ(ops::embedding(t, ids).to_f32_vector(), ops::embedding(tc, ids).to_f32_vector());
  Tensor x = randn({6, 8}, 14);
  EXPECT_EQ(ops::gather_rows(gpu(x), {5, 1}).to_f32_vector(), ops::gather_rows(x, {5, 1}).to_f32_vector());
  EXPECT_EQ(ops::concat_rows({gpu(x), gpu(x)}).to_f32_vector(), ops::concat_rows({x, x}).to_f32_vector());
  EXPECT_EQ(gpu(x).transpose(0, 1).contiguous().to_f32_vector(), x.transpose(0, 1).contiguous().to_f32_vector());
}

// Rows 0..n-1 of a 16-row product (cuBLAS) against the same rows alone
// (the decode GEMV for n <= 8): same bf16 products, float32 sums.
TEST_F(CudaOps, DecodeGemvMatchesCublas) {
  // 70 and 71 rows: a block per row (71: the last row pair holds one row); 4100, 4101 and 16390
  // rows: a warp per row, with a partial last block.
  for (auto [m, k] : {std::pair<int64_t, int64_t>{70, 64}, {70, 2048}, {70, 4104}, {71, 4096}, {4100, 64},
                      {4101, 512}, {16390, 64}}) {
    Weight w;
    w.data = gpu(randn({m, k}, 20, 0.05f).to(DType::BF16));
    Tensor x = gpu(randn({16, k}, 21));
    Tensor full = ops::linear(x, w).to(Device::CPU);
    for (int64_t n = 1; n <= 9; ++n) {
      Tensor part = ops::linear(x.slice(0, 0, n).contiguous(), w).to(Device::CPU);
      EXPECT_LT(rel(part, full.slice(0, 0, n).contiguous()), 1e-5) << "k " << k << " n " << n;
    }
  }
}

// GEMVs launched to overlap the kernel before them (pdl.cuh) read that
// kernel's output only once it is complete: a chain of dependent steps
// (norm -> GEMV -> residual GEMV -> SwiGLU GEMV -> GEMV) equals the same chain
// with the device drained after every op, bit for bit.
TEST_F(CudaOps, OverlappedGemvChainEqualsSerialised) {
  const int64_t d = 2048, f = 4096;
  Weight a, b, g, u, down;
  a.data = gpu(randn({d, d}, 60, 0.03f).to(DType::BF16));
  b.data = gpu(randn({d, d}, 61, 0.03f).to(DType::BF16));
  g.data = gpu(randn({f, d}, 62, 0.03f).to(DType::BF16));
  u.data = gpu(randn({f, d}, 63, 0.03f).to(DType::BF16));
  down.data = gpu(randn({d, f}, 64, 0.03f).to(DType::BF16));
  const Tensor nw = gpu(randn({d}, 65, 0.1f));
  auto chain = [&](bool drain) {
    auto step = [&](Tensor t) {
      if (drain) cuda::synchronize();
      return t;
    };
    Tensor x = gpu(randn({1, d}, 66));
    for (int s = 0; s < 30; ++s) {
      Tensor h = step(ops::rms_norm(x, nw, 1e-6f));
      Tensor y = step(ops::linear(h, a));
      x = step(ops::linear_residual(y, b, nullptr, x));
      Tensor m = step(ops::glu_linear(GluOp::SwiGlu, step(ops::rms_norm(x, nw, 1e-6f)), g, u));
      x = step(ops::linear_residual(m, down, nullptr, x));
    }
    return x.to_f32_vector();
  };
  const auto overlapped = chain(false), drained = chain(true);
  EXPECT_EQ(overlapped, drained);
  double norm = 0;
  for (float v : overlapped) norm += double(v) * v;
  EXPECT_TRUE(std::isfinite(norm) && norm > 0);
}

// More uploads than the pinned ring has slots, none waited for in between.
TEST_F(CudaOps, SmallUploadsThroughPinnedRing) {
  std::vector<Tensor> dev;
  for (int i = 0; i < 100; ++i) dev.push_back(Tensor::from_i32({i, 2 * i, 3 * i}, {3}).to(Device::CUDA));
  for (int i = 0; i < 100; ++i) EXPECT_EQ(dev[i].to_i32_vector(), (std::vector<int32_t>{i, 2 * i, 3 * i})) << i;
}

// Few query rows over many keys take the split-key (flash-decoding) path.
TEST_F(CudaOps, SplitKeyDecodeAttention) {
  Tensor k = randn({5000, 8, 64}, 30), v = randn({5000, 8, 64}, 31);
  Tensor kb = k.to(DType::BF16), vb = v.to(DType::BF16);
  for (int64_t t : {1, 3}) {
    Tensor q = randn({t, 32, 64}, 32);
    for (int64_t window : {0, 1000}) {
      AttnParams p;
      p.scale = 0.125f;
      p.q_offset = 5000 - t;
      p.window = window;
      EXPECT_LT(rel(ops::attention(gpu(q), gpu(k), gpu(v), p), ops::attention(q, k, v, p)), 1e-5) << t;
      EXPECT_LT(rel(ops::attention(gpu(q), gpu(kb), gpu(vb), p), ops::attention(q, kb, vb, p)), 1e-5) << t;
    }
  }
}

// Decode attention over head dims whose value rows are read in 8-element
// slices (64, 128, 256) and one that is not (80), with a window that leaves
// most key splits empty (their partials must not reach the merge).
TEST_F(CudaOps, SplitKeyDecodeAttentionHeadDims) {
  for (int64_t d : {64, 80, 128, 256}) {
    Tensor k = randn({3000, 2, d}, 33), v = randn({3000, 2, d}, 34);
    Tensor kb = k.to(DType::BF16), vb = v.to(DType::BF16);
    Tensor q = randn({1, 8, d}, 35);
    for (int64_t window : {0, 300}) {
      AttnParams p;
      p.scale = 1.0f / std::sqrt(static_cast<float>(d));
      p.q_offset = 2999;
      p.window = window;
      EXPECT_LT(rel(ops::attention(gpu(q), gpu(k), gpu(v), p), ops::attention(q, k, v, p)), 1e-5) << d << " " << window;
      EXPECT_LT(rel(ops::attention(gpu(q), gpu(kb), gpu(vb), p), ops::attention(q, kb, vb, p)), 1e-5)
          << d << " " << window;
    }
  }
}

// The fused GEMV epilogues equal the separate ops bit for bit (both row layouts).
TEST_F(CudaOps, FusedResidualAndSwiGluGemvAreExact) {
  for (auto [m, k] : {std::pair<int64_t, int64_t>{96, 4096}, {97, 4096}, {4100, 512}, {4101, 512}}) {
    Weight w, g, u;
    w.data = gpu(randn({m, k}, 40, 0.05f).to(DType::BF16));
    g.data = gpu(randn({m, k}, 41, 0.05f).to(DType::BF16));
    u.data = gpu(randn({m, k}, 42, 0.05f).to(DType::BF16));
    for (int64_t n : {1, 3, 8}) {
      Tensor x = gpu(randn({n, k}, 43)), res = gpu(randn({n, m}, 44));
      EXPECT_EQ(ops::linear_residual(x, w, nullptr, res).to_f32_vector(),
                ops::add(res, ops::linear(x, w)).to_f32_vector())
          << m << " " << n;
      EXPECT_EQ(ops::glu_linear(GluOp::SwiGlu, x, g, u).to_f32_vector(),
                ops::swiglu(ops::linear(x, g), ops::linear(x, u)).to_f32_vector())
          << m << " " << n;
    }
  }
}

// Up to 4 activation rows share each weight load between two output rows
// (gemv.cu); 5 to 8 take one output row at a time. Either way a thread sums
// its chunks in the same order, so the first n rows of an 8-row launch equal
// an n-row launch bit for bit, in every epilogue and both row layouts.
TEST_F(CudaOps, PairedRowGemvEqualsSingleRowGemv) {
  for (auto [m, k] : {std::pair<int64_t, int64_t>{71, 4096}, {4101, 512}}) {
    Weight w, g, u, kv;
    w.data = gpu(randn({m, k}, 70, 0.05f).to(DType::BF16));
    g.data = gpu(randn({m, k}, 71, 0.05f).to(DType::BF16));
    u.data = gpu(randn({m, k}, 72, 0.05f).to(DType::BF16));
    kv.data = gpu(randn({m < 4096 ? m / 3 : m - 4, k}, 73, 0.05f).to(DType::BF16));  // same row layout as w
    const Tensor x8 = gpu(randn({8, k}, 74)), res8 = gpu(randn({8, m}, 75));
    auto rows = [](const Tensor& t, int64_t n) { return t.slice(0, 0, n).contiguous().to_f32_vector(); };
    const auto plain8 = ops::linear(x8, w), resid8 = ops::linear_residual(x8, w, nullptr, res8);
    const auto glu8 = ops::glu_linear(GluOp::SwiGlu, x8, g, u);
    const auto many8 = ops::linear_many(x8, {&w, &kv});
    for (int64_t n = 1; n <= 4; ++n) {
      const Tensor x = x8.slice(0, 0, n).contiguous(), res = res8.slice(0, 0, n).contiguous();
      EXPECT_EQ(ops::linear(x, w).to_f32_vector(), rows(plain8, n)) << m << " " << n;
      EXPECT_EQ(ops::linear_residual(x, w, nullptr, res).to_f32_vector(), rows(resid8, n)) << m << " " << n;
      EXPECT_EQ(ops::glu_linear(GluOp::SwiGlu, x, g, u).to_f32_vector(), rows(glu8, n)) << m << " " << n;
      const auto many = ops::linear_many(x, {&w, &kv});
      EXPECT_EQ(many[0].to_f32_vector(), rows(many8[0], n)) << m << " " << n;
      EXPECT_EQ(many[1].to_f32_vector(), rows(many8[1], n)) << m << " " << n;
    }
  }
}

// q and k rotated in one launch equal two separate ropes bit for bit.
TEST_F(CudaOps, RopePairIsExact) {
  RopeSpec spec;
  spec.rotary_dim = 64;
  for (int i = 0; i < 32; ++i) spec.inv_freq.push_back(std::pow(500000.0f, -i / 32.0f));
  Tensor pos = gpu(Tensor::from_i32({3, 900, 4095}, {3}));
  Tensor q = gpu(randn({3, 8, 64}, 60)), k = gpu(randn({3, 2, 64}, 61));
  Tensor q1 = q.clone(), k1 = k.clone();
  ops::rope_pair_inplace(q, k, pos, spec);
  ops::rope_inplace(q1, pos, spec);
  ops::rope_inplace(k1, pos, spec);
  EXPECT_EQ(q.to_f32_vector(), q1.to_f32_vector());
  EXPECT_EQ(k.to_f32_vector(), k1.to_f32_vector());
}

// K and V rows written in one launch equal two separate writes (rows outside the store are skipped).
TEST_F(CudaOps, WriteRowsPairIsExact) {
  Tensor k = gpu(randn({3, 2, 64}, 62)), v = gpu(randn({3, 2, 64}, 63));
  Tensor rows = gpu(Tensor::from_i32({5, 0, 40}, {3}));
  Tensor dk = Tensor::zeros({16, 2, 64}, DType::BF16, Device::CUDA), dv = dk.clone();
  Tensor ek = dk.clone(), ev = dk.clone();
  ops::write_rows_at_pair(dk, k, dv, v, rows);
  ops::write_rows_at(ek, k, rows);
  ops::write_rows_at(ev, v, rows);
  EXPECT_EQ(dk.to_f32_vector(), ek.to_f32_vector());
  EXPECT_EQ(dv.to_f32_vector(), ev.to_f32_vector());
  EXPECT_NE(dk.to_f32_vector(), dv.to_f32_vector());
}

// q/k/v in one multi-matrix GEMV launch equal three separate linears bit for bit, in both row
// layouts (block per row: k = 4096; warp per row: m >= 4096 with k = 512).
TEST_F(CudaOps, MultiMatrixGemvIsExact) {
  for (auto [mq, mkv, k] : {std::tuple<int64_t, int64_t, int64_t>{2048, 512, 2048},
                            {96, 32, 4096},
                            {97, 33, 4096},
                            {4104, 4096, 512},
                            {4105, 4097, 512}}) {
    Weight wq, wk, wv;
    wq.data = gpu(randn({mq, k}, 50, 0.05f).to(DType::BF16));
    wk.data = gpu(randn({mkv, k}, 51, 0.05f).to(DType::BF16));
    wv.data = gpu(randn({mkv, k}, 52, 0.05f).to(DType::BF16));
    for (int64_t n : {1, 2, 8}) {
      Tensor x = gpu(randn({n, k}, 53));
      std::vector<Tensor> y = ops::linear_many(x, {&wq, &wk, &wv});
      ASSERT_EQ(y.size(), 3u);
      EXPECT_EQ(y[0].to_f32_vector(), ops::linear(x, wq).to_f32_vector()) << mq << " " << n;
      EXPECT_EQ(y[1].to_f32_vector(), ops::linear(x, wk).to_f32_vector()) << mq << " " << n;
      EXPECT_EQ(y[2].to_f32_vector(), ops::linear(x, wv).to_f32_vector()) << mq << " " << n;
    }
  }
}

// Rows written at device positions, then attention bounded by a device key count.
TEST_F(CudaOps, WriteRowsAtAndDeviceKeyCount) {
  Tensor store = Tensor::zeros({600, 4, 32}, DType::BF16, Device::CUDA);
  Tensor vstore = Tensor::zeros({600, 4, 32}, DType::BF16, Device::CUDA);
  Tensor k = randn({450, 4, 32}, 50).to(DType::BF16), v = randn({450, 4, 32}, 51).to(DType::BF16);
  std::vector<int32_t> all(450);
  for (int32_t i = 0; i < 450; ++i) all[static_cast<size_t>(i)] = 449 - i;  // reversed order
  Tensor rk = Tensor::empty({450, 4, 32}, DType::BF16), rv = Tensor::empty({450, 4, 32}, DType::BF16);
  for (int64_t i = 0; i < 450; ++i) {
    Tensor a = rk.slice(0, 449 - i, 450 - i), b = rv.slice(0, 449 - i, 450 - i);
    copy_into(k.slice(0, i, i + 1), a);
    copy_into(v.slice(0, i, i + 1), b);
  }
  Tensor rows = Tensor::from_i32(all, {450}).to(Device::CUDA);
  ops::write_rows_at(store, gpu(k), rows);
  ops::write_rows_at(vstore, gpu(v), rows);
  EXPECT_EQ(store.slice(0, 0, 450).to(Device::CPU).to_f32_vector(), rk.to_f32_vector());
  EXPECT_EQ(store.slice(0, 450, 600).to(Device::CPU).to_f32_vector(), std::vector<float>(150 * 4 * 32, 0.0f));
  for (int64_t t : {1, 2}) {
    Tensor q = randn({t, 16, 32}, 52);
    Tensor len = Tensor::from_i32({450}, {1}).to(Device::CUDA);
    AttnParams p;
    p.scale = 0.17f;
    p.q_offset = 450 - t;
    AttnParams pd = p;
    pd.q_offset = 0;
    pd.kv_len = len.data<int32_t>();
    EXPECT_LT(rel(ops::attention(gpu(q), store, vstore, pd), ops::attention(q, rk, rv, p)), 1e-5) << t;
  }
  Tensor cnt = Tensor::from_i32({5, -2, 7}, {3}).to(Device::CUDA);
  ops::add_i32_inplace(cnt, 3);
  EXPECT_EQ(cnt.to_i32_vector(), (std::vector<int32_t>{8, 1, 10}));
}

// Vocabularies past one block's share take the three-pass argmax: same ids as the CPU.
TEST_F(CudaOps, LargeVocabularyArgmax) {
  const int64_t v = 128256;
  Tensor x = randn({3, v}, 60, 3.0f);
  float* p = x.data<float>();
  p[70000] = 50.0f;  // row 0: a clear winner late in the row
  p[v + 5] = 40.0f;  // row 1: a tie, the lower index wins
  p[v + 100001] = 40.0f;
  p[2 * v + 9] = NAN;  // row 2: non-finite -> 0
  EXPECT_EQ(ops::argmax(gpu(x)).to_i32_vector(), ops::argmax(x).to_i32_vector());
  EXPECT_EQ(ops::argmax(gpu(x)).to_i32_vector(), (std::vector<int32_t>{70000, 5, 0}));
}

// Prefill-sized query blocks take the GQA-grouped kernel (groups of 2, 4, 8).
TEST_F(CudaOps, GroupedQueryHeadsPrefillAttention) {
  for (auto [h, kvh] : {std::pair<int64_t, int64_t>{8, 4}, {32, 8}, {16, 2}}) {
    const int64_t t = 40, s = 300, d = 64;
    Tensor q = randn({t, h, d}, 70), k = randn({s, kvh, d}, 71), v = randn({s, kvh, d}, 72);
    Tensor kb = k.to(DType::BF16), vb = v.to(DType::BF16);
    for (int64_t window : {0, 50}) {
      AttnParams p;
      p.scale = 0.125f;
      p.q_offset = s - t;
      p.window = window;
      EXPECT_LT(rel(ops::attention(gpu(q), gpu(k), gpu(v), p), ops::attention(q, k, v, p)), 1e-5) << h << "/" << kvh;
      EXPECT_LT(rel(ops::attention(gpu(q), gpu(kb), gpu(vb), p), ops::attention(q, kb, vb, p)), 1e-5) << h << "/" << kvh;
      // Deterministic: the same inputs give the same bits.
      EXPECT_EQ(ops::attention(gpu(q), gpu(kb), gpu(vb), p).to_f32_vector(),
                ops::attention(gpu(q), gpu(kb), gpu(vb), p).to_f32_vector());
    }
  }
}

// ---- Ops of the hybrid and MoE families (Qwen3-Next / 3.5, Qwen3-MoE) and the
// Gemma-specific paths. The CUDA kernels round every product and sum like the
// CPU loops (no fused multiply-add), so results agree to float32 rounding;
// only expf and the order of block reductions differ.

namespace {

Tensor uniform(const Shape& s, uint32_t seed, float lo, float hi) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> ud(lo, hi);
  std::vector<float> v(static_cast<size_t>(s.numel()));
  for (float& x : v) x = ud(g);
  return Tensor::from_f32(v, s);
}

// Delta-rule inputs shaped like a DeltaNet layer's: unit q/k rows (l2-normed),
// log decays in (-1, 0), betas in (0, 1).
struct DeltaInputs {
  Tensor q, k, v, g, beta;
  DeltaInputs(int64_t T, int64_t hk, int64_t hv, int64_t dk, int64_t dv, uint32_t seed)
      : q(ops::l2_norm(randn({T, hk, dk}, seed), 1e-6f)),
        k(ops::l2_norm(randn({T, hk, dk}, seed + 1), 1e-6f)),
        v(randn({T, hv, dv}, seed + 2)),
        g(uniform({T, hv}, seed + 3, -1.0f, -0.01f)),
        beta(uniform({T, hv}, seed + 4, 0.01f, 1.0f)) {}
};

}  // namespace

// Prefill over bf16 K/V takes the tensor-core kernel (attention_mma.cuh):
// float32-kernel accuracy against the CPU and the CUDA-core kernel, across
// partial query blocks, chunked prefill offsets, windows, soft-capping and
// both head dims; deterministic.
TEST_F(CudaOps, TensorCorePrefillAttention) {
  int cases = 0;
  for (int64_t d : {64, 128})
    for (int64_t t : {64, 200})
      for (int64_t window : {0, 100})
        for (float cap : {0.0f, 30.0f})
          for (bool causal : {true, false}) {
            const int64_t h = 8, kvh = 2, s = t + 77;
            Tensor q = randn({t, h, d}, 90 + static_cast<uint32_t>(t + d), 2.0f);
            Tensor kb = randn({s, kvh, d}, 91).to(DType::BF16), vb = randn({s, kvh, d}, 92).to(DType::BF16);
            AttnParams p;
            p.scale = 1.0f / std::sqrt(static_cast<float>(d));
            p.q_offset = s - t;
            p.window = window;
            p.softcap = cap;
            p.causal = causal;
            const Tensor ref = ops::attention(q, kb, vb, p);
            const Tensor mma = ops::attention(gpu(q), gpu(kb), gpu(vb), p);
            EXPECT_LT(rel(mma, ref), 1e-5) << d << " " << t << " " << window << " " << cap << " " << causal;
            EXPECT_EQ(mma.to_f32_vector(), ops::attention(gpu(q), gpu(kb), gpu(vb), p).to_f32_vector());
            Tensor cores;
            {
              cuda::Tuning no_mma = cuda::tuning();
              no_mma.mma_attention = false;
              cuda::ScopedTuning scoped(no_mma);
              cores = ops::attention(gpu(q), gpu(kb), gpu(vb), p);
            }
            EXPECT_LT(rel(mma, cores), 1e-5);
            ++cases;
          }
  EXPECT_EQ(cases, 32);
}

TEST_F(CudaOps, HybridL2Norm) {
  for (Shape s : {Shape{1, 16}, Shape{5, 128}, Shape{3, 4, 300}, Shape{2, 2048}}) {
    Tensor x = randn(s, 80);
    EXPECT_LT(rel(ops::l2_norm(gpu(x), 1e-6f), ops::l2_norm(x, 1e-6f)), 1e-6) << s.str();
  }
  Tensor zero = Tensor::zeros({2, 8}, DType::F32);  // eps keeps an all-zero row finite
  EXPECT_EQ(ops::l2_norm(gpu(zero), 1e-6f).to_f32_vector(), std::vector<float>(16, 0.0f));
}

// A prefill then decode steps, carrying the conv window across calls (T = 1 <
// K - 1 keeps part of the old window; T = 70 replaces it all).
TEST_F(CudaOps, HybridCausalConv1d) {
  for (auto [C, K] : {std::pair<int64_t, int64_t>{8, 4}, {200, 4}, {96, 2}, {64, 1}}) {
    Tensor w = randn({C, K}, 81);
    Tensor sc = randn({K - 1, C}, 82), sg = gpu(sc);
    uint32_t seed = 83;
    for (int64_t T : {5, 1, 1, 2, 70, 1}) {
      Tensor x = randn({T, C}, seed++);
      Tensor yc = ops::causal_conv1d(x, w, sc);
      Tensor yg = ops::causal_conv1d(gpu(x), gpu(w), sg);
      EXPECT_EQ(yg.device(), Device::CUDA);
      EXPECT_LT(rel(yg, yc), 1e-6) << "C " << C << " K " << K << " T " << T;
      if (K > 1) {
        EXPECT_LT(rel(sg, sc), 1e-6) << "state, C " << C << " K " << K << " T " << T;
      }
    }
  }
}

// Both forms against the CPU on GQA-like head ratios (hv / hk = 1, 2, 3), head
// dims below, at and above the 64-column tile, and spans of one token, part
// of a chunk, one chunk and several chunks; the state carries across calls.
TEST_F(CudaOps, HybridGatedDeltaRule) {
  struct Dims {
    int64_t hk, hv, dk, dv;
  };
  for (Dims d : {Dims{2, 2, 16, 16}, Dims{2, 4, 16, 16}, Dims{1, 3, 32, 24}, Dims{1, 1, 8, 80}, Dims{2, 4, 128, 128}}) {
    for (DeltaRuleForm form : {DeltaRuleForm::Auto, DeltaRuleForm::Chunked, DeltaRuleForm::Recurrent}) {
      Tensor sc = randn({d.hv, d.dk, d.dv}, 90, 0.1f), sg = gpu(sc);
      uint32_t seed = 91;
      for (int64_t T : {7, 1, 64, 1, 130, 1}) {
        DeltaInputs in(T, d.hk, d.hv, d.dk, d.dv, seed += 5);
        Tensor oc = ops::gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, sc, form);
        Tensor og = ops::gated_delta_rule(gpu(in.q), gpu(in.k), gpu(in.v), gpu(in.g), gpu(in.beta), sg, form);
        ASSERT_EQ(og.shape(), oc.shape());
        const std::string at = "hk " + std::to_string(d.hk) + " hv " + std::to_string(d.hv) + " dk " +
                               std::to_string(d.dk) + " dv " + std::to_string(d.dv) + " T " + std::to_string(T) +
                               " form " + std::to_string(static_cast<int>(form));
        EXPECT_LT(rel(og, oc), 1e-5) << at;
        EXPECT_LT(rel(sg, sc), 1e-5) << "state, " << at;
      }
    }
  }
}

// The chunked and recurrent kernels are two algorithms for one recurrence.
TEST_F(CudaOps, HybridDeltaRuleFormsAgree) {
  DeltaInputs in(150, 2, 4, 32, 32, 120);
  Tensor s0 = randn({4, 32, 32}, 121, 0.1f);
  Tensor sa = gpu(s0), sb = gpu(s0);
  Tensor oa = ops::gated_delta_rule(gpu(in.q), gpu(in.k), gpu(in.v), gpu(in.g), gpu(in.beta), sa,
                                    DeltaRuleForm::Chunked);
  Tensor ob = ops::gated_delta_rule(gpu(in.q), gpu(in.k), gpu(in.v), gpu(in.g), gpu(in.beta), sb,
                                    DeltaRuleForm::Recurrent);
  EXPECT_LT(rel(oa, ob), 1e-4);
  EXPECT_LT(rel(sa, sb), 1e-4);
  EXPECT_GT(rel(sa, gpu(s0)), 1e-2);  // the state did move
}

TEST_F(CudaOps, HybridScatterAddRows) {
  struct Case {
    int64_t n, d;
    std::vector<int64_t> rows;
  };
  std::vector<int64_t> many(700);
  for (size_t i = 0; i < many.size(); ++i) many[i] = static_cast<int64_t>((i * 7) % 1000);
  for (const Case& c : {Case{10, 300, {3, 0, 7}}, Case{10, 300, {2, 2, 5, 2}}, Case{1000, 64, many},
                        Case{4, 2048, {0, 1, 2, 3}}}) {
    const int64_t len = static_cast<int64_t>(c.rows.size());
    Tensor dc = randn({c.n, c.d}, 130), dg = gpu(dc);
    Tensor src = randn({len, c.d}, 131);
    std::vector<float> w = uniform({len}, 132, 0.0f, 1.0f).to_f32_vector();
    ops::scatter_add_rows(dc, src, c.rows, w);
    ops::scatter_add_rows(dg, gpu(src), c.rows, w);
    EXPECT_EQ(dg.device(), Device::CUDA);
    EXPECT_LT(rel(dg, dc), 1e-6) << c.n << "x" << c.d << " rows " << len;
  }
  Tensor dg = gpu(randn({3, 8}, 133));
  Tensor before = dg.to(Device::CPU);
  ops::scatter_add_rows(dg, gpu(randn({0, 8}, 134)), {}, {});  // nothing to add
  EXPECT_EQ(dg.to_f32_vector(), before.to_f32_vector());
}

// Wrong shapes, dtypes or devices are errors (ingot::Error), never a launch
// on bad memory; a state is left as it was.
TEST_F(CudaOps, HybridBadInputsAreErrors) {
  Backend& cuda = backend(Device::CUDA);
  Tensor x = gpu(randn({3, 8}, 140)), w = gpu(randn({8, 4}, 141)), st = gpu(randn({3, 8}, 142));
  const std::vector<float> st_before = st.to_f32_vector();
  Tensor st_cpu = randn({3, 8}, 142);
  Tensor st_bf16 = gpu(randn({3, 8}, 142).to(DType::BF16));
  Tensor st_short = gpu(randn({2, 8}, 143));
  EXPECT_THROW(ops::causal_conv1d(gpu(randn({3, 8, 1}, 144)), w, st), Error);  // x not [T, C]
  EXPECT_THROW(ops::causal_conv1d(x, gpu(randn({7, 4}, 145)), st), Error);     // w rows != C
  EXPECT_THROW(ops::causal_conv1d(x, w, st_short), Error);                      // window of K-2 rows
  EXPECT_THROW(ops::causal_conv1d(x, w, st_cpu), Error);                        // state on the host
  EXPECT_THROW(ops::causal_conv1d(x, w, st_bf16), Error);                       // state not float32
  EXPECT_EQ(st.to_f32_vector(), st_before);

  DeltaInputs in(4, 2, 4, 16, 16, 150);
  Tensor s = gpu(randn({4, 16, 16}, 151));
  const std::vector<float> s_before = s.to_f32_vector();
  Tensor q = gpu(in.q), k = gpu(in.k), v = gpu(in.v), g = gpu(in.g), b = gpu(in.beta);
  Tensor s_cpu = randn({4, 16, 16}, 151), s_wrong = gpu(randn({4, 16, 8}, 152));
  EXPECT_THROW(ops::gated_delta_rule(q, gpu(randn({4, 2, 8}, 153)), v, g, b, s), Error);  // k != q
  EXPECT_THROW(ops::gated_delta_rule(q, k, gpu(randn({4, 3, 16}, 154)), g, b, s), Error);  // hv % hk
  EXPECT_THROW(ops::gated_delta_rule(q, k, gpu(randn({3, 4, 16}, 155)), g, b, s), Error);  // T differs
  EXPECT_THROW(ops::gated_delta_rule(q, k, v, gpu(randn({4, 3}, 156)), b, s), Error);      // g size
  EXPECT_THROW(ops::gated_delta_rule(q, k, v, g, gpu(randn({5, 4}, 157)), s), Error);      // beta size
  EXPECT_THROW(ops::gated_delta_rule(q.reshape({4, 32}), k.reshape({4, 32}), v, g, b, s), Error);  // rank 2
  EXPECT_THROW(ops::gated_delta_rule(q, k, v, g, b, s_wrong), Error);
  EXPECT_THROW(ops::gated_delta_rule(q, k, v, g, b, s_cpu), Error);
  EXPECT_EQ(s.to_f32_vector(), s_before);

  Tensor dst = gpu(randn({4, 8}, 160));
  const std::vector<float> dst_before = dst.to_f32_vector();
  Tensor src = gpu(randn({2, 8}, 161));
  EXPECT_THROW(ops::scatter_add_rows(dst, src, {0, 4}, {1, 1}), Error);   // row out of range
  EXPECT_THROW(ops::scatter_add_rows(dst, src, {0, -1}, {1, 1}), Error);  // negative row
  EXPECT_THROW(ops::scatter_add_rows(dst, src, {0, 1}, {1}), Error);      // weights short
  EXPECT_THROW(ops::scatter_add_rows(dst, src, {0, 1, 2}, {1, 1, 1}), Error);  // src short
  Tensor dst_cpu = randn({4, 8}, 162);
  EXPECT_THROW(cuda.scatter_add_rows(dst_cpu, src, {0, 1}, {1, 1}), Error);  // dst on the host
  EXPECT_EQ(dst.to_f32_vector(), dst_before);
}

// The other ops the Gemma 2/3/4 and Qwen3-Next / 3.5 paths call, at their
// shapes: (1 + w) per-head q/k norms, a quarter-rotary rope, soft-capped and
// windowed attention at head dim 256, GeGLU-tanh, softplus decay, sigmoid gates.
TEST_F(CudaOps, FamilyPathOps) {
  Tensor qh = randn({6, 4, 64}, 170), nw = randn({64}, 171, 0.1f);
  EXPECT_LT(rel(ops::rms_norm(gpu(qh), gpu(nw), 1e-6f, true), ops::rms_norm(qh, nw, 1e-6f, true)), 1e-5);
  RopeSpec quarter;
  quarter.rotary_dim = 16;  // Qwen3-Next: partial_rotary_factor 0.25 of 64
  for (int i = 0; i < 8; ++i) quarter.inv_freq.push_back(std::pow(10000.0f, -i / 8.0f));
  Tensor pos = Tensor::from_i32({0, 1, 2, 3, 4, 500}, {6});
  Tensor rc = qh.clone(), rg = gpu(qh);
  ops::rope_inplace(rc, pos, quarter);
  ops::rope_inplace(rg, pos, quarter);
  EXPECT_LT(rel(rg, rc), 1e-5);
  EXPECT_EQ(rg.to(Device::CPU).slice(2, 16, 64).contiguous().to_f32_vector(),
            qh.slice(2, 16, 64).contiguous().to_f32_vector());  // the rest is untouched
  RopeSpec bad = quarter;
  bad.inv_freq.pop_back();
  EXPECT_THROW(ops::rope_inplace(rg, pos, bad), Error);

  Tensor q = randn({5, 8, 256}, 172), k = randn({40, 4, 256}, 173), v = randn({40, 4, 256}, 174);
  for (auto [cap, window] : {std::pair<float, int64_t>{50.0f, 0}, {50.0f, 16}, {0.0f, 16}}) {
    AttnParams p;
    p.scale = 1.0f / 16;
    p.softcap = cap;
    p.window = window;
    p.q_offset = 35;
    EXPECT_LT(rel(ops::attention(gpu(q), gpu(k), gpu(v), p), ops::attention(q, k, v, p)), 1e-5) << cap << "/" << window;
  }
  Tensor a = randn({7, 96}, 175), b = randn({7, 96}, 176);
  EXPECT_LT(rel(ops::glu(GluOp::GeGluTanh, gpu(a), gpu(b)), ops::glu(GluOp::GeGluTanh, a, b)), 1e-5);
  EXPECT_LT(rel(ops::unary(UnaryOp::Softplus, gpu(a)), ops::unary(UnaryOp::Softplus, a)), 1e-6);
  EXPECT_LT(rel(ops::mul(gpu(a), ops::sigmoid(gpu(b))), ops::mul(a, ops::sigmoid(b))), 1e-6);
  Tensor bias = randn({96}, 177);
  EXPECT_LT(rel(ops::mul(ops::add(gpu(a), gpu(bias)), gpu(bias)), ops::mul(ops::add(a, bias), bias)), 1e-6);
}
