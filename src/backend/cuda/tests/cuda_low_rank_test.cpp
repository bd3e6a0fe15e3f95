// The CUDA low_rank_add (LoRA updates of a decode-sized batch in one launch)
// against the CPU backend's (GPU machine only: ctest label "gpu").
#include "backend/cuda/tests/low_rank_cases.h"

using namespace ingot;
using namespace ingot::low_rank_test;

class CudaLowRank : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cuda::available()) << "no CUDA device";
  }
};

// Three adapters over some rows of a 12-row batch (the rest untouched), f32 and
// bf16 weights, against the CPU backend.
TEST_F(CudaLowRank, AdapterGroupsEqualTheCpu) {
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    std::vector<Adapter> ads = {adapter(8, kK, kM, dt, 11, Device::CUDA), adapter(16, kK, kM, dt, 13, Device::CUDA),
                                adapter(64, kK, kM, dt, 15, Device::CUDA)};
    const std::vector<std::vector<int64_t>> rows = {{0, 3, 5}, {1, 2, 7, 11}, {4}};
    const Tensor x = randn({12, kK}, 21), y = randn({12, kM}, 22);
    const std::vector<float> want = on_cpu(x, y, ads, rows), got = on_gpu(x, y, ads, rows);
    EXPECT_LT(rel(got, want), 1e-5) << dtype_name(dt);
    const std::vector<float> y0 = y.to_f32_vector();
    for (int64_t r : {6, 8, 9, 10})
      for (int64_t o = 0; o < kM; ++o) ASSERT_EQ(got[r * kM + o], y0[r * kM + o]) << "row " << r << " changed";
  }
}

// A row's update does not depend on the rows beside it; a prefill-sized batch
// takes the composed path and still equals the CPU, within the rounding of its
// cuBLAS products (x and the shrink go in as the adapter's bf16: 8.6e-4 on the
// H100).
TEST_F(CudaLowRank, RowsAloneAndPrefillBatches) {
  std::vector<Adapter> ads = {adapter(16, kK, kM, DType::BF16, 31, Device::CUDA)};
  const Tensor x = randn({8, kK}, 32), y = randn({8, kM}, 33);
  const std::vector<float> batch = on_gpu(x, y, ads, {{}});
  for (int64_t r : {0, 5}) {
    const std::vector<float> alone = on_gpu(x.slice(0, r, r + 1), y.slice(0, r, r + 1), ads, {{}});
    for (int64_t o = 0; o < kM; ++o) ASSERT_EQ(alone[o], batch[r * kM + o]) << r;
  }
  const Tensor xp = randn({100, kK}, 34), yp = randn({100, kM}, 35);
  EXPECT_LT(rel(on_gpu(xp, yp, ads, {{}}), on_cpu(xp, yp, ads, {{}})), 4e-3);
}

// Model-sized widths: several 256-piece passes over k (the last one partial),
// several output slices, a rank that ends inside a 16-row pass.
TEST_F(CudaLowRank, LongRowsAndManySlices) {
  constexpr int64_t k = 4104, m = 8200;
  for (DType dt : {DType::BF16, DType::F32}) {
    std::vector<Adapter> ads = {adapter(24, k, m, dt, 41, Device::CUDA), adapter(16, k, m, dt, 43, Device::CUDA)};
    const Tensor x = randn({5, k}, 44), y = randn({5, m}, 45);
    const std::vector<std::vector<int64_t>> rows = {{0, 2, 3}, {4}};
    EXPECT_LT(rel(on_gpu(x, y, ads, rows), on_cpu(x, y, ads, rows)), 1e-5) << dtype_name(dt);
  }
}
