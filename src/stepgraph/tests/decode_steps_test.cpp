// The replayed decode step's host side on the CPU, where the step's forward
// pass runs directly (nothing is captured).
#include "stepgraph/tests/decode_steps_cases.h"

using namespace ingot;
using namespace ingot::stepgraph_testing;

TEST(DecodeSteps, EqualPlainStepsOverSharedAndPrivateBlocks) { expect_replayed_steps_equal_plain(Device::CPU, false); }

TEST(DecodeSteps, EqualPlainStepsOverKv8Blocks) {
  expect_replayed_steps_equal_plain(Device::CPU, false, kv::StoreKind::Kv8);
}

TEST(DecodeSteps, RefusesStoresItCannotRead) { expect_refused_stores(Device::CPU); }

TEST(DecodeSteps, BatchBuckets) {
  const std::vector<int64_t> want = {1, 2, 4, 4, 8, 8, 8, 8, 16};
  for (int64_t n = 1; n <= 9; ++n) EXPECT_EQ(DecodeSteps::batch_bucket(n), want[static_cast<size_t>(n - 1)]) << n;
  EXPECT_EQ(DecodeSteps::batch_bucket(57), 64);
  EXPECT_EQ(DecodeSteps::batch_bucket(64), 64);
}

TEST(DecodeSteps, KeyBuckets) {
  EXPECT_EQ(DecodeSteps::key_bucket(1), 512);
  EXPECT_EQ(DecodeSteps::key_bucket(512), 512);
  EXPECT_EQ(DecodeSteps::key_bucket(513), 1024);
  EXPECT_EQ(DecodeSteps::key_bucket(5000), 8192);
}
