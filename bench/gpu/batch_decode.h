// Decode of N sequences stepped together (gpu_decode --batch N): plain
// batched forward() steps and GreedyStepGraph replay, as aggregate tok/s
// against a roofline of the weights plus every sequence's K/V per step.
#pragma once
#include <cstdint>
#include <string>

#include "models/model.h"

namespace ingot::bench {

struct BatchDecodeArgs {
  int64_t batch = 2;
  int64_t context = 128;  // tokens prefilled into each sequence before decode
  int64_t tg = 128;       // decode steps
  int64_t reps = 3;
  std::string kv = "contiguous";
  double copy_bandwidth = 0;  // device read+write bytes per second
};

// Largest --batch accepted: far past any bucket the engine would run, small
// enough that per-sequence host bookkeeping stays trivial.
constexpr int64_t kMaxBatch = 1024;

// Fails with a clear error when the sequences' K/V would not fit on the device.
void check_batch_fits(const Model& m, const BatchDecodeArgs& a);
void run_batch_decode(Model& m, const BatchDecodeArgs& a);

}  // namespace ingot::bench
