// The plan that decides which LoRA batches the CUDA low-rank kernel takes
// (host logic: runs without a GPU).
#include "backend/cuda/tests/low_rank_cases.h"

using namespace ingot;
using namespace ingot::low_rank_test;

TEST(LowRankPlan, TakesDecodeBatchesOfDistinctRows) {
  std::vector<Adapter> ads = {adapter(8, kK, kM, DType::BF16, 1), adapter(16, kK, kM, DType::BF16, 3)};
  std::vector<LowRankGroup> groups = {{&ads[0].a, &ads[0].b, {0, 3, 5}}, {&ads[1].a, &ads[1].b, {1, 2}}};
  cuda::LowRankJobs jobs;
  DType dt = DType::F32;
  ASSERT_TRUE(cuda::plan_low_rank(6, kK, kM, groups, Device::CPU, &jobs, &dt));
  EXPECT_EQ(dt, DType::BF16);
  ASSERT_EQ(jobs.count, 5);
  EXPECT_EQ(jobs.row[0], 0);
  EXPECT_EQ(jobs.row[3], 1);
  EXPECT_EQ(jobs.adapter_of[2], 0);
  EXPECT_EQ(jobs.adapter_of[4], 1);
  EXPECT_EQ(jobs.adapter[1].rank, 16);
  // One group with no row list covers every row.
  ASSERT_TRUE(cuda::plan_low_rank(4, kK, kM, {{&ads[0].a, &ads[0].b, {}}}, Device::CPU, &jobs, &dt));
  EXPECT_EQ(jobs.count, 4);
}

TEST(LowRankPlan, LeavesTheRestToTheComposedPath) {
  std::vector<Adapter> ads = {adapter(8, kK, kM, DType::BF16, 1), adapter(8, kK, kM, DType::F32, 3),
                              adapter(cuda::kLowRankMaxRank + 1, kK, kM, DType::BF16, 5)};
  cuda::LowRankJobs jobs;
  DType dt = DType::F32;
  auto plan = [&](int64_t rows, const std::vector<LowRankGroup>& g, Device d = Device::CPU) {
    return cuda::plan_low_rank(rows, kK, kM, g, d, &jobs, &dt);
  };
  EXPECT_FALSE(plan(6, {{&ads[0].a, &ads[0].b, {0, 1}}, {&ads[0].a, &ads[0].b, {1, 2}}}));  // row 1 twice
  EXPECT_FALSE(plan(6, {{&ads[0].a, &ads[0].b, {0}}, {&ads[1].a, &ads[1].b, {1}}}));        // two dtypes
  EXPECT_FALSE(plan(6, {{&ads[2].a, &ads[2].b, {0}}}));                                       // rank too high
  EXPECT_FALSE(plan(cuda::kLowRankMaxJobs + 1, {{&ads[0].a, &ads[0].b, {}}}));              // prefill-sized
  EXPECT_FALSE(plan(6, {{&ads[0].a, &ads[0].b, {6}}}));                                       // row out of range
  EXPECT_FALSE(plan(6, {{&ads[0].a, &ads[0].b, {0}}}, Device::CUDA));                         // weights elsewhere
  EXPECT_FALSE(cuda::plan_low_rank(6, kK + 1, kM, {{&ads[0].a, &ads[0].b, {0}}}, Device::CPU, &jobs, &dt));  // shape
  EXPECT_FALSE(plan(6, {}));
  // Widths the kernel does not read in whole 16-byte pieces.
  const Adapter odd = adapter(8, kK + 4, kM + 4, DType::BF16, 7);
  EXPECT_FALSE(cuda::plan_low_rank(6, kK + 4, kM + 4, {{&odd.a, &odd.b, {0}}}, Device::CPU, &jobs, &dt));
  const Adapter even = adapter(8, kK + 8, kM + 8, DType::BF16, 9);
  EXPECT_TRUE(cuda::plan_low_rank(6, kK + 8, kM + 8, {{&even.a, &even.b, {0}}}, Device::CPU, &jobs, &dt));
}
