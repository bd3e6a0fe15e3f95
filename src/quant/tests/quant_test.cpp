#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "quant/interleave.h"
#include "quant/q8_0_writer.h"
#include "quant/quant.h"
#include "quant/tests/random_weights.h"
#include "tensor/half.h"
#include "util/error.h"

using namespace ingot;
using namespace ingot::quant;
using ingot::quant::testing::random_affine;
using ingot::quant::testing::random_blocks;
using ingot::quant::testing::random_x;

namespace {

double rel(const std::vector<float>& a, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (static_cast<double>(a[i]) - ref[i]) * (static_cast<double>(a[i]) - ref[i]);
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return std::sqrt(num / den);
}

struct Case {
  const char* name;
  Weight w;
};

std::vector<Case> cases() {
  std::vector<Case> c;
  c.push_back({"q8_0", random_blocks(DType::Q8_0, 37, 320, 1)});
  c.push_back({"q4_0", random_blocks(DType::Q4_0, 37, 320, 2)});
  c.push_back({"q4_1", random_blocks(DType::Q4_1, 37, 320, 3)});
  c.push_back({"q8_0x8", interleave_rows(random_blocks(DType::Q8_0, 40, 320, 14))});
  c.push_back({"q4_0x8", interleave_rows(random_blocks(DType::Q4_0, 40, 320, 12))});
  c.push_back({"q4_1x8", interleave_rows(random_blocks(DType::Q4_1, 40, 320, 13))});
  c.push_back({"q4_k", random_blocks(DType::Q4_K, 37, 512, 4)});
  c.push_back({"q5_k", random_blocks(DType::Q5_K, 37, 512, 5)});
  c.push_back({"q6_k", random_blocks(DType::Q6_K, 37, 512, 6)});
  c.push_back({"affine4_g32", random_affine(4, 32, 37, 256, 7)});
  c.push_back({"affine4_g64", random_affine(4, 64, 37, 256, 8)});
  c.push_back({"affine4_g128", random_affine(4, 128, 37, 256, 9)});
  c.push_back({"affine8_g64", random_affine(8, 64, 37, 256, 10)});
  c.push_back({"affine8_g128", random_affine(8, 128, 37, 384, 11)});
  return c;
}

DType key_of(const Weight& w) { return w.is_affine() ? DType::U32 : w.dtype(); }

std::vector<float> run(Isa isa, const Weight& w, const std::vector<float>& x, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n * w.rows()));
  kernels(isa, key_of(w)).linear(x.data(), n, w, y.data());
  return y;
}

}  // namespace

// Integer kernels against dequantize-then-float: the only difference is the
// int8 rounding of the activations (about 0.4 % of each block's max).
TEST(Quant, ScalarMatchesFloatReference) {
  for (const auto& c : cases()) {
    const int64_t n = 5;
    auto x = random_x(n, c.w.cols(), 42);
    std::vector<float> ref(static_cast<size_t>(n * c.w.rows()));
    reference_linear(x.data(), n, c.w, ref.data());
    EXPECT_LT(rel(run(Isa::Scalar, c.w, x, n), ref), 1.5e-2) << c.name;
  }
}

// One test per SIMD path; a path this CPU cannot run is reported as skipped
// (never as passed), and the dispatcher never picks it here.
class QuantSimd : public ::testing::TestWithParam<Isa> {};

TEST_P(QuantSimd, MatchesScalar) {
  const Isa isa = GetParam();
  if (!isa_supported(isa)) GTEST_SKIP() << "this CPU lacks " << isa_name(isa);
  for (const auto& c : cases()) {
    const int64_t n = 3;
    auto x = random_x(n, c.w.cols(), 7);
    auto s = run(Isa::Scalar, c.w, x, n);
    auto v = run(isa, c.w, x, n);
    EXPECT_LT(rel(v, s), 2e-6) << c.name << " " << isa_name(isa);
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, QuantSimd, ::testing::Values(Isa::Avx2, Isa::Avx512Vnni),
                         [](const ::testing::TestParamInfo<Isa>& i) {
                           return i.param == Isa::Avx2 ? std::string("Avx2") : std::string("Avx512Vnni");
                         });

// A row computed alone equals the same row inside any batch, bit for bit.
TEST(Quant, BatchInvariant) {
  for (const auto& c : cases()) {
    const int64_t n = 9;  // odd on purpose
    auto x = random_x(n, c.w.cols(), 3);
    Isa isa = best_isa();
    auto all = run(isa, c.w, x, n);
    for (int64_t i : {int64_t{0}, int64_t{4}, n - 1}) {
      std::vector<float> xi(x.begin() + i * c.w.cols(), x.begin() + (i + 1) * c.w.cols());
      auto one = run(isa, c.w, xi, 1);
      for (int64_t j = 0; j < c.w.rows(); ++j)
        ASSERT_EQ(std::memcmp(&one[static_cast<size_t>(j)], &all[static_cast<size_t>(i * c.w.rows() + j)], 4), 0)
            << c.name << " row " << i << " col " << j;
    }
  }
}

TEST(Quant, DequantRowKernelMatchesReference) {
  for (const auto& c : cases()) {
    auto k = kernels(best_isa(), key_of(c.w));
    std::vector<float> a(static_cast<size_t>(c.w.cols())), b(a.size());
    for (int64_t r : {int64_t{0}, c.w.rows() - 1}) {
      k.dequant_row(c.w, r, a.data());
      dequantize_row(c.w, r, b.data());
      EXPECT_EQ(a, b) << c.name;
    }
  }
}

// Affine dequantization against a direct reading of the MLX layout.
TEST(Quant, AffineLayout) {
  Weight w = random_affine(4, 32, 2, 64, 5);
  std::vector<float> row(64);
  dequantize_row(w, 1, row.data());
  const uint32_t word = w.data.data<uint32_t>()[1 * 8 + 0];
  for (int i = 0; i < 8; ++i) {
    float want = w.scales.data<float>()[2] * static_cast<float>((word >> (4 * i)) & 15) + w.biases.data<float>()[2];
    EXPECT_FLOAT_EQ(row[static_cast<size_t>(i)], want);
  }
}

TEST(Quant, BadShapesFailClearly) {
  Weight w = random_affine(4, 48, 2, 96, 5);  // group not a multiple of 32
  std::vector<float> x(96), y(2);
  EXPECT_THROW(kernels(Isa::Scalar, DType::U32).linear(x.data(), 1, w, y.data()), Error);
  Weight w3 = random_affine(4, 32, 2, 64, 5);
  w3.bits = 3;
  EXPECT_THROW(kernels(Isa::Scalar, DType::U32).linear(x.data(), 1, w3, y.data()), Error);
  EXPECT_THROW(kernels(Isa::Scalar, DType::F32), Error);
}

// Float matrices re-packed as Q8_0: every value within half a step of its
// block's scale, the scale from the block's largest magnitude, and the
// integer-dot linear close to the float product.
TEST(Quant, QuantizeQ8_0FromFloat) {
  const int64_t rows = 7, cols = 96;
  std::vector<float> w = random_x(rows, cols, 11);
  w[5] = 0;  // a block may hold zeros; an all-zero block gets scale 0
  std::fill(w.begin() + 32, w.begin() + 64, 0.0f);
  Weight q = quantize_q8_0(Tensor::from_f32(w, {rows, cols}));
  ASSERT_EQ(q.dtype(), DType::Q8_0);
  ASSERT_EQ(q.rows(), rows);
  ASSERT_EQ(q.cols(), cols);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(q, r, row.data());
    for (int64_t b = 0; b < cols / 32; ++b) {
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(w[static_cast<size_t>(r * cols + b * 32 + i)]));
      for (int i = 0; i < 32; ++i) {
        const size_t at = static_cast<size_t>(r * cols + b * 32 + i);
        EXPECT_NEAR(row[static_cast<size_t>(b * 32 + i)], w[at], amax / 127.0f * 0.51f + 1e-6f) << r << " " << b;
      }
    }
  }
  auto x = random_x(3, cols, 12);
  auto y = run(best_isa(), q, x, 3);
  std::vector<float> ref(static_cast<size_t>(3 * rows), 0.0f);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < rows; ++j)
      for (int64_t k = 0; k < cols; ++k)
        ref[static_cast<size_t>(i * rows + j)] += x[static_cast<size_t>(i * cols + k)] * w[static_cast<size_t>(j * cols + k)];
  EXPECT_LT(rel(y, ref), 0.02);
}

TEST(Quant, QuantizeQ8_0RefusesBadInput) {
  EXPECT_THROW(quantize_q8_0(Tensor::zeros({4, 33}, DType::F32)), Error);     // width not a multiple of 32
  EXPECT_THROW(quantize_q8_0(Tensor::zeros({2, 4, 32}, DType::F32)), Error);  // not a matrix
  EXPECT_THROW(quantize_q8_0(Tensor::zeros({4, 32}, DType::I32)), Error);     // not float
  std::vector<float> w(64, 1.0f);
  w[40] = std::nanf("");
  EXPECT_THROW(quantize_q8_0(Tensor::from_f32(w, {2, 32})), Error);
}
