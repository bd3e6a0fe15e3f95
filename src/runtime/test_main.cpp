// gtest entry point for every test binary: backends installed first.
#include <gtest/gtest.h>

#include "runtime/runtime.h"

int main(int argc, char** argv) {
  ingot::runtime::init_backends();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
