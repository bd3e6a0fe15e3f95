// Random-weight checkpoints written by tests (llama layout, any shape).
#pragma once
#include <cstdint>
#include <string>

namespace ingot::testing {

struct LlamaShape {
  int64_t vocab = 64, hidden = 32, inter = 64, layers = 2, heads = 2, kv_heads = 1, head_dim = 16;
  int64_t max_pos = 2048;
  bool tied = false;
  bool bf16 = false;
};

// Writes config.json + model.safetensors (streamed: large shapes never sit in
// memory) into `dir`, weights uniform in ±scale from a fixed seed.
void write_random_llama(const std::string& dir, const LlamaShape& s, uint64_t seed = 1);

}  // namespace ingot::testing
