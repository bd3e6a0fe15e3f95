// Q8_0 / Q4_0 / Q4_1 rows interleaved by 8: the layout keeps every value, the
// kernels give the same bits on every instruction set and batch size, and
// the CPU backend re-lays weights at load only where the layout applies.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "quant/interleave.h"
#include "quant/quant.h"
#include "quant/tests/random_weights.h"
#include "tensor/half.h"
#include "util/error.h"

using namespace ingot;
using namespace ingot::quant;
using ingot::quant::testing::random_blocks;
using ingot::quant::testing::random_x;

namespace {

std::vector<float> run(Isa isa, const Weight& w, const std::vector<float>& x, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n * w.rows()));
  kernels(isa, w.dtype()).linear(x.data(), n, w, y.data());
  return y;
}

std::vector<Isa> isas_here() {
  std::vector<Isa> v;
  for (Isa i : {Isa::Scalar, Isa::Avx2, Isa::Avx512Vnni})
    if (isa_supported(i)) v.push_back(i);
  return v;
}

const DType kFormats[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1};

DType interleaved(DType t) {
  return t == DType::Q8_0 ? DType::Q8_0x8 : t == DType::Q4_0 ? DType::Q4_0x8 : DType::Q4_1x8;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST(Interleave, KeepsEveryValue) {
  for (DType t : kFormats) {
    Weight w = random_blocks(t, 24, 96, 5);
    Weight x8 = interleave_rows(w);
    ASSERT_EQ(x8.dtype(), interleaved(t));
    EXPECT_EQ(x8.nbytes(), w.nbytes());
    std::vector<float> a(96), b(96);
    for (int64_t r = 0; r < w.rows(); ++r) {
      dequantize_row(w, r, a.data());
      dequantize_row(x8, r, b.data());
      ASSERT_EQ(a, b) << dtype_name(t) << " row " << r;
      kernels(best_isa(), x8.dtype()).dequant_row(x8, r, b.data());
      ASSERT_EQ(a, b) << dtype_name(t) << " row " << r << " (embedding kernel)";
    }
  }
}

TEST(Interleave, OnlyWholeGroupsOfTheThreeFormats) {
  Weight odd = random_blocks(DType::Q4_1, 37, 64, 1);
  EXPECT_FALSE(can_interleave(odd));
  EXPECT_EQ(interleave_rows(odd).dtype(), DType::Q4_1);
  Weight k4 = random_blocks(DType::Q4_K, 40, 256, 2);
  EXPECT_FALSE(can_interleave(k4));
  EXPECT_EQ(interleave_rows(k4).dtype(), DType::Q4_K);
  EXPECT_FALSE(can_interleave(interleave_rows(random_blocks(DType::Q8_0, 8, 64, 3))));  // already interleaved
  for (DType t : kFormats) EXPECT_TRUE(can_interleave(random_blocks(t, 8, 64, 3))) << dtype_name(t);
}

// The integer dot of a block is exact and the float steps are fixed, so every
// instruction set and every batch size gives the same bits (batches that
// fill whole passes of rows, and those with 1, 2 or 3 rows left over).
TEST(Interleave, SameBitsOnEveryIsaAndBatch) {
  for (DType t : kFormats) {
    Weight w = interleave_rows(random_blocks(t, 48, 576, 7));
    for (int64_t n : {2, 3, 5, 6, 7, 9}) {
      auto x = random_x(n, w.cols(), 9);
      const auto ref = run(Isa::Scalar, w, x, n);
      for (Isa isa : isas_here()) {
        EXPECT_TRUE(same_bits(run(isa, w, x, n), ref)) << dtype_name(t) << " " << isa_name(isa) << " n " << n;
        for (int64_t i = 0; i < n; ++i) {
          std::vector<float> xi(x.begin() + i * w.cols(), x.begin() + (i + 1) * w.cols());
          std::vector<float> want(ref.begin() + i * w.rows(), ref.begin() + (i + 1) * w.rows());
          ASSERT_TRUE(same_bits(run(isa, w, xi, 1), want))
              << dtype_name(t) << " " << isa_name(isa) << " row " << i << " of " << n;
        }
      }
    }
  }
}

// The file-layout kernels sum in another order; both stay within float
// rounding of each other.
TEST(Interleave, AgreesWithTheFileLayoutKernels) {
  for (DType t : kFormats) {
    Weight w = random_blocks(t, 64, 1024, 11);
    Weight x8 = interleave_rows(w);
    const int64_t n = 3;
    auto x = random_x(n, w.cols(), 12);
    auto a = run(best_isa(), w, x, n), b = run(best_isa(), x8, x, n);
    double worst = 0, scale = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]));
      scale = std::max(scale, std::fabs(static_cast<double>(a[i])));
    }
    EXPECT_LT(worst, 1e-5 * scale) << dtype_name(t);
  }
}

// The largest integer sums a block can reach (every nibble 15, every
// activation +-127) stay exact: the SIMD paths add eight 16-bit partial sums
// before widening, and must not saturate.
TEST(Interleave, ExtremeBlocksDoNotSaturate) {
  for (float sign : {1.0f, -1.0f}) {
    Weight w = random_blocks(DType::Q4_1, 8, 64, 3);
    auto* p = w.data.data<uint8_t>();
    const uint16_t one = f32_to_f16(1.0f), zero = f32_to_f16(0.0f);
    for (int64_t b = 0; b < w.rows() * 2; ++b) {
      uint8_t* blk = p + b * 20;
      std::memcpy(blk, &one, 2);
      std::memcpy(blk + 2, &zero, 2);
      std::memset(blk + 4, 0xFF, 16);
    }
    Weight x8 = interleave_rows(w);
    std::vector<float> x(64, sign);
    const auto ref = run(Isa::Scalar, x8, x, 1);
    // 2 blocks x 32 values x 15 x (+-127) x d16, d16 = f16(1/127).
    const float want = sign * 2.0f * (32.0f * 15.0f * 127.0f * f16_to_f32(f32_to_f16(1.0f / 127.0f)));
    EXPECT_NEAR(ref[0], want, std::fabs(want) * 1e-6);
    for (Isa isa : isas_here()) EXPECT_TRUE(same_bits(run(isa, x8, x, 1), ref)) << isa_name(isa);
  }
}

// Q8_0's largest products: every value -128 (its |w| is 128 as an unsigned
// byte) against activations of +-127.
TEST(Interleave, ExtremeQ8BlocksDoNotSaturate) {
  for (float sign : {1.0f, -1.0f}) {
    Weight w = random_blocks(DType::Q8_0, 8, 64, 4);
    auto* p = w.data.data<uint8_t>();
    const uint16_t one = f32_to_f16(1.0f);
    for (int64_t b = 0; b < w.rows() * 2; ++b) {
      std::memcpy(p + b * 34, &one, 2);
      std::memset(p + b * 34 + 2, 0x80, 32);
    }
    Weight x8 = interleave_rows(w);
    std::vector<float> x(64, sign);
    const auto ref = run(Isa::Scalar, x8, x, 1);
    const float want = sign * 2.0f * (32.0f * -128.0f * 127.0f * f16_to_f32(f32_to_f16(1.0f / 127.0f)));
    EXPECT_NEAR(ref[0], want, std::fabs(want) * 1e-6);
    for (Isa isa : isas_here()) EXPECT_TRUE(same_bits(run(isa, x8, x, 1), ref)) << isa_name(isa);
  }
}

// The CPU backend re-lays Q8_0 / Q4 weights when they are loaded; results stay those
// of the interleaved kernels, and embedding rows read the same values.
TEST(Interleave, CpuBackendPreparesBlockWeights) {
  install_cpu_kernels();
  cpu::CpuBackend be;
  Weight w = random_blocks(DType::Q4_1, 16, 64, 21);
  Weight p = be.prepare_weight(w);
  EXPECT_EQ(p.dtype(), DType::Q4_1x8);
  EXPECT_EQ(be.prepare_weight(random_blocks(DType::Q8_0, 16, 64, 22)).dtype(), DType::Q8_0x8);
  EXPECT_EQ(be.prepare_weight(random_blocks(DType::Q6_K, 16, 256, 23)).dtype(), DType::Q6_K);
  auto x = random_x(2, 64, 4);
  Tensor xt = Tensor::empty({2, 64}, DType::F32);
  std::memcpy(xt.raw(), x.data(), x.size() * 4);
  Tensor y = be.linear(xt, p, nullptr);
  std::vector<float> got(y.data<float>(), y.data<float>() + 32);
  EXPECT_TRUE(same_bits(got, run(best_isa(), p, x, 2)));
  Tensor ids = Tensor::empty({1}, DType::I32);
  ids.data<int32_t>()[0] = 13;
  Tensor e = be.embedding(p, ids);
  std::vector<float> row(64);
  dequantize_row(w, 13, row.data());
  EXPECT_EQ(std::vector<float>(e.data<float>(), e.data<float>() + 64), row);
}

// q/k/v through one pass (x quantized once): each output is bit for bit the
// one linear() gives for that weight; mixed formats and a width mismatch
// fall back or fail clearly.
TEST(Interleave, LinearManyEqualsEachAlone) {
  install_cpu_kernels();
  cpu::CpuBackend be;
  Weight q = be.prepare_weight(random_blocks(DType::Q4_1, 64, 128, 31));
  Weight k = be.prepare_weight(random_blocks(DType::Q4_1, 16, 128, 32));
  Weight v = be.prepare_weight(random_blocks(DType::Q4_1, 24, 128, 33));
  for (int64_t n : {1, 2, 5}) {
    auto xv = random_x(n, 128, 34);
    Tensor x = Tensor::empty({n, 128}, DType::F32);
    std::memcpy(x.raw(), xv.data(), xv.size() * 4);
    Tensor bias = Tensor::empty({16}, DType::F32);
    for (int i = 0; i < 16; ++i) bias.data<float>()[i] = 0.25f * i;
    std::vector<Tensor> many = be.linear_many(x, {&q, &k, &v}, {nullptr, &bias, nullptr});
    const Weight* ws[] = {&q, &k, &v};
    const Tensor* bs[] = {nullptr, &bias, nullptr};
    for (int i = 0; i < 3; ++i) {
      Tensor one = be.linear(x, *ws[i], bs[i]);
      ASSERT_EQ(many[i].shape().vec(), one.shape().vec());
      EXPECT_EQ(std::memcmp(many[i].raw(), one.raw(), one.nbytes()), 0) << "weight " << i << " n " << n;
    }
    Tensor glu = be.glu_linear(GluOp::SwiGlu, x, q, q, nullptr, nullptr);
    Tensor ref = be.glu(GluOp::SwiGlu, be.linear(x, q, nullptr), be.linear(x, q, nullptr));
    EXPECT_EQ(std::memcmp(glu.raw(), ref.raw(), ref.nbytes()), 0) << "n " << n;
  }
  Tensor x = Tensor::empty({1, 128}, DType::F32);
  std::memset(x.raw(), 0, x.nbytes());
  Weight q8 = be.prepare_weight(random_blocks(DType::Q8_0, 8, 128, 35));
  EXPECT_EQ(be.linear_many(x, {&q, &q8}, {}).size(), 2u);  // two formats: one pass each
  Weight wide = be.prepare_weight(random_blocks(DType::Q4_1, 8, 256, 36));
  EXPECT_THROW(be.linear_many(x, {&q, &wide}, {}), Error);
}
