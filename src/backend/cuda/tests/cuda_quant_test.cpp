// Quantized linear and embedding on CUDA (GPU machine only: ctest label "gpu").
//
// Tolerances:
//  - linear vs quant::reference_linear (the exactly dequantized weights times
//    float32 x, summed in double): rel <= 1e-5 where the GPU keeps x in
//    float32 (prefill's dequantize + cuBLAS; the decode GEMV of the K-quants
//    and affine formats; the int8 threshold out of reach). It dequantizes to the same
//    float values bit for bit, so only float32 summation order differs (about
//    sqrt(k) * 6e-8 ~ 2e-6 for these widths).
//  - linear vs the CPU backend: the CPU rounds x to int8 per block of 32 for
//    every format but 8-bit affine (docs/quantization.md), an error of about
//    0.5% rms on random normal x: rel <= 2e-2. 8-bit affine keeps float32 x on
//    the CPU: rel <= 1e-5.
//  - the decode GEMV of Q8_0 / Q4_0 / Q4_1 (n <= 8 rows) rounds x to int8 as
//    the CPU does, the same int8 values and integer block dots: vs the CPU
//    rel <= 1e-5 (float32 summation order), vs the reference <= 2e-2.
//  - embedding vs the CPU backend: bit-identical (the same dequantization).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/tests/test_util.h"
#include "backend/cuda/tuning.h"
#include "ops/ops.h"
#include "quant/quant.h"
#include "quant/tests/random_weights.h"
#include "tensor/half.h"
#include "util/error.h"

using namespace ingot;
using ingot::cuda_test::randn;
using ingot::cuda_test::rel;
using ingot::quant::testing::random_affine;
using ingot::quant::testing::random_blocks;

namespace {

Weight to_gpu(const Weight& w) {
  Weight g = w;
  g.data = w.data.to(Device::CUDA);
  if (w.scales.defined()) g.scales = w.scales.to(Device::CUDA);
  if (w.biases.defined()) g.biases = w.biases.to(Device::CUDA);
  return g;
}

std::vector<float> reference(const Tensor& x, const Weight& w) {
  const int64_t n = x.numel() / x.dim(-1);
  std::vector<float> y(static_cast<size_t>(n * w.rows()));
  quant::reference_linear(x.data<float>(), n, w, y.data());
  return y;
}

struct Case {
  std::string name;
  Weight w;
  bool cpu_float_x;  // the CPU backend keeps x in float32 (8-bit affine)
};

// Whether the GPU's decode GEMV rounds x to int8 for this weight (by default).
bool gpu_int8_x(const Weight& w) {
  return w.dtype() == DType::Q8_0 || w.dtype() == DType::Q4_0 || w.dtype() == DType::Q4_1;
}

constexpr int64_t kGemvRows = 8;

// Widths: 320 = 10 blocks of 32 (one partial chunk), 2112 = 66 blocks (three
// chunks, the last partial), 512 / 2304 for the 256-value K formats.
std::vector<Case> cases(int64_t rows, bool wide, uint32_t seed = 0) {
  const int64_t k32 = wide ? 2112 : 320, k256 = wide ? 2304 : 512;
  std::vector<Case> c;
  c.push_back({"q8_0", random_blocks(DType::Q8_0, rows, k32, seed + 1), false});
  c.push_back({"q4_0", random_blocks(DType::Q4_0, rows, k32, seed + 2), false});
  c.push_back({"q4_1", random_blocks(DType::Q4_1, rows, k32, seed + 3), false});
  c.push_back({"q4_k", random_blocks(DType::Q4_K, rows, k256, seed + 4), false});
  c.push_back({"q5_k", random_blocks(DType::Q5_K, rows, k256, seed + 5), false});
  c.push_back({"q6_k", random_blocks(DType::Q6_K, rows, k256, seed + 6), false});
  c.push_back({"affine4_g32", random_affine(4, 32, rows, k32, seed + 7), false});
  c.push_back({"affine4_g64_nobias", random_affine(4, 64, rows, wide ? 2048 : 320 * 2, seed + 8, false), false});
  c.push_back({"affine8_g64", random_affine(8, 64, rows, wide ? 2048 : 640, seed + 9), true});
  c.push_back({"affine8_g32", random_affine(8, 32, rows, k32, seed + 10), true});
  return c;
}

class CudaQuant : public ::testing::Test {
 protected:
  // Every launch here is small; the int8-x GEMV takes them all unless a test says otherwise.
  void SetUp() override {
    ASSERT_TRUE(cuda::available()) << "no CUDA device";
    defaults_ = cuda::tuning();
    cuda::Tuning t = defaults_;
    t.qgemv_int8_min_values = 0;
    int8_everywhere_ = std::make_unique<cuda::ScopedTuning>(t);
  }
  void TearDown() override { int8_everywhere_.reset(); }

  cuda::Tuning defaults_;  // the device's row

 private:
  std::unique_ptr<cuda::ScopedTuning> int8_everywhere_;
};

// float_x: the int8 threshold is out of reach (every format keeps float32 x).
void check_linear(const Case& c, const std::vector<int64_t>& ns, bool float_x = false) {
  const Weight wg = to_gpu(c.w);
  const int64_t k = c.w.cols();
  for (int64_t n : ns) {
    Tensor x = randn({n, k}, static_cast<uint32_t>(100 + n));
    std::vector<float> got = ops::linear(x.to(Device::CUDA), wg).to_f32_vector();
    const std::vector<float> cpu = ops::linear(x, c.w).to_f32_vector(), ref = reference(x, c.w);
    if (!float_x && n <= kGemvRows && gpu_int8_x(c.w)) {
      EXPECT_LT(rel(got, cpu), 1e-5) << c.name << " n=" << n << " (int8 x, as the CPU)";
      EXPECT_LT(rel(got, ref), 2e-2) << c.name << " n=" << n;
      EXPECT_GT(rel(got, ref), 1e-5) << c.name << " n=" << n << ": x was not rounded";
    } else {
      EXPECT_LT(rel(got, ref), 1e-5) << c.name << " n=" << n;
      EXPECT_LT(rel(got, cpu), c.cpu_float_x ? 1e-5 : 2e-2) << c.name << " n=" << n;
    }
  }
}

}  // namespace

// Every format at decode (GEMV) and prefill (dequantize + cuBLAS) row counts;
// rows of one chunk take a warp each.
TEST_F(CudaQuant, LinearMatchesReferenceAndCpu) {
  for (const Case& c : cases(70, false)) check_linear(c, {1, 3, 8, 64});
}

// Long rows (several chunks shared by a block's warps) and many rows (a warp per row).
TEST_F(CudaQuant, LinearWideAndTallShapes) {
  for (const Case& c : cases(40, true)) check_linear(c, {1, 8, 9});
  for (const Case& c : cases(4100, false)) check_linear(c, {1, 5});
}

// With the int8 threshold out of reach, Q8_0 / Q4_0 / Q4_1 decode keeps float32 x (the float kernel).
TEST_F(CudaQuant, FloatActivationGemvOnRequest) {
  cuda::Tuning t = defaults_;
  t.qgemv_int8_min_values = std::numeric_limits<int64_t>::max();
  cuda::ScopedTuning float_x(t);
  for (const Case& c : cases(70, false))
    if (gpu_int8_x(c.w)) check_linear(c, {1, 3, 8}, true);
}

// By default a launch over fewer weight values than the threshold keeps float32 x.
TEST_F(CudaQuant, SmallWeightsKeepFloatXByDefault) {
  cuda::ScopedTuning defaults(defaults_);
  for (const Case& c : cases(70, false))
    if (gpu_int8_x(c.w)) check_linear(c, {1, 8}, true);
}

// Rows whose int8 x (8 rows of 36 864 values) would not fit one block's
// shared memory take the float kernel; one row of them still fits.
TEST_F(CudaQuant, WideRowsBeyondSharedMemoryKeepFloatX) {
  const Weight w = random_blocks(DType::Q4_0, 12, 36864, 21), wg = to_gpu(w);
  for (int64_t n : {1, 8}) {
    Tensor x = randn({n, 36864}, static_cast<uint32_t>(22 + n));
    std::vector<float> got = ops::linear(x.to(Device::CUDA), wg).to_f32_vector();
    if (n == 1)
      EXPECT_LT(rel(got, ops::linear(x, w).to_f32_vector()), 1e-5) << "int8 x";
    else
      EXPECT_LT(rel(got, reference(x, w)), 1e-5) << "float x";
  }
}

// A 3-D input, a bias, and rows that start at every offset mod 16 (Q4_1 rows of
// 60 bytes, a slice starting at row 1): the staging handles unaligned rows.
TEST_F(CudaQuant, UnalignedRowsBiasAndBatchedInput) {
  Weight full = random_blocks(DType::Q4_1, 41, 96, 11);
  Weight w;
  w.data = full.data.slice(0, 1, 41);
  Weight wg = to_gpu(full);
  wg.data = wg.data.slice(0, 1, 41);
  Tensor bias = randn({40}, 12);
  for (int64_t n : {1, 4, 8, 12}) {
    Tensor x = randn({2, n, 96}, static_cast<uint32_t>(13 + n));
    Tensor y = ops::linear(x.to(Device::CUDA), wg, &bias);
    ASSERT_EQ(y.shape().vec(), (std::vector<int64_t>{2, n, 40}));
    if (2 * n <= kGemvRows) {  // the int8-x GEMV: as the CPU
      EXPECT_LT(rel(y.to_f32_vector(), ops::linear(x, w, &bias).to_f32_vector()), 1e-5) << n;
      continue;
    }
    std::vector<float> want = reference(x, w);
    for (int64_t i = 0; i < 2 * n; ++i)
      for (int64_t j = 0; j < 40; ++j) want[static_cast<size_t>(i * 40 + j)] += bias.data<float>()[j];
    EXPECT_LT(rel(y.to_f32_vector(), want), 1e-5) << n;
  }
}

// A row's result does not depend on which rows it is computed with (the GEMV
// runs each activation row through the same sums).
TEST_F(CudaQuant, GemvRowsAreBatchInvariant) {
  Weight w = to_gpu(random_blocks(DType::Q4_0, 300, 1024, 14));
  Tensor x = randn({8, 1024}, 15).to(Device::CUDA);
  std::vector<float> all = ops::linear(x, w).to_f32_vector();
  for (int64_t n = 1; n <= 8; ++n) {
    std::vector<float> part = ops::linear(x.slice(0, 0, n).contiguous(), w).to_f32_vector();
    EXPECT_EQ(part, std::vector<float>(all.begin(), all.begin() + n * 300)) << n;
  }
}

TEST_F(CudaQuant, EmbeddingEqualsCpu) {
  std::vector<int32_t> idv = {0, 5, 69, 5, 31};
  Tensor ids = Tensor::from_i32(idv, {5});
  for (const Case& c : cases(70, false)) {
    const Weight wg = to_gpu(c.w);
    std::vector<float> cpu = ops::embedding(c.w, ids).to_f32_vector();
    EXPECT_EQ(ops::embedding(wg, ids).to_f32_vector(), cpu) << c.name;
    EXPECT_EQ(ops::embedding(wg, ids.to(Device::CUDA)).to_f32_vector(), cpu) << c.name << " (device ids)";
  }
}

TEST_F(CudaQuant, BadShapesAndFormatsFailClearly) {
  Weight q = to_gpu(random_blocks(DType::Q4_0, 8, 64, 16));
  // Input width differs from the weight's.
  EXPECT_THROW(ops::linear(randn({1, 96}, 17).to(Device::CUDA), q), Error);
  EXPECT_THROW(ops::linear(randn({20, 32}, 17).to(Device::CUDA), q), Error);
  // Token ids outside the table.
  EXPECT_THROW(ops::embedding(q, Tensor::from_i32({8}, {1})), Error);
  EXPECT_THROW(ops::embedding(q, Tensor::from_i32({-1}, {1})), Error);
  // Affine: unsupported bit widths, group sizes, missing scales.
  Weight a = random_affine(4, 32, 8, 64, 18);
  Weight bad_bits = to_gpu(a);
  bad_bits.bits = 2;
  EXPECT_THROW(ops::linear(randn({1, bad_bits.cols()}, 19).to(Device::CUDA), bad_bits), Error);
  Weight bad_group = to_gpu(a);
  bad_group.group_size = 48;
  EXPECT_THROW(ops::linear(randn({1, 64}, 19).to(Device::CUDA), bad_group), Error);
  Weight no_scales = to_gpu(a);
  no_scales.scales = Tensor();
  EXPECT_THROW(ops::linear(randn({1, 64}, 19).to(Device::CUDA), no_scales), Error);
  // A quantized weight left on the host.
  EXPECT_THROW(ops::linear(randn({1, 64}, 19).to(Device::CUDA), random_blocks(DType::Q8_0, 8, 64, 20)), Error);
}

// The fused decode forms (residual epilogue, gate/up with SwiGLU, q/k/v in one
// launch) equal the separate ops bit for bit, for every format, in both row
// layouts (one chunk per row: a warp each; wide rows: a block each).
TEST_F(CudaQuant, FusedDecodeFormsAreExact) {
  for (bool wide : {false, true}) {
    const int64_t m = wide ? 40 : 70, m_kv = wide ? 24 : 30;
    std::vector<Case> a = cases(m, wide), b = cases(m, wide, 100), kv = cases(m_kv, wide, 200);
    for (size_t i = 0; i < a.size(); ++i) {
      const Weight wa = to_gpu(a[i].w), wb = to_gpu(b[i].w), wk = to_gpu(kv[i].w);
      const std::string name = a[i].name + (wide ? " wide" : "");
      for (int64_t n : {1, 3, 8}) {
        Tensor x = randn({n, a[i].w.cols()}, static_cast<uint32_t>(300 + n)).to(Device::CUDA);
        Tensor res = randn({n, m}, static_cast<uint32_t>(400 + n)).to(Device::CUDA);
        const Tensor ya = ops::linear(x, wa), yb = ops::linear(x, wb), yk = ops::linear(x, wk);
        EXPECT_EQ(ops::linear_residual(x, wa, nullptr, res).to_f32_vector(), ops::add(res, ya).to_f32_vector())
            << name << " n=" << n;
        EXPECT_EQ(ops::glu_linear(GluOp::SwiGlu, x, wa, wb).to_f32_vector(), ops::swiglu(ya, yb).to_f32_vector())
            << name << " n=" << n;
        std::vector<Tensor> many = ops::linear_many(x, {&wa, &wk, &wb});
        ASSERT_EQ(many.size(), 3u);
        EXPECT_EQ(many[0].to_f32_vector(), ya.to_f32_vector()) << name << " n=" << n;
        EXPECT_EQ(many[1].to_f32_vector(), yk.to_f32_vector()) << name << " n=" << n;
        EXPECT_EQ(many[2].to_f32_vector(), yb.to_f32_vector()) << name << " n=" << n;
      }
    }
  }
}
