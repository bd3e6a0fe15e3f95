// The GGUF block kernels (Q8_0, Q4_0, Q4_1) against an independent reference of
// their exact arithmetic, the one llama.cpp's CPU backend uses for these types:
// - each 32 activations: amax = max |x|, d = amax / 127, q = x * (127 / amax)
//   rounded to nearest, ties to even (all in float32); d and d * sum(q) are
//   stored as f16 (Q8_0 / Q8_1 activation blocks);
// - each weight block: integer dot of its ints with q, times f16(w.d) * f16(x.d),
//   plus Q4_1's f16(m) * f16(d * sum) (Q4_0: its -8 offset through sum(q)).
// The reference sums the blocks in double; the kernels sum in float, so they
// may differ by float rounding only, bounded by a few ulps of sum |terms|.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "quant/quant.h"
#include "quant/tests/random_weights.h"
#include "quant/xquant.h"
#include "tensor/half.h"
#include "util/error.h"

using namespace ingot;
using namespace ingot::quant;
using ingot::quant::testing::random_blocks;

namespace {

float f16_round(float v) { return f16_to_f32(f32_to_f16(v)); }
float get_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

struct RefBlock {
  float d16 = 0, s16 = 0;
  int sum = 0;
  int q[32] = {};
};

// Round half to even, written out (no reliance on the current rounding mode).
int round_even(float v) {
  const double f = std::floor(static_cast<double>(v));
  const double diff = static_cast<double>(v) - f;
  if (diff > 0.5) return static_cast<int>(f) + 1;
  if (diff < 0.5) return static_cast<int>(f);
  return static_cast<int>(f) % 2 == 0 ? static_cast<int>(f) : static_cast<int>(f) + 1;
}

RefBlock ref_quantize(const float* v) {
  RefBlock b;
  float amax = 0;
  for (int j = 0; j < 32; ++j) amax = std::fabs(v[j]) > amax ? std::fabs(v[j]) : amax;
  const float d = amax / 127.0f;
  const float inv = amax != 0 ? 127.0f / amax : 0.0f;
  for (int j = 0; j < 32; ++j) {
    b.q[j] = round_even(v[j] * inv);
    b.sum += b.q[j];
  }
  b.d16 = f16_round(d);
  b.s16 = f16_round(d * static_cast<float>(b.sum));
  return b;
}

struct Expect {
  double value = 0, bound = 0;  // reference and sum of |products| (for the tolerance)
};

Expect ref_dot(DType t, const uint8_t* row, const RefBlock* x, int64_t nb) {
  Expect e;
  for (int64_t b = 0; b < nb; ++b) {
    int w[32];
    double offset = 0;
    float dw;
    if (t == DType::Q8_0) {
      const uint8_t* p = row + 34 * b;
      dw = get_f16(p);
      for (int i = 0; i < 32; ++i) w[i] = static_cast<int8_t>(p[2 + i]);
    } else {
      const bool min = t == DType::Q4_1;
      const uint8_t* p = row + (min ? 20 : 18) * b;
      dw = get_f16(p);
      const uint8_t* qs = p + (min ? 4 : 2);
      for (int i = 0; i < 16; ++i) {
        w[i] = qs[i] & 0xF;
        w[i + 16] = qs[i] >> 4;
      }
      // Q4_0: value d*(nib-8), so the -8 goes through the integer sum.
      offset = min ? static_cast<double>(get_f16(p + 2)) * x[b].s16
                   : -8.0 * static_cast<double>(dw * x[b].d16) * x[b].sum;
    }
    long long dot = 0, mag = 0;
    for (int i = 0; i < 32; ++i) {
      dot += static_cast<long long>(w[i]) * x[b].q[i];
      mag += std::llabs(static_cast<long long>(w[i]) * x[b].q[i]);
    }
    const double scale = static_cast<double>(dw * x[b].d16);
    e.value += scale * static_cast<double>(dot) + offset;
    // The kernels sum partial dots (lanes) in float: bound by the absolute products.
    e.bound += std::fabs(scale) * static_cast<double>(mag) + std::fabs(offset);
  }
  return e;
}

// Activations with awkward blocks mixed in: all zero, a single non-zero, exact
// ties after scaling (amax 127 makes the scale 1, so 2.5 -> 2 and 3.5 -> 4), huge and tiny.
std::vector<float> awkward_x(int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * k));
  for (auto& v : x) v = g(rng);
  const int64_t blocks = n * k / 32;
  for (int64_t b = 0; b < blocks; ++b) {
    float* v = x.data() + b * 32;
    switch (b % 6) {
      case 1: for (int j = 0; j < 32; ++j) v[j] = 0; break;
      case 2: for (int j = 0; j < 32; ++j) v[j] = j == 5 ? -3.0f : 0.0f; break;
      case 3: v[0] = 127.0f; v[1] = 2.5f; v[2] = 3.5f; v[3] = -2.5f; v[4] = -0.5f; v[5] = 0.5f; break;
      case 4: for (int j = 0; j < 32; ++j) v[j] *= 300.0f; break;  // d * sum stays inside f16
      case 5: for (int j = 0; j < 32; ++j) v[j] *= 1e-5f; break;
      default: break;
    }
  }
  return x;
}

void check_exact(DType t, Isa isa, int64_t m, int64_t k, int64_t n, uint32_t seed) {
  Weight w = random_blocks(t, m, k, seed);
  auto x = awkward_x(n, k, seed + 100);
  const int64_t nb = k / 32;
  std::vector<RefBlock> xb(static_cast<size_t>(n * nb));
  for (int64_t i = 0; i < n * nb; ++i) xb[static_cast<size_t>(i)] = ref_quantize(x.data() + i * 32);
  std::vector<float> y(static_cast<size_t>(n * m));
  kernels(isa, t).linear(x.data(), n, w, y.data());
  const auto* data = static_cast<const uint8_t*>(w.data.raw());
  const size_t rb = row_bytes(w);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      Expect e = ref_dot(t, data + static_cast<size_t>(j) * rb, xb.data() + i * nb, nb);
      // float32 sums of nb + 2 terms: a few ulps of the absolute sum.
      const double tol = 4.0 * static_cast<double>(nb + 2) * std::ldexp(1.0, -24) * e.bound + 1e-30;
      ASSERT_NEAR(y[static_cast<size_t>(i * m + j)], e.value, tol)
          << dtype_name(t) << " " << isa_name(isa) << " m=" << m << " k=" << k << " n=" << n << " row " << i
          << " col " << j;
    }
}

std::vector<Isa> isas() {
  std::vector<Isa> v{Isa::Scalar};
  for (Isa isa : {Isa::Avx2, Isa::Avx512Vnni})
    if (isa_supported(isa)) v.push_back(isa);
  return v;
}

}  // namespace

// The activation blocks themselves: the same ints, sums and f16 scales as the reference.
TEST(IntDot, ActivationBlocksMatchReference) {
  const int64_t n = 3, k = 32 * 7;
  auto x = awkward_x(n, k, 9);
  XRows xr(x.data(), n, k);
  for (int64_t b = 0; b < n * k / 32; ++b) {
    RefBlock r = ref_quantize(x.data() + b * 32);
    const XBlock& got = xr.blocks[b];
    EXPECT_EQ(got.sum, r.sum) << b;
    EXPECT_EQ(got.d16, r.d16) << b;
    EXPECT_EQ(got.s16, r.s16) << b;
    for (int j = 0; j < 32; ++j) ASSERT_EQ(got.q[j], r.q[j]) << "block " << b << " value " << j;
  }
  // The tie block (b % 6 == 3): 2.5 -> 2, 3.5 -> 4, -2.5 -> -2, +-0.5 -> 0.
  const XBlock& tie = xr.blocks[3];
  EXPECT_EQ(tie.q[0], 127);
  EXPECT_EQ(tie.q[1], 2);
  EXPECT_EQ(tie.q[2], 4);
  EXPECT_EQ(tie.q[3], -2);
  EXPECT_EQ(tie.q[4], 0);
  EXPECT_EQ(tie.q[5], 0);
}

// The vector quantizer (taken where the CPU has AVX2) equals the scalar loop
// field for field, on every kind of block awkward_x makes.
TEST(IntDot, VectorActivationQuantizerEqualsScalar) {
  const int64_t count = 6 * 40;
  auto x = awkward_x(1, count * 32, 21);
  std::vector<XBlock> simd(static_cast<size_t>(count)), scalar(static_cast<size_t>(count));
  quantize_activation_blocks(x.data(), count, simd.data(), true);
  quantize_activation_blocks(x.data(), count, scalar.data(), false);
  for (int64_t b = 0; b < count; ++b) {
    const XBlock &p = simd[static_cast<size_t>(b)], &r = scalar[static_cast<size_t>(b)];
    EXPECT_EQ(p.d, r.d) << b;
    EXPECT_EQ(p.sum, r.sum) << b;
    EXPECT_EQ(p.d16, r.d16) << b;
    EXPECT_EQ(p.s16, r.s16) << b;
    for (int j = 0; j < 32; ++j) ASSERT_EQ(p.q[j], r.q[j]) << "block " << b << " value " << j;
  }
}

TEST(IntDot, KernelsMatchExactArithmeticOnOddShapes) {
  const int64_t shapes[][3] = {{1, 32, 1}, {37, 224, 3}, {13, 608, 5}, {70, 96, 1}, {5, 1536, 2}, {21, 288, 9}};
  uint32_t seed = 1;
  for (DType t : {DType::Q4_1, DType::Q4_0, DType::Q8_0})
    for (Isa isa : isas())
      for (const auto& s : shapes) check_exact(t, isa, s[0], s[1], s[2], seed++);
}

// Any output row alone (a one-row weight) equals the same row inside a larger weight, bit for bit,
// whichever position it has among the rows computed together.
TEST(IntDot, RowPositionDoesNotChangeResult) {
  const int64_t m = 23, k = 160, n = 2;
  for (DType t : {DType::Q4_1, DType::Q4_0, DType::Q8_0}) {
    Weight w = random_blocks(t, m, k, 77);
    auto x = awkward_x(n, k, 5);
    for (Isa isa : isas()) {
      std::vector<float> all(static_cast<size_t>(n * m));
      kernels(isa, t).linear(x.data(), n, w, all.data());
      for (int64_t j = 0; j < m; ++j) {
        Weight one;
        one.data = w.data.slice(0, j, j + 1);
        std::vector<float> y(static_cast<size_t>(n));
        kernels(isa, t).linear(x.data(), n, one, y.data());
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(std::memcmp(&y[static_cast<size_t>(i)], &all[static_cast<size_t>(i * m + j)], 4), 0)
              << dtype_name(t) << " " << isa_name(isa) << " col " << j;
      }
    }
  }
}

TEST(IntDot, BadInputFailsClearly) {
  for (DType t : {DType::Q4_1, DType::Q4_0, DType::Q8_0}) {
    std::vector<float> x(64), y(4, 7.0f);
    for (Isa isa : isas()) {
      // A width that is not a whole number of blocks: a clear error (from the tensor or the kernel).
      EXPECT_THROW(
          {
            Weight bad;
            bad.data = Tensor::empty({4, 48}, t);
            kernels(isa, t).linear(x.data(), 1, bad, y.data());
          },
          Error)
          << dtype_name(t);
      // No activation rows: nothing is written.
      Weight w = random_blocks(t, 4, 64, 3);
      kernels(isa, t).linear(x.data(), 0, w, y.data());
      for (float v : y) EXPECT_EQ(v, 7.0f);
    }
  }
}
