// The op vocabulary through ops:: on the CPU backend: naive double references,
// non-contiguous inputs, PARITY.md's argmax rule and batch invariance.
#include "ops/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/kernels.h"
#include "backend/cpu/tests/test_util.h"
#include "tensor/half.h"
#include "util/error.h"

namespace ingot::cpu {
namespace {

using testing::IsaGuard;
using testing::random_floats;
using testing::random_tensor;

void expect_close(const std::vector<float>& got, const std::vector<double>& ref, double tol,
                  const char* what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], ref[i], tol * (1.0 + std::fabs(ref[i]))) << what << " at " << i;
}

class OpsPerIsa : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override { set_isa(GetParam()); }
  IsaGuard guard_;
};

// x arrives as a transposed view and as a column slice; W is bf16.
TEST_P(OpsPerIsa, LinearOnNonContiguousInputs) {
  const int64_t n = 6, k = 19, m = 11;
  Tensor xt = random_tensor({k, n}, 1);  // x = xtᵀ
  Tensor x = xt.transpose(0, 1);
  ASSERT_FALSE(x.is_contiguous());
  Weight w;
  w.data = random_tensor({m, k}, 2).to(DType::BF16);
  Tensor bias = random_tensor({m}, 3);
  Tensor y = ops::linear(x, w, &bias);
  std::vector<float> xv = xt.to_f32_vector(), wv = w.data.to(DType::F32).to_f32_vector(),
                     bv = bias.to_f32_vector();
  std::vector<double> ref(static_cast<size_t>(n * m));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      double s = bv[j];
      for (int64_t c = 0; c < k; ++c) s += static_cast<double>(xv[c * n + i]) * wv[j * k + c];
      ref[i * m + j] = s;
    }
  expect_close(y.to_f32_vector(), ref, 1e-5, "linear(transposed x)");

  Tensor wide = random_tensor({n, k + 9}, 4);
  Tensor xs = wide.slice(1, 4, 4 + k);
  ASSERT_FALSE(xs.is_contiguous());
  Tensor ys = ops::linear(xs, w);
  Tensor yc = ops::linear(xs.contiguous(), w);
  EXPECT_EQ(ys.to_f32_vector(), yc.to_f32_vector());
}

TEST_P(OpsPerIsa, MatmulOfActivations) {
  const int64_t n = 5, k = 33, m = 7;
  Tensor a = random_tensor({n, k}, 5), b = random_tensor({k, m}, 6);
  Tensor y = ops::matmul(a, b);
  auto av = a.to_f32_vector(), bv = b.to_f32_vector();
  std::vector<double> ref(static_cast<size_t>(n * m));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j)
      for (int64_t c = 0; c < k; ++c) ref[i * m + j] += static_cast<double>(av[i * k + c]) * bv[c * m + j];
  expect_close(y.to_f32_vector(), ref, 1e-5, "matmul");
}

TEST_P(OpsPerIsa, RmsNormAndSoftmax) {
  for (int64_t d : {1, 7, 16, 33, 130}) {
    const int64_t n = 3;
    Tensor x = random_tensor({n, d}, 7 + static_cast<uint32_t>(d), -3, 3);
    Tensor w = random_tensor({d}, 8);
    for (bool unit : {false, true}) {
      Tensor y = ops::rms_norm(x, w, 1e-5f, unit);
      auto xv = x.to_f32_vector(), wv = w.to_f32_vector();
      std::vector<double> ref(static_cast<size_t>(n * d));
      for (int64_t i = 0; i < n; ++i) {
        double ss = 0;
        for (int64_t j = 0; j < d; ++j) ss += static_cast<double>(xv[i * d + j]) * xv[i * d + j];
        double inv = 1.0 / std::sqrt(ss / d + 1e-5);
        for (int64_t j = 0; j < d; ++j) ref[i * d + j] = xv[i * d + j] * inv * (unit ? 1.0 + wv[j] : wv[j]);
      }
      expect_close(y.to_f32_vector(), ref, 1e-5, "rms_norm");
    }
    Tensor s = ops::softmax(x);
    auto xv = x.to_f32_vector();
    std::vector<double> ref(static_cast<size_t>(n * d));
    for (int64_t i = 0; i < n; ++i) {
      double mx = -1e30, sum = 0;
      for (int64_t j = 0; j < d; ++j) mx = std::max(mx, static_cast<double>(xv[i * d + j]));
      for (int64_t j = 0; j < d; ++j) sum += std::exp(xv[i * d + j] - mx);
      for (int64_t j = 0; j < d; ++j) ref[i * d + j] = std::exp(xv[i * d + j] - mx) / sum;
    }
    expect_close(s.to_f32_vector(), ref, 1e-5, "softmax");
  }
  // A strided (sliced) input normalises like its contiguous copy.
  Tensor big = random_tensor({4, 40}, 9);
  Tensor view = big.slice(1, 3, 35);
  Tensor w = random_tensor({32}, 10);
  EXPECT_EQ(ops::rms_norm(view, w, 1e-6f).to_f32_vector(),
            ops::rms_norm(view.contiguous(), w, 1e-6f).to_f32_vector());
}

double ref_silu(double x) { return x / (1 + std::exp(-x)); }
double ref_gelu_tanh(double x) {
  return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

TEST_P(OpsPerIsa, Activations) {
  Tensor g = random_tensor({3, 37}, 11, -6, 6), u = random_tensor({3, 37}, 12);
  auto gv = g.to_f32_vector(), uv = u.to_f32_vector();
  std::vector<double> sw(gv.size()), si(gv.size()), ge(gv.size()), gg(gv.size());
  for (size_t i = 0; i < gv.size(); ++i) {
    si[i] = ref_silu(gv[i]);
    sw[i] = si[i] * uv[i];
    ge[i] = ref_gelu_tanh(gv[i]);
    gg[i] = 0.5 * gv[i] * (1 + std::erf(gv[i] / std::sqrt(2.0)));
  }
  expect_close(ops::swiglu(g, u).to_f32_vector(), sw, 1e-5, "swiglu");
  expect_close(ops::silu(g).to_f32_vector(), si, 1e-5, "silu");
  expect_close(ops::gelu_tanh(g).to_f32_vector(), ge, 1e-5, "gelu_tanh");
  expect_close(ops::gelu(g).to_f32_vector(), gg, 1e-5, "gelu");
  // The vector exp's clamped range and the tails: silu of large magnitudes, odd lengths.
  for (int64_t n : {1, 7, 19}) {
    std::vector<float> big = random_floats(static_cast<size_t>(n), 30 + static_cast<uint32_t>(n), -120, 120);
    big[0] = n == 7 ? -87.5f : 88.5f;
    std::vector<double> ref(big.size());
    for (size_t i = 0; i < big.size(); ++i) ref[i] = ref_silu(big[i]);
    expect_close(ops::silu(Tensor::from_f32(big, {n})).to_f32_vector(), ref, 1e-5, "silu wide range");
  }
  // Elementwise with broadcasting of a row.
  Tensor row = random_tensor({37}, 13);
  auto rv = row.to_f32_vector();
  std::vector<double> ad(gv.size());
  for (size_t i = 0; i < gv.size(); ++i) ad[i] = static_cast<double>(gv[i]) * rv[i % 37];
  expect_close(ops::mul(g, row).to_f32_vector(), ad, 1e-6, "mul broadcast");
  std::vector<double> sum(gv.size()), diff(gv.size()), quot(gv.size());
  for (size_t i = 0; i < gv.size(); ++i) {
    sum[i] = static_cast<double>(gv[i]) + uv[i];
    diff[i] = static_cast<double>(gv[i]) - rv[i % 37];
    quot[i] = static_cast<double>(gv[i]) / 4.0;
  }
  expect_close(ops::add(g, u).to_f32_vector(), sum, 1e-6, "add");
  expect_close(ops::sub(g, row).to_f32_vector(), diff, 1e-6, "sub broadcast");
  expect_close(ops::div(g, Tensor::from_f32({4.0f}, {1})).to_f32_vector(), quot, 1e-6, "div scalar");
}

TEST_P(OpsPerIsa, RopeRotatesPairs) {
  const int64_t t = 3, h = 2, d = 10;
  RopeSpec spec;
  spec.rotary_dim = 8;  // partial rotary: the last 2 dims pass through
  for (int j = 0; j < 4; ++j) spec.inv_freq.push_back(std::pow(10000.0f, -2.0f * j / 8));
  for (bool inter : {false, true}) {
    spec.interleaved = inter;
    Tensor x = random_tensor({t, h, d}, 14);
    auto xv = x.to_f32_vector();
    Tensor pos = Tensor::from_i32({0, 5, 17}, {t});
    ops::rope_inplace(x, pos, spec);
    auto yv = x.to_f32_vector();
    const int p[] = {0, 5, 17};
    for (int64_t i = 0; i < t; ++i)
      for (int64_t hh = 0; hh < h; ++hh) {
        const float* r = &xv[static_cast<size_t>((i * h + hh) * d)];
        const float* o = &yv[static_cast<size_t>((i * h + hh) * d)];
        for (int j = 0; j < 4; ++j) {
          int a = inter ? 2 * j : j, b = inter ? 2 * j + 1 : j + 4;
          double f = static_cast<double>(static_cast<float>(p[i]) * spec.inv_freq[static_cast<size_t>(j)]);
          EXPECT_NEAR(o[a], r[a] * std::cos(f) - r[b] * std::sin(f), 1e-5);
          EXPECT_NEAR(o[b], r[b] * std::cos(f) + r[a] * std::sin(f), 1e-5);
        }
        EXPECT_EQ(o[8], r[8]);
        EXPECT_EQ(o[9], r[9]);
      }
  }
}

TEST_P(OpsPerIsa, EmbeddingGathersExactRows) {
  Weight table;
  table.data = random_tensor({50, 13}, 15).to(DType::BF16);
  Tensor ids = Tensor::from_i32({3, 0, 49, 3}, {4});
  Tensor e = ops::embedding(table, ids);
  auto tv = table.data.to(DType::F32).to_f32_vector(), ev = e.to_f32_vector();
  const int rows[] = {3, 0, 49, 3};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 13; ++j) EXPECT_EQ(ev[i * 13 + j], tv[rows[i] * 13 + j]);
  EXPECT_THROW(ops::embedding(table, Tensor::from_i32({50}, {1})), Error);
  EXPECT_THROW(ops::embedding(table, Tensor::from_i32({-1}, {1})), Error);
}

struct AttnCase {
  int64_t t, s, h, kvh, d;
  bool causal;
  int64_t window;
  float softcap;
  DType kv;
};

std::vector<double> ref_attention(const std::vector<float>& q, const std::vector<float>& k,
                                  const std::vector<float>& v, const AttnCase& c, const AttnParams& p) {
  std::vector<double> out(static_cast<size_t>(c.t * c.h * c.d), 0.0);
  for (int64_t i = 0; i < c.t; ++i)
    for (int64_t hh = 0; hh < c.h; ++hh) {
      int64_t kh = hh / (c.h / c.kvh), qpos = p.q_offset + i;
      std::vector<double> sc(static_cast<size_t>(c.s), -INFINITY);
      double mx = -INFINITY;
      for (int64_t j = 0; j < c.s; ++j) {
        if (c.causal && j > qpos) continue;
        if (c.window > 0 && j <= qpos - c.window) continue;
        double dd = 0;
        for (int64_t e = 0; e < c.d; ++e)
          dd += static_cast<double>(q[(i * c.h + hh) * c.d + e]) * k[(j * c.kvh + kh) * c.d + e];
        dd *= p.scale;
        if (c.softcap > 0) dd = std::tanh(dd / c.softcap) * c.softcap;
        sc[static_cast<size_t>(j)] = dd;
        mx = std::max(mx, dd);
      }
      if (mx == -INFINITY) continue;
      double sum = 0;
      for (double& x : sc) sum += (x = std::exp(x - mx));
      for (int64_t j = 0; j < c.s; ++j)
        for (int64_t e = 0; e < c.d; ++e)
          out[static_cast<size_t>((i * c.h + hh) * c.d + e)] +=
              sc[static_cast<size_t>(j)] / sum * v[(j * c.kvh + kh) * c.d + e];
    }
  return out;
}

TEST_P(OpsPerIsa, AttentionMatchesReferenceAndIsRowInvariant) {
  const AttnCase cases[] = {
      {1, 1, 1, 1, 1, true, 0, 0, DType::F32},        {5, 5, 4, 2, 17, true, 0, 0, DType::F32},
      {3, 11, 6, 2, 64, true, 0, 0, DType::BF16},     {7, 7, 2, 1, 33, true, 3, 0, DType::F32},
      {4, 9, 4, 4, 16, false, 0, 20.0f, DType::BF16}, {6, 6, 8, 2, 24, true, 0, 0, DType::F16},
      // Several key chunks (256 keys each), prompt blocks and decode splits,
      // head dims with register tails, windows that start mid-tile.
      {24, 530, 9, 3, 64, true, 0, 0, DType::BF16},   {3, 600, 4, 1, 128, true, 100, 0, DType::F32},
      {2, 530, 6, 3, 80, true, 0, 0, DType::F16},     {13, 290, 8, 2, 8, true, 37, 0, DType::F32},
      {1, 520, 4, 4, 256, true, 0, 0, DType::BF16},
  };
  for (const AttnCase& c : cases) {
    Tensor q = random_tensor({c.t, c.h, c.d}, 20, -2, 2);
    Tensor k = random_tensor({c.s, c.kvh, c.d}, 21, -2, 2).to(c.kv);
    Tensor v = random_tensor({c.s, c.kvh, c.d}, 22).to(c.kv);
    AttnParams p;
    p.scale = 1.0f / std::sqrt(static_cast<float>(c.d));
    p.causal = c.causal;
    p.window = c.window;
    p.softcap = c.softcap;
    p.q_offset = c.s - c.t;
    Tensor o = ops::attention(q, k, v, p);
    auto ref = ref_attention(q.to_f32_vector(), k.to(DType::F32).to_f32_vector(),
                             v.to(DType::F32).to_f32_vector(), c, p);
    expect_close(o.to_f32_vector(), ref, 2e-5, "attention");
    // Each query row alone (with its own offset) gives the same bits as in the block.
    auto full = o.to_f32_vector();
    for (int64_t i = 0; i < c.t; ++i) {
      AttnParams pi = p;
      pi.q_offset = p.q_offset + i;
      Tensor oi = ops::attention(q.slice(0, i, i + 1).contiguous(), k, v, pi);
      auto row = oi.to_f32_vector();
      ASSERT_EQ(0, std::memcmp(row.data(), &full[static_cast<size_t>(i * c.h * c.d)], row.size() * 4))
          << "row " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, OpsPerIsa, ::testing::ValuesIn(supported_isas()),
                         [](const ::testing::TestParamInfo<Isa>& i) {
                           return std::string(isa_name(i.param));
                         });

std::vector<int32_t> argmax_of(const std::vector<float>& v, int64_t rows) {
  return ops::argmax(Tensor::from_f32(v, {rows, static_cast<int64_t>(v.size()) / rows})).to_i32_vector();
}

TEST(Argmax, LowestIdWinsTiesAndNonFiniteRowsGiveZero) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(argmax_of({1, 3, 2, 3}, 1), std::vector<int32_t>{1});
  EXPECT_EQ(argmax_of({5, 5, 5}, 1), std::vector<int32_t>{0});
  EXPECT_EQ(argmax_of({0, 1, nan, 2}, 1), std::vector<int32_t>{0});
  EXPECT_EQ(argmax_of({0, inf, 2}, 1), std::vector<int32_t>{0});
  EXPECT_EQ(argmax_of({-inf, -inf}, 1), std::vector<int32_t>{0});
  EXPECT_EQ(argmax_of({-inf, 4, -inf}, 1), std::vector<int32_t>{1});
  EXPECT_EQ(argmax_of({7}, 1), std::vector<int32_t>{0});
  // Two rows at once are judged independently.
  EXPECT_EQ(argmax_of({0, 2, 2, nan, 9, 8, 1, 1}, 2), (std::vector<int32_t>{0, 0}));
  EXPECT_EQ(argmax_of({0, 2, 2, 1, 9, 8, 9, 1}, 2), (std::vector<int32_t>{1, 0}));
}

}  // namespace
}  // namespace ingot::cpu
