// The replayed decode step captured and replayed on CUDA (GPU machine only:
// ctest label "gpu").
#include "stepgraph/tests/decode_steps_cases.h"

using namespace ingot;
using namespace ingot::stepgraph_testing;

TEST(DecodeStepsCuda, EqualPlainStepsOverSharedAndPrivateBlocks) {
  expect_replayed_steps_equal_plain(Device::CUDA, true);
}

TEST(DecodeStepsCuda, EqualPlainStepsOverKv8Blocks) {
  expect_replayed_steps_equal_plain(Device::CUDA, true, kv::StoreKind::Kv8);
}

TEST(DecodeStepsCuda, RefusesStoresItCannotRead) { expect_refused_stores(Device::CUDA); }
