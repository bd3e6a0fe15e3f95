// The replayed decode step's host side on the CPU, where the step's forward
// pass runs directly (nothing is captured).
#include "stepgraph/tests/decode_steps_cases.h"

using namespace ingot;
using namespace ingot::stepgraph_testing;

TEST(DecodeSteps, EqualPlainStepsOverSharedAndPrivateBlocks) { expect_replayed_steps_equal_plain(Device::CPU, false); }

TEST(DecodeSteps, RefusesStoresItCannotRead) { expect_refused_stores(Device::CPU); }

TEST(DecodeSteps, KeyBuckets) {
  EXPECT_EQ(DecodeSteps::key_bucket(1), 512);
  EXPECT_EQ(DecodeSteps::key_bucket(512), 512);
  EXPECT_EQ(DecodeSteps::key_bucket(513), 1024);
  EXPECT_EQ(DecodeSteps::key_bucket(5000), 8192);
}
