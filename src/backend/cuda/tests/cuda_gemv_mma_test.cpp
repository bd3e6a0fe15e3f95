// The tensor-core decode products (gemv_mma.cu) against the CUDA-core GEMV and
// cuBLAS, and the property the engine relies on: an activation row's result
// does not depend on the rows beside it in the launch (GPU machine only).
#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/tests/test_util.h"
#include "backend/cuda/tuning.h"
#include "ops/ops.h"

using namespace ingot;
using ingot::cuda_test::randn;
using ingot::cuda_test::rel;

namespace {

Tensor gpu(const Tensor& t) { return t.to(Device::CUDA); }

Weight bf16_weight(int64_t m, int64_t k, uint32_t seed) {
  Weight w;
  w.data = gpu(randn({m, k}, seed, 0.05f).to(DType::BF16));
  return w;
}

std::vector<float> first_rows(const Tensor& t, int64_t n) { return t.slice(0, 0, n).contiguous().to_f32_vector(); }

// Every bf16 decode product of 1..64 rows on the tensor cores, or none.
cuda::Tuning with_mma(bool on) {
  cuda::Tuning t = cuda::tuning();
  t.mma_gemv_min_rows = on ? 1 : cuda::kGemvMmaMaxRows + 1;
  t.mma_gemv_max_rows = cuda::kGemvMmaMaxRows;
  return t;
}

class CudaGemvMma : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(cuda::available()) << "no CUDA device"; }
};

// Shapes: a partial last tile (70, 4101 rows), a width that is not a whole
// number of 32-column chunks (4104), few chunks per warp (64), long rows (8192).
const std::vector<std::pair<int64_t, int64_t>> kShapes = {{70, 64}, {70, 4104}, {4101, 512}, {2048, 2048}, {96, 8192}};
const std::vector<int64_t> kRows = {1, 2, 5, 8, 9, 16, 17, 33, 64};

}  // namespace

// Against the CUDA-core GEMV (up to 8 rows) and cuBLAS (more): the same
// products of bf16-rounded x, summed in another order.
TEST_F(CudaGemvMma, MatchesTheOtherKernels) {
  for (auto [m, k] : kShapes) {
    const Weight w = bf16_weight(m, k, 80);
    const Tensor x = gpu(randn({64, k}, 81));
    for (int64_t n : kRows) {
      const Tensor xn = x.slice(0, 0, n).contiguous();
      Tensor ref, got;
      {
        cuda::ScopedTuning off(with_mma(false));
        ref = ops::linear(xn, w);
      }
      {
        cuda::ScopedTuning on(with_mma(true));
        got = ops::linear(xn, w);
      }
      EXPECT_LT(rel(got.to(Device::CPU), ref.to(Device::CPU)), 1e-5) << m << "x" << k << " n " << n;
    }
  }
}

// The first n rows of a 64-row launch equal an n-row launch bit for bit, in
// every form: plain, residual, SwiGLU and q/k/v in one launch.
TEST_F(CudaGemvMma, RowsDoNotDependOnTheirBatch) {
  cuda::ScopedTuning on(with_mma(true));
  for (auto [m, k] : kShapes) {
    const Weight w = bf16_weight(m, k, 82), g = bf16_weight(m, k, 83), u = bf16_weight(m, k, 84);
    const Weight kv = bf16_weight(m / 3 + 1, k, 85);
    const Tensor x64 = gpu(randn({64, k}, 86)), res64 = gpu(randn({64, m}, 87));
    const Tensor plain = ops::linear(x64, w), resid = ops::linear_residual(x64, w, nullptr, res64);
    const Tensor glu = ops::glu_linear(GluOp::SwiGlu, x64, g, u);
    const std::vector<Tensor> many = ops::linear_many(x64, {&w, &kv});
    for (int64_t n : kRows) {
      const Tensor x = x64.slice(0, 0, n).contiguous(), res = res64.slice(0, 0, n).contiguous();
      EXPECT_EQ(ops::linear(x, w).to_f32_vector(), first_rows(plain, n)) << m << " n " << n;
      EXPECT_EQ(ops::linear_residual(x, w, nullptr, res).to_f32_vector(), first_rows(resid, n)) << m << " n " << n;
      EXPECT_EQ(ops::glu_linear(GluOp::SwiGlu, x, g, u).to_f32_vector(), first_rows(glu, n)) << m << " n " << n;
      const std::vector<Tensor> mn = ops::linear_many(x, {&w, &kv});
      ASSERT_EQ(mn.size(), 2u);
      EXPECT_EQ(mn[0].to_f32_vector(), first_rows(many[0], n)) << m << " n " << n;
      EXPECT_EQ(mn[1].to_f32_vector(), first_rows(many[1], n)) << m << " n " << n;
    }
  }
}

// The fused forms equal the separate ops bit for bit: residual add, SwiGLU,
// and each matrix of a q/k/v launch (of different shapes) alone.
TEST_F(CudaGemvMma, FusedFormsEqualSeparateOps) {
  cuda::ScopedTuning on(with_mma(true));
  for (auto [mq, mkv, k] : {std::tuple<int64_t, int64_t, int64_t>{2048, 512, 2048}, {97, 33, 4096}, {4105, 17, 512}}) {
    const Weight wq = bf16_weight(mq, k, 90), wk = bf16_weight(mkv, k, 91), wv = bf16_weight(mkv, k, 92);
    const Weight g = bf16_weight(mq, k, 93), u = bf16_weight(mq, k, 94);
    for (int64_t n : {1, 8, 24, 64}) {
      const Tensor x = gpu(randn({n, k}, 95)), res = gpu(randn({n, mq}, 96));
      EXPECT_EQ(ops::linear_residual(x, wq, nullptr, res).to_f32_vector(),
                ops::add(res, ops::linear(x, wq)).to_f32_vector())
          << mq << " n " << n;
      EXPECT_EQ(ops::glu_linear(GluOp::SwiGlu, x, g, u).to_f32_vector(),
                ops::swiglu(ops::linear(x, g), ops::linear(x, u)).to_f32_vector())
          << mq << " n " << n;
      const std::vector<Tensor> y = ops::linear_many(x, {&wq, &wk, &wv});
      ASSERT_EQ(y.size(), 3u);
      EXPECT_EQ(y[0].to_f32_vector(), ops::linear(x, wq).to_f32_vector()) << mq << " n " << n;
      EXPECT_EQ(y[1].to_f32_vector(), ops::linear(x, wk).to_f32_vector()) << mq << " n " << n;
      EXPECT_EQ(y[2].to_f32_vector(), ops::linear(x, wv).to_f32_vector()) << mq << " n " << n;
    }
  }
}

// Widths the kernel does not take (not a multiple of 8) and more than 64 rows
// fall back to cuBLAS with the same results as with the kernel off.
TEST_F(CudaGemvMma, ShapesItDoesNotTakeFallBack) {
  for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{40, 60, 4}, {40, 256, 65}}) {
    const Weight w = bf16_weight(m, k, 97);
    const Tensor x = gpu(randn({n, k}, 98));
    Tensor on, off;
    {
      cuda::ScopedTuning t(with_mma(true));
      on = ops::linear(x, w);
    }
    {
      cuda::ScopedTuning t(with_mma(false));
      off = ops::linear(x, w);
    }
    EXPECT_EQ(on.to_f32_vector(), off.to_f32_vector()) << m << "x" << k << " n " << n;
  }
}
